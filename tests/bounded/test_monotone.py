"""The edge of a monotone predicate (``bounded/monotone.py``): the answer a linear scan gives, in
O(log n) tries, none at 0 or beyond the limit."""

from __future__ import annotations

import random

from leader_eval.bounded.monotone import last_true


def test_last_true_is_the_linear_scans_answer_in_few_tries_within_the_limit() -> None:
    rng = random.Random(5)
    for _ in range(3000):
        limit = rng.choice([0, 1, 2, 3, 7, 8, 100, 1023, 1024, 10**6])
        edge = rng.randint(0, limit + 5)  # holds for 0..edge
        asked: list[int] = []

        def holds(n: int, edge: int = edge, asked: list[int] = asked) -> bool:
            asked.append(n)
            return n <= edge

        assert last_true(holds, limit) == min(edge, limit)
        assert all(1 <= n <= limit for n in asked)
        assert len(asked) <= 2 * max(1, limit).bit_length() + 2
