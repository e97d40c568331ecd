"""``leader-eval flaky`` and the golden's quarantine list."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from leader_eval.decide.flaky import find_flaky, format_flaky
from leader_eval.decide.golden import GoldenError, build_golden, gate, load_golden, update_golden, write_golden
from leader_eval.errors import LeaderEvalError
from leader_eval.stats.core import chi2_sf, clopper_pearson
from tests.support.runs import difficulties, make_run, make_suite, run_from_scores, write_run_dir

ROOT = Path(__file__).resolve().parents[2]


def test_clopper_pearson_and_chi_square_tail_match_known_values() -> None:
    assert clopper_pearson(3, 10) == pytest.approx((0.066739, 0.652453), abs=1e-6)
    assert clopper_pearson(0, 10) == pytest.approx((0.0, 0.308497), abs=1e-6)
    assert clopper_pearson(10, 10)[1] == 1.0
    assert chi2_sf(3.841459, 1) == pytest.approx(0.05, abs=1e-6)
    assert chi2_sf(5.991465, 2) == pytest.approx(0.05, abs=1e-6)
    assert chi2_sf(0.5, 4) == pytest.approx(np.exp(-0.25) * 1.25)  # closed form for df = 4
    # exact coverage: the interval covers p = 0.3 at n = 20 in at least 95% of outcomes
    from math import comb

    cover = sum(
        comb(20, x) * 0.3**x * 0.7 ** (20 - x)
        for x in range(21)
        if clopper_pearson(x, 20)[0] <= 0.3 <= clopper_pearson(x, 20)[1]
    )
    assert cover >= 0.95


def test_flaky_finds_uncertain_cases_and_overdispersed_runs(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 8)
    # c00, c01 always pass; c02..c05 pass half the time; c06, c07: one run always passes,
    # the other two never (a case that depends on the run, not on chance)
    p_runs = [
        [1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0],
        [1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0],
        [1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0],
    ]
    runs = [make_run(suite, p, n=10, seed=s) for s, p in enumerate(p_runs)]
    report = find_flaky(runs)
    by_id = {c.case_id: c for c in report.cases}
    assert not by_id["c00"].flaky and by_id["c00"].p_value is None  # nothing varies
    for cid in ("c02", "c03", "c04", "c05"):
        c = by_id[cid]
        assert c.flaky and 0.05 < c.low < c.rate < c.high < 0.95
        assert not c.overdispersed  # binomial noise
    for cid in ("c06", "c07"):
        c = by_id[cid]
        assert c.overdispersed and c.p_value is not None and c.p_value < 1e-4 and c.p_holm >= c.p_value
    text = format_flaky(report)
    assert "c02" in text and "OVERDISPERSED" in text and "p (Holm)" in text


def test_flaky_refuses_runs_of_different_checkpoints(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 4)
    a = write_run_dir(make_run(suite, 0.5, seed=1), tmp_path / "a")
    b = write_run_dir(make_run(suite, 0.5, seed=2, model_id="gguf:/m/other.gguf"), tmp_path / "b")
    with pytest.raises(LeaderEvalError, match="model_id"):
        find_flaky([a, b])
    out = subprocess.run(
        [sys.executable, "-m", "leader_eval.cli.app", "flaky", str(a), str(b)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "model_id" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "leader_eval.cli.app", "flaky", str(a)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "at least two runs" in out.stderr


@pytest.mark.model
def test_flaky_on_three_seeded_runs_of_the_embedded_model(tmp_path: Path, local_backend) -> None:  # type: ignore[no-untyped-def]
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import RunOptions

    suite = tmp_path / "mini.yaml"
    from tests.conftest import MINIMAL_SUITE

    suite.write_text(MINIMAL_SUITE, encoding="utf-8")
    dirs = []
    for seed in (1, 2, 3):
        out = tmp_path / f"r{seed}"
        run(suite, RunOptions(seed=seed, samples=4, out=out, progress=False), backend=local_backend)
        dirs.append(str(out))
    cli = subprocess.run(
        [sys.executable, "-m", "leader_eval.cli.app", "flaky", *dirs, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    data = json.loads(cli.stdout)
    assert data["seeds"] == [1, 2, 3] and {c["case_id"] for c in data["cases"]} == {"hello", "goal"}
    for c in data["cases"]:
        assert sum(c["scored"]) > 0 and c["low"] <= c["rate"] <= c["high"]
        assert c["flaky"] == (c["low"] > 0.05 and c["high"] < 0.95)
        varies = 0 < sum(c["passed"]) < sum(c["scored"])
        assert (c["p_value"] is not None) == varies
    text = subprocess.run(
        [sys.executable, "-m", "leader_eval.cli.app", "flaky", *dirs], capture_output=True, text=True, timeout=300
    ).stdout
    assert "Clopper-Pearson" in text and "chi-square" in text


# ---------------------------------------------------------------------------------------------
# quarantine


def _quarantine(case: str, expires: str, since: str = "2026-11-01") -> dict[str, str]:
    return {"case": case, "reason": "flaky at v7 (leader-eval flaky)", "date": since, "expires": expires}


def test_a_quarantined_case_cannot_fail_the_gate_an_expired_one_can(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 24)
    p = difficulties(24, seed=2)
    golden = build_golden(make_run(suite, p, n=5, seed=1), budgets={"max_hard_fails": 0})
    # the current run is the same model, except that six cases now always fail, hard
    names = [f"c{i:02d}" for i in range(6)]
    same = make_run(suite, p, n=5, seed=2).scores
    scores = [
        replace(s, passed=False, hard_fail=True, reason="empty", strict_format=False, tool_correct=False)
        if s.case_id in names
        else s
        for s in same
    ]
    current = run_from_scores(suite, scores, n=5, seed=2)
    assert gate(current, golden).exit_status == 1  # without quarantine: a credible regression
    golden["quarantine"] = [_quarantine(c, "2026-12-31") for c in names]
    today = date(2026, 11, 26)
    res = gate(current, golden, today=today)
    assert res.exit_status == 0, [r.explanation for r in res.rows]
    assert sum("quarantined: c0" in m for m in res.messages) == 6
    budget = next(r for r in res.rows if r.metric == "max_hard_fails")
    assert budget.now == 0  # the hard fails were all in quarantined cases
    # expired 3 days ago: still honoured, with a warning
    res = gate(current, golden, today=date(2027, 1, 3))
    assert res.exit_status == 0 and any(m.startswith("warning: quarantine of case 'c00' expired") for m in res.messages)
    # expired 8 days ago: the golden is refused (exit 2)
    with pytest.raises(GoldenError, match=r"^g\.json:1: .*expired on 2026-12-31 \(more than 7 days ago\)"):
        gate(current, golden, today=date(2027, 1, 8), golden_file=Path("g.json"))


def test_quarantine_entries_are_checked(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 4)
    run = make_run(suite, 0.5, seed=1)
    golden = build_golden(run)
    for bad, msg in (
        ({"case": "c00", "reason": "x", "date": "2026-11-01"}, "exactly the keys"),
        (_quarantine("c00", "next week"), "YYYY-MM-DD"),
        (_quarantine("c00", "2026-10-01"), "before its date"),
        ({**_quarantine("c00", "2026-12-01"), "reason": " "}, "give a reason"),
    ):
        with pytest.raises(GoldenError, match=msg):
            gate(run, {**golden, "quarantine": [bad]}, today=date(2026, 11, 26))


def test_update_golden_keeps_the_quarantine_and_never_adds_to_it(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 6)
    golden_dir = tmp_path / "golden"
    first = update_golden(make_run(suite, 0.5, n=4, seed=1), golden_dir)
    assert first.written and "quarantine" not in (load_golden(first.path) or {})
    data = load_golden(first.path) or {}
    data["quarantine"] = [_quarantine("c03", "2027-01-31")]
    write_golden(first.path, data)
    # a run in which c01 is flaky-looking does not put it on the list; c03 stays
    again = update_golden(make_run(suite, [0.5, 0.0, 0.5, 0.5, 0.5, 0.5], n=4, seed=2), golden_dir)
    assert again.written
    assert (load_golden(again.path) or {})["quarantine"] == [_quarantine("c03", "2027-01-31")]
