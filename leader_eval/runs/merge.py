"""Sharded runs: ``run --shard I/N`` and ``merge``, so N CI jobs sample one suite and one gate decides.

Sharding is deterministic by case id: shard ``I`` of ``N`` takes every N-th case of the suite's
case ids in sorted order, starting at the I-th (balanced to within one case, independent of the
order of cases in the file). A shard needs an explicit seed: per-sample seeds derive from the run
seed, case id and sample index (``sampling.keys.derive_seed``), so the shards together draw exactly the
samples one unsharded run with that seed would. A shard records what it is in its manifest
(``shard``: index, count, the suite's case ids in suite order, the command's sampling options).

``merge_runs`` trusts nothing a shard says. It checks that the shards belong together (suite
content, model, protocol, seed, scorer version, label, sampling options, shard count, and the
weights' identity: ``model.cache_identity``, the GGUF's sha256 for local models), that every shard
1..N is there once and ran exactly its own cases, and then every record of every record file of
``store.RUN_FILES`` (samples, episode steps, prompts): each must be a record of that shard's cases
(a record for another shard's case is foreign, refused), of a planned sample index, with the seed
its slot derives from the run seed; an episode's sample must name exactly its recorded steps; a
shard whose status is complete must hold every planned sample and every case prompt. Then it
writes one run directory that ``gate``, ``compare``, ``show`` and ``report`` read like any other:
the union of the records, scored again by ``score_run`` with the suite (found at the recorded
path, or given), so results, cases and summary are byte for byte the unsharded run's except the
run's id. Files that commands re-make (report, stress, session summary) are not merged.
Shards never gate on their own: N gates would multiply false alarms; merge, then gate once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import read_run, score_run
from leader_eval.runs.manifest import recorded_suite_paths, suite_from_run_dir
from leader_eval.runs.python_checks import bind_checks, check_versions
from leader_eval.runs.trusted import assemble
from leader_eval.sampling.keys import derive_seed, step_seed, turn_seed
from leader_eval.scoring.aggregate import build_summary
from leader_eval.store.out_dir import check_out_dir
from leader_eval.store.run_store import (
    CASES,
    JUDGEMENTS,
    PROMPTS,
    RESULTS,
    RUN_FILES,
    SAMPLES,
    STEPS,
    SUMMARY,
    TURNS,
    RecordLog,
    RunDir,
    dumps,
    read_json_file,
    read_text,
    run_dir_lock,
    shown,
    write_json_atomic,
    write_lines_atomic,
)
from leader_eval.suite.load import load_suite

if TYPE_CHECKING:
    from leader_eval.runs.evaluate import Run
    from leader_eval.runs.options import RunOptions
    from leader_eval.suite.load import Suite

__all__ = ["merge_runs", "parse_shard", "shard_case_ids", "shard_options"]

#: identity and manifest fields every shard of one run shares
_SAME_IDENTITY = ("suite", "suite_hash", "model_id", "protocol", "run_seed", "teammates")
#: what the manifest's ``model`` says about the weights and the prompt format: equal in every shard
#: (one GGUF path may hold other weights on another CI machine; its sha256 says so)
_SAME_MODEL = ("cache_identity", "chat_template_sha256")


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
    # without --out, ``evaluate.run`` names the directory once the model is resolved (its
    # identity is part of the name) and appends ``__shardIofN`` from the record below
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
    out = Path(options.out) if options.out is not None else None
    return replace(options, case_ids=mine, out=out, extra_manifest={**options.extra_manifest, "shard": record})


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
        model, model0 = s.manifest.get("model") or {}, first.manifest.get("model") or {}
        for key in _SAME_MODEL:
            if model.get(key) != model0.get(key):
                diff.append(f"model weights ({key} {model.get(key)!r} vs {model0.get(key)!r})")
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


def merge_runs(run_dirs: Sequence[str | Path], out: str | Path, *, suite: Suite | str | Path | None = None) -> Run:
    """Merge the shards of one run into ``out`` (a new or empty directory); see the module doc."""

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
    records = _union_records(shards, suite_ids)
    first = shards[0].manifest
    loaded = _suite_for(suite, first, load_suite, shards[0].path)
    if loaded is not None:
        # the suite's Python checks from the trusted definitions in force (code, today), loaded
        # before anything is written: the merge re-scores with them
        loaded = bind_checks(loaded, assemble())
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
    if loaded is not None and loaded.python_checks:
        manifest["python_checks"] = check_versions(loaded)  # the code that scored the merged run
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
        for name, recs in records.items():
            if recs:
                write_lines_atomic(rundir.file(name), (dumps(r) for r in recs))
        if loaded is not None:
            score_run(rundir, loaded)
        else:
            _merge_scored(shards, suite_ids, out, manifest)
    return read_run(out)


# ---------------------------------------------------------------------------------------------
# the records: every shard record validated, then the union


#: how ``merge`` orders the union of each record file (``RUN_FILES`` rows with merge ``union``)
_ORDER: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {
    SAMPLES: lambda r: (r["case_id"], r["index"]),
    STEPS: lambda r: (r["case_id"], r["index"], r["step"]),
    TURNS: lambda r: (r["case_id"], r["index"], r["step"]),
    JUDGEMENTS: lambda r: (r["criterion"], r["case_id"], r["index"]),
    # case prompts by case, then episode step prompts by hash
    PROMPTS: lambda r: (0, r["case_id"]) if "case_id" in r else (1, r["prompt_sha256"]),
}


@dataclass
class _Records:
    """One shard's records of one file, each with its line number (for the error message)."""

    path: Path
    log: RecordLog

    def items(self) -> list[tuple[int, dict[str, Any]]]:
        return [(self.log.lines[k], r) for k, r in self.log.items()]


