"""Cases a suite takes from data files (``cases_from:``): JSONL, CSV, Parquet, a saved dataset.

Each entry names a file (or a ``datasets`` dataset folder written by ``save_to_disk``) and a
``map`` from the case's keys to the file's columns; every record becomes one case mapping, the
same shape as a case written under ``cases:``, which ``load.py`` then validates and builds like
any other (docs/suite-format.md, docs/design-0.3.md section 13).

The files are hostile input like the suite itself: confined to the suite root (symlinks
resolved first), read in full under ``limits.MAX_DATA_FILE_BYTES`` and recorded for the content
hash (``files.read_bytes``), UTF-8 only, and bounded per record, per text value, in nesting and in
number of cases. Parquet and Arrow files are read with pyarrow (an optional dependency, imported
here only when a suite names such a file), >= 14.0.1 (older versions could run code from a
crafted file's extension type), with extension types left as their storage types.

Every problem is a ``SuiteError`` at ``FILE:LINE`` (JSONL line, the line a CSV record starts on)
or ``FILE:row N`` (Parquet, dataset; N counts from 0, as ``df.iloc[N]`` and ``dataset[N]`` do).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leader_eval.bounded.limits import (
    MAX_DATA_CASES,
    MAX_DATA_DECODED_BYTES,
    MAX_DATA_FIELD_CHARS,
    MAX_DATA_FILE_BYTES,
    MAX_DATA_RECORD_CHARS,
    MAX_YAML_DEPTH,
)
from leader_eval.bounded.strict_json import STRICT_DECODER
from leader_eval.errors import SuiteError
from leader_eval.suite.files import decode_utf8, read_bytes, resolve_in_root
from leader_eval.suite.yaml_source import JsonPath, line_of

#: the keys a ``map`` may name a column for, besides ``vars`` (a mapping of variable -> column)
MAPPED_KEYS = ("id", "expect", "tags", "weight", "split", "description")
#: keys whose CSV cell is JSON text (a CSV cell is otherwise text as written)
CSV_JSON_KEYS = frozenset({"expect", "tags", "weight"})
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
PYARROW_MIN = (14, 0, 1)
_PYARROW_HINT = "pip install 'leader-eval[data]'"


@dataclass(frozen=True)
class Where:
    """Where a record lies: a line of a text file, or a row of a columnar file or dataset."""

    source: str  # the file (or dataset folder) as shown in errors
    n: int  # the JSONL line or the line a CSV record starts on; the row (from 0) otherwise
    row: bool

    def at(self) -> tuple[str, int | None]:
        """``SuiteError``'s path and line: ``FILE``, ``LINE`` or ``FILE:row N``, None."""
        return (f"{self.source}:row {self.n}", None) if self.row else (self.source, self.n)


@dataclass(frozen=True)
class DataCase:
    """One record of a data file as a case mapping, and where it came from."""

    record: dict[str, Any]
    where: Where


def load_data_cases(
    suite_path: Path, root: Path, entries: list[dict[str, Any]], lines: Mapping[JsonPath, int]
) -> tuple[list[DataCase], list[SuiteError]]:
    """Every record of every ``cases_from`` entry as a case mapping, and every error found (a bad
    record is one error and reading goes on; a bad file or a limit passed ends that file)."""
    out: list[DataCase] = []
    errors: list[SuiteError] = []
    records = 0  # good and bad alike: a file of a million bad records stops at the cap too
    for k, entry in enumerate(entries):
        line = line_of(lines, ("cases_from", k, "path"))
        try:
            target = resolve_in_root(suite_path, entry["path"], line, root=root, what="cases_from")
            if not target.exists():
                raise SuiteError(suite_path, line, f"cases_from: {entry['path']!r} not found ({target})")
            fmt = entry.get("format") or _format_of(suite_path, line, target)
            reader = {"jsonl": _jsonl, "csv": _csv, "parquet": _parquet, "dataset": _dataset}[fmt]
            # shown as the suite's own path is (as given), joined with the path the suite names
            shown = os.path.normpath(os.path.join(os.path.dirname(str(suite_path)), entry["path"]))
            for where, record in reader(suite_path, line, target, shown, entry["map"]):
                records += 1
                if records > MAX_DATA_CASES:
                    raise SuiteError(*where.at(), f"cases_from: more than {MAX_DATA_CASES:,} cases from data files")
                if isinstance(record, _Later):
                    errors.append(SuiteError(*where.at(), record.message))
                    continue
                try:
                    case = _case(entry, record, fmt == "csv")
                    _check_sizes(case)
                except _RecordError as exc:
                    errors.append(SuiteError(*where.at(), exc.message))
                    continue
                out.append(DataCase(case, where))
        except SuiteError as exc:
            errors.append(exc)
    return out, errors


