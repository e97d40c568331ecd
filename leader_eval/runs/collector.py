"""The garbage collector's regime while many long-lived objects exist: a run's suite and plan while
it samples, a finished run's records while its report is written.

CPython's collector walks every object of a generation on each of its passes, though objects that
live for the whole task can never be garbage; loading a suite makes many of them and no cycles,
and each sample's records are garbage or kept, not cycles. ``long_lived`` freezes what is alive
(``gc.freeze``: out of every pass) and collects the young generation every ``RUN_GC_THRESHOLD``
allocations instead of 700; both are undone when the block ends. Measured: the collector took a
sixth of a 2,000-sample run's CPU before, and writing that run's report ~15-20 ms of its ~65
(a pass over the run's records, just scored and not yet old)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator

#: the collector's first threshold inside ``long_lived`` (CPython's default is 700 allocations)
RUN_GC_THRESHOLD = 50_000


#: the young generation's threshold while a block builds (``long_lived(building=True)``): no pass
#: before ``settle``, whatever the size of what is built (it is all frozen then)
BUILDING_GC_THRESHOLD = 2**30


@contextlib.contextmanager
def long_lived(*, building: bool = False) -> Iterator[Callable[[], None]]:
    """Freeze what is alive now, and raise the young generation's threshold, until the block ends;
    it yields ``settle``, which freezes what the block has made so far (call it once what lives to
    the end is built). ``building``: no collection at all until ``settle`` (a suite loaded from
    its YAML and its rendered plan are nearly all kept, few cycles among them: a pass over a
    2,000-case suite while it is built took ~16 ms and found almost nothing; the few cycles that
    loading leaves are frozen with it, bounded by the suite's own size, and collected once the
    block ends). Left alone where the caller tunes the collector itself (objects already frozen,
    or collection disabled): then nothing changes, and nesting changes nothing."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield lambda: None
        return
    threshold = gc.get_threshold()
    running = (max(threshold[0], RUN_GC_THRESHOLD), *threshold[1:])
    gc.freeze()
    gc.set_threshold(BUILDING_GC_THRESHOLD if building else running[0], *threshold[1:])

    def settle() -> None:
        gc.freeze()
        gc.set_threshold(*running)

    try:
        yield settle
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
