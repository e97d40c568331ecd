"""The command line: `leader-eval SUBCOMMAND`. Each subcommand is a thin shell over the library API."""

from leader_eval.cli.app import console_main, main

__all__ = ["console_main", "main"]
