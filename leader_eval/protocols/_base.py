"""The declarative shape of one tool-call protocol (see ``leader_eval.protocols``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

from leader_eval.protocols._scan import Memo, Scan
from leader_eval.types import ToolCall

#: (calls, the raw-text spans the strict parse consumed)
StrictOut = tuple[list[ToolCall], list[tuple[int, int]]]
#: strict(text, lo, hi, memo): the body of the output is text[lo:hi]; raises ``Fail``
StrictParser = Callable[[str, int, int, "Memo | None"], StrictOut]
#: lenient(scan): calls found anywhere in scan.text[scan.start:]
LenientExtractor = Callable[[Scan], Iterator[ToolCall]]
#: frame(text, lo, hi): spans of text[lo:hi] that frame the reply (channel tokens), not content
FrameFinder = Callable[[str, int, int], list[tuple[int, int]]]


@dataclass(frozen=True)
class ToolCallProtocol:
    """One protocol: how to read it, how to recognise an attempt at it, what selects it.

    ``opening`` is a regex for how an attempt opens (matched after optional whitespace);
    ``closing`` and ``inner`` are regexes for the protocol's other markup pieces. Together they
    are the protocol's own markup: when an output is a failed attempt at the protocol in force,
    a tool-markup finding that is exactly one of these pieces is the attempt itself, already
    named ``unparseable``, never a separate leak. ``template_markers`` are substrings of a chat
    template that select the protocol (checked in registry order); ``renderers`` are prefixes of
    tinker-cookbook renderer names that speak it. ``lenient_needs`` lets a lenient scan be
    skipped on text it cannot find anything in. API-level protocols have no text parsers.
    """

    name: str
    strict: StrictParser | None
    lenient: LenientExtractor | None
    opening: str | None = None
    closing: tuple[str, ...] = ()
    inner: tuple[str, ...] = ()
    template_markers: tuple[str, ...] = ()
    renderers: tuple[str, ...] = ()
    #: substrings one of which the text must hold (at or after where the lenient scan starts)
    #: for ``lenient`` to find anything: without any, the scan is skipped (empty: always scan).
    #: Every failed strict parse runs every protocol's lenient scan, and on most text there is
    #: nothing for most of them to find.
    lenient_needs: tuple[str, ...] = ()
    #: where a format wraps every reply in channel tokens (Kimi K3's ``response`` channel), the
    #: spans of those tokens: a reply that is not a strict call is shown without them
    frame: FrameFinder | None = None
    #: special tokens the format is written with that also frame other messages (Kimi K3's
    #: ``<|open|>``/``<|sep|>``/``<|close|>``, harmony's ``<|channel|>``): a leak scan reports them
    #: as special tokens, but inside a failed attempt at this protocol they are the attempt
    #: (already named ``unparseable``), never a second finding
    tokens: tuple[str, ...] = ()

    # compiled at their first use, not when the registry is imported (~70 patterns, ~6 ms
    # before a run's first request; a run scores with a few protocols' patterns, later)
    @cached_property
    def _attempt(self) -> re.Pattern[str] | None:
        return re.compile(r"\s*(?:" + self.opening + ")") if self.opening is not None else None

    @cached_property
    def _markup(self) -> re.Pattern[str] | None:
        pieces = [p for p in (self.opening, *self.closing, *self.inner) if p]
        return re.compile("|".join(f"(?:{p})" for p in pieces)) if pieces else None

    def is_attempt(self, text: str) -> bool:
        """Does ``text`` open (after whitespace) the way an attempt at this protocol does?"""
        return bool(self._attempt and self._attempt.match(text))

    def owns(self, fragment: str) -> bool:
        """Is ``fragment`` (stripped) exactly one piece of this protocol's own markup?"""
        return bool(self._markup and self._markup.fullmatch(fragment.strip()))
