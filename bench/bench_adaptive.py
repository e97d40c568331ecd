"""Operating characteristics of ``run --adaptive`` on the issue's scenario grid (docs/statistics.md).

Usage: ``python bench/bench_adaptive.py [REPS]`` (default 3000, the same seeds as
tests/decide/test_adaptive.py). Prints the Markdown table: per cell the fixed-n gate's fail rate, the
adaptive gate's, and the mean samples per case the adaptive run used (budget 5).
"""

from __future__ import annotations

import sys

from leader_eval.decide.adaptive import AdaptiveDesign, simulate


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    design = AdaptiveDesign(budget=5, family=1)
    grid = [(m, b, c) for m in (22, 100) for b in (0.3, 0.6, 0.9) for c in (0.0, -0.05, -0.15, -0.30)]
    print("| cases | base | change | fixed-n fails | adaptive fails | mean samples/case |")
    print("|---:|---:|---:|---:|---:|---:|")
    used = []
    for i, (m, b, c) in enumerate(grid):
        cell = simulate(design, n_cases=m, base=b, change=c, reps=reps, seed=i)
        used.append(cell.mean_samples)
        print(
            f"| {m} | {b:.1f} | {c:+.2f} | {cell.fixed_fail:.3f} | {cell.adaptive_fail:.3f} | {cell.mean_samples:.2f} |"
        )
    print(f"\nmean samples per case over the grid: {sum(used) / len(used):.2f} of 5 ({sum(used) / len(used) / 5:.2f}x)")
    print(f"looks {list(design.looks)}, gate levels {[f'{x:.3g}' for x in design.levels]}")


if __name__ == "__main__":
    main()
