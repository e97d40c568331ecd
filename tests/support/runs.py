"""Run builders: synthetic runs with real result shapes (per-sample SampleScore records ->
aggregate.case_results -> aggregate.summarize over a real suite loaded from YAML), written as run
directories, for the gate, compare, flaky, plan and report tests."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from leader_eval.runs.evaluate import Run
from leader_eval.scoring.aggregate import case_results, summarize
from leader_eval.scoring.scorer import SampleScore
from leader_eval.stats.metrics import ALL_METRICS, METRICS
from leader_eval.store.formats import SCORER_VERSION
from leader_eval.store.run_store import CASES, MANIFEST, RESULTS, SUMMARY, dumps, write_json_atomic
from leader_eval.suite.load import Suite, load_suite
from tests.conftest import MINIMAL_SUITE

# ---------------------------------------------------------------------------------------------
# synthetic runs (also used by test_compare.py)

FAIL_REASONS = ("no_call", "wrong_value", "leak_reasoning")


def suite_yaml(n_cases: int) -> str:
    head = MINIMAL_SUITE.split("cases:\n")[0]
    cases = "".join(
        f'  - id: c{i:02d}\n    vars: {{current_goal: goal {i}, request: "request {i}"}}\n' for i in range(n_cases)
    )
    return head + "cases:\n" + cases


@cache
def _suite_at(directory: str, n_cases: int) -> Suite:
    path = Path(directory) / f"suite{n_cases}.yaml"
    path.write_text(suite_yaml(n_cases), encoding="utf-8")
    return load_suite(path)


def make_suite(tmp_path: Path, n_cases: int = 24) -> Suite:
    return _suite_at(str(tmp_path), n_cases)


def make_scores(
    case_ids: Sequence[str], p_pass: Sequence[float], n: int, rng: np.random.Generator, *, p_hard: float = 0.0
) -> list[SampleScore]:
    """Per-sample records: each sample passes with its case's probability; a failing sample is a
    hard fail with probability ``p_hard`` and fails for one of a few named reasons."""
    passed = rng.random((len(case_ids), n)) < np.asarray(p_pass)[:, None]
    hard = ~passed & (rng.random(passed.shape) < p_hard)
    reason = rng.integers(0, len(FAIL_REASONS), passed.shape)
    out = []
    for i, cid in enumerate(case_ids):
        for j in range(n):
            ok = bool(passed[i, j])
            r = None if ok else FAIL_REASONS[reason[i, j]]
            out.append(
                SampleScore(
                    case_id=cid,
                    index=j,
                    outcome="ok",
                    passed=ok,
                    hard_fail=bool(hard[i, j]),
                    reason=r,
                    strict_format=ok or r != "no_call",
                    lenient_format=True,
                    tool_correct=ok or r == "leak_reasoning",
                    leaked=r == "leak_reasoning",
                    partial_credit=1.0 if ok else 0.0,
                )
            )
    return out


def make_run(
    suite: Suite,
    p_pass: Sequence[float] | float,
    *,
    n: int = 5,
    seed: int = 0,
    label: str = "v1",
    status: str = "complete",
    p_hard: float = 0.0,
    case_ids: Sequence[str] | None = None,
    scorer_version: str = SCORER_VERSION,
    model_id: str = "gguf:/home/someone/models/v1.gguf",
    path: Path | None = None,
) -> Run:
    """A scored run of ``suite`` (or of ``case_ids`` of it) whose samples pass with ``p_pass``."""
    cases = [c for c in suite.cases if case_ids is None or c.id in set(case_ids)]
    ids = [c.id for c in cases]
    p = np.full(len(ids), p_pass, dtype=float) if np.isscalar(p_pass) else np.asarray(p_pass, dtype=float)
    rng = np.random.default_rng(seed)
    scores = make_scores(ids, p, n, rng, p_hard=p_hard)
    return run_from_scores(
        suite,
        scores,
        n=n,
        seed=seed,
        label=label,
        status=status,
        scorer_version=scorer_version,
        model_id=model_id,
        path=path,
    )


def run_from_scores(
    suite: Suite,
    scores: Sequence[SampleScore],
    *,
    n: int,
    seed: int = 0,
    label: str = "v1",
    status: str = "complete",
    scorer_version: str = SCORER_VERSION,
    model_id: str = "gguf:/home/someone/models/v1.gguf",
    path: Path | None = None,
) -> Run:
    """A run of the cases of ``suite`` that ``scores`` (per-sample records) cover, ``n`` samples each."""
    have = {s.case_id for s in scores}
    cases = [c for c in suite.cases if c.id in have]
    ids = [c.id for c in cases]
    results = case_results(cases, scores)
    summary = summarize(suite, results)
    params = {"temperature": 0.7, "max_tokens": 48, "top_p": 1.0, "stop": []}
    manifest: dict[str, Any] = {
        "identity": {
            "suite": suite.name,
            "suite_hash": suite.content_hash,
            "model_id": model_id,
            "protocol": "json",
            "run_seed": seed,
            "cases": {cid: {"samples": n, "params": params} for cid in sorted(ids)},
        },
        "run_id": f"{suite.name}-{label}-{seed:08x}",
        "label": label,
        "suite": {"name": suite.name, "path": str(suite.path), "content_hash": suite.content_hash},
        "scorer_version": scorer_version,
        "status": status,
    }
    summary.update(run_id=manifest["run_id"], model_id=model_id, label=label)
    return Run(path or Path(f"/nonexistent/{manifest['run_id']}"), manifest, [], list(scores), results, summary)


def write_run_dir(run: Run, path: Path) -> Path:
    """Lay ``run`` out on disk as ``evaluate.score_run`` does."""
    path.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path / MANIFEST, run.manifest)
    (path / RESULTS).write_text("".join(dumps(s.to_dict()) + "\n" for s in run.scores), encoding="utf-8")
    write_json_atomic(path / CASES, run.cases)
    write_json_atomic(path / SUMMARY, run.summary)
    return path


def difficulties(n_cases: int, seed: int = 1) -> np.ndarray:
    """Per-case pass probabilities spread like a real suite's (easy, hard and in-between cases)."""
    return np.random.default_rng(seed).beta(2.0, 1.0, n_cases)


