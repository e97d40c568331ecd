"""Load the Python checks a suite names from trusted configuration, and say which code they were.

A suite names checks (``checks: python: {polite: {...}}``); the functions come only from the
trusted table (``runs/trusted.py``: pyproject, the pytest ini, ``register_check`` in code, the
command line). This module is where they are imported (scoring does no I/O): ``bind_checks``
returns the suite with each function attached (``Suite.python_checks``), or a one-line error
naming the suite's line, the check and its module, before anything is sampled.

A check's version is recorded in the run manifest (``python_checks``): for ``module:function``
the sha256 of the module's file; for a callable registered in code its qualified name and the
sha256 of its source. Replay re-scores with the checks of today, so a changed check moves the
scores, and the two manifests say which code gave which.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from leader_eval.runs.trusted import NamedCheck, Trusted, TrustedError
from leader_eval.scoring.python_check import bind, configured, coverage_problems
from leader_eval.suite.load import Suite

__all__ = ["bind_checks", "changed_checks", "check_versions", "undefined_checks"]


def _where(suite: Suite, name: str) -> str:
    line = suite.lines.get(("checks", "python", name)) or suite.lines.get(("checks", "python")) or 1
    return f"{suite.path}:{line}"


def undefined_checks(suite: Suite, trusted: Trusted) -> list[str]:
    """One line per Python check the suite names that trusted configuration does not define, or
    that would check nothing (``scoring.python_check.coverage_problems``); ``leader-eval lint``
    prints them, a run refuses the first before sampling."""
    out = []
    for name in configured(suite):
        try:
            trusted.check(name, where=_where(suite, name))
        except TrustedError as err:
            out.append(str(err))
    return out + coverage_problems(suite)


def bind_checks(suite: Suite, trusted: Trusted) -> Suite:
    """``suite`` with every Python check it names loaded (``scoring.python_check.bind``); a check
    that is not defined, a module that does not import or a missing function is a one-line
    ``TrustedError`` naming the suite's line, the check and the module."""
    names = configured(suite)
    if not names:
        return suite
    problems = coverage_problems(suite)
    if problems:
        raise TrustedError(problems[0])
    functions: dict[str, tuple[Callable[..., Any], str, str]] = {}
    for name in names:
        where = _where(suite, name)
        named = trusted.check(name, where=where)
        try:
            fn = named.load()
        except TrustedError as err:
            raise TrustedError(" ".join(f"{where}: {err}".split())) from None
        functions[name] = (fn, _target(named, fn), _version(named, fn))
    return bind(suite, functions)


def check_versions(suite: Suite) -> dict[str, dict[str, str]]:
    """What the manifest records of each bound check: where it came from and which code it was."""
    return {b.name: {"target": b.target, "version": b.version} for b in suite.python_checks}


def changed_checks(recorded: Mapping[str, Any], now: Mapping[str, Mapping[str, str]]) -> dict[str, list[str | None]]:
    """The checks whose version differs from the recorded run's (a replay): name -> [then, now]
    (then None when the recorded run did not run that check)."""
    before = recorded.get("python_checks")
    before = before if isinstance(before, Mapping) else {}
    out: dict[str, list[str | None]] = {}
    for name, rec in now.items():
        then = before.get(name)
        then_version = then.get("version") if isinstance(then, Mapping) else None
        if then_version != rec.get("version"):
            out[name] = [then_version, rec.get("version")]
    return out


def _target(named: NamedCheck, fn: Callable[..., Any]) -> str:
    if isinstance(named.target, str):
        return named.target
    return f"{named.source}:{_qualified(fn)}"


def _qualified(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"


def _version(named: NamedCheck, fn: Callable[..., Any]) -> str:
    """``module-sha256:HEX`` of a ``module:function`` target's file, else ``source-sha256:HEX`` of
    the function's source, else ``unversioned`` (no source to hash: a builtin, a C function)."""
    if isinstance(named.target, str):
        module = sys.modules.get(named.target.partition(":")[0])
        path = getattr(module, "__file__", None)
        if path:
            try:
                return "module-sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except OSError:
                pass
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return f"unversioned ({_qualified(fn)}: no source)"
    return "source-sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()
