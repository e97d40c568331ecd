"""``minimax_m2``: MiniMax-M2's calls::

    <minimax:tool_call>
    <invoke name="NAME">
    <parameter name="KEY">VALUE</parameter>
    </invoke>
    </minimax:tool_call>

One or more ``<minimax:tool_call>`` blocks, each with one or more invokes, only whitespace
between them. The template writes strings as they are and everything else as JSON; a value is
the text up to the first ``</parameter>``, less one newline at each end, typed by the tool's
schema in ``parse_output``.
"""

from __future__ import annotations

from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._scan import (
    MAX_CALLS,
    NO_CALL_ERROR,
    TOO_MANY_CALLS_ERROR,
    Fail,
    Memo,
    skip_ws,
)
from leader_eval.protocols._values import TextValue
from leader_eval.protocols._xml import (
    InvokeTags,
    ParamCount,
    drop_newlines,
    invoke_block,
    invoke_lenient,
)
from leader_eval.types import ToolCall

OPEN, CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"
TAGS = InvokeTags("invoke", "parameter", trim=drop_newlines)
_INVOKE = "<invoke"


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos, count = lo, ParamCount()
    while pos < hi:
        if not text.startswith(OPEN, pos):
            raise Fail(f"expected {OPEN} at offset {pos}")
        block = pos
        pos = skip_ws(text, pos + len(OPEN))
        n_before = len(calls)
        while text.startswith(_INVOKE, pos):
            if len(calls) == MAX_CALLS:
                raise Fail(TOO_MANY_CALLS_ERROR)
            name, args, end = invoke_block(text, pos, hi, TAGS, TextValue, count)
            calls.append(ToolCall(name, args, "minimax_m2", (pos, end), text[pos:end]))
            pos = skip_ws(text, end)
        if len(calls) == n_before:
            raise Fail(f'expected <invoke name="..."> at offset {pos}')
        if not text.startswith(CLOSE, pos):
            raise Fail(f'expected <invoke name="..."> or {CLOSE} at offset {pos}')
        pos += len(CLOSE)
        spans.append((block, pos))
        pos = skip_ws(text, pos)
    return calls, spans


#: every block anywhere (the invoke-shaped formats' one lenient reader, protocols/_xml.py)
lenient = invoke_lenient(_INVOKE, TAGS, TextValue, "minimax_m2")


PROTOCOL = ToolCallProtocol(
    name="minimax_m2",
    strict=strict,
    lenient=lenient,
    opening=r"<minimax:tool_call>",
    closing=(r"</minimax:tool_call>",),
    inner=TAGS.markup(),
    template_markers=(OPEN,),
    lenient_needs=(OPEN,),
)
