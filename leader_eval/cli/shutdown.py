"""How the ``leader-eval`` process ends once its command has returned.

A normal interpreter exit frees every object still alive, one by one: after a command that read
or wrote a 2,000-sample run, ~10-14 ms of the ~22 ms of CPU its process spends once ``main``
returns (more for larger runs; the rest is the kernel taking back the memory), to give back
memory the operating system reclaims at once anyway. Like mypy's
``--fast-exit`` (its default), the command's process ends with ``os._exit`` instead, after doing
what an orderly exit does that anyone could observe: the standard streams are flushed and the
``atexit`` handlers run (logging's flush, ``multiprocessing``'s and ``tempfile``'s clean-ups, a
coverage tool's save). Only where that cannot be made safe does the process exit the usual way:
another thread is still running (an orderly exit waits for it), a stream cannot be flushed (the
usual exit reports it), leader-eval is not the program (``runpy`` from another program, which
expects ``SystemExit``), a tracer, profiler or debugger watches the process (``cProfile``, ``pdb``,
``trace``, a coverage tool: they write their results after the program returns), or
``LEADER_EVAL_FAST_EXIT=0`` asks for it. ``main()`` called in-process (tests, a user's script)
never ends the process: only the console entry points call ``exit_process``.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

#: ``0`` makes the command's process exit the usual way (every object freed)
FAST_EXIT_ENV = "LEADER_EVAL_FAST_EXIT"


def exit_process(status: int) -> NoReturn:
    """End the process with ``status``, without freeing its objects where that is safe."""
    if os.environ.get(FAST_EXIT_ENV, "").strip() == "0" or threading.active_count() > 1 or not _alone():
        sys.exit(status)
    if not _flushed():
        sys.exit(status)
    # the handlers an orderly exit runs (they may print, so the streams are flushed after them);
    # ``_run_exitfuncs`` is the interpreter's own call for it, public in typeshed's atexit stub
    atexit._run_exitfuncs()
    if threading.active_count() > 1 or not _flushed():  # a handler started a thread or broke a stream
        sys.exit(status)
    os._exit(status)


def _flushed() -> bool:
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, a closed stream: the orderly exit says so
            return False
    return True


def _alone() -> bool:
    """leader-eval is the program (its console script or ``python -m``: the ``__main__`` module is
    the one that called ``console_main``) and nothing traces, profiles or debugs it."""
    main = sys.modules.get("__main__")
    return (
        callable(getattr(main, "console_main", None))
        and sys.gettrace() is None
        and sys.getprofile() is None
        and "pdb" not in sys.modules
    )
