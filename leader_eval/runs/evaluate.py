"""The public library API the CLI and the pytest plugin are thin shells over."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError, RunDirError
from leader_eval.protocols import check_protocol
from leader_eval.runs import event_loop
from leader_eval.runs.collector import long_lived
from leader_eval.runs.export import CASE_COLUMNS, SAMPLE_COLUMNS, case_rows, columns_of, sample_rows, to_pandas
from leader_eval.runs.judging import attach as attach_judgements
from leader_eval.runs.judging import check_judges, judge_run, judge_summary
from leader_eval.runs.live_scores import LiveScores
from leader_eval.runs.manifest import build_manifest, suite_from_run_dir
from leader_eval.runs.options import RunOptions, check_run_options
from leader_eval.runs.python_checks import bind_checks, changed_checks, check_versions
from leader_eval.runs.teammates import check_roles, resolve_teammates, teammate_identity
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import Backend, replayable
from leader_eval.sampling.keys import backend_model_key, new_run_seed
from leader_eval.sampling.plan import (
    apply_recorded,
    check_run_size,
    plan_cases,
    resolve_protocol,
    select_cases,
)
from leader_eval.sampling.runner import sample_planned
from leader_eval.sampling.slots import SamplingStats
from leader_eval.sampling.teammate import Teammate
from leader_eval.scoring.aggregate import build_summary, case_result, case_results
from leader_eval.scoring.episode import score_episodes
from leader_eval.scoring.scorer import ModelInfo, SampleScore, score_samples
from leader_eval.store.cache import SampleCache, cache_enabled, check_cache_dir, default_cache_dir
from leader_eval.store.names import default_label, default_out_dir
from leader_eval.store.out_dir import check_out_dir, open_run_dir
from leader_eval.store.run_store import (
    CASES,
    LOCK,
    RESULTS,
    STEPS,
    SUMMARY,
    RunDir,
    check_run_dir,
    encode_capped,
    loads_line,
    lock_holder,
    read_json_file,
    read_text,
    run_dir_lock,
    write_json_atomic,
    write_lines_atomic,
)
from leader_eval.suite.load import Case, Suite, load_suite
from leader_eval.types import Sample


@dataclass
class Run:
    """A recorded run, as read back from its directory."""

    path: Path
    manifest: dict[str, Any]
    samples: list[Sample]
    scores: list[SampleScore]
    cases: list[dict[str, Any]]
    summary: dict[str, Any]
    stats: SamplingStats | None = None
    #: file name -> 1-based numbers of lines that could not be read and were skipped
    unreadable: dict[str, list[int]] = field(default_factory=dict)
    #: the scores are the records ``results.jsonl`` holds whole (just scored, no field cut to its
    #: cap): a reader may use them instead of reading the directory back (``read_run``)
    stored: bool = False

    def to_pandas(self) -> Any:
        """One row per sample, the columns of docs/export.md (needs pandas: ``leader-eval[data]``)."""
        rows = sample_rows(self.manifest, self.samples, self.scores, self.cases)
        return to_pandas(rows, columns_of(rows, SAMPLE_COLUMNS))

    def cases_to_pandas(self) -> Any:
        """One row per case (``cases.json``), the columns of docs/export.md."""
        rows = case_rows(self.manifest, self.cases)
        return to_pandas(rows, columns_of(rows, CASE_COLUMNS))


def planned_shortfall(run: Run) -> str | None:
    """Why ``run`` lacks planned samples, or None when every case has them all.

    Planned (docs/design-0.3.md section 2) is the manifest's samples per case: ``--samples`` (or
    the suite's) for a plain run; for an adaptive run the samples its stopping rule asked for at
    its last look (each look rewrites the manifest). A sample that scored or errored counts; a
    missing record, an unreadable line or an episode whose steps are gone does not. A run capped
    by ``--max-samples`` says so in its status and never gates green either."""
    # what the gate judges (the case records) and, where the run has them, the scored records
    # behind them: the smaller count decides (a pytest session's run carries case records only)
    counted = {str(c.get("case_id")): c.get("n_samples") for c in run.cases if isinstance(c, dict)}
    have: dict[str, set[int]] = {}
    for s in run.scores:
        have.setdefault(s.case_id, set()).add(s.index)
    short = []
    for cid, spec in sorted((run.manifest["identity"].get("cases") or {}).items()):
        n = int(spec.get("samples", 0)) if isinstance(spec, dict) else 0
        record = counted.get(cid)
        from_cases = int(record) if isinstance(record, int) and not isinstance(record, bool) else 0
        from_scores = sum(1 for i in have.get(cid, ()) if i < n)
        got = min(from_cases, from_scores) if run.cases and run.scores else (from_cases if run.cases else from_scores)
        if got < n or n < 1:  # every plan samples a case at least once: 0 planned is no plan
            short.append(f"{cid}: {got} of {n}")
    if not short:
        return None
    shown = ", ".join(short[:3]) + (", ..." if len(short) > 3 else "")
    return (
        f"{len(short)} case(s) lack planned samples ({shown} scored or errored): "
        "a run missing a planned sample cannot pass the gate"
    )


def run(
    suite: Suite | str | Path,
    options: RunOptions | None = None,
    *,
    backend: Backend | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    teammates: Mapping[str, Backend] | None = None,
) -> Run:
    """Load, render, sample, score, aggregate and record one suite on one model.

    ``teammates``: backends by model role for the episodes' simulated teammates, from the
    caller's own code (like ``backend``); a role not given is resolved from ``options.trusted``."""
    options = options or RunOptions()
    check_run_options(options)
    event_loop.loop_factory()  # a bad LEADER_EVAL_EVENT_LOOP is an error before anything is read
    with _long_lived_frozen() as settle:
        return _run(suite, options, backend, on_sample, settle, teammates)


