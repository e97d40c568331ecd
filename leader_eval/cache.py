"""Content-addressed sample cache: the same append-only ``RecordLog`` as a run's samples.jsonl.

A sample's key is backend + checkpoint + exact prompt + sampling params + per-sample seed
(``runner.sample_key``), so a hit is the sample that request would produce. Re-running with the
same seed, or re-scoring after a check changed, samples nothing new; editing one case re-samples
only that case; a run without ``--seed`` draws a fresh seed and so fresh keys. Failed samples are
never cached (the next run retries them). Records are sharded by the key's first two hex digits so
a run loads only the shards its keys fall in.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from leader_eval.store import RecordLog

ENV = "LEADER_EVAL_CACHE_DIR"


def default_cache_dir() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "leader-eval" / "samples"


class SampleCache:
    def __init__(self, root: Path | None = None, *, enabled: bool = True):
        self.root = root or default_cache_dir()
        self.enabled = enabled and os.environ.get(ENV) != "off"
        self._shards: dict[str, RecordLog] = {}
        self.hits = 0
        self.misses = 0

    def _shard(self, key: str) -> RecordLog:
        name = key[:2]
        log = self._shards.get(name)
        if log is None:
            # many small fsyncs would dominate a fast backend; the run's own log is the durable copy
            log = RecordLog(self.root / f"{name}.jsonl", key_field="key", fsync=False)
            self._shards[name] = log
        return log

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        rec = self._shard(key).get(key)
        if rec is None:
            self.misses += 1
        else:
            self.hits += 1
        return rec

    def put(self, record: dict[str, Any]) -> None:
        if not self.enabled or record.get("outcome") != "ok":
            return
        self._shard(record["key"]).append({**record, "cached_at": round(time.time(), 3)})

    def close(self) -> None:
        for log in self._shards.values():
            log.close()
        self._shards.clear()


def cache_info(root: Path | None = None) -> dict[str, Any]:
    root = root or default_cache_dir()
    files = sorted(root.glob("*.jsonl")) if root.exists() else []
    n = sum(len(RecordLog(f, key_field="key", readonly=True)) for f in files)
    return {"path": str(root), "shards": len(files), "samples": n, "bytes": sum(f.stat().st_size for f in files)}


def cache_prune(root: Path | None = None, *, older_than_days: float | None = None) -> dict[str, int]:
    """Drop every record (or those cached more than ``older_than_days`` ago); rewrite shards atomically."""
    import json

    root = root or default_cache_dir()
    kept = dropped = 0
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
    for f in sorted(root.glob("*.jsonl")) if root.exists() else []:
        log = RecordLog(f, key_field="key", readonly=True)
        keep = [r for r in log.records() if cutoff is not None and r.get("cached_at", 0) >= cutoff]
        dropped += len(log) - len(keep)
        kept += len(keep)
        if keep:
            tmp = f.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep), encoding="utf-8")
            tmp.replace(f)
        else:
            f.unlink()
    return {"kept": kept, "dropped": dropped}
