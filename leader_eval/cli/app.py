"""``leader-eval``: a thin shell over the library API. Bad input exits 2 with one line."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from leader_eval.cli.shutdown import exit_process
from leader_eval.errors import LeaderEvalError
from leader_eval.inert import GuardedStream, inert
from leader_eval.runs.argtypes import (
    int_list,
    name_component,
    non_negative_float,
    open_probability,
    positive_int,
    probability,
    sample_count,
)
from leader_eval.runs.options import add_arguments as add_sampling_arguments
from leader_eval.store.run_store import ADAPTIVE_COMPARE, REPORT


def _add_max_error_rate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-error-rate",
        type=probability,
        default=0.0,
        help="share of samples that may end in a sampler error before the run fails (default 0: none)",
    )


def _add_baseline(parser: argparse.ArgumentParser, prefix: str = "", default: str | None = "main") -> None:

    parser.add_argument(
        "--baseline",
        type=name_component,
        default=default,
        help=prefix + "the golden baseline to gate against: GOLDEN/<suite>/<baseline>.json, any model (default main)",
    )


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line (``leader-eval run: error: argument --limit: ...``), exit status 2.

    Subcommand parsers inherit the class (``add_subparsers`` builds them with ``type(self)``).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from leader_eval.version import __version__

    p = OneLineParser(prog="leader-eval", description=__doc__)
    p.add_argument("--version", action="version", version=f"leader-eval {__version__}")
    p.add_argument(
        "--library-logs",
        action="store_true",
        help="show what llama.cpp and transformers log themselves (kept out by default; LEADER_EVAL_LIBRARY_LOGS=1)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="sample a suite on a model, score it and record the run")
    r.add_argument("suite", help="suite YAML file")
    add_sampling_arguments(r)  # the same table as the pytest plugin's --le-* options
    r.add_argument("--tags", action="append", help="only cases with one of these tags (comma-separated)")
    r.add_argument("--case", action="append", help="only these case ids (comma-separated)")
    r.add_argument("--limit", type=positive_int, help="only the first N selected cases")
    r.add_argument("--out", help="run directory (re-running into it resumes)")
    r.add_argument(
        "--prices",
        metavar="PROMPT,COMPLETION[,CURRENCY]",
        help="prices per million prompt and completion tokens for the cost estimate (beats the suite's prices)",
    )
    r.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N (deterministic by case id; needs --seed); merge the shards with leader-eval merge",
    )
    r.add_argument(
        "--adaptive",
        action="store_true",
        help="sample in rounds and stop once more samples cannot change the gate's decision (needs --budget)",
    )
    r.add_argument("--budget", type=sample_count, help="with --adaptive: at most this many samples per case")
    r.add_argument("--golden", default="golden", help="with --adaptive: golden directory (or one .json file)")
    _add_baseline(r, "with --adaptive: ")
    r.add_argument("--alpha", type=float, default=0.05, help="with --adaptive: the gate's family-wise level")
    r.add_argument(
        "--across-suites",
        action="store_true",
        help="with --adaptive: gate against a golden of another variant of the suite (same case ids)",
    )
    r.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    r.add_argument("--suite-root", help="folder every file the suite references must lie in (docs/security.md)")
    r.set_defaults(command_module="run")

    li = sub.add_parser("lint", help="validate suites, render every case, count prompt tokens")
    li.add_argument("suite", nargs="+", help="suite files, directories (every *.yaml under them) or globs")
    add_sampling_arguments(li)  # run's table: --model (whose chat template and tokenizer count tokens) and its options
    li.add_argument("--no-tokens", action="store_true", help="skip the chat template and token counts")
    li.add_argument("-v", "--verbose", action="store_true", help="list every case with its line")
    li.add_argument("--suite-root", help="folder every file the suite references must lie in (docs/security.md)")
    li.set_defaults(command_module="lint")

    sh = sub.add_parser("show", help="print raw outputs (repr) with parsed calls and failed checks")
    sh.add_argument("run", help="run directory")
    sh.add_argument("--case", help="only this case id")
    sh.add_argument("--failed", action="store_true", help="only samples that failed")
    sh.add_argument("--limit", type=positive_int, help="at most this many samples")
    sh.set_defaults(command_module="show")

    ex = sub.add_parser("export", help="write runs' samples (or cases) as CSV, JSONL or Parquet (docs/export.md)")
    ex.add_argument("runs", nargs="+", metavar="RUN", help="run directories")
    ex.add_argument("--format", choices=("csv", "jsonl", "parquet"), default="csv", help="file format (default csv)")
    ex.add_argument("--out", help="the file to write (default: RUN_ID.FORMAT, or export.FORMAT for several runs)")
    ex.add_argument("--per-case", action="store_true", help="one row per case instead of one per sample")
    ex.set_defaults(command_module="export")

    g = sub.add_parser("gate", help="gate a run directory against its golden baseline (exit 1 on credible regression)")
    g.add_argument("run", help="run directory")
    g.add_argument("--golden", default="golden", help="golden directory (or one golden .json file)")
    _add_baseline(g)
    g.add_argument("--label", help="refused: in 0.2 it chose the golden; use --baseline (0.3)")
    g.add_argument("--update-golden", action="store_true", help="rewrite the golden from this run if it is complete")
    g.add_argument(
        "--allow-missing-golden",
        action="store_true",
        help="a missing golden warns instead of failing (a suite's very first run only)",
    )
    g.add_argument(
        "--strict", action="store_true", help="CI mode (docs/gating.md); a missing golden fails with or without it"
    )
    g.add_argument("--tolerance", action="append", help="METRIC=VALUE, overrides the golden's (repeatable)")
    g.add_argument("--markdown", help="append a Markdown summary to this file")
    _add_max_error_rate(g)
    g.set_defaults(command_module="gate")

    ug = sub.add_parser(
        "update-golden", help="make a complete run of a trusted model the suite's baseline golden (no gate)"
    )
    ug.add_argument("run", help="run directory of the trusted model")
    ug.add_argument("--golden", default="golden", help="golden directory (or one golden .json file)")
    _add_baseline(ug)
    ug.add_argument("--tolerance", action="append", help="METRIC=VALUE, beats the existing golden's (repeatable)")
    _add_max_error_rate(ug)
    ug.set_defaults(command_module="update_golden")

    c = sub.add_parser(
        "compare", help="compare runs: paired differences, flips, verdict (exit 1 on credible regression)"
    )
    c.add_argument("runs", nargs="+", help="run directories; runs of one label+suite+sampling are pooled")
    c.add_argument(
        "--alpha", type=open_probability, default=0.05, help="significance level of the verdict (default 0.05)"
    )
    c.add_argument(
        "--across-suites",
        action="store_true",
        help="allow runs of different suite content (scaffold variants with the same case ids)",
    )
    c.add_argument("--markdown", help="append a Markdown summary to this file")
    c.add_argument("--report", help="also write the comparison as one self-contained HTML file")
    c.add_argument("--order", action="append", help="checkpoint order of the labels (comma-separated)")
    c.set_defaults(command_module="compare")

    ca = sub.add_parser(
        "compare-adaptive",
        help="sample two configurations in rounds and compare after each; stop once the verdict is settled",
    )
    ca.add_argument("--a", required=True, metavar="SUITE[@MODEL]", help="baseline A: suite YAML and model")
    ca.add_argument("--b", required=True, metavar="SUITE[@MODEL]", help="candidate B: suite YAML and model")
    add_sampling_arguments(ca)  # shared by both sides; --model is the default for a side without @MODEL
    ca.add_argument("--budget", required=True, type=sample_count, help="at most this many samples per case per side")
    ca.add_argument("--out", required=True, help=f"output directory: OUT/a, OUT/b and {ADAPTIVE_COMPARE}")
    ca.add_argument(
        "--alpha", type=open_probability, default=0.05, help="level of each direction's verdict (default 0.05)"
    )
    ca.add_argument(
        "--futility",
        type=float,
        default=0.01,
        help="stop with no credible difference when its conditional power falls below this (default 0.01)",
    )
    ca.add_argument(
        "--across-suites",
        action="store_true",
        help="allow A and B of different suite content (scaffold variants with the same case ids)",
    )
    ca.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    ca.set_defaults(command_module="compare_adaptive")

    pl = sub.add_parser("plan", help="power of the gate to catch drops, and samples per case for 80%% power")
    pl.add_argument("suite", help="suite YAML (its name finds the golden; its samples per case are the default)")
    pl.add_argument("--golden", default="golden", help="golden directory (or one golden .json file)")
    _add_baseline(pl, default=None)  # None: --label (0.2) may still name it, else main
    pl.add_argument("--label", type=name_component, help="0.2's name for --baseline (deprecated)")
    pl.add_argument("--samples", type=sample_count, help="samples per case of the runs to gate (default: the suite's)")
    pl.add_argument("--metric", default="score", help="gating metric to plan for (default: score)")
    pl.add_argument("--alpha", type=float, default=0.05, help="the gate's family-wise level (default 0.05)")
    pl.set_defaults(command_module="plan")

    mg = sub.add_parser("merge", help="merge the shards of one run (run --shard I/N) into one run directory")
    mg.add_argument("runs", nargs="+", help="the shard run directories, every shard 1..N once")
    mg.add_argument("--out", required=True, help="new run directory for the merged run")
    mg.add_argument("--suite", help="suite file to score with (default: the path the shards recorded)")
    mg.set_defaults(command_module="merge")

    fl = sub.add_parser("flaky", help="flaky cases and run-to-run overdispersion over runs of one checkpoint")
    fl.add_argument("runs", nargs="+", help="run directories of one checkpoint and suite, different seeds")
    fl.add_argument("--alpha", type=float, default=0.05, help="level of the overdispersion test (Holm over cases)")
    fl.add_argument("--json", action="store_true", help="print the report as JSON")
    fl.set_defaults(command_module="flaky")

    rp = sub.add_parser(
        "report", help="one self-contained HTML report of runs (several: comparison, flips, checkpoints)"
    )
    rp.add_argument("runs", nargs="+", help="run directories (with --history: folders of run directories)")
    rp.add_argument(
        "-o", "--out", help=f"output file (default {REPORT}; with --history, history.html in the first folder)"
    )
    rp.add_argument(
        "--history",
        action="store_true",
        help="one index page over every run under the folders: metrics over time and checkpoints, gate verdicts",
    )
    rp.add_argument("--order", action="append", help="checkpoint order of the labels (comma-separated)")
    rp.add_argument("--across-suites", action="store_true", help="allow runs of different suite content")
    rp.set_defaults(command_module="report")

    st = sub.add_parser(
        "stress", help="grow the event log to long prompts; score vs prompt length, context overflow apart"
    )
    st.add_argument("suite", help="suite YAML file")
    add_sampling_arguments(st)  # exactly run's model, backend and sampling options
    st.add_argument("--tokens", type=positive_int, default=40000, help="largest prompt length, in the model's tokens")
    st.add_argument(
        "--steps", action="append", type=int_list(), help="prompt lengths, e.g. 4000,8000,16000,32000,40000"
    )
    st.add_argument("--cases", action="append", help="case ids (default: the suite's stress cases)")
    st.add_argument("--depths", action="append", help="where the deciding fact goes: start,middle,end")
    st.add_argument("--out", help="run directory of the sweep")
    st.add_argument(
        "--strict",
        action="store_true",
        help="CI mode: a stress requirement that cannot fail (too few cases) fails unless gate: underpowered says why",
    )
    st.set_defaults(command_module="stress")

    ca = sub.add_parser("cache", help="the content-addressed sample cache: info | prune")
    ca.add_argument("action", choices=["info", "prune"], help="info: size and location; prune: delete old records")
    ca.add_argument(
        "--older-than-days", type=non_negative_float, help="prune only records cached before this many days ago"
    )
    ca.set_defaults(command_module="cache")

    ov = sub.add_parser("overlap", help="n-gram overlap of a suite's cases with a training set (held-out hygiene)")
    ov.add_argument("suite", help="suite YAML file")
    ov.add_argument("--train", action="append", required=True, help="training JSONL (repeatable)")
    ov.add_argument(
        "--n",
        type=positive_int,
        default=None,
        help="n-gram length in words (default: each case at the longest of 13, 8, 5 at which it has an n-gram)",
    )
    ov.add_argument("--threshold", type=probability, default=0.1, help="flag cases whose overlap fraction reaches this")
    ov.add_argument("--json", action="store_true", help="print the report as JSON")
    ov.set_defaults(command_module="overlap")
    cf = sub.add_parser(
        "config",
        help="show every setting and where it came from: default, pyproject.toml:LINE / leader-eval.toml:LINE, "
        "env or command line (never a secret)",
    )
    add_sampling_arguments(cf)  # what run would use with these flags
    _add_baseline(cf)
    cf.add_argument("--golden", default="golden", help="golden directory (as gate takes it)")
    cf.set_defaults(command_module="config")
    jc = sub.add_parser(
        "judge-check", help="measure a suite's rubric judges against human labels; write calibration records"
    )
    jc.add_argument("suite", help="suite YAML file (its judges: section)")
    jc.add_argument("labelled", help='labelled JSONL: {"id", "text", "labels": {criterion: label}} per line')
    jc.add_argument(
        "--judge",
        action="append",
        default=[],
        metavar="ROLE=SPEC",
        help="what a judge's model role means: ROLE=SPEC [--flag value ...], as --model-role "
        "(repeatable; beats [tool.leader-eval.model-roles])",
    )
    jc.add_argument("--criterion", action="append", default=[], help="only this criterion (repeatable)")
    jc.add_argument("--k", type=positive_int, default=1, help="judge samples per text, for self-consistency")
    jc.add_argument("--calibration-dir", help="where records go (default judge-calibration/ beside the suite)")
    jc.add_argument("--json", action="store_true", help="print the report as JSON")
    jc.set_defaults(command_module="judge_check")
    jp = sub.add_parser("judge-pair", help="compare two runs' outputs with a suite's pairwise judges, both orders")
    jp.add_argument("suite", help="suite YAML file (its pairwise: true judges)")
    jp.add_argument("run_a", help="run directory A (the baseline)")
    jp.add_argument("run_b", help="run directory B (the candidate)")
    jp.add_argument(
        "--judge", action="append", default=[], metavar="ROLE=SPEC", help="what a judge's model role means (repeatable)"
    )
    jp.set_defaults(command_module="judge_pair")
    sc = sub.add_parser("schema", help="print the suite JSON Schema (for editors: see docs/suite-format.md)")
    sc.add_argument("--path", action="store_true", help="print the schema file's path instead of its content")
    sc.set_defaults(command_module="schema")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.configure = lambda: _configure(parser, args, argv)
    if args.library_logs:
        from leader_eval.suite.chat_template import LIBRARY_LOGS_ENV

        os.environ[LIBRARY_LOGS_ENV] = "1"  # read where each library is first imported
    # every line printed below is guarded, whichever print site forgot to make its text inert
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = GuardedStream(streams[0]), GuardedStream(streams[1])
    try:
        return _main(args)
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = streams


#: the collector's first threshold for a command (CPython's default is 700 allocations)
COMMAND_GC_THRESHOLD = 50_000


def _main(args: argparse.Namespace) -> int:
    # One command is one short process whose objects (modules, a suite, a run's records) mostly
    # live until it exits and form few cycles: collecting the young generation every 700
    # allocations walked them again and again (a full collection over a 2,000-sample run's
    # records for its report alone took ~0.1 s). Cycles are still collected, less often.
    # Both are undone when the command returns: ``main`` is also called in-process (tests, a
    # user's script), whose collector must be left as it was found.
    threshold = gc.get_threshold()
    frozen = gc.get_freeze_count()
    if gc.isenabled() and threshold[0] < COMMAND_GC_THRESHOLD:
        gc.set_threshold(COMMAND_GC_THRESHOLD, *threshold[1:])
    try:
        return _command(args)
    finally:
        gc.set_threshold(*threshold)
        if not frozen and gc.get_freeze_count():  # cli/run.py froze the run's records
            gc.unfreeze()


def _configure(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> None:
    """The configuration file's settings where the command line left them unset (cli/settings.py)."""
    from leader_eval.cli.settings import CONFIG_COMMANDS, apply_config

    if args.command in CONFIG_COMMANDS:
        apply_config(parser, args, argv)


def _command(args: argparse.Namespace) -> int:
    try:
        # each subcommand is its own module, imported only when it runs (leader-eval --help stays fast)
        command = importlib.import_module(f"leader_eval.cli.{args.command_module}")
        configure = getattr(args, "configure", None)
        if configure is not None:
            configure()
        status: int = command.run(args)
    except LeaderEvalError as err:
        from leader_eval.secrets import scrub

        # a message may quote what a server, a suite or a golden holds: no secret, escape or CI command
        print(f"error: {inert(scrub(str(err)), multiline=True)}", file=sys.stderr)
        return err.exit_status
    except BrokenPipeError:
        return 0
    except OSError as err:  # the environment (disk full, permissions), not a bug: one line, no traceback
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    return status


def console_main() -> NoReturn:
    """The ``leader-eval`` command: ``main``, then the process ends (``cli/shutdown.py``)."""
    exit_process(main())


if __name__ == "__main__":
    console_main()
