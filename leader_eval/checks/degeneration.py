"""Output-shape checks: empty, truncated, looping, or only restating the prompt.

The longest repeated substring is found with hashes of fixed-length windows, verified by string
comparison, so a hash collision can never make a repeat up: in one pass by the compiled module
(``leader_eval/checks/_ngrams.pyx``, ``first_repeat``), else (not built, or past its work cap) with
polynomial hashes vectorised in numpy. A single window length decides pass/fail (``ceil`` of the
threshold); the exact length and the repeated span are computed only for outputs that fail. The
word n-gram counts (the n-gram rule, the prompt overlap) come from the same module's exact
counter where it is built, else from Python sets: the same numbers either way. Long outputs are
judged on their last ``window_chars`` characters: a runaway loop runs to the end of the output.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
import unicodedata
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from leader_eval.bounded.numeric import np
from leader_eval.checks import han_kana
from leader_eval.types import END_OF_TURN_TOKENS, CheckResult, Finding, Reason

_compiled: ModuleType | None
try:  # the word n-gram counts, compiled (built at install; see _ngrams.pyx)
    from leader_eval.checks import _ngrams as _compiled
except ImportError:  # not built (no C compiler where it was installed): the same counts, in Python
    _compiled = None


@dataclass(frozen=True)
class DegenerationConfig:
    ngram: int = 4
    max_ngram_repeat_fraction: float = 0.5  # fraction of word n-grams that are repeats
    max_repeated_substring_fraction: float = 0.5  # longest repeated substring / len(text)
    min_chars: int = 40  # shorter texts are never called loops
    max_prompt_overlap: float = 0.8  # replies that only restate the prompt
    # the model's end-of-turn tokens (ModelInfo.end_of_turn): an output of only these is empty
    eot_tokens: tuple[str, ...] = END_OF_TURN_TOKENS
    min_restate_words: int = 8  # shorter replies may quote the prompt freely ("@Ada take the map task")
    window_chars: int = 65_536  # longer outputs: judged on their tail (bounds the time per output)


# --- hashing ------------------------------------------------------------------------------

_BASE = 0x100000001B3  # odd, so invertible modulo 2**64
_BASE_INV = pow(_BASE, -1, 1 << 64)


@functools.lru_cache(maxsize=4)
def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """BASE**i and BASE**-i modulo 2**64 for i < n (numpy integer arithmetic wraps)."""
    pw = np.empty(n, dtype=np.uint64)
    inv = np.empty(n, dtype=np.uint64)
    pw[0] = inv[0] = 1
    if n > 1:
        pw[1:] = _BASE
        inv[1:] = _BASE_INV
        np.cumprod(pw, out=pw)
        np.cumprod(inv, out=inv)
    return pw, inv


def _power_table(n: int) -> tuple[np.ndarray, np.ndarray]:
    size = 4096
    while size < n:
        size *= 2
    pw, inv = _powers(size)
    return pw[:n], inv[:n]


class _Repeats:
    """Fixed-length repeated windows of one text."""

    def __init__(self, text: str, codes: np.ndarray | None = None) -> None:
        self.text = text
        self.n = len(text)
        self._codes = codes
        self._prefix: np.ndarray | None = None

    @property
    def prefix(self) -> np.ndarray:
        # built on first need: the compiled search (``pair``) never needs it
        if self._prefix is None:
            n = self.n
            codes = _codes(self.text) if self._codes is None else self._codes
            pw, self.inv = _power_table(n + 1)
            self._prefix = np.zeros(n + 1, dtype=np.uint64)
            np.cumsum(codes * pw[:n], out=self._prefix[1:])
        return self._prefix

    def _hashes(self, length: int) -> np.ndarray:
        m = self.n - length + 1
        prefix = self.prefix
        return (prefix[length : length + m] - prefix[:m]) * self.inv[:m]

    def any_repeat(self, length: int) -> bool:
        """Cheap test (may say True on a hash collision, and always does with the compiled search;
        ``pair`` then verifies)."""
        if length < 1 or length >= self.n:
            return False
        if _compiled is not None:
            return True  # ``pair`` decides in one pass
        s = np.sort(self._hashes(length))
        return bool((s[1:] == s[:-1]).any())

    def pair(self, length: int) -> tuple[int, int] | None:
        """The leftmost window of ``length`` chars that occurs again later, and that next
        occurrence; verified by comparing the strings."""
        if length < 1 or length >= self.n:
            return None
        if _compiled is not None:
            got = _compiled.first_repeat(self.text, length)
            if got is not None:  # None: past its probe cap, search with the hashes below
                return got if got[0] >= 0 else None
        h = self._hashes(length)
        # fast path: the leftmost window whose hash occurs again and that hash's next
        # occurrence, from one unstable sort; it is the first candidate the full search below
        # would try, so the answer is the same (the full search runs only after a collision)
        i = _leftmost_repeated(h)
        if i is None:
            return None
        j = i + 1 + int(np.flatnonzero(h[i + 1 :] == h[i])[0])
        if self.text[i : i + length] == self.text[j : j + length]:
            return i, j
        order, hs = _stable_argsort(h)
        eq = np.flatnonzero(hs[1:] == hs[:-1])
        if eq.size == 0:
            return None
        firsts = order[eq]
        seconds = order[eq + 1]
        t = self.text
        for k in np.argsort(firsts, kind="stable")[:64]:
            i, j = int(firsts[k]), int(seconds[k])
            if t[i : i + length] == t[j : j + length]:
                return i, j
        return None

    def extend(self, i: int, j: int, length: int) -> tuple[int, int, int]:
        """Grow an equal pair (i, j) of ``length`` chars as far as both sides agree."""
        t = self.text
        lo, hi = 0, self.n - (j + length)  # right extension: the largest k with equal slices
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if t[i + length : i + length + mid] == t[j + length : j + length + mid]:
                lo = mid
            else:
                hi = mid - 1
        length += lo
        lo, hi = 0, i  # left extension
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if t[i - mid : i] == t[j - mid : j]:
                lo = mid
            else:
                hi = mid - 1
        return i - lo, j - lo, length + lo

    def pair_if_any(self, length: int) -> tuple[int, int] | None:
        """``pair``, after two exact and cheaper ways to see that there is none."""
        if not _may_repeat(self.text, length) or not self.any_repeat(length):
            return None
        return self.pair(length)

    def longest(self, start: int = 1, found: tuple[int, int] | None = None) -> tuple[int, int, int]:
        """Longest repeated substring at least ``start`` long as (i, j, length); (0, 0, 0) if none.

        Known to exist at ``start`` (or ``start`` == 1): grow from there. Each round either
        proves the current length maximal or finds a longer verified pair. ``found``: the
        caller's ``pair(start)``, when it has it already.
        """
        if found is None:
            found = self.pair(start)
        if found is None:
            return 0, 0, 0
        i, j, length = self.extend(found[0], found[1], start)
        while True:
            nxt = self.pair_if_any(length + 1)
            if nxt is None:
                # the leftmost pair of the final length, for a stable report
                first = self.pair(length)
                return (first[0], first[1], length) if first else (i, j, length)
            i, j, length = self.extend(nxt[0], nxt[1], length + 1)

    def longest_below(self, limit: int) -> tuple[int, int, int]:
        """Longest repeated substring shorter than ``limit`` (binary search on the length).

        When a midpoint finds a pair that extends to E, the next probe is E + 1 rather than the
        next midpoint: the extension is often the longest repeat already (or close: a second
        step finds it), and one probe that finds nothing proves it, where midpoints would spend
        about log2(limit - E) more sorts of every window's hash getting there. After
        ``_STEPS_AFTER_FOUND`` such probes, midpoints again: text with many repeats of slowly
        growing length would otherwise be probed one plateau at a time.
        """
        lo, hi = 0, limit - 1
        steps = 0  # probes of lo + 1 left before the next midpoint
        while lo < hi:
            mid = lo + 1 if steps else (lo + hi + 1) // 2
            found = self.pair_if_any(mid)
            if found is None:
                hi = mid - 1
                steps = 0
            else:  # a verified pair that extends to E proves every length up to E
                lo = min(self.extend(found[0], found[1], mid)[2], hi)
                steps = steps - 1 if steps else _STEPS_AFTER_FOUND
        first = self.pair(lo) if lo else None
        return (first[0], first[1], lo) if first else (0, 0, 0)


_STEPS_AFTER_FOUND = 2
_POS_BITS = 17  # window positions fit: a window is at most 65,536 chars by default


def _leftmost_repeated(h: np.ndarray) -> int | None:
    """The smallest index whose value occurs again in ``h`` (None when all are distinct)."""
    if h.size < 2:
        return None
    order = np.argsort(h)
    dup = h[order[1:]] == h[order[:-1]]
    if not dup.any():
        return None
    in_run = np.zeros(h.size, dtype=bool)  # members of a run of equal values
    in_run[1:] = dup
    in_run[:-1] |= dup
    return int(order[in_run].min())


def _stable_argsort(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.argsort(h, kind="stable")`` and ``h`` in that order, faster: numpy's stable sort of
    uint64 is a timsort (~10 ms for 64K values), its quicksort ~3x faster. Sort unstably, number
    the runs of equal hashes, then sort (run number, position) packed in one int64, which is
    unique, so the plain sort is the stable order."""
    n = h.size
    if n >= 1 << _POS_BITS or n < 2:
        order = np.argsort(h, kind="stable")
        return order, h[order]
    order = np.argsort(h)
    hs = h[order]
    runs = np.zeros(n, dtype=np.int64)
    np.cumsum(hs[1:] != hs[:-1], out=runs[1:])
    key = (runs << _POS_BITS) | order.astype(np.int64)
    key.sort()
    return key & ((1 << _POS_BITS) - 1), hs


