"""DeepSeek's tool-call sections of full-width special tokens, in two variants.

``deepseek_v3`` (DeepSeek V3 / R1 and the R1-Distill templates): a type, then the name, then the
arguments in a fenced JSON block::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {...}
    ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>

``deepseek_v31`` (DeepSeek V3.1): the name before the separator, the JSON right after it::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>

Both carry JSON arguments. Only whitespace may sit between the tokens, the fence and the calls
(the R1 templates put a newline between calls); the section must be closed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall, json_type

CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
SEP = "<\uff5ctool\u2581sep\uff5c>"
FENCE_OPEN, FENCE_CLOSE = "```json", "```"

# A tool name: no whitespace, no markup, no fence; bounded so a match is linear and short.
_NAME = r"[^\s<>`{\uff5c]{1,256}"
# deepseek_v3: the type (always "function" in the templates), the name, the fence opening
_V3_HEAD = re.compile(r"function" + re.escape(SEP) + r"(" + _NAME + r")\s*```json")
# deepseek_v31: the name, the separator
_V31_HEAD = re.compile(r"(" + _NAME + r")" + re.escape(SEP))
_FENCE_END = re.compile(r"\s*```")
# lenient: any type word (or none) before the separator; the fence optional
_LENIENT_V3 = re.compile(r"(?:[a-z]{1,32})?" + re.escape(SEP) + r"(" + _NAME + r")\s*(?:```(?:json)?)?\s*")
_LENIENT_V31 = re.compile(r"(" + _NAME + r")" + re.escape(SEP) + r"\s*(?=[{\[\"])")

_TOKENS = tuple(re.escape(t) for t in (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP))


def _arguments(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _scan.Fail(f"arguments must be a JSON object, got {json_type(value)}")
    return value


def _v3_call(text: str, pos: int, memo: _scan.Memo | None) -> tuple[str, dict[str, Any], int]:
    m = _V3_HEAD.match(text, pos)
    if not m:
        raise _scan.Fail(f"expected function{SEP}NAME and a ```json fence at offset {pos}")
    value, end = _scan.decode(text, _scan.skip_ws(text, m.end()), memo)
    args = _arguments(value)
    f = _FENCE_END.match(text, end)
    if not f:
        raise _scan.Fail(f"expected the closing ``` fence at offset {end}")
    return m.group(1), args, f.end()


def _v31_call(text: str, pos: int, memo: _scan.Memo | None) -> tuple[str, dict[str, Any], int]:
    m = _V31_HEAD.match(text, pos)
    if not m:
        raise _scan.Fail(f"expected NAME{SEP} at offset {pos}")
    if _V3_HEAD.match(text, pos):
        raise _scan.Fail(f"expected NAME{SEP}{{...}} at offset {pos}, found the V3/R1 shape function{SEP}NAME ```json")
    value, end = _scan.decode(text, _scan.skip_ws(text, m.end()), memo)
    return m.group(1), _arguments(value), end


def _strict(name: str, read_call: Callable[[str, int, _scan.Memo | None], tuple[str, dict[str, Any], int]]) -> Any:
    def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
        if not text.startswith(CALLS_BEGIN, lo):
            if text.startswith(CALL_BEGIN, lo):
                raise _scan.Fail(f"tool call without the {CALLS_BEGIN} section opening at offset {lo}")
            raise _scan.Fail(_scan.NO_CALL_ERROR)
        calls: list[ToolCall] = []
        pos = _scan.skip_ws(text, lo + len(CALLS_BEGIN))
        while text.startswith(CALL_BEGIN, pos):
            if len(calls) == _scan.MAX_CALLS:
                raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
            start = pos
            fn, args, end = read_call(text, _scan.skip_ws(text, pos + len(CALL_BEGIN)), memo)
            pos = _scan.skip_ws(text, end)
            if not text.startswith(CALL_END, pos):
                raise _scan.Fail(f"expected {CALL_END} at offset {pos}")
            pos += len(CALL_END)
            calls.append(ToolCall(fn, args, name, (start, pos), text[start:pos]))
            pos = _scan.skip_ws(text, pos)
        if not calls:
            raise _scan.Fail(f"expected {CALL_BEGIN} at offset {pos}")
        if pos >= hi:
            raise _scan.Fail(f"tool-call section not closed: {CALLS_END} missing at offset {pos}")
        if not text.startswith(CALLS_END, pos):
            raise _scan.Fail(f"expected {CALL_BEGIN} or {CALLS_END} at offset {pos}")
        pos += len(CALLS_END)
        if pos != hi:
            raise _scan.Fail(f"text after {CALLS_END} at offset {pos}")
        return calls, [(lo, hi)]  # the section tokens are markup too

    return strict


def _lenient(name: str, head: re.Pattern[str]) -> Any:
    def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
        text, budget = scan.text, scan.budget()
        for s in _scan.find_all(text, CALL_BEGIN, scan.start):
            if budget.spent:
                return
            m = head.match(text, _scan.skip_ws(text, s + len(CALL_BEGIN)))
            got = scan.decode(m.end(), budget) if m else None
            if m is None or got is None:
                budget.fail()
                continue
            try:
                args = _scan.object_arguments(got[0], strict=False)
            except _scan.Fail:
                budget.fail()
                continue
            end = got[1]
            f = _FENCE_END.match(text, end)
            e = scan.close_after(f.end() if f else end, CALL_END)
            yield ToolCall(m.group(1), args, name, (s, e), text[s:e])

    return lenient


def _protocol(
    name: str, strict: Any, lenient: Any, markers: tuple[str, ...], renderers: tuple[str, ...] = ()
) -> ToolCallProtocol:
    return ToolCallProtocol(
        name=name,
        strict=strict,
        lenient=lenient,
        lenient_needs=(CALL_BEGIN,),
        opening=_TOKENS[0] + "|" + _TOKENS[2],
        closing=(_TOKENS[1], _TOKENS[3]),
        inner=(_TOKENS[4],),
        template_markers=markers,
        renderers=renderers,
    )


#: V3 / R1: the template writes the type before the separator and the name after it (V3.1's
#: template, which writes the name first, has no such concatenation)
V3 = _protocol(
    "deepseek_v3",
    _strict("deepseek_v3", _v3_call),
    _lenient("deepseek_v3", _LENIENT_V3),
    ("'<\uff5ctool\u2581sep\uff5c>' + tool['function']['name']", "<\uff5ctool\u2581sep\uff5c>' + tool.function.name"),
)
#: tinker-cookbook's ``deepseekv3`` renderers write V3.1's shape
V31 = _protocol(
    "deepseek_v31",
    _strict("deepseek_v31", _v31_call),
    _lenient("deepseek_v31", _LENIENT_V31),
    (CALLS_BEGIN,),
    renderers=("deepseekv3",),
)

#: the module's protocols (tests/protocols/test_protocols.py reads them)
VARIANTS = (V3, V31)
