"""numpy for the package: loaded at its first use, with OpenBLAS's idle threads told to sleep.

Two costs of ``import numpy`` that a run does not need to pay where it does now:

- **When.** Loading numpy takes ~40 ms of the one thread, and nothing a run does before its first
  request needs it (only scoring and the statistics do). ``np`` here is numpy loaded at the first
  attribute read, so a run's first requests leave that much sooner and numpy loads while they
  are in flight (the live scorer, where the summary will need it) or not at all (a run of
  one-sample cases: ``stats.core`` counts 0/1 scores without it).
- **The spin.** numpy's OpenBLAS starts a worker thread per further core as it loads; each spins
  for 2**28 cycles (about 0.1 s of a core) waiting for work before it sleeps, and again after
  every BLAS call. The package makes few and small BLAS calls, so that spin is pure cost: about
  0.11 s of CPU per process, a third of what a plain aiohttp client spends on a whole 2,000-sample
  run (docs/performance.md, issue 21). OpenBLAS reads ``OPENBLAS_THREAD_TIMEOUT`` (log2 of the
  cycles; 4 is its least) once, as it loads, so the variable is set for that import only and
  removed after it: the process's environment is left as it was. A caller who set the variable
  keeps their value, a process that imported numpy first keeps its pool as it was, and the pool's
  size and BLAS speed are unchanged (measured: twenty 300x300 products take the same time).
  The environment is changed only while the process runs no other Python thread: a C library
  reading it in another thread (a DNS lookup in aiohttp's resolver threads) must never see it
  change; with another thread alive numpy is imported as it is, spin and all.

Every module of the package takes numpy from here (tests/test_layout.py holds them to it). A
dependency that imports numpy itself (llama-cpp-python, the Tinker SDK) loads it first, with
OpenBLAS's defaults. Type checkers see numpy itself.
"""

from __future__ import annotations

import os
import sys
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["load_numpy", "np"]

THREAD_TIMEOUT = "OPENBLAS_THREAD_TIMEOUT"
IDLE_SPIN = "4"  # 2**4 cycles: an idle worker sleeps at once (OpenBLAS's own default is 28)

_lock = threading.Lock()  # one thread sets and removes the variable around the one import


def load_numpy() -> ModuleType:
    """numpy, imported now if it is not yet (with the idle spin bounded as above), with the two
    parts numpy loads only when first read and every run's summary reads: ``numpy.random`` (the
    bootstrap) and ``numpy.ma`` (read by ``np.quantile``): ~15 ms, loaded with the rest while a
    run's first requests are in flight instead of after its last response."""
    with _lock:
        if "numpy" in sys.modules or THREAD_TIMEOUT in os.environ or threading.active_count() > 1:
            import numpy
        else:
            os.environ[THREAD_TIMEOUT] = IDLE_SPIN
            try:
                import numpy
            finally:
                del os.environ[THREAD_TIMEOUT]
        import numpy.ma
        import numpy.random
    return numpy


class _Numpy:
    """numpy's namespace, loaded at the first attribute read; each name read is kept, so later
    reads are plain attribute lookups."""

    def __getattr__(self, name: str) -> Any:
        value = getattr(load_numpy(), name)
        setattr(self, name, value)
        return value

    def __repr__(self) -> str:
        return repr(load_numpy())


if TYPE_CHECKING:
    import numpy as np
else:
    np = _Numpy()