# --- word n-grams -------------------------------------------------------------------------


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)


def _grams(text: str, n: int) -> tuple[set[tuple[str, ...]], int]:
    """Distinct casefolded word n-grams of ``text`` and how many n-grams there are.
    (Measured: a set of word tuples beat 64-bit word hashes combined in numpy here.)"""
    words = text.lower().split()
    return set(zip(*(words[k:] for k in range(n)), strict=False)), max(0, len(words) - n + 1)


@functools.lru_cache(maxsize=64)
def _prompt_grams(prompt_text: str, n: int) -> frozenset[tuple[str, ...]]:
    # cached: every sample of a case shares one prompt
    return frozenset(_grams(prompt_text, n)[0])


@functools.lru_cache(maxsize=64)
def _prompt_index(prompt_text: str, n: int) -> Any:
    """The compiled counter's index of the prompt's words and n-grams (cached per case)."""
    assert _compiled is not None
    return _compiled.PromptIndex(prompt_text.lower(), n)


class _Counts(NamedTuple):
    """Word n-grams of one text: how many, how many distinct, and how many of the distinct ones
    are the prompt's (None until asked, on the Python path, which keeps ``grams`` for it)."""

    total: int
    distinct: int
    shared: int | None = None
    grams: set[tuple[str, ...]] | None = None