def _run(
    suite: Suite | str | Path,
    options: RunOptions,
    backend: Backend | None,
    on_sample: Callable[[Sample], None] | None,
    settle: Callable[[], None],
    given_teammates: Mapping[str, Backend] | None = None,
) -> Run:
    if options.out is not None:
        check_out_dir(Path(options.out))  # before a model is loaded or a server asked
    if options.cache and cache_enabled():
        check_cache_dir(default_cache_dir())  # no symlink or FIFO among its files, before anything
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    # the suite's Python checks, imported from trusted configuration: a missing one is a one-line
    # error before any model loads (runs/python_checks.py)
    suite = bind_checks(suite, options.trusted)
    cases = select_cases(suite, tags=options.tags, case_ids=options.case_ids, limit=options.limit)
    check_run_size(suite, cases, options)  # before a model is loaded or a sample slot allocated
    # a protocol the parser does not know is refused before any backend is built or asked
    check_protocol(options.protocol or suite.protocol, where="--protocol" if options.protocol else str(suite.path))
    replaying = replayable(backend) is not None if backend is not None else options.model.startswith("replay:")
    if not replaying:  # an undefined teammate role: one line before any model loads
        check_roles(cases, options.trusted, given_teammates)
    check_judges(suite, options.trusted)  # a judge role the trusted configuration lacks: before any model
    backend = backend or resolve_backend(
        options.model, context_length=options.context_length, **options.backend_options
    )
    replay = replayable(backend)
    recorded = replay.recorded() if replay is not None else None
    protocol = resolve_protocol(options.protocol, suite, backend)
    # Render every case first: a suite error stops the run before any directory or sample exists.
    planned = plan_cases(suite, cases, backend, options)
    run_seed, label = run_seed_and_label(suite, options, backend)
    if replay is not None and recorded is not None:
        planned = apply_recorded(planned, recorded, options, run_seed, replay.has_sample)
    out = options.out or default_out_dir(
        suite, label, run_seed, model=backend_model_key(backend), suffix=_shard_suffix(options)
    )
    if replay is not None and options.out is None:
        out = Path(f"{replay.run_path}.replay")  # never rescore over the evidence
    teammates = resolve_teammates(cases, options, backend, replay=recorded, given=given_teammates)
    manifest = build_manifest(suite, backend, planned, run_seed, protocol, options)
    if teammates:  # the teammates' models are part of what the run measured: a resume must match
        manifest["identity"]["teammates"] = teammate_identity(teammates)
    if suite.python_checks:  # which code judged: a replay with changed checks records its own
        manifest["python_checks"] = check_versions(suite)
        changed = changed_checks(recorded, manifest["python_checks"]) if recorded is not None else {}
        if changed:  # the recorded run was judged by other code: said beside the new scores
            manifest["python_checks_changed"] = changed
    check_run_dir(Path(out))  # no symlink or special file inside, before even the lock file is made
    located = suite_from_run_dir(suite.path, out)
    if located is not None:  # gate --update-golden finds the suite from any working directory
        manifest["suite"]["from_run_dir"] = located
    settle()  # the suite and its rendered plan live until the run ends: out of the collector's passes
    # One writer per run directory: a second run into it exits 2 naming this process.
    with run_dir_lock(out):
        rundir = open_run_dir(out, manifest)
        live = LiveScores(suite, rundir.path)  # scores each sample while the others are in flight
        try:
            stats = event_loop.run(
                _sample_and_close(rundir, backend, planned, run_seed, options, on_sample, live, teammates)
            )
            result = score_run(rundir, suite, live=live)
            if suite.judges:  # judged after sampling, from the scored calls; recorded, resumable
                use_cache = options.cache and cache_enabled() and replay is None
                judge_run(
                    rundir,
                    suite,
                    result.samples,
                    result.scores,
                    options.trusted,
                    replay_from=replay.run_path if replay is not None else None,
                    cache=SampleCache() if use_cache else None,
                )
                result = score_run(rundir, suite)
        except BaseException as exc:
            _mark_unfinished(rundir, "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed", exc)
            raise
        result.stats = stats
        manifest = result.manifest  # as score_run read it back: nothing has written it since
        manifest["status"] = "capped" if stats.capped else "complete"
        manifest["sampling_stats"] = stats.__dict__
        rundir.write_manifest(manifest)
    result.manifest = manifest
    return result


