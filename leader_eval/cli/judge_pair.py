"""``leader-eval judge-pair SUITE RUN_A RUN_B``: pairwise judges over two runs (docs/judges.md)."""

from __future__ import annotations

import argparse
import json

from leader_eval.runs.pairwise import judge_pairs
from leader_eval.runs.trusted import NamedModel, Trusted, assemble, split_pair


def run(args: argparse.Namespace) -> int:
    cli = Trusted()
    for text in args.judge:
        name, spec = split_pair(text, where="--judge")
        cli.models[name] = NamedModel(name, {"model": spec}, "--judge")
    print(json.dumps(judge_pairs(args.suite, args.run_a, args.run_b, assemble(cli=cli)), indent=2))
    return 0
