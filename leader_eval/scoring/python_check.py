"""Users' own checks in Python, run in the scorer beside the built-in ones.

A suite names them under ``checks: python:`` (``{polite: {hard: true, tags: [support], options:
{...}}}``); what a name means (the function) comes only from trusted configuration, loaded in
``runs/python_checks.py`` and attached to the suite as ``Suite.python_checks`` (``bind``). This
module does no I/O: it turns the suite's configuration and the loaded functions into
``BoundCheck``s, and runs one on one output.

Failing loudly (docs/checks.md): an exception, or a return value that is neither a ``bool`` nor a
``CheckVerdict``, is a *check error*: the check fails with reason ``check_error`` (never a pass),
its record holds the exception and the stack (``show`` prints it), and the run counts it under
the error rule, so a run with one fails unless ``--max-error-rate`` allows it.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.suite.load import Case, Suite
from leader_eval.types import BoundCheck, CheckContext, CheckResult, CheckVerdict, Reason

#: a user check's record is named ``python:NAME`` (never a built-in check's name)
PREFIX = "python:"
#: stack frames kept in a check error's record (the innermost ones: where the user's code raised)
MAX_FRAMES = 12
#: characters of a check's own reason and detail kept in its record
MAX_TEXT = 2000


class CheckNotBound(LeaderEvalError):
    """A suite names a Python check whose function was not loaded (scoring it would skip it)."""


def configured(suite: Suite) -> dict[str, dict[str, Any]]:
    """The suite's ``checks: python:`` entries by name (the schema checked their shape)."""
    table = suite.checks.get("python") if isinstance(suite.checks, Mapping) else None
    return {str(k): dict(v or {}) for k, v in table.items()} if isinstance(table, Mapping) else {}


def bind(suite: Suite, functions: Mapping[str, tuple[Callable[..., Any], str, str]]) -> Suite:
    """``suite`` with its Python checks bound: ``functions`` maps each name the suite uses to
    (function, target, version). A name without a function is ``CheckNotBound``."""
    bound = []
    for name, cfg in configured(suite).items():
        if name not in functions:
            raise CheckNotBound(f"{suite.path}: Python check {name!r} has no function bound")
        fn, target, version = functions[name]
        bound.append(
            BoundCheck(
                name,
                fn,
                target,
                version,
                hard=bool(cfg.get("hard", False)),
                tags=tuple(str(t) for t in cfg.get("tags") or ()),
                options=dict(cfg.get("options") or {}),
            )
        )
    return replace(suite, python_checks=tuple(bound))


def coverage_problems(suite: Suite) -> list[str]:
    """One line per Python check that would judge nothing a suite author expects: its ``tags``
    match no case (a typo would leave every output unchecked), or it would apply to an episode
    case (episodes are scored step by step, where Python checks do not run in this version)."""
    out = []
    for name, cfg in configured(suite).items():
        tags = {str(t) for t in cfg.get("tags") or ()}
        applies = [c for c in suite.cases if not tags or tags & set(c.tags)]
        line = suite.lines.get(("checks", "python", name)) or suite.lines.get(("checks", "python")) or 1
        where = f"{suite.path}:{line}: checks.python.{name}"
        episodes = [c.id for c in applies if c.episode is not None]
        if episodes:
            out.append(
                f"{where}: would apply to episode case {episodes[0]!r}, where Python checks do not run in "
                "this version: restrict it with tags: to cases that are not episodes"
            )
        elif not applies:
            out.append(f"{where}: tags {sorted(tags)} match no case, so it would check nothing")
    return out


def checks_for(suite: Suite, case: Case) -> tuple[BoundCheck, ...]:
    """The bound checks that run on ``case``; ``CheckNotBound`` when the suite names one that is
    not bound (scoring through a path that never loaded it must not skip it silently)."""
    names = configured(suite)
    if not names:
        return ()
    have = {b.name for b in suite.python_checks}
    missing = sorted(set(names) - have)
    if missing:
        raise CheckNotBound(
            f"{suite.path}: the suite names Python check(s) {', '.join(missing)}, which were not loaded: "
            "score it through leader_eval.run (or runs.python_checks.bind_checks) with the check "
            "functions defined in trusted configuration"
        )
    if case.episode is not None:  # episodes are scored step by step: not in this version
        return ()
    return tuple(b for b in suite.python_checks if b.name in names and (not b.tags or set(b.tags) & set(case.tags)))


