"""Append-only JSONL record logs and the run directory.

A record is written as one line and flushed to disk before the next sample is taken, so a
crash (even SIGKILL mid-write) loses at most the line being written; on reopen a torn last line
is cut off. The same log type backs a run's ``samples.jsonl`` and the content-addressed sample
cache, so resumption and caching are one mechanism.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from leader_eval.errors import RunDirError
from leader_eval.types import Sample

try:  # orjson (a dependency of tinker) parses a record ~5-9x faster than json
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - the stdlib alone is still correct
    _fast_loads = json.loads  # type: ignore[assignment]

MANIFEST = "manifest.json"
SAMPLES = "samples.jsonl"
PROMPTS = "prompts.jsonl"
RESULTS = "results.jsonl"
CASES = "cases.json"
SUMMARY = "summary.json"
FSYNC_INTERVAL_S = 1.0


# one encoder for every record: json.dumps with non-default options builds a new one per call
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)


def write_json_atomic(path: Path, obj: Any, *, indent: int | None = 2, sort_keys: bool = True) -> None:
    """Write then rename, so a reader never sees half a file and an interrupted write leaves the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=indent, sort_keys=sort_keys, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these are shared, reviewable artifacts
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RecordLog:
    """An append-only JSONL file of records keyed by ``key_field``."""

    def __init__(self, path: Path, key_field: str = "key", *, fsync: bool = True, readonly: bool = False):
        self.path = path
        self.readonly = readonly
        self.key_field = key_field
        self.fsync = fsync
        self._index: dict[str, dict[str, Any]] = {}
        self._fh: Any = None
        self._last_sync = 0.0
        if path.exists():
            self._recover()

    def _recover(self) -> None:
        # Read every complete line; cut a torn tail (a crash mid-write) so appends start clean.
        good_end = 0
        with self.path.open("rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl == -1:
                break
            line = data[pos:nl]
            try:
                rec = _loads_line(line)
            except ValueError:
                break
            if isinstance(rec, dict) and self.key_field in rec:
                self._index.setdefault(rec[self.key_field], rec)
            pos = nl + 1
            good_end = pos
        if good_end < len(data) and not self.readonly:
            with self.path.open("r+b") as f:
                f.truncate(good_end)

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def get(self, key: str) -> dict[str, Any] | None:
        return self._index.get(key)

    def __len__(self) -> int:
        return len(self._index)

    def records(self) -> Iterator[dict[str, Any]]:
        return iter(self._index.values())

    def append(self, record: dict[str, Any]) -> None:
        if self.readonly:
            raise RuntimeError(f"{self.path} was opened read-only")
        key = record[self.key_field]
        if key in self._index:
            return
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(dumps(record) + "\n")
        # flush per record: once in the OS page cache the line survives SIGKILL of this process.
        # fsync (survives a machine crash) costs milliseconds, so it is rate-limited: at most one
        # per FSYNC_INTERVAL_S, and always at close.
        self._fh.flush()
        if self.fsync:
            now = time.monotonic()
            if now - self._last_sync >= FSYNC_INTERVAL_S:
                os.fsync(self._fh.fileno())
                self._last_sync = now
        self._index[key] = record

    def close(self) -> None:
        if self._fh is not None:
            if self.fsync:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None


def _loads_line(line: bytes) -> Any:
    try:
        return _fast_loads(line)
    except ValueError:
        # what orjson refuses and json reads (NaN, ints beyond 64 bits, lone surrogates) reads as
        # before; a torn line fails here too
        return json.loads(line)


def sample_record_key(case_id: str, index: int) -> str:
    return f"{case_id}#{index}"


class RunDir:
    """One run's directory: manifest, prompts, samples, results, summary."""

    def __init__(self, path: Path):
        self.path = path

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def read_manifest(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise RunDirError(f"{self.path}: not a run directory (no {MANIFEST})") from exc
        except ValueError as exc:
            raise RunDirError(f"{self.manifest_path}:1: unreadable manifest: {exc}") from exc
        return data

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.manifest_path, manifest)

    def samples_log(self) -> RecordLog:
        # Keyed by (case, index): a resumed run must never hold two samples for one slot.
        return RecordLog(self.path / SAMPLES, key_field="slot")

    def prompts_log(self) -> RecordLog:
        return RecordLog(self.path / PROMPTS, key_field="case_id", fsync=False)

    def read_samples(self) -> list[Sample]:
        p = self.path / SAMPLES
        log = RecordLog(p, key_field="slot", readonly=True) if p.exists() else None
        if log is None:
            return []
        out = []
        for rec in log.records():
            rec = dict(rec)
            rec.pop("slot", None)
            out.append(Sample.from_dict(rec))
        return out

    def read_prompts(self) -> dict[str, dict[str, Any]]:
        p = self.path / PROMPTS
        if not p.exists():
            return {}
        return {r["case_id"]: r for r in RecordLog(p, key_field="case_id", readonly=True).records()}

    def read_json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text(encoding="utf-8"))
