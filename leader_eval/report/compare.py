"""``compare``'s report: the groups, then per B its metrics, pass@k, flips and verdict, as terminal
tables and as Markdown (the comparison itself: ``decide.compare``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leader_eval.decide.compare import Comparison, PairResult, RunGroup
from leader_eval.inert import inert, markdown
from leader_eval.report.checkpoints import recommendation_lines
from leader_eval.report.terminal import number, table
from leader_eval.scoring.aggregate import usage_summary
from leader_eval.stats.core import Estimate

__all__ = ["compare_markdown", "format_compare"]


def _est(e: Estimate) -> str:
    return f"{number(e.value)} [{number(e.low)}, {number(e.high)}]"


def _spread(g: RunGroup, m: str) -> str:
    vals = g.run_values.get(m) or []
    if len(vals) < 2:
        return ""
    return f"{min(vals):.3f}..{max(vals):.3f} over {len(vals)} runs"


def _groups_rows(c: Comparison) -> list[list[str]]:
    rows = []
    for g in c.groups:
        sc = g.estimates["score"]
        rows.append(
            [
                g.name,
                str(len(g.runs)),
                ",".join(map(str, g.seeds)),
                _est(sc),
                _spread(g, "score") or "-",
                str(sum(pc.n_scored for pc in g.cases.values())),
                _usage(g),
            ]
        )
    return rows


def _usage(g: RunGroup) -> str:
    """Latency p50/p95 and cost over the group's samples (from the runs' records)."""
    samples = [s for r in g.runs for s in r.samples]
    if not samples:
        return "-"
    prices = next((r.manifest.get("prices") for r in g.runs if r.manifest.get("prices")), None)
    u = usage_summary(samples, prices)
    lat = u["latency_s"]
    text = f"{lat['p50']:.2f}/{lat['p95']:.2f}s" if lat else "-"
    if "cost" in u:
        text += f", {u['cost']['currency']} {u['cost']['total']:.4g}"
    else:  # prices from the suite: each run's summary has its cost
        costs: list[dict[str, Any]] = [(r.summary.get("usage") or {}).get("cost") or {} for r in g.runs]
        if all(costs):
            text += f", {costs[0]['currency']} {sum(float(c['total']) for c in costs):.4g}"
    return text


_GROUP_HEADERS = ["run", "runs", "seeds", "score [95% CI]", "score spread", "samples", "latency p50/p95, cost"]


def _metric_rows(p: PairResult) -> list[list[str]]:
    rows = []
    for m in p.metrics:
        arrow = "^" if m.higher_is_better else "v"
        verdict = m.verdict.upper() if m.verdict == "regression" else m.verdict
        rows.append(
            [
                f"{m.metric} {arrow}",
                _est(m.a),
                _est(m.b),
                f"{m.diff:+.3f} [{m.low:+.3f}, {m.high:+.3f}]",
                f"{m.p_value:.3f}",
                verdict + ("" if m.gated else " (info)"),
            ]
        )
    return rows


def _metric_headers(p: PairResult) -> list[str]:
    return ["metric", f"A {p.a.name}", f"B {p.b.name}", "B-A paired [95% CI]", "p (B worse)", "verdict"]


def _flip_rows(p: PairResult) -> list[list[str]]:
    return [[f.case_id, f.direction, f"{f.a_rate:.2f} -> {f.b_rate:.2f}", f.reason or "-"] for f in p.flips]


_FLIP_HEADERS = ["case", "flip", "pass rate A -> B", "reason (failing side)"]


def _passk_rows(p: PairResult) -> list[list[str]]:
    rows = []
    for k in sorted(p.pass_k):
        cells = [str(k)]
        for name in (f"pass@{k}", f"pass^{k}"):
            for side in p.pass_k_ci.get(name, ()):
                short = f" ({side['n_cases_short']} short)" if side["n_cases_short"] else ""
                cells.append(f"{number(side['value'])} [{number(side['low'])}, {number(side['high'])}]{short}")
        if len(cells) == 1:
            v = p.pass_k[k]
            cells += [number(v[0]), number(v[1]), number(v[2]), number(v[3])]
        rows.append(cells)
    return rows


def _passk_headers(p: PairResult) -> list[str]:
    return [
        "k",
        f"pass@k {p.a.name} [95% CI]",
        f"pass@k {p.b.name} [95% CI]",
        f"pass^k {p.a.name} [95% CI]",
        f"pass^k {p.b.name} [95% CI]",
    ]


def format_compare(c: Comparison, *, max_flips: int = 20, order: Sequence[str] | None = None) -> str:
    """Terminal report: groups (pooled runs, spread), then per B: metrics, pass@k, flips, verdict;
    for more than two configurations (or an ``order``), the recommended checkpoint."""
    lines = [table(_GROUP_HEADERS, _groups_rows(c))]
    lines.extend(f"note: {m}" for m in c.messages)
    for p in c.pairs:
        lines.append("")
        lines.append(f"B {p.b.name} vs A {p.a.name}: paired over {p.n_cases} cases, alpha {c.alpha:g} (one-sided)")
        lines.append(table(_metric_headers(p), _metric_rows(p)))
        lines.append(table(_passk_headers(p), _passk_rows(p)))
        if p.flips:
            shown = p.flips[:max_flips]
            lines.append(table(_FLIP_HEADERS, _flip_rows(p)[: len(shown)]))
            if len(p.flips) > max_flips:
                lines.append(f"... {len(p.flips) - max_flips} more flips")
        else:
            lines.append("no case flipped")
        lines.append(f"verdict: {p.verdict()}")
    if not c.pairs:
        lines.append(c.verdict())
    lines.extend(recommendation_lines(c, order))
    return inert("\n".join(lines), multiline=True)  # a fragment from a suite, run or golden: one line, no escapes


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, verdicts: bool = False) -> list[str]:
    # a run's name, a case's failure reason: rendered as text; with ``verdicts`` the last column
    # is this module's verdict, and a regression is bold (after escaping)
    esc = [[markdown(x) for x in r] for r in rows]
    for r, raw in zip(esc, rows, strict=True):
        if verdicts and str(raw[-1]).startswith("REGRESSION"):
            r[-1] = f"**{r[-1]}**"
    return [
        "| " + " | ".join(markdown(h) for h in headers) + " |",
        "|" + "|".join(["---"] * len(headers)) + "|",
        *("| " + " | ".join(r) + " |" for r in esc),
        "",
    ]


def compare_markdown(c: Comparison, *, max_flips: int = 50) -> str:
    """The same report as Markdown (pull request comment, ``$GITHUB_STEP_SUMMARY``)."""
    icon = "❌" if c.exit_status else "✅"
    lines = [f"### {icon} {markdown(c.verdict())}", ""]
    lines += _md_table(_GROUP_HEADERS, _groups_rows(c))
    lines.extend(f"- {markdown(m)}" for m in c.messages)
    for p in c.pairs:
        lines.append(f"#### {markdown(p.b.name)} vs {markdown(p.a.name)} ({p.n_cases} cases, paired)")
        lines.append("")
        lines += _md_table(_metric_headers(p), _metric_rows(p), verdicts=True)
        lines += _md_table(_passk_headers(p), _passk_rows(p))
        if p.flips:
            lines.append(f"<details><summary>{len(p.flips)} case flips</summary>")
            lines.append("")
            lines += _md_table(_FLIP_HEADERS, _flip_rows(p)[:max_flips])
            lines.append("</details>")
            lines.append("")
        lines.append(f"**verdict:** {markdown(p.verdict())}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
