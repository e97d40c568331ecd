"""One self-contained HTML report of recorded runs, comparisons, checkpoint sweeps and stress runs.

Semantics and bounds:

- The report reads the stored records only (manifest, samples, results, cases, summary, prompts,
  ``stress.json``): what is shown is what the run directory holds, scrubbed as it was written.
- One file: CSS, JS and plots (matplotlib SVG as ``data:`` images) are inline; a Content Security
  Policy allows no network request, no other script than the page's own (by hash: an injected
  inline handler would not run even if escaping failed), and images from ``data:`` only.
- Without JavaScript the summaries, tables, comparison and plots are complete; samples, sorting and
  filters need it. Samples are embedded as one JSON island per run and turned into DOM nodes only
  when their case is opened, as text nodes (``report.text`` cuts them into segments), so an output
  is never parsed as markup. JSON islands escape ``<``, ``>``, ``&`` and everything non-ASCII
  (U+2028/9 included).
- Size is bounded: a raw output shows its first ``MAX_TEXT_CHARS`` characters, a prompt its
  head and tail, a finding in the failed-check list its first ``MAX_FINDING_CHARS`` (it is marked
  in full in the output); each omission is stated. A run with more than ``MAX_SAMPLES`` samples embeds at
  most ``MAX_SAMPLES`` of them, spread over its cases with failures first, and says how many it
  left to ``leader-eval show``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.errors import LeaderEvalError
from leader_eval.inert import markdown
from leader_eval.report.text import leak_spans, segments, visible
from leader_eval.runs.collector import long_lived
from leader_eval.runs.evaluate import Run as RunType
from leader_eval.runs.evaluate import read_run
from leader_eval.stats.core import rate_ci
from leader_eval.stats.metrics import METRICS
from leader_eval.store.run_store import REPORT, STRESS_JSON, RunDir, cut_text, write_bytes_atomic
from leader_eval.version import __version__ as version

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - a core dependency; the stdlib writes the island then
    _orjson = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from leader_eval.decide.checkpoints import CheckpointRecommendation
    from leader_eval.decide.compare import Comparison, PairResult
    from leader_eval.runs.evaluate import Run
    from leader_eval.scoring.scorer import SampleScore
    from leader_eval.types import Sample

REPORT_NAME = REPORT
MAX_TEXT_CHARS = 20_000
MAX_PROMPT_HEAD = 6_000
MAX_PROMPT_TAIL = 14_000
MAX_SAMPLES = 2_500
#: a finding's text in the failed-check list (it is marked in full in the raw output above it)
MAX_FINDING_CHARS = 240


def esc(value: Any) -> str:
    if type(value) is int or type(value) is float:  # digits, signs, "e", "inf", "nan": nothing to escape
        return str(value)
    text = str(value)
    if text.isascii():  # no lone surrogate to write visibly (a 2,000-case table escapes ~40,000 values)
        return html.escape(text, quote=True) if _ESCAPED.search(text) else text
    return html.escape(visible(text), quote=True)


#: what ``html.escape(text, quote=True)`` replaces: a text without them is itself (~70 ns, not 180)
_ESCAPED = re.compile("[&<>\"']")


def _f(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{float(v):.3f}"


def _ci(m: Mapping[str, Any]) -> str:
    return f"[{_f(m.get('low'))}, {_f(m.get('high'))}]"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """Cells are HTML already (callers escape)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# --------------------------------------------------------------------------------------------
# one run


def _summary_html(run: Run) -> str:

    s = run.summary or {}
    o = s.get("overall")
    if not o:
        return '<p class="warn">This run has no summary (it was never scored).</p>'
    rows = []
    # the fixed metrics first, then any a suite kind adds (episodes)
    for name in [*METRICS, *(k for k in o["metrics"] if k not in METRICS)]:
        m = o["metrics"].get(name)
        if not m:
            continue
        arrow = "↑" if m.get("higher_is_better") else "↓"
        rows.append(
            [
                f'<span title="{esc(m.get("description", ""))}">{esc(name)} {arrow}</span>',
                f"<b>{_f(m.get('value'))}</b>",
                _ci(m),
                esc(m.get("n_samples")),
                esc(m.get("n_cases")),
                esc(m.get("note", "")),
            ]
        )
    parts = [
        _table(["metric", "value", "95% CI", "samples", "cases", "note"], rows, "summary metrics"),
        f'<p class="counts">cases {esc(o["n_cases"])} · samples {esc(o["n_samples"])} (scored {esc(o["n_scored"])}, '
        f"sampler errors {esc(o['n_errors'])}, context overflow {esc(o['n_context_overflow'])}) · "
        f"hard fails {esc(o['n_hard_fail'])}</p>",
    ]
    if o.get("reasons"):
        total = max(1, int(o["n_scored"]))
        rr = [
            [
                f'<span class="reason">{esc(k)}</span>',
                esc(v),
                f'<span class="bar" style="width:{100 * int(v) / total:.1f}px"></span> {100 * int(v) / total:.0f}%',
            ]
            for k, v in sorted(o["reasons"].items(), key=lambda kv: (-int(kv[1]), kv[0]))
        ]
        parts.append("<h4>Failure reasons</h4>" + _table(["reason", "samples", "share of scored"], rr, "reasons"))
    for key, title in (("by_tag", "tag"), ("by_split", "split")):
        block = s.get(key) or {}
        if not block:
            continue
        rows = []
        for name, b in block.items():
            mm = b["metrics"]
            rows.append(
                [
                    esc(name),
                    f"<b>{_f(mm['score']['value'])}</b> {_ci(mm['score'])}",
                    _f(mm.get("strict_format_rate", {}).get("value")),
                    _f(mm.get("tool_accuracy", {}).get("value")),
                    _f(mm.get("leak_rate", {}).get("value")),
                    esc(b["n_scored"]),
                    esc(b["n_cases"]),
                ]
            )
        parts.append(
            f"<h4>Per {title}</h4>"
            + _table([title, "score [95% CI]", "strict format", "tool accuracy", "leak rate", "samples", "cases"], rows)
        )
    return "\n".join(parts)


