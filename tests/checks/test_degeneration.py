"""Degeneration checks against the hand-labeled corpus, and the longest-repeat search against
a brute-force oracle."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.checks.degeneration import (
    DegenerationConfig,
    _may_repeat,
    _Repeats,
    _stable_argsort,
    check_degeneration,
    check_repetition,
    repetition_passes,
)
from leader_eval.types import Reason
from tests.corpus import DegenerationRecord, load_degeneration_records

RECORDS = load_degeneration_records()
CLASSES = (Reason.EMPTY, Reason.TRUNCATED, Reason.REPETITION, Reason.RESTATES_PROMPT)


def _run(rec: DegenerationRecord):
    return check_degeneration(
        rec.text, stop_reason=rec.stop_reason, prompt_text=rec.prompt, cfg=DegenerationConfig(**rec.config)
    )


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.id)
def test_corpus_record(rec: DegenerationRecord) -> None:
    results = _run(rec)
    assert [r.check for r in results] == ["empty", "truncated", "repetition", "restates_prompt"]
    failed = [str(r.reason) for r in results if not r.passed]
    assert sorted(failed) == sorted(rec.expected), f"{rec.id} ({rec.note}): {[r.to_dict() for r in results]}"
    rep = results[2]
    if "repetition" in rec.expected:
        (finding,) = rep.findings
        span = (finding.start, finding.end)
        assert span == rec.spans["repetition"], f"{rec.id}: got {rec.text[span[0] : span[1]]!r}"
        assert rep.data["repeated_span"] == list(span)
        assert 0 < rep.data["longest_repeat_fraction"] <= 1
        assert 0 <= rep.data["ngram_repeat_fraction"] <= 1


def test_precision_and_recall_per_reason() -> None:
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for rec in RECORDS:
        got = {str(r.reason) for r in _run(rec) if not r.passed}
        want = set(rec.expected)
        for r in got & want:
            tp[r] += 1
        for r in got - want:
            fp[r] += 1
        for r in want - got:
            fn[r] += 1
    print("\ndegeneration reason    records  precision  recall")
    low = []
    for cls in map(str, CLASSES):
        precision = tp[cls] / (tp[cls] + fp[cls]) if tp[cls] + fp[cls] else 1.0
        recall = tp[cls] / (tp[cls] + fn[cls]) if tp[cls] + fn[cls] else 1.0
        print(f"{cls:<22} {tp[cls] + fn[cls]:>7}  {precision:>9.3f}  {recall:>6.3f}")
        if precision < 0.98 or recall < 0.98:
            low.append(cls)
    assert not low


def test_corpus_covers_every_reason() -> None:
    per = Counter(r for rec in RECORDS for r in rec.expected)
    for cls in CLASSES:
        assert per[str(cls)] >= 15, f"{cls}: {per[str(cls)]}"
    assert sum(1 for r in RECORDS if not r.expected) >= 15


def _naive_longest(text: str) -> int:
    for length in range(len(text) - 1, 0, -1):
        seen: set[str] = set()
        for i in range(len(text) - length + 1):
            s = text[i : i + length]
            if s in seen:
                return length
            seen.add(s)
    return 0


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \n", min_size=2, max_size=60))
def test_longest_repeat_matches_brute_force(text: str) -> None:
    reps = _Repeats(text)
    want = _naive_longest(text)
    i, j, length = reps.longest_below(len(text))
    assert length == want
    if length:
        assert i < j and text[i : i + length] == text[j : j + length]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab \n", min_size=1, max_size=60), st.integers(min_value=1, max_value=60))
def test_the_block_precheck_never_hides_a_repeat(text: str, length: int) -> None:
    # the pre-check may say "maybe" freely, but "no" must mean no run of `length` chars repeats
    if not _may_repeat(text, length):
        assert _naive_longest(text) < length


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6), max_size=300), st.booleans())
def test_fast_stable_argsort_is_the_stable_argsort(values: list[int], big: bool) -> None:
    h = np.array(values, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15 if big else 1)
    order, ordered = _stable_argsort(h)
    want = np.argsort(h, kind="stable")
    assert order.tolist() == want.tolist() and ordered.tolist() == h[want].tolist()


def test_only_the_tail_of_a_huge_output_is_judged() -> None:
    text = "@Ada map the hills, please, and report back. " * 40_000  # ~1.8 MB loop
    rep = check_degeneration(text, stop_reason="length", prompt_text="", cfg=DegenerationConfig())[2]
    assert not rep.passed and rep.data["window_start"] == len(text) - 65_536
    (f,) = rep.findings
    assert f.end == len(text) and f.start >= rep.data["window_start"]


def test_a_passing_output_reports_the_bound_not_a_guess() -> None:
    text = "@Ada please map the east hills today; @Bo, Cy will help with the sacks after lunch."
    rep = check_degeneration(text, stop_reason="stop", prompt_text="", cfg=DegenerationConfig())[2]
    assert rep.passed and rep.data["longest_repeat_fraction"] is None
    assert rep.data["longest_repeat_below"] == len(text) // 2 + 1


@settings(max_examples=400, deadline=None)
@given(
    words=st.lists(st.sampled_from(["go", "Go", "to", "the", "river", "mill", "now.", "x"]), max_size=120),
    loop=st.integers(0, 6),
    ngram=st.integers(1, 5),
    ngram_limit=st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0]),
    substring_limit=st.sampled_from([0.1, 0.5, 0.9]),
    min_chars=st.sampled_from([0, 10, 40]),
)
def test_repetition_passes_only_where_the_check_passes(
    words: list[str], loop: int, ngram: int, ngram_limit: float, substring_limit: float, min_chars: int
) -> None:
    # the scorer skips the full repetition check of a call argument when this says it passes:
    # a wrong True would hide a loop in a message
    text = " ".join(words) + " ab cd" * loop
    cfg = DegenerationConfig(
        ngram=ngram,
        max_ngram_repeat_fraction=ngram_limit,
        max_repeated_substring_fraction=substring_limit,
        min_chars=min_chars,
    )
    if repetition_passes(text, cfg):
        assert check_repetition(text, cfg).passed, (text, cfg)
