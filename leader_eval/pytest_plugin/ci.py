"""CI conventions: GitHub annotations and step summary, and the bound on kept run directories.

With ``GITHUB_ACTIONS=true`` each suite's gate Markdown is appended to ``$GITHUB_STEP_SUMMARY``
and each failing case gets a workflow command pointing at its line in the suite YAML
(``::error file=SUITE,line=N::...``; ``::warning`` for a case that fails only in soft mode's
evidence while the gate decides). Paths are relative to ``$GITHUB_WORKSPACE`` (the checkout),
else to the rootdir.

Runs made by pytest (manifest ``created_by: pytest``) are pruned to the newest ``keep`` per suite
and label after each session; each pruned run's history entry (metrics with intervals, gate
verdicts) is first appended to the run folder's index (``runs.history``), which the history page
reads. Never deleted: a run whose entry could not be written to the index, a run another process
holds the lock of, a run a golden file in the golden directory was created from, the runs of this
session, and anything that is not a run directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.inert import command_data, command_property
from leader_eval.inert import markdown as md_text


def github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def annotation(level: str, file: str, line: int, title: str, message: str) -> str:
    """One GitHub workflow command (``::error file=...,line=...,title=...::message``).

    Its parts may quote a server or a suite: each is ``inert`` and then escaped as the runner
    reads it (``%``, CR, LF; in a property also ``:`` and ``,``), so nothing in them can end the
    command, start another one or reach the log as an escape sequence.
    """
    props = f"file={command_property(file)},line={int(line)},title={command_property(title)}"
    return f"::{level} {props}::{command_data(message)}"


def relative_for_github(path: str | Path, rootpath: Path) -> str:
    base = Path(os.environ.get("GITHUB_WORKSPACE") or rootpath)
    try:
        return Path(path).resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return Path(os.path.relpath(Path(path).resolve(), base.resolve())).as_posix()


def case_annotation(level: str, suite_path: str, rootpath: Path, rec: dict[str, Any]) -> str:
    """The annotation for one failing case record (its ``line`` is the case's line in the YAML)."""
    n_scored = int(rec.get("n_scored") or 0)
    n_failed = n_scored - int(rec.get("n_passed") or 0)
    if n_scored == 0:
        what = f"no sample was scored: {rec.get('first_error') or 'every sample errored'}"
    else:
        reasons = ", ".join(f"{k} {v}" for k, v in (rec.get("reasons") or {}).items())
        what = f"{n_failed} of {n_scored} samples failed" + (f" ({reasons})" if reasons else "")
    return annotation(
        level,
        relative_for_github(suite_path, rootpath),
        int(rec.get("line") or 1),
        f"leader-eval {rec.get('suite')}::{rec['case_id']}",
        what,
    )


def write_step_summary(markdown: str) -> None:
    """Append to ``$GITHUB_STEP_SUMMARY`` when the runner set it."""
    dest = os.environ.get("GITHUB_STEP_SUMMARY")
    if dest:
        with open(dest, "a", encoding="utf-8") as f:
            f.write(markdown.rstrip() + "\n\n")


def matrix_markdown(gates: list[Any]) -> str:
    """A model matrix's table for the step summary: one row per model of one suite (its gate's
    verdict, the metrics that failed, the gate's p-value and the level Holm across the models
    gave it), before each model's own gate table. ``gates``: the suite's ``SuiteGate``s."""
    first = next(g for g in gates if g.result is not None)
    alpha = first.result.alpha
    lines = [
        f"### leader-eval matrix: {md_text(first.suite)}, {len(gates)} models against baseline "
        f"{md_text(first.result.baseline)}",
        "",
        f"Each model gated against the baseline; false alarms held at alpha {alpha:g} across the models "
        "(Holm over each gate's smallest Holm-adjusted p).",
        "",
        "| model | verdict | failed | gate p | Holm level |",
        "|---|---|---|---|---|",
    ]
    for g in gates:
        verdict = (g.result.status if g.result is not None else "error").upper()
        failed = ", ".join(g.result.failed) if g.result is not None else ""
        fam = g.family
        p = f"{fam.p_gate:.3g}" if fam is not None else "-"
        level = f"{fam.level:.3g}" if fam is not None else "-"
        lines.append(f"| {md_text(g.label)} | {verdict} | {md_text(failed) or '-'} | {p} | {level} |")
    return "\n".join(lines)


def _manifest(path: Path) -> dict[str, Any] | None:
    try:
        from leader_eval.store.run_store import MANIFEST, read_json_file

        data = read_json_file(path / MANIFEST, MANIFEST)
    except (OSError, LeaderEvalError):
        return None
    return data if isinstance(data, dict) else None


def _locked(path: Path) -> bool:
    """A run another process is writing (it holds the run directory's lock)."""
    from leader_eval.store.run_store import LOCK, lock_holder

    try:
        return lock_holder(path / LOCK) is not None
    except LeaderEvalError:  # a lock that is a link or a FIFO: not ours to judge, so never delete
        return True


def golden_sources(golden_dir: Path) -> set[str]:
    """Run ids the golden files under ``golden_dir`` were created from."""
    out = set()
    for p in golden_dir.glob("*/*.json") if golden_dir.is_dir() else ():
        try:
            from leader_eval.store.run_store import read_json_file

            src = read_json_file(p, "golden file").get("created_from")  # no symlink, no FIFO
        except (OSError, LeaderEvalError, AttributeError):
            continue
        if src:
            out.add(str(src))
    return out


def prune_runs(
    run_root: Path, suite: str, label: str, keep: int, protect: Iterable[Path], golden_dir: Path
) -> list[Path]:
    """Delete pytest-made runs of (suite, label) beyond the newest ``keep``; returns what was deleted."""
    if keep <= 0 or not run_root.is_dir():
        return []
    protected = {p.resolve() for p in protect}
    sources = golden_sources(golden_dir)
    mine = []
    for d in run_root.iterdir():
        if not d.is_dir() or d.is_symlink():
            continue
        m = _manifest(d)
        if not m or m.get("created_by") != "pytest":
            continue
        if (m.get("identity") or {}).get("suite") != suite or m.get("label") != label:
            continue
        mine.append((str(m.get("created") or ""), d.stat().st_mtime, d, str(m.get("run_id") or "")))
    mine.sort(reverse=True)
    deleted = []
    for _, _, d, run_id in mine[keep:]:
        if d.resolve() in protected or run_id in sources or _locked(d):
            continue
        if not _keep_in_history(run_root, d):
            continue
        shutil.rmtree(d, ignore_errors=True)
        deleted.append(d)
    return deleted


def _keep_in_history(run_root: Path, run_dir: Path) -> bool:
    """Record a run about to be pruned in the history index (``runs.history``); False when its
    entry could not be written, so the run stays (the history would lose it otherwise). A run
    with no readable entry has nothing the history could show: it is pruned."""
    from leader_eval.runs.history import record_pruned, run_entry

    try:
        entry = run_entry(run_dir)
    except (OSError, ValueError, LeaderEvalError):
        return True
    try:
        record_pruned(run_root, entry)
    except (OSError, LeaderEvalError):
        return False
    return True
