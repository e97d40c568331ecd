"""``leader-eval plan SUITE``: the gate's power to catch drops, and samples per case for 80% power."""

from __future__ import annotations

import argparse

from leader_eval.decide.golden import DEFAULT_BASELINE, GoldenError, check_golden_suite, golden_path, load_golden
from leader_eval.decide.plan import plan_power
from leader_eval.inert import inert
from leader_eval.report.plan import format_plan
from leader_eval.suite.load import load_suite


def run(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    baseline = args.baseline or args.label or DEFAULT_BASELINE  # --label: 0.2's name for the golden
    path = golden_path(args.golden, suite.name, baseline)
    golden = load_golden(path)
    if golden is None:
        raise GoldenError(
            f"{path}: no golden baseline {baseline!r} (create it from a trusted run: "
            f"leader-eval update-golden TRUSTED_RUN_DIR --golden {args.golden} --baseline {baseline})"
        )
    check_golden_suite(path, golden, suite.name)
    samples = args.samples or int(suite.sampling.get("samples", 1))
    plan = plan_power(golden, run_samples=samples, metric=args.metric, alpha=args.alpha)
    print(format_plan(plan, source=str(path)))
    if golden.get("suite_hash") != suite.content_hash:
        made = inert(golden.get("suite_hash"))  # the golden file's text
        print(f"note: the golden was made from other suite content ({made}); its rates still guide")
    return 0
