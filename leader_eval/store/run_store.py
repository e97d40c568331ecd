"""The run directory: the one registry of its files, how each is read and written, and the
append-only JSONL record logs.

``RUN_FILES`` lists every file a run directory may hold (docs/design-0.3.md section 2): what it
is, who writes it, how ``merge`` treats it and the size it may reach. This module is the only
code that names a run file; the rest of the library imports the names from here (a test greps
the package for any other mention).

Every run file is opened with ``O_NOFOLLOW`` and must be a regular file: a symlink, a FIFO, a
device or a directory in its place is refused with its path on one line, and ``RunDir.check``
refuses any such entry in the directory before a command reads or writes anything there.
Symlinked ancestors (a symlinked ``runs/`` or the run directory given on the command line) stay
allowed: CI machines use them.

A record is written as one line and flushed to disk before the next sample is taken, so a
crash (even SIGKILL mid-write) loses at most the line being written; on reopen a torn last line
is cut off. The same log type backs a run's ``samples.jsonl`` and the content-addressed sample
cache, so resumption and caching are one mechanism.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from leader_eval.errors import RunDirError
from leader_eval.store.formats import check_format
from leader_eval.types import Sample, is_int

try:  # orjson (a dependency of tinker) parses a record ~5-9x faster than json
    import orjson as _orjson
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - the stdlib alone is still correct
    _orjson = None  # type: ignore[assignment]
    _fast_loads = json.loads  # type: ignore[assignment]

_log = logging.getLogger("leader_eval")

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30

MANIFEST = "manifest.json"
PROMPTS = "prompts.jsonl"
SAMPLES = "samples.jsonl"
STEPS = "steps.jsonl"
TURNS = "turns.jsonl"
JUDGEMENTS = "judgements.jsonl"
RESULTS = "results.jsonl"
CASES = "cases.json"
SUMMARY = "summary.json"
SESSION_SUMMARY = "session_summary.json"
REPORT = "report.html"
STRESS_JSON = "stress.json"
STRESS_PNG = "stress.png"
STRESS_TXT = "stress.txt"
ADAPTIVE_COMPARE = "adaptive_compare.json"
GATE_JSON = "gate.json"
LOCK = ".leader-eval.lock"
#: not a run file: the index of pruned runs' metrics, in the folder that holds the run directories
#: (``runs.history``), so that the history page still shows a run pruning deleted
HISTORY_INDEX = "leader-eval-history.jsonl"


@dataclass(frozen=True)
class RunFile:
    """One file a run directory may hold."""

    name: str
    #: ``json`` (one document), ``records`` (append-only JSONL), ``derived`` (re-made from the
    #: records by scoring), ``artifact`` (re-made by a command), ``lock``
    kind: str
    written_by: str
    #: what ``merge`` does with it: ``rebuilt`` (from the shards' identity, checked equal),
    #: ``union`` (every shard record validated, then the union), ``rederived`` (scored again from
    #: the merged records), ``remade`` (not merged; the command that makes it makes it again),
    #: ``never``
    merge: str
    #: the most bytes it may hold: a larger file is refused on reading, and a write that would
    #: pass it fails (a runaway output stops the run instead of filling the disk)
    cap: int


#: every file of a run directory (docs/design-0.3.md section 2); a feature that adds a file adds a row
RUN_FILES: Mapping[str, RunFile] = MappingProxyType(
    {
        f.name: f
        for f in (
            # 16 MiB, not the design's first 1 MiB: a manifest lists every case with its sampling
            # (~200 bytes each), and suites built from data files reach tens of thousands of cases
            RunFile(MANIFEST, "json", "run start, status updates", "rebuilt", 16 * MIB),
            RunFile(PROMPTS, "records", "sampling (case prompts; episode step prompts by hash)", "union", 256 * MIB),
            RunFile(SAMPLES, "records", "sampling (append, flushed)", "union", 1 * GIB),
            RunFile(STEPS, "records", "episode loop (append, flushed)", "union", 1 * GIB),
            # a simulated teammate's replies, one per leader step it answered (suite/teammate.py)
            RunFile(TURNS, "records", "episode loop: teammate turns (append, flushed)", "union", 1 * GIB),
            RunFile(JUDGEMENTS, "records", "rubric judges (append, flushed; runs.judging)", "union", 256 * MIB),
            RunFile(RESULTS, "derived", "scoring", "rederived", 512 * MIB),
            RunFile(CASES, "derived", "scoring", "rederived", 64 * MIB),
            RunFile(SUMMARY, "derived", "scoring, adaptive sampling", "rederived", 64 * MIB),
            RunFile(SESSION_SUMMARY, "derived", "pytest plugin", "remade", 64 * MIB),
            RunFile(REPORT, "artifact", "report", "remade", 256 * MIB),
            RunFile(STRESS_JSON, "artifact", "stress", "remade", 256 * MIB),
            RunFile(STRESS_PNG, "artifact", "stress", "remade", 256 * MIB),
            RunFile(STRESS_TXT, "artifact", "stress", "remade", 256 * MIB),
            RunFile(ADAPTIVE_COMPARE, "artifact", "compare --adaptive", "remade", 256 * MIB),
            # the last verdict per baseline (runs.history), for the history page
            RunFile(GATE_JSON, "artifact", "gate, pytest plugin", "remade", 1 * MIB),
            RunFile(LOCK, "lock", "run lock (holds the writer's pid)", "never", 4 * KIB),
        )
    }
)

#: the cap of a record log that is not a run file (a cache shard)
RECORDS_CAP = 1 * GIB
#: the most characters of one field that results.jsonl and the report keep (the raw output stays
#: whole in samples.jsonl, bounded there by max_tokens and the backends' response caps)
FIELD_CAP = 64 * KIB
FSYNC_INTERVAL_S = 1.0


def cap_of(path: Path, default: int = RECORDS_CAP) -> int:
    f = RUN_FILES.get(path.name)
    return f.cap if f is not None else default


# ---------------------------------------------------------------------------------------------
# plain files only: no symlink, FIFO, device or directory where a run file belongs


def shown(path: str | Path) -> str:
    """A path for a one-line message: control characters (a newline in a file name) escaped."""
    text = str(path)
    return repr(text)[1:-1] if any(ord(ch) < 32 or ord(ch) == 127 for ch in text) else text


def _kind_of(mode: int) -> str | None:
    """What a non-regular file is, or None for a regular file."""
    for test, what in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"


def _problem(st: os.stat_result) -> str | None:
    """What is wrong with a directory entry where a plain file of ours belongs, or None."""
    kind = _kind_of(st.st_mode)
    if kind is not None:
        return f"{kind}, not a regular file"
    if st.st_nlink > 1:  # another name of the same file may lie outside the directory
        return f"a hard link ({st.st_nlink} names: a write would change the other too)"
    return None


def _refusal(path: Path, what: str, problem: str) -> RunDirError:
    return RunDirError(f"{shown(path)}: {what} is {problem}: refused (nothing read or written)")


def refuse_unsafe(path: Path, what: str = "run file") -> None:
    """Raise ``RunDirError`` when ``path`` is a symlink or exists as anything but a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RunDirError(f"{shown(path)}: cannot inspect {what}: {exc.strerror or exc}") from None
    problem = _problem(st)
    if problem is not None:
        raise _refusal(path, what, problem)


