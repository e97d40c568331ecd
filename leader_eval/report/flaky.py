"""``leader-eval flaky``'s tables: the flaky cases, then the overdispersion test per case
(the decision: ``decide.flaky``)."""

from __future__ import annotations

from leader_eval.decide.flaky import FLAKY_HIGH, FLAKY_LOW, FlakyReport
from leader_eval.inert import inert
from leader_eval.report.terminal import table

__all__ = ["format_flaky"]


def format_flaky(report: FlakyReport) -> str:
    """Two tables: flaky cases (rates and intervals), then the overdispersion test per case."""
    runs = len(report.runs)
    lines = [
        f"{runs} runs of one checkpoint (seeds {', '.join(map(str, report.seeds))}), {len(report.cases)} cases",
        f"flaky: the 95% Clopper-Pearson interval of the pooled pass rate lies inside ({FLAKY_LOW}, {FLAKY_HIGH})",
    ]
    lines.extend(f"note: {m}" for m in report.messages)
    flaky = report.flaky
    if flaky:
        lines.append(
            table(
                ["case", "passed/scored per run", "pooled rate [95% CP]"],
                [
                    [
                        c.case_id,
                        " ".join(f"{p}/{n}" for p, n in zip(c.passed, c.scored, strict=True)),
                        f"{c.rate:.3f} [{c.low:.3f}, {c.high:.3f}]",
                    ]
                    for c in flaky
                ],
            )
        )
    else:
        lines.append("no flaky case")
    lines.append("")
    lines.append(
        f"runs disagree beyond binomial noise (chi-square across runs, df {runs - 1}, Holm over the cases tested, "
        f"alpha {report.alpha:g}):"
    )
    tested = sorted((c for c in report.cases if c.p_value is not None), key=lambda c: (c.p_value or 0.0, c.case_id))
    if tested:
        lines.append(
            table(
                ["case", "passed/scored per run", "chi2", "p", "p (Holm)", "verdict"],
                [
                    [
                        c.case_id,
                        " ".join(f"{p}/{n}" for p, n in zip(c.passed, c.scored, strict=True)),
                        f"{c.chi2:.2f}",
                        f"{c.p_value:.3g}" + ("*" if c.approximate else ""),
                        f"{c.p_holm:.3g}",
                        "OVERDISPERSED" if c.overdispersed else "binomial noise",
                    ]
                    for c in tested
                ],
            )
        )
        if any(c.approximate for c in tested):
            lines.append("* some expected count under 5: the chi-square p-value is approximate")
    else:
        lines.append("no case varies: nothing to test")
    untested = len(report.cases) - len(tested)
    if untested:
        lines.append(f"{untested} case(s) passed every sample or failed every sample in every run: nothing to test")
    return inert("\n".join(lines), multiline=True)  # a fragment from a suite, run or golden: one line, no escapes
