"""The gate (``decide.gate``): a run against its golden, end to end on synthetic runs with real
result shapes (built the way ``evaluate.score_run`` builds them, as in test_golden.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from leader_eval.decide.gate import gate, gate_run_dir
from leader_eval.decide.golden import GoldenError, build_golden, golden_path, load_golden, write_golden
from leader_eval.report.gate import format_gate_table, gate_markdown
from leader_eval.runs.evaluate import read_run
from leader_eval.stats.metrics import ALL_METRICS
from leader_eval.suite.load import Suite
from tests.support.runs import N_SIM, difficulties, make_run, make_suite, write_run_dir

# ---------------------------------------------------------------------------------------------
# the gate


def _golden_for(tmp_path: Path, suite: Suite, p: Any, seed: int = 11) -> dict[str, Any]:
    return build_golden(make_run(suite, p, seed=seed))


def test_clearly_higher_golden_fails_with_table_and_exit_1(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run_dir = write_run_dir(make_run(suite, difficulties(24), seed=21), tmp_path / "run")
    golden_dir = tmp_path / "golden"
    assert gate_run_dir(run_dir, golden_dir, update=True).update.written  # type: ignore[union-attr]
    path = golden_path(golden_dir, suite.name, "main")

    # the honest golden passes its own run
    same = gate_run_dir(run_dir, golden_dir)
    assert same.exit_status == 0 and same.status == "pass", format_gate_table(same)

    # a reviewer edits the golden to demand a clearly higher score (and per-case rates to match)
    data = load_golden(path)
    assert data is not None
    data["metrics"]["score"]["value"] = min(1.0, data["metrics"]["score"]["value"] + 0.25)
    for rec in data["cases"].values():
        rec["pass_rate"] = min(1.0, rec["pass_rate"] + 0.25)
    write_golden(path, data)
    res = gate_run_dir(run_dir, golden_dir)
    assert res.exit_status == 1 and res.status == "fail"
    assert res.failed == ["score"]
    out = format_gate_table(res)
    assert out.splitlines()[0].startswith("gate FAIL")
    header = out.splitlines()[1]
    for col in ("metric", "golden", "now", "delta", "verdict"):
        assert col in header
    score_line = next(line for line in out.splitlines() if line.startswith("score"))
    assert "FAIL" in score_line and "-0.2" in score_line  # delta shown with its sign
    md = gate_markdown(res)
    assert md.startswith("### ❌") and "| score ^ |" in md and "**FAIL**" in md


def test_golden_named_as_a_file_gates_like_its_directory_and_another_suites_file_is_refused(
    tmp_path: Path,
) -> None:
    suite = make_suite(tmp_path)
    run_dir = write_run_dir(make_run(suite, difficulties(24), seed=21), tmp_path / "run")
    golden_dir = tmp_path / "golden"
    assert gate_run_dir(run_dir, golden_dir, update=True).update.written  # type: ignore[union-attr]
    path = golden_path(golden_dir, suite.name, "main")
    by_dir, by_file = gate_run_dir(run_dir, golden_dir), gate_run_dir(run_dir, path)
    assert by_file.status == by_dir.status == "pass"
    assert format_gate_table(by_file) == format_gate_table(by_dir)

    # another suite's golden named directly would pair no case and pass: refused, exit 2
    other = load_golden(path)
    assert other is not None
    other_path = tmp_path / "other.json"
    write_golden(other_path, {**other, "suite": "another_suite"})
    with pytest.raises(GoldenError, match=r"other\.json:1: a golden file of suite 'another_suite'"):
        gate_run_dir(run_dir, other_path)


def test_golden_value_edited_without_case_rates_still_fails(tmp_path: Path) -> None:
    # the acceptance edit: only the headline number changes; per-case rates no longer pair up with
    # it, but the current run's interval alone makes the shortfall credible
    suite = make_suite(tmp_path)
    run = make_run(suite, difficulties(24), seed=21)
    golden = build_golden(run)
    golden["metrics"]["score"]["value"] = round(run.summary["overall"]["metrics"]["score"]["value"] + 0.25, 4)
    golden["cases"] = {}
    res = gate(run, golden)
    assert res.exit_status == 1 and res.failed == ["score"]


def test_change_within_noise_passes(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run = make_run(suite, difficulties(24), seed=21)
    golden = build_golden(run)
    now = run.summary["overall"]["metrics"]["score"]["value"]
    # within tolerance
    golden["metrics"]["score"]["value"] = round(now + 0.015, 4)
    assert gate(run, golden).exit_status == 0
    # beyond a zero tolerance, but well inside the run's own noise
    golden["metrics"]["score"]["value"] = round(now + 0.03, 4)
    res = gate(run, golden, tolerances={"score": 0.0})
    assert res.exit_status == 0 and res.rows[0].metric == "score"
    assert next(r for r in res.rows if r.metric == "score").verdict == "pass"


def test_improvement_passes_and_suggests_update(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(make_run(suite, 0.5, seed=1))
    res = gate(make_run(suite, 0.9, seed=2), golden)
    assert res.exit_status == 0 and "score" in res.improved
    assert "--update-golden" in format_gate_table(res).splitlines()[0]


def test_hard_fail_rate_regression_fails(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(make_run(suite, 0.7, seed=1, p_hard=0.0))
    # same pass rate, but now most failures are hard fails (e.g. leaked tool-call XML)
    res = gate(make_run(suite, 0.7, seed=2, p_hard=0.8), golden, tolerances={"score": 0.2})
    assert res.exit_status == 1 and res.failed == ["hard_fail_rate"]


def test_stale_golden_fails_and_says_which(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run = make_run(suite, 0.8)
    golden = build_golden(run)
    golden["suite_hash"] = "0123abcd"
    res = gate(run, golden)
    assert res.status == "stale" and res.exit_status == 1
    assert f"golden is stale: suite content changed (hash 0123abcd -> {suite.content_hash})" in res.messages
    # another scorer version warns and still gates (issue 11: files of older versions keep working)
    golden = build_golden(run)
    golden["scorer_version"] = "0"
    res = gate(run, golden)
    assert res.status == "pass" and res.exit_status == 0
    assert any(m.startswith("warning: scorer version changed (0 -> ") for m in res.messages)
    assert "scorer version changed" in format_gate_table(res) and "scorer version changed" in gate_markdown(res)


def test_a_missing_golden_fails_with_the_file_and_the_command_unless_allowed(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run_dir = write_run_dir(make_run(suite, 0.8), tmp_path / "run")
    for strict in (False, True):
        res = gate_run_dir(run_dir, tmp_path / "golden", strict=strict)
        assert res.status == "missing" and res.exit_status == 1
        head = res.headline()
        assert head.startswith("gate FAIL") and "\n" not in head
        assert str(tmp_path / "golden" / "mini" / "main.json") in head
        # the command makes the baseline from a trusted run, never from the candidate being gated
        assert f"leader-eval update-golden TRUSTED_RUN_DIR --golden {tmp_path / 'golden'} --baseline main" in head
        assert str(run_dir) not in head
    assert gate_markdown(res).startswith("### ❌ gate FAIL")  # the job summary says what the exit status says
    allowed = gate_run_dir(run_dir, tmp_path / "golden", allow_missing=True)
    assert allowed.exit_status == 0 and allowed.headline().startswith("gate WARN")
    assert gate_markdown(allowed).startswith("### ⚠️ gate WARN")
    assert "--allow-missing-golden" in allowed.headline()
    other = gate_run_dir(run_dir, tmp_path / "golden", baseline="rc-2")
    assert other.exit_status == 1 and str(tmp_path / "golden" / "mini" / "rc-2.json") in other.headline()
    assert not (tmp_path / "golden").exists()


def test_any_model_is_gated_against_the_baseline_and_labels_never_choose_it(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden_dir = tmp_path / "golden"
    trusted = write_run_dir(make_run(suite, difficulties(24), seed=1, label="prod"), tmp_path / "prod")
    assert gate_run_dir(trusted, golden_dir, update=True).update.written  # type: ignore[union-attr]
    assert [p.name for p in (golden_dir / "mini").iterdir()] == ["main.json"]
    assert json.loads((golden_dir / "mini" / "main.json").read_text())["baseline"] == "main"
    # a new checkpoint under another label and model is gated against main, and a drop fails it
    worse = make_run(
        suite, np.clip(difficulties(24) - 0.5, 0, 1), seed=2, label="ckpt-v2", model_id="gguf:/ckpt/v2.gguf"
    )
    res = gate_run_dir(write_run_dir(worse, tmp_path / "v2"), golden_dir)
    assert res.status == "fail" and res.exit_status == 1, format_gate_table(res)
    assert "baseline main, label ckpt-v2" in res.headline()


def test_interrupted_or_partial_run_cannot_pass_the_gate(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(make_run(suite, 0.8, seed=1))
    res = gate(make_run(suite, 0.8, seed=2, status="running"), golden)
    assert res.status == "incomplete" and res.exit_status == 1
    res = gate(make_run(suite, 0.8, seed=2, case_ids=["c00", "c01", "c02"]), golden)
    assert res.status == "incomplete" and "covers 3 of the golden's 24 cases" in res.messages[0]


def test_gate_update_after_interrupted_run_keeps_golden(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden_dir = tmp_path / "golden"
    gate_run_dir(write_run_dir(make_run(suite, 0.8, seed=1), tmp_path / "a"), golden_dir, update=True)
    path = golden_path(golden_dir, suite.name, "main")
    before = path.read_bytes()
    res = gate_run_dir(
        write_run_dir(make_run(suite, 0.3, seed=2, status="running"), tmp_path / "b"), golden_dir, update=True
    )
    assert res.update is not None and not res.update.written
    assert res.exit_status == 1
    assert path.read_bytes() == before
    assert "golden not updated" in format_gate_table(res)


def test_run_dir_round_trip_matches_in_memory_gate(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run = make_run(suite, difficulties(24), seed=4)
    back = read_run(write_run_dir(run, tmp_path / "run"))
    golden = build_golden(make_run(suite, difficulties(24), seed=5))
    a, b = gate(run, golden), gate(back, golden)
    assert [(r.metric, r.verdict, r.delta) for r in a.rows] == [(r.metric, r.verdict, r.delta) for r in b.rows]


# ---------------------------------------------------------------------------------------------
# calibration by simulation


@pytest.mark.slow
@pytest.mark.usefixtures("fast_stats")
def test_gate_false_alarm_rate_matches_alpha(tmp_path: Path) -> None:
    """No real difference: the golden and the current run are two runs of one model (24 cases of
    varied difficulty, 5 samples each, some hard fails), every tolerance 0 so that only the
    statistics decide. Over 1,000 simulated pairs (fixed seeds) the gate must fail in 2-7% at
    alpha 0.05: five gating metrics are one Holm family, so the whole gate, not each metric,
    errs at alpha (without the correction it failed 15.7% of the time)."""
    suite = make_suite(tmp_path)
    p = difficulties(24, seed=7)
    zero = dict.fromkeys(ALL_METRICS, 0.0)
    fails = 0
    for i in range(N_SIM):
        golden = build_golden(make_run(suite, p, seed=10_000 + i, p_hard=0.3))
        fails += gate(make_run(suite, p, seed=20_000 + i, p_hard=0.3), golden, tolerances=zero).exit_status
    # under alpha: the exact count test for hard fails is conservative (a discrete test)
    assert 0.02 <= fails / N_SIM <= 0.07, fails


@pytest.mark.usefixtures("fast_stats")
def test_gate_detects_a_real_regression_most_of_the_time(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    p = difficulties(24, seed=7)
    worse = np.clip(p - 0.2, 0, 1)  # a real drop of 0.2 in every case's pass probability
    hits = sum(
        gate(make_run(suite, worse, seed=30_000 + i), build_golden(make_run(suite, p, seed=40_000 + i))).exit_status
        for i in range(100)
    )
    assert hits >= 80, hits


# --- the gate never passes without comparing (review findings, issue 19) -----------------------


def test_gate_as_a_function_refuses_a_golden_without_a_gating_metric(tmp_path: Path) -> None:
    """``load_golden`` refused it, but ``gate()`` is public: a golden of lenient_format_rate alone
    let a run that never passed a case gate green."""
    suite = make_suite(tmp_path, 6)
    golden = _golden_for(tmp_path, suite, 0.9)
    golden["metrics"] = {"lenient_format_rate": golden["metrics"]["lenient_format_rate"]}
    result = gate(make_run(suite, 0.0, seed=3), golden)
    assert result.status != "pass" and result.exit_status == 1
    assert "no gating metric" in result.headline()


@pytest.mark.parametrize("only", [n for n, m in ALL_METRICS.items() if m.gating and m.episode_key])
def test_a_gated_metric_the_run_does_not_have_fails_instead_of_being_skipped(tmp_path: Path, only: str) -> None:
    """A golden whose gated metric the run lacks (an episode suite whose episodes all errored) was
    'in the golden but not in the run: skipped', and the gate passed having compared nothing."""
    suite = make_suite(tmp_path, 6)
    golden = _golden_for(tmp_path, suite, 0.9)
    golden["metrics"] = {only: {**golden["metrics"]["score"], "value": 1.0}}
    result = gate(make_run(suite, 0.0, seed=3), golden)
    assert result.status == "incomplete" and result.exit_status == 1, result.headline()
    assert only in result.headline() and "cannot pass" in result.headline()


def test_a_run_with_no_measured_value_is_incomplete_not_a_regression(tmp_path: Path) -> None:
    """An all-error run has NaN metrics: the gate said 'credible regression in ...' over rows of
    n/a; it fails saying there is nothing to compare."""
    suite = make_suite(tmp_path, 6)
    golden = _golden_for(tmp_path, suite, 0.9)
    run = make_run(suite, 0.5, seed=3)
    for m in run.summary["overall"]["metrics"].values():
        m["value"] = float("nan")
    result = gate(run, golden)
    assert result.status == "incomplete" and result.exit_status == 1
    assert "nothing to compare, cannot pass" in result.headline() and "credible regression" not in result.headline()


def test_a_one_case_suite_that_collapses_fails_the_gate(tmp_path: Path) -> None:
    """One case still pairs with its golden: its samples are the evidence (the exact count test
    over one stratum). A 1.0 -> 0.0 collapse over 30 samples passed as "too few cases to judge"."""
    suite = make_suite(tmp_path, n_cases=1)
    golden = build_golden(make_run(suite, [1.0], n=30, seed=3))
    same = gate(make_run(suite, [1.0], n=30, seed=4), golden)
    assert same.status == "pass", format_gate_table(same)
    res = gate(make_run(suite, [0.0], n=30, seed=5), golden)
    assert res.status == "fail" and "score" in res.failed, format_gate_table(res)
    assert "over 1 cases" in format_gate_table(res)


def test_the_gate_table_leads_with_score_as_every_table(tmp_path: Path) -> None:
    """A golden file's metrics are stored sorted by name; the table lists them in the metric
    table's order (score first), as the run's summary, compare and the history do."""
    from leader_eval.stats.metrics import table_order

    suite = make_suite(tmp_path)
    run_dir = write_run_dir(make_run(suite, difficulties(24), seed=21), tmp_path / "run")
    gate_run_dir(run_dir, tmp_path / "golden", update=True)
    stored = list(load_golden(golden_path(tmp_path / "golden", suite.name, "main"))["metrics"])  # type: ignore[index]
    assert stored == sorted(stored) and stored[0] != "score"
    res = gate_run_dir(run_dir, tmp_path / "golden")
    tested = [r.metric for r in res.rows if r.kind == "test"]
    assert tested[0] == "score" and tested == table_order(tested)
    table_rows = [line for line in gate_markdown(res).splitlines() if line.startswith("| ") and "---" not in line]
    assert table_rows[1].startswith("| score ")
