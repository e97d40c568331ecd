"""False alarms and power of the whole gate on real recorded samples (issue 19's acceptance).

The pool: the 132 real outputs of SmolLM2 on ``leader_core`` in ``tests/corpus/real`` (runs a and
b, 22 cases x 6 samples, scored by the real pipeline). Each draw takes a golden of 6 and a
candidate of 3 samples per case from each case's outputs (with replacement), the flagship suite's
size, then ``build_golden`` + ``gate`` decide exactly as in CI.

Rows (each over ``--draws`` draws, default 400; standard error about 1.1 points near 5%):

- no change, the whole gate (one Holm-Tarone family, default tolerances): the false-alarm rate;
  for this code also with the suite's ``gate:`` section: floors and ceilings on every gated
  metric (at the pool's value less ``detect``; ceilings 0.05 above) judged on the bound, the
  same on the point estimate, and CI mode (``strict``) with its power guard;
- a drop of 0.05 / 0.10 / 0.20 in score, strict format or tool accuracy: every sample that has
  the property loses it with probability ``drop / pool value`` (a lost format or tool also fails
  the sample), and the share of draws whose gate fails is the power.

``--rows sizes`` (this code only) instead measures the two candidate tests for 0/1 metrics on
simulated suites, the paired t-test over per-case rates and the exact stratified count test: the
share of no-change draws each rejects at one-sided 0.05 and 0.01 (20,000 draws per cell), and their
power at 0.01 for drops of 0.05 / 0.10 / 0.20 (4,000 draws), through ``stats.simulated_power``
(the gate's own statistic).

Usage::

    python bench/bench_gate_alarms.py [--draws 400] [--code DIR] [--rows alarms,power,sizes]

``--code DIR`` imports leader-eval (and its tests' helpers) from DIR instead, e.g. a checkout of
a30090f for the "before" column (``git archive a30090f | tar -x -C /tmp/before``). Rows the code
in DIR cannot express (floors, CI mode's power guard) are skipped there. Inside the loop the
bootstrap uses 200 resamples (the decisions use the exact and paired tests, which do not
resample; the floors' bounds are Wilson intervals on this suite's binary case scores).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DROPS = (0.05, 0.10, 0.20)
DROPPED = {
    "score": ("passed",),
    "strict_format_rate": ("strict_format", "passed"),
    "tool_accuracy": ("tool_correct", "passed"),
}


def _setup(code: Path) -> dict[str, Any]:
    sys.path.insert(0, str(code))
    import numpy as np

    import leader_eval.scoring.aggregate
    import leader_eval.stats.core
    from leader_eval.decide.gate import gate
    from leader_eval.decide.golden import build_golden
    from leader_eval.suite.load import load_suite
    from tests.scoring.test_real_outputs import _scores
    from tests.support.runs import run_from_scores

    # fewer bootstrap resamples inside the loop (as tests/decide/test_golden.py's fast_stats does)
    leader_eval.scoring.aggregate.weighted_mean_ci = partial(leader_eval.stats.core.weighted_mean_ci, n_boot=200)  # type: ignore[attr-defined]
    for mod in ("golden", "compare", "stats"):
        m = sys.modules.get(f"leader_eval.{mod}")
        if m is not None and hasattr(m, "paired_compare"):
            m.paired_compare = partial(leader_eval.stats.core.paired_compare, n_boot=200, n_perm=2000)  # type: ignore[attr-defined]
    pool: dict[str, list[Any]] = {}
    for sid, score in sorted(_scores().items()):
        if sid.split("/")[0] in ("a", "b"):
            pool.setdefault(score.case_id, []).append(score)
    suite = load_suite(code / "suites" / "leader_core.yaml")
    params = inspect.signature(gate).parameters
    return {
        "np": np,
        "gate": gate,
        "build_golden": build_golden,
        "run_from_scores": run_from_scores,
        "pool": pool,
        "suite": suite,
        "new": "suite_gate" in params,
    }


def _draw(env: dict[str, Any], n: int, rng: Any, seed: int, drop: tuple[str, float] | None = None) -> Any:
    pool, suite = env["pool"], env["suite"]
    scores = []
    q = 0.0
    if drop is not None:
        metric, d = drop
        field = DROPPED[metric][0]
        have = [getattr(s, field) for v in pool.values() for s in v]
        q = min(1.0, d / (sum(have) / len(have)))
    for case in suite.cases:
        have = pool[case.id]
        for j, i in enumerate(rng.integers(0, len(have), n)):
            s = replace(have[int(i)], index=j)
            if drop is not None and getattr(s, DROPPED[drop[0]][0]) and rng.random() < q:
                s = replace(s, **dict.fromkeys(DROPPED[drop[0]], False), reason=s.reason or "dropped")
            scores.append(s)
    return env["run_from_scores"](suite, scores, n=n, seed=seed, model_id="local:smollm2")


def _pool_values(env: dict[str, Any]) -> dict[str, float]:
    flat = [s for v in env["pool"].values() for s in v]
    mean = lambda f: sum(bool(getattr(s, f)) for s in flat) / len(flat)  # noqa: E731
    return {
        "score": mean("passed"),
        "strict_format_rate": mean("strict_format"),
        "tool_accuracy": mean("tool_correct"),
        "hard_fail_rate": mean("hard_fail"),
        "leak_rate": mean("leaked"),
    }


def _sections(env: dict[str, Any], detect: float = 0.10) -> dict[str, dict[str, Any]]:
    v = _pool_values(env)
    floors = {m: round(max(0.0, v[m] - detect), 3) for m in ("score", "strict_format_rate", "tool_accuracy")}
    ceilings = {m: round(min(1.0, v[m] + 0.05), 3) for m in ("hard_fail_rate", "leak_rate")}
    return {
        "floors (bound)": {"min": floors, "max": ceilings},
        "floors (point)": {"min": floors, "max": ceilings, "judge": "point"},
    }


def _rate(k: int, n: int) -> str:
    se = math.sqrt(max(k / n * (1 - k / n), 1e-12) / n)
    return f"{k / n:.1%} ({k}/{n}, se {se:.1%})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--code", type=Path, default=ROOT)
    ap.add_argument("--rows", default="alarms,power")
    args = ap.parse_args()
    if args.rows == "sizes":
        sys.path.insert(0, str(args.code.resolve()))
        sizes()
        return
    env = _setup(args.code.resolve())
    np, gate, build = env["np"], env["gate"], env["build_golden"]
    rows = set(args.rows.split(","))
    print(f"code: {args.code} ({'with' if env['new'] else 'without'} the suite's gate: section)")
    print(f"pool values: {', '.join(f'{k} {v:.3f}' for k, v in _pool_values(env).items())}")
    if "alarms" in rows:
        configs: dict[str, dict[str, Any]] = {"default": {}}
        if env["new"]:
            for name, section in _sections(env).items():
                configs[name] = {"suite_gate": section}
                configs[f"{name}, CI mode + power guard"] = {"suite_gate": section, "strict": True}
            configs["CI mode, acknowledged, no floors"] = {"suite_gate": {"underpowered": "bench"}, "strict": True}
        fails = dict.fromkeys(configs, 0)
        refused = 0
        t0 = time.time()
        rng = np.random.default_rng(2026)
        for i in range(args.draws):
            golden = build(_draw(env, 6, rng, seed=i))
            run = _draw(env, 3, rng, seed=10_000 + i)
            for name, kw in configs.items():
                if env["new"] and not kw.get("strict"):
                    kw = {**kw, "power": False}  # the guard decides nothing outside CI mode
                fails[name] += gate(run, golden, **kw).exit_status
            if env["new"]:
                refused += gate(run, golden, strict=True, suite_gate={}).exit_status
        print(f"\nno change, {args.draws} draws ({time.time() - t0:.0f} s): share of draws whose gate FAILS")
        print("| configuration | false alarms |\n|---|---|")
        for name, k in fails.items():
            print(f"| {name} | {_rate(k, args.draws)} |")
        if env["new"]:
            print(f"| CI mode, no floors, not acknowledged (refused: underpowered) | {_rate(refused, args.draws)} |")
    if "power" in rows:
        print(f"\npower: share of {args.draws} draws whose gate fails (default configuration)")
        print("| metric | drop | power |\n|---|---:|---:|")
        for m_i, metric in enumerate(DROPPED):
            for d_i, d in enumerate(DROPS):
                rng = np.random.default_rng([7, m_i, d_i])
                k = 0
                for i in range(args.draws):
                    golden = build(_draw(env, 6, rng, seed=i))
                    run = _draw(env, 3, rng, seed=20_000 + i, drop=(metric, d))
                    kw = {"power": False} if env["new"] else {}
                    k += gate(run, golden, **kw).exit_status
                print(f"| {metric} | {d:.2f} | {_rate(k, args.draws)} |")


def sizes() -> None:
    """Size and power of the paired t-test and the exact count test on simulated 0/1 suites."""
    import numpy as np

    from leader_eval.stats.core import simulated_power

    rng = np.random.default_rng(3)
    golden = json.loads((ROOT / "golden" / "leader_core" / "local-smollm2.json").read_text(encoding="utf-8"))
    real = [float(rec["pass_rate"]) for _, rec in sorted(golden["cases"].items())]
    cells = [
        (5, 2, 2, "Beta(2,2)"),
        (5, 6, 3, "Beta(2,2)"),
        (10, 2, 2, "Beta(0.3,3)"),
        (22, 6, 3, "leader_core's golden rates"),
        (22, 6, 3, "Beta(0.3,3)"),
        (22, 6, 3, "Beta(3,0.3)"),
        (50, 3, 3, "Beta(2,2)"),
        (8, 10, 10, "Beta(2,2)"),
        (8, 10, 10, "Beta(0.3,3)"),
    ]
    print("| cases | golden / run samples | case rates | mean | size t / exact at 0.05 | at 0.01 |", end="")
    print(" power t / exact at 0.01, drop 0.05 | 0.10 | 0.20 |")
    print("|---:|---|---|---:|---|---|---|---|---|")
    for n_cases, ng, nr, kind in cells:
        if kind.startswith("leader_core"):
            p = np.array(real)
        else:
            a, b = (float(x) for x in kind[5:-1].split(","))
            p = rng.beta(a, b, n_cases)
        size = {
            (lv, t): simulated_power(p, ng, nr, drop=0, level=lv, tolerance=-1, test=t, n_sim=20_000, seed=1)
            for lv in (0.05, 0.01)
            for t in ("paired_t", "exact_count")
        }
        power = {
            (d, t): simulated_power(p, ng, nr, drop=d, level=0.01, tolerance=0, test=t, n_sim=4000, seed=2)
            for d in DROPS
            for t in ("paired_t", "exact_count")
        }
        cells_text = [f"{size[lv, 'paired_t']:.4f} / {size[lv, 'exact_count']:.4f}" for lv in (0.05, 0.01)]
        cells_text += [f"{power[d, 'paired_t']:.3f} / {power[d, 'exact_count']:.3f}" for d in DROPS]
        print(f"| {n_cases} | {ng} / {nr} | {kind} | {p.mean():.2f} | " + " | ".join(cells_text) + " |")


if __name__ == "__main__":
    main()
