"""The compiled word n-gram counter (``leader_eval.checks._ngrams``) gives exactly the counts of the
pure-Python sets it replaces, and the degeneration checks give the same records either way.

Built at install (setup.py, Cython); where it is not built these tests skip, except under
LEADER_EVAL_CI=1, where a missing counter is a failure: CI must measure what users run.
"""

from __future__ import annotations

import dataclasses
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.checks import degeneration
from leader_eval.checks.degeneration import DegenerationConfig, check_degeneration, check_repetition, repetition_passes

if degeneration._compiled is None:
    if os.environ.get("LEADER_EVAL_CI") == "1":
        pytest.fail("leader_eval.checks._ngrams is not built (pip install -e . compiles it)", pytrace=False)
    pytest.skip("leader_eval.checks._ngrams is not built", allow_module_level=True)

ngrams = degeneration._compiled

# words that are equal only after lower(), Unicode whitespace that str.split() cuts on (and
# look-alikes it does not), final sigma, astral characters, surrogates: the classes where a
# hand-written tokenizer would part from str.split()
_ALPHABET = [
    *"ab AB\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0.,",
    "\u1680",
    "\u2000",
    "\u200a",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",  # whitespace
    "\u200b",
    "\u180e",
    "\ufeff",  # not whitespace to str.split()
    "\u03a3",
    "\u03c3",
    "\u03c2",
    "\u0130",
    "i",
    "\u01c5",
    "\u00df",
    "\U0001f600",
    "\ud800",
]
_TEXT = st.lists(st.sampled_from(_ALPHABET), max_size=80).map("".join)


def _python_counts(text: str, n: int, prompt: str) -> tuple[int, int, int]:
    grams, total = degeneration._grams(text, n)
    return total, len(grams), len(grams & degeneration._prompt_grams(prompt, n))


@settings(max_examples=1500, deadline=None)
@given(text=_TEXT, prompt=_TEXT, n=st.integers(1, 5))
def test_counts_equal_the_python_sets(text: str, prompt: str, n: int) -> None:
    index = ngrams.PromptIndex(prompt.lower(), n)
    assert ngrams.counts(text.lower(), n, index) == _python_counts(text, n, prompt)
    total, distinct, _ = _python_counts(text, n, "")
    assert ngrams.counts(text.lower(), n) == (total, distinct, 0)


def test_counts_on_long_repetitive_text() -> None:
    rng = random.Random(3)
    words = ["@ada", "please", "dig", "the", "foundation", "Σοφία", "über", "🙂", "x" * 300]
    prompt = " ".join(rng.choice(words) for _ in range(5000))
    for size in (0, 1, 3, 4, 50, 20_000):
        text = "\n".join(rng.choice(words) for _ in range(size))
        for n in (1, 4, 9):
            got = ngrams.counts(text.lower(), n, ngrams.PromptIndex(prompt.lower(), n))
            assert got == _python_counts(text, n, prompt)


def _first_repeat_brute_force(text: str, length: int) -> tuple[int, int]:
    for i in range(len(text) - length + 1):
        for j in range(i + 1, len(text) - length + 1):
            if text[i : i + length] == text[j : j + length]:
                return i, j
    return -1, -1


@settings(max_examples=1500, deadline=None)
@given(
    text=st.lists(st.sampled_from(["a", "b", " ", "\u03a3", "\U0001f600", "\ud800"]), min_size=1, max_size=60).map(
        "".join
    ),
    data=st.data(),
)
def test_first_repeat_is_the_leftmost_repeated_window_and_its_next_copy(text: str, data: st.DataObject) -> None:
    length = data.draw(st.integers(1, len(text)))
    assert ngrams.first_repeat(text, length) == _first_repeat_brute_force(text, length)


def test_first_repeat_on_a_long_loop() -> None:
    text = "We build the mill. " * 3000 + "Done."
    assert ngrams.first_repeat(text, 1000) == (0, 19)
    # the longest repeat: the loop less one sentence ("Done." ends only one copy)
    assert ngrams.first_repeat(text, len(text) - 24) == (0, 19)
    assert ngrams.first_repeat(text, len(text) - 23) == (-1, -1)
    assert ngrams.first_repeat(text, 10, probes_per_window=0) is None  # past the cap: the caller searches


def test_work_cap_gives_the_text_back_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "the loop the loop the loop " * 40
    assert ngrams.counts(text, 4, probes_per_word=0) is None  # a repeated word needs a probe
    assert not ngrams.PromptIndex(text, 4, probes_per_word=0).complete
    # and the checks then count with Python's sets: same records as the compiled path
    cfg = DegenerationConfig()
    want = check_degeneration(text, stop_reason=None, prompt_text=text[:200], cfg=cfg)
    monkeypatch.setattr(degeneration, "_compiled", _Capped(ngrams))
    degeneration._prompt_index.cache_clear()
    try:
        assert check_degeneration(text, stop_reason=None, prompt_text=text[:200], cfg=cfg) == want
    finally:
        degeneration._prompt_index.cache_clear()


