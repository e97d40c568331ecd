"""DeepSeek's DSML call blocks (private), shared by ``deepseek_v32`` and ``deepseek_v4``::

    <｜DSML｜function_calls>                     (V4: <｜DSML｜tool_calls>)
    <｜DSML｜invoke name="NAME">
    <｜DSML｜parameter name="message" string="true">Gather wood</｜DSML｜parameter>
    <｜DSML｜parameter name="count" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

The ``string`` attribute carries the type: ``true`` keeps the text as a string, ``false`` means
the text is JSON (a number, boolean, null, array or object). Nothing is escaped: a value cannot
hold ``</｜DSML｜parameter>`` and a name cannot hold ``"``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._values import TextValue
from leader_eval.types import ToolCall

D = "\uff5cDSML\uff5c"  # fullwidth bars, as in DeepSeek's other special tokens
INVOKE_CLOSE = f"</{D}invoke>"
PARAM_CLOSE = f"</{D}parameter>"
_INVOKE_STRICT = re.compile(f'<{D}invoke name="([^"<>]{{1,256}})">')
_INVOKE_LENIENT = re.compile(rf"""<{D}invoke\s+name\s*=\s*["']?([^"'<>]{{1,256}}?)["']?\s*>""")
_PARAM_STRICT = re.compile(f'<{D}parameter name="([^"<>]{{1,256}})" string="(true|false)">')
_PARAM_LENIENT = re.compile(
    rf"""<{D}parameter\s+name\s*=\s*["']?([^"'<>\s]{{1,256}})["']?(?:\s+string\s*=\s*["']?(true|false)["']?)?\s*>"""
)


def _value(raw: str, is_string: str | None, strict: bool, at: int) -> Any:
    if is_string == "true":
        return raw
    if is_string is None:  # lenient only: no attribute, type it by the schema
        return TextValue(raw)
    try:
        return _scan.STRICT_DECODER.decode(raw.strip())
    except (ValueError, RecursionError, MemoryError):
        if strict:
            raise _scan.Fail(f'parameter at offset {at} has string="false" but its value is not JSON') from None
        return TextValue(raw)


def _invoke(
    text: str, pos: int, hi: int, *, strict: bool, budget: _scan.Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """One ``<｜DSML｜invoke>`` at ``pos``: (name, arguments, end)."""
    m = (_INVOKE_STRICT if strict else _INVOKE_LENIENT).match(text, pos)
    if not m:
        raise _scan.Fail(f'expected <{D}invoke name="..."> at offset {pos}')
    name = m.group(1) if strict else m.group(1).strip()
    if not name:
        raise _scan.Fail(f"empty tool name at offset {pos}")
    params = _PARAM_STRICT if strict else _PARAM_LENIENT
    args: dict[str, Any] = {}
    at = _scan.skip_ws(text, m.end())
    while p := params.match(text, at):
        end = text.find(PARAM_CLOSE, p.end(), hi)
        if budget is not None and not budget.spend((hi if end == -1 else end) - p.end()):
            raise _scan.Fail("lenient scan budget spent")
        if end == -1:
            raise _scan.Fail(f"parameter at offset {at} is not closed")
        key = p.group(1)
        if strict and key in args:
            raise _scan.Fail(f"parameter {key!r} given twice")
        args[key] = _value(text[p.end() : end], p.group(2), strict, at)
        at = _scan.skip_ws(text, end + len(PARAM_CLOSE))
    if text.startswith(INVOKE_CLOSE, at):
        return name, args, at + len(INVOKE_CLOSE)
    if strict or not args:
        raise _scan.Fail(f"expected <{D}parameter ...> or {INVOKE_CLOSE} at offset {at}")
    return name, args, at


def make(name: str, block: str, other: str, markers: tuple[str, ...]) -> ToolCallProtocol:
    """The protocol whose calls sit in ``<｜DSML｜{block}>`` ... ``</｜DSML｜{block}>`` (``other``:
    the other version's block, which strict names when it finds it)."""
    open_tag, close_tag, other_tag = f"<{D}{block}>", f"</{D}{block}>", f"<{D}{other}>"

    def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
        if not text.startswith(open_tag, lo):
            if text.startswith(other_tag, lo):
                raise _scan.Fail(f"calls opened with {other_tag}, expected {open_tag}")
            raise _scan.Fail(_scan.NO_CALL_ERROR)
        calls: list[ToolCall] = []
        spans: list[tuple[int, int]] = []
        pos = lo
        while pos < hi:
            if not text.startswith(open_tag, pos):
                raise _scan.Fail(f"expected {open_tag} at offset {pos}")
            block_start, n_before = pos, len(calls)
            pos = _scan.skip_ws(text, pos + len(open_tag))
            while text.startswith(f"<{D}invoke", pos):
                if len(calls) == _scan.MAX_CALLS:
                    raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
                tool, args, end = _invoke(text, pos, hi, strict=True)
                calls.append(ToolCall(tool, args, name, (pos, end), text[pos:end]))
                pos = _scan.skip_ws(text, end)
            if len(calls) == n_before:
                raise _scan.Fail(f'expected <{D}invoke name="..."> at offset {pos}')
            if not text.startswith(close_tag, pos):
                raise _scan.Fail(f"expected <{D}invoke or {close_tag} at offset {pos}")
            pos += len(close_tag)
            spans.append((block_start, pos))
            pos = _scan.skip_ws(text, pos)
        return calls, spans

    def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
        text, hi, budget = scan.text, len(scan.text), scan.budget()
        for s in _scan.find_all(text, f"<{D}invoke", scan.start):
            if budget.spent:
                return
            try:
                tool, args, e = _invoke(text, s, hi, strict=False, budget=budget)
            except _scan.Fail:
                budget.fail()
                continue
            yield ToolCall(tool, args, name, (s, e), text[s:e])

    return ToolCallProtocol(
        name=name,
        strict=strict,
        lenient=lenient,
        opening=re.escape(open_tag),
        closing=(f"</{D}(?:{block}|invoke|parameter)>",),
        inner=(f'<{D}invoke name="[^"<>\\n]{{0,256}}">?', f'<{D}parameter name="[^"<>\\n]{{0,256}}"[^<>\\n]{{0,32}}>'),
        template_markers=markers,
        lenient_needs=(f"<{D}invoke",),
    )