def _read_records(shard: _Shard, name: str) -> _Records | None:
    rundir = RunDir(shard.path)
    path = rundir.file(name)
    if not os.path.lexists(path):  # a dangling link is refused when opened, never "missing"
        return None
    log = rundir.record_log(name)
    bad = sorted(set(log.bad_lines) | set(log.duplicates))
    if bad:
        why = "a second record for one slot" if bad[0] in log.duplicates else "not a readable record"
        raise ShardError(f"{shown(path)}:{bad[0]}: {why}: merge refuses a shard it cannot read whole")
    return _Records(path, log)


def _union_records(shards: Sequence[_Shard], suite_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Every record file's validated union (``RUN_FILES`` rows whose merge is ``union``)."""
    names = [f.name for f in RUN_FILES.values() if f.merge == "union"]
    unknown = [n for n in names if n not in _ORDER]
    if unknown:  # a new record file must say how it merges before shards can carry it
        raise AssertionError(f"merge does not know how to merge {', '.join(unknown)}")
    union: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in names}
    for shard in shards:
        for name, recs in _ShardCheck(shard, suite_ids).records().items():
            for key, rec in recs:
                seen = union[name].get(key)
                if seen is not None and seen != rec:
                    raise ShardError(f"{shard.name}: {name} record {key!r} differs from another shard's: refused")
                union[name][key] = rec
    return {name: sorted(recs.values(), key=_ORDER[name]) for name, recs in union.items()}


