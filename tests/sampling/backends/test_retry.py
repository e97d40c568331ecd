"""The one retry loop of the remote backends (``backends.base.retrying``), on its own: how many
attempts, what the give-up message says, and what is never retried."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

import pytest

from leader_eval.sampling.backends.base import AttemptError, GaveUp, RetryPolicy, retrying

NO_WAIT = RetryPolicy(max_retries=2, base_s=0.0, max_s=0.0)


def _judge(exc: Exception) -> AttemptError | None:
    return exc if isinstance(exc, AttemptError) else None


def _failing(*failures: Exception) -> tuple[list[int], Callable[[int], Awaitable[str]]]:
    seen: list[int] = []

    async def attempt(retries: int) -> str:
        seen.append(retries)
        if len(seen) <= len(failures):
            raise failures[len(seen) - 1]
        return "ok"

    return seen, attempt


def test_a_retryable_failure_is_retried_until_it_succeeds() -> None:
    seen, attempt = _failing(AttemptError("HTTP 503: busy", retryable=True))
    assert asyncio.run(retrying(attempt, _judge, NO_WAIT, random.Random(0))) == "ok"
    assert seen == [0, 1]


def test_after_max_retries_the_last_failure_is_given_up_with_the_count() -> None:
    seen, attempt = _failing(*(AttemptError("HTTP 500: down", retryable=True) for _ in range(5)))
    got = asyncio.run(retrying(attempt, _judge, NO_WAIT, random.Random(0)))
    assert got == GaveUp("HTTP 500: down", " (after 2 retries)", 2) and seen == [0, 1, 2]
    assert got.error == "HTTP 500: down (after 2 retries)"


def test_a_final_failure_is_not_retried_and_an_unjudged_exception_propagates() -> None:
    seen, attempt = _failing(AttemptError("HTTP 401: no key", retryable=False))
    got = asyncio.run(retrying(attempt, _judge, NO_WAIT, random.Random(0)))
    assert got == GaveUp("HTTP 401: no key", "", 0) and seen == [0]
    _, attempt = _failing(ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        asyncio.run(retrying(attempt, _judge, NO_WAIT, random.Random(0)))


def test_a_wait_past_the_deadline_gives_up_and_says_so() -> None:
    seen, attempt = _failing(*(AttemptError("timeout after 1 s", retryable=True, retry_after=30) for _ in range(3)))
    policy = RetryPolicy(max_retries=5, base_s=0.0, max_s=60.0)
    got = asyncio.run(retrying(attempt, _judge, policy, random.Random(0), deadline=time.monotonic() + 3, deadline_s=3))
    assert got == GaveUp("timeout after 1 s", " (sample deadline of 3 s reached after 0 retries)", 0)
    assert seen == [0]  # the server asked for 30 s: the deadline would pass while waiting
