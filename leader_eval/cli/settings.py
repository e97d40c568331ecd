"""The configuration file's settings under a command's own flags (runs/config_file.py).

A command that samples, gates or shows the configuration reads ``[tool.leader-eval]`` /
``leader-eval.toml`` from the working directory upward; every option it sets applies where the
command line did not give that option (default < file < command line), and the trusted names
are assembled (files < code < command line) into ``args.trusted``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from leader_eval.runs.config_file import ConfigFile, load_config
from leader_eval.runs.model_spec import trusted_from_options
from leader_eval.runs.trusted import assemble

#: the commands a configuration file applies to
CONFIG_COMMANDS = frozenset(
    {
        "run",
        "stress",
        "lint",
        "compare-adaptive",
        "gate",
        "update-golden",
        "plan",
        "config",
        "judge-check",
        "judge-pair",
    }
)
#: a file key whose CLI flag has another name
CLI_DEST = {"golden_dir": "golden"}


def given_dests(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The options ``argv`` gave explicitly (a value equal to the default counts as given)."""
    saved = [(a, a.default) for a in parser._actions]
    try:
        for action, _ in saved:
            action.default = argparse.SUPPRESS
        ns, _ = parser.parse_known_args(list(argv))
    finally:
        for action, default in saved:
            action.default = default
    return set(vars(ns))


def apply_config(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Fill ``args`` from the configuration file where the command line left an option unset;
    ``args.config_file``, ``args.given`` and ``args.trusted`` record what was found."""
    sub = _subparser(parser, args.command)
    tail = list(argv)[list(argv).index(args.command) + 1 :] if args.command in argv else list(argv)
    given = given_dests(sub, tail)
    config: ConfigFile | None = load_config()
    if args.command == "plan" and "label" in given:
        given.add("baseline")  # plan --label is 0.2's --baseline: the command line beats the file
    args.config_file = config
    if config is not None and args.command != "config":
        # a file that changes what a command does is named where the user reads the result
        print(f"config: {config.display}", file=sys.stderr)
    args.given = given
    for dest, value in (config.values if config else {}).items():
        target = CLI_DEST.get(dest, dest)
        if hasattr(args, target) and target not in given:
            setattr(args, target, value)
    cli = trusted_from_options(getattr(args, "model_role", None), getattr(args, "check_function", None))
    args.trusted = assemble(files=config.trusted if config else None, cli=cli)


def _subparser(parser: argparse.ArgumentParser, command: str) -> Any:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[command]
