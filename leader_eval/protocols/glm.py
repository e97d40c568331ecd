"""``glm``: GLM-4.5/4.6/4.7 (and Spark, Ling, Laguna) calls, the name then key/value pairs::

    <tool_call>NAME
    <arg_key>message</arg_key>
    <arg_value>Gather wood</arg_value>
    </tool_call>

one or more, only whitespace between them and between the tags (GLM-4.6 writes newlines, 4.7
none). Values are text (``TextValue``): the templates write a string as it is and anything else
as JSON, so ``parse_output`` types them by the tool's schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._arg_pairs import PairTags, read_pairs
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
TAGS = PairTags("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
# The name follows the tag directly; it ends at whitespace or the next tag. A name opening with
# a JSON bracket is a Hermes call, not this format.
_NAME = re.compile(r"[^\s<>{}\[\]\"]{1,256}")


def _call(
    text: str, pos: int, hi: int, *, strict: bool, budget: _scan.Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """One ``<tool_call>`` at ``pos``: (name, arguments, end)."""
    at = pos + len(OPEN)
    m = _NAME.match(text, _scan.skip_ws(text, at))  # vLLM's parser strips the name too
    if not m:
        raise _scan.Fail(f"expected a tool name after {OPEN} at offset {at}")
    args, end = read_pairs(text, m.end(), hi, TAGS, strict=strict, budget=budget)
    close = _scan.skip_ws(text, end)
    if text.startswith(CLOSE, close):
        return m.group(), args, close + len(CLOSE)
    if strict or not args:  # a lenient reading forgives a missing close after some arguments
        raise _scan.Fail(f"expected {TAGS.key_open} or {CLOSE} at offset {close}")
    return m.group(), args, end


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos = lo
    while pos < hi:
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        if not text.startswith(OPEN, pos):
            raise _scan.Fail(f"expected {OPEN} at offset {pos}")
        name, args, end = _call(text, pos, hi, strict=True)
        calls.append(ToolCall(name, args, "glm", (pos, end), text[pos:end]))
        spans.append((pos, end))
        pos = _scan.skip_ws(text, end)
    return calls, spans


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    return _scan.block_calls(
        scan, OPEN, lambda text, s, budget: _call(text, s, len(text), strict=False, budget=budget), "glm"
    )


PROTOCOL = ToolCallProtocol(
    name="glm",
    strict=strict,
    lenient=lenient,
    # an attempt opens like a Hermes call; what follows the tag tells the two apart
    opening=r"<tool_call>",
    closing=(r"</tool_call>",),
    inner=(r"</?arg_key>", r"</?arg_value>"),
    template_markers=(TAGS.key_open,),
    lenient_needs=(OPEN,),
)