def _case_status(c: Mapping[str, Any]) -> str:
    n = int(c.get("n_scored") or 0)
    if n == 0:
        return "unscored"
    return "pass" if int(c.get("n_passed") or 0) == n else "fail"


def _case_table(run: Run, ri: int) -> str:
    cases = run.cases or []
    reasons = sorted({r for c in cases for r in (c.get("reasons") or {})})
    tags = sorted({t for c in cases for t in (c.get("tags") or [])})

    def options(values: Sequence[str]) -> str:
        return "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)

    controls = (
        f'<div class="filters js-only" data-run="{ri}">'
        f'<label>reason <select class="f-reason"><option value="">any</option>{options(reasons)}</select></label>'
        f'<label>tag <select class="f-tag"><option value="">any</option>{options(tags)}</select></label>'
        '<label>result <select class="f-status"><option value="">any</option><option value="pass">all pass</option>'
        '<option value="fail">has failures</option><option value="unscored">unscored</option></select></label>'
        '<label>case <input class="f-text" type="search" placeholder="id contains"></label>'
        '<span class="shown"></span></div>'
    )
    heads = [
        ("case", "id", "s"),
        ("tags", "tags", "s"),
        ("split", "split", "s"),
        ("weight", "weight", "n"),
        ("pass rate", "score", "n"),
        ("passed / scored", "passed", "n"),
        ("failure reasons", "reasons", "s"),
        ("hard", "hard", "n"),
        ("errors", "errors", "n"),
        ("overflow", "overflow", "n"),
    ]
    th = "".join(f'<th data-key="{k}" data-type="{t}" class="sortable">{h}</th>' for h, k, t in heads)
    rows = []
    for c in cases:
        # each value escaped once, where the row's data attributes and cells both show it
        cid = esc(c["case_id"])
        rs = c.get("reasons") or {}
        score = c.get("score")
        status = _case_status(c)
        tags = c.get("tags") or []
        split = esc(c.get("split") or "")
        weight = esc(c.get("weight", 1.0))
        passed = esc(c.get("n_passed", 0))
        hard = esc(c.get("n_hard_fail", 0))
        errors = esc(c.get("n_errors", 0))
        overflow = esc(c.get("n_context_overflow", 0))
        reason_txt = ", ".join(f"{k} {v}" for k, v in rs.items()) or "-"
        rows.append(
            f'<tr class="case {status}" data-id="{cid}" data-tags="{esc(" ".join(tags))}" data-split="{split}" '
            f'data-weight="{weight}" data-score="{esc(-1 if score is None else score)}" data-passed="{passed}" '
            f'data-reasons="{esc(" ".join(rs))}" data-hard="{hard}" data-errors="{errors}" '
            f'data-overflow="{overflow}" data-status="{status}">'
            f'<td><button class="case-toggle js-only" aria-expanded="false">▸</button> <code>{cid}</code></td>'
            f"<td>{esc(', '.join(tags))}</td><td>{split}</td>"
            f"<td>{weight}</td><td>{_f(score)}</td>"
            f"<td>{passed} / {esc(c.get('n_scored', 0))}</td><td>{esc(reason_txt)}</td>"
            f"<td>{hard}</td><td>{errors}</td>"
            f"<td>{overflow}</td></tr>"
            f'<tr class="detail" hidden><td colspan="{len(heads)}"><div class="samples" data-run="{ri}" '
            f'data-case="{cid}"></div></td></tr>'
        )
    return (
        controls
        + f'<table class="cases" data-run="{ri}"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _clip_prompt(text: str) -> tuple[str, int]:
    if len(text) <= MAX_PROMPT_HEAD + MAX_PROMPT_TAIL:
        return text, 0
    omitted = len(text) - MAX_PROMPT_HEAD - MAX_PROMPT_TAIL
    return text[:MAX_PROMPT_HEAD] + "\n…\n" + text[-MAX_PROMPT_TAIL:], omitted


def _json_text(value: Any) -> str:
    # every field the page shows is bounded (store.FIELD_CAP, the cut marked): a model that
    # writes megabytes of calls or reasoning must not make a report of hundreds of megabytes
    return visible(cut_text(json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True, default=str)))


