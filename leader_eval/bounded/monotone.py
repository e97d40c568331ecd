"""The edge of a monotone predicate over 0..limit, found in O(log n) tries: galloping (1, 2, 4,
... until a try fails), then halving. A short answer costs a try or two, a long one a few more;
the scaffold-echo check (a shared run of characters) and the gate's plan (the fewest samples
with enough power) both ask it."""

from __future__ import annotations

from collections.abc import Callable


def last_true(holds: Callable[[int], bool], limit: int) -> int:
    """The largest n in 0..``limit`` with ``holds(n)``, where ``holds`` is true from 0 up to some
    n and false after it (``holds(0)`` is taken as true, never asked); no try beyond ``limit``."""
    good, size = 0, 1
    while size <= limit and holds(size):
        good, size = size, size * 2
    bad = min(size, limit + 1)
    while bad - good > 1:
        mid = (good + bad) // 2
        if holds(mid):
            good = mid
        else:
            bad = mid
    return good
