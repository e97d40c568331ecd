"""``hunyuan``: Tencent Hunyuan (Hy3) calls, one section of tagged tokens::

    <tool_calls:opensource>
    <tool_call:opensource>NAME<tool_sep:opensource>
    <arg_key:opensource>message</arg_key:opensource>
    <arg_value:opensource>Gather wood</arg_value:opensource>
    </tool_call:opensource>
    </tool_calls:opensource>

one section holding one or more calls, whitespace between the tags. Values are text
(``TextValue``: a string as it is, anything else as JSON), typed by the tool's schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._arg_pairs import PairTags, read_pairs
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall

# The template builds every token from one suffix (``HYTK``): the released one is ":opensource".
_SUFFIX = ":opensource"
SECTION_OPEN, SECTION_CLOSE = f"<tool_calls{_SUFFIX}>", f"</tool_calls{_SUFFIX}>"
OPEN, SEP, CLOSE = f"<tool_call{_SUFFIX}>", f"<tool_sep{_SUFFIX}>", f"</tool_call{_SUFFIX}>"
TAGS = PairTags(f"<arg_key{_SUFFIX}>", f"</arg_key{_SUFFIX}>", f"<arg_value{_SUFFIX}>", f"</arg_value{_SUFFIX}>")
_NAME = re.compile(r"[^\s<>{}\[\]\"]{1,256}")


def _call(
    text: str, pos: int, hi: int, *, strict: bool, budget: _scan.Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """One ``<tool_call:opensource>`` at ``pos``: (name, arguments, end)."""
    at = pos + len(OPEN)
    m = _NAME.match(text, at if strict else _scan.skip_ws(text, at))
    if not m:
        raise _scan.Fail(f"expected a tool name after {OPEN} at offset {at}")
    sep = m.end() if strict else _scan.skip_ws(text, m.end())
    if not text.startswith(SEP, sep):
        raise _scan.Fail(f"expected {SEP} at offset {sep}")
    args, end = read_pairs(text, sep + len(SEP), hi, TAGS, strict=strict, budget=budget)
    close = _scan.skip_ws(text, end)
    if text.startswith(CLOSE, close):
        return m.group(), args, close + len(CLOSE)
    if strict:
        raise _scan.Fail(f"expected {TAGS.key_open} or {CLOSE} at offset {close}")
    return m.group(), args, end


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(SECTION_OPEN, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    pos = _scan.skip_ws(text, lo + len(SECTION_OPEN))
    while text.startswith(OPEN, pos):
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        name, args, end = _call(text, pos, hi, strict=True)
        calls.append(ToolCall(name, args, "hunyuan", (pos, end), text[pos:end]))
        pos = _scan.skip_ws(text, end)
    if not calls:
        raise _scan.Fail(f"expected {OPEN} at offset {pos}")
    if not text.startswith(SECTION_CLOSE, pos):
        raise _scan.Fail(f"expected {OPEN} or {SECTION_CLOSE} at offset {pos}")
    pos += len(SECTION_CLOSE)
    if pos != hi:
        raise _scan.Fail(f"text after {SECTION_CLOSE} at offset {pos}")
    return calls, [(lo, hi)]  # the section tokens are markup too


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    text, hi, budget = scan.text, len(scan.text), scan.budget()
    for s in _scan.find_all(text, OPEN, scan.start):
        if budget.spent:
            return
        try:
            name, args, e = _call(text, s, hi, strict=False, budget=budget)
        except _scan.Fail:
            budget.fail()
            continue
        yield ToolCall(name, args, "hunyuan", (s, e), text[s:e])


_S = re.escape(_SUFFIX)
PROTOCOL = ToolCallProtocol(
    name="hunyuan",
    strict=strict,
    lenient=lenient,
    opening=rf"<tool_calls?{_S}>",
    closing=(rf"</tool_calls?{_S}>",),
    inner=(rf"<tool_sep{_S}>", rf"</?arg_key{_S}>", rf"</?arg_value{_S}>"),
    # the template assembles its tokens with str.format; a template that spells them out has SEP
    template_markers=("'<tool_sep{}>'", SEP),
    lenient_needs=(OPEN,),
)
