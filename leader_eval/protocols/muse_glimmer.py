"""``muse_glimmer``: muse-glimmer's ATEM calls, one assistant message per call::

     to=NAME<|message|><atem:function_calls>
    <atem:invoke name="NAME">
    <atem:parameter name="KEY">VALUE</atem:parameter>
    </atem:invoke>
    </atem:function_calls><|eom|><|start|>assistant to=NAME2<|message|><atem:function_calls>...

The generation prompt ends with ``<|start|>assistant``; a call is the recipient ``to=NAME`` (the
called tool, which must be the invoke's name), ``<|message|>`` and one ``<atem:function_calls>``
block holding one invoke. Parallel calls are further messages after ``<|eom|><|start|>assistant``.
The template writes strings as they are, ``true``/``false``/``null`` and JSON for the rest: text
typed by the tool's schema in ``parse_output``, taken exactly. A reasoning message
(``to=self<|message|>...<|eom|><|start|>assistant``) is set aside by declaring those two as the
reasoning tags; a plain reply (``to=user<|message|>...``) is no call (its channel header stays
in the visible text: stripping it is the backend's job).
"""

from __future__ import annotations

import re

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
from leader_eval.protocols._xml import InvokeTags, ParamCount, invoke_block, invoke_lenient
from leader_eval.types import ToolCall

OPEN, CLOSE = "<atem:function_calls>", "</atem:function_calls>"
NEXT_MESSAGE = "<|eom|><|start|>assistant"
TAGS = InvokeTags("atem:invoke", "atem:parameter")
_USER = "user"  # the room's channel: a message to it is a reply, not a call
_RECIPIENT = re.compile(r"to=([^\s<>|]{1,256})<\|message\|>")


def _call(text: str, pos: int, hi: int, count: ParamCount) -> tuple[str, dict[str, TextValue], int]:
    """One message's call at ``pos`` (at ``to=``): (name, arguments, end)."""
    m = _RECIPIENT.match(text, pos)
    if not m:
        raise Fail(f"expected to=NAME<|message|> at offset {pos}")
    pos = m.end()
    if not text.startswith(OPEN, pos):
        raise Fail(f"expected {OPEN} at offset {pos}")
    at = skip_ws(text, pos + len(OPEN))
    name, args, end = invoke_block(text, at, hi, TAGS, TextValue, count)
    if name != m.group(1):
        raise Fail(f"the message is to={m.group(1)} but invokes {name!r} at offset {at}")
    end = skip_ws(text, end)
    if not text.startswith(CLOSE, end):
        raise Fail(f"expected {CLOSE} at offset {end}")
    return name, args, end + len(CLOSE)


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    if not (text.startswith("to=", lo) or text.startswith(OPEN, lo)):
        raise Fail(NO_CALL_ERROR)
    head = _RECIPIENT.match(text, lo)
    if head is None:
        raise Fail(f"expected to=NAME<|message|> at offset {lo}")
    if head.group(1) == _USER and not text.startswith(OPEN, head.end()):
        raise Fail(NO_CALL_ERROR)  # a message to the room: a plain reply
    calls: list[ToolCall] = []
    pos, count = lo, ParamCount()
    while True:
        if len(calls) == MAX_CALLS:
            raise Fail(TOO_MANY_CALLS_ERROR)
        name, args, end = _call(text, pos, hi, count)
        calls.append(ToolCall(name, args, "muse_glimmer", (pos, end), text[pos:end]))
        if end == hi:
            break
        if not text.startswith(NEXT_MESSAGE, end):
            raise Fail(f"expected {NEXT_MESSAGE} or the end at offset {end}")
        pos = end + len(NEXT_MESSAGE)
        if not text.startswith(" to=", pos):
            raise Fail(f"expected ' to=NAME<|message|>' at offset {pos}")
        pos += 1
    # the message separators are markup too: the whole body is consumed
    return calls, [(lo, hi)]


#: every ``<atem:invoke>`` (recipient and ``<atem:function_calls>`` optional), anywhere
lenient = invoke_lenient("<atem:invoke", TAGS, TextValue, "muse_glimmer")


PROTOCOL = ToolCallProtocol(
    name="muse_glimmer",
    strict=strict,
    lenient=lenient,
    opening=r"to=[^\s<>|]{1,256}<\|message\|><atem:function_calls>|<atem:function_calls>",
    closing=(re.escape(CLOSE),),
    inner=TAGS.markup(),
    template_markers=(OPEN,),
    lenient_needs=("<atem:invoke",),
    tokens=("<|message|>", "<|eom|>", "<|start|>"),
)
