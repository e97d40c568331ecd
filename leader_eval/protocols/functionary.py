"""``functionary``: MeetKai Functionary v3.1 (Llama 3.1 based), one tag per call, JSON arguments::

    <function=NAME>{"key": "value"}</function><function=OTHER>{...}</function>

Calls follow one another (whitespace between them allowed); the turn ends with ``<|eom_id|>``.
The template's code-interpreter form (``<|python_tag|>`` and raw code, for a tool named
``python``) is not read: it is not a call to a declared function."""

from __future__ import annotations

import re
from collections.abc import Iterator

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall

OPEN, CLOSE = "<function=", "</function>"
# a tool name runs to the tag's '>' (a character class without it: linear)
_TAG = re.compile(r"<function=([^\s<>]+)>")


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    pos = lo
    while pos < hi:
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        m = _TAG.match(text, pos, hi)
        if m is None:
            raise _scan.Fail(f"expected <function=NAME> at offset {pos}")
        args, end = _scan.decode(text, _scan.skip_ws(text, m.end()), memo)
        args = _scan.object_arguments(args, strict=True)
        end = _scan.skip_ws(text, end)
        if not text.startswith(CLOSE, end):
            raise _scan.Fail(f"expected {CLOSE} at offset {end}")
        end += len(CLOSE)
        calls.append(ToolCall(m.group(1), args, "functionary", (pos, end), text[pos:end]))
        pos = _scan.skip_ws(text, end)
    return calls, [(lo, hi)]


def _head(text: str, s: int) -> tuple[str, int] | None:
    m = _TAG.match(text, s, s + 256)  # a name is short: a bounded match keeps many tags linear
    return (m.group(1), _scan.skip_ws(text, m.end())) if m else None


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    return _scan.headed_calls(scan, OPEN, _head, "functionary", CLOSE)


PROTOCOL = ToolCallProtocol(
    name="functionary",
    strict=strict,
    lenient=lenient,
    opening=r"<function=[^\s<>]+>",
    closing=(re.escape(CLOSE),),
    # the format as the v3.1 template spells it out (Qwen3-Coder's <function=...> sits inside <tool_call>)
    template_markers=("<{start_tag}={function_name}>",),
    lenient_needs=(OPEN,),
)
