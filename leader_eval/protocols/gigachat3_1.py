"""``gigachat3_1``: GigaChat 3.1, the ``<|function_call|>`` token then the call object::

    <|function_call|>{"name": "NAME", "arguments": {...}}

The template renders one call per turn (the first of several): one call per output."""

from __future__ import annotations

import re

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._one_object import lenient_after, strict_object

OPEN = "<|function_call|>"


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    return strict_object(text, lo + len(OPEN), lo, hi, memo, "gigachat3_1")


PROTOCOL = ToolCallProtocol(
    name="gigachat3_1",
    strict=strict,
    lenient=lenient_after(OPEN, "gigachat3_1"),
    opening=re.escape(OPEN),
    template_markers=(OPEN,),
    lenient_needs=(OPEN,),
)
