"""``harmony``: gpt-oss's harmony messages. A function call is one assistant message whose
recipient is ``functions.NAME``, on the ``commentary`` channel, JSON content, ending with
``<|call|>``. The recipient sits in the role header (what the chat template renders) or after
the channel name (what the harmony documentation shows)::

    to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>
    <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>

The output after the generation prompt (``<|start|>assistant``) starts there; an analysis
message before it (``<|channel|>analysis<|message|>...<|end|><|start|>assistant``) is the
reasoning block. ``<|call|>`` ends the turn (a server may strip it as a stop token): one call
per output, and nothing after it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall, json_type

START = "<|start|>assistant"
CHANNEL, MESSAGE, CALL, CONSTRAIN = "<|channel|>", "<|message|>", "<|call|>", "<|constrain|>"
RECIPIENT = "to=functions."

_NAME = r"([^\s<>|]{1,256})"
# The header, either order; the content type (``json``, or ``<|constrain|>json``) optional. No
# two runs of blanks meet without a token between them: the match stays linear.
_HEADER = re.compile(
    r"(?:<\|start\|>assistant)?[ \t]*(?:"
    r"to=functions\." + _NAME + r"[ \t]*<\|channel\|>(\w{1,32})|"
    r"<\|channel\|>(\w{1,32})[ \t]+to=functions\." + _NAME + r")"
    r"[ \t]*(?:(?:<\|constrain\|>)?json[ \t]*)?<\|message\|>"
)
_LENIENT_NAME = re.compile(r"to=functions\." + _NAME)
_LENIENT_WINDOW = 200  # the header's length, at most, from the recipient to <|message|>


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    m = _HEADER.match(text, lo)
    if not m:
        if text.startswith((RECIPIENT, START, CHANNEL), lo):
            raise _scan.Fail(
                f"expected a harmony header to=functions.NAME<|channel|>commentary json<|message|> at offset {lo}"
            )
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    name = m.group(1) or m.group(4)
    channel = m.group(2) or m.group(3)
    if channel != "commentary":
        raise _scan.Fail(f"function call on the {channel!r} channel, expected 'commentary'")
    value, end = _scan.decode(text, m.end(), memo)
    if not isinstance(value, dict):
        raise _scan.Fail(f"arguments must be a JSON object, got {json_type(value)}")
    pos = _scan.skip_ws(text, end)
    if text.startswith(CALL, pos):
        pos += len(CALL)
        if pos != hi:
            raise _scan.Fail(f"text after {CALL} at offset {pos}: harmony ends the turn at the call")
    elif pos != hi:
        raise _scan.Fail(f"expected {CALL} at offset {pos}")
    return [ToolCall(name, value, "harmony", (lo, hi), text[lo:hi])], [(lo, hi)]


def _head(text: str, s: int) -> tuple[str, int] | None:
    m = _LENIENT_NAME.match(text, s)
    at = text.find(MESSAGE, s, s + _LENIENT_WINDOW) if m else -1
    return (m.group(1), _scan.skip_ws(text, at + len(MESSAGE))) if m and at != -1 else None


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    return _scan.headed_calls(scan, RECIPIENT, _head, "harmony", CALL)


PROTOCOL = ToolCallProtocol(
    name="harmony",
    strict=strict,
    lenient=lenient,
    lenient_needs=(RECIPIENT,),
    opening=r"(?:<\|start\|>assistant\s*)?(?:to=functions\.[^\s<>|]{1,256}|<\|channel\|>commentary\s+to=functions\.)",
    closing=(re.escape(CALL),),
    # only the call's own pieces: <|start|>, <|channel|> and <|message|> frame every harmony
    # message (a final answer too), so they are the format's special tokens, not call markup
    inner=(
        r"to=functions\.[^\s<>|]{1,256}",
        re.escape(CHANNEL) + r"commentary[ \t]+(?:<\|constrain\|>)?json",
        re.escape(CONSTRAIN) + "json",
    ),
    template_markers=(CALL,),
    renderers=("gpt_oss",),  # tinker-cookbook's gpt_oss_* renderers
    tokens=("<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|call|>", "<|end|>"),
)
