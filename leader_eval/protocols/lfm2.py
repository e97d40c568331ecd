"""``lfm2``: Liquid LFM2 / LFM2.5, a Python list of calls between two tokens::

    <|tool_call_start|>[NAME(key='text', n=42, ok=True), OTHER(x=None)]<|tool_call_end|>

The list is read as ``pythonic`` reads it (Python literals, keyword arguments only). The LFM2.5
template writes a string argument raw between single quotes and a mapping as JSON. A raw line
break inside a quoted string is what the template writes for a message of several lines, so it
is read as that line break (a model that does exactly what its template showed is not failed);
a string holding a single quote, or a mapping holding ``true``/``false``/``null``, is not
Python and cannot be told apart: strict parsing reports it instead of guessing; a backslash in a
string is read as the Python escape it starts (docs/protocols.md)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from leader_eval.protocols import _scan, pythonic
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall

OPEN, CLOSE = "<|tool_call_start|>", "<|tool_call_end|>"
# blocks a lenient scan reads (each is a pythonic scan of its own): a diagnostic, bounded like
# pythonic's candidates
_MAX_BLOCKS = 32


#: stands in for a raw line break inside a quoted string while Python's parser reads the list
#: (one character for one, so every offset stays); a text that already holds it is read as is
_BREAK = "\ue000"


def _quoted_breaks(text: str) -> str:
    """``text`` with each raw line break inside a quoted string replaced by ``_BREAK`` (linear)."""
    if "\n" not in text or _BREAK in text:
        return text
    out = list(text)
    quote = ""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
            elif ch == "\n":
                out[i] = _BREAK
        elif ch in "'\"":
            quote = ch
        elif ch == "#":  # a comment runs to the line's end: an apostrophe in it opens no string
            end = text.find("\n", i)
            if end == -1:
                break
            i = end
            continue
        i += 1
    return "".join(out)


def _restore(value: object) -> object:
    if isinstance(value, str):
        return value.replace(_BREAK, "\n")
    if isinstance(value, dict):
        return {_restore(k): _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


def _as_lfm2(calls: list[ToolCall], shift: int = 0, source: str | None = None) -> list[ToolCall]:
    out = []
    for c in calls:
        span = None if c.span is None else (c.span[0] + shift, c.span[1] + shift)
        args = c.arguments if source is None else _restore(c.arguments)
        raw = c.raw if source is None or span is None else source[span[0] : span[1]]
        out.append(ToolCall(c.name, args, "lfm2", span, raw))  # type: ignore[arg-type]
    return out


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    if hi - lo < len(OPEN) + len(CLOSE) or not text.startswith(CLOSE, hi - len(CLOSE)):
        raise _scan.Fail(f"the calls must end with {CLOSE}, nothing after it")
    inner_lo = _scan.skip_ws(text, lo + len(OPEN))
    inner_hi = hi - len(CLOSE)
    while inner_hi > inner_lo and text[inner_hi - 1].isspace():
        inner_hi -= 1
    if inner_lo >= inner_hi:
        raise _scan.Fail(f"no calls between {OPEN} and {CLOSE}")
    if text.find(OPEN, inner_lo, inner_hi) != -1:
        raise _scan.Fail(f"a second {OPEN} block: one list holds every call")
    read = _quoted_breaks(text[inner_lo:inner_hi])
    calls, _ = pythonic.strict(read, 0, len(read), None)
    return _as_lfm2(calls, inner_lo, text), [(lo, hi)]


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    text = scan.text
    close: int | None = None  # the first closing token after the block's start (-1: none left)
    for s in itertools.islice(_scan.find_all(text, OPEN, scan.start), _MAX_BLOCKS):
        a = s + len(OPEN)
        if close is None or -1 < close < a:
            close = text.find(CLOSE, a)
        # the block ends at its closing token or the next opening one: blocks never overlap
        nxt = text.find(OPEN, a)
        ends = [e for e in (close, nxt) if e != -1]
        b = min(ends) if ends else len(text)
        yield from _as_lfm2(list(pythonic.lenient(_scan.Scan(_quoted_breaks(text[a:b]), 0))), a, text)


PROTOCOL = ToolCallProtocol(
    name="lfm2",
    strict=strict,
    lenient=lenient,
    opening=re.escape(OPEN),
    closing=(re.escape(CLOSE),),
    # LFM2's templates name its tool-list token; LFM2.5's write "List of tools: [" (the LFM2.5
    # template that renders calls writes them as above, and vLLM's lfm2 parser reads both families)
    template_markers=(OPEN, "<|tool_list_start|>", "List of tools: ["),
    lenient_needs=(OPEN,),
)