def _counts(text: str, n: int, prompt_text: str = "") -> _Counts:
    """``_grams`` as counts, by the compiled counter where it is built and the text is within
    its work cap (then ``shared`` is counted too, for ``prompt_text``), else by Python's sets."""
    if _compiled is not None and n >= 1:
        index = _prompt_index(prompt_text, n) if prompt_text else None
        got = _compiled.counts(text.lower(), n, index)
        if got is not None:
            return _Counts(got[0], got[1], got[2] if index is not None else None)
    grams, total = _grams(text, max(1, n))
    return _Counts(total, len(grams), None, grams)


@functools.lru_cache(maxsize=32)
def _end_token_pattern(tokens: tuple[str, ...]) -> re.Pattern[str] | None:
    ordered = sorted(set(tokens) - {""}, key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in ordered)) if ordered else None


def _is_empty(text: str, cfg: DegenerationConfig) -> bool:
    """Nothing visible: whitespace, invisible format characters (Unicode category Cf: zero-width
    space, BOM, joiners) and end-of-turn tokens only, whatever the length (a run of 30
    ``<|im_end|>`` is an empty turn, not a loop). Decided on the first visible character, so a
    long output costs one scan at most."""
    stripped = text.strip()
    if not stripped:
        return True
    lead = _invisible_run().match(stripped).end() if _invisible(stripped[0]) else 0  # type: ignore[union-attr]
    rest = stripped[lead:]
    pattern = _end_token_pattern(tuple(cfg.eot_tokens))
    if rest and (pattern is None or not pattern.match(rest)):
        return False  # visible text first
    return _invisible_run().fullmatch(pattern.sub("", rest)) is not None if rest and pattern else True


