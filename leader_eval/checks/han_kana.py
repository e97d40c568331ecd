"""Han and kana: scripts written without spaces between words.

Rules that count words (an echo of the scaffold, a reply restating its prompt) read runs of word
characters; in Chinese and Japanese such a run is a whole clause, so those rules compare these
scripts by character instead. A *passage* is a run of Han and kana characters, blanks, digits and
punctuation (a Latin word ends it: names in Han scattered through an English reply are no
passage); its *stream* is its Han and kana characters alone (what separates them dropped, as an
echo of words drops what separates the words).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

#: Han and kana (the body of a character class): the iteration marks 々 〆 〇, hiragana and
#: katakana, the unified ideographs and their extensions A to H, compatibility ideographs, and
#: half-width katakana
HAN_KANA = "\u3005-\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
# what may sit between the characters of one passage: blanks, digits and punctuation (ASCII,
# Latin-1's, general, CJK and full-width)
_BETWEEN = (
    r"\s0-9!-/:-@\[-`{-~\u00a0-\u00bf\u2000-\u206f\u3000-\u3004\u3008-\u303f\uff01-\uff20\uff3b-\uff40\uff5b-\uff65"
)
_NOT_HAN_KANA = re.compile(f"[^{HAN_KANA}]+")
_RUN = re.compile(f"[{HAN_KANA}]+")


@functools.cache
def passages(min_chars: int) -> re.Pattern[str]:
    """Runs of at least ``min_chars`` Han, kana, blanks, digits and punctuation: every passage
    holding that many Han and kana characters is inside one (the caller keeps those whose
    ``stream`` is that long). One character class, so the scan is in C and linear, and a text
    whose runs are all shorter yields nothing (no object per piece of a mixed flood)."""
    if min_chars <= 1:  # a run that opens with one: blanks and punctuation alone are no passage
        return re.compile(f"[{HAN_KANA}][{HAN_KANA}{_BETWEEN}]*")
    return re.compile(f"[{HAN_KANA}{_BETWEEN}]{{{min_chars},}}")


def stream(passage: str) -> str:
    """A passage's Han and kana characters alone."""
    return _NOT_HAN_KANA.sub("", passage)


def offsets(passage: str, wanted: Iterable[int]) -> list[int]:
    """Where in ``passage`` each of the ``wanted`` stream offsets (ascending) sits: read piece by
    piece only as far as the last one."""
    out: list[int] = []
    pending = iter(wanted)
    k = next(pending, None)
    done = 0  # stream characters before the current piece
    for m in _RUN.finditer(passage):
        while k is not None and k < done + (m.end() - m.start()):
            out.append(m.start() + k - done)
            k = next(pending, None)
        if k is None:
            break
        done += m.end() - m.start()
    return out