class _ShardCheck:
    """One shard's record files, every record checked against the shard's manifest."""

    def __init__(self, shard: _Shard, suite_ids: Sequence[str]):
        ident = shard.manifest["identity"]
        self.shard = shard
        self.run_seed = int(ident["run_seed"])
        self.planned = {cid: int(spec["samples"]) for cid, spec in ident["cases"].items()}
        unplanned = sorted(cid for cid, n in self.planned.items() if n < 1)
        if unplanned:  # every run samples each of its cases at least once
            raise ShardError(f"{shard.name}: its manifest plans no sample of case {unplanned[0]!r}: refused")
        self.owner = {cid: i for i in range(1, shard.count + 1) for cid in shard_case_ids(suite_ids, i, shard.count)}

    def foreign(self, where: str, cid: str) -> ShardError:
        n = self.shard.count
        owner = f"shard {self.owner[cid]}/{n}'s case" if cid in self.owner else "a case not in the suite"
        return ShardError(f"{where}: foreign record for {owner} {cid!r} in {self.shard.name}: refused")

    def check_slot(self, where: str, rec: Mapping[str, Any]) -> None:
        cid, index = rec["case_id"], rec["index"]
        if cid not in self.planned:
            raise self.foreign(where, cid)
        if index >= self.planned[cid]:
            raise ShardError(f"{where}: sample {cid}#{index} was not planned ({self.planned[cid]} per case): refused")

    def records(self) -> dict[str, list[tuple[str, dict[str, Any]]]]:

        shard = self.shard
        files = {name: _read_records(shard, name) for name in (SAMPLES, STEPS, TURNS, PROMPTS, JUDGEMENTS)}
        judgements = files[JUDGEMENTS]
        if judgements is not None:  # a judge's reply belongs to a sample of this shard's cases
            for line, rec in judgements.items():
                self.check_slot(f"{shown(judgements.path)}:{line}", rec)
        step_prompts: set[str] = set()
        case_prompts: set[str] = set()
        prompts = files[PROMPTS]
        for line, rec in prompts.items() if prompts else []:
            if "case_id" not in rec:
                step_prompts.add(rec["prompt_sha256"])
                continue
            if rec["case_id"] not in self.planned:
                raise self.foreign(f"{shown(prompts.path) if prompts else PROMPTS}:{line}", rec["case_id"])
            case_prompts.add(rec["case_id"])
        episodes: dict[tuple[str, int], list[dict[str, Any]]] = {}
        steps = files[STEPS]
        for line, rec in steps.items() if steps else []:
            where = f"{shown(steps.path) if steps else STEPS}:{line}"
            self.check_slot(where, rec)
            want = step_seed(self.run_seed, rec["case_id"], rec["index"], rec["step"])
            if rec["seed"] != want:
                raise ShardError(f"{where}: step seed {rec['seed']} is not the run's ({want}): refused")
            if "prompt" not in rec and rec["prompt_sha256"] not in step_prompts:
                raise ShardError(f"{where}: the step's prompt {rec['prompt_sha256'][:12]} is not in {PROMPTS}: refused")
            episodes.setdefault((rec["case_id"], rec["index"]), []).append(rec)
        replies: dict[tuple[str, int], list[dict[str, Any]]] = {}
        turns = files[TURNS]
        for line, rec in turns.items() if turns else []:
            where = f"{shown(turns.path) if turns else TURNS}:{line}"
            self.check_slot(where, rec)
            want = turn_seed(self.run_seed, rec["case_id"], rec["index"], rec["step"])
            if rec["seed"] != want:
                raise ShardError(f"{where}: teammate turn seed {rec['seed']} is not the run's ({want}): refused")
            if rec["prompt_sha256"] not in step_prompts:
                raise ShardError(f"{where}: the turn's prompt {rec['prompt_sha256'][:12]} is not in {PROMPTS}: refused")
            replies.setdefault((rec["case_id"], rec["index"]), []).append(rec)
        have: set[tuple[str, int]] = set()
        samples = files[SAMPLES]
        for line, rec in samples.items() if samples else []:
            where = f"{shown(samples.path) if samples else SAMPLES}:{line}"
            self.check_slot(where, rec)
            want = derive_seed(self.run_seed, rec["case_id"], rec["index"])
            if rec["seed"] != want:
                raise ShardError(f"{where}: sample seed {rec['seed']} is not the run's ({want}): refused")
            if str(rec["key"]).startswith("episode:"):
                slot = (rec["case_id"], rec["index"])
                _check_episode(where, rec, episodes.get(slot, []), replies.get(slot, []))
            have.add((rec["case_id"], rec["index"]))
        if shard.manifest.get("status") == "complete":
            lost = [f"{c}#{i}" for c in sorted(self.planned) for i in range(self.planned[c]) if (c, i) not in have]
            if lost:
                what = f"no {SAMPLES}" if samples is None else f"{len(lost)} planned sample(s) missing ({lost[0]}...)"
                raise ShardError(f"{shard.name}: status complete but {what}: refused")
            no_prompt = sorted(set(self.planned) - case_prompts)
            if no_prompt:
                raise ShardError(f"{shard.name}: status complete but no prompt for case {no_prompt[0]!r} in {PROMPTS}")
        return {
            name: [(recs.log.key_of(rec), rec) for _, rec in recs.items()] if recs else []
            for name, recs in files.items()
        }


