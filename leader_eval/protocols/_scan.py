"""The JSON scanner every protocol shares (private): bounded decoding at given offsets, the
budget a lenient scan may spend, and reading ``{name, arguments}``-shaped call objects.

Every function here survives any input and does work linear in the text it is handed: JSON
decoding runs in the C scanner at given offsets, and a lenient scan spends at most a budget of
characters (and of failed attempts) proportional to the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from leader_eval.bounded import strict_json as _strict_json
from leader_eval.types import ToolCall, json_type

# The strict error when the output holds no tool-call markup at all (a plain-text reply).
NO_CALL_ERROR = "no tool call"
# The strict error when calls were found but other text surrounds them.
NOT_ALONE_ERROR = "tool call(s) not alone in the output: other text around the protocol markup"
# No chat template or API emits more calls in one turn. An output with more fails the strict
# parse, and a lenient scan stops there: scoring each call costs tens of microseconds, so a
# 1 MB array of 30,000 tiny calls would otherwise take seconds (bench/bench_scoring.py).
MAX_CALLS = 256
TOO_MANY_CALLS_ERROR = f"more than {MAX_CALLS} tool calls in one output"

# Where a strict parser decoded a JSON value (its start -> the value and its end): the lenient
# scans that follow reuse these instead of decoding the same text again.
Memo = dict[int, tuple[Any, int]]

_LENIENT_BUDGET_FACTOR = 2
_LENIENT_MAX_FAILURES = 200
_OBJ_START = re.compile(r'\{\s*"')
_FIRST_WINDOW = 512
# An object or array is decoded first in the largest window up to this size (see try_decode)
_SKIP_TO = 8192


class Fail(Exception):
    """A strict parse failed; the message is the one-line reason."""


# one decoder pair for the package and the suite's data files (bounded/strict_json.py): strict
# parsing refuses an object that names a key twice (``{"name": "pause", "name": "wait"}``)
DECODER = _strict_json.DECODER
STRICT_DECODER = _strict_json.STRICT_DECODER
_WS = re.compile(r"\s*")


def skip_ws(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


def decode(text: str, pos: int, memo: Memo | None = None, *, unique_keys: bool = True) -> tuple[Any, int]:
    """Decode one JSON value starting exactly at ``pos``; raise ``Fail`` with a one-line reason.
    Strict parsing (the default) refuses a key given twice in an object."""
    try:
        got: tuple[Any, int] = (STRICT_DECODER if unique_keys else DECODER).raw_decode(text, pos)
        if memo is not None:
            memo[pos] = got
        return got
    except json.JSONDecodeError as exc:
        raise Fail(f"invalid JSON at offset {exc.pos}: {exc.msg}") from None
    except RecursionError:
        raise Fail(f"JSON nested too deeply at offset {pos}") from None
    except (ValueError, MemoryError) as exc:  # e.g. an integer over Python's digit limit
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Fail(f"invalid JSON at offset {pos}: {why}") from None


class Budget:
    """What a lenient scan may spend: characters handed to decoders, and failed attempts
    (each costs Python-level work however short). Keeps adversarial inputs linear and cheap."""

    __slots__ = ("fails_left", "left")

    def __init__(self, n: int) -> None:
        self.left = n
        self.fails_left = _LENIENT_MAX_FAILURES

    def spend(self, n: int) -> bool:
        self.left -= max(n, 1)
        return self.left > 0

    def fail(self) -> bool:
        self.fails_left -= 1
        return self.fails_left > 0 and self.left > 0

    @property
    def spent(self) -> bool:
        return self.left <= 0 or self.fails_left <= 0


def try_decode(text: str, pos: int, budget: Budget, charges: list[int] | None = None) -> tuple[Any, int] | None:
    """Decode one JSON value at ``pos`` for a lenient scan, or None.

    A failed decode costs O(pos) on top of the scan, because JSONDecodeError counts the lines
    before the error. Decoding a growing window instead of the whole text keeps each attempt's
    cost proportional to the value it reads: the window grows only while the failure could be
    the window's own cut (an error near its end, or an unterminated string). ``charges``
    receives what each attempt spent, and a final -1 when the budget ran out first.

    An object or array is decoded once, in the largest window up to ``_SKIP_TO`` characters,
    and the smaller windows are charged as if decoded, from that window's outcome: a window
    that ends inside a valid value fails as a cut, and one that ends more than 16 characters
    after the first error fails there, not as a cut (JSON's decoder reads at most a few
    characters past the point where it stops). The answer and the charges are those of
    decoding window by window (tests/protocols/test_fuzz_parse.py compares the two on generated, cut and
    broken calls); a 2 KB call in a lenient scan is decoded once instead of three times.
    """
    n = len(text)
    width = _FIRST_WINDOW
    if n - pos > _FIRST_WINDOW and text.startswith(("{", "["), pos):
        # a value with its kind of closing bracket in the first window is usually small enough
        # for that window: those are decoded window by window (a short copy, one decode)
        close = "}" if text[pos] == "{" else "]"
        skipped = (
            _decode_skipping(text, pos, budget, charges) if text.find(close, pos, pos + width) == -1 else _UNDECIDED
        )
        if skipped is not _UNDECIDED:
            if type(skipped) is not int:
                return skipped  # the answer, or None
            width = skipped  # every window so far is a cut: go on from the next one
    while True:
        stop = min(n, pos + width)
        chunk = text if (pos == 0 and stop == n) else text[pos:stop]
        if charges is not None:
            charges.append(len(chunk))
        if not budget.spend(len(chunk)):
            if charges is not None:
                charges.append(-1)
            return None
        try:
            value, end = DECODER.raw_decode(chunk)
        except json.JSONDecodeError as exc:
            cut = stop < n and (exc.pos >= len(chunk) - 16 or exc.msg.startswith("Unterminated string"))
            if not cut:
                return None
            width *= 4
            continue
        except (RecursionError, ValueError, MemoryError):
            return None
        return value, pos + end


_UNDECIDED: Any = object()


def _charge(budget: Budget, charges: list[int] | None, size: int) -> bool:
    """Spend one window's characters as ``try_decode`` does; False when the budget ran out."""
    if charges is not None:
        charges.append(size)
    if not budget.spend(size):
        if charges is not None:
            charges.append(-1)
        return False
    return True


