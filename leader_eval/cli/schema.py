"""``leader-eval schema``: print the suite JSON Schema (or its path)."""

from __future__ import annotations

import argparse
from importlib import resources


def run(args: argparse.Namespace) -> int:
    schema = resources.files("leader_eval.suite.schema").joinpath("suite.schema.json")
    if args.path:
        print(schema)
    else:
        print(schema.read_text(encoding="utf-8"), end="")
    return 0