N_SIM = 1000


@pytest.fixture
def fast_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer resamples inside simulation loops (said here, as the numbers depend on it), and no power
    guard (it reports; these loops measure decisions): 2,000
    sign-flip permutations per paired test (a Monte Carlo p-value with the +1 correction is valid
    for any count; its error near p = 0.01 is about 0.002) and 200 bootstrap resamples for the
    intervals, which these decisions do not use when a paired test exists. 10x faster."""
    import leader_eval.decide.compare
    import leader_eval.decide.gate
    import leader_eval.scoring.aggregate
    import leader_eval.stats.core

    paired = partial(leader_eval.stats.core.paired_compare, n_perm=2000, n_boot=200)
    mean_ci = partial(leader_eval.stats.core.weighted_mean_ci, n_boot=200)
    # every paired decision (stats.decide_paired: gate, compare, recommendation) calls this one
    monkeypatch.setattr(leader_eval.stats.core, "paired_compare", paired)
    # the power guard reports (and fails only in CI mode, which these loops do not use); its own
    # simulation would cost about 0.5 s per gate in loops that measure the decisions
    monkeypatch.setattr(leader_eval.decide.gate, "_power_guard", lambda *args, **kwargs: None)
    monkeypatch.setattr(leader_eval.scoring.aggregate, "weighted_mean_ci", mean_ci)
    monkeypatch.setattr(leader_eval.decide.compare, "weighted_mean_ci", mean_ci)


def synthetic_run(label: str, values: dict[str, float], n: int = 4) -> Run:
    """A run of case records alone (no samples): each case's pass rate is ``values[case]`` over ``n``
    samples, every passing sample well formed and right, none hard-failing or leaking."""
    cases = []
    for cid, rate in values.items():
        passed = round(rate * n)
        rec = {"case_id": cid, "weight": 1.0, "n_scored": n, "n_passed": passed, "reasons": {}}
        rec.update({m: passed / n if spec.higher_is_better else 0.0 for m, spec in ALL_METRICS.items() if m in METRICS})
        cases.append(rec)
    ident = {"suite": "s", "suite_hash": "sha256:x", "model_id": f"m-{label}", "protocol": "json", "run_seed": 1,
             "cases": {}}  # fmt: skip
    return Run(Path(f"/nonexistent/{label}"), {"identity": ident, "label": label, "run_id": label}, [], [], cases, {})
