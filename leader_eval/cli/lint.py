"""``leader-eval lint SUITE...``: validate suites, render every case, count prompt tokens."""

from __future__ import annotations

import argparse
import glob
import sys
from collections.abc import Sequence
from pathlib import Path

from leader_eval.inert import inert
from leader_eval.report import table
from leader_eval.runs.judging import JudgeError, check_judges
from leader_eval.runs.options import run_options
from leader_eval.sampling.backends import resolve_backend
from leader_eval.suite.lint import MAX_PRINTED_ERRORS, lint_file


def run(args: argparse.Namespace) -> int:
    paths, status = _suite_paths(args.suite)
    # the model is named with run's option table, so its backend options (--template-gguf, ...) apply
    options = run_options(vars(args))
    backend = (
        resolve_backend(options.model, context_length=options.context_length, **options.backend_options)
        if not args.no_tokens and paths
        else None
    )
    for path in paths:
        # every error of the file, each on its own line (leader_eval.suite.lint)
        result = lint_file(path, root=args.suite_root, backend=backend)
        for err in result.errors[:MAX_PRINTED_ERRORS]:
            print(f"error: {inert(err, multiline=True)}", file=sys.stderr)  # it may quote the suite
        if len(result.errors) > MAX_PRINTED_ERRORS:
            print(f"error: {path}: {len(result.errors) - MAX_PRINTED_ERRORS} more errors not shown", file=sys.stderr)
        if result.errors or result.suite is None:
            status = 2
            continue
        suite = result.suite
        trusted = getattr(args, "trusted", None)  # the trusted table, when the command was given one
        if trusted is not None:
            try:
                check_judges(suite, trusted)  # a judge role nobody defined: refused at lint
            except JudgeError as err:
                print(f"error: {inert(str(err))}", file=sys.stderr)
                status = 2
                continue
        print(f"{path}: ok, {len(suite.cases)} cases, {len(suite.tools)} tools, hash {suite.content_hash}")
        if args.verbose or backend is not None:
            print(table(["case", "line", "prompt tokens"], [[str(c) for c in r] for r in result.rows]))
    return status


def _suite_paths(items: Sequence[str]) -> tuple[list[str], int]:
    """Files, directories (every ``*.yaml``/``*.yml`` under them) and globs (``**`` allowed) ->
    the suite files in order, and status 2 when an item names nothing (reported on stderr)."""
    out: list[str] = []
    status = 0
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file())
        elif glob.has_magic(item):
            found = sorted(f for f in glob.glob(item, recursive=True) if Path(f).is_file())
        else:
            found = [item]
        if not found:
            print(f"error: {item}: no suite file (*.yaml, *.yml) there", file=sys.stderr)
            status = 2
        out.extend(f for f in found if f not in out)
    return out, status
