"""numpy for the package, imported here with OpenBLAS's idle threads told to sleep at once.

numpy's OpenBLAS starts a worker thread per further core as it loads; each spins for 2**28 cycles
(about 0.1 s of a core) waiting for work before it sleeps, and again after every BLAS call. The
package makes few and small BLAS calls, so that spin is pure cost: about 0.11 s of CPU per process,
a third of what a plain aiohttp client spends on a whole 2,000-sample run (docs/performance.md,
issue 21). OpenBLAS reads ``OPENBLAS_THREAD_TIMEOUT`` (log2 of the cycles; 4 is its least) once,
as it loads, so the variable is set for this import only and removed after it: the process's
environment is left as it was. A caller who set the variable keeps their value, a process that
imported numpy first keeps its pool as it was, and the pool's size and BLAS speed are unchanged
(measured: twenty 300x300 products take the same time either way).

Every module of the package takes numpy from here (tests/test_layout.py holds them to it), so
whichever path imports numpy first in a process, it is this import.
"""

from __future__ import annotations

import os
import sys

__all__ = ["np", "npt"]

THREAD_TIMEOUT = "OPENBLAS_THREAD_TIMEOUT"
IDLE_SPIN = "4"  # 2**4 cycles: an idle worker sleeps at once (OpenBLAS's own default is 28)

if "numpy" in sys.modules or THREAD_TIMEOUT in os.environ:
    import numpy as np
else:
    os.environ[THREAD_TIMEOUT] = IDLE_SPIN
    try:
        import numpy as np
    finally:
        del os.environ[THREAD_TIMEOUT]

import numpy.typing as npt  # noqa: E402  (after numpy has loaded as above)
