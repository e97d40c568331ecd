"""``leader-eval cache info|prune``: the content-addressed sample cache."""

from __future__ import annotations

import argparse
import json

from leader_eval.store.cache import cache_info, cache_prune


def run(args: argparse.Namespace) -> int:
    if args.action == "info":
        print(json.dumps(cache_info(), indent=2))
    else:
        print(json.dumps(cache_prune(older_than_days=args.older_than_days), indent=2))
    return 0
