"""One ``{"name": ..., "arguments": {...}}`` object after a fixed header, ending the output
(private): GigaChat 3's ``function call`` message and GigaChat 3.1's ``<|function_call|>``."""

from __future__ import annotations

from collections.abc import Iterator

from leader_eval.protocols import _scan
from leader_eval.protocols._base import LenientExtractor, StrictOut
from leader_eval.protocols._json_list import name_arguments
from leader_eval.types import ToolCall


def strict_object(text: str, pos: int, lo: int, hi: int, memo: _scan.Memo | None, protocol: str) -> StrictOut:
    """The call object at ``pos`` (after the header) must end the body ``text[lo:hi]``."""
    obj, end = _scan.decode(text, _scan.skip_ws(text, pos), memo)
    name, args = name_arguments(obj, True)
    after = _scan.skip_ws(text, end)
    if after < hi:
        raise _scan.Fail(f"text after the call at offset {after}: one call per message")
    return [ToolCall(name, args, protocol, (lo, end), text[lo:end])], [(lo, hi)]


def lenient_after(header: str, protocol: str) -> LenientExtractor:
    """Every ``header`` followed (after whitespace) by a call object."""

    def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
        for s, end, (name, args) in scan.tagged_json(header, lambda obj: name_arguments(obj, False)):
            yield ToolCall(name, args, protocol, (s, end), scan.text[s:end])

    return lenient