def is_empty(text: str, cfg: DegenerationConfig) -> bool:
    """The ``empty`` check's rule on any text (the scorer asks it of what a declared reasoning
    block leaves visible)."""
    return _is_empty(text, cfg)


#: letters and symbols that render as blank space (Hangul fillers, the blank braille pattern):
#: a message of them shows the room nothing, as one of spaces does
_BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _invisible(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch) == "Cf" or ch in _BLANK_GLYPHS


@functools.cache
def _invisible_run() -> re.Pattern[str]:
    """A run of ``_invisible`` characters, as one regex: a character loop in Python took 150 ms
    on 1 MB of zero-width spaces. Built on first need (~0.1 s: every code point is asked once),
    which only an output opening with an invisible character or an end token has."""
    chars = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if _invisible(c))
    return re.compile(f"[{re.escape(chars)}]*")


def _context(text: str, start: int, end: int) -> str:
    head = text[start : min(end, start + 60)]
    snippet = head + (" …" if end - start > 60 else "")
    return snippet.replace("\r", "\\r").replace("\n", "\\n")


# --- the checks ---------------------------------------------------------------------------


_MAX_BLOCKS = 64


def _may_repeat(text: str, length: int) -> bool:
    """False only if no substring of ``length`` chars occurs twice (an exact pre-check).

    Cut the text into blocks of b = (length + 1) // 2 chars at multiples of b: any run of
    ``length`` chars contains a whole block, so if a run occurs twice, so does that block (at
    the same distance). A block that never occurs again proves there is no such run, with one
    substring search per block (in C); on most outputs this replaces hashing every window.

    Only the blocks and the stretch of text a repeat can involve are searched: a repeat at i
    and j = i + d has 1 <= d and j + length <= n, so i <= n - length - 1; the first block at or
    after i starts before i + b and lies inside the run, and its copy starts within d <= n -
    length characters after it (the length-1000 runs of a 2 KB output: 3 of 4 blocks, each
    searched over three quarters of the text).
    """
    b = (length + 1) // 2
    n = len(text)
    if b < 1 or n // b > _MAX_BLOCKS:
        return True
    reach = n - length  # the largest distance between a run and its repeat
    last = min(n - b, reach + b - 2)  # the last block start a repeat can need
    return any(text.find(text[s : s + b], s + 1, s + reach + b) != -1 for s in range(0, last + 1, b))


def _repetition(text: str, distinct: int, total: int, cfg: DegenerationConfig) -> CheckResult:
    stripped_len = len(text.strip())
    if stripped_len < cfg.min_chars:
        return CheckResult("repetition", True, detail=f"shorter than {cfg.min_chars} chars: not judged")
    offset = max(0, len(text) - cfg.window_chars)
    window = text[offset:]
    n = len(window)
    ngram_frac = 1.0 - distinct / total if total else 0.0
    # fail iff longest / n > threshold, i.e. longest >= floor(threshold * n) + 1
    need = int(cfg.max_repeated_substring_fraction * n) + 1
    reps: _Repeats | None = None
    first: tuple[int, int] | None = None
    if need < n and _may_repeat(window, need):
        reps = _Repeats(window)
        first = reps.pair(need) if reps.any_repeat(need) else None
    long_repeat = first is not None
    data: dict[str, Any] = {
        "ngram": cfg.ngram,
        "ngram_repeat_fraction": round(ngram_frac, 4),
        "chars_judged": n,
        "window_start": offset,
    }
    ngram_fail = ngram_frac > cfg.max_ngram_repeat_fraction
    if not long_repeat and not ngram_fail:
        # exact length not needed to pass: it is below the threshold
        data["longest_repeat_fraction"] = None
        data["longest_repeat_below"] = need
        return CheckResult("repetition", True, data=data)
    if reps is None:
        reps = _Repeats(window)
    i, j, length = reps.longest(need, first) if first is not None else reps.longest_below(need)
    frac = length / n if n else 0.0
    data["longest_repeat_fraction"] = round(frac, 4)
    data["longest_repeat_chars"] = length
    findings: tuple[Finding, ...] = ()
    if length:
        start, end = offset + i, offset + j + length
        data["repeated_span"] = [start, end]
        data["repeated_text"] = text[offset + i : offset + i + min(length, 200)]
        findings = (Finding(Reason.REPETITION, start, end, text[start:end], _context(text, start, end)),)
    why = []
    if ngram_fail:
        why.append(f"{ngram_frac:.0%} of word {cfg.ngram}-grams repeat (max {cfg.max_ngram_repeat_fraction:.0%})")
    if long_repeat:
        limit = cfg.max_repeated_substring_fraction
        why.append(f"a {length}-char run repeats ({frac:.0%} of the text, max {limit:.0%})")
    return CheckResult("repetition", False, Reason.REPETITION, "; ".join(why), findings=findings, data=data)


