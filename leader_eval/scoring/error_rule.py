"""The error rule: a sample the model never produced is never a pass, in any entry point.

A sample ends in one of three outcomes: ``ok`` (scored), ``error`` (the sampler, transport or
backend failed: no model output to judge) or ``context_overflow`` (the prompt plus ``max_tokens``
did not fit the context). An ``error`` always counts against the run. A ``context_overflow``
counts as an error too, except in a stress run, whose purpose is to find the length at which the
model stops fitting: there it is the measured outcome.

``error_verdict`` decides whether a run (its summary) fails the rule: it fails when the share of
counted errors among all its samples exceeds ``max_error_rate`` (default 0: any error fails),
when it holds no sample at all, or when nothing in it was measured. ``case_verdict`` says the
same of one case record. ``run``, ``gate`` and the pytest plugin (both modes) use these two
functions, so the rule is the same everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from leader_eval.inert import inert
from leader_eval.secrets import scrub

DEFAULT_MAX_ERROR_RATE = 0.0
#: the first sampler error is shown in the run summary cut to this many characters
MAX_ERROR_TEXT = 300


@dataclass(frozen=True)
class ErrorVerdict:
    """Whether a run's sampler errors fail it, and the one line that says why."""

    n_samples: int
    n_errors: int  # counted errors (context overflows included unless a stress run)
    n_measured: int  # scored samples (plus overflows in a stress run)
    max_error_rate: float
    #: of ``n_errors``, the samples where a user's Python check raised or returned a wrong type
    #: (the output was scored, but not judged: never a pass)
    n_check_errors: int = 0

    @property
    def rate(self) -> float:
        return self.n_errors / self.n_samples if self.n_samples else 1.0

    @property
    def failed(self) -> bool:
        return self.n_samples == 0 or self.n_measured == 0 or self.rate > self.max_error_rate

    def message(self) -> str:
        if self.n_samples == 0:
            return "error rule: the run holds no samples: nothing was measured"
        if self.n_measured == 0:
            return f"error rule: none of {self.n_samples} samples was measured ({self.n_errors} errored)"
        checks = f", {self.n_check_errors} of them Python check errors" if self.n_check_errors else ""
        line = (
            f"error rule: {self.n_errors} of {self.n_samples} samples errored "
            f"({self.rate:.1%}{checks}; allowed --max-error-rate {self.max_error_rate:g})"
        )
        return line + (": FAIL" if self.failed else ": ok")


def check_max_error_rate(value: Any) -> float:
    """``value`` as a rate in [0, 1], or ValueError (a NaN would make every comparison false)."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"max error rate {value!r} is not a number") from None
    if not (math.isfinite(rate) and 0 <= rate <= 1):
        raise ValueError(f"max error rate {value!r} must lie in [0, 1]")
    return rate


def _count(rec: Mapping[str, Any], key: str) -> int:
    try:
        return int(rec.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def error_verdict(
    summary: Mapping[str, Any],
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    *,
    overflow_is_error: bool = True,
) -> ErrorVerdict:
    """Does this run fail the error rule? ``summary``: a run's ``summary.json`` (its ``overall``
    counts) or one of its ``overall`` / ``by_tag`` blocks; ``overflow_is_error=False`` for a
    stress run."""
    rate = check_max_error_rate(max_error_rate)
    overall = summary.get("overall", summary)
    if not isinstance(overall, Mapping):
        overall = {}
    n_samples = _count(overall, "n_samples")
    n_overflow = _count(overall, "n_context_overflow")
    n_checks = _count(overall, "n_check_errors")
    n_errors = _count(overall, "n_errors") + (n_overflow if overflow_is_error else 0) + n_checks
    n_measured = _count(overall, "n_scored") + (0 if overflow_is_error else n_overflow)
    return ErrorVerdict(n_samples, n_errors, n_measured, rate, n_checks)


def case_verdict(record: Mapping[str, Any], *, overflow_is_error: bool = True) -> str:
    """``pass`` | ``fail`` | ``error`` for one case record (``cases.json`` entry).

    ``fail``: a scored sample failed. ``error``: no scored sample failed, but some sample was not
    measured (a sampler error, an overflow outside a stress run) or none was scored at all: never
    a pass. ``pass``: every sample was scored and passed.
    """
    n_scored = _count(record, "n_scored")
    if _count(record, "n_passed") < n_scored:
        return "fail"
    n_overflow = _count(record, "n_context_overflow")
    n_errors = _count(record, "n_errors") + (n_overflow if overflow_is_error else 0)
    n_measured = n_scored + (0 if overflow_is_error else n_overflow)
    if n_measured == 0 or n_errors > 0:
        return "error"
    return "pass"


def is_stress_manifest(manifest: Mapping[str, Any]) -> bool:
    """A stress sweep's run (its manifest carries the ``stress`` block)."""
    return bool(manifest.get("stress"))


def first_sampler_error(samples: Iterable[Any]) -> dict[str, Any] | None:
    """The first ``error`` sample in (case id, index) order, as ``{case_id, index, error}``, or None.

    A run of 200 samples against a service that was down holds 200 copies of one message; the
    summary shows this one, so the cause is on screen without opening the run directory. The
    order does not depend on which request finished first (a merged run says the same). The text
    is made safe to print: secrets scrubbed (again: a run directory may come from elsewhere),
    control characters escaped, one line, at most ``MAX_ERROR_TEXT`` characters.
    """
    first = min(
        (s for s in samples if getattr(s, "outcome", None) == "error"),
        key=lambda s: (str(s.case_id), int(s.index)),
        default=None,
    )
    if first is None:
        return None
    return {"case_id": str(first.case_id), "index": int(first.index), "error": printable_error(first.error)}


def printable_error(text: Any) -> str:
    """``text`` as one printable line: secrets scrubbed, then ``inert`` (the one neutraliser)."""

    shown = inert(scrub(str(text or "unknown error")))
    return shown if len(shown) <= MAX_ERROR_TEXT else shown[: MAX_ERROR_TEXT - 3] + "..."


def format_first_check_error(record: Mapping[str, Any] | None, run_dir: Any = "RUN_DIR") -> str | None:
    """The summary line naming the first Python check error (``aggregate.check_errors``): the
    check, its module and the case, and where the traceback is."""
    if not isinstance(record, Mapping):
        return None
    return (
        f"first Python check error ({printable_error(record.get('check'))}, {printable_error(record.get('target'))}, "
        f"case {printable_error(record.get('case_id'))}, sample {record.get('index')}): "
        f"{printable_error(record.get('error'))} "
        f"(traceback: leader-eval show {printable_error(run_dir)} --case {printable_error(record.get('case_id'))})"
    )


def format_first_error(record: Mapping[str, Any] | None) -> str | None:
    """The summary line for ``first_sampler_error``'s record (never starts a CI workflow command)."""
    if not isinstance(record, Mapping):
        return None
    return (
        f"first sampler error (case {printable_error(record.get('case_id'))}, sample {record.get('index')}): "
        f"{printable_error(record.get('error'))}"
    )