def _check_episode(
    where: str, sample: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], turns: Sequence[Mapping[str, Any]] = ()
) -> None:
    """An episode's sample names its steps and teammate turns (``episode.episode_sample``): they
    must all be there."""
    ordered = sorted(steps, key=lambda r: r["step"])
    by_step = {r["step"]: r for r in turns}
    h = hashlib.sha256()
    for r in ordered:
        h.update(str(r["key"]).encode() + b"\0")
        t = by_step.get(r["step"])
        if t is not None:
            h.update(b"turn:" + str(t["key"]).encode() + b"\0")
    last = ordered[-1] if ordered else {}
    ended = bool(last.get("end") or (by_step.get(last.get("step")) or {}).get("end"))
    whole = [r["step"] for r in ordered] == list(range(len(ordered))) and ended
    if not whole or sample["key"] != "episode:" + h.hexdigest()[:32]:
        got = f"{len(ordered)} step(s)" if ordered else f"no steps in {STEPS}"
        raise ShardError(
            f"{where}: episode {sample['case_id']}#{sample['index']} does not match its recorded steps ({got}): refused"
        )


def _suite_for(
    suite: Suite | str | Path | None, manifest: Mapping[str, Any], load: Any, shard_dir: Path
) -> Suite | None:
    """The suite to score the merged run with: the given one, else the recorded one (found from
    any working directory: ``runs.manifest.recorded_suite_paths``) if its content still hashes to the
    run's. None: merge the shards' scored records instead."""

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
    """What ``aggregate.build_summary`` needs of a suite when the suite file is not at hand."""

    name: str
    pass_k: tuple[int, ...]


def _merge_scored(shards: Sequence[_Shard], suite_ids: Sequence[str], out: Path, manifest: dict[str, Any]) -> None:
    """Without the suite file: the shards' results and case records, in suite order, summarized.

    Each shard's records must be of its own cases, like its samples (``_union_records``)."""
    records: dict[str, dict[str, Any]] = {}
    results: list[tuple[str, int, str]] = []
    retries = 0
    for s in shards:
        rundir = RunDir(s.path)
        mine = set(s.manifest["identity"]["cases"])
        cases_path = rundir.file(CASES)
        if not os.path.lexists(cases_path):
            raise ShardError(f"{s.name}: not scored (no {CASES}) and the suite file is not at hand: pass --suite")
        case_recs = read_json_file(cases_path, CASES)
        if not isinstance(case_recs, list) or not all(isinstance(r, dict) for r in case_recs):
            raise ShardError(f"{shown(cases_path)}:1: not a list of case records")
        for rec in case_recs:
            if rec.get("case_id") not in mine:
                raise ShardError(f"{shown(cases_path)}:1: foreign record for case {rec.get('case_id')!r}: refused")
            records[rec["case_id"]] = rec
        results_path = rundir.file(RESULTS)
        if os.path.lexists(results_path):
            for lineno, line in enumerate(read_text(results_path, RESULTS).split("\n"), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    key = (rec["case_id"], int(rec["index"]))
                except (ValueError, TypeError, KeyError):
                    raise ShardError(f"{shown(results_path)}:{lineno}: not a readable result record: refused") from None
                if key[0] not in mine:
                    raise ShardError(f"{shown(results_path)}:{lineno}: foreign record for case {key[0]!r}: refused")
                results.append((key[0], key[1], line))
        summary_path = rundir.file(SUMMARY)
        if os.path.lexists(summary_path):
            shard_summary = read_json_file(summary_path, SUMMARY)
            retries += int(shard_summary.get("retries", 0)) if isinstance(shard_summary, dict) else 0
    case_results = [records[cid] for cid in suite_ids if cid in records]
    write_lines_atomic(out / RESULTS, (line for _, _, line in sorted(results, key=lambda r: (r[0], r[1]))))
    write_json_atomic(out / CASES, case_results)
    info = shards[0].manifest["shard"]
    summary = build_summary(
        _SuiteName(manifest["identity"]["suite"], tuple(info.get("pass_k") or ())),
        case_results,
        manifest=manifest,
        samples=RunDir(out).read_samples(),
        prices=manifest.get("prices"),
        token_totals=(
            sum(int(r.get("prompt_tokens") or 0) for r in case_results),
            sum(int(r.get("completion_tokens") or 0) for r in case_results),
        ),
        retries=retries,
    ).to_json()
    write_json_atomic(out / SUMMARY, summary)
