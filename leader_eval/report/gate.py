"""The gate's report: a ``GateResult`` (``decide.gate``) as the terminal table and as Markdown for
a pull request comment or ``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

from leader_eval.decide.gate import GateResult
from leader_eval.inert import inert, markdown
from leader_eval.report.terminal import number, table
from leader_eval.scoring.aggregate import format_pass_k

__all__ = ["format_gate_table", "gate_markdown"]


def _signed(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.3f}"


def _reported(result: GateResult) -> str:
    return format_pass_k(result.reported)


def _rows(result: GateResult) -> list[list[str]]:
    rows = []
    for r in result.rows:
        arrow = "^" if r.direction == "higher" else "v"
        ci = f"[{_signed(r.delta_low)}, {_signed(r.delta_high)}]"
        if r.kind in ("floor", "ceiling"):
            bound = f"{'>=' if r.kind == 'floor' else '<='} {r.golden:g}"
            rows.append(
                [
                    f"{r.metric} {arrow}",
                    bound,
                    f"{number(r.now)} [{number(r.now_low)}, {number(r.now_high)}]" + (" *" if r.note else ""),
                    "-",
                    "-",
                    r.kind,
                    r.verdict.upper() if r.verdict == "fail" else r.verdict,
                ]
            )
            continue
        if r.kind == "budget":
            rows.append(
                [
                    r.metric,
                    f"<= {r.golden:g}",
                    f"{r.now:g}",
                    "-",
                    "-",
                    "budget",
                    r.verdict.upper() if r.verdict == "fail" else r.verdict,
                ]
            )
            continue
        p = f"{r.p_value:.3f}" if r.p_value is not None else "unpaired"
        rows.append(
            [
                f"{r.metric} {arrow}",
                number(r.golden),
                f"{number(r.now)} [{number(r.now_low)}, {number(r.now_high)}]" + (" *" if r.note else ""),
                f"{_signed(r.delta)} {ci}",
                f"±{r.tolerance:g}",
                p,
                r.verdict.upper() if r.verdict == "fail" else r.verdict,
            ]
        )
    return rows


_HEADERS = ["metric", "golden", "now [95% CI]", "delta [95% CI]", "tolerance", "p (worse)", "verdict"]


def _interval_notes(result: GateResult) -> list[str]:
    """The notes of the intervals marked ``*`` (a one-case group's degenerate interval), one per metric."""
    seen: dict[str, str] = {}
    for r in result.rows:
        if r.note and r.metric not in seen:
            seen[r.metric] = r.note
    return [f"{m}: {n}" for m, n in seen.items()]


def format_gate_table(result: GateResult) -> str:
    """The terminal summary: headline, the table (metric, golden, now, delta with CI, verdict), notes."""
    lines = [result.headline()]
    if result.rows:
        lines.append(table(_HEADERS, _rows(result)))
    lines.extend(f"  {m}" for m in result.messages if m not in result.headline())
    lines.extend(f"  * {note}" for note in _interval_notes(result))
    for r in result.rows:
        if r.verdict in ("fail", "improved"):
            lines.append(f"  {r.metric}: {r.explanation}")
    if result.reported:
        lines.append(f"reported, not gated: {_reported(result)}")
    if result.golden_path is not None:
        lines.append(f"golden: {result.golden_path}")
    if result.update is not None:
        lines.append(("updated golden: " if result.update.written else "golden not updated: ") + result.update.reason)
    return inert("\n".join(lines), multiline=True)  # a fragment from a suite, run or golden: one line, no escapes


def gate_markdown(result: GateResult) -> str:
    """The same summary as Markdown, for a pull request comment or ``$GITHUB_STEP_SUMMARY``."""
    # a missing golden fails unless --allow-missing-golden: only then is it a warning
    icon = {"pass": "✅", "fail": "❌", "stale": "❌", "incomplete": "❌", "errors": "❌"}.get(
        result.status, "⚠️" if result.exit_status == 0 else "❌"
    )
    lines = [f"### {icon} {_md(result.headline())}", ""]
    if result.rows:
        lines.append("| " + " | ".join(_HEADERS) + " |")
        lines.append("|" + "|".join(["---"] * len(_HEADERS)) + "|")
        for row in _rows(result):
            cells = [_md(c) for c in row]
            if cells[-1] in ("FAIL", "improved"):
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    notes = [_md(m) for m in result.messages if m not in result.headline()]
    notes += [f"\\* {_md(note)}" for note in _interval_notes(result)]
    notes += [f"`{r.metric}`: {_md(r.explanation)}" for r in result.rows if r.verdict in ("fail", "improved")]
    if result.update is not None:
        update = ("updated golden: " if result.update.written else "golden not updated: ") + result.update.reason
        notes.append(_md(update))
    if result.reported:
        notes.append(_md(f"reported, not gated: {_reported(result)}"))
    lines.extend(f"- {n}" for n in notes)
    if result.golden_path is not None:
        lines.append(
            f"\n<sub>golden {_md(result.golden_path)}; alpha {result.alpha:g} (one-sided); delta = now − golden</sub>"
        )
    return "\n".join(lines).rstrip() + "\n"


def _md(text: object) -> str:
    # a golden's reason, a server's error text, a path: rendered as that text, never as markup
    return markdown(text)