def _then(first: Callable[[Sample], None] | None, then: Callable[[Sample], None]) -> Callable[[Sample], None]:
    """The caller's per-sample callback (called first, when it was before), then ``then``."""
    if first is None:
        return then

    def both(sample: Sample) -> None:
        first(sample)
        then(sample)

    return both


@contextlib.contextmanager
def _long_lived_frozen() -> Iterator[Callable[[], None]]:
    """``collector.long_lived`` for a run: the objects alive when it starts (modules) and those
    made before its first request (the suite, its rendered plan; ``settle()`` once they are
    made) stay out of the collector's passes until the run ends, and ``_exit_hook`` says whether
    it ended well."""
    _exit_hook[:] = [False]  # until this run ends well
    with long_lived(building=True) as settle:
        yield settle
    _exit_hook[:] = [True]


#: whether the last run ended well: only then does the process skip its last collections
_exit_hook: list[bool] = []


def _freeze_at_exit() -> None:
    """At interpreter exit, before its last collections, freeze what is still alive when the last
    run ended well: those passes walk every object left (a 2,000-sample run's records and the
    modules: ~0.1 s of CPU after the work is done), to reclaim memory the process gives back to
    the system anyway (what the CLI does after a run, for its own exit). Not after a run that
    raised: what it left mid-flight (an embedded model between two samples) is finalized by those
    passes while the modules it needs still exist. Left alone where a caller tunes the collector
    itself (frozen objects, collection disabled) by then."""
    if _exit_hook == [True] and gc.isenabled() and not gc.get_freeze_count():
        gc.freeze()


atexit.register(_freeze_at_exit)


def _shard_suffix(options: RunOptions) -> str:
    """``__shardIofN`` for a shard run (``merge.shard_options``), so shards never share a directory."""
    shard = options.extra_manifest.get("shard") or {}
    return f"__shard{shard['index']}of{shard['count']}" if shard else ""


