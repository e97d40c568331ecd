"""Results out: a run's samples (or cases) as rows of documented, stable columns (docs/export.md).

``sample_rows`` and ``case_rows`` build plain Python rows from what ``read_run`` read;
``write_table`` writes them as CSV, JSONL or Parquet, and ``to_pandas`` makes a DataFrame (pandas
and pyarrow are optional and imported only here, when asked for). The columns are the tables
``SAMPLE_COLUMNS`` and ``CASE_COLUMNS`` below, in that order, then the column families (``check.*``,
``judge.*``) sorted by name. ``EXPORT_FORMAT_VERSION`` is in every row and in a Parquet file's
metadata: a column is never renamed or given another meaning without a new version.

A CSV cell a spreadsheet would run as a formula (one that starts with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return) is written with a leading ``'``; the JSONL and Parquet values are the
values themselves.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError

EXPORT_FORMAT_VERSION = 1
FORMATS = ("csv", "jsonl", "parquet")

#: one row per sample: (column, what it holds); lists are JSON text in CSV, lists in JSONL/Parquet
SAMPLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("format_version", "the export format version (EXPORT_FORMAT_VERSION)"),
    ("run_id", "the run's id (manifest run_id)"),
    ("label", "the run's label (names the model in tables)"),
    ("model_id", "the model's identity (manifest identity.model_id)"),
    ("suite", "the suite's name"),
    ("suite_hash", "the suite's content hash"),
    ("case_id", "the case"),
    ("sample", "the sample's index within its case (0, 1, ...)"),
    ("seed", "the sample's seed"),
    ("tags", "the case's tags (list)"),
    ("split", "the case's split (heldout, train, dev or empty)"),
    ("weight", "the case's weight"),
    ("outcome", "ok, error or context_overflow (only ok is scored)"),
    ("passed", "the sample passed every check (empty when not scored)"),
    ("hard_fail", "a hard-fail check failed"),
    ("reason", "the first failed check's reason (empty when it passed)"),
    ("failed_reasons", "every failed check's reason, in check order (list)"),
    ("strict_format", "the output is exactly the protocol's format"),
    ("lenient_format", "a call could be read leniently"),
    ("tool_correct", "the right tool(s) were called"),
    ("leaked", "a leak was found"),
    ("leaks", "the distinct leak classes found (list)"),
    ("partial_credit", "the share of expected arguments matched (0 to 1)"),
    ("calls", "the parsed calls, as JSON text"),
    ("text", "the raw output, special tokens included (cut at 64 KiB in the run's files)"),
    ("stop_reason", "why sampling stopped (stop, length, ...)"),
    ("prompt_tokens", "tokens in the prompt"),
    ("completion_tokens", "tokens in the output"),
    ("latency_s", "seconds from request to the last token"),
    ("error", "the sampler's error, when the outcome is error"),
)
#: one row per case (``cases.json``): (column, what it holds)
CASE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("format_version", "the export format version (EXPORT_FORMAT_VERSION)"),
    ("run_id", "the run's id"),
    ("label", "the run's label"),
    ("model_id", "the model's identity"),
    ("suite", "the suite's name"),
    ("suite_hash", "the suite's content hash"),
    ("case_id", "the case"),
    ("tags", "the case's tags (list)"),
    ("split", "the case's split"),
    ("weight", "the case's weight"),
    ("n_samples", "samples planned and recorded"),
    ("n_scored", "samples scored (outcome ok)"),
    ("n_passed", "samples that passed"),
    ("n_errors", "sampler errors"),
    ("n_hard_fail", "samples with a hard fail"),
    ("score", "share of scored samples that passed"),
    ("strict_format_rate", "share with the strict format"),
    ("lenient_format_rate", "share readable leniently"),
    ("tool_accuracy", "share with the right tool(s)"),
    ("hard_fail_rate", "share with a hard fail"),
    ("leak_rate", "share with a leak"),
    ("reasons", "failure reason -> count, as JSON text"),
)
#: column families after the fixed columns: a check's verdict (True passed, False failed, empty
#: not run) and a judge's score, by name; a family appears only when the run holds one
FAMILIES = ("check.", "judge.")
#: what a CSV cell may not start with: a spreadsheet would run it as a formula
_FORMULA_START = ("=", "+", "-", "@", "|", "\t", "\r")
# the full-width forms of the formula characters, read as their ASCII forms by some spreadsheets
_FULL_WIDTH = str.maketrans({"\uff1d": "=", "\uff0b": "+", "\uff0d": "-", "\uff20": "@", "\uff5c": "|"})


def sample_rows(
    manifest: Mapping[str, Any], samples: Iterable[Any], scores: Iterable[Any], cases: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One row per sample of a run (``read_run``'s manifest, samples, scores and case records);
    a sample that was not scored (a sampler error) has empty score columns."""
    head = _run_columns(manifest)
    by_case = {str(c.get("case_id")): c for c in cases if isinstance(c, Mapping)}
    scored = {(s.case_id, s.index): s for s in scores}
    rows = []
    seen = set()
    for sample in sorted(samples, key=lambda s: (s.case_id, s.index)):
        seen.add((sample.case_id, sample.index))
        rows.append(
            _sample_row(head, by_case.get(sample.case_id, {}), sample, scored.get((sample.case_id, sample.index)))
        )
    for key, score in sorted(scored.items()):
        if key not in seen:  # a pytest session's run may hold scores whose samples live elsewhere
            rows.append(_sample_row(head, by_case.get(score.case_id, {}), None, score))
    return uniform_rows(rows, SAMPLE_COLUMNS)