def check_repetition(text: str, cfg: DegenerationConfig) -> CheckResult:
    """The ``repetition`` check alone, on any text: the scorer also runs it on each string
    argument of a call, where ~60 characters of JSON wrapper would otherwise dilute a short loop
    under the thresholds. Same ``min_chars`` and thresholds as on the whole output."""
    if len(text.strip()) < cfg.min_chars:
        return CheckResult("repetition", True, detail=f"shorter than {cfg.min_chars} chars: not judged")
    counts = _counts(text[max(0, len(text) - cfg.window_chars) :], max(1, cfg.ngram))
    return _repetition(text, counts.distinct, counts.total, cfg)


def repetition_passes(text: str, cfg: DegenerationConfig) -> bool:
    """True only if ``check_repetition(text, cfg)`` passes, usually decided on part of the text;
    False when that is not shown here (then the full check decides).

    A caller that needs only the verdict (the scorer's check of each call argument, where a
    pass leaves no record) skips most of the work: the long-repeat rule is decided by its exact
    pre-check ``_may_repeat`` alone (a possible repeat: not shown), and the word n-grams are
    counted in steps that stop once enough distinct ones are seen for the n-gram rule to pass
    (the distinct count only grows, and the rule is monotone in it)."""
    if len(text.strip()) < cfg.min_chars:
        return True
    window = text[max(0, len(text) - cfg.window_chars) :]
    need = int(cfg.max_repeated_substring_fraction * len(window)) + 1
    if need < len(window) and _may_repeat(window, need):
        return False
    n = max(1, cfg.ngram)
    limit = cfg.max_ngram_repeat_fraction
    if _compiled is not None:
        got = _compiled.counts(window.lower(), n, None)
        if got is not None:  # the exact count, faster than the early stop below
            return not ((1.0 - got[1] / got[0] if got[0] else 0.0) > limit)
    words = window.lower().split()
    total = max(0, len(words) - n + 1)

    def fails(distinct: int) -> bool:  # _repetition's n-gram rule, as it computes it
        return (1.0 - distinct / total if total else 0.0) > limit

    enough = next((d for d in range(max(0, int((1.0 - limit) * total) - 2), total + 1) if not fails(d)), None)
    if enough is None or (enough and fails(enough - 1) is False):
        return False  # no count passes, or the estimate started too high: let the full check decide
    grams = zip(*(words[k:] for k in range(n)), strict=False)
    seen: set[tuple[str, ...]] = set()
    read = 0
    while len(seen) < enough and read < total:
        step = enough - len(seen)  # at least this many more n-grams are needed to get there
        seen.update(itertools.islice(grams, step))
        read += step
    return len(seen) >= enough