def _mark_unfinished(rundir: RunDir, status: str, exc: BaseException) -> None:
    """Say in the manifest that the run stopped (never leave ``running`` behind); best effort, as
    the cause may be the very disk that refuses this write. Re-running the command resumes."""
    try:
        manifest = rundir.read_manifest()
        manifest["status"] = status
        manifest["stopped_by"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        rundir.write_manifest(manifest)
    except (OSError, LeaderEvalError):
        pass


async def _sample_and_close(
    rundir: RunDir,
    backend: Backend,
    planned: Any,
    run_seed: int,
    options: RunOptions,
    on_sample: Callable[[Sample], None] | None,
    live: LiveScores,
    teammates: Mapping[str, Teammate] | None = None,
) -> SamplingStats:
    # replay serves its own record; caching it again would only duplicate it
    use_cache = options.cache and replayable(backend) is None
    scoring = asyncio.create_task(live.drain())  # scores while the other requests are in flight
    try:
        stats = await sample_planned(
            rundir,
            backend,
            planned,
            run_seed,
            concurrency=options.concurrency,
            progress=options.progress,
            on_sample=_then(on_sample, live.on_sample),
            cache=SampleCache() if use_cache else None,
            max_samples=options.max_samples,
            teammates=teammates,
        )
    except BaseException:
        scoring.cancel()  # the records are on disk: score_run derives everything again on resume
        raise
    finally:
        try:
            await backend.aclose()
        finally:
            for mate in {id(t.backend): t.backend for t in (teammates or {}).values()}.values():
                if mate is not backend:
                    await mate.aclose()
    live.close()
    await scoring  # the last samples' share
    return stats


def run_seed_and_label(suite: Suite, options: RunOptions, backend: Backend) -> tuple[int, str]:
    """The run seed and golden label ``run`` uses for ``options`` on ``backend`` (the pytest
    plugin derives its run directory from the same two values)."""
    replay = replayable(backend)
    recorded = replay.recorded() if replay is not None else None
    return _run_seed(options, suite, recorded), options.label or default_label(backend.model_id)


def _run_seed(options: RunOptions, suite: Suite, recorded: dict[str, Any] | None) -> int:
    if recorded is not None:  # replay addresses the recorded samples by the recorded seeds
        return int(recorded["identity"]["run_seed"])
    if options.seed is not None:
        return options.seed
    if suite.sampling.get("seed") is not None:
        return int(suite.sampling["seed"])
    if options.out is not None and RunDir(options.out).exists():
        # re-running the same command into the same directory resumes it
        return int(RunDir(options.out).read_manifest()["identity"]["run_seed"])
    return new_run_seed()


def score_run(rundir: RunDir, suite: Suite, *, live: LiveScores | None = None) -> Run:
    """Score a run directory's samples with the current checks and write results and summary.

    ``live``: the scores ``evaluate.run`` computed while sampling; each is reused where its sample
    reads back from disk as it was scored (``live_scores``), the rest are scored here."""
    manifest = rundir.read_manifest()
    samples = rundir.read_samples()
    prompts = rundir.read_prompts(shared=True)
    protocol = manifest["identity"]["protocol"]
    model = ModelInfo.from_manifest(manifest.get("model", {}))
    # id of a score scored while sampling -> its results line, and whether it holds the score whole
    lines: dict[int, tuple[str, bool]] = {}
    if live is not None and live.reusable(manifest, prompts):
        known: list[SampleScore] = []
        fresh: list[Sample] = []
        for smp in samples:
            hit = live.score_of(smp)
            if hit is None:
                fresh.append(smp)
            else:
                known.append(hit[0])
                lines[id(hit[0])] = (hit[1], hit[2])
        scores = score_samples(suite, fresh, prompts, protocol, model)
        if known:  # both in (case, index) order, as score_samples orders all of them
            scores = sorted(known + scores, key=lambda s: (s.case_id, s.index))
    else:
        live = None
        scores = score_samples(suite, samples, prompts, protocol, model)
    if any(c.episode is not None for c in suite.cases):
        steps = rundir.read_steps()
        turns = rundir.read_turns()
        scores = score_episodes(suite, rundir.path, scores, protocol, model, steps=steps, turns=turns)
    judgements = rundir.read_judgements() if suite.judges else {}
    if suite.judges:
        scores = attach_judgements(suite, scores, judgements)
    selected = set(manifest["identity"]["cases"])
    cases = [c for c in suite.cases if c.id in selected]
    results = _case_results(cases, scores, live)
    tokens: dict[str, list[int]] = {}
    for smp in samples:
        t = tokens.setdefault(smp.case_id, [0, 0])
        t[0] += smp.prompt_tokens
        t[1] += smp.completion_tokens
    for r in results:
        r["prompt_tokens"], r["completion_tokens"] = tokens.get(r["case_id"], [0, 0])
    summary = build_summary(
        suite,
        results,
        manifest=manifest,
        samples=samples,
        prices=manifest.get("prices") or getattr(suite, "prices", None),
        unreadable=rundir.unreadable,
    ).to_json()
    judge_summary(suite, judgements, summary)  # each criterion's judge, calibration, gated or why not
    # every field bounded (the raw output stays whole in samples.jsonl): a model that writes
    # megabytes of calls must not make results.jsonl and the report many times its size
    encoded = [lines.get(id(s)) or encode_capped(s.to_dict()) for s in scores]
    write_lines_atomic(rundir.path / RESULTS, (line for line, _ in encoded))
    write_json_atomic(rundir.path / CASES, results)
    write_json_atomic(rundir.path / SUMMARY, summary)
    stored = all(whole for _, whole in encoded)
    return Run(
        rundir.path, manifest, samples, scores, results, summary, unreadable=dict(rundir.unreadable), stored=stored
    )


def _case_results(
    cases: Sequence[Case], scores: Sequence[SampleScore], live: LiveScores | None
) -> list[dict[str, Any]]:
    """``aggregate.case_results``, reusing each case record aggregated while sampling over the
    very scores the case has now."""
    if live is None or not live.case_records:
        return case_results(cases, scores)
    by_case: dict[str, list[SampleScore]] = {}
    for s in scores:
        by_case.setdefault(s.case_id, []).append(s)
    out = []
    for case in cases:
        mine = by_case.get(case.id, [])
        out.append(live.case_record(case, mine) or case_result(case, mine))
    return out


def read_run(path: str | Path) -> Run:
    """Read a run directory (results as last scored).

    Unreadable lines of its JSONL files are skipped and listed in ``Run.unreadable`` (file name ->
    line numbers); an unreadable or wrong-shape manifest, cases or summary file is a one-line
    ``RunDirError``.
    """
    rundir = RunDir(Path(path))
    if not rundir.path.is_dir():
        raise RunDirError(f"{path}: not a run directory")
    manifest = rundir.read_manifest()
    if manifest.get("status") == "running" and lock_holder(rundir.path / LOCK) is None:
        # no process holds the run: it died without a word (SIGKILL, a full disk refused the update)
        manifest["status"] = "interrupted"
    samples = rundir.read_samples()
    scores: list[SampleScore] = []
    results_path = rundir.path / RESULTS
    if os.path.lexists(results_path):
        bad: list[int] = []
        for lineno, line in enumerate(_read_lines(results_path), 1):
            if not line.strip():
                continue
            try:
                rec = loads_line(line)
                rec.pop("cut", None)  # which fields were cut to their cap (cap_fields)
                scores.append(SampleScore.from_dict(rec))
            except (ValueError, TypeError, KeyError, AttributeError):
                bad.append(lineno)
        if bad:
            rundir.unreadable[RESULTS] = bad
    cases = _read_json_file(rundir, CASES, list, [])
    summary = _read_json_file(rundir, SUMMARY, dict, {})
    counted = summary.get("unreadable")
    steps_bad = counted.get(STEPS) if isinstance(counted, dict) else None
    if isinstance(steps_bad, list) and steps_bad and all(isinstance(n, int) for n in steps_bad):
        rundir.unreadable[STEPS] = list(steps_bad)  # steps are read when scored, and counted then
    if not samples and not scores:
        raise RunDirError(f"{path}: run directory holds no samples")
    return Run(rundir.path, manifest, samples, scores, cases, summary, unreadable=dict(rundir.unreadable))


def _read_lines(path: Path) -> list[str]:
    # JSON Lines end at "\n" only: str.splitlines would also cut at U+2028, U+0085 and the
    # like, which JSON writes unescaped, so a model output holding one made its record unreadable
    return read_text(path, path.name).split("\n")


def _read_json_file(rundir: RunDir, name: str, shape: type, default: Any) -> Any:
    p = rundir.file(name)
    if not os.path.lexists(p):
        return default
    data = read_json_file(p, "JSON")
    if not isinstance(data, shape):
        raise RunDirError(f"{p}:1: expected a JSON {'list' if shape is list else 'object'}, got {type(data).__name__}")
    return data
