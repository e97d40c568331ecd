"""Terminal reports: the run summary table and ``show`` (raw outputs, repr'd, with failed checks)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from leader_eval.inert import inert, inert_lines
from leader_eval.report.check_line import failed_check_line
from leader_eval.report.episode_transcript import episode_transcript
from leader_eval.scoring.aggregate import format_pass_k, format_usage
from leader_eval.scoring.error_rule import format_first_check_error, format_first_error
from leader_eval.scoring.judge import judge_data
from leader_eval.stats.metrics import METRICS

if TYPE_CHECKING:
    from leader_eval.runs.evaluate import Run


def number(v: float | None) -> str:
    """A table's number: three decimals, ``n/a`` for none."""
    return "n/a" if v is None else f"{v:.3f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Aligned columns; every cell is ``inert`` (a suite's tag, a run's label, a golden's reason)."""
    headers = [inert(h) for h in headers]
    rows = [[inert(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, sep, *body])


def metrics_table(block: Mapping[str, Any]) -> str:
    rows = []
    notes = []
    for name in [*METRICS, *(k for k in block["metrics"] if k not in METRICS)]:  # + episode metrics
        m = block["metrics"][name]
        arrow = "^" if m["higher_is_better"] else "v"
        # a one-case group's interval is not an ordinary one: the report says so, and so does this table
        note = str(m.get("note") or "")
        one_case = note.startswith("one case")
        if one_case:
            notes.append(f"  * {name}: {note}")
        rows.append(
            [
                f"{name} {arrow}",
                number(m["value"]),
                f"[{number(m['low'])}, {number(m['high'])}]" + (" *" if one_case else ""),
                m["n_samples"],
                m["n_cases"],
            ]
        )
    return "\n".join([table(["metric", "value", "95% CI", "samples", "cases"], rows), *notes])


def format_summary(run: Run) -> str:
    s = run.summary
    o = s["overall"]
    m = run.manifest
    lines = [
        f"suite {inert(s['suite'])}  model {inert(s.get('model_id'))}  protocol {inert(m['identity']['protocol'])}  "
        f"seed {m['identity']['run_seed']}",
        metrics_table(o),
        f"cases {o['n_cases']}  samples {o['n_samples']} (scored {o['n_scored']}, errors {o['n_errors']}, "
        f"context_overflow {o['n_context_overflow']})  hard fails {o['n_hard_fail']}",
    ]

    first_error = format_first_error(s.get("first_error"))
    if first_error:
        lines.append(first_error)
    for name, (then, now) in sorted((m.get("python_checks_changed") or {}).items()):
        was = inert(then) if then else "not run"
        lines.append(f"python check {inert(name)} changed since the recorded run ({was} -> {inert(now)}): re-scored")
    first_check = format_first_check_error((s.get("overall") or {}).get("first_check_error"), run.path)
    if first_check:
        lines.append(first_check)
    if o["reasons"]:
        lines.append("failure reasons: " + ", ".join(f"{inert(k)} {v}" for k, v in o["reasons"].items()))
    for key, title in (("by_tag", "tag"), ("by_split", "split")):
        rows = []
        for name, b in (s.get(key) or {}).items():
            sc = b["metrics"]["score"]
            rows.append(
                [name, number(sc["value"]), f"[{number(sc['low'])}, {number(sc['high'])}]", b["n_scored"], b["n_cases"]]
            )
        if rows:
            lines.append(table([title, "score", "95% CI", "samples", "cases"], rows))
    st = m.get("sampling_stats") or (run.stats.__dict__ if run.stats else None)
    if st:
        lines.append(
            (f"replayed {st['replayed']} from the recorded run, " if st.get("replayed") else "")
            + f"sampled {st['sampled']} new, reused {st['reused']} recorded, errors {st['errors']}, "
            f"overflow {st['overflow']}, {st['wall_s']:.1f}s sampling; "
            f"cache hits {st.get('cache_hits', 0)}, misses {st.get('cache_misses', 0)}"
            + (f"; {st['capped']} slots left unsampled by --max-samples" if st.get("capped") else "")
        )

    for name, j in (s.get("judges") or {}).items():  # rubric judges: who judged, and whether it gates
        why = j.get("not_gated_because")
        judge = (j.get("judge") or {}).get("model_id")
        lines.append(
            f"judge {name}: {judge}; errors {j.get('judge_errors')} (rate {j.get('judge_error_rate')}, "
            f"max {j.get('max_error_rate')}); " + ("gated" if j.get("gated") else f"reported, not gated: {why}")
        )
    if o.get("pass_k"):  # reported, never gated (leader_eval.stats.metrics)
        lines.append("reported, not gated: " + format_pass_k(o["pass_k"]))
    if s.get("usage"):
        lines.append("usage: " + format_usage(s["usage"]))
    tok = s.get("tokens")
    if tok:
        lines.append(f"tokens: prompt {tok['prompt']}, completion {tok['completion']}; retries {s.get('retries', 0)}")
    lines.append(f"run directory: {inert(run.path)}   (leader-eval show {inert(run.path)} --failed)")
    # every fragment of a summary is one line; what a suite, a server or a run directory put in
    # one (a tag, a model id, a currency) cannot add a line or an escape sequence
    return inert("\n".join(lines), multiline=True)


def _color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def highlight(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """repr() of ``text`` with finding spans marked: ANSI reverse video on a tty, >>> <<< otherwise."""
    if not spans:
        return repr(text)
    on, off = ("\x1b[7m", "\x1b[0m") if _color() else (">>>", "<<<")
    out, pos = [], 0
    for start, end in sorted(spans):
        if start < pos:
            continue
        out.append(repr(text[pos:start])[1:-1])
        out.append(on + repr(text[start:end])[1:-1] + off)
        pos = end
    out.append(repr(text[pos:])[1:-1])
    return "'" + "".join(out) + "'"


def format_show(run: Run, *, case_id: str | None = None, failed: bool = False, limit: int | None = None) -> str:

    scores = {(s.case_id, s.index): s for s in run.scores}
    lines: list[str] = []
    shown = 0
    for sample in sorted(run.samples, key=lambda s: (s.case_id, s.index)):
        if case_id and sample.case_id != case_id:
            continue
        sc = scores.get((sample.case_id, sample.index))
        if failed and (sc is None or sc.passed):
            continue
        if limit is not None and shown >= limit:
            lines.append("... (more; raise --limit)")
            break
        shown += 1
        transcript = episode_transcript(run.path, sample, sc) if sc is not None else None
        if transcript is not None:  # a multi-turn case: every step (leader_eval.report.episode_transcript)
            lines.extend(transcript)
            continue
        verdict = (
            "n/a" if sc is None else ("PASS" if sc.passed else f"FAIL ({sc.reason}{', hard' if sc.hard_fail else ''})")
        )
        lines.append(
            f"== {sample.case_id} #{sample.index}  seed {sample.seed}  {sample.outcome}  "
            f"stop={inert(sample.stop_reason)}  tokens={sample.completion_tokens}  {inert(verdict)}"
        )
        text_spans = []
        if sc:
            for c in sc.checks:
                for f in c.get("findings", []):
                    # finding offsets are in the visible text (raw minus parsed markup), which only
                    # ever removes characters: the match sits at or after that offset in the raw text
                    at = sample.text.find(f["text"], f["start"]) if f["where"] == "text" and f["text"] else -1
                    if at >= 0:
                        text_spans.append((at, at + len(f["text"])))
        lines.append("raw: " + highlight(sample.text, text_spans))
        if sample.error:
            lines.append(f"error: {inert(sample.error)}")
        if sample.api_tool_calls:
            lines.append(f"api tool_calls: {sample.api_tool_calls!r}")
        if sc is None:
            continue
        if sc.reasoning:
            lines.append(f"reasoning: {sc.reasoning!r}")
        for c in sc.calls:
            lines.append(f"call: {inert(c['name'])}({c['arguments']!r})")
        if not sc.calls and sc.lenient_calls:
            lines.append(
                "lenient only (diagnostic): "
                + "; ".join(f"{inert(c['name'])}({c['arguments']!r})" for c in sc.lenient_calls)
            )
        if sc.other_protocols:
            lines.append(f"other protocols seen: {inert(', '.join(sc.other_protocols))}")
        for name, v in judge_data(sc).items():  # rubric judges: the verdict, or why there is none
            if v.get("error"):
                got = f"judge error: {v['error']}"
            elif v.get("raw") is not None:
                got = f"{v['raw']} (reply {v.get('reply')!r})"
            else:
                got = "not judged (no judged text, or no judgement recorded)"
            lines.append(f"judge {inert(name)}: {inert(got)}")
        for c in sc.checks:
            if c["passed"]:
                continue
            lines.append(failed_check_line("  x ", c))
            data = c.get("data") or {}
            if c.get("reason") == "check_error" and isinstance(data, dict) and isinstance(data.get("traceback"), list):
                # a user's Python check raised: where, innermost last (scoring.python_check)
                lines.append("      traceback (innermost last):")
                lines.extend(f"        {inert(str(frame))}" for frame in data["traceback"])
            for f in c.get("findings", [])[:5]:
                lines.append(
                    f"      {inert(f['reason'])} at {inert(f['where'])}[{f['start']}:{f['end']}]: {f['text']!r}"
                    f"  ...{f['context']!r}..."
                )
    if not shown:
        lines.append("no samples match" + (" (no failed samples)" if failed else ""))
    # the fragments from a model, a server or a suite are inert above; the reverse video of
    # ``highlight`` must stay, so only the line rule runs over the whole
    return inert_lines("\n".join(lines))
