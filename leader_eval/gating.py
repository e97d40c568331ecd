"""The gate of a pytest session: per suite, the controller's case records against the golden.

The records (one per case, sent by whichever worker scored it) are the source of truth, so a
serial run and ``-n N`` aggregate the same numbers, and a case whose record never arrived (a
crashed worker) makes the suite incomplete instead of silently passing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.aggregate import summarize
from leader_eval.errors import LeaderEvalError
from leader_eval.evaluate import Run
from leader_eval.golden import format_gate_table, gate, golden_path, load_golden, update_golden
from leader_eval.runner import default_label
from leader_eval.store import RunDir, write_json_atomic
from leader_eval.suite import load_suite

if TYPE_CHECKING:
    from leader_eval.pytest_plugin import PluginState


def session_run(suite_name: str, state: PluginState) -> tuple[Run, list[str]]:
    """A ``Run`` rebuilt from the session's case records, and what is missing from it."""
    meta = state.suite_meta[suite_name]
    suite = load_suite(meta["path"])
    records = state.records.get(suite_name, {})
    collected = state.collected.get(suite_name, set())
    problems = []
    missing = sorted(collected - set(records))
    if missing:
        problems.append(
            f"run incomplete: {len(missing)} collected case(s) sent no result ({', '.join(missing[:5])})"
            " - a crashed worker or an error before scoring"
        )
    run_dir = Path(meta["run_dir"]) if meta.get("run_dir") else None
    manifest: dict[str, Any] = RunDir(run_dir).read_manifest() if run_dir else {}
    if records and any(r.get("manifest_status") != "complete" for r in records.values()):
        problems.append("run incomplete: sampling did not finish")
    order = {c.id: i for i, c in enumerate(suite.cases)}
    results = sorted(records.values(), key=lambda r: order.get(r["case_id"], len(order)))
    summary = summarize(suite, results)
    if problems:
        manifest = {**manifest, "status": "incomplete"}
    return Run(run_dir or Path("."), manifest, [], [], list(results), summary), problems


def gate_session(state: PluginState, *, interrupted: bool) -> tuple[int, list[str]]:
    """Gate every suite the session ran; returns (exit status, lines for the terminal summary)."""
    o = state.options
    status = 0
    lines: list[str] = []
    for suite_name in sorted(set(state.collected) | set(state.records)):
        if suite_name not in state.suite_meta:
            continue
        try:
            run, problems = session_run(suite_name, state)
        except LeaderEvalError as err:
            lines.append(f"{suite_name}: {err}")
            status = max(status, 1)
            continue
        if not run.manifest:
            lines.append(f"{suite_name}: no case was scored")
            status = max(status, 1)
            continue
        if run.path != Path("."):
            # what the controller aggregated: must equal the worker's summary.json for the same samples
            write_json_atomic(run.path / "session_summary.json", run.summary)
        label = o["label"] or default_label(run.manifest["identity"]["model_id"])
        path = golden_path(o["golden_dir"], suite_name, label)
        result = gate(
            run,
            load_golden(path),
            strict=o["golden_strict"],
            tolerances=o["tolerances"] or None,
            golden_file=path,
            label=label,
        )
        if problems:
            result.status = "incomplete"
            result.messages[:0] = problems
        if o["update_golden"]:
            suite = load_suite(state.suite_meta[suite_name]["path"])
            if interrupted or problems:
                lines.append(
                    f"{suite_name}: golden not updated: the run was {'interrupted' if interrupted else 'incomplete'}"
                )
            elif state.collected.get(suite_name, set()) != {c.id for c in suite.cases}:
                lines.append(f"{suite_name}: golden not updated: not every case of the suite ran (-k/-m selection)")
            else:
                result.update = update_golden(
                    run, o["golden_dir"], label=label, suite=suite, tolerances=o["tolerances"] or None
                )
                lines.append(f"{suite_name}: {result.update.reason}")
        lines.append(format_gate_table(result))
        status = max(status, result.exit_status)
    return status, lines