def _restates(counts: _Counts, prompt_text: str, cfg: DegenerationConfig, window: str) -> CheckResult:
    by_chars = _han_kana_overlap(window, prompt_text, cfg)
    words_judged = bool(prompt_text) and counts.distinct > 0 and counts.total + cfg.ngram - 1 >= cfg.min_restate_words
    if not words_judged and by_chars is None:
        return CheckResult("restates_prompt", True, data={"prompt_overlap": None})
    overlap = -1.0
    if words_judged:
        if cfg.ngram < 1:
            shared = 0  # a prompt has no n-grams of fewer than one word (as the Python sets count)
        elif counts.shared is not None:
            shared = counts.shared
        else:
            assert counts.grams is not None  # the Python path keeps its set
            shared = len(counts.grams & _prompt_grams(prompt_text, cfg.ngram))
        overlap = shared / counts.distinct
    data: dict[str, Any] = {"prompt_overlap": round(overlap, 4), "ngram": cfg.ngram}
    unit = "word"
    if by_chars is not None and by_chars > overlap:
        overlap, unit = by_chars, "character"
        data = {"prompt_overlap": round(overlap, 4), "ngram": 2 * cfg.ngram, "by": "character"}
    if overlap > cfg.max_prompt_overlap:
        detail = (
            f"{overlap:.0%} of the reply's word {cfg.ngram}-grams are copied from the prompt"
            if unit == "word"
            else f"{overlap:.0%} of the reply's Han and kana characters are in runs of {2 * cfg.ngram} from the prompt"
        )
        return CheckResult("restates_prompt", False, Reason.RESTATES_PROMPT, detail, data=data)
    return CheckResult("restates_prompt", True, data=data)


def _streams(text: str) -> list[str]:
    """The stream of each passage of Han and kana in ``text`` (``checks.han_kana``)."""
    return [han_kana.stream(m.group()) for m in han_kana.passages(text)]


@functools.lru_cache(maxsize=64)
def _prompt_char_grams(prompt_text: str, n: int) -> frozenset[str]:
    # cached: every sample of a case shares one prompt
    return frozenset(st[i : i + n] for st in _streams(prompt_text) for i in range(len(st) - n + 1))


def _han_kana_overlap(window: str, prompt_text: str, cfg: DegenerationConfig) -> float | None:
    """The share of the reply's Han and kana characters that lie in a run of twice ``ngram`` of
    them (about what ``ngram`` English words say) copied from the prompt, or None where the reply
    holds fewer than twice ``min_restate_words`` such characters. Chinese and Japanese write no
    spaces: as words, a reply restating a Chinese prompt was a handful of clause-long words, too
    few to be judged. Characters covered, not distinct n-grams: lines read back in another order
    join into n-grams the prompt lacks, and one copied clause among a few of the reply's own
    would otherwise be all of its n-grams."""
    if window.isascii() or not prompt_text or cfg.ngram < 1:
        return None
    n = 2 * cfg.ngram
    streams = _streams(window)
    held = sum(map(len, streams))
    if held == 0 or held < 2 * cfg.min_restate_words:
        return None
    prompt = _prompt_char_grams(prompt_text, n)
    covered = 0
    for st in streams:
        reach = 0  # the end of the run covered so far
        for i in range(len(st) - n + 1):
            if st[i : i + n] in prompt:
                covered += i + n - max(reach, i)
                reach = i + n
    return covered / held


def check_degeneration(
    text: str, *, stop_reason: str | None, prompt_text: str, cfg: DegenerationConfig
) -> list[CheckResult]:
    """Four named checks, always in this order: empty, truncated, repetition, restates_prompt."""
    empty = _is_empty(text, cfg)
    results = [
        CheckResult("empty", False, Reason.EMPTY, "no visible text", hard=True)
        if empty
        else CheckResult("empty", True),
        CheckResult("truncated", False, Reason.TRUNCATED, "stopped at the token limit")
        if stop_reason == "length"
        else CheckResult("truncated", True),
    ]
    if empty:
        results.append(CheckResult("repetition", True, detail="empty: not judged"))
        results.append(CheckResult("restates_prompt", True, detail="empty: not judged"))
        return results
    window = text[max(0, len(text) - cfg.window_chars) :]
    counts = _counts(window, max(1, cfg.ngram), prompt_text if cfg.ngram >= 1 else "")
    results.append(_repetition(text, counts.distinct, counts.total, cfg))
    results.append(_restates(counts, prompt_text, cfg, window))
    return results
