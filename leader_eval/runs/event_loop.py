"""The event loop a run samples on: uvloop's where it is installed, else asyncio's own.

A run spends its CPU between the network and scoring, and the loop's own share (scheduling
thousands of request tasks, their timers and socket callbacks) is what libuv does in C: measured
side by side on 2,000 requests at 128 in flight, ~0.04 s of CPU less per run (docs/performance.md).
What runs on the loop is the same either way: asyncio's ``Runner`` with another ``loop_factory``,
so Ctrl-C cancels the run's task and a run's records are written as before.

``LEADER_EVAL_EVENT_LOOP=asyncio`` keeps asyncio's loop (a backend library that needs it; a
comparison); ``uvloop`` asks for uvloop and is an error where it is not installed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from leader_eval.errors import LeaderEvalError

ENV = "LEADER_EVAL_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop ``loop_factory`` names."""
    try:
        factory = loop_factory()
    except LeaderEvalError:
        main.close()  # never awaited: no "coroutine was never awaited" warning beside the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` unless ``LEADER_EVAL_EVENT_LOOP`` says otherwise; None is
    asyncio's default loop."""
    choice = os.environ.get(ENV, "").strip().lower()
    if choice not in ("", *CHOICES):
        raise LeaderEvalError(f"{ENV}={os.environ[ENV][:40]!r}: not an event loop (use one of: {', '.join(CHOICES)})")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise LeaderEvalError(f"{ENV}=uvloop: uvloop is not installed (pip install uvloop)") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
