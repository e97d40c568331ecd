"""The public library API the CLI and the pytest plugin are thin shells over."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leader_eval.aggregate import case_results, summarize, usage_summary
from leader_eval.backends import resolve_backend
from leader_eval.backends.base import Backend
from leader_eval.cache import SampleCache
from leader_eval.checks.episode import score_episodes
from leader_eval.error_rule import first_sampler_error
from leader_eval.errors import LeaderEvalError, RunDirError
from leader_eval.runner import (
    RunOptions,
    SamplingStats,
    apply_recorded,
    build_manifest,
    check_out_dir,
    check_protocol,
    check_run_options,
    check_run_size,
    default_label,
    default_out_dir,
    new_run_seed,
    open_run_dir,
    plan_cases,
    resolve_protocol,
    sample_planned,
    select_cases,
    suite_from_run_dir,
)
from leader_eval.score import ModelInfo, SampleScore, score_samples
from leader_eval.store import (
    CASES,
    LOCK,
    RESULTS,
    SUMMARY,
    RunDir,
    dumps,
    lock_holder,
    read_json_file,
    run_dir_lock,
    write_json_atomic,
    write_lines_atomic,
)
from leader_eval.suite import Suite, load_suite
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


def run(
    suite: Suite | str | Path,
    options: RunOptions | None = None,
    *,
    backend: Backend | None = None,
    on_sample: Callable[[Sample], None] | None = None,
) -> Run:
    """Load, render, sample, score, aggregate and record one suite on one model."""
    options = options or RunOptions()
    check_run_options(options)
    if options.out is not None:
        check_out_dir(Path(options.out))  # before a model is loaded or a server asked
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    cases = select_cases(suite, tags=options.tags, case_ids=options.case_ids, limit=options.limit)
    check_run_size(suite, cases, options)  # before a model is loaded or a sample slot allocated
    # a protocol the parser does not know is refused before any backend is built or asked
    check_protocol(options.protocol or suite.protocol, where="--protocol" if options.protocol else str(suite.path))
    backend = backend or resolve_backend(
        options.model, context_length=options.context_length, **options.backend_options
    )
    recorded = backend.recorded() if hasattr(backend, "recorded") else None
    protocol = resolve_protocol(options.protocol, suite, backend)
    # Render every case first: a suite error stops the run before any directory or sample exists.
    planned = plan_cases(suite, cases, backend, options)
    run_seed, label = run_seed_and_label(suite, options, backend)
    if recorded is not None:
        planned = apply_recorded(planned, recorded, options, run_seed, backend.has_sample)  # type: ignore[attr-defined]
    out = options.out or default_out_dir(suite, label, run_seed)
    if recorded is not None and options.out is None:
        out = Path(f"{backend.run_path}.replay")  # type: ignore[attr-defined]  # never rescore over the evidence
    manifest = build_manifest(suite, backend, planned, run_seed, protocol, options)
    located = suite_from_run_dir(suite.path, out)
    if located is not None:  # gate --update-golden finds the suite from any working directory
        manifest["suite"]["from_run_dir"] = located
    # One writer per run directory: a second run into it exits 2 naming this process.
    with run_dir_lock(out):
        rundir = open_run_dir(out, manifest)
        try:
            stats = asyncio.run(_sample_and_close(rundir, backend, planned, run_seed, options, on_sample))
            result = score_run(rundir, suite)
        except BaseException as exc:
            _mark_unfinished(rundir, "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed", exc)
            raise
        result.stats = stats
        manifest = rundir.read_manifest()
        manifest["status"] = "capped" if stats.capped else "complete"
        manifest["sampling_stats"] = stats.__dict__
        rundir.write_manifest(manifest)
    result.manifest = manifest
    return result


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
) -> SamplingStats:
    # replay serves its own record; caching it again would only duplicate it
    use_cache = options.cache and not hasattr(backend, "recorded")
    try:
        return await sample_planned(
            rundir,
            backend,
            planned,
            run_seed,
            concurrency=options.concurrency,
            progress=options.progress,
            on_sample=on_sample,
            cache=SampleCache() if use_cache else None,
            max_samples=options.max_samples,
        )
    finally:
        await backend.aclose()


def run_seed_and_label(suite: Suite, options: RunOptions, backend: Backend) -> tuple[int, str]:
    """The run seed and golden label ``run`` uses for ``options`` on ``backend`` (the pytest
    plugin derives its run directory from the same two values)."""
    recorded = backend.recorded() if hasattr(backend, "recorded") else None
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


def score_run(rundir: RunDir, suite: Suite) -> Run:
    """Score a run directory's samples with the current checks and write results and summary."""
    manifest = rundir.read_manifest()
    samples = rundir.read_samples()
    prompts = rundir.read_prompts()
    model = ModelInfo.from_manifest(manifest.get("model", {}))
    scores = score_samples(suite, samples, prompts, manifest["identity"]["protocol"], model)
    scores = score_episodes(suite, rundir.path, scores, manifest["identity"]["protocol"], model)
    selected = set(manifest["identity"]["cases"])
    cases = [c for c in suite.cases if c.id in selected]
    results = case_results(cases, scores)
    tokens: dict[str, list[int]] = {}
    for smp in samples:
        t = tokens.setdefault(smp.case_id, [0, 0])
        t[0] += smp.prompt_tokens
        t[1] += smp.completion_tokens
    for r in results:
        r["prompt_tokens"], r["completion_tokens"] = tokens.get(r["case_id"], [0, 0])
    summary = summarize(suite, results)
    summary["run_id"] = manifest.get("run_id")
    summary["model_id"] = manifest["identity"]["model_id"]
    summary["label"] = manifest.get("label")
    summary["tokens"] = {
        "prompt": sum(s.prompt_tokens for s in samples),
        "completion": sum(s.completion_tokens for s in samples),
        "per_case": {r["case_id"]: [r["prompt_tokens"], r["completion_tokens"]] for r in results},
    }
    # retries the backends needed (429/5xx/timeouts); a sample that still failed counts in n_errors
    summary["retries"] = int(sum(s.timings.get("retries", 0) for s in samples))
    # latency and token quantiles, and the cost when the command or the suite gives prices
    summary["usage"] = usage_summary(samples, manifest.get("prices") or getattr(suite, "prices", None))
    first_error = first_sampler_error(samples)
    if first_error is not None:  # the cause of a failed run, on screen (error_rule.first_sampler_error)
        summary["first_error"] = first_error
    write_lines_atomic(rundir.path / RESULTS, (dumps(s.to_dict()) for s in scores))
    write_json_atomic(rundir.path / CASES, results)
    write_json_atomic(rundir.path / SUMMARY, summary)
    return Run(rundir.path, manifest, samples, scores, results, summary)


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
    if results_path.exists():
        bad: list[int] = []
        for lineno, line in enumerate(_read_lines(results_path), 1):
            if not line.strip():
                continue
            try:
                scores.append(SampleScore.from_dict(json.loads(line)))
            except (ValueError, TypeError, KeyError, AttributeError):
                bad.append(lineno)
        if bad:
            rundir.unreadable[RESULTS] = bad
    cases = _read_json_file(rundir, CASES, list, [])
    summary = _read_json_file(rundir, SUMMARY, dict, {})
    if not samples and not scores:
        raise RunDirError(f"{path}: run directory holds no samples")
    return Run(rundir.path, manifest, samples, scores, cases, summary, unreadable=dict(rundir.unreadable))


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise RunDirError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read_json_file(rundir: RunDir, name: str, shape: type, default: Any) -> Any:
    p = rundir.path / name
    if not p.exists():
        return default
    data = read_json_file(p, "JSON")
    if not isinstance(data, shape):
        raise RunDirError(f"{p}:1: expected a JSON {'list' if shape is list else 'object'}, got {type(data).__name__}")
    return data
