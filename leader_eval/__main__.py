"""``python -m leader_eval``: the ``leader-eval`` command."""

from leader_eval.cli.app import console_main

console_main()
