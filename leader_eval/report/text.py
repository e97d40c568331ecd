"""Raw model output as displayable segments: nothing hidden, nothing interpreted.

``segments(text, special_tokens, spans)`` cuts a raw output into plain text and marked pieces:

- ``tok``: a special token (the model's list from the manifest, plus anything shaped ``<|...|>``);
- ``ws``: whitespace a reader could miss: a newline (shown as ``↵`` then the line break), a tab
  (``→``), a carriage return (``␍``), and spaces that are leading, trailing, next to a line break
  or in a run of two or more (``·`` each);
- ``ctl``: a character that would be invisible or reorder text: C0/C1 controls, zero-width and
  bidirectional controls, no-break and line/paragraph separators, the BOM; shown as ``⟨U+XXXX⟩``;
- ``bad``: a byte that was not valid UTF-8 (a lone surrogate from ``surrogateescape``, shown
  ``⟨\\xNN⟩``) or any other lone surrogate (``⟨U+D8xx⟩``);
- ``leak``: a located finding, wrapping the pieces inside it, named by its reasons.

A segment is a plain ``str`` (shown as is) or a list: ``[kind, shown]`` or
``["leak", "reason, ...", [segments]]``. Nothing here produces markup: the page inserts every
``shown`` string as text, so a ``</script>`` or an ``onerror=`` in an output stays text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

Segment = str | list[Any]

#: invisible or text-reordering characters, shown by code point
_INVISIBLE = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00a0\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e"
    "\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\ufff9-\ufffb"
)
_GENERIC_TOKEN = r"<\|[^|<>\s]{1,48}\|>"


@lru_cache(maxsize=64)
def _pattern(special_tokens: tuple[str, ...]) -> re.Pattern[str]:
    toks = "|".join(re.escape(t) for t in sorted(set(special_tokens), key=len, reverse=True) if t)
    tok = f"(?P<tok>{toks + '|' if toks else ''}{_GENERIC_TOKEN})"
    # one character-class test per position before any alternative is tried: without it the
    # engine tries every special token at every character (about 10x slower on plain prose)
    firsts = "".join(sorted({re.escape(t[0]) for t in special_tokens if t} | {"<"}))
    return re.compile(
        f"(?=[{firsts}\n\t\r {_INVISIBLE}\ud800-\udfff])(?:" + tok + r"|(?P<nl>\n)|(?P<tab>\t)|(?P<cr>\r)"
        r"|(?P<sp>(?:^ +)|(?: +$)|(?: +(?=\n))|(?:(?<=\n) +)|(?: {2,}))"
        f"|(?P<ctl>[{_INVISIBLE}])|(?P<bad>[\ud800-\udfff]))"
    )


def visible(text: str) -> str:
    """``text`` with lone surrogates written as escapes, so it can be encoded and shown."""
    if not _has_surrogate(text):
        return text
    return "".join(_bad(ch) if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _bad(ch: str) -> str:
    cp = ord(ch)
    return f"⟨\\x{cp - 0xDC00:02x}⟩" if 0xDC80 <= cp <= 0xDCFF else f"⟨U+{cp:04X}⟩"


@lru_cache(maxsize=64)
def _token_firsts(special_tokens: tuple[str, ...]) -> frozenset[str]:
    return frozenset(t[0] for t in special_tokens if t) | {"<"}


def _nothing_to_mark(text: str, special_tokens: tuple[str, ...]) -> bool:
    """Whether ``_pattern`` can match nowhere in ``text``, told without running it (~2 us a text
    otherwise; a report segments each sample's output and each case's prompt): printable ASCII
    (no control, no invisible character, no surrogate) with no character a token opens with, and
    its spaces single and inside the text."""
    return (
        text.isascii()
        and text.isprintable()
        and "  " not in text
        and text[:1] != " "
        and text[-1:] != " "
        and not any(c in text for c in _token_firsts(special_tokens))
    )


def _plain_segments(text: str, special_tokens: tuple[str, ...]) -> list[Segment]:
    if _nothing_to_mark(text, special_tokens):
        return [text] if text else []
    out: list[Segment] = []
    pos = 0
    for m in _pattern(special_tokens).finditer(text):
        if m.start() > pos:
            out.append(text[pos : m.start()])
        kind = m.lastgroup
        s = m.group()
        if kind == "tok":
            out.append(["tok", s])
        elif kind == "nl":
            out.append(["ws", "↵"])
            out.append("\n")
        elif kind == "tab":
            out.append(["ws", "→\t"])
        elif kind == "cr":
            out.append(["ws", "␍"])
        elif kind == "sp":
            out.append(["ws", "·" * len(s)])
        elif kind == "ctl":
            out.append(["ctl", f"⟨U+{ord(s):04X}⟩"])
        else:
            out.append(["bad", _bad(s)])
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def segments(
    text: str, special_tokens: Sequence[str] = (), spans: Iterable[tuple[int, int, str]] = ()
) -> list[Segment]:
    """Segments of ``text``; ``spans`` are (start, end, reason) in ``text`` to mark as leaks.

    Overlapping spans merge into one marked piece carrying every reason.
    """
    toks = tuple(special_tokens)
    merged: list[list[Any]] = []
    for start, end, reason in sorted((s, e, r) for s, e, r in spans if 0 <= s < e <= len(text)):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            if reason not in merged[-1][2]:
                merged[-1][2].append(reason)
        else:
            merged.append([start, end, [reason]])
    out: list[Segment] = []
    pos = 0
    for start, end, reasons in merged:
        out.extend(_plain_segments(text[pos:start], toks))
        out.append(["leak", ", ".join(reasons), _plain_segments(text[start:end], toks)])
        pos = end
    out.extend(_plain_segments(text[pos:], toks))
    return out


def leak_spans(
    text: str, checks: Sequence[dict[str, Any]], calls: Sequence[dict[str, Any]]
) -> list[tuple[int, int, str]]:
    """Where each finding of the scored checks sits in the raw ``text``.

    A ``text`` finding's offsets are in the visible text (the raw output minus parsed markup),
    which only ever drops characters, so its match is at or after that offset in the raw text.
    A finding inside a call's arguments is looked up inside that call's span, as written or as
    JSON would escape it. A finding that cannot be located is listed with its check, not marked.
    """
    out = []
    for c in checks:
        for f in c.get("findings") or []:
            needle = str(f.get("text") or "")
            if not needle:
                continue
            where = str(f.get("where", "text"))
            at = -1
            if where == "text":
                at = text.find(needle, max(0, int(f.get("start", 0))))
                if at < 0:
                    at = text.find(needle)
                length = len(needle)
            else:
                m = re.match(r"call\[(\d+)\]", where)
                span = None
                if m and int(m.group(1)) < len(calls):
                    span = calls[int(m.group(1))].get("span")
                lo, hi = (int(span[0]), int(span[1])) if span else (0, len(text))
                length = len(needle)
                at = text.find(needle, lo, hi)
                if at < 0:
                    escaped = json.dumps(needle, ensure_ascii=False)[1:-1]
                    at = text.find(escaped, lo, hi)
                    length = len(escaped)
            if at >= 0:
                out.append((at, at + length, str(f.get("reason") or c.get("reason") or "finding")))
    return out
