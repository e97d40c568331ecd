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

Gating a matrix (the pytest plugin's ``--le-model`` repeated): every entry's run is gated against
the one baseline golden, and the entries' gates are one family (``gate_family``), so an
unchanged matrix raises a false alarm in at most ``alpha`` of sessions, not N x ``alpha``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from leader_eval.decide.compare import Comparison, compare_runs
from leader_eval.decide.gate import GateResult
from leader_eval.errors import LeaderEvalError
from leader_eval.runs import evaluate
from leader_eval.runs.evaluate import Run
from leader_eval.runs.model_spec import ModelEntry
from leader_eval.runs.options import run_options
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import replayable
from leader_eval.sampling.keys import new_run_seed
from leader_eval.stats.core import holm_adjusted, holm_alphas, tarone_family
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


def paired_seed(suite: Suite, given: int | None, backends: Sequence[Any]) -> int:
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
    seed = paired_seed(suite, options[0].seed, built)
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


@dataclass(frozen=True)
class FamilyDecision:
    """One entry's gate within a matrix's family of gates (``gate_family``)."""

    label: str
    #: the gate's p-value: its smallest Holm-adjusted p (within the gate's metrics) over the tested
    #: metrics it failed at ``alpha`` alone; 1 when it failed none (nothing to reject)
    p_gate: float
    #: the level Holm across the family's gates gives this one (``stats.holm_alphas``)
    level: float
    #: the gate still fails on a credible regression after the family's adjustment
    regressed: bool
    #: the metrics that failed at ``alpha`` alone but not at the family's level (now ``pass``)
    withdrawn: tuple[str, ...] = ()


def _within_gate(result: GateResult) -> dict[str, float]:
    """Holm-adjusted p-values over the gate's tested metrics that have one (a paired test), the
    family cut as the gate cut it (Tarone at the gate's alpha: a metric whose test cannot reach
    its share takes none, and could not have failed)."""
    rows = [r for r in result.rows if r.kind == "test" and r.verdict != "info" and r.p_value is not None]
    family = set(tarone_family({r.metric: r.min_p for r in rows}, result.alpha))
    return holm_adjusted({r.metric: float(r.p_value) for r in rows if r.metric in family and r.p_value is not None})


def gate_family(results: dict[str, GateResult], alpha: float = 0.05) -> dict[str, FamilyDecision]:
    """Hold the false alarms of several gates against one baseline at ``alpha`` (Holm across gates).

    Each gate (an entry of the matrix, keyed by label) was decided at ``alpha`` on its own, its
    metrics one Holm-Tarone family. Its p-value is the smallest Holm-adjusted p (``holm_adjusted``
    over the gate's Tarone family at ``alpha``) of a metric it failed; the gates' p-values are one Holm family
    (``holm_alphas``, the decisions' one implementation), and a failed metric stands only when its
    adjusted p is below the level its gate gets. Withdrawn metrics become ``pass`` (their
    explanation says why) and a gate left with no failure passes. A metric failed without a
    p-value (an unpaired interval test, a golden without per-case values) cannot be adjusted and
    keeps failing: the adjustment only ever withdraws what a p-value shows is within the family's
    noise. Floors, ceilings, budgets, errors and every non-``fail`` status are contracts, not
    tests, and are left as they are. ``results`` is changed in place."""
    adjusted = {label: _within_gate(r) for label, r in results.items()}
    failed = {
        label: [row for row in r.rows if row.kind == "test" and row.verdict == "fail"] for label, r in results.items()
    }
    p_gate = {
        label: min([adjusted[label][row.metric] for row in failed[label] if row.metric in adjusted[label]] + [1.0])
        for label in results
    }
    levels = holm_alphas(dict(p_gate), alpha)
    out = {}
    n = len(results)
    for label, result in results.items():
        level = levels[label]
        withdrawn = []
        for row in failed[label]:
            p = adjusted[label].get(row.metric)
            if p is not None and not p < level:
                withdrawn.append(row.metric)
                row.verdict = "pass"
                row.explanation = (
                    f"pass: not credible across the {n}-model matrix (Holm-adjusted p {p:.3g} within the gate "
                    f">= level {level:.3g} from Holm across the models' gates); alone at alpha {alpha:g}: "
                    + row.explanation
                )
                result.messages.append(f"{row.metric}: {row.explanation}")  # the tables show no passing row's why
        still = any(r.verdict == "fail" for r in result.rows) or result.power_refused or result.judge_errors_over
        if withdrawn and result.status == "fail" and not still:
            result.status = "pass"
        regressed = any(r.kind == "test" and r.verdict == "fail" for r in result.rows)
        out[label] = FamilyDecision(label, p_gate[label], level, regressed, tuple(withdrawn))
    return out