def check_entries(
    directory: Path,
    what: str,
    *,
    owned: Callable[[str], bool] = lambda name: True,
    files: Callable[[str], bool] = lambda name: name in RUN_FILES,
) -> None:
    """Refuse (``RunDirError``, one line) a symlink or special file among the entries of
    ``directory`` that ``owned`` selects, and anything but a regular file where ``files`` names
    one. The directory itself may be reached through symlinks (its ancestors are the user's)."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise RunDirError(f"{shown(directory)}: cannot list {what}: {exc.strerror or exc}") from None
    for entry in sorted(entries, key=lambda e: e.name):
        if not owned(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RunDirError(f"{shown(entry.path)}: cannot inspect: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode) and not files(entry.name):
            continue
        problem = _problem(st)
        if problem is not None:
            raise _refusal(Path(entry.path), f"an entry of {what}", problem)


def check_run_dir(path: Path) -> None:
    """Every entry of a run directory: no symlink or special file, run files regular files."""
    check_entries(path, "a run directory")


def open_file(path: Path, flags: int, what: str = "run file", mode: int = 0o644) -> int:
    """``os.open`` that never follows a symlink, never blocks on a FIFO and accepts only a regular
    file (``RunDirError`` naming the path otherwise). Other errors (``FileNotFoundError``, a
    read-only disk) pass through as ``OSError`` for the caller to word."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EWOULDBLOCK):
            refuse_unsafe(path, what)
        raise
    try:
        problem = _problem(os.fstat(fd))
    except OSError:
        problem = "a file that cannot be inspected"
    if problem is not None:
        os.close(fd)
        raise _refusal(path, what, problem)
    # O_NONBLOCK only kept a FIFO from hanging the open; a regular file reads and writes as usual
    with contextlib.suppress(OSError):
        os.set_blocking(fd, True)
    return fd


