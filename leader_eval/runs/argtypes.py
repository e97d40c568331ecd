"""Value checkers for command-line and ini options: one line saying what is wrong, before anything runs.

Each function takes the option's text and returns the parsed value or raises
``argparse.ArgumentTypeError`` (a ``ValueError`` subclass is not needed: argparse and pytest's
``addoption(type=...)`` both turn ``ArgumentTypeError`` into a usage error, exit status 2). They
are the whole class of checks a measurement needs: counts are integers in range, rates and
probabilities lie in their interval, temperatures are finite and non-negative. A NaN or an
infinity is never a valid value of any of them (``float("nan")`` parses, so every float checker
rejects it explicitly).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from leader_eval.bounded.limits import MAX_SAMPLES_PER_CASE
from leader_eval.protocols import PROTOCOLS
from leader_eval.store.names import name_component  # a run label or baseline name is the store's to check

__all__ = [
    "finite_float",
    "int_list",
    "name_component",
    "non_negative_float",
    "non_negative_int",
    "open_probability",
    "positive_float",
    "positive_int",
    "probability",
    "protocol_name",
    "sample_count",
]


def _int(text: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _float(text: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (sample counts, token limits, case limits, concurrency)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 1")
    return value


def sample_count(text: str) -> int:
    """Samples per case: an integer from 1 to ``limits.MAX_SAMPLES_PER_CASE`` (a count past it
    would only end in running out of memory while the run is planned)."""

    value = positive_int(text)
    if value > MAX_SAMPLES_PER_CASE:
        raise argparse.ArgumentTypeError(
            f"{text!r}: at most {MAX_SAMPLES_PER_CASE:,} samples per case (docs/security.md)"
        )
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (a cap that may be zero, e.g. ``--max-samples 0``: sample nothing new)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 0")
    return value


def finite_float(text: str) -> float:
    """Any finite number (no NaN, no infinity)."""
    return _float(text)


def positive_float(text: str) -> float:
    """A finite number > 0 (timeouts in seconds)."""
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (temperatures, ages in days)."""
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def probability(text: str) -> float:
    """A finite number in [0, 1] (error-rate thresholds, overlap fractions, top_p)."""
    value = _float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must lie in [0, 1]")
    return value


def open_probability(text: str) -> float:
    """A finite number in (0, 1): a significance level (``alpha``) of 0 or 1 decides nothing."""
    value = _float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must lie strictly between 0 and 1")
    return value


def int_list(item: Callable[[str], int] = positive_int) -> Callable[[str], list[int]]:
    """A comma-separated list of integers each checked by ``item`` (``--steps 4000,8000``)."""

    def parse(text: str) -> list[int]:
        parts = [p.strip() for p in str(text).split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r} is an empty list")
        try:
            return [item(p) for p in parts]
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentTypeError(f"in {text!r}: {err}") from None

    parse.__name__ = f"list of {getattr(item, '__name__', 'int')}"
    return parse


def protocol_name(text: str) -> str:
    """One of the tool-call protocols the parser knows (checked before any model is contacted)."""

    if text not in PROTOCOLS:
        raise argparse.ArgumentTypeError(f"unknown protocol {text!r} (known: {', '.join(PROTOCOLS)})")
    return text