def _sample_view(
    sample: Sample, sc: SampleScore | None, special: tuple[str, ...], steps: list[Any] | None = None
) -> dict[str, Any]:
    text = sample.text or ""
    calls = sc.calls if sc else []
    spans = leak_spans(text, sc.checks, calls) if sc else []
    more = 0
    if len(text) > MAX_TEXT_CHARS:
        more = len(text) - MAX_TEXT_CHARS
        text = text[:MAX_TEXT_CHARS]
    v: dict[str, Any] = {
        "i": sample.index,
        "seed": sample.seed,
        "o": sample.outcome,
        "stop": sample.stop_reason,
        "ct": sample.completion_tokens,
        "seg": segments(text, special, spans),
    }
    if more:
        v["more"] = more
    if sample.error:
        v["err"] = visible(cut_text(sample.error))
    if sample.api_tool_calls:
        v["api"] = _json_text(sample.api_tool_calls)
    if sample.reasoning:
        v["reas"] = segments(cut_text(sample.reasoning), special)
    steps = steps or getattr(sample, "steps", None)
    if isinstance(steps, list) and steps:
        step_checks = _step_checks(sc)
        v["steps"] = [_step_view(s, special, step_checks) for s in steps[:200]]
    if sc is None:
        return v
    v.update(p=sc.passed, h=sc.hard_fail, r=sc.reason)
    v["calls"] = [{"n": visible(cut_text(str(c.get("name")))), "a": _json_text(c.get("arguments"))} for c in calls]
    if not calls and sc.lenient_calls:
        v["len"] = [
            {"n": visible(cut_text(str(c.get("name")))), "a": _json_text(c.get("arguments"))} for c in sc.lenient_calls
        ]
    if sc.other_protocols:
        v["other"] = [visible(str(p)) for p in sc.other_protocols]
    if sc.reasoning and not sample.reasoning:
        v["reas"] = segments(cut_text(sc.reasoning), special)
    v["fail"] = _failed_checks(sc.checks, special)
    return v


def _failed_checks(checks: Sequence[Mapping[str, Any]], special: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {
            "c": visible(str(c["check"])),
            "r": visible(str(c.get("reason") or "")),
            "h": bool(c.get("hard")),
            "d": visible(cut_text(str(c.get("detail") or ""))),
            "f": [
                {
                    "r": visible(str(f.get("reason"))),
                    "w": visible(f"{f.get('where')}[{f.get('start')}:{f.get('end')}]"),
                    "t": _finding_text(str(f.get("text", "")), special),
                }
                for f in (c.get("findings") or [])[:20]
            ],
        }
        for c in checks
        if not c.get("passed")
    ]


def _finding_text(text: str, special: tuple[str, ...]) -> list[Any]:
    if len(text) <= MAX_FINDING_CHARS:
        return segments(text, special)
    return [*segments(text[:MAX_FINDING_CHARS], special), f"… ({len(text)} characters)"]


def _step_checks(sc: SampleScore | None) -> dict[int, list[Mapping[str, Any]]]:
    """An episode's failed checks per step (the episode check's data), when it has them."""
    for c in sc.checks if sc else []:
        data = c.get("data") or {}
        if isinstance(data, Mapping) and isinstance(data.get("steps"), list):
            return {
                int(st["step"]): list(st.get("failed_checks") or [])
                for st in data["steps"]
                if isinstance(st, Mapping) and "step" in st
            }
    return {}


#: step record fields shown in a step's header or body, not again in its JSON remainder
_STEP_SHOWN = frozenset(
    {"step", "seed", "outcome", "stop_reason", "completion_tokens", "error", "results", "calls", "prompt"}
)
_STEP_HIDDEN = frozenset({"slot", "case_id", "index", "key", "token_ids", "logprobs", "timings", "prompt_sha256"})


