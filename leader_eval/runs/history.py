"""The history of recorded runs: one small entry per run (identity, metrics with their intervals,
gate verdicts), read from every run directory under a folder and from the index of pruned runs.

``leader-eval report runs/ --history`` renders the entries (``report.history``). Reading is bounded
and never raises on a bad directory: at most ``MAX_RUNS`` directories are read (the newest by
modification time), each run file read for the history at most ``FILE_CAP`` bytes, and a directory
that is a symlink, holds a symlink or special file, or has an unreadable manifest or summary gives
one line in ``History.notes`` instead of an entry.

Pruning (``pytest_plugin.ci.prune_runs``) appends the entry of each run it deletes to
``HISTORY_INDEX`` in the same folder (one JSON line per run, keyed by ``run_id``), so the page keeps
a pruned run's metrics and verdicts (without its report, which went with the run).

The gate's verdicts: ``leader-eval gate`` and the pytest plugin write ``gate.json`` into the run
they gated, one record per baseline (the latest), which the entry carries.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.store.run_store import (
    GATE_JSON,
    HISTORY_INDEX,
    MANIFEST,
    MIB,
    REPORT,
    SUMMARY,
    RecordLog,
    RunDir,
    read_bytes,
    refuse_unsafe,
    shown,
    write_json_atomic,
)

FORMAT_VERSION = 1
#: the most run directories (and pruned entries) one history page reads
MAX_RUNS = 2000
#: the most bytes of a manifest, summary or gate record the history reads (a manifest of tens of
#: thousands of cases stays under it; a bigger file is a note, not a hang)
FILE_CAP = 16 * MIB
#: the most bytes the pruned-run index may hold (~2 KB an entry: thousands of runs)
INDEX_CAP = 16 * MIB
#: the most characters of a name (label, model id) an entry keeps
NAME_CAP = 200
#: the most metrics an entry keeps (the metric table has about a dozen)
MAX_METRICS = 32


@dataclass
class History:
    """The entries found (newest first) and one line per directory that gave none."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _name(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= NAME_CAP else text[:NAME_CAP] + "…"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if v == v and abs(v) != float("inf") else None


def _read_json(path: Path, what: str) -> Any:
    data = read_bytes(path, what, FILE_CAP)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise LeaderEvalError(f"{shown(path)}: unreadable {what}: {str(exc).splitlines()[0][:200]}") from None


