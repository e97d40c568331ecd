"""The history page: one offline HTML index over recorded runs (``leader-eval report DIR --history``).

Per suite and baseline: each metric over time and, when the labels are checkpoints of one training
run (``decide.checkpoints.label_numbers``), over checkpoints, every point with its 95% interval
(inline SVG drawn here, no script: the page's policy allows none); the runs as a table, score
first, with the gate's verdict against that baseline and a relative link to each run's own
report (so the page works inside a downloaded CI artifact). A run never gated sits under
"not gated". A change of the suite's content is a dashed line: the runs on either side of it were
not measured on the same cases. Entries come from ``runs.history.collect`` (bounded; a bad
directory is a note at the top).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from leader_eval.decide.checkpoints import label_numbers
from leader_eval.errors import LeaderEvalError
from leader_eval.report.html import esc, page
from leader_eval.runs.history import History, collect
from leader_eval.stats.metrics import METRICS
from leader_eval.store.run_store import REPORT, write_bytes_atomic

#: the group of runs no gate has judged
NOT_GATED = "not gated"
#: metrics charted per group (score first; the rest as the metric table orders them)
MAX_CHARTS = 6
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 420, 180, 40, 12, 12, 38
_COLOR = {"pass": "#116329", "fail": "#b3261e", NOT_GATED: "#5b6470"}


def _f(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.3f}"


def _groups(entries: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """(suite, baseline) -> its entries, oldest first."""
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for e in sorted(entries, key=lambda e: (str(e.get("created") or ""), str(e.get("run_id")))):
        for baseline in e.get("gates") or {NOT_GATED: None}:
            out.setdefault((str(e.get("suite")), str(baseline)), []).append(e)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1] == NOT_GATED, kv[0][1])))


def _verdict(e: Mapping[str, Any], baseline: str) -> str:
    g = (e.get("gates") or {}).get(baseline)
    return str(g.get("status")) if isinstance(g, Mapping) else NOT_GATED


def _metric_names(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    present = {m for e in entries for m, v in (e.get("metrics") or {}).items() if v.get("value") is not None}
    ordered = [m for m in METRICS if m in present] + sorted(present - set(METRICS))
    return ["score", *[m for m in ordered if m != "score"]] if "score" in present else ordered


def _chart(
    entries: Sequence[Mapping[str, Any]],
    xs: Sequence[float],
    ticks: Sequence[tuple[float, str]],
    metric: str,
    baseline: str,
    xlabel: str,
) -> str:
    """One metric's points with 95% interval bars as inline SVG (text escaped; no script)."""
    pts = []
    for e, x in zip(entries, xs, strict=True):
        m = (e.get("metrics") or {}).get(metric) or {}
        if m.get("value") is not None:
            pts.append((x, m["value"], m.get("low"), m.get("high"), e))
    if not pts:
        return ""
    values = [v for p in pts for v in p[1:4] if v is not None]
    lo, hi = (0.0, 1.0) if min(values) >= 0 and max(values) <= 1 else (min(values), max(values))
    hi = hi if hi > lo else lo + 1
    x0, x1 = min(xs), max(xs)
    span = x1 - x0 or 1.0

    def px(x: float) -> float:
        inner = 24  # the first and last tick label stay inside the chart
        return PAD_L + inner + (x - x0) / span * (W - PAD_L - PAD_R - 2 * inner) if x1 > x0 else (PAD_L + W - PAD_R) / 2

    def py(y: float) -> float:
        return PAD_T + (1 - (y - lo) / (hi - lo)) * (H - PAD_T - PAD_B)

    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{esc(metric)} by {esc(xlabel)}, 95% intervals</title>'
    ]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = lo + frac * (hi - lo)
        parts.append(
            f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#d8dde3"/>'
            f'<text x="{PAD_L - 4}" y="{py(y) + 4:.1f}" text-anchor="end" font-size="10">{y:.2f}</text>'
        )
    for x, text in ticks:
        parts.append(
            f'<text x="{px(x):.1f}" y="{H - PAD_B + 14}" text-anchor="middle" font-size="9">{esc(text)}</text>'
        )
    parts.append(
        f'<text x="{(W + PAD_L) / 2:.0f}" y="{H - 6}" text-anchor="middle" font-size="10">{esc(xlabel)}</text>'
    )
    prev_hash = None
    for x, e in sorted(zip(xs, entries, strict=True), key=lambda t: t[0]):
        h = e.get("suite_hash")
        if prev_hash is not None and h != prev_hash:
            parts.append(
                f'<line class="suite-change" x1="{px(x) - 3:.1f}" x2="{px(x) - 3:.1f}" y1="{PAD_T}" '
                f'y2="{H - PAD_B}" stroke="#b3261e" stroke-dasharray="4 3"><title>suite content changed: '
                f"{esc(prev_hash)} to {esc(h)}</title></line>"
            )
        prev_hash = h
    line = " ".join(f"{px(x):.1f},{py(v):.1f}" for x, v, *_ in sorted(pts, key=lambda p: p[0]))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#8a94a0" stroke-width="1"/>')
    for x, v, low, high, e in pts:
        verdict = _verdict(e, baseline)
        color = _COLOR.get(verdict, _COLOR["fail"])  # stale, incomplete, errors, missing: not a pass
        tip = (
            f"{e.get('label')} (seed {e.get('seed')}, {e.get('created')}): {metric} {_f(v)} "
            f"[{_f(low)}, {_f(high)}]; gate: {verdict}"
        )
        if low is not None and high is not None:
            parts.append(
                f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{py(low):.1f}" y2="{py(high):.1f}" '
                f'stroke="{color}" stroke-width="2" opacity="0.55"/>'
            )
        parts.append(
            f'<circle class="point" cx="{px(x):.1f}" cy="{py(v):.1f}" r="4" fill="{color}">'
            f"<title>{esc(tip)}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _charts(entries: Sequence[Mapping[str, Any]], baseline: str) -> str:
    names = _metric_names(entries)[:MAX_CHARTS]
    out = []
    # over time: runs in the order they were made, evenly spaced (a run every minute or every week)
    xs = [float(i) for i in range(len(entries))]
    step = max(1, len(entries) // 8)
    ticks = [(float(i), str(e.get("created") or "")[:10]) for i, e in enumerate(entries) if i % step == 0]
    labels = list(dict.fromkeys(str(e.get("label")) for e in entries))
    nums = label_numbers(labels)
    for metric in names:
        out.append(
            f"<figure><figcaption>{esc(metric)} over time</figcaption>"
            + _chart(entries, xs, ticks, metric, baseline, "run date (in order)")
            + "</figure>"
        )
        if nums is not None:
            by_label = dict(zip(labels, nums, strict=True))
            cx = [by_label[str(e.get("label"))] for e in entries]
            cticks = [(n, lb) for lb, n in by_label.items()]
            out.append(
                f"<figure><figcaption>{esc(metric)} over checkpoints</figcaption>"
                + _chart(entries, cx, cticks, metric, baseline, "checkpoint (from the labels)")
                + "</figure>"
            )
    return '<div class="charts">' + "".join(out) + "</div>"


def _link(e: Mapping[str, Any], out_dir: Path) -> str:
    if e.get("pruned"):
        return '<span class="note">pruned (metrics kept in the index)</span>'
    if not e.get("report") or not e.get("path"):
        return f'<span class="note">no report (<code>leader-eval report {esc(e.get("dir"))}</code>)</span>'
    rel = Path(os.path.relpath(Path(str(e["path"])) / REPORT, out_dir)).as_posix()
    # percent-encoded and anchored at "./": a directory named "javascript:..." or holding "#" or
    # "?" stays a relative path to that file
    href = quote(rel, safe="/") if rel.startswith("../") else "./" + quote(rel, safe="/")
    return f'<a href="{esc(href)}">{esc(e.get("dir"))}</a>'


def _table(entries: Sequence[Mapping[str, Any]], baseline: str, out_dir: Path) -> str:
    names = [m for m in _metric_names(entries) if m != "score"]
    head = ["score [95% CI]", "gate", "label", "made", "seed", "model", "status", *names, "suite content", "run"]
    rows = []
    for e in reversed(entries):  # newest first
        m = e.get("metrics") or {}
        sc = m.get("score") or {}
        verdict = _verdict(e, baseline)
        g = (e.get("gates") or {}).get(baseline) or {}
        failed = f" ({esc(', '.join(g.get('failed') or []))})" if g.get("failed") else ""
        cls = "good" if verdict == "pass" else ("" if verdict == NOT_GATED else "bad")
        cells = [
            f"<b>{_f(sc.get('value'))}</b> [{_f(sc.get('low'))}, {_f(sc.get('high'))}]",
            f'<span class="{cls}">{esc(verdict)}</span>{failed}',
            esc(e.get("label")),
            esc(str(e.get("created") or "")[:19]),
            esc(e.get("seed")),
            esc(e.get("model_id")),
            esc(e.get("status")),
            *(_f((m.get(n) or {}).get("value")) for n in names),
            f"<code>{esc(str(e.get('suite_hash') or '')[:15])}</code>",
            _link(e, out_dir),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f'<table class="history"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def render_history(history: History, out_dir: Path) -> str:
    """The history page of ``history``'s entries; links are relative to ``out_dir``."""
    parts = []
    if history.notes:
        items = "".join(f"<li>{esc(n)}</li>" for n in history.notes)
        parts.append(
            f'<section id="notes"><h2>Not read ({len(history.notes)})</h2><ul class="note">{items}</ul></section>'
        )
    if not history.entries:
        parts.append('<p class="warn">No recorded run found.</p>')
    for (suite, baseline), entries in _groups(history.entries).items():
        head = f"{esc(suite)} · {'runs no gate judged' if baseline == NOT_GATED else 'baseline ' + esc(baseline)}"
        verdicts = [_verdict(e, baseline) for e in entries]
        counts = ", ".join(f"{verdicts.count(v)} {esc(v)}" for v in dict.fromkeys(verdicts))
        parts.append(
            f'<section class="group" data-suite="{esc(suite)}" data-baseline="{esc(baseline)}">'
            f'<h2>{head}</h2><p class="counts">{len(entries)} runs: {counts}</p>'
            + _table(entries, baseline, out_dir)
            + _charts(entries, baseline)
            + "</section>"
        )
    title = f"leader-eval history: {len(history.entries)} runs"
    return page(title, "\n".join(parts), [], script=False)


def write_history(roots: Sequence[str | Path], out: str | Path, *, max_runs: int | None = None) -> tuple[Path, History]:
    """Collect the runs under ``roots`` and write the page to ``out``; returns its path and what was read."""
    from leader_eval.runs.history import MAX_RUNS

    path = Path(out)
    if path.is_dir():
        raise LeaderEvalError(f"{path}: is a directory (give the page's file name, e.g. {path / 'history.html'})")
    history = collect([Path(r) for r in roots], max_runs=max_runs or MAX_RUNS)
    text = render_history(history, path.resolve().parent)
    write_bytes_atomic(path, text.encode("utf-8", errors="backslashreplace"))
    return path, history