def _decode_skipping(text: str, pos: int, budget: Budget, charges: list[int] | None) -> Any:
    """``try_decode`` of an object or array at ``pos`` from one decode (see there): the answer
    (the value and its end, or None), or the width of the next window when every window up to
    the one decoded is a cut, or ``_UNDECIDED`` (an exception other than a decode error: the
    windows are then decoded one by one)."""
    n = len(text)
    stops = []
    width = _FIRST_WINDOW
    while True:
        stop = min(n, pos + width)
        stops.append(stop)
        if stop == n or stop - pos >= _SKIP_TO:
            break
        width *= 4
    chunk = text if (pos == 0 and stop == n) else text[pos:stop]
    try:
        value, end = DECODER.raw_decode(chunk)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated string"):  # a cut in every window but the text's end
            last = len(stops) - 1 if stop == n else -1
        else:  # the first window that holds the error with more than 16 characters after it
            last = next((i for i, s in enumerate(stops) if s == n or exc.pos < s - pos - 16), -1)
        for s in stops if last == -1 else stops[: last + 1]:
            if not _charge(budget, charges, s - pos):
                return None
        return width * 4 if last == -1 else None
    except (RecursionError, ValueError, MemoryError):
        return _UNDECIDED
    for s in stops:  # the windows that end inside the value are cuts; the next one reads it
        if not _charge(budget, charges, s - pos):
            return None
        if s >= pos + end:
            return value, pos + end
    return _UNDECIDED  # not reached: the value ends inside the window decoded


def window_charges(n: int, pos: int, end: int) -> tuple[int, ...]:
    """What ``try_decode`` spends on a value known to span [pos, end) of an n-char text: each
    window that cuts the value fails as a cut (the decoder stops at the window's end, or inside
    an unterminated string) and the window grows, until one holds the whole value."""
    charges, width = [], _FIRST_WINDOW
    while True:
        stop = min(n, pos + width)
        charges.append(stop - pos)
        if stop >= end:
            return tuple(charges)
        width *= 4


def decode_for(text: str, pos: int, budget: Budget | None) -> tuple[Any, int]:
    """Strict decoding without a budget, budgeted lenient decoding with one."""
    if budget is None:
        return decode(text, pos)
    got = try_decode(text, pos, budget)
    if got is None:
        raise Fail(f"invalid JSON at offset {pos}")
    return got


