"""Append-only JSONL record logs and the run directory.

A record is written as one line and flushed to disk before the next sample is taken, so a
crash (even SIGKILL mid-write) loses at most the line being written; on reopen a torn last line
is cut off. The same log type backs a run's ``samples.jsonl`` and the content-addressed sample
cache, so resumption and caching are one mechanism.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from leader_eval.errors import RunDirError
from leader_eval.types import Sample

try:  # orjson (a dependency of tinker) parses a record ~5-9x faster than json
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - the stdlib alone is still correct
    _fast_loads = json.loads  # type: ignore[assignment]

_log = logging.getLogger("leader_eval")

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

    def body(f: Any) -> None:
        json.dump(obj, f, indent=indent, sort_keys=sort_keys, ensure_ascii=False)
        f.write("\n")

    _write_atomic(path, body)


def write_lines_atomic(path: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` (each without its newline) as one file, atomically like ``write_json_atomic``."""

    def body(f: Any) -> None:
        for line in lines:
            f.write(line + "\n")

    _write_atomic(path, body)


def _write_atomic(path: Path, body: Callable[[Any], None]) -> None:
    # Any failure (disk full, a read-only directory) leaves the old file and no temporary file,
    # and is one line naming the file.
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            body(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these are shared, reviewable artifacts
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise RunDirError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


LOCK = ".leader-eval.lock"


class FileLock:
    """An exclusive, non-blocking ``fcntl.flock`` on ``path`` (created if missing), holding our pid.

    The kernel drops the lock when the process exits, however it exits (SIGKILL included), so a
    crashed run never leaves a stale lock; the file itself stays (deleting it would race with a
    process that just opened it). ``acquire`` raises ``RunDirError`` naming the holder's pid.
    Used for run directories (``run_dir_lock``) and by anything that rewrites shared files (cache
    prune, run retention): call ``lock_holder`` to ask without taking the lock.
    """

    def __init__(self, path: Path, what: str):
        self.path = path
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> FileLock:
        import fcntl

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RunDirError(f"{self.path}: cannot lock {self.what}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            raise RunDirError(
                f"{self.what} is in use by another leader-eval process (pid {holder or 'unknown'}, lock "
                f"{self.path}); wait for it to finish or choose another directory"
            ) from None
        with contextlib.suppress(OSError):  # the pid is a courtesy for the error above
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def lock_holder(path: Path) -> int | None:
    """The pid holding the lock at ``path`` (0 when the holder is unknown), or None when free.

    For a run directory pass ``run_dir / LOCK``: a run being written must not be deleted."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _read_pid(fd) or 0
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def run_dir_lock(path: Path) -> FileLock:
    """The exclusive lock of run directory ``path`` (``with run_dir_lock(out): ...``)."""
    return FileLock(Path(path) / LOCK, f"run directory {path}")


class RecordLog:
    """An append-only JSONL file of records keyed by ``key_field``."""

    def __init__(
        self,
        path: Path,
        key_field: str = "key",
        *,
        fsync: bool = True,
        readonly: bool = False,
        valid: Callable[[dict[str, Any]], bool] | None = None,
    ):
        self.path = path
        self.readonly = readonly
        self.key_field = key_field
        #: a record that fails ``valid`` is skipped like an unparseable line, so its key stays free
        #: (a resumed run samples that slot again instead of keeping a record it cannot read back)
        self.valid = valid
        self.fsync = fsync
        self._index: dict[str, dict[str, Any]] = {}
        #: 1-based numbers of complete lines that could not be read (skipped, never truncated)
        self.bad_lines: list[int] = []
        self._fh: Any = None
        self._last_sync = 0.0
        if path.exists():
            self._recover()

    def _recover(self) -> None:
        # Read every complete line. Only a torn tail (the last line, without its newline: a crash
        # mid-write) is cut, so appends start clean. A bad line anywhere else is corruption, not
        # a crash: it is reported (file:line) and skipped, and every record after it is kept.
        try:
            if not self.path.is_file():  # a FIFO or a device (/dev/zero) would never end
                raise RunDirError(f"{self.path}: not a regular file")
            with self.path.open("rb") as f:
                data = f.read()
        except OSError as exc:
            raise RunDirError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        pos = 0
        lineno = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl == -1:
                break
            lineno += 1
            line = data[pos:nl]
            pos = nl + 1
            if not line.strip():
                continue
            try:
                rec = _loads_line(line)
            except ValueError as exc:
                self._skip(lineno, f"not JSON ({_first_line(exc)})")
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get(self.key_field), str):
                self._skip(lineno, f"not a record with a string {self.key_field!r}")
                continue
            if self.valid is not None and not self.valid(rec):
                self._skip(lineno, f"record of {rec[self.key_field]!r} has the wrong shape")
                continue
            self._index.setdefault(rec[self.key_field], rec)
        if pos < len(data) and not self.readonly:
            with self.path.open("r+b") as f:
                f.truncate(pos)

    def _skip(self, lineno: int, why: str) -> None:
        self.bad_lines.append(lineno)
        _log.warning("%s:%d: unreadable record skipped (%s); the records after it are kept", self.path, lineno, why)

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
        try:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._cut_torn_tail()
                self._fh = _open_append(self.path)
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
        except OSError as exc:
            # disk full, a read-only directory: whatever part of the line reached the file is a
            # torn tail, cut before the next append (here or on reopen)
            fh, self._fh = self._fh, None
            if fh is not None:
                with contextlib.suppress(OSError):
                    fh.close()
            raise RunDirError(f"{self.path}: cannot append a record: {exc.strerror or exc}") from None
        self._index[key] = record

    def _cut_torn_tail(self) -> None:
        """Drop a partial last line (a failed or killed write) so the next record starts a line."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with self.path.open("r+b") as f:
            f.seek(max(0, size - 1))
            if f.read(1) == b"\n":
                return
            chunk = 1 << 16
            end = size
            while end > 0:
                start = max(0, end - chunk)
                f.seek(start)
                nl = f.read(end - start).rfind(b"\n")
                if nl >= 0:
                    f.truncate(start + nl + 1)
                    return
                end = start
            f.truncate(0)

    def close(self) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            try:
                if self.fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
                fh.close()
            except OSError as exc:
                with contextlib.suppress(OSError):
                    fh.close()
                raise RunDirError(f"{self.path}: cannot write: {exc.strerror or exc}") from None


def _open_append(path: Path) -> Any:
    return path.open("a", encoding="utf-8")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _loads_line(line: bytes) -> Any:
    try:
        return _fast_loads(line)
    except ValueError:
        # what orjson refuses and json reads (NaN, ints beyond 64 bits, lone surrogates) reads as
        # before; a torn line fails here too
        return json.loads(line)


_IDENTITY_TYPES: dict[str, type | tuple[type, ...]] = {
    "suite": str,
    "suite_hash": str,
    "model_id": str,
    "protocol": str,
    "run_seed": int,
    "cases": dict,
}


def _manifest_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    ident = data.get("identity")
    if not isinstance(ident, dict):
        return "no 'identity' object"
    for key, typ in _IDENTITY_TYPES.items():
        if not isinstance(ident.get(key), typ) or isinstance(ident.get(key), bool):
            return f"identity.{key} is missing or not a {getattr(typ, '__name__', typ)}"
    for cid, spec in ident["cases"].items():
        if not isinstance(spec, dict) or not isinstance(spec.get("params"), dict):
            return f"identity.cases.{cid} has no 'params' object"
        n = spec.get("samples")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            return f"identity.cases.{cid}.samples is {n!r}, not a count"
    for key in ("model", "suite"):
        if key in data and not isinstance(data[key], dict):
            return f"{key!r} is not an object"
    if "status" in data and not isinstance(data["status"], str):
        return "'status' is not a string"
    return None


_SAMPLE_FIELDS = frozenset(Sample.__dataclass_fields__)
_OUTCOMES = frozenset({"ok", "error", "context_overflow"})


def _is_prompt_record(rec: dict[str, Any]) -> bool:
    return (
        isinstance(rec.get("text"), str)
        and isinstance(rec.get("token_ids"), list | None)
        and isinstance(rec.get("messages", []), list)
    )


def _is_addressable(rec: dict[str, Any]) -> bool:
    return (
        isinstance(rec.get("case_id"), str)
        and isinstance(rec.get("index"), int)
        and isinstance(rec.get("seed"), int)
        and isinstance(rec.get("key"), str)
    )


def _is_sample_record(rec: dict[str, Any]) -> bool:
    """Whether a stored record reads back as a ``Sample`` that scoring can use (types included:
    a non-string text from a hostile server would crash every later resume and replay)."""
    return (
        _is_addressable(rec)
        and rec.get("outcome") in _OUTCOMES
        and isinstance(rec.get("text", ""), str)
        and isinstance(rec.get("token_ids", []), list)
        and isinstance(rec.get("reasoning"), str | None)
        and isinstance(rec.get("error"), str | None)
        and isinstance(rec.get("timings", {}), dict)
        and isinstance(rec.get("api_tool_calls"), list | None)
    )


def sample_record_key(case_id: str, index: int) -> str:
    return f"{case_id}#{index}"


def read_json_file(path: Path, what: str) -> Any:
    """A run file's parsed JSON, or a one-line ``RunDirError`` naming the file and line."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunDirError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path}:1: unreadable {what}: not UTF-8 text ({exc.reason})") from None
    except ValueError as exc:
        raise RunDirError(f"{path}:{getattr(exc, 'lineno', 1)}: unreadable {what}: {exc}") from None


class RunDir:
    """One run's directory: manifest, prompts, samples, results, summary."""

    def __init__(self, path: Path):
        self.path = path
        #: file name -> 1-based numbers of lines that could not be read (reported by ``show``)
        self.unreadable: dict[str, list[int]] = {}

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def read_manifest(self) -> dict[str, Any]:
        """The manifest, or a one-line ``RunDirError`` when it is missing, unreadable or misshapen."""
        mp = self.manifest_path
        if not mp.exists():
            raise RunDirError(f"{self.path}: not a run directory (no {MANIFEST})")
        data = read_json_file(mp, "manifest")
        problem = _manifest_problem(data)
        if problem:
            raise RunDirError(f"{mp}:1: not a leader-eval manifest: {problem}")
        from leader_eval.formats import check_format

        check_format(mp, data, "run")  # an unknown layout: one line saying what to do
        return dict(data)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.manifest_path, manifest)

    def samples_log(self) -> RecordLog:
        # Keyed by (case, index): a resumed run must never hold two samples for one slot.
        return RecordLog(self.path / SAMPLES, key_field="slot", valid=_is_sample_record)

    def prompts_log(self) -> RecordLog:
        return RecordLog(self.path / PROMPTS, key_field="case_id", fsync=False)

    def read_samples(self, *, as_recorded: bool = False) -> list[Sample]:
        """The run's samples; a record of the wrong shape is skipped and listed in ``unreadable``.

        ``as_recorded``: keep a record whose fields have wrong types as long as its slot can be
        addressed (replay serves it as it was recorded, and the backend guard turns it into a
        sample error, instead of pretending it was never sampled)."""
        p = self.path / SAMPLES
        valid = _is_addressable if as_recorded else _is_sample_record
        log = RecordLog(p, key_field="slot", readonly=True, valid=valid) if p.exists() else None
        if log is None:
            return []
        if log.bad_lines:
            self.unreadable[SAMPLES] = list(log.bad_lines)
        return [Sample.from_dict({k: v for k, v in rec.items() if k in _SAMPLE_FIELDS}) for rec in log.records()]

    def read_prompts(self) -> dict[str, dict[str, Any]]:
        p = self.path / PROMPTS
        if not p.exists():
            return {}
        log = RecordLog(p, key_field="case_id", readonly=True, valid=_is_prompt_record)
        if log.bad_lines:
            self.unreadable[PROMPTS] = log.bad_lines
        return {r["case_id"]: r for r in log.records()}

    def read_json(self, name: str) -> Any:
        return read_json_file(self.path / name, name)