def _step_view(
    step: Any, special: tuple[str, ...], failed: Mapping[int, Sequence[Mapping[str, Any]]]
) -> dict[str, Any]:
    """One episode step: its raw text (segmented like any output), the tool results it got, its
    failed checks, and the rest of its record as JSON."""
    if not isinstance(step, Mapping):
        return {"h": "step", "rest": _json_text(step)}
    head = " · ".join(
        visible(f"{k.replace('_', ' ')} {step[k]}")
        for k in ("role", "kind", "seed", "outcome", "stop_reason", "completion_tokens")
        if k in step
    )
    text_key = next((k for k in ("text", "output", "content") if isinstance(step.get(k), str)), None)
    out: dict[str, Any] = {"h": head or "step"}
    if text_key:
        out["seg"] = segments(str(step[text_key])[:MAX_TEXT_CHARS], special)
    if step.get("error"):
        out["err"] = visible(cut_text(str(step["error"])))
    results = step.get("results")
    if isinstance(results, list) and results:
        out["res"] = [
            visible(
                cut_text(
                    f"{r.get('tool')}({json.dumps(r.get('arguments'), ensure_ascii=False, default=str)}) -> "
                    + (f"{r.get('result')!r}" if r.get("ok") else f"error: {r.get('error')!r}")
                    + (f"  [{r.get('fixture')}]" if r.get("fixture") else "")
                )
            )
            if isinstance(r, Mapping)
            else visible(repr(r))
            for r in results
        ]
    elif isinstance(step.get("calls"), list) and step["calls"]:
        out["rest_calls"] = _json_text(step["calls"])
    prompt = step.get("prompt")
    prompt_text = prompt.get("text") if isinstance(prompt, Mapping) else prompt
    if isinstance(prompt_text, str) and prompt_text:
        clipped, omitted = _clip_prompt(prompt_text)
        out["prompt"] = segments(clipped, special)
        out["prompt_omitted"] = omitted
    k = step.get("step")
    if isinstance(k, int) and failed.get(k):
        out["fail"] = _failed_checks(failed[k], special)
    skip = _STEP_SHOWN | _STEP_HIDDEN | {text_key}
    rest = {key: v for key, v in step.items() if key not in skip and v is not None}
    if rest:
        out["rest"] = _json_text(rest)
    return out


def _episode_steps(run: Run) -> dict[tuple[str, int], list[Any]]:
    """Recorded episode steps (``leader_eval.store.run_store.read_steps``) when the run has any."""
    import importlib

    try:
        read_steps = importlib.import_module("leader_eval.store.run_store").read_steps
    except (ImportError, AttributeError):
        return {}
    try:
        steps = dict(read_steps(Path(run.path)))
        turns = importlib.import_module("leader_eval.store.run_store").RunDir(Path(run.path)).read_turns()
    except (OSError, ValueError, KeyError, AttributeError):
        return {}
    # a simulated teammate's reply follows the step it answers, shown as a step of its own kind
    # (``answers_step``, not ``step``: the step's failed checks are not the reply's)
    for key, replies in turns.items():
        merged: list[Any] = []
        for r in steps.get(key, []):
            merged.append(r)
            t = replies.get(int(r["step"]))
            if t is not None:
                merged.append(
                    {"kind": "teammate reply", "answers_step": t["step"], **{k: v for k, v in t.items() if k != "step"}}
                )
        steps[key] = merged
    return steps


