"""A run's output directory: refuse one that is not ours to write, open a new one or resume the
same run's (``run``, ``merge`` and the pytest plugin all open their directory here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leader_eval.errors import RunDirError
from leader_eval.store.run_store import LOCK, MANIFEST, RunDir, check_run_dir, lock_holder


def check_out_dir(out: Path, *, check_lock: bool = True) -> None:
    """Refuse an ``--out`` that is not ours to write: a file, or a directory that holds files but
    no manifest (another tool's output, a run's leftovers: adopting them would mix samples)."""
    if out.exists() and not out.is_dir():
        raise RunDirError(f"{out}: --out names a file, not a run directory")
    check_run_dir(out)  # no symlink or special file inside, before anything is read or written
    holder = lock_holder(out / LOCK) if check_lock else None
    if holder is not None:  # asked early, before a model loads; the lock itself is taken later
        raise RunDirError(
            f"run directory {out} is in use by another leader-eval process (pid {holder or 'unknown'}); "
            "wait for it to finish or choose another directory"
        )
    if out.is_dir() and not RunDir(out).manifest_path.exists():
        try:
            foreign = sorted(p.name for p in out.iterdir() if p.name != LOCK)
        except OSError as exc:
            raise RunDirError(f"{out}: cannot read --out directory: {exc.strerror or exc}") from None
        if foreign:
            raise RunDirError(
                f"{out}: --out is a non-empty directory without a {MANIFEST} (holds {foreign[0]!r}"
                f"{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}); choose an empty or new directory"
            )


def open_run_dir(out: Path, manifest: dict[str, Any]) -> RunDir:
    """The run directory for ``manifest``: new, or the same run's to resume (call under its lock)."""
    check_out_dir(out, check_lock=False)
    run = RunDir(out)
    if run.exists():
        old = run.read_manifest()
        if old.get("identity") != manifest["identity"]:
            diff = [k for k in manifest["identity"] if old.get("identity", {}).get(k) != manifest["identity"][k]]
            raise RunDirError(
                f"{out / MANIFEST}:1: run directory belongs to another run ({', '.join(diff)} differ); "
                "choose another --out or delete it"
            )
        # the identity names a GGUF by its file name; two different files of one name must not
        # share a run directory, so the weights' content identity must match too when both know it
        was = old.get("model", {}).get("cache_identity")
        now = manifest.get("model", {}).get("cache_identity")
        if was and now and was != now:
            raise RunDirError(
                f"{out / MANIFEST}:1: run directory belongs to other model weights ({was} vs {now}); "
                "choose another --out or delete it"
            )
        manifest = {**old, "status": "running"}
    run.write_manifest(manifest)
    return run