def _metrics(overall: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    metrics = overall.get("metrics")
    if not isinstance(metrics, Mapping):
        return out
    for name, m in list(metrics.items())[:MAX_METRICS]:
        if not isinstance(m, Mapping):
            continue
        out[_name(name)] = {
            "value": _number(m.get("value")),
            "low": _number(m.get("low")),
            "high": _number(m.get("high")),
            "higher_is_better": bool(m.get("higher_is_better", True)),
        }
    return out


def _gates(raw: Any) -> dict[str, dict[str, Any]]:
    gates = raw.get("gates") if isinstance(raw, Mapping) else None
    if not isinstance(gates, Mapping):
        return {}
    out = {}
    for baseline, g in list(gates.items())[:MAX_METRICS]:
        if isinstance(g, Mapping):
            raw_failed = g.get("failed")
            failed: list[Any] = raw_failed if isinstance(raw_failed, list) else []
            out[_name(baseline)] = {
                "status": _name(g.get("status")),
                "created": _name(g.get("created")),
                "strict": bool(g.get("strict")),
                "failed": [_name(m) for m in failed[:MAX_METRICS]],
            }
    return out


def run_entry(run_dir: Path) -> dict[str, Any]:
    """The history entry of one run directory; ``LeaderEvalError`` (one line) when it has none."""
    rd = RunDir(run_dir)
    rd.check()  # no symlink or special file inside
    manifest = _read_json(run_dir / MANIFEST, "manifest")
    if not isinstance(manifest, Mapping) or not isinstance(manifest.get("identity"), Mapping):
        raise LeaderEvalError(f"{shown(run_dir / MANIFEST)}: not a leader-eval manifest")
    identity = manifest["identity"]
    summary: Any = {}
    if (run_dir / SUMMARY).is_file():
        summary = _read_json(run_dir / SUMMARY, "summary")
    overall = summary.get("overall") if isinstance(summary, Mapping) else None
    overall = overall if isinstance(overall, Mapping) else {}
    gates: Any = {}
    if (run_dir / GATE_JSON).is_file():
        gates = _read_json(run_dir / GATE_JSON, "gate record")
    seed = identity.get("run_seed")
    return {
        "format_version": FORMAT_VERSION,
        "run_id": _name(manifest.get("run_id") or run_dir.name),
        "dir": _name(run_dir.name),
        "created": _name(manifest.get("created")),
        "suite": _name(identity.get("suite")),
        "suite_hash": _name(identity.get("suite_hash")),
        "label": _name(manifest.get("label") or identity.get("model_id")),
        "model_id": _name(identity.get("model_id")),
        "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        "status": _name(manifest.get("status")),
        "created_by": _name(manifest.get("created_by")),
        "n_cases": _number(overall.get("n_cases")),
        "n_samples": _number(overall.get("n_samples")),
        "n_errors": _number(overall.get("n_errors")),
        "metrics": _metrics(overall),
        "gates": _gates(gates),
        "report": (run_dir / REPORT).is_file(),
        "pruned": False,
    }


def _subdirs(folder: Path, notes: list[str]) -> list[tuple[float, Path]]:
    try:
        entries = list(os.scandir(folder))
    except OSError as exc:
        notes.append(f"{shown(folder)}: cannot list: {exc.strerror or exc}")
        return []
    dirs = []
    for e in entries[: MAX_RUNS * 4]:  # a folder of millions of entries is not read to its end
        try:
            if e.is_symlink():
                if e.is_dir():
                    notes.append(f"{shown(e.path)}: a symlink: skipped (the history reads no run through a link)")
            elif e.is_dir(follow_symlinks=False):
                dirs.append((e.stat(follow_symlinks=False).st_mtime, Path(e.path)))
        except OSError as exc:
            notes.append(f"{shown(e.path)}: cannot inspect: {exc.strerror or exc}")
    return dirs


def _candidates(root: Path, notes: list[str]) -> list[Path]:
    """The directories under ``root`` that may be runs, newest first: ``root`` itself when it is
    one, else its sub-folders and theirs (a downloaded CI artifact holds ``shard1/RUN``)."""
    try:
        refuse_unsafe(root / MANIFEST, "manifest")
    except LeaderEvalError as err:
        notes.append(str(err))
        return []
    if (root / MANIFEST).is_file():
        return [root]
    dirs = []
    for mtime, d in _subdirs(root, notes):
        if os.path.lexists(d / MANIFEST):
            dirs.append((mtime, d))
        else:
            dirs.extend(_subdirs(d, notes))
    dirs.sort(key=lambda t: (-t[0], str(t[1])))
    return [p for _, p in dirs]


def read_index(root: Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The entries of pruned runs recorded in ``root``'s index (none when there is no index)."""
    path = root / HISTORY_INDEX
    if not os.path.lexists(path):
        return []
    try:
        log = RecordLog(
            path, "run_id", readonly=True, cap=INDEX_CAP, valid=lambda r: isinstance(r.get("metrics"), dict)
        )
    except LeaderEvalError as err:
        if notes is not None:
            notes.append(str(err))
        return []
    if log.bad_lines and notes is not None:
        notes.append(f"{shown(path)}: {len(log.bad_lines)} unreadable line(s) skipped (first: line {log.bad_lines[0]})")
    out = []
    for rec in log.records():
        entry = {**rec, "pruned": True, "report": False}
        entry["metrics"] = _metrics({"metrics": rec.get("metrics")})
        entry["gates"] = _gates({"gates": rec.get("gates")})
        out.append(entry)
    return out


def collect(roots: Iterable[Path], *, max_runs: int = MAX_RUNS) -> History:
    """Every run's entry under ``roots`` (run directories or folders of them) plus the pruned index."""
    h = History()
    seen: set[str] = set()
    budget = max_runs
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            h.notes.append(f"{shown(root)}: not a directory")
            continue
        dirs = _candidates(root, h.notes)
        if len(dirs) > budget:
            h.notes.append(f"{shown(root)}: {len(dirs) - budget} older directories not read (at most {max_runs})")
            dirs = dirs[:budget]
        for d in dirs:
            if not (d / MANIFEST).exists() and not os.path.islink(d / MANIFEST):
                continue  # not a run directory (a plain sub-folder): nothing to say
            budget -= 1
            try:
                entry = run_entry(d)
            except LeaderEvalError as err:
                h.notes.append(str(err).splitlines()[0] if str(err) else f"{shown(d)}: unreadable")
                continue
            except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
                h.notes.append(f"{shown(d)}: unreadable ({type(exc).__name__}: {str(exc)[:200]})")
                continue
            entry["path"] = str(d)
            if entry["run_id"] not in seen:
                seen.add(entry["run_id"])
                h.entries.append(entry)
        for entry in read_index(root, h.notes)[: max(budget, 0)]:
            if entry.get("run_id") not in seen:
                seen.add(str(entry.get("run_id")))
                h.entries.append(entry)
                budget -= 1
    h.entries.sort(key=lambda e: str(e.get("created") or ""), reverse=True)
    return h


def record_pruned(run_root: Path, entry: Mapping[str, Any]) -> None:
    """Append a pruned run's entry to the index (``LeaderEvalError`` when it cannot be written)."""
    rec = {k: v for k, v in entry.items() if k not in ("path", "report", "pruned")}
    log = RecordLog(run_root / HISTORY_INDEX, "run_id", cap=INDEX_CAP)
    try:
        log.append(rec)
    finally:
        log.close()


def record_gate(run_dir: Path, baseline: str, record: Mapping[str, Any]) -> None:
    """Keep ``record`` as the run's latest verdict against ``baseline`` in its ``gate.json``."""
    path = run_dir / GATE_JSON
    current: Any = {}
    if os.path.lexists(path):
        try:
            current = _read_json(path, "gate record")
        except LeaderEvalError:
            current = {}  # a damaged record is replaced: it is derived, the gate decides again
    gates = dict(current.get("gates") or {}) if isinstance(current, Mapping) else {}
    gates[baseline] = dict(record)
    write_json_atomic(path, {"format_version": FORMAT_VERSION, "gates": gates})