def object_arguments(value: Any, strict: bool) -> dict[str, Any]:
    """Arguments must be a JSON object. A JSON *string* holding an object is a strict failure
    (the double-encoding slip) that the lenient reading forgives."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        if strict:
            raise Fail("arguments is a JSON-encoded string, not an object")
        try:
            inner = DECODER.decode(value)
        except (ValueError, RecursionError, MemoryError):
            inner = None
        if isinstance(inner, dict):
            return inner
    raise Fail(f"arguments must be a JSON object, got {json_type(value)}")


def call_from_object(
    obj: Any,
    *,
    name_keys: tuple[str, ...],
    args_keys: tuple[str, ...],
    strict: bool,
    optional: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Read ``{name: ..., arguments: {...}}``-shaped objects. ``optional`` lists keys allowed
    with a fixed value (llama3's ``"type": "function"``)."""
    if not isinstance(obj, dict):
        raise Fail(f"a tool call must be a JSON object, got {json_type(obj)}")
    names = [k for k in name_keys if k in obj]
    args = [k for k in args_keys if k in obj]
    if strict:
        for key in obj:
            if key in name_keys or key in args_keys:
                continue
            if optional and key in optional and obj[key] == optional[key]:
                continue
            raise Fail(f"unexpected key {key!r} in tool call object")
        if len(names) > 1:
            raise Fail(f"both {names[0]!r} and {names[1]!r} given")
        if len(args) > 1:
            raise Fail(f"both {args[0]!r} and {args[1]!r} given")
    if not names:
        raise Fail(f"tool call object has no {' or '.join(repr(k) for k in name_keys)} key")
    name = obj[names[0]]
    if not isinstance(name, str) or not name.strip():
        raise Fail("tool name must be a non-empty string")
    if not args:
        if strict:
            raise Fail(f"tool call object has no {' or '.join(repr(k) for k in args_keys)} key")
        return name, {}
    return name, object_arguments(obj[args[0]], strict)


def find_all(text: str, needle: str, start: int) -> Iterator[int]:
    pos = text.find(needle, start)
    while pos != -1:
        yield pos
        pos = text.find(needle, pos + len(needle))