def case_rows(manifest: Mapping[str, Any], cases: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per case record of a run (``cases.json``)."""
    head = _run_columns(manifest)
    rows = []
    for c in cases:
        if not isinstance(c, Mapping):
            continue
        row = {name: c.get(name) for name, _ in CASE_COLUMNS}
        row.update(head)
        row["tags"] = list(c.get("tags") or [])
        row["reasons"] = json.dumps(c.get("reasons") or {}, sort_keys=True, ensure_ascii=False)
        rows.append(row)
    return uniform_rows(rows, CASE_COLUMNS)


def _run_columns(manifest: Mapping[str, Any]) -> dict[str, Any]:
    identity = manifest.get("identity") or {}
    suite = manifest.get("suite") or {}
    return {
        "format_version": EXPORT_FORMAT_VERSION,
        "run_id": manifest.get("run_id"),
        "label": manifest.get("label"),
        "model_id": identity.get("model_id"),
        "suite": suite.get("name") if isinstance(suite, Mapping) else identity.get("suite"),
        "suite_hash": identity.get("suite_hash"),
    }


def _sample_row(head: Mapping[str, Any], case: Mapping[str, Any], sample: Any, score: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys((name for name, _ in SAMPLE_COLUMNS), None)
    row.update(head)
    row.update(
        case_id=sample.case_id if sample is not None else score.case_id,
        sample=sample.index if sample is not None else score.index,
        tags=list(case.get("tags") or []),
        split=case.get("split"),
        weight=case.get("weight"),
    )
    if sample is not None:
        row.update(
            seed=sample.seed,
            outcome=sample.outcome,
            text=sample.text,
            stop_reason=sample.stop_reason,
            prompt_tokens=sample.prompt_tokens,
            completion_tokens=sample.completion_tokens,
            latency_s=(sample.timings or {}).get("total_s"),
            error=sample.error,
        )
    if score is not None:
        row.update(
            outcome=score.outcome,
            failed_reasons=score.failed_reasons,
            leaks=score.leak_classes,
            calls=json.dumps(score.calls, ensure_ascii=False, sort_keys=True),
        )
        if score.scored:
            for name in ("passed", "hard_fail", "reason", "strict_format", "lenient_format", "tool_correct"):
                row[name] = getattr(score, name)
            row.update(leaked=score.leaked, partial_credit=score.partial_credit)
        for check in score.checks:
            if check.get("check") == "judge":
                # the rubric judges' verdicts (runs.judging.attach): criterion -> {"value", "error",
                # "judged", ...}; a judge error or an unjudged sample is None, never a score
                for name, verdict in sorted((check.get("data") or {}).items()):
                    if isinstance(verdict, Mapping):
                        row[f"judge.{name}"] = verdict.get("value") if not verdict.get("error") else None
                continue
            row[f"check.{check['check']}"] = bool(check["passed"])
    return row


def uniform_rows(rows: Sequence[Mapping[str, Any]], fixed: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Every row with every column: the fixed ones in order, then each family's sorted by name
    (rows of several runs, whose suites ran different checks, get the union)."""
    names = [name for name, _ in fixed]
    extra = sorted({k for r in rows for k in r if k.startswith(FAMILIES)})
    return [{k: r.get(k) for k in [*names, *extra]} for r in rows]


def columns_of(rows: Sequence[Mapping[str, Any]], fixed: Sequence[tuple[str, str]]) -> list[str]:
    """The columns of a table (its rows' keys; the fixed ones when it has no row)."""
    return list(rows[0]) if rows else [name for name, _ in fixed]


# --------------------------------------------------------------------------- writing


def neutralise(cell: str) -> str:
    """A CSV cell a spreadsheet would run as a formula, made text with a leading ``'``: one that
    starts with ``= + - @ |``, a tab or a CR, also after leading spaces (spreadsheets strip them)
    and in their full-width forms (some spreadsheets read ``＝`` as ``=``)."""
    head = cell.lstrip(" \u00a0\u3000").translate(_FULL_WIDTH)
    return "'" + cell if head.startswith(_FORMULA_START) or cell.startswith(("\t", "\r")) else cell


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        value = json.dumps(value, ensure_ascii=False)
    return neutralise(str(value))


def write_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fmt: str, path: str | Path) -> None:
    """Write ``rows`` to ``path`` as ``fmt`` (csv, jsonl, parquet), replacing it whole (a
    temporary file beside it, renamed)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if fmt == "csv":
            buf = io.StringIO(newline="")
            # RFC 4180's \r\n: the writer quotes a field holding any character of the line
            # terminator, so a cell with a bare \r or \n stays one cell
            writer = csv.writer(buf, lineterminator="\r\n")
            writer.writerow([neutralise(c) for c in columns])
            for r in rows:
                writer.writerow([_csv_cell(r.get(c)) for c in columns])
            tmp.write_text(buf.getvalue(), encoding="utf-8", newline="")
        elif fmt == "jsonl":
            lines = (json.dumps({c: r.get(c) for c in columns}, ensure_ascii=False) for r in rows)
            tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        elif fmt == "parquet":
            _pyarrow()
            import pyarrow.parquet as pq

            pq.write_table(arrow_table(rows, columns), tmp)
        else:
            raise LeaderEvalError(f"export: unknown format {fmt!r} (csv, jsonl or parquet)")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise LeaderEvalError("Parquet and dataframes need pyarrow: pip install 'leader-eval[data]'") from None
    return pyarrow


def arrow_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Any:
    """The rows as a pyarrow table, ``format_version`` also in its schema metadata."""
    pa = _pyarrow()
    data = {c: [r.get(c) for r in rows] for c in columns}
    table = pa.table({c: pa.array(v, type=_arrow_type(pa, c, v)) for c, v in data.items()})
    return table.replace_schema_metadata({"leader_eval.export.format_version": str(EXPORT_FORMAT_VERSION)})


def _arrow_type(pa: Any, column: str, values: list[Any]) -> Any:
    """A fixed type per column whatever the rows hold (a column of nulls keeps its type)."""
    if column in ("tags", "failed_reasons", "leaks"):
        return pa.list_(pa.string())
    if column in ("format_version", "sample", "seed", "prompt_tokens", "completion_tokens") or column.startswith("n_"):
        return pa.int64()
    if column in ("weight", "partial_credit", "latency_s") or column.startswith("judge.") or column.endswith("_rate"):
        return pa.float64()
    if column in ("score", "tool_accuracy"):
        return pa.float64()
    if column.startswith("check.") or column in (
        "passed",
        "hard_fail",
        "strict_format",
        "lenient_format",
        "tool_correct",
        "leaked",
    ):
        return pa.bool_()
    return pa.string()


def to_pandas(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Any:
    """The rows as a pandas DataFrame, typed as in Parquet; ``format_version`` in ``df.attrs``."""
    try:
        import pandas as pd
    except ImportError:
        raise LeaderEvalError("to_pandas needs pandas: pip install 'leader-eval[data]'") from None
    try:
        df = arrow_table(rows, columns).to_pandas()
    except LeaderEvalError:  # no pyarrow: pandas infers the types from the values
        df = pd.DataFrame([[r.get(c) for c in columns] for r in rows], columns=list(columns))
    df.attrs["format_version"] = EXPORT_FORMAT_VERSION
    return df