def _choose_samples(run: Run, scores: Mapping[tuple[str, int], SampleScore]) -> tuple[list[Sample], int]:
    samples = sorted(run.samples, key=lambda s: (s.case_id, s.index))
    if len(samples) <= MAX_SAMPLES:
        return samples, 0
    by_case: dict[str, list[Sample]] = {}
    for s in samples:
        by_case.setdefault(s.case_id, []).append(s)
    per_case = max(1, MAX_SAMPLES // max(1, len(by_case)))

    def failed_first(s: Sample) -> tuple[int, int]:
        sc = scores.get((s.case_id, s.index))
        return (0 if sc is None or not sc.passed else 1, s.index)

    kept = [s for ss in by_case.values() for s in sorted(ss, key=failed_first)[:per_case]]
    return kept, len(samples) - len(kept)


def _run_island(run: Run) -> tuple[dict[str, Any], int]:
    special = tuple(run.manifest.get("model", {}).get("special_tokens") or ())
    scores = {(s.case_id, s.index): s for s in run.scores}
    kept, left = _choose_samples(run, scores)
    steps = _episode_steps(run)
    cases: dict[str, Any] = {}
    for s in kept:
        view = _sample_view(s, scores.get((s.case_id, s.index)), special, steps.get((s.case_id, s.index)))
        cases.setdefault(s.case_id, {"s": []})["s"].append(view)
    prompts = _read_prompts(run)
    for cid, rec in cases.items():
        p = prompts.get(cid)
        if p and isinstance(p.get("text"), str):
            text, omitted = _clip_prompt(p["text"])
            rec["prompt"] = segments(text, special)
            rec["prompt_omitted"] = omitted
            if p.get("n_tokens") is not None:
                rec["prompt_tokens"] = p.get("n_tokens")
    ident = run.manifest.get("identity", {})
    name = f"{run.manifest.get('label') or ident.get('model_id')} (run seed {ident.get('run_seed')})"
    return {"cases": cases, "left": left, "name": visible(name)}, left


def _read_prompts(run: Run) -> dict[str, dict[str, Any]]:

    try:
        return RunDir(Path(run.path)).read_prompts(shared=True)
    except (OSError, ValueError):
        return {}


def _run_header(run: Run) -> str:
    m = run.manifest
    ident = m.get("identity", {})
    st = m.get("sampling_stats") or {}
    items = [
        ("label", m.get("label")),
        ("model", ident.get("model_id")),
        ("suite", f"{ident.get('suite')} {ident.get('suite_hash')}"),
        ("protocol", ident.get("protocol")),
        ("run seed", ident.get("run_seed")),
        ("status", m.get("status")),
        ("created", m.get("created")),
        ("run id", m.get("run_id")),
        ("directory", str(run.path)),
    ]
    if st:
        replayed = f"{st['replayed']} replayed, " if st.get("replayed") else ""
        items.append(
            ("sampling", f"{replayed}{st.get('sampled')} new, {st.get('reused')} reused, {st.get('wall_s', 0):.1f}s")
        )
    return '<dl class="meta">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items if v) + "</dl>"


def _run_section(run: Run, ri: int, *, open_: bool) -> str:
    name = run.manifest.get("label") or run.manifest.get("run_id") or Path(run.path).name
    parts = [_run_header(run), _summary_html(run)]
    stress = _stress_html(run)
    if stress:
        parts.append(stress)
    # a stress run's cases are its variants (a case at one length and depth), not the suite's cases
    parts.append(f"<h4>{'Variants' if stress else 'Cases'} ({len(run.cases)})</h4>")
    parts.append(
        "<noscript><p class='note'>Samples, sorting and filters need JavaScript; everything above is complete "
        f"without it. <code>leader-eval show {esc(run.path)}</code> prints the same samples.</p></noscript>"
    )
    parts.append(_case_table(run, ri))
    body = "\n".join(parts)
    return (
        f'<details class="run" id="run-{ri}"{" open" if open_ else ""}><summary><h2>Run {esc(name)}</h2></summary>'
        f"{body}</details>"
    )


# --------------------------------------------------------------------------------------------
# plots


def _svg_img(fig: Any, alt: str) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img class="plot" alt="{esc(alt)}" src="data:image/svg+xml;base64,{data}">'


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    plt.rcParams["svg.hashsalt"] = "leader-eval"  # deterministic ids
    return plt


def _checkpoint_plot(rec: CheckpointRecommendation) -> str:
    plt = _pyplot()
    xs = rec.positions
    vals = [r.value for r in rec.rows]
    fig, ax = plt.subplots(figsize=(7, 3.4), dpi=100)
    ax.fill_between(xs, [r.low for r in rec.rows], [r.high for r in rec.rows], alpha=0.2, label="95% CI")
    ax.plot(xs, vals, marker="o", label=rec.metric)
    for x, r in zip(xs, rec.rows, strict=True):
        if r.credibly_worse:
            ax.plot([x], [r.value], marker="x", color="red", markersize=9, linestyle="none")
        if r.name == rec.recommended:
            ax.plot([x], [r.value], marker="*", color="green", markersize=16, linestyle="none", label="recommended")
        if r.name == rec.best:
            ax.annotate("best", (x, r.value), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8)
    ax.set_xticks(xs)
    ax.set_xticklabels([r.name for r in rec.rows], rotation=30 if len(xs) > 6 else 0, fontsize=8)
    ax.set_ylabel(rec.metric)
    ax.set_xlabel(f"checkpoint (order from {rec.order_source}); x = credibly worse than the best")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # else matplotlib warns "No artists with labels"
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return _svg_img(fig, f"{rec.metric} against checkpoint with 95% CI bands")


def _stress_plot(result: Any) -> str:

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    for i, col in enumerate(result.columns):
        pts = sorted(
            (v.prompt_tokens, v.score, rate_ci(v.n_passed, v.n_scored))
            for v in result.variants
            if v.column == col and v.score is not None and v.n_scored
        )
        if not pts:
            continue
        x = [p[0] for p in pts]
        ax.fill_between(x, [p[2].low for p in pts], [p[2].high for p in pts], color=f"C{i}", alpha=0.08)
        ax.plot(x, [p[1] for p in pts], marker="o", color=f"C{i}", linewidth=1, alpha=0.8, label=col)
    # the overall band is the sweep's own curve (cases as clusters, studies.stress_curve)
    curve = next((c for c in result.curves if c.depth == "all"), None)
    overall = [(p.length, p.score) for p in curve.points if p.score is not None] if curve else []
    if overall:
        ax.fill_between([s for s, _ in overall], [e.low for _, e in overall], [e.high for _, e in overall],
                        color="black", alpha=0.12, label="overall 95% CI")  # fmt: skip
        ax.plot([s for s, _ in overall], [e.value for _, e in overall], color="black", linewidth=2.2, marker="s",
                label="overall")  # fmt: skip
    over = [v for v in result.variants if v.status == "overflow"]
    if over:
        ax.plot([v.target for v in over], [0] * len(over), marker="x", color="red", markersize=10, linestyle="none",
                label="context overflow (not sampled)")  # fmt: skip
    if result.context_length:
        ax.axvline(result.context_length, color="red", linestyle="--", linewidth=1, label="context length")
        ax.axvspan(result.context_length, max(result.steps) * 1.15, color="red", alpha=0.06)
    if result.n_ctx_train and result.n_ctx_train != result.context_length:
        ax.axvline(result.n_ctx_train, color="darkorange", linestyle=":", linewidth=1.2, label="training context")
    if curve and curve.first_drop is not None:
        ax.axvline(curve.first_drop, color="darkred", linestyle="-.", linewidth=1, label="first credible drop")
    if result.steps and min(result.steps) > 0 and max(result.steps) / min(result.steps) >= 8:
        ax.set_xscale("log")
        ax.set_xticks(result.steps)
        ax.set_xticklabels([f"{s // 1000}K" if s % 1000 == 0 else str(s) for s in result.steps])
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("prompt length (model tokens)")
    ax.set_ylabel("score (pass rate), 95% CI bands")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # else matplotlib warns "No artists with labels"
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _svg_img(fig, "score against prompt length with 95% CI bands; overflow marked")


def _stress_html(run: Run) -> str:
    if not (Path(run.path) / STRESS_JSON).is_file():
        return ""
    # imported where a page needs them: the report of one plain run needs neither (~10 ms of
    # every `leader-eval run`)
    from leader_eval.studies.stress import format_stress_table, read_stress

    try:
        result = read_stress(run.path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f'<p class="warn">{STRESS_JSON} unreadable: {esc(err)}</p>'
    return (
        "<h4>Stress: score against prompt length</h4>"
        + _stress_plot(result)
        + f'<pre class="stress">{esc(format_stress_table(result))}</pre>'
    )


# --------------------------------------------------------------------------------------------
# several runs


def _comparison_html(c: Comparison, run_index: Mapping[int, int]) -> str:
    rows = []
    for g in c.groups:
        sc = g.estimates["score"]
        vals = g.run_values.get("score") or []
        spread = f"{min(vals):.3f}..{max(vals):.3f}" if len(vals) > 1 else "-"
        score = f"<b>{_f(sc.value)}</b> [{_f(sc.low)}, {_f(sc.high)}]"
        n = sum(pc.n_scored for pc in g.cases.values())
        rows.append([esc(g.name), esc(len(g.runs)), esc(",".join(map(str, g.seeds))), score, spread, esc(n)])
    parts = [
        f'<p class="verdict {_verdict_class(c)}">{esc(c.verdict())}</p>',
        _table(["configuration", "runs", "seeds", "score [95% CI]", "score spread", "samples"], rows),
    ]
    parts.extend(f'<p class="note">{esc(m)}</p>' for m in c.messages)
    for p in c.pairs:
        parts.append(f"<h3>{esc(p.b.name)} vs {esc(p.a.name)}: paired over {p.n_cases} cases</h3>")
        mrows = []
        for m in p.metrics:
            cls = {"regression": "bad", "improvement": "good"}.get(m.verdict, "")
            info = "" if m.gated else " (info)"
            arrow = " ↑" if m.higher_is_better else " ↓"
            mrows.append(
                [
                    esc(m.metric) + arrow,
                    f"{_f(m.a.value)} [{_f(m.a.low)}, {_f(m.a.high)}]",
                    f"{_f(m.b.value)} [{_f(m.b.low)}, {_f(m.b.high)}]",
                    f"<b>{m.diff:+.3f}</b> [{m.low:+.3f}, {m.high:+.3f}]",
                    f"{m.p_value:.3f}",
                    f'<span class="{cls}">{esc(m.verdict)}{info}</span>',
                ]
            )
        headers = ["metric", f"A {esc(p.a.name)}", f"B {esc(p.b.name)}", "B − A paired [95% CI]", "p (B worse)"]
        parts.append(_table([*headers, "verdict"], mrows, "diff"))
        parts.append(f'<p class="verdict {"bad" if p.regression else ""}">verdict: {esc(p.verdict())}</p>')
        parts.append(_flips_html(p, run_index))
    return "\n".join(parts)


def _verdict_class(c: Comparison) -> str:
    if c.exit_status:
        return "bad"
    improved = any(m.verdict == "improvement" for p in c.pairs for m in p.metrics)
    return "good" if improved else ""


def _flips_html(p: PairResult, run_index: Mapping[int, int]) -> str:
    if not p.flips:
        return '<p class="note">No case flipped.</p>'
    a_runs = ",".join(str(run_index[id(r)]) for r in p.a.runs)
    b_runs = ",".join(str(run_index[id(r)]) for r in p.b.runs)
    items = []
    for f in p.flips:
        items.append(
            f'<details class="flip {esc(f.direction)}" data-case="{esc(f.case_id)}" '
            f'data-a="{a_runs}" data-b="{b_runs}" '
            f'data-an="{esc(p.a.name)}" data-bn="{esc(p.b.name)}"><summary><code>{esc(f.case_id)}</code> '
            f"<b>{esc(f.direction)}</b>: pass rate {f.a_rate:.2f} → {f.b_rate:.2f}; failing side: "
            f'{esc(f.reason or "-")}</summary><div class="sbs"></div></details>'
        )
    return f"<h4>Flipped cases ({len(p.flips)})</h4>" + "".join(items)


def _checkpoints_html(rec: CheckpointRecommendation) -> str:
    rows = []
    for r in rec.rows:
        status = (
            "credibly worse: " + "; ".join(r.worse_in)
            if r.credibly_worse
            else ("recommended" if r.name == rec.recommended else "candidate")
        )
        cls = "good" if status == "recommended" else ("bad" if r.credibly_worse else "")
        diff = "best" if r.p_worse is None else f"{r.diff:+.3f} [{r.diff_low:+.3f}, {r.diff_high:+.3f}]"
        p = "-" if r.p_worse is None else f"{r.p_worse:.3f} (Holm level {r.level:.4f})"
        value = f"<b>{_f(r.value)}</b> [{_f(r.low)}, {_f(r.high)}]"
        rows.append([esc(r.name), value, diff, p, f'<span class="{cls}">{status}</span>'])
    head = (
        f'<p class="verdict good">Recommended checkpoint: <b>{esc(rec.recommended)}</b>, the earliest not credibly '
        f"worse than the best ({esc(rec.best)}) in any gated metric ({esc(', '.join(rec.metrics))}; one-sided "
        f"paired tests over {rec.n_cases} cases, Holm-Tarone across checkpoints and metrics at alpha "
        f"{rec.alpha:g}).</p>"
        if rec.recommended is not None
        else '<p class="verdict bad">No checkpoint recommended: every one is credibly worse than another in a '
        f"gated metric ({esc(', '.join(rec.metrics))}).</p>"
    )
    return (
        head
        + _checkpoint_plot(rec)
        + _table(["checkpoint", f"{esc(rec.metric)} [95% CI]", "minus best [95% CI]", "p (worse than best)", ""], rows)
    )


# --------------------------------------------------------------------------------------------
# the page


def _asset(name: str) -> str:
    return resources.files("leader_eval.report").joinpath("assets", name).read_text(encoding="utf-8")


def _island(obj: Any) -> str:
    # ASCII-only JSON (U+2028/9 and lone surrogates escaped) with the three characters that could
    # end the element or start markup escaped too: the island's text is inert whatever it holds
    s = _ascii_json(obj)
    return s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _ascii_json(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=True, separators=(",", ":"))`` as JSON (the same value when
    parsed), made by orjson where it can: ~1.5 ms instead of ~10 for the island of 2,000 samples.
    orjson writes what it does not escape as UTF-8, so each non-ASCII character is escaped here as
    the stdlib does (astral ones as a surrogate pair); a float may be spelled otherwise
    (``1e-5``) and NaN is ``null`` (the stdlib's ``NaN`` is no JSON at all). What orjson refuses
    (a lone surrogate, an int past 64 bits, a key that is not a string) the stdlib writes."""
    if _orjson is not None:
        try:
            s = _orjson.dumps(obj).decode("utf-8")
        except (TypeError, ValueError):
            pass
        else:
            return s if s.isascii() and "\x7f" not in s else _NON_ASCII.sub(_escape_non_ascii, s)
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))


_NON_ASCII = re.compile(r"[^\x00-\x7e]")  # DEL too: the stdlib writes \u007f


def _escape_non_ascii(m: re.Match[str]) -> str:
    cp = ord(m.group())
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    cp -= 0x10000
    return f"\\u{0xD800 | cp >> 10:04x}\\u{0xDC00 | cp & 0x3FF:04x}"


def page(title: str, body: str, islands: Sequence[Any], *, script: bool = True) -> str:
    """The report's HTML document around ``body`` (escaped HTML); ``script=False``: a page without
    JavaScript (the history), whose policy then allows no script at all."""
    js = _asset("report.js") if script else ""
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    scripts = f"'sha256-{digest}'" if script else "'none'"
    csp = (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src {scripts}; base-uri 'none'; form-action 'none'"
    )
    data = "".join(
        f'<script type="application/json" id="data-run-{i}">{_island(obj)}</script>' for i, obj in enumerate(islands)
    )

    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f'<header><h1>{esc(title)}</h1><p class="gen">leader-eval {esc(version)} · generated '
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} from the stored records</p></header>"
        f"<main>{body}</main>{data}{f'<script>{js}</script>' if script else ''}</body></html>\n"
    )


def render_report(
    runs: Sequence[Run | str | Path],
    *,
    order: Sequence[str] | None = None,
    across_suites: bool = False,
    alpha: float = 0.05,
    comparison: Comparison | None = None,
    title: str | None = None,
) -> str:
    """The report of one run, or of several (comparison, flips, checkpoints), as one HTML string."""
    # the runs' records live for the whole page and are no garbage: out of the collector's passes
    # (a run just scored is young: a pass over it took ~15 ms of a 2,000-sample report's ~65)
    with long_lived():
        return _render_report(runs, order, across_suites, alpha, comparison, title)


def _render_report(
    runs: Sequence[Run | str | Path],
    order: Sequence[str] | None,
    across_suites: bool,
    alpha: float,
    comparison: Comparison | None,
    title: str | None,
) -> str:
    if comparison is not None:
        # the comparison's own Run objects (its groups hold them) stand for ``runs``
        loaded = [r for g in comparison.groups for r in g.runs]
    else:
        loaded = [r if isinstance(r, RunType) else read_run(r) for r in runs]
    if not loaded:
        raise LeaderEvalError("report: no run given")
    if order and len(loaded) < 2:
        raise LeaderEvalError("--order orders the checkpoints of several runs; one run was given")
    run_index = {id(r): i for i, r in enumerate(loaded)}
    parts: list[str] = []
    if len(loaded) > 1 or comparison is not None:
        from leader_eval.decide.checkpoints import recommend_checkpoint
        from leader_eval.decide.compare import compare_runs

        c = comparison or compare_runs(loaded, alpha=alpha, across_suites=across_suites)
        parts.append('<section id="comparison"><h2>Comparison</h2>' + _comparison_html(c, run_index) + "</section>")
        rec = recommend_checkpoint(c, order)
        if rec is not None:
            parts.append('<section id="checkpoints"><h2>Checkpoints</h2>' + _checkpoints_html(rec) + "</section>")
    islands = []
    notes = []
    for i, run in enumerate(loaded):
        parts.append(_run_section(run, i, open_=len(loaded) == 1))
        island, left = _run_island(run)
        islands.append(island)
        if left:
            notes.append(
                f'<p class="note">Run {i}: {left} samples are not embedded (the report keeps at most {MAX_SAMPLES}); '
                f"<code>leader-eval show {esc(run.path)}</code> prints them all.</p>"
            )
    if title is None:
        first = loaded[0]
        suite = first.manifest.get("identity", {}).get("suite", "")
        title = (
            f"leader-eval report: {suite} · {first.manifest.get('label') or first.manifest['identity'].get('model_id')}"
            if len(loaded) == 1
            else f"leader-eval comparison: {suite} · {len(loaded)} runs"
        )
    return page(title, "\n".join(notes + parts), islands)


def write_report(runs: Sequence[Run | str | Path], out: str | Path, **options: Any) -> Path:
    """Render and write atomically (a reader never sees half a report); returns the path."""

    path = Path(out)
    if path.is_dir():
        raise LeaderEvalError(f"{path}: is a directory (give the report's file name, e.g. {path / REPORT_NAME})")
    text = render_report(runs, **options)
    # the page is escaped text already; backslashreplace only guards a stray surrogate. Written
    # like every run file: never through a symlink, within its cap
    write_bytes_atomic(path, text.encode("utf-8", errors="backslashreplace"))
    return path


def write_run_report(run: Run | str | Path) -> Path:
    """Write ``report.html`` into a run directory from its stored records; returns its path.
    A ``Run`` just scored whose records were written whole (``Run.stored``) is those records:
    the report is made from it without reading the directory back."""
    if isinstance(run, RunType):
        return write_report([run if run.stored else run.path], Path(run.path) / REPORT_NAME)
    return write_report([run], Path(run) / REPORT_NAME)


#: the run artifact the docs' workflow uploads (``runs/``); ``LEADER_EVAL_ARTIFACT`` names another
DEFAULT_ARTIFACT = "leader-eval-runs"
_SAFE_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_SAFE_SERVER = re.compile(r"https://[A-Za-z0-9.-]{1,200}(:[0-9]{1,5})?")


def artifact_path(path: str | Path) -> str:
    """A file or directory as the uploaded artifact holds it: relative to the workspace (the
    checkout, ``$GITHUB_WORKSPACE``, else the working directory), else the last two parts of its
    path (``RUN_DIR/report.html``); never a path that exists only on the runner."""
    path = Path(path).resolve()
    base = Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd()).resolve()
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return Path(*path.parts[-2:]).as_posix()


def artifacts_url() -> str | None:
    """This workflow run's page of artifacts on GitHub, when the runner's variables give one."""
    server = os.environ.get("GITHUB_SERVER_URL", "")
    repo = os.environ.get("GITHUB_REPOSITORY", "")
    run_id = os.environ.get("GITHUB_RUN_ID", "")
    if _SAFE_SERVER.fullmatch(server) and _SAFE_REPOSITORY.fullmatch(repo) and run_id.isdigit() and len(run_id) < 20:
        return f"{server}/{repo}/actions/runs/{run_id}#artifacts"
    return None


def artifact_markdown_line(path: str | Path) -> str:
    """A Markdown line naming a report file inside the uploaded artifact (the step summary is read
    on GitHub, where a path on the runner is dead): ``Report: runs/X/report.html in the uploaded
    artifact leader-eval-runs``, with a link to the workflow run's artifacts when known."""
    artifact = os.environ.get("LEADER_EVAL_ARTIFACT") or DEFAULT_ARTIFACT
    url = artifacts_url()
    link = f" ([artifacts of this workflow run]({url}))" if url else ""
    return f"Report: {markdown(artifact_path(path))} in the uploaded artifact {markdown(artifact)}{link}\n"


def report_markdown_link(run_dir: str | Path) -> str:
    """``artifact_markdown_line`` of a run's report, or "" when the run has none."""
    path = Path(run_dir) / REPORT_NAME
    return artifact_markdown_line(path) if path.is_file() else ""