class _RecordError(Exception):
    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


def _format_of(suite_path: Path, line: int, target: Path) -> str:
    if target.is_dir():
        return "dataset"
    fmt = FORMATS.get(target.suffix.lower())
    if fmt is None:
        raise SuiteError(
            suite_path,
            line,
            f"cases_from: cannot tell the format of {target.name!r}: name it with format: jsonl|csv|parquet|dataset",
        )
    return fmt


def _case(entry: Mapping[str, Any], record: Mapping[str, Any], csv_text: bool) -> dict[str, Any]:
    """The case mapping of one record (``_RecordError`` for a missing or ill-typed column)."""
    spec = entry["map"]
    case: dict[str, Any] = {}
    for key in MAPPED_KEYS:
        column = spec.get(key)
        if column is None:
            continue
        if column not in record:
            raise _RecordError(f"map: {key}: no column {column!r} in this record")
        value = record[column]
        if csv_text and key in CSV_JSON_KEYS and isinstance(value, str):
            value = _json_cell(key, column, value)
        if value is None or (csv_text and value == ""):
            if key == "id":
                raise _RecordError(f"map: id: column {column!r} is empty")
            continue
        if key == "id" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # an integer id column (a dataframe's index) names the case as its digits
        case[key] = value
    variables: dict[str, Any] = {}
    for name, column in spec.get("vars", {}).items():
        if column not in record:
            raise _RecordError(f"map: vars: {name}: no column {column!r} in this record")
        variables[name] = record[column]
    if variables:
        case["vars"] = variables
    if "expect" not in case and "expect" in entry:
        case["expect"] = entry["expect"]
    if entry.get("tags") and isinstance(case.get("tags", []), list):  # a non-list is the schema's error
        case["tags"] = [*entry["tags"], *case.get("tags", [])]
    return case


def _json_cell(key: str, column: str, text: str) -> Any:
    if not text.strip():
        return None
    try:
        return _strict_json(text)
    except ValueError as exc:
        raise _RecordError(f"map: {key}: column {column!r} must hold JSON in a CSV file: {exc}") from None


def _check_sizes(value: Any) -> None:
    """Nesting, text values and the whole record within their bounds; no NUL, no NaN."""
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_YAML_DEPTH:
            raise _RecordError(f"nested deeper than {MAX_YAML_DEPTH} levels")
        if isinstance(v, str):
            if len(v) > MAX_DATA_FIELD_CHARS:
                raise _RecordError(f"a text value of {len(v):,} characters is over the {MAX_DATA_FIELD_CHARS:,} limit")
            if "\0" in v:
                raise _RecordError("a text value holds a NUL byte")
            total += len(v)
        elif isinstance(v, float) and not math.isfinite(v):
            raise _RecordError(f"{v!r} is not a value a case can hold")
        elif isinstance(v, dict):
            for key, item in v.items():
                total += len(key)
                stack.append((item, depth + 1))
        elif isinstance(v, list):
            stack.extend((item, depth + 1) for item in v)
        total += 1
        if total > MAX_DATA_RECORD_CHARS:
            raise _RecordError(f"the record is over {MAX_DATA_RECORD_CHARS:,} characters")


# --------------------------------------------------------------------------- text formats


_DECODER = STRICT_DECODER  # bounded/strict_json.py: no key twice, no NaN/Infinity


def _strict_json(text: str) -> Any:
    try:
        value, end = _DECODER.raw_decode(text.strip())
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at column {exc.colno}") from None
    if end != len(text.strip()):
        raise ValueError(f"extra data at column {end + 1}")
    return value


def _text(suite_path: Path, line: int, target: Path, shown: str, what: str) -> str:
    data = read_bytes(target, limit=MAX_DATA_FILE_BYTES, what=what, named_in=suite_path, line=line)
    return decode_utf8(shown, data, what)


def _jsonl(
    suite_path: Path, line: int, target: Path, shown: str, spec: Mapping[str, Any]
) -> Iterator[tuple[Where, dict[str, Any]]]:
    text = _text(suite_path, line, target, shown, "cases_from JSONL")
    records = 0
    for n, raw in enumerate(text.split("\n"), 1):  # JSON text may hold U+2028 raw: lines end at \n only
        where = Where(shown, n, False)
        if not raw.strip():
            continue
        records += 1
        if len(raw) > MAX_DATA_RECORD_CHARS:
            yield where, _Later(f"the line is over {MAX_DATA_RECORD_CHARS:,} characters")
            continue
        try:
            record = _strict_json(raw)
        except ValueError as exc:
            yield where, _Later(f"not a JSON object: {exc}")
            continue
        if not isinstance(record, dict):
            yield where, _Later(f"a record must be a JSON object, not {type(record).__name__}")
            continue
        yield where, record
    if records == 0:
        raise SuiteError(shown, None, "cases_from: the file holds no record")


