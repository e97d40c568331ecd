"""``leader-eval export RUN... --format csv|jsonl|parquet``: a run's samples (or cases) as a table."""

from __future__ import annotations

import argparse
from pathlib import Path

from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import read_run
from leader_eval.runs.export import (
    CASE_COLUMNS,
    SAMPLE_COLUMNS,
    case_rows,
    columns_of,
    sample_rows,
    uniform_rows,
    write_table,
)
from leader_eval.store.run_store import MANIFEST, SAMPLES


def run(args: argparse.Namespace) -> int:
    runs = [read_run(p) for p in args.runs]  # every run readable before anything is written
    rows = []
    for r in runs:
        rows += (
            case_rows(r.manifest, r.cases) if args.per_case else sample_rows(r.manifest, r.samples, r.scores, r.cases)
        )
    fixed = CASE_COLUMNS if args.per_case else SAMPLE_COLUMNS
    rows = uniform_rows(rows, fixed)  # runs of different suites may differ in their check.* columns
    columns = columns_of(rows, fixed)
    out = Path(args.out) if args.out else Path(_default_name(runs[0].manifest, len(runs), args))
    if out.is_dir():
        raise LeaderEvalError(f"export: --out {out} is a folder; name the file")
    if out.is_symlink():
        raise LeaderEvalError(f"export: --out {out} is a symbolic link; name a plain file")
    folder = out.resolve().parent
    # any run directory, not only the ones exported: a run's files are its evidence. A run
    # directory holds its manifest and its samples (a manifest.json alone is some other project's
    # file: a web app's, a browser extension's)
    exported = {r.path.resolve() for r in runs}
    if folder in exported or any(
        (d / MANIFEST).is_file() and (d / SAMPLES).is_file() for d in (folder, *folder.parents)
    ):
        raise LeaderEvalError(f"export: {out} is inside a run directory, which holds only the run's own files")
    write_table(rows, columns, args.format, out)
    what = "cases" if args.per_case else "samples"
    print(f"wrote {len(rows)} {what} of {len(runs)} run(s), {len(columns)} columns: {out}")
    return 0


def _default_name(manifest: dict[str, object], n_runs: int, args: argparse.Namespace) -> str:
    stem = str(manifest.get("run_id") or "run") if n_runs == 1 else "export"
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem)
    return f"{stem}{'-cases' if args.per_case else ''}.{args.format}"