def run_check(bound: BoundCheck, ctx: CheckContext) -> CheckResult:
    """Run one user check on one output; an exception or a wrong return type is a check error."""
    name = PREFIX + bound.name
    try:
        got = bound.fn(ctx)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # user code: pytest.skip/fail and sys.exit too, never a pass
        return check_error(bound, f"raised {type(exc).__name__}: {_one_line(str(exc))}", exc.__traceback__)
    if isinstance(got, bool):
        got = CheckVerdict(got)
    if not isinstance(got, CheckVerdict):
        return check_error(
            bound, f"returned {type(got).__module__}.{type(got).__qualname__}, not a bool or a CheckVerdict", None
        )
    problem = _verdict_problem(got)
    if problem:
        return check_error(bound, problem, None)
    data: dict[str, Any] = {"target": bound.target, "version": bound.version}
    if got.data:
        data["data"] = dict(got.data)
    if got.passed:
        return CheckResult(name, True, data=data)
    detail = ": ".join(t for t in (_cut(got.reason), _cut(got.detail)) if t)
    if got.reason:
        data["reason"] = _cut(got.reason)
    return CheckResult(name, False, None, detail, hard=bool(got.hard or bound.hard), data=data)


def check_error(bound: BoundCheck, what: str, tb: TracebackType | None) -> CheckResult:
    data: dict[str, Any] = {"target": bound.target, "version": bound.version, "error": what}
    if tb is not None:
        data["traceback"] = stack_lines(tb.tb_next or tb)  # the first frame is run_check's own call
    return CheckResult(
        PREFIX + bound.name, False, Reason.CHECK_ERROR, f"check {bound.name} ({bound.target}) {what}", data=data
    )


def stack_lines(tb: TracebackType) -> list[str]:
    """``File "x.py", line N, in f`` for each frame, innermost last, without reading any source
    file (``traceback``'s own formatting reads the lines: I/O, which scoring never does)."""
    frames = [
        f'File "{frame.f_code.co_filename}", line {lineno}, in {frame.f_code.co_name}'
        for frame, lineno in traceback.walk_tb(tb)
    ]
    if len(frames) > MAX_FRAMES:
        frames = [f"... {len(frames) - MAX_FRAMES} outer frame(s)", *frames[-MAX_FRAMES:]]
    return frames


def _verdict_problem(v: CheckVerdict) -> str | None:
    if not isinstance(v.passed, bool):
        return f"returned CheckVerdict(passed={type(v.passed).__name__}), not a bool"
    for field_name in ("reason", "detail"):
        if not isinstance(getattr(v, field_name), str):
            return f"returned CheckVerdict({field_name}={type(getattr(v, field_name)).__name__}), not a str"
    if not isinstance(v.hard, bool):
        return f"returned CheckVerdict(hard={type(v.hard).__name__}), not a bool"
    if not isinstance(v.data, Mapping):
        return f"returned CheckVerdict(data={type(v.data).__name__}), not a mapping"
    try:  # the record is JSON: a value that is not would fail the run's write, not this check
        json.dumps(dict(v.data), allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"returned CheckVerdict(data=...) that is not JSON ({_one_line(str(exc))})"
    return None


def _one_line(text: str) -> str:
    return _cut(" ".join(text.split()))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def message_of(
    visible_text: str, calls: Sequence[Any], message_args: frozenset[tuple[str, str]], message_names: frozenset[str]
) -> str:
    """What the room reads: the first call's message argument (the suite's message arguments,
    else an argument named as a message), else the visible text."""
    for call in calls:
        args = call.arguments if isinstance(call.arguments, Mapping) else {}
        for tool, arg in message_args:
            if tool == call.name and isinstance(args.get(arg), str):
                return str(args[arg])
    for call in calls:
        args = call.arguments if isinstance(call.arguments, Mapping) else {}
        for arg, value in args.items():
            if str(arg).lower() in message_names and isinstance(value, str):
                return value
    return visible_text.strip()
