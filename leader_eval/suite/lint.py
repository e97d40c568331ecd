"""``leader-eval lint``: every error of a suite file in one pass, each ``FILE:LINE: what``.

Loading collects every error the suite's own content holds (``suite.load_suite`` raises them
together as ``SuiteErrors``); then every case is rendered, and a case that fails to render is
one more error, not the end of the file. A rendering error that comes from a value the case
inherits from ``defaults: vars:`` is reported once, at that value's line under ``defaults:``
(naming the cases that inherit it), rather than once per case at lines that are not wrong.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from leader_eval.bounded.limits import LimitExceeded
from leader_eval.errors import LeaderEvalError, SuiteError, SuiteErrors
from leader_eval.suite.load import load_suite
from leader_eval.suite.records import Case, Suite
from leader_eval.suite.render import render_case, render_messages

#: at most this many extra renders, and seconds of them, per file to find which inherited
#: default breaks a case (beyond them the error stays at the case's line)
MAX_ATTRIBUTION_RENDERS = 64
MAX_ATTRIBUTION_SECONDS = 2.0
#: ``leader-eval lint`` prints at most this many errors of one file, then how many more there are
MAX_PRINTED_ERRORS = 200
#: once a file has an error, rendering of its remaining cases stops past this many seconds
MAX_RENDER_SECONDS_AFTER_AN_ERROR = 8.0
#: "case 'ID': what": an error a case reports in the words another case may share
_CASE_PREFIX = re.compile(r"^case '([^']*)': (.*)$", re.S)
#: a neutral value put in place of an inherited default to see whether the error goes with it
_PROBE = "x"


@dataclass
class LintResult:
    """One file: the suite when it loaded, a row per case (id, line, prompt tokens), and errors."""

    path: str
    suite: Suite | None = None
    rows: list[list[Any]] = field(default_factory=list)
    errors: list[LeaderEvalError] = field(default_factory=list)


def lint_file(path: str | Path, *, root: str | Path | None = None, backend: Any = None) -> LintResult:
    """Load ``path`` and render each case (with ``backend``'s chat template and token count
    when given); every error is collected, none stops the file."""
    result = LintResult(str(path))
    try:
        suite = load_suite(path, root=root)
    except SuiteErrors as exc:
        result.errors = coalesce(exc.errors)
        return result
    except LeaderEvalError as exc:
        result.errors.append(exc)
        return result
    result.suite = suite
    defaults = _DefaultsProbe(suite)
    started = time.monotonic()
    for index, case in enumerate(suite.cases):
        spent = time.monotonic() - started
        if result.errors and spent > MAX_RENDER_SECONDS_AFTER_AN_ERROR:
            # the file already fails: more errors are not worth an unbounded wait for them
            left = len(suite.cases) - index
            result.errors.append(
                SuiteError(
                    *case.where(suite.path), f"{left} more case(s) not rendered: lint stopped after {spent:.0f} s"
                )
            )
            break
        try:
            result.rows.append(_render(suite, case, backend))
        except SuiteError as exc:
            if isinstance(exc.__cause__, LimitExceeded):
                # a template past its time or memory bound fails every case the same way:
                # rendering the others would only multiply the bound by the number of cases
                result.errors.append(exc)
                break
            result.errors.append(defaults.attribute(index, case, exc) or exc)
        except LeaderEvalError as exc:
            result.errors.append(exc)
    result.errors = coalesce(_merge_inherited(result.errors))
    return result


def coalesce(errors: Sequence[LeaderEvalError]) -> list[LeaderEvalError]:
    """One line for an error that several cases share word for word (a broken scaffold, an
    inherited setting): the first case's ``FILE:LINE``, then the other cases and their lines."""
    groups: dict[tuple[str, str], list[tuple[SuiteError, str]]] = {}
    order: list[LeaderEvalError | tuple[str, str]] = []
    for e in errors:
        m = _CASE_PREFIX.match(e.message) if isinstance(e, SuiteError) else None
        if not isinstance(e, SuiteError) or m is None:
            order.append(e)
            continue
        key = (e.path, m.group(2))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append((e, m.group(1)))
    out: list[LeaderEvalError] = []
    for item in order:
        if not isinstance(item, tuple):
            out.append(item)
            continue
        (first, _), *rest = groups[item]
        if not rest:
            out.append(first)
            continue
        others = [f"{case_id!r} line {e.line}" for e, case_id in rest]
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        out.append(SuiteError(first.path, first.line, f"{first.message} (the same in case {shown})"))
    return out


def _render(suite: Suite, case: Case, backend: Any) -> list[Any]:
    # a case from a data file is shown at its place there (FILE:LINE, FILE:row N)
    where = case.line if case.source is None else ":".join(str(x) for x in case.where(suite.path) if x is not None)
    if backend is None:
        render_messages(suite, case)
        return [case.id, where, "-"]
    n = render_case(suite, case, backend).prompt.n_tokens
    ctx = backend.context_length
    note = " (exceeds context)" if ctx and n and n > ctx else ""
    return [case.id, where, f"{n}{note}"]


class _Inherited(SuiteError):
    """A rendering error caused by ``defaults: vars: NAME``; the cases that inherit it."""

    def __init__(self, path: str, line: int, name: str, message: str, case_id: str):
        self.name = name
        self.detail = message
        self.case_ids = [case_id]
        super().__init__(path, line, self._text())

    def _text(self) -> str:
        shown = ", ".join(repr(c) for c in self.case_ids[:5]) + (", ..." if len(self.case_ids) > 5 else "")
        n = len(self.case_ids)
        return f"defaults: vars: {self.name}: {self.detail} (inherited by {n} case{'s' if n > 1 else ''}: {shown})"

    def add(self, case_id: str) -> None:
        self.case_ids.append(case_id)
        self.message = self._text()
        self.args = (f"{self.path}:{self.line}: {self.message}",)


class _DefaultsProbe:
    """Finds the inherited default behind a case's rendering error: the one whose replacement
    by a neutral value makes the error go away."""

    def __init__(self, suite: Suite):
        self.suite = suite
        self.budget = MAX_ATTRIBUTION_RENDERS
        self.seconds = 0.0
        lines = suite.lines
        self.names = [p[2] for p in lines if len(p) == 3 and p[:2] == ("defaults", "vars") and isinstance(p[2], str)]

    def attribute(self, index: int, case: Case, exc: SuiteError) -> SuiteError | None:
        lines = self.suite.lines
        inherited = [n for n in self.names if ("cases", index, "vars", n) not in lines and n in case.vars]
        prefix = f"case {case.id!r}: "
        for name in inherited:
            if self.budget <= 0 or self.seconds >= MAX_ATTRIBUTION_SECONDS:
                return None
            self.budget -= 1
            t0 = time.monotonic()
            try:
                render_messages(self.suite, replace(case, vars={**case.vars, name: _PROBE}))
            except LeaderEvalError:
                continue
            finally:
                self.seconds += time.monotonic() - t0
            detail = exc.message.removeprefix(prefix)
            return _Inherited(str(self.suite.path), lines[("defaults", "vars", name)], name, detail, case.id)
        return None


def _merge_inherited(errors: Sequence[LeaderEvalError]) -> list[LeaderEvalError]:
    """One error per (inherited default, message), listing every case that inherits it."""
    out: list[LeaderEvalError] = []
    seen: dict[tuple[str, str], _Inherited] = {}
    for e in errors:
        if isinstance(e, _Inherited):
            key = (e.name, e.detail)
            if key in seen:
                seen[key].add(e.case_ids[0])
                continue
            seen[key] = e
        out.append(e)
    return out
