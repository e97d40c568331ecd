"""Rubric criteria (``judge:NAME``) in ``compare`` and the checkpoint recommendation: compared with
the paired machinery of every metric, listed after the built-in metrics, and in the family that
decides the exit status only where every run gates the criterion (docs/judges.md)."""

from __future__ import annotations

from collections.abc import Sequence

from leader_eval.decide.checkpoints import recommend_checkpoint
from leader_eval.decide.compare import compare_runs
from leader_eval.report.compare import compare_markdown, format_compare
from leader_eval.report.html import render_report
from leader_eval.runs.evaluate import Run
from leader_eval.scoring.aggregate import group_metrics
from tests.support.runs import synthetic_run

IDS = [f"c{i}" for i in range(30)]
GOOD = [(1.0, 0.75)[i % 2] for i in range(30)]  # mean verdicts per case, over 4 verdicts each
BAD = [(0.25, 0.5, 0.0)[i % 3] for i in range(30)]


def _judged(
    label: str, verdicts: Sequence[float], *, gated: bool, why: str = "no calibration record", judge: str = "test:a"
) -> Run:
    """A run whose cases all pass 3 of 4 samples (the built-in metrics do not move) and whose
    criterion ``polite`` gave each case the mean verdict ``verdicts[i]`` over 4 verdicts; its
    summary entry says ``gated`` as a run with (or without) a calibrated judge records it."""
    run = synthetic_run(label, dict.fromkeys(IDS, 0.75))
    for case, value in zip(run.cases, verdicts, strict=True):
        case.update(n_samples=4, n_hard_fail=0, n_errors=0, n_context_overflow=0)  # what aggregate totals
        case.update({"judge:polite": value, "n_judge:polite": 4, "judge_errors:polite": 0, "judge_missing:polite": 0})
    overall = group_metrics(run.cases)
    overall["metrics"]["judge:polite"]["gated"] = gated
    run.summary.update(
        overall=overall,
        judges={
            "polite": {"gated": gated, "judge": {"model_id": judge}, **({} if gated else {"not_gated_because": why})}
        },
    )
    return run


def test_a_gated_criterion_that_credibly_regresses_fails_compare_and_is_listed_after_the_built_ins() -> None:
    c = compare_runs([_judged("v4", GOOD, gated=True), _judged("v7", BAD, gated=True)])
    pair = c.pairs[0]
    assert c.exit_status == 1 and pair.regressed == ["judge:polite"]
    names = [m.metric for m in pair.metrics]
    assert names[-1] == "judge:polite" and "score" in names[:-1]
    polite = pair.metrics[-1]
    assert polite.gated and polite.diff < 0 and polite.n_cases == 30
    assert polite.diff == sum(b - a for a, b in zip(GOOD, BAD, strict=True)) / 30
    assert "v7 credibly REGRESSES vs v4 in judge:polite" in c.verdict()
    out = format_compare(c)
    rows = [line for line in out.splitlines() if line.lstrip("| ").startswith(("score", "judge:polite"))]
    assert rows[0].lstrip("| ").startswith("score") and "REGRESSION" in rows[-1] and "(info)" not in rows[-1]
    md = compare_markdown(c)
    assert md.startswith("### ❌") and "judge:polite ^ |" in md and "**REGRESSION**" in md
    html = render_report([], comparison=c)
    assert "judge:polite ↑" in html and '<span class="bad">regression</span>' in html
    assert not c.messages


def test_a_criterion_gated_in_one_run_only_is_reported_not_gated_with_a_note() -> None:
    for gated in ((True, False), (False, False)):
        c = compare_runs([_judged("v4", GOOD, gated=gated[0]), _judged("v7", BAD, gated=gated[1])])
        polite = c.pairs[0].metrics[-1]
        assert polite.metric == "judge:polite" and polite.verdict == "regression" and not polite.gated
        assert c.exit_status == 0 and "no credible difference" in c.verdict()
        where = "gated in v4 only" if gated[0] else "gated in no run"
        assert c.messages == [f"judge:polite is reported, not gated ({where}): no calibration record"]
        assert "REGRESSION (info)" in format_compare(c) and f"note: judge:polite is reported, not gated ({where})" in (
            format_compare(c)
        )


def test_a_criterion_only_one_run_has_is_not_compared() -> None:
    c = compare_runs([_judged("v4", GOOD, gated=True), synthetic_run("v7", dict.fromkeys(IDS, 0.75))])
    assert c.exit_status == 0 and all(not m.metric.startswith("judge:") for m in c.pairs[0].metrics)


def test_the_checkpoint_recommendation_passes_over_a_checkpoint_worse_in_a_gated_criterion() -> None:
    # equal scores: the earliest would be recommended, unless its judge verdicts are credibly worse
    gated = recommend_checkpoint(
        compare_runs([_judged("step-100", BAD, gated=True), _judged("step-200", GOOD, gated=True)])
    )
    assert gated is not None and "judge:polite" in gated.metrics
    assert gated.recommended == "step-200" and gated.rows[0].credibly_worse
    ungated = recommend_checkpoint(
        compare_runs([_judged("step-100", BAD, gated=False), _judged("step-200", GOOD, gated=True)])
    )
    assert ungated is not None and "judge:polite" not in ungated.metrics and ungated.recommended == "step-100"


def test_a_criterion_judged_by_another_judge_is_not_compared() -> None:
    """Verdicts of two judges are not one measurement: a changed judge must neither show a
    regression nor hide one (review finding); the note says why."""
    c = compare_runs([_judged("v4", GOOD, gated=True), _judged("v7", BAD, gated=True, judge="test:b")])
    assert "judge:polite" not in [m.metric for m in c.pairs[0].metrics]
    assert c.exit_status == 0
    assert any("judge:polite is not compared: the runs were judged by different judges" in m for m in c.messages)
