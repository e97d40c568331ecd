"""Sharded runs: ``run --shard I/N`` and ``merge``, so N CI jobs sample one suite and one gate decides.

Sharding is deterministic by case id: shard ``I`` of ``N`` takes every N-th case of the suite's
case ids in sorted order, starting at the I-th (balanced to within one case, independent of the
order of cases in the file). A shard needs an explicit seed: per-sample seeds derive from the run
seed, case id and sample index (``runner.derive_seed``), so the shards together draw exactly the
samples one unsharded run with that seed would. A shard records what it is in its manifest
(``shard``: index, count, the suite's case ids in suite order, the command's sampling options).

``merge_runs`` checks that the shards belong together (suite content, model, protocol, seed,
scorer version, label, sampling options and shard count), that every shard 1..N is there once
and ran exactly its own cases, refusing overlaps and gaps with a message naming the shard, and
writes one run directory that ``gate``, ``compare``, ``show`` and ``report`` read like any other:
samples and prompts of all shards, cases in suite order, scored again by ``score_run`` with the
suite (found at the recorded path, or given) so the summary is the one an unsharded run gives.
Shards never gate on their own: N gates would multiply false alarms; merge, then gate once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.errors import LeaderEvalError
from leader_eval.store import CASES, PROMPTS, RESULTS, SAMPLES, SUMMARY, RunDir, run_dir_lock, write_json_atomic

if TYPE_CHECKING:
    from leader_eval.evaluate import Run
    from leader_eval.runner import RunOptions
    from leader_eval.suite import Suite

__all__ = ["merge_runs", "parse_shard", "shard_case_ids", "shard_options"]

#: identity and manifest fields every shard of one run shares
_SAME_IDENTITY = ("suite", "suite_hash", "model_id", "protocol", "run_seed")


class ShardError(LeaderEvalError):
    """Bad ``--shard`` value or shards that do not merge (exit status 2)."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/3"`` -> ``(2, 3)``; 1 <= I <= N."""
    index, sep, count = str(text).strip().partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or n < 1 or not 1 <= i <= n:
        raise ShardError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 2/3")
    return i, n


def shard_case_ids(case_ids: Sequence[str], index: int, count: int) -> list[str]:
    """The case ids of shard ``index`` of ``count``: every count-th id in sorted order."""
    return sorted(case_ids)[index - 1 :: count]


def shard_options(options: RunOptions, spec: str, suite: Suite | str | Path) -> RunOptions:
    """``options`` restricted to shard ``spec`` (``I/N``) of ``suite``, with the shard recorded.

    Requires an explicit seed; refuses ``--tags``/``--case``/``--limit`` (a shard is a slice of
    the whole suite, so that the shards' union is the suite and merge can find gaps). Without
    ``--out`` the run directory gets a ``__shardIofN`` suffix so shards never share one."""
    from leader_eval.runner import default_label, default_out_dir
    from leader_eval.suite import load_suite

    index, count = parse_shard(spec)
    if options.seed is None:
        raise ShardError("--shard needs an explicit --seed: the shards must draw the samples of one run")
    if options.tags or options.case_ids or options.limit is not None:
        raise ShardError("--shard slices the whole suite: drop --tags, --case and --limit")
    suite = suite if not isinstance(suite, str | Path) else load_suite(suite)
    ids = [c.id for c in suite.cases]
    mine = shard_case_ids(ids, index, count)
    if not mine:
        raise ShardError(f"--shard {index}/{count}: the suite has {len(ids)} cases, so shard {index} would be empty")
    label = options.label or default_label(options.model)
    out = options.out or default_out_dir(suite, label, options.seed, suffix=f"__shard{index}of{count}")
    record = {
        "index": index,
        "count": count,
        "suite_cases": ids,
        "pass_k": list(getattr(suite, "pass_k", ()) or ()),
        "sampling": {
            "model": options.model,
            "samples": options.samples,
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
            "protocol": options.protocol,
            "context_length": options.context_length,
        },
    }
    return replace(options, case_ids=mine, out=Path(out), extra_manifest={**options.extra_manifest, "shard": record})


@dataclass
class _Shard:
    path: Path
    manifest: dict[str, Any]
    index: int
    count: int

    @property
    def name(self) -> str:
        return f"{self.path} (shard {self.index}/{self.count})"


def _read_shard(path: Path) -> _Shard:
    manifest = RunDir(path).read_manifest()
    info = manifest.get("shard")
    if not isinstance(info, Mapping):
        raise ShardError(f"{path}: not a shard (its manifest has no shard record; run it with --shard I/N --seed S)")
    try:
        return _Shard(path, manifest, int(info["index"]), int(info["count"]))
    except (KeyError, TypeError, ValueError):
        raise ShardError(f"{path}: unreadable shard record in its manifest") from None


def _check(shards: Sequence[_Shard]) -> list[str]:
    """Raise on shards that do not belong together, overlap or leave a gap; the suite's case ids."""
    first = shards[0]
    info0 = first.manifest["shard"]
    for s in shards[1:]:
        info = s.manifest["shard"]
        diff = [k for k in _SAME_IDENTITY if s.manifest["identity"].get(k) != first.manifest["identity"].get(k)]
        for key in ("scorer_version", "label"):
            if s.manifest.get(key) != first.manifest.get(key):
                diff.append(key)
        for key in ("count", "suite_cases", "sampling", "pass_k"):
            if info.get(key) != info0.get(key):
                diff.append("shard count" if key == "count" else "sampling options" if key == "sampling" else key)
        if diff:
            raise ShardError(f"{s.name}: differs from {first.name} in {', '.join(diff)}: merge the shards of one run")
    count = first.count
    seen: dict[int, _Shard] = {}
    for s in shards:
        if s.index in seen:
            raise ShardError(f"{s.name}: shard {s.index}/{count} given twice (also {seen[s.index].path}): overlap")
        seen[s.index] = s
    missing = [i for i in range(1, count + 1) if i not in seen]
    if missing:
        names = ", ".join(f"{i}/{count}" for i in missing)
        raise ShardError(f"shard {names} missing (a gap: have {', '.join(str(s.path) for s in shards)})")
    ids: list[str] = list(info0["suite_cases"])
    for s in shards:
        want = set(shard_case_ids(ids, s.index, count))
        have = set(s.manifest["identity"].get("cases") or {})
        if have != want:
            extra, lost = sorted(have - want), sorted(want - have)
            what = (f"ran cases of other shards ({', '.join(extra[:5])})" if extra else "") + (
                f"{'; ' if extra else ''}misses its cases {', '.join(lost[:5])}" if lost else ""
            )
            raise ShardError(f"{s.name}: {what}: overlap or gap")
    return ids


def _concat_lines(paths: Sequence[Path], dest: Path) -> None:
    with dest.open("wb") as out:
        for p in paths:
            if p.exists():
                data = p.read_bytes()
                out.write(data if not data or data.endswith(b"\n") else data + b"\n")


def merge_runs(run_dirs: Sequence[str | Path], out: str | Path, *, suite: Suite | str | Path | None = None) -> Run:
    """Merge the shards of one run into ``out`` (a new or empty directory); see the module doc."""
    from leader_eval.evaluate import read_run, score_run
    from leader_eval.runner import check_out_dir, suite_from_run_dir
    from leader_eval.suite import load_suite

    if not run_dirs:
        raise ShardError("merge needs the shard run directories (RUN_DIR... --out DIR)")
    shards = sorted((_read_shard(Path(p)) for p in run_dirs), key=lambda s: (s.index, str(s.path)))
    suite_ids = _check(shards)
    out = Path(out)
    if any(out.resolve() == s.path.resolve() for s in shards):
        raise ShardError(f"{out}: --out is one of the shards; merge into a new directory")
    check_out_dir(out)
    if RunDir(out).exists():
        raise ShardError(f"{out}: already holds a run; merge into a new or empty directory")
    first = shards[0].manifest
    loaded = _suite_for(suite, first, load_suite, shards[0].path)
    statuses = [str(s.manifest.get("status")) for s in shards]
    status = "complete" if all(x == "complete" for x in statuses) else next(x for x in statuses if x != "complete")
    cases: dict[str, Any] = {}
    for s in shards:
        cases.update(s.manifest["identity"]["cases"])
    # created_by goes too: a merged run is nobody's scratch run (the plugin prunes its own, by it)
    manifest = {k: v for k, v in first.items() if k not in ("shard", "sampling_stats", "stopped_by", "created_by")}
    manifest["identity"] = {**first["identity"], "cases": {cid: cases[cid] for cid in sorted(cases)}}
    # where the suite lies seen from the merged directory, not from the first shard's
    located = suite_from_run_dir(loaded.path, out) if loaded is not None else None
    manifest["suite"] = {k: v for k, v in (first.get("suite") or {}).items() if k != "from_run_dir"}
    if located is not None:
        manifest["suite"]["from_run_dir"] = located
    seed = int(first["identity"]["run_seed"])
    manifest["run_id"] = f"{first['identity']['suite']}-merged-{seed:08x}-{shards[0].count}shards"
    manifest["created"] = datetime.now(UTC).isoformat(timespec="seconds")
    manifest["status"] = status
    manifest["merged_from"] = [
        {"path": str(s.path), "run_id": s.manifest.get("run_id"), "shard": f"{s.index}/{s.count}", "status": st}
        for s, st in zip(shards, statuses, strict=True)
    ]
    stats = [s.manifest.get("sampling_stats") or {} for s in shards]
    keys = {k for st in stats for k, v in st.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    if keys:
        manifest["sampling_stats"] = {k: sum(st.get(k, 0) for st in stats) for k in sorted(keys)}
    with run_dir_lock(out):
        rundir = RunDir(out)
        rundir.write_manifest(manifest)
        _concat_lines([s.path / SAMPLES for s in shards], out / SAMPLES)
        _concat_lines([s.path / PROMPTS for s in shards], out / PROMPTS)
        if loaded is not None:
            score_run(rundir, loaded)
        else:
            _merge_scored(shards, suite_ids, out, manifest)
    return read_run(out)


def _suite_for(
    suite: Suite | str | Path | None, manifest: Mapping[str, Any], load: Any, shard_dir: Path
) -> Suite | None:
    """The suite to score the merged run with: the given one, else the recorded one (found from
    any working directory: ``runner.recorded_suite_paths``) if its content still hashes to the
    run's. None: merge the shards' scored records instead."""
    from leader_eval.runner import recorded_suite_paths

    want = manifest["identity"]["suite_hash"]
    if suite is not None:
        loaded = suite if not isinstance(suite, str | Path) else load(suite)
        if loaded.content_hash != want:
            raise ShardError(f"{loaded.path}: suite content {loaded.content_hash} is not the shards' {want}")
        return loaded
    for path in recorded_suite_paths(dict(manifest), shard_dir):
        try:
            loaded = load(path)
        except (OSError, LeaderEvalError):
            continue
        if loaded.content_hash == want:
            return loaded
    return None


@dataclass(frozen=True)
class _SuiteName:
    """What ``aggregate.summarize`` needs of a suite when the suite file is not at hand."""

    name: str
    pass_k: tuple[int, ...]


def _merge_scored(shards: Sequence[_Shard], suite_ids: Sequence[str], out: Path, manifest: dict[str, Any]) -> None:
    """Without the suite file: the shards' results and case records, in suite order, summarized."""
    from leader_eval.aggregate import summarize

    records: dict[str, dict[str, Any]] = {}
    retries = 0
    for s in shards:
        if not (s.path / CASES).exists():
            raise ShardError(f"{s.name}: not scored (no {CASES}) and the suite file is not at hand: pass --suite")
        for rec in json.loads((s.path / CASES).read_text(encoding="utf-8")):
            records[rec["case_id"]] = rec
        if (s.path / SUMMARY).exists():
            retries += int(json.loads((s.path / SUMMARY).read_text(encoding="utf-8")).get("retries", 0))
    results = [records[cid] for cid in suite_ids if cid in records]
    _concat_lines([s.path / RESULTS for s in shards], out / RESULTS)
    write_json_atomic(out / CASES, results)
    info = shards[0].manifest["shard"]
    summary = summarize(_SuiteName(manifest["identity"]["suite"], tuple(info.get("pass_k") or ())), results)  # type: ignore[arg-type]
    summary["run_id"] = manifest["run_id"]
    summary["model_id"] = manifest["identity"]["model_id"]
    summary["label"] = manifest.get("label")
    summary["tokens"] = {
        "prompt": sum(int(r.get("prompt_tokens") or 0) for r in results),
        "completion": sum(int(r.get("completion_tokens") or 0) for r in results),
        "per_case": {r["case_id"]: [r.get("prompt_tokens", 0), r.get("completion_tokens", 0)] for r in results},
    }
    summary["retries"] = retries
    from leader_eval.aggregate import usage_summary

    samples = RunDir(out).read_samples()
    summary["usage"] = usage_summary(samples, manifest.get("prices"))
    from leader_eval.error_rule import first_sampler_error

    first_error = first_sampler_error(samples)
    if first_error is not None:  # as score_run writes it
        summary["first_error"] = first_error
    write_json_atomic(out / SUMMARY, summary)
