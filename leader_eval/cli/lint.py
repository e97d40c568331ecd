"""``leader-eval lint SUITE...``: validate suites, render every case, count prompt tokens."""

from __future__ import annotations

import argparse
import glob
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from leader_eval.errors import LeaderEvalError
from leader_eval.inert import inert
from leader_eval.report import table
from leader_eval.runs.judging import check_judges
from leader_eval.runs.model_spec import one_model
from leader_eval.runs.options import run_options
from leader_eval.runs.python_checks import undefined_checks
from leader_eval.runs.teammates import check_roles
from leader_eval.runs.trusted import assemble
from leader_eval.sampling.backends import resolve_backend
from leader_eval.suite.lint import MAX_PRINTED_ERRORS, lint_file
from leader_eval.suite.records import Suite


def run(args: argparse.Namespace) -> int:
    paths, status = _suite_paths(args.suite)
    # the model is named with run's option table, so its backend options (--template-gguf, ...) apply
    options = run_options(one_model(vars(args), command="lint"), trusted=getattr(args, "trusted", None) or assemble())
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
        # a Python check the suite names must be defined in trusted configuration (not imported here)
        undefined = undefined_checks(suite, options.trusted)
        try:  # a teammate's or a judge's model role likewise
            check_roles(suite.cases, options.trusted)
            check_judges(suite, options.trusted)
        except LeaderEvalError as exc:
            undefined = [*undefined, str(exc)]
        for line in undefined:
            print(f"error: {inert(line)}", file=sys.stderr)
        if undefined:
            status = 2
            continue
        counts = f"{len(suite.cases)} cases{_from_data(suite)}, {len(suite.tools)} tools"
        print(f"{path}: ok, {counts}, hash {suite.content_hash}")
        if args.verbose or backend is not None:
            print(table(["case", "line", "prompt tokens"], [[str(c) for c in r] for r in result.rows]))
    return status


def _from_data(suite: Suite) -> str:
    """`` (2 inline, 200 from data/x.csv)`` for a suite with ``cases_from:``; nothing otherwise."""
    counts = Counter(c.source for c in suite.cases if c.source is not None)
    if not counts:
        return ""
    inline = len(suite.cases) - sum(counts.values())
    return " (" + ", ".join([f"{inline} inline", *(f"{n} from {src}" for src, n in counts.items())]) + ")"


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
