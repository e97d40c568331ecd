"""A golden's quarantine list (``decide.quarantine``): shown, cannot fail the gate, until it expires."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest

from leader_eval.decide.gate import gate
from leader_eval.decide.golden import GoldenError, build_golden, load_golden, update_golden, write_golden
from tests.support.runs import difficulties, make_run, make_suite, run_from_scores


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
