"""``leader-eval judge-pair SUITE RUN_A RUN_B``: pairwise judges over two runs (docs/judges.md)."""

from __future__ import annotations

import argparse
import json

from leader_eval.runs.model_spec import roles_from_pairs
from leader_eval.runs.pairwise import judge_pairs
from leader_eval.runs.trusted import Trusted, assemble


def run(args: argparse.Namespace) -> int:
    # ROLE=SPEC [--flag value ...], parsed with run's option table like --model-role; the
    # configuration file's model roles (args.trusted, cli/settings.py) rank below the command line
    cli = Trusted(roles_from_pairs(args.judge, source="--judge"))
    files = getattr(args, "trusted", None)
    print(json.dumps(judge_pairs(args.suite, args.run_a, args.run_b, assemble(files=files, cli=cli)), indent=2))
    return 0
