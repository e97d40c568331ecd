"""pass@k and pass^k in every summary (reported, never gated), and one-case groups' intervals."""

from __future__ import annotations

from dataclasses import replace
from math import comb
from pathlib import Path

import numpy as np
import pytest

from leader_eval.decide.compare import compare_runs
from leader_eval.decide.gate import gate
from leader_eval.decide.golden import build_golden
from leader_eval.report.compare import format_compare
from leader_eval.report.gate import format_gate_table
from leader_eval.scoring.aggregate import case_results, summarize
from leader_eval.stats.core import rate_ci
from leader_eval.suite.load import Suite, load_suite
from tests.conftest import MINIMAL_SUITE
from tests.support.runs import make_scores, make_suite, run_from_scores


def _suite(tmp_path: Path, extra: str = "") -> Suite:
    p = tmp_path / "mini.yaml"
    p.write_text(MINIMAL_SUITE.replace("cases:\n", extra + "cases:\n", 1), encoding="utf-8")
    return load_suite(p)


def _scores(suite: Suite, passes: dict[str, list[bool]]):  # type: ignore[no-untyped-def]
    base = make_scores([c.id for c in suite.cases], [1.0] * len(suite.cases), 1, np.random.default_rng(0))
    by_case = {s.case_id: s for s in base}
    out = []
    for cid, outcomes in passes.items():
        for j, ok in enumerate(outcomes):
            out.append(replace(by_case[cid], index=j, passed=ok, reason=None if ok else "wrong_value"))
    return out


def test_every_summary_reports_pass_at_k_and_pass_hat_k_with_intervals(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 12)
    rng = np.random.default_rng(3)
    p = rng.uniform(0.1, 0.9, 12)
    scores = make_scores([c.id for c in suite.cases], p, 4, rng)
    # one case lost a sample (an error): it has 3 scored samples, short of k = 4
    scores = [s for s in scores if not (s.case_id == "c05" and s.index == 3)]
    summary = summarize(suite, case_results(suite.cases, scores))
    pk = summary["overall"]["pass_k"]
    assert set(pk) == {"pass@1", "pass^1", "pass@4", "pass^4"}  # default: 1 and the samples per case
    passed = {c: sum(s.passed for s in scores if s.case_id == c) for c in {s.case_id for s in scores}}
    full = [c for c in passed if c != "c05"]
    want_at4 = np.mean([1 - comb(4 - passed[c], 4) / comb(4, 4) for c in full])
    want_hat4 = np.mean([comb(passed[c], 4) / comb(4, 4) for c in full])
    assert pk["pass@4"]["value"] == pytest.approx(want_at4) and pk["pass^4"]["value"] == pytest.approx(want_hat4)
    assert pk["pass@4"]["n_cases"] == 11 and pk["pass@4"]["n_cases_short"] == 1
    assert pk["pass@4"]["cases_short"] == ["c05"] and "fewer than 4 scored samples" in pk["pass@4"]["note"]
    assert pk["pass@1"]["n_cases_short"] == 0 and pk["pass@1"]["value"] == pytest.approx(
        summary["overall"]["metrics"]["score"]["value"]
    )
    for e in pk.values():
        assert e["low"] <= e["value"] <= e["high"] and e["high"] > e["low"]
    # reported, not gated: the golden keeps no pass@k and the gate shows it apart from its table
    run = run_from_scores(suite, scores, n=4)
    golden = build_golden(run)
    assert not any(name.startswith("pass") for name in golden["metrics"])
    text = format_gate_table(gate(run, golden))
    assert "reported, not gated: pass@1" in text and "1 case(s) short of 4 samples" in text


def test_a_suite_asks_for_its_own_k(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "pass_k: [2, 3]\n")
    assert suite.pass_k == (2, 3)
    results = case_results(suite.cases, _scores(suite, {"hello": [True, False], "goal": [True, True]}))
    pk = summarize(suite, results)["overall"]["pass_k"]
    assert set(pk) == {"pass@2", "pass^2", "pass@3", "pass^3"}
    # no case has 3 samples: pass@3 has no value, and every case is named as short, never scored 0
    assert np.isnan(pk["pass@3"]["value"]) and pk["pass@3"]["n_cases_short"] == 2


def test_a_one_case_tag_shows_the_wilson_interval_over_its_samples(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    outcomes = {"hello": [True, False, True], "goal": [True, False, False]}
    summary = summarize(suite, case_results(suite.cases, _scores(suite, outcomes)))
    tag = summary["by_tag"]["goal"]  # only the case "goal" has this tag
    score = tag["metrics"]["score"]
    want = rate_ci(1, 3)
    assert (score["low"], score["high"]) == pytest.approx((want.low, want.high))
    assert "one case" in score["note"] and "3 samples" in score["note"]
    for e in tag["pass_k"].values():
        assert e["high"] > e["low"] and "one case" in e["note"]
    # pass@3 of one case with 1 of 3 passing: certain (C(2,3) = 0), its interval still has width
    assert tag["pass_k"]["pass@3"]["value"] == 1.0 and tag["pass_k"]["pass@3"]["low"] < 1.0


def test_compare_shows_pass_k_intervals_and_short_cases(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 10)
    rng = np.random.default_rng(1)
    a = run_from_scores(suite, make_scores([c.id for c in suite.cases], [0.5] * 10, 3, rng), n=3, label="a")
    b = run_from_scores(suite, make_scores([c.id for c in suite.cases], [0.6] * 10, 3, rng), n=3, label="b")
    c = compare_runs([a, b], ks=[1, 3, 5])
    pair = c.pairs[0]
    assert pair.pass_k_ci["pass@5"][0]["n_cases_short"] == 10
    assert pair.pass_k_ci["pass@3"][0]["low"] < pair.pass_k_ci["pass@3"][0]["value"]
    text = format_compare(c)
    assert "pass@k a [95% CI]" in text and "(10 short)" in text