def _size_text(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def read_bytes(path: Path, what: str = "run file", cap: int | None = None) -> bytes:
    """A regular file's bytes (never through a symlink), refused above its cap (``cap_of``)."""
    limit = cap if cap is not None else cap_of(path)
    try:
        fd = open_file(path, os.O_RDONLY, what)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise RunDirError(f"{shown(path)}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise RunDirError(
                f"{shown(path)}: {what} holds {size:,} bytes, over its cap of {_size_text(limit)}: refused"
            )
        chunks: list[bytes] = []
        got = 0
        while True:
            block = os.read(fd, min(1 << 24, limit + 1 - got))
            if not block:
                break
            chunks.append(block)
            got += len(block)
            if got > limit:
                raise RunDirError(f"{shown(path)}: {what} grew over its cap of {_size_text(limit)}: refused")
        return b"".join(chunks)
    except OSError as exc:
        raise RunDirError(f"{shown(path)}: cannot read {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text(path: Path, what: str = "run file", cap: int | None = None) -> str:
    """``read_bytes`` as UTF-8 text (undecodable bytes replaced)."""
    return read_bytes(path, what, cap).decode("utf-8", errors="replace")


def cut_text(text: str, limit: int = FIELD_CAP) -> str:
    """``text`` whole, or its first ``limit`` characters and ``…[cut N chars]``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[cut {len(text) - limit} chars]"


def cap_fields(record: Mapping[str, Any], limit: int = FIELD_CAP) -> dict[str, Any]:
    """``record`` with every field bounded to about ``limit`` characters of JSON, each cut marked:
    a string keeps its head and ``…[cut N chars]``; a list keeps the items that fit and, when it
    drops some, ``record["cut"][field]`` says how many. Fields within the limit are untouched
    (the same object), so a record of ordinary size is written exactly as before."""
    out: dict[str, Any] = {}
    cuts: dict[str, str] = {}
    for key, value in record.items():
        if isinstance(value, str):
            out[key] = cut_text(value, limit)
            continue
        if not isinstance(value, list | dict) or _json_len(value, limit) <= limit:
            out[key] = value
            continue
        budget = [limit]
        out[key] = _shrink(value, budget, limit)
        if isinstance(value, list) and len(out[key]) < len(value):
            cuts[key] = f"…[cut {len(value) - len(out[key])} of {len(value)} items]"
    if cuts:
        out["cut"] = {**(out.get("cut") or {}), **cuts}
    return out


def encode_capped(record: Mapping[str, Any], limit: int = FIELD_CAP) -> tuple[str, bool]:
    """``record`` as one JSON line, each field bounded (``cap_fields``), and whether the line holds
    it whole (no field was cut: a cut string is not always named under "cut"). A line within
    ``limit`` has no field over it, so the common case costs one encoding, the one written."""
    line = dumps(record)
    if len(line) <= limit:
        return line, True
    return dumps(cap_fields(record, limit)), False


def _json_len(value: Any, limit: int) -> int:
    # the size of a value's JSON, computed only as far as needed to know it is over ``limit``
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, list):
        n = 2
        for v in value:
            n += _json_len(v, limit) + 1
            if n > limit:
                return n
        return n
    if isinstance(value, dict):
        n = 2
        for k, v in value.items():
            n += len(str(k)) + 4 + _json_len(v, limit)
            if n > limit:
                return n
        return n
    return len(dumps(value))


def _shrink(value: Any, budget: list[int], limit: int) -> Any:
    """``value`` cut to the characters left in ``budget`` (spent as it goes)."""
    if isinstance(value, str):
        kept = cut_text(value, max(0, min(limit, budget[0])))
        budget[0] -= len(kept) + 2
        return kept
    if isinstance(value, list):
        items = []
        for v in value:
            if budget[0] <= 0:
                break
            items.append(_shrink(v, budget, limit))
        return items
    if isinstance(value, dict):
        return {k: _shrink(v, budget, limit) for k, v in value.items()}
    budget[0] -= len(dumps(value))
    return value


# one encoder for every record: json.dumps with non-default options builds a new one per call
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)


def write_json_atomic(path: Path, obj: Any, *, indent: int | None = 2, sort_keys: bool = True) -> None:
    """Write then rename, so a reader never sees half a file and an interrupted write leaves the old one."""
    fast = indented_json(obj) if indent == 2 and sort_keys else None

    def body(f: Any) -> None:
        if fast is not None:
            f.write(fast)
        else:
            json.dump(obj, f, indent=indent, sort_keys=sort_keys, ensure_ascii=False)
        f.write("\n")

    _write_atomic(path, body)


_ORJSON_INDENTED = (_orjson.OPT_INDENT_2 | _orjson.OPT_SORT_KEYS) if _orjson is not None else 0


def indented_json(obj: Any) -> str | None:
    """``json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)`` byte for byte, made by
    orjson, or None where that cannot be shown to hold (write with ``json`` then).

    The stdlib's encoder is pure Python once it indents (~60 ms for the ``cases.json`` of 2,000
    cases, ~40 ms for their manifest, written twice per run). orjson's tokens differ from the
    stdlib's for NaN and infinities (``null``), for floats below 1e-4 (no exponent, or one
    without its leading zero), and it refuses what the stdlib writes (non-string keys, ints
    beyond 64 bits, lone surrogates); its indentation is the stdlib's. So the compact encodings
    of both (the stdlib's in C) are compared, and orjson's indented text is used only when they
    are equal; anything either refuses goes to the stdlib, which raises as it always did."""
    if _orjson is None:
        return None
    try:
        compact = _orjson.dumps(obj, option=_orjson.OPT_SORT_KEYS)
        if compact != _COMPACT_SORTED.encode(obj).encode("utf-8"):
            return None
        return str(_orjson.dumps(obj, option=_ORJSON_INDENTED), "utf-8")
    except Exception:  # json.dump then writes it, or raises what it always raised
        return None


# the stdlib's compact encoding with sorted keys: its C encoder, the tokens indent=2 writes
_COMPACT_SORTED = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def write_lines_atomic(path: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` (each without its newline) as one file, atomically like ``write_json_atomic``."""

    def body(f: Any) -> None:
        for line in lines:
            f.write(line + "\n")

    _write_atomic(path, body)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` as one file, atomically like ``write_json_atomic``."""
    _write_atomic(path, lambda f: f.buffer.write(data))


def _write_atomic(path: Path, body: Callable[[Any], None], *, cap: int | None = None) -> None:
    # Any failure (disk full, a read-only directory) leaves the old file and no temporary file,
    # and is one line naming the file. The temporary file is created anew (O_EXCL), and renaming
    # it replaces a directory entry, never what a symlink points at; a symlink or special file
    # where the file belongs is refused all the same, before anything is written.
    refuse_unsafe(path)
    limit = cap if cap is not None else cap_of(path, default=RUN_FILES[REPORT].cap)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            body(f)
            f.flush()
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise RunDirError(f"{shown(path)}: not written: {size:,} bytes, over its cap of {_size_text(limit)}")
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these are shared, reviewable artifacts
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise RunDirError(f"{shown(path)}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


class FileLock:
    """An exclusive, non-blocking ``fcntl.flock`` on ``path`` (created if missing), holding our pid.

    The kernel drops the lock when the process exits, however it exits (SIGKILL included), so a
    crashed run never leaves a stale lock; the file itself stays (deleting it would race with a
    process that just opened it). ``acquire`` raises ``RunDirError`` naming the holder's pid.
    Used for run directories (``run_dir_lock``) and by anything that rewrites shared files (cache
    prune, run retention): call ``lock_holder`` to ask without taking the lock. The lock file is
    opened like every run file: never through a symlink, and only when it is a regular file (the
    pid is written into it).
    """

    def __init__(self, path: Path, what: str):
        self.path = path
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> FileLock:
        import fcntl

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_file(self.path, os.O_RDWR | os.O_CREAT, "lock file")
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

    For a run directory pass ``run_dir / LOCK``: a run being written must not be deleted. A lock
    file that is a symlink or not a regular file is refused (``RunDirError``)."""
    import fcntl

    try:
        fd = open_file(path, os.O_RDONLY, "lock file")
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


#: (bytes, prompts by case id) of the last prompts file a shared ``RunDir.read_prompts`` parsed whole
_last_prompts: tuple[bytes, dict[str, dict[str, Any]]] | None = None
_PROMPTS_MEMO_MAX = 16 << 20  # a larger file is parsed at each read rather than kept twice


class RecordLog:
    """An append-only JSONL file of records keyed by ``key_field`` (or by ``key(record)``).

    The file is opened like every run file (no symlink, regular files only) and may not grow past
    ``cap`` bytes (the run file's cap; ``RECORDS_CAP`` for other logs)."""

    def __init__(
        self,
        path: Path,
        key_field: str = "key",
        *,
        fsync: bool = True,
        readonly: bool = False,
        valid: Callable[[dict[str, Any]], bool] | None = None,
        key: Callable[[dict[str, Any]], Any] | None = None,
        cap: int | None = None,
        data: bytes | None = None,
    ):
        """``data``: the file's bytes, already read (``readonly`` only), parsed instead of the file."""
        assert data is None or readonly
        self.path = path
        self.readonly = readonly
        self.key_field = key_field
        self._key = key or (lambda rec: rec.get(key_field))
        #: a record that fails ``valid`` is skipped like an unparseable line, so its key stays free
        #: (a resumed run samples that slot again instead of keeping a record it cannot read back)
        self.valid = valid
        self.fsync = fsync
        self.cap = cap if cap is not None else cap_of(path)
        self._index: dict[str, dict[str, Any]] = {}
        #: 1-based numbers of complete lines that could not be read (skipped, never truncated)
        self.bad_lines: list[int] = []
        #: 1-based line number of each record kept
        self.lines: dict[str, int] = {}
        #: 1-based numbers of lines whose key an earlier line already holds (the first one is kept)
        self.duplicates: list[int] = []
        self._fh: Any = None
        self._size = 0
        self._last_sync = 0.0
        if data is not None:
            self._recover(data)
        elif os.path.lexists(path):
            self._recover()

    def key_of(self, record: dict[str, Any]) -> Any:
        return self._key(record)

    def _recover(self, data: bytes | None = None) -> None:
        # Read every complete line. Only a torn tail (the last line, without its newline: a crash
        # mid-write) is cut, so appends start clean. A bad line anywhere else is corruption, not
        # a crash: it is reported (file:line) and skipped, and every record after it is kept.
        if data is None:
            data = read_bytes(self.path, "record file", self.cap)
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
                rec = loads_line(line)
            except ValueError as exc:
                self._skip(lineno, f"not JSON ({_first_line(exc)})")
                continue
            key = self._key(rec) if isinstance(rec, dict) else None
            if not isinstance(key, str):
                self._skip(lineno, f"not a record with a string {self.key_field!r}")
                continue
            if self.valid is not None and not self.valid(rec):
                self._skip(lineno, f"record of {key!r} has the wrong shape")
                continue
            if key not in self._index:
                self._index[key] = rec
                self.lines[key] = lineno
            else:
                self.duplicates.append(lineno)
        self._size = pos
        if pos < len(data) and not self.readonly:
            try:
                fd = open_file(self.path, os.O_WRONLY, "record file")
                try:
                    os.ftruncate(fd, pos)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise RunDirError(f"{shown(self.path)}: cannot cut a torn last line: {exc.strerror or exc}") from None

    def _skip(self, lineno: int, why: str) -> None:
        self.bad_lines.append(lineno)
        _log.warning(
            "%s:%d: unreadable record skipped (%s); the records after it are kept", shown(self.path), lineno, why
        )

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def get(self, key: str) -> dict[str, Any] | None:
        return self._index.get(key)

    def __len__(self) -> int:
        return len(self._index)

    def records(self) -> Iterator[dict[str, Any]]:
        return iter(self._index.values())

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(self._index.items())

    def append(self, record: dict[str, Any]) -> None:
        self.extend((record,))

    def extend(self, records: Iterable[dict[str, Any]]) -> None:
        """Append ``records`` in order, each whose key the log does not hold yet (the first of a
        key wins, as on reading back): one write and one flush for them all (a run's 2,000
        prompts, written before its first request), else what ``append`` does for each."""
        if self.readonly:
            raise RuntimeError(f"{self.path} was opened read-only")
        batch: dict[str, dict[str, Any]] = {}
        for record in records:
            key = self._key(record)
            if not isinstance(key, str):
                raise KeyError(f"{self.path}: a record without a string {self.key_field!r}")
            if key not in self._index and key not in batch:
                batch[key] = record
        if not batch:
            return
        line = "".join([dumps(record) + "\n" for record in batch.values()]).encode("utf-8")
        try:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._cut_torn_tail()
                self._fh = _open_append(self.path)
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    self._size = os.fstat(self._fh.fileno()).st_size
            if self._size + len(line) > self.cap:
                raise RunDirError(
                    f"{shown(self.path)}: not appended: the file would pass its cap of {_size_text(self.cap)}"
                )
            self._fh.write(line)
            self._size += len(line)
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
            raise RunDirError(f"{shown(self.path)}: cannot append a record: {exc.strerror or exc}") from None
        self._index.update(batch)

    def _cut_torn_tail(self) -> None:
        """Drop a partial last line (a failed or killed write) so the next record starts a line."""
        try:
            fd = open_file(self.path, os.O_RDWR, "record file")
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
                return
            chunk = 1 << 16
            end = size
            while end > 0:
                start = max(0, end - chunk)
                nl = os.pread(fd, end - start, start).rfind(b"\n")
                if nl >= 0:
                    os.ftruncate(fd, start + nl + 1)
                    return
                end = start
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)

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
                raise RunDirError(f"{shown(self.path)}: cannot write: {exc.strerror or exc}") from None


def _open_append(path: Path) -> Any:
    """A binary append handle on a record log (never through a symlink; regular files only)."""
    return os.fdopen(open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "record file"), "ab")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def loads_line(line: bytes | str) -> Any:
    """One JSON Lines record, as ``json.loads`` reads it (orjson first, where it reads it alike)."""
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


def prompt_sha256(text: str, messages: Any) -> str:
    """The key of an episode step's prompt in ``prompts.jsonl``: sha256 of its text and messages."""
    blob = json.dumps({"messages": messages, "text": text}, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", errors="surrogatepass")).hexdigest()


def _prompt_key(rec: dict[str, Any]) -> str | None:
    # a case's prompt by its case id (case ids never hold ':'), an episode step's by its hash
    if isinstance(rec.get("case_id"), str):
        return str(rec["case_id"])
    if isinstance(rec.get("prompt_sha256"), str):
        return "sha256:" + rec["prompt_sha256"]
    return None


def _is_prompt_record(rec: dict[str, Any]) -> bool:
    return (
        isinstance(rec.get("text"), str)
        and isinstance(rec.get("token_ids"), list | None)
        and isinstance(rec.get("messages", []), list)
    )


def _is_step_prompt_record(rec: dict[str, Any]) -> bool:
    """A step prompt whose hash is its content's (a record under another's key is refused)."""
    return (
        _is_prompt_record(rec)
        and "case_id" not in rec
        and rec.get("prompt_sha256") == prompt_sha256(rec["text"], rec.get("messages"))
    )


def _is_addressable(rec: dict[str, Any]) -> bool:
    return (
        isinstance(rec.get("case_id"), str)
        and _is_count(rec.get("index"))
        and _is_count(rec.get("seed"))
        and isinstance(rec.get("key"), str)
    )


def _is_count(v: Any) -> bool:
    return is_int(v) and v >= 0


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
        and isinstance(rec.get("stop_reason"), str | None)
        and is_int(rec.get("prompt_tokens", 0))
        and is_int(rec.get("completion_tokens", 0))
    )


def _is_step_record(rec: dict[str, Any]) -> bool:
    """Whether a stored episode step can be replayed and scored: a sample record plus its step
    number, the calls parsed from it and one scripted result per call, and how it ended."""
    calls, results = rec.get("calls"), rec.get("results")
    return (
        _is_sample_record(rec)
        and _is_count(rec.get("step"))
        and rec.get("slot") == step_record_key(rec["case_id"], rec["index"], rec["step"])
        and isinstance(rec.get("end"), str | None)
        and isinstance(calls, list)
        and isinstance(results, list)
        and len(calls) == len(results)
        and all(isinstance(c, dict) and isinstance(c.get("tool"), str) and "arguments" in c for c in calls)
        and all(
            isinstance(r, dict) and isinstance(r.get("tool"), str) and isinstance(r.get("ok"), bool)
            and isinstance(r.get("text"), str)
            for r in results
        )
        and (isinstance(rec.get("prompt_sha256"), str) or isinstance(rec.get("prompt"), dict))
    )  # fmt: skip


def _is_turn_record(rec: dict[str, Any]) -> bool:
    """Whether a stored teammate turn can be replayed and scored: a sample record plus the step it
    answers, its turn number, the role that played it and how it ended."""
    return (
        _is_sample_record(rec)
        and _is_count(rec.get("step"))
        and _is_count(rec.get("turn"))
        and rec.get("slot") == step_record_key(rec["case_id"], rec["index"], rec["step"])
        and isinstance(rec.get("end"), str | None)
        and isinstance(rec.get("role"), str)
        and isinstance(rec.get("prompt_sha256"), str)
    )


def sample_record_key(case_id: str, index: int) -> str:
    return f"{case_id}#{index}"


def step_record_key(case_id: str, index: int, step: int) -> str:
    return f"{sample_record_key(case_id, index)}#{step}"


def read_json_file(path: Path, what: str) -> Any:
    """A run file's parsed JSON, or a one-line ``RunDirError`` naming the file and line."""
    data = read_bytes(path, what)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{shown(path)}:1: unreadable {what}: not UTF-8 text ({exc.reason})") from None
    except ValueError as exc:
        raise RunDirError(f"{shown(path)}:{getattr(exc, 'lineno', 1)}: unreadable {what}: {exc}") from None


class RunDir:
    """One run's directory: manifest, prompts, samples, steps, results, summary."""

    def __init__(self, path: Path):
        self.path = Path(path)
        #: file name -> 1-based numbers of lines that could not be read (reported by ``show``)
        self.unreadable: dict[str, list[int]] = {}

    def file(self, name: str) -> Path:
        """The path of run file ``name`` (a name of ``RUN_FILES``)."""
        if name not in RUN_FILES:
            raise KeyError(f"{name!r} is not a run file (leader_eval.store.run_store.RUN_FILES)")
        return self.path / name

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def check(self) -> None:
        """Refuse the directory when an entry is a symlink or special file (``check_run_dir``)."""
        check_run_dir(self.path)

    def read_manifest(self) -> dict[str, Any]:
        """The manifest, or a one-line ``RunDirError`` when it is missing, unreadable or misshapen.

        Checks the whole directory first (``check``): every command reads the manifest before
        anything else of a run."""
        self.check()
        mp = self.manifest_path
        if not os.path.lexists(mp):
            raise RunDirError(f"{shown(self.path)}: not a run directory (no {MANIFEST})")
        data = read_json_file(mp, "manifest")
        problem = _manifest_problem(data)
        if problem:
            raise RunDirError(f"{shown(mp)}:1: not a leader-eval manifest: {problem}")

        check_format(mp, data, "run")  # an unknown layout: one line saying what to do
        return dict(data)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.manifest_path, manifest)

    def samples_log(self) -> RecordLog:
        # Keyed by (case, index): a resumed run must never hold two samples for one slot.
        return RecordLog(self.path / SAMPLES, key_field="slot", valid=_is_sample_record)

    def prompts_log(self) -> RecordLog:
        return RecordLog(self.path / PROMPTS, key_field="case_id", key=_prompt_key, fsync=False)

    def record_log(self, name: str) -> RecordLog:
        """Run record file ``name`` (samples, steps or prompts), read-only, each record validated."""
        if name == SAMPLES:
            return RecordLog(self.file(name), key_field="slot", readonly=True, valid=_is_sample_record)
        if name == STEPS:
            return self.steps_log(readonly=True)
        if name == TURNS:
            return self.turns_log(readonly=True)
        if name == PROMPTS:
            return RecordLog(
                self.file(name), key_field="case_id", key=_prompt_key, readonly=True, valid=_is_any_prompt_record
            )
        if name == JUDGEMENTS:
            return self.judgements_log(readonly=True)
        raise KeyError(f"{name!r} is not a record file")

    def judgements_log(self, *, readonly: bool = False) -> RecordLog:
        """``judgements.jsonl``: one judge reply per criterion and sample slot (``runs.judging``)."""
        return RecordLog(self.path / JUDGEMENTS, key_field="slot", readonly=readonly, valid=_is_judgement_record)

    def read_judgements(self) -> dict[str, dict[str, Any]]:
        """Every readable judgement by its slot (``criterion|case_id|index``); a bad line is skipped
        and listed in ``unreadable`` (that slot is judged again on resume)."""
        if not os.path.lexists(self.path / JUDGEMENTS):
            return {}
        log = self.judgements_log(readonly=True)
        if log.bad_lines:
            self.unreadable[JUDGEMENTS] = list(log.bad_lines)
        return dict(log.items())

    def steps_log(self, *, readonly: bool = False) -> RecordLog:
        """``steps.jsonl``: one record per episode step, keyed by case, sample index and step."""
        return RecordLog(self.path / STEPS, key_field="slot", readonly=readonly, valid=_is_step_record)

    def turns_log(self, *, readonly: bool = False) -> RecordLog:
        """``turns.jsonl``: one record per teammate reply, keyed like the step it answers."""
        return RecordLog(self.path / TURNS, key_field="slot", readonly=readonly, valid=_is_turn_record)

    def read_turns(self) -> dict[tuple[str, int], dict[int, dict[str, Any]]]:
        """Every readable teammate turn, by episode and then by the step it answers, each with its
        ``prompt`` resolved from ``prompts.jsonl``; a bad line is skipped, reported and listed in
        ``unreadable`` (its episode then lacks a turn and is not scored)."""
        p = self.path / TURNS
        out: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
        if not os.path.lexists(p):
            return out
        log = self.turns_log(readonly=True)
        bad = list(log.bad_lines)
        prompts = self.read_step_prompts()
        for key, rec in log.items():
            found = prompts.get(rec["prompt_sha256"])
            if found is None:
                bad.append(log.lines[key])
                _log.warning(
                    "%s:%d: unreadable record skipped (its prompt %s is not in %s)",
                    shown(p), log.lines[key], rec["prompt_sha256"][:12], PROMPTS,
                )  # fmt: skip
                continue
            rec = {**rec, "prompt": {"text": found["text"], "messages": found.get("messages")}}
            out.setdefault((rec["case_id"], int(rec["index"])), {})[int(rec["step"])] = rec
        if bad:
            self.unreadable[TURNS] = sorted(bad)
        return out

    def read_samples(self, *, as_recorded: bool = False) -> list[Sample]:
        """The run's samples; a record of the wrong shape is skipped and listed in ``unreadable``.

        ``as_recorded``: keep a record whose fields have wrong types as long as its slot can be
        addressed (replay serves it as it was recorded, and the backend guard turns it into a
        sample error, instead of pretending it was never sampled)."""
        p = self.path / SAMPLES
        valid = _is_addressable if as_recorded else _is_sample_record
        if not os.path.lexists(p):
            return []
        log = RecordLog(p, key_field="slot", readonly=True, valid=valid)
        if log.bad_lines:
            self.unreadable[SAMPLES] = list(log.bad_lines)
        return [Sample.from_dict({k: v for k, v in rec.items() if k in _SAMPLE_FIELDS}) for rec in log.records()]

    def _prompts(self) -> RecordLog | None:
        p = self.path / PROMPTS
        if not os.path.lexists(p):
            return None
        log = RecordLog(p, key_field="case_id", key=_prompt_key, readonly=True, valid=_is_any_prompt_record)
        if log.bad_lines:
            self.unreadable[PROMPTS] = log.bad_lines
        return log

    def read_prompts(self, *, shared: bool = False) -> dict[str, dict[str, Any]]:
        """Each case's rendered prompt, by case id.

        ``shared``: for readers that never change what they get (a run's live scorer, its scoring
        and its report each read the file: ~5 ms a read for 2,000 cases). A file that reads as the
        last one parsed for a shared read, byte for byte and every line readable, is not parsed
        again: the records are the same objects every shared read of those bytes returned (each
        reader gets its own outer dict)."""
        global _last_prompts
        p = self.path / PROMPTS
        if not shared:
            log = self._prompts()
            return {r["case_id"]: r for r in log.records() if "case_id" in r} if log is not None else {}
        if not os.path.lexists(p):
            return {}
        data = read_bytes(p, "record file", cap_of(p))
        last = _last_prompts
        if last is not None and last[0] == data:
            return dict(last[1])
        log = RecordLog(p, key_field="case_id", key=_prompt_key, readonly=True, valid=_is_any_prompt_record, data=data)
        if log.bad_lines:
            self.unreadable[PROMPTS] = log.bad_lines
        prompts = {r["case_id"]: r for r in log.records() if "case_id" in r}
        if not log.bad_lines and not log.duplicates and len(data) <= _PROMPTS_MEMO_MAX:
            _last_prompts = (data, prompts)
        return dict(prompts)

    def read_step_prompts(self) -> dict[str, dict[str, Any]]:
        """Episode step prompts, by ``prompt_sha256``."""
        log = self._prompts()
        return {r["prompt_sha256"]: r for r in log.records() if "case_id" not in r} if log is not None else {}

    def read_steps(self) -> dict[tuple[str, int], list[dict[str, Any]]]:
        """Every readable episode step, grouped by episode, in step order, each with its ``prompt``
        (``{"text", "messages"}``) resolved from ``prompts.jsonl``.

        A line that is not a step record, or whose prompt is not recorded, is skipped, reported
        (``FILE:LINE``) and listed in ``unreadable``, as ``samples.jsonl`` lines are."""
        p = self.path / STEPS
        out: dict[tuple[str, int], list[dict[str, Any]]] = {}
        if not os.path.lexists(p):
            return out
        log = self.steps_log(readonly=True)
        bad = list(log.bad_lines)
        prompts = self.read_step_prompts() if any("prompt" not in r for r in log.records()) else {}
        for key, rec in log.items():
            if "prompt" not in rec:
                found = prompts.get(rec["prompt_sha256"])
                if found is None:
                    line = log.lines[key]
                    bad.append(line)
                    _log.warning(
                        "%s:%d: unreadable record skipped (its prompt %s is not in %s)",
                        shown(p), line, rec["prompt_sha256"][:12], PROMPTS,
                    )  # fmt: skip
                    continue
                rec = {**rec, "prompt": {"text": found["text"], "messages": found.get("messages")}}
            out.setdefault((rec["case_id"], int(rec["index"])), []).append(rec)
        for steps in out.values():
            steps.sort(key=lambda r: int(r["step"]))
        if bad:
            self.unreadable[STEPS] = sorted(bad)
        return out

    def read_json(self, name: str) -> Any:
        return read_json_file(self.file(name), name)


def read_steps(path: Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Every readable recorded step of the run directory at ``path``, grouped by episode, in step
    order, each with its prompt resolved (``RunDir.read_steps``: a bad line is skipped and reported)."""
    return RunDir(path).read_steps()


def _is_judgement_record(rec: dict[str, Any]) -> bool:
    return (
        isinstance(rec.get("slot"), str)
        and isinstance(rec.get("criterion"), str)
        and isinstance(rec.get("case_id"), str)
        and isinstance(rec.get("index"), int)
        and rec["slot"] == f"{rec['criterion']}|{rec['case_id']}|{rec['index']}"
        and isinstance(rec.get("reply"), str)
        and isinstance(rec.get("judge"), dict)
        and (rec.get("error") is None or isinstance(rec.get("error"), str))
    )


def _is_any_prompt_record(rec: dict[str, Any]) -> bool:
    return _is_prompt_record(rec) if "case_id" in rec else _is_step_prompt_record(rec)
