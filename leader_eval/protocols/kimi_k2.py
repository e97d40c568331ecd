"""``kimi_k2``: Kimi K2 tool-call sections of special tokens::

<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall, json_type

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_BEGIN_ALT = "<|tool_call_section_begin|>"  # singular variant some servers accept
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARG_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
# The call id is functions.NAME:INDEX. The name runs to the last ':' before the index; the
# character class excludes ':' so the match is linear.
_ID_STRICT = re.compile(r"functions\.([^\s:<>|]+):(\d+)")
_ID_LENIENT = re.compile(r"(?:functions\.)?([^\s:<>|]+):(\d+)")


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(SECTION_BEGIN, lo):
        if text.startswith(SECTION_BEGIN_ALT, lo):
            raise _scan.Fail(f"section opened with {SECTION_BEGIN_ALT}, expected {SECTION_BEGIN}")
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    pos = _scan.skip_ws(text, lo + len(SECTION_BEGIN))
    while text.startswith(CALL_BEGIN, pos):
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        start = pos
        pos = _scan.skip_ws(text, pos + len(CALL_BEGIN))
        m = _ID_STRICT.match(text, pos)
        if not m:
            raise _scan.Fail(f"expected a call id functions.NAME:INDEX at offset {pos}")
        name = m.group(1)
        pos = _scan.skip_ws(text, m.end())
        if not text.startswith(ARG_BEGIN, pos):
            raise _scan.Fail(f"expected {ARG_BEGIN} at offset {pos}")
        pos = _scan.skip_ws(text, pos + len(ARG_BEGIN))
        obj, end = _scan.decode(text, pos, memo)
        if not isinstance(obj, dict):
            raise _scan.Fail(f"arguments must be a JSON object, got {json_type(obj)}")
        pos = _scan.skip_ws(text, end)
        if not text.startswith(CALL_END, pos):
            raise _scan.Fail(f"expected {CALL_END} at offset {pos}")
        pos += len(CALL_END)
        calls.append(ToolCall(name, obj, "kimi_k2", (start, pos), text[start:pos]))
        pos = _scan.skip_ws(text, pos)
    if not calls:
        raise _scan.Fail(f"expected {CALL_BEGIN} at offset {pos}")
    if not text.startswith(SECTION_END, pos):
        raise _scan.Fail(f"expected {CALL_BEGIN} or {SECTION_END} at offset {pos}")
    pos += len(SECTION_END)
    if pos != hi:
        raise _scan.Fail(f"text after {SECTION_END} at offset {pos}")
    # The section tokens are markup too: consume the whole section.
    return calls, [(lo, hi)]


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    text, budget = scan.text, scan.budget()
    for s in _scan.find_all(text, CALL_BEGIN, scan.start):
        if budget.spent:
            return
        pos = _scan.skip_ws(text, s + len(CALL_BEGIN))
        m = _ID_LENIENT.match(text, pos)
        if not m:
            budget.fail()
            continue
        pos = _scan.skip_ws(text, m.end())
        if not text.startswith(ARG_BEGIN, pos):
            budget.fail()
            continue
        got = scan.decode(_scan.skip_ws(text, pos + len(ARG_BEGIN)), budget)
        if got is None:
            budget.fail()
            continue
        try:
            args = _scan.object_arguments(got[0], strict=False)
        except _scan.Fail:
            budget.fail()
            continue
        e = scan.close_after(got[1], CALL_END)
        yield ToolCall(m.group(1), args, "kimi_k2", (s, e), text[s:e])


PROTOCOL = ToolCallProtocol(
    name="kimi_k2",
    strict=strict,
    lenient=lenient,
    lenient_needs=(CALL_BEGIN,),
    opening=r"<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>",
    closing=(r"<\|tool_calls?_section_end\|>", re.escape(CALL_END)),
    inner=(re.escape(CALL_BEGIN), re.escape(ARG_BEGIN), r"functions\.[^\s:<>|]+:\d+"),
    template_markers=(SECTION_BEGIN, CALL_BEGIN),
    renderers=("kimi",),
)
