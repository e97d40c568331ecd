"""Content-addressed sample cache: the same append-only ``RecordLog`` as a run's samples.jsonl.

A sample's key is the backend's cache identity + exact prompt + sampling params + per-sample seed
(``sampling.keys.sample_key``), so a hit is the sample that request would produce. Re-running with the
same seed, or re-scoring after a check changed, samples nothing new; editing one case re-samples
only that case; a run without ``--seed`` draws a fresh seed and so fresh keys. Failed samples are
never cached (the next run retries them). Records are sharded by the key's first two hex digits so
a run loads only the shards its keys fall in.

Cache identity (``Backend.cache_identity``): what makes two checkpoints "the same" for the cache.

* local GGUF files (``local:``, ``gguf:``): ``gguf-sha256:<sha256 of the whole file>``; hashing is
  memoised in ``file-sha256.json`` in the cache directory by (real path, size, mtime_ns, inode,
  device), so an unchanged file is hashed once, and a file rewritten in place is hashed again;
* remote servers (``openai:``): ``None``, i.e. never served from or written to the cache, since a
  server can change the weights behind a model name at any time; unless the user names an
  explicit identity (``--cache-id``), which then is ``<model_id>#cache-id=<name>``;
* ``tinker://`` checkpoint paths name immutable weights: the path itself.

Safety of the directory: the cache only ever opens, rewrites or deletes files named like its
shards (two hex digits + ``.jsonl``), and ``cache prune`` rewrites or deletes a shard only if every
line of it is a record of the cache's own shape; any other file (a mis-set
``LEADER_EVAL_CACHE_DIR`` pointing at a project folder) is left alone and reported as skipped.
Prune holds an exclusive lock on ``.lock`` in the directory; a run holds a shared one while its
cache is open, so a prune never rewrites a shard under a running evaluation (it refuses instead,
exit 2), and a run that finds a prune in progress runs without the cache. A directory the cache creates gets a standard
``CACHEDIR.TAG``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.store.run_store import RecordLog, check_entries, open_file, read_bytes, read_json_file

ENV = "LEADER_EVAL_CACHE_DIR"
#: the only file names the cache reads, writes or deletes as shards
SHARD_NAME = re.compile(r"^[0-9a-f]{2}\.jsonl$")
_KEY = re.compile(r"^[0-9a-f]{32}$")
LOCK_NAME = ".lock"
MEMO_NAME = "file-sha256.json"
TAG_NAME = "CACHEDIR.TAG"
#: entries kept in the file-hash memo (most recently used first)
MEMO_MAX = 256
#: the standard cache-directory tag (https://bford.info/cachedir/): backup tools skip the folder
_CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# leader-eval sample cache\n"

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "leader-eval" / "samples"


def cache_enabled() -> bool:
    return os.environ.get(ENV) != "off"


def is_cache_record(rec: Any, shard: str | None = None) -> bool:
    """Whether ``rec`` has the shape of a record this cache writes (in shard ``shard``, if given)."""
    return (
        isinstance(rec, dict)
        and isinstance(rec.get("key"), str)
        and _KEY.match(rec["key"]) is not None
        and (shard is None or rec["key"][:2] == shard)
        and rec.get("outcome") == "ok"
        and isinstance(rec.get("cached_at"), int | float)
        and isinstance(rec.get("text"), str)
    )


#: the temporaries of the cache's atomic rewrites (``.ab.jsonl.XXXX``, ``.file-sha256.json.XXXX``)
_TEMP_NAME = re.compile(r"^\.(?:[0-9a-f]{2}\.jsonl|file-sha256\.json)\.")


def _is_cache_file(name: str) -> bool:
    """The names the cache reads or writes, and their atomic-write temporaries."""
    return (
        name in (LOCK_NAME, MEMO_NAME, TAG_NAME)
        or SHARD_NAME.match(name) is not None
        or _TEMP_NAME.match(name) is not None
    )


def check_cache_dir(root: Path) -> None:
    """Refuse (``RunDirError``, exit 2) a cache whose own files include a symlink or special file:
    a shard linked to a file outside would be appended to, a FIFO would hang the run. Other
    entries are not the cache's and are left alone (a mis-set ``LEADER_EVAL_CACHE_DIR``); the
    root itself may be a symlink."""
    check_entries(root, "the sample cache", owned=_is_cache_file, files=_is_cache_file)


def _lock(root: Path, exclusive: bool) -> Any:
    """A non-blocking flock on ``root/.lock``; None when another process holds it the other way."""
    root.mkdir(parents=True, exist_ok=True)
    check_cache_dir(root)
    fh = os.fdopen(open_file(root / LOCK_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "cache lock"), "a")
    try:
        fcntl.flock(fh.fileno(), (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    return fh


class SampleCache:
    def __init__(self, root: Path | None = None, *, enabled: bool = True):
        self.root = root or default_cache_dir()
        self.enabled = enabled and cache_enabled()
        self._shards: dict[str, RecordLog] = {}
        self._lock: Any = None
        self.hits = 0
        self.misses = 0

    def _open(self) -> bool:
        if self._lock is None and self.enabled:
            # tag only a directory this cache creates: a mis-set LEADER_EVAL_CACHE_DIR pointing at
            # a project folder must not make backup tools skip that folder
            fresh = not self.root.exists()
            try:
                self._lock = _lock(self.root, exclusive=False)
            except OSError as exc:
                log.warning("sample cache %s unusable (%s); running without it", self.root, exc)
            if self._lock is None:
                log.warning("sample cache %s is being pruned; running without it", self.root)
                self.enabled = False
            elif fresh:
                with contextlib.suppress(OSError):
                    (self.root / TAG_NAME).write_text(_CACHEDIR_TAG, encoding="utf-8")
        return self.enabled

    def _shard(self, key: str) -> RecordLog | None:
        name = key[:2]
        shard = self._shards.get(name)
        if shard is None:
            path = self.root / f"{name}.jsonl"
            if path.exists() and not _first_line_is_ours(path, name):
                log.warning("%s is not a sample-cache shard; the cache leaves it alone", path)
                self.enabled = False
                return None
            # many small fsyncs would dominate a fast backend; the run's own log is the durable copy
            shard = RecordLog(path, key_field="key", fsync=False)
            self._shards[name] = shard
        return shard

    def get(self, key: str) -> dict[str, Any] | None:
        if not _KEY.match(key) or not self._open():
            return None
        shard = self._shard(key)
        rec = shard.get(key) if shard is not None else None
        if rec is None:
            self.misses += 1
        else:
            self.hits += 1
        return rec

    def put(self, record: dict[str, Any]) -> None:
        if record.get("outcome") != "ok" or not _KEY.match(str(record.get("key"))) or not self._open():
            return
        shard = self._shard(record["key"])
        if shard is not None:
            shard.append({**record, "cached_at": round(time.time(), 3)})

    def close(self) -> None:
        for shard in self._shards.values():
            shard.close()
        self._shards.clear()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _first_line_is_ours(path: Path, shard: str) -> bool:
    with os.fdopen(open_file(path, os.O_RDONLY, "cache shard"), "rb") as f:
        line = f.readline(1 << 24)
    if not line.endswith(b"\n"):
        return not line.strip()  # empty, or a torn first write of our own
    try:
        return is_cache_record(json.loads(line), shard)
    except ValueError:
        return False


def _read_shard(path: Path) -> list[dict[str, Any]] | None:
    """Every record of a shard, or None when any complete line is not a cache record (not ours)."""
    shard = path.name[:2]
    out: list[dict[str, Any]] = []
    data = read_bytes(path, "cache shard")
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:  # a torn tail of an interrupted append
                continue
            return None
        if not is_cache_record(rec, shard):
            return None
        out.append(rec)
    return out


def _shard_files(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if SHARD_NAME.match(p.name) and p.is_file() and not p.is_symlink())


def cache_info(root: Path | None = None) -> dict[str, Any]:
    root = root or default_cache_dir()
    files = [f for f in _shard_files(root) if _first_line_is_ours(f, f.name[:2])]
    n = sum(len(RecordLog(f, key_field="key", readonly=True)) for f in files)
    return {"path": str(root), "shards": len(files), "samples": n, "bytes": sum(f.stat().st_size for f in files)}


def cache_prune(root: Path | None = None, *, older_than_days: float | None = None) -> dict[str, Any]:
    """Drop every record (or those cached more than ``older_than_days`` ago); rewrite shards atomically.

    Touches only files named like shards whose every line is a cache record; the others are
    listed under ``skipped``. Refuses (``LeaderEvalError``) while a run has the cache open.
    """
    root = root or default_cache_dir()
    kept = dropped = 0
    skipped: list[str] = []
    if not root.is_dir():
        return {"kept": 0, "dropped": 0, "skipped": []}
    lock = _lock(root, exclusive=True)
    if lock is None:
        raise LeaderEvalError(f"{root}: the sample cache is in use by a running evaluation; prune it afterwards")
    try:
        cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
        for f in _shard_files(root):
            records = _read_shard(f)
            if records is None:
                skipped.append(str(f))
                continue
            keep = [r for r in records if cutoff is not None and r["cached_at"] >= cutoff]
            dropped += len(records) - len(keep)
            kept += len(keep)
            if len(keep) == len(records):
                continue
            if keep:
                fd, tmp = tempfile.mkstemp(prefix=f".{f.name}.", dir=root)
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep))
                os.replace(tmp, f)
            else:
                f.unlink()
    finally:
        lock.close()
    return {"kept": kept, "dropped": dropped, "skipped": skipped}


# --- content identity of local model files ----------------------------------------------------


def file_sha256(path: Path, memo_dir: Path | None = None) -> str:
    """sha256 of the whole file, memoised by (real path, size, mtime_ns, inode, device).

    The memo lives in the cache directory (``file-sha256.json``); with the cache off it is not
    kept. A file changed in place gets a new mtime_ns (or size, or inode) and is hashed again.
    """
    real = Path(os.path.realpath(path))
    st = real.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev]
    memo_dir = memo_dir or (default_cache_dir() if cache_enabled() else None)
    memo_path = memo_dir / MEMO_NAME if memo_dir is not None else None
    memo: dict[str, Any] = {}
    if memo_path is not None and memo_path.is_file():
        with contextlib.suppress(OSError, LeaderEvalError):
            loaded = read_json_file(memo_path, "file-hash memo")  # never through a symlink
            memo = loaded if isinstance(loaded, dict) else {}
    entry = memo.get(str(real))
    if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("sha256"), str):
        return str(entry["sha256"])
    h = hashlib.sha256()
    with real.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    if memo_path is not None:
        memo.pop(str(real), None)
        memo = {str(real): {"stamp": stamp, "sha256": digest}, **dict(list(memo.items())[: MEMO_MAX - 1])}
        with contextlib.suppress(OSError):
            memo_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{MEMO_NAME}.", dir=memo_path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(memo, out)
            os.replace(tmp, memo_path)
    return digest
