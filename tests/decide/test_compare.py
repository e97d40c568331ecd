"""Checkpoint comparison end to end on synthetic runs (built as in test_golden.py)."""

from __future__ import annotations

from math import comb
from pathlib import Path

import numpy as np
import pytest

from leader_eval.decide.compare import compare_runs
from leader_eval.errors import LeaderEvalError
from leader_eval.report.compare import compare_markdown, format_compare
from tests.support.runs import N_SIM, difficulties, make_run, make_suite, write_run_dir


def test_clear_regression_exits_1_with_flips_and_reasons(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    p = difficulties(24)
    a = make_run(suite, p, seed=1, label="v4")
    b = make_run(suite, np.clip(p - 0.4, 0, 1), seed=2, label="v7")
    c = compare_runs([a, b])
    assert c.exit_status == 1
    pair = c.pairs[0]
    score = next(m for m in pair.metrics if m.metric == "score")
    assert score.verdict == "regression" and score.diff < 0 and score.high < 0 and score.p_value < 0.05
    assert score.a.value == pytest.approx(a.summary["overall"]["metrics"]["score"]["value"])
    regressed = [f for f in pair.flips if f.direction == "regressed"]
    assert regressed and all(f.a_rate > 0.5 >= f.b_rate for f in regressed)
    # the reason each flipped case now fails is the most frequent failure reason of its samples
    f = regressed[0]
    counts: dict[str, int] = {}
    for s in b.scores:
        if s.case_id == f.case_id and not s.passed:
            counts[s.reason or ""] = counts.get(s.reason or "", 0) + 1
    assert f.reason == sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    out = format_compare(c)
    assert "v7 credibly REGRESSES vs v4" in out and f.case_id in out and f.reason in out
    md = compare_markdown(c)
    assert md.startswith("### ❌") and "**REGRESSION**" in md and "case flips" in md


def test_improvement_is_not_a_regression(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    p = difficulties(24)
    c = compare_runs([make_run(suite, p * 0.5, seed=1, label="v4"), make_run(suite, p, seed=2, label="v7")])
    assert c.exit_status == 0
    assert "credibly improves" in c.verdict()
    assert any(f.direction == "fixed" for f in c.pairs[0].flips)


def test_runs_of_one_configuration_are_pooled_with_their_spread(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    p = difficulties(24)
    v4 = make_run(suite, p, seed=1, label="v4")
    v7 = [make_run(suite, p, seed=s, label="v7", n=3) for s in (11, 12, 13)]
    c = compare_runs([v4, *v7])
    assert [g.name for g in c.groups] == ["v4", "v7"]
    g7 = c.groups[1]
    assert len(g7.runs) == 3 and g7.seeds == [11, 12, 13]
    assert sum(pc.n_scored for pc in g7.cases.values()) == 3 * 3 * 24  # samples pooled per case
    pooled = g7.cases["c05"]
    assert pooled.n_scored == 9
    assert pooled.n_passed == sum(s.passed for r in v7 for s in r.scores if s.case_id == "c05")
    vals = [r.summary["overall"]["metrics"]["score"]["value"] for r in v7]
    assert sorted(g7.run_values["score"]) == sorted(vals) and "score" in g7.spread
    assert f"{min(vals):.3f}..{max(vals):.3f} over 3 runs" in format_compare(c)
    # the same run given twice is counted once
    assert len(compare_runs([v4, v7[0], v7[0]]).groups[1].runs) == 1


def test_different_sampling_is_not_pooled(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    a = make_run(suite, 0.7, seed=1, label="v7", n=3)
    b = make_run(suite, 0.7, seed=2, label="v7", n=5)  # same label, different samples per case
    c = compare_runs([a, b])
    assert [g.name for g in c.groups] == ["v7", "v7#2"] and len(c.pairs) == 1
    assert any("share label 'v7'" in m for m in c.messages)


def test_one_configuration_has_nothing_to_compare(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    c = compare_runs([make_run(suite, 0.7, seed=s, label="v7") for s in (1, 2)])
    assert c.exit_status == 0 and not c.pairs and "nothing to compare" in format_compare(c)


def test_bad_input_raises_for_exit_2(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    a = make_run(suite, 0.7, seed=1, label="v4")
    with pytest.raises(LeaderEvalError, match="at least two"):
        compare_runs([a])
    b = make_run(suite, 0.7, seed=2, label="v7")
    b.manifest["identity"]["suite_hash"] = "deadbeef"
    with pytest.raises(LeaderEvalError, match="different suite content") as err:
        compare_runs([a, b])
    assert err.value.exit_status == 2
    c = make_run(suite, 0.7, seed=3, label="v7", scorer_version="0")
    with pytest.raises(LeaderEvalError, match="scorer versions"):
        compare_runs([a, c])
    with pytest.raises(LeaderEvalError):
        compare_runs([a, tmp_path / "no-such-run"])


def test_compare_reads_run_directories(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    a = write_run_dir(make_run(suite, 0.8, seed=1, label="v4"), tmp_path / "a")
    b = write_run_dir(make_run(suite, 0.8, seed=2, label="v7"), tmp_path / "b")
    c = compare_runs([a, b])
    assert [g.name for g in c.groups] == ["v4", "v7"] and c.pairs[0].n_cases == 24


def test_pass_at_k_and_pass_hat_k(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    p = difficulties(24)
    a = make_run(suite, p, seed=1, label="v4", n=4)
    b = make_run(suite, p, seed=2, label="v7", n=4)
    c = compare_runs([a, b], ks=[1, 2, 4])
    pk = c.pairs[0].pass_k
    # pass@1 and pass^1 are the score
    score_a = a.summary["overall"]["metrics"]["score"]["value"]
    assert pk[1][0] == pytest.approx(score_a) and pk[1][2] == pytest.approx(score_a)
    # unbiased estimators, averaged over cases: pass@k = 1 - C(n-c,k)/C(n,k), pass^k = C(c,k)/C(n,k)
    passed = {cid: sum(s.passed for s in a.scores if s.case_id == cid) for cid in a.manifest["identity"]["cases"]}
    want_at = np.mean([1 - comb(4 - c_, 2) / comb(4, 2) for c_ in passed.values()])
    want_hat = np.mean([comb(c_, 2) / comb(4, 2) for c_ in passed.values()])
    assert pk[2][0] == pytest.approx(want_at) and pk[2][2] == pytest.approx(want_hat)
    for k in (1, 2, 4):
        at_a, _, hat_a, _ = pk[k]
        assert hat_a <= score_a + 1e-12 <= at_a + 2e-12
    assert compare_runs([a, b]).pairs[0].pass_k.keys() == {1, 4}  # default: 1 and the smallest n
    assert "pass@k" in format_compare(c) and "pass^k" in compare_markdown(c)


@pytest.mark.slow
@pytest.mark.usefixtures("fast_stats")
def test_compare_false_alarm_rate_matches_alpha(tmp_path: Path) -> None:
    """No real difference: A and B are two runs of one model. Over 1,000 simulated pairs (fixed
    seeds; fewer resamples, see ``fast_stats``) compare must exit 1 in 2-7% at alpha 0.05."""
    suite = make_suite(tmp_path)
    p = difficulties(24, seed=7)
    flags = sum(
        compare_runs(
            [
                make_run(suite, p, seed=50_000 + i, label="a", p_hard=0.3),
                make_run(suite, p, seed=60_000 + i, label="b", p_hard=0.3),
            ]
        ).exit_status
        for i in range(N_SIM)
    )
    # under alpha: the exact count test for hard fails is conservative (a discrete test)
    assert 0.02 <= flags / N_SIM <= 0.07, flags


@pytest.mark.usefixtures("fast_stats")
def test_compare_detects_a_real_regression_most_of_the_time(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    p = difficulties(24, seed=7)
    worse = np.clip(p - 0.2, 0, 1)  # a real drop of 0.2 in every case's pass probability
    hits = sum(
        compare_runs(
            [make_run(suite, p, seed=70_000 + i, label="a"), make_run(suite, worse, seed=80_000 + i, label="b")]
        ).exit_status
        for i in range(100)
    )
    assert hits >= 80, hits
