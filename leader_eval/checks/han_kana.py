"""Han and kana: scripts written without spaces between words.

Rules that count words (an echo of the scaffold, a reply restating its prompt) read runs of word
characters; in Chinese and Japanese such a run is a whole clause, so those rules compare these
scripts by character instead. A *passage* is a run of Han and kana characters with gaps of at
most ``GAP`` other characters between them: punctuation, digits, list markers, emoji, markup or a
tool's name written in Latin letters sit inside it, an English phrase ends it (names in Han
scattered through an English reply are no passage). Its *stream* is its Han and kana characters
alone (what separates them dropped, as an echo of words drops what separates the words).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

#: Han and kana (the body of a character class): the iteration marks 々 〆 〇, hiragana and
#: katakana, the unified ideographs and their extensions A to H, compatibility ideographs, and
#: half-width katakana
HAN_KANA = "\u3005-\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
#: the most other characters between two Han or kana characters of one passage: `escalate`,
#: `</p><p>`, "①", an emoji, " 3 " fit; " builds the login page; " (an English clause) does not
GAP = 16


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(passage, run, not Han or kana), compiled at their first use: re's compiler spends ~7 ms
    on these ranges, and only a suite whose scaffold or a reply that holds Han or kana asks.
    A passage's gaps are possessive and never Han or kana: linear, and a gap too long ends it
    after reading at most GAP + 1 characters."""
    return (
        re.compile(f"[{HAN_KANA}](?:[^{HAN_KANA}]{{0,{GAP}}}+[{HAN_KANA}])*+"),
        re.compile(f"[{HAN_KANA}]+"),
        re.compile(f"[^{HAN_KANA}]+"),
    )


def passages(text: str, lo: int = 0, hi: int | None = None) -> Iterable[re.Match[str]]:
    """The passages of ``text[lo:hi]``, in order."""
    return _patterns()[0].finditer(text, lo, len(text) if hi is None else hi)


def stream(passage: str) -> str:
    """A passage's Han and kana characters alone."""
    return _patterns()[2].sub("", passage)


def offsets(passage: str, wanted: Iterable[int]) -> list[int]:
    """Where in ``passage`` each of the ``wanted`` stream offsets (ascending) sits: read piece by
    piece only as far as the last one."""
    out: list[int] = []
    pending = iter(wanted)
    k = next(pending, None)
    done = 0  # stream characters before the current piece
    for m in _patterns()[1].finditer(passage):
        while k is not None and k < done + (m.end() - m.start()):
            out.append(m.start() + k - done)
            k = next(pending, None)
        if k is None:
            break
        done += m.end() - m.start()
    return out
