"""``python -m leader_eval``: the ``leader-eval`` command."""

import sys

from leader_eval.cli.app import main

sys.exit(main())