def _csv(
    suite_path: Path, line: int, target: Path, shown: str, spec: Mapping[str, Any]
) -> Iterator[tuple[Where, dict[str, Any]]]:
    text = _text(suite_path, line, target, shown, "cases_from CSV")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    consumed = 0
    while True:
        start = consumed + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise SuiteError(shown, reader.line_num or start, f"not a CSV record: {exc}") from None
        consumed = reader.line_num
        if not row:
            continue
        if header is None:
            header = row
            dup = sorted({c for c in row if row.count(c) > 1})
            if dup:
                raise SuiteError(shown, start, f"the header names column {dup[0]!r} twice")
            _check_columns(shown, start, spec, set(header))
            continue
        where = Where(shown, start, False)
        if len(row) != len(header):
            yield where, _Later(f"{len(row)} fields where the header has {len(header)}")
            continue
        yield where, dict(zip(header, row, strict=True))
    if header is None:
        raise SuiteError(shown, None, "cases_from: the CSV file has no header row")


class _Later(dict[str, Any]):
    """A record that failed to read: ``load_data_cases`` reports ``message`` at its place."""

    def __init__(self, message: str):
        super().__init__()
        self.message = message


def _check_columns(shown: str, line: int | None, spec: Mapping[str, Any], columns: set[str]) -> None:
    """Every column the map names is in the file (a header row, a schema)."""
    named = [(k, spec[k]) for k in MAPPED_KEYS if k in spec] + [
        (f"vars: {v}", c) for v, c in spec.get("vars", {}).items()
    ]
    for key, column in named:
        if column not in columns:
            known = ", ".join(repr(c) for c in sorted(columns)[:20])
            raise SuiteError(shown, line, f"map: {key}: no column {column!r} (the file has {known})")


# --------------------------------------------------------------------------- columnar formats


def _pyarrow(shown: str) -> Any:
    """pyarrow, or a one-line error: absent, or older than 14.0.1."""
    try:
        import pyarrow
    except ImportError:
        raise SuiteError(shown, None, f"reading this file needs pyarrow >= 14.0.1 ({_PYARROW_HINT})") from None
    version = tuple(int(p) if p.isdigit() else 0 for p in pyarrow.__version__.split(".")[:3])
    if version < PYARROW_MIN:
        raise SuiteError(
            shown,
            None,
            f"pyarrow {pyarrow.__version__} can run code from a crafted file; leader-eval reads Parquet and "
            f"Arrow files with pyarrow >= 14.0.1 only ({_PYARROW_HINT})",
        )
    return pyarrow


def _columns_needed(spec: Mapping[str, Any]) -> list[str]:
    return list(dict.fromkeys([*(spec[k] for k in MAPPED_KEYS if k in spec), *spec.get("vars", {}).values()]))


def _parquet(
    suite_path: Path, line: int, target: Path, shown: str, spec: Mapping[str, Any]
) -> Iterator[tuple[Where, dict[str, Any]]]:
    pa = _pyarrow(shown)
    import pyarrow.parquet as pq

    data = read_bytes(target, limit=MAX_DATA_FILE_BYTES, what="cases_from Parquet", named_in=suite_path, line=line)
    kwargs: dict[str, Any] = {}
    try:
        import inspect

        if "arrow_extensions_enabled" in inspect.signature(pq.ParquetFile).parameters:
            kwargs["arrow_extensions_enabled"] = False
        pf = pq.ParquetFile(pa.BufferReader(data), **kwargs)
        meta = pf.metadata
        if meta.num_rows > MAX_DATA_CASES:
            raise SuiteError(
                shown,
                None,
                f"cases_from: {meta.num_rows:,} rows, over the {MAX_DATA_CASES:,} cases a suite may take from data",
            )
        declared = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if declared > MAX_DATA_DECODED_BYTES:
            raise SuiteError(
                shown, None, f"the file declares {declared:,} bytes of data, over {MAX_DATA_DECODED_BYTES:,}"
            )
        columns = _columns_needed(spec)
        _check_columns(shown, None, spec, set(pf.schema_arrow.names))
        table = pf.read(columns=columns)
    except SuiteError:
        raise
    except Exception as exc:  # pyarrow raises many kinds on a malformed file
        raise SuiteError(shown, None, f"not a readable Parquet file: {_one_line(exc)}") from None
    yield from _rows(shown, table, 0)


