"""``gigachat3``: GigaChat 3, a call is a message of its own in the ``function call`` role::

    <|message_sep|>

    function call<|role_sep|>
    {"name": "NAME", "arguments": {...}}

The generation prompt opens the assistant's message; a call closes it (``<|message_sep|>``, empty
when the call comes alone) and writes the ``function call`` message. The template renders one
call per turn (the first of several): one call per output."""

from __future__ import annotations

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._one_object import lenient_after, strict_object

MESSAGE_SEP = "<|message_sep|>"
HEADER = "function call<|role_sep|>"


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(MESSAGE_SEP, lo):
        if text.startswith(HEADER, lo):
            raise _scan.Fail(f"the function call message must follow {MESSAGE_SEP} (the assistant's message closed)")
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    pos = _scan.skip_ws(text, lo + len(MESSAGE_SEP))
    if not text.startswith(HEADER, pos):
        raise _scan.Fail(f"expected {HEADER!r} at offset {pos}")
    return strict_object(text, pos + len(HEADER), lo, hi, memo, "gigachat3")


PROTOCOL = ToolCallProtocol(
    name="gigachat3",
    strict=strict,
    lenient=lenient_after(HEADER, "gigachat3"),
    # the role name only with its separator token: "function call" alone is prose
    opening=r"(?:<\|message_sep\|>\s*)?function call<\|role_sep\|>",
    template_markers=("'role': 'function call'",),
    lenient_needs=(HEADER,),
    tokens=("<|message_sep|>", "<|role_sep|>"),
)