class Scan:
    """One output being scanned leniently. Shared work (JSON objects) is done once."""

    def __init__(self, text: str, start: int, memo: Memo | None = None) -> None:
        self.text = text
        self.start = start
        self._objects: list[tuple[dict[str, Any], int, int]] | None = None
        self._holds: dict[str, bool] = {}
        # the prefilter's answers (``know``): the needles it looked for, and those it found
        self._known: frozenset[str] = frozenset()
        self._found: set[str] = set()
        # start -> (what decoding there spent, the value and its end, or None): the lenient
        # parsers of every protocol try the same JSON objects, each under its own budget
        n = len(text)
        self._decoded: dict[int, tuple[tuple[int, ...], tuple[Any, int] | None]] = {
            pos: (window_charges(n, pos, got[1]), got) for pos, got in (memo or {}).items()
        }

    def know(self, needles: frozenset[str], found: set[str]) -> None:
        """Take the prefilter's answers: of ``needles``, those held at or after ``start`` are
        ``found`` (looked for together, ``protocols._Prefilter``)."""
        self._known, self._found = needles, found

    def holds(self, needle: str) -> bool:
        """Does the text hold ``needle`` at or after ``start``? (Asked once per needle: protocols
        share needles, and most of them are absent from most text.) A needle whose first
        character the text lacks is absent without a substring search."""
        if needle in self._known:
            return needle in self._found
        known = self._holds.get(needle)
        if known is None:
            first = needle[:1]
            known = (first == needle or self.holds(first)) and self.text.find(needle, self.start) != -1
            self._holds[needle] = known
        return known

    def budget(self) -> Budget:
        return Budget(_LENIENT_BUDGET_FACTOR * (len(self.text) - self.start) + 4096)

    def decode(self, pos: int, budget: Budget) -> tuple[Any, int] | None:
        """``try_decode`` done once per position: a repeat replays its spending on ``budget``,
        so each parser gets the answer (and the budget state) it would have computed."""
        known = self._decoded.get(pos)
        if known is not None:
            charges, got = known
            for c in charges:
                if not budget.spend(c):
                    return None
            return got
        spent: list[int] = []
        got = try_decode(self.text, pos, budget, spent)
        if spent[-1] != -1:  # ran to an answer, not out of budget
            self._decoded[pos] = (tuple(spent), got)
        return got

    def call_objects(self) -> list[tuple[dict[str, Any], int, int]]:
        """JSON objects with a "name" or "tool" key, outermost first; found objects are skipped
        over so a call's nested values are not read as calls."""
        if self._objects is None:
            self._objects = []
            text, budget, pos = self.text, self.budget(), self.start
            if "{" in text:
                while True:
                    m = _OBJ_START.search(text, pos)
                    if not m:
                        break
                    s = m.start()
                    got = self.decode(s, budget)
                    if got is not None and isinstance(got[0], dict) and ("name" in got[0] or "tool" in got[0]):
                        self._objects.append((got[0], s, got[1]))
                        if len(self._objects) == MAX_CALLS:
                            break
                        pos = got[1]
                    else:
                        pos = s + 1
                        budget.fail()
                    if budget.spent:
                        break
        return self._objects

    def tagged_json(self, open_tag: str, read: Any) -> Iterator[tuple[int, int, Any]]:
        """Each ``open_tag`` followed (after whitespace) by a JSON value that ``read`` accepts
        (``read`` raises ``Fail`` otherwise): (tag start, value end, what ``read`` returned)."""
        text, budget = self.text, self.budget()
        for s in find_all(text, open_tag, self.start):
            if budget.spent:
                return
            got = self.decode(skip_ws(text, s + len(open_tag)), budget)
            if got is None:
                budget.fail()
                continue
            try:
                value = read(got[0])
            except Fail:
                budget.fail()
                continue
            yield s, got[1], value

    def close_after(self, end: int, close_tag: str) -> int:
        """``end`` moved past ``close_tag`` when it follows (after whitespace)."""
        close = skip_ws(self.text, end)
        return close + len(close_tag) if self.text.startswith(close_tag, close) else end


#: (text, where a marker stands) -> (the tool's name, where its JSON arguments start), or None
HeadReader = Callable[[str, int], tuple[str, int] | None]


def headed_calls(
    scan: Scan, marker: str, head: HeadReader, protocol: str, close: str | None = None
) -> Iterator[ToolCall]:
    """The lenient reading shared by formats that write a marker, a head naming the tool, then a
    JSON object of arguments (Mistral v11, Solar Open, Functionary, harmony): every ``marker``
    whose head reads and whose object decodes under the scan's budget; the call's span ends
    after ``close`` where it follows."""
    text, budget = scan.text, scan.budget()
    for s in find_all(text, marker, scan.start):
        if budget.spent:
            return
        found = head(text, s)
        got = scan.decode(found[1], budget) if found else None
        if found is None or got is None:
            budget.fail()
            continue
        try:
            args = object_arguments(got[0], strict=False)
        except Fail:
            budget.fail()
            continue
        e = scan.close_after(got[1], close) if close else got[1]
        yield ToolCall(found[0], args, protocol, (s, e), text[s:e])


#: (text, where a marker stands, the scan's budget) -> (tool name, arguments, where the call ends);
#: raises ``Fail`` (or ``RecursionError``) where no call reads there
BlockReader = Callable[[str, int, Budget], tuple[str, dict[str, Any], int]]


def block_calls(
    scan: Scan, marker: str, read: BlockReader, protocol: str, gave_up: Callable[[], bool] | None = None
) -> Iterator[ToolCall]:
    """The lenient reading shared by formats whose call is a block opening with ``marker`` (GLM,
    Kimi K3, the invoke-shaped XML formats): every block that reads under the scan's budget; a
    failed one costs a failure from the budget, and ``gave_up()`` (a per-output cap reached)
    ends the scan."""
    text, budget = scan.text, scan.budget()
    for s in find_all(text, marker, scan.start):
        if budget.spent:
            return
        try:
            name, args, e = read(text, s, budget)
        except (Fail, RecursionError):
            if gave_up is not None and gave_up():
                return
            budget.fail()
            continue
        yield ToolCall(name, args, protocol, (s, e), text[s:e])