def _dataset(
    suite_path: Path, line: int, target: Path, shown: str, spec: Mapping[str, Any]
) -> Iterator[tuple[Where, dict[str, Any]]]:
    """A ``datasets`` dataset written by ``save_to_disk``: ``state.json`` lists its Arrow IPC
    stream files (``data-*.arrow``), read in that order; rows count from 0 across them."""
    if (target / "dataset_dict.json").exists():
        raise SuiteError(
            suite_path,
            line,
            f"cases_from: {shown} holds several splits (a DatasetDict): name one split's folder, e.g. {shown}/train",
        )
    pa = _pyarrow(shown)
    state_path = target / "state.json"
    if not state_path.is_file() or state_path.is_symlink():
        raise SuiteError(
            suite_path,
            line,
            f"cases_from: {shown} is a folder without state.json (not a dataset saved with save_to_disk)",
        )
    raw = read_bytes(state_path, limit=2**20, what="dataset state", named_in=suite_path, line=line)
    try:
        state = _strict_json(decode_utf8(f"{shown}/state.json", raw, "dataset state"))
        files = [f["filename"] for f in state["_data_files"]]
        if not files or not all(isinstance(f, str) for f in files):
            raise TypeError
    except (ValueError, TypeError, KeyError):
        raise SuiteError(
            f"{shown}/state.json", None, "not a dataset state: _data_files must list the Arrow files"
        ) from None
    offset = 0
    declared = 0
    for name in files:
        if "/" in name or "\\" in name or name in (".", ".."):
            raise SuiteError(
                f"{shown}/state.json", None, f"_data_files: {name!r} is not a file name in the dataset folder"
            )
        path = target / name
        if path.is_symlink() or not path.resolve().is_relative_to(target.resolve()):
            raise SuiteError(f"{shown}/state.json", None, f"_data_files: {name!r} leads outside the dataset folder")
        data = read_bytes(path, limit=MAX_DATA_FILE_BYTES, what="cases_from Arrow", named_in=suite_path, line=line)
        try:
            reader = pa.ipc.open_stream(pa.BufferReader(data))
            _check_columns(f"{shown}/{name}", None, spec, set(reader.schema.names))
            batches = []
            rows = offset
            for batch in reader:
                declared += batch.nbytes
                rows += batch.num_rows
                if rows > MAX_DATA_CASES:
                    raise SuiteError(
                        shown, None, f"cases_from: over the {MAX_DATA_CASES:,} cases a suite may take from data"
                    )
                if declared > MAX_DATA_DECODED_BYTES:
                    raise SuiteError(shown, None, f"the dataset decodes to over {MAX_DATA_DECODED_BYTES:,} bytes")
                batches.append(batch)
            table = pa.Table.from_batches(batches, schema=reader.schema).select(_columns_needed(spec))
        except SuiteError:
            raise
        except Exception as exc:
            raise SuiteError(f"{shown}/{name}", None, f"not a readable Arrow stream file: {_one_line(exc)}") from None
        yield from _rows(shown, table, offset)
        offset += table.num_rows


def _rows(shown: str, table: Any, offset: int) -> Iterator[tuple[Where, dict[str, Any]]]:
    """Each row of ``table`` as a dict of Python values; a column of a type no case can hold
    (bytes, dates, decimals...) is one error at the file."""
    names = table.column_names
    values = []
    import pyarrow as pa

    for name in names:
        column = table.column(name)
        if isinstance(column.type, pa.BaseExtensionType):
            # an extension type (restored from the file's stored Arrow schema) is read as its
            # storage: leader-eval interprets no extension, and runs none of its code on values
            column = pa.chunked_array([c.storage for c in column.chunks], type=column.type.storage_type)
        problem = _unsupported(column.type)
        if problem:
            raise SuiteError(
                shown, None, f"column {name!r} is {problem}: a case holds text, numbers, booleans, lists and objects"
            )
        try:
            values.append(column.to_pylist())
        except Exception as exc:
            raise SuiteError(shown, None, f"column {name!r} cannot be read: {_one_line(exc)}") from None
    for i in range(table.num_rows):
        yield Where(shown, offset + i, True), {name: col[i] for name, col in zip(names, values, strict=True)}


def _unsupported(t: Any) -> str | None:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _unsupported(t.value_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t) or pa.types.is_boolean(t):
        return None
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _unsupported(t.value_type)
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            problem = _unsupported(t.field(i).type)
            if problem:
                return problem
        return None
    return f"of type {t}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__
