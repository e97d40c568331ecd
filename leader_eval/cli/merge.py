"""``leader-eval merge SHARD... --out DIR``: merge the shards of one run."""

from __future__ import annotations

import argparse

from leader_eval.report import format_summary
from leader_eval.runs.merge import merge_runs


def run(args: argparse.Namespace) -> int:
    result = merge_runs(args.runs, args.out, suite=args.suite)
    print(format_summary(result))
    print(f"merged {len(args.runs)} shards into {args.out} (status {result.manifest.get('status')}): gate it once")
    return 0