class _Capped:
    """The compiled module with a zero work cap: every count falls back to Python."""

    def __init__(self, module: object) -> None:
        self._m = module

    def PromptIndex(self, text: str, n: int) -> object:
        return self._m.PromptIndex(text, n, probes_per_word=0)  # type: ignore[attr-defined]

    def counts(self, text: str, n: int, prompt: object = None) -> object:
        return self._m.counts(text, n, prompt, probes_per_word=0)  # type: ignore[attr-defined]

    def first_repeat(self, text: str, length: int) -> object:
        return self._m.first_repeat(text, length, probes_per_window=0)  # type: ignore[attr-defined]


def _corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    units = ["@Ada please dig. ", "go ", "the river ", "Σ ς σ ", "İi ", "a\u2028b ", "x\u200by "]
    out = []
    for _ in range(300):
        base = " ".join(rng.choice(["We build the mill.", "Bo takes the map.", "Rain at four."]) for _ in range(40))
        loop = rng.choice(units) * rng.randrange(0, 60)
        at = rng.randrange(len(base) + 1)
        out.append(base[:at] + loop + base[at:])
    return out


@pytest.mark.parametrize(
    "cfg", [DegenerationConfig(), DegenerationConfig(ngram=1, window_chars=500), DegenerationConfig(ngram=7)]
)
def test_checks_give_the_same_records_without_the_counter(
    cfg: DegenerationConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _corpus(cfg.ngram)
    prompt = texts[0][:1500]
    compiled = [
        (
            check_degeneration(t, stop_reason=None, prompt_text=prompt, cfg=cfg),
            check_repetition(t, cfg),
            repetition_passes(t, cfg),
        )
        for t in texts
    ]
    monkeypatch.setattr(degeneration, "_compiled", None)
    python = [
        (
            check_degeneration(t, stop_reason=None, prompt_text=prompt, cfg=cfg),
            check_repetition(t, cfg),
            repetition_passes(t, cfg),
        )
        for t in texts
    ]
    for (deg_c, rep_c, pass_c), (deg_p, rep_p, pass_p) in zip(compiled, python, strict=True):
        assert deg_c == deg_p
        assert rep_c == rep_p
        # repetition_passes may say False where the full check passes ("not shown"), never True
        # where it fails; with the counter it decides the n-gram rule exactly, so it says True
        # wherever the Python path does
        assert not pass_c or rep_c.passed
        assert not pass_p or rep_p.passed
        assert pass_c or not pass_p


# --- the scaffold-echo prefilter (EchoGrams) ---------------------------------------------------

_SCAFFOLDS = (
    "You never do the work yourself: you read the room, decide who does what, and act only by tools.",
    "Der Leiter weist Aufgaben zu: niemand arbeitet ohne Auftrag, und jede Nachricht ist kurz. the key room",
)
# scaffold words, their case variants, KELVIN SIGN ("\u212aey" is "key"), non-ASCII letters that
# \w matches (so the Unicode word split and the ASCII skeleton part), separators of every kind
_ECHO_PIECES = st.one_of(
    st.sampled_from([w for s in _SCAFFOLDS for w in s.split()]),
    st.sampled_from(["YOU", "Read", "\u212aey", "\u212a", "é", "caf\u00e9", "İ", "ß", "_", "x9", "Straße"]),
    st.sampled_from([" ", ", ", "\n", "\u3000", "\u00a0", "’", "\u2014", "-", "__"]),
    st.text(max_size=3),
)
_ECHO_TEXTS = st.lists(_ECHO_PIECES, max_size=80).map("".join)


@pytest.mark.parametrize("scaffold", [_SCAFFOLDS[:1], _SCAFFOLDS])  # all-ASCII, and not
@settings(max_examples=400, deadline=None)
@given(text=_ECHO_TEXTS, min_words=st.integers(2, 9))
def test_the_compiled_echo_prefilter_changes_no_echo_finding(
    scaffold: tuple[str, ...], text: str, min_words: int
) -> None:
    from leader_eval.checks.leakage import (
        LeakConfig,
        _ascii_words,
        _candidate_keys,
        _scaffold_echoes,
        compile_leak_config,
    )

    idx = compile_leak_config(LeakConfig(scaffold_texts=scaffold, scaffold_min_words=min_words)).scaffold
    assert idx is not None and idx.echo is not None
    python = dataclasses.replace(idx, echo=None)
    assert _scaffold_echoes(text, 0, len(text), idx) == _scaffold_echoes(text, 0, len(text), python)
    if text.isascii():
        # False is a proof: no stride-th window of the text's words is a gram
        keys = _candidate_keys(_ascii_words(text), idx, idx.bgrams, idx.bends)
        assert idx.echo.candidate(text) == (keys is not None and not idx.bgrams.keys().isdisjoint(keys))


def test_the_echo_prefilter_finds_an_echo_anywhere_in_a_long_text() -> None:
    from leader_eval.checks.leakage import LeakConfig, _scaffold_echoes, compile_leak_config

    idx = compile_leak_config(LeakConfig(scaffold_texts=_SCAFFOLDS[:1])).scaffold
    assert idx is not None and idx.echo is not None
    echo = "you read the ROOM, decide who does what, and act only by tools"
    for pad in (0, 1, 5, 6, 7, 500):
        text = "word " * pad + echo + " end"
        start = text.index("you")
        assert idx.echo.candidate(text)
        assert _scaffold_echoes(text, 0, len(text), idx) == [(start, start + len(echo))]
    assert not idx.echo.candidate("word " * 500 + "you read the room, decide who")  # 7 words: no gram of 12
