"""A model matrix: one suite sampled on several models (or one model at several settings) with
paired seeds, one run directory per entry, and one comparison across them.

Entries come from ``--model`` repeated (``runs.model_spec.model_entries``); an entry may carry its
own options (``'gguf:m.gguf --temperature 0.2'``), so one GGUF at three temperatures is three
entries. Every entry samples with the same run seed, so case ``c``'s sample ``i`` has the same
seed on every model and the comparison pairs like with like. Labels name the run directories:
an entry's ``--label``, else the model's default label; entries whose labels would collide
(one model at several settings) get their own settings appended (``smollm2-temperature0.2``).
The comparison is ``compare_runs`` over the runs in the order given: the first entry is the
baseline each other entry is compared with, and with more than two entries whose labels are
ordered checkpoints the report recommends one (``decide.checkpoints``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from leader_eval.decide.compare import Comparison, compare_runs
from leader_eval.errors import LeaderEvalError
from leader_eval.runs import evaluate
from leader_eval.runs.evaluate import Run
from leader_eval.runs.model_spec import ModelEntry
from leader_eval.runs.options import run_options
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import replayable
from leader_eval.sampling.keys import new_run_seed
from leader_eval.store.names import default_label
from leader_eval.suite.load import Suite

#: at most this many entries in one matrix (each loads a model or opens a server)
MAX_ENTRIES = 32
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class MatrixResult:
    labels: list[str]
    runs: list[Run]
    comparison: Comparison


def matrix_labels(entries: Sequence[ModelEntry], model_labels: Sequence[str]) -> list[str]:
    """Each entry's run label: its own ``--label``, else its model's label with the entry's own
    settings appended where two entries would share one; a repeated label is an error."""
    base = [str(e.own.get("label") or m) for e, m in zip(entries, model_labels, strict=True)]
    out = []
    for entry, label in zip(entries, base, strict=True):
        if base.count(label) > 1 and "label" not in entry.own:
            settings = "-".join(f"{k.replace('_', '-')}{v}" for k, v in sorted(entry.own.items()))
            label = _UNSAFE.sub("-", f"{label}-{settings}" if settings else label)[:100].strip("-.")
        out.append(label)
    repeated = sorted({label for label in out if out.count(label) > 1})
    if repeated:
        raise LeaderEvalError(
            f"--model: two entries would write runs labelled {repeated[0]!r}: give each its own settings "
            "or --label (e.g. --model 'SPEC --label a')"
        )
    return out


def _paired_seed(suite: Suite, given: int | None, backends: Sequence[Any]) -> int:
    """The one run seed of every entry that samples: ``--seed``, else the suite's, else the seed
    the replayed runs recorded (when they agree, so new samples pair with them), else a fresh one."""
    if given is not None:
        return given
    if suite.sampling.get("seed") is not None:
        return int(suite.sampling["seed"])
    recorded = set()
    for backend in backends:
        replay = replayable(backend)
        found = replay.recorded() if replay is not None else None
        if found is not None:
            recorded.add(int(found["identity"]["run_seed"]))
    return recorded.pop() if len(recorded) == 1 else new_run_seed()


def run_matrix(
    suite: Suite,
    entries: Sequence[ModelEntry],
    *,
    extra: dict[str, Any],
    out: Path | None = None,
    alpha: float = 0.05,
    on_run: Callable[[str, Run], None] | None = None,
) -> MatrixResult:
    """Sample ``suite`` on every entry (paired seeds) and compare the runs.

    ``extra``: the ``RunOptions`` fields that are not sampling options (case selection, progress,
    trusted names); ``out``: a folder for the run directories (``OUT/<label>``), else each goes
    where ``leader-eval run`` would put it. Every backend is built before anything is sampled, so
    a bad entry is an error with nothing written."""
    if len(entries) < 2:
        raise LeaderEvalError("a model matrix needs at least two --model entries")
    if len(entries) > MAX_ENTRIES:
        raise LeaderEvalError(f"--model: {len(entries)} entries; a matrix takes at most {MAX_ENTRIES}")
    if any("seed" in e.own for e in entries):
        raise LeaderEvalError(
            "--model: a matrix pairs its models by one seed: give --seed once for all, not inside an entry"
        )
    if any("max_error_rate" in e.own for e in entries):
        raise LeaderEvalError(
            "--model: the error rule judges every model of a matrix alike: give --max-error-rate once "
            "for all, not inside an entry"
        )
    options = [run_options(e.values, **extra) for e in entries]
    backends: dict[tuple[Any, ...], Any] = {}
    built = []
    for o in options:
        key = (o.model, o.context_length, tuple(sorted((k, repr(v)) for k, v in o.backend_options.items())))
        if key not in backends:  # one model at several settings is loaded once
            backends[key] = resolve_backend(o.model, context_length=o.context_length, **o.backend_options)
        built.append(backends[key])
    labels = matrix_labels(entries, [default_label(b.model_id) for b in built])
    seed = _paired_seed(suite, options[0].seed, built)
    runs = []
    for label, o, backend in zip(labels, options, built, strict=True):
        # a replay samples nothing: it keeps the seed it recorded
        own_seed = None if replayable(backend) is not None else seed
        o = replace(o, seed=own_seed, label=label, out=(out / label) if out is not None else None)
        run = evaluate.run(suite, o, backend=backend)
        if on_run is not None:
            on_run(label, run)
        runs.append(run)
    ok = [any(c.get("n_scored") for c in r.cases) for r in runs]
    scored = [r for r, good in zip(runs, ok, strict=True) if good]
    if len(scored) < 2:
        unscored = ", ".join(label for label, good in zip(labels, ok, strict=True) if not good)
        raise LeaderEvalError(
            f"model matrix: no comparison: {unscored} scored no case (every sample a sampler error?); "
            "each run's directory keeps what was recorded"
        )
    # a model whose every sample errored is failed by the error rule (the caller's); the others
    # are still compared
    comparison = compare_runs(scored, alpha=alpha)
    return MatrixResult([label for label, good in zip(labels, ok, strict=True) if good], scored, comparison)
