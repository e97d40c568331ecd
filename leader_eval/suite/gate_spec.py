"""A suite's ``gate:`` section: count budgets, absolute floors and ceilings, the power guard.

    gate:
      max_hard_fails: 0            # count budgets (0.2)
      max_leaks: 0
      min: {score: 0.6}            # floors: the run must not be below (higher-is-better metrics)
      max: {hard_fail_rate: 0.0}   # ceilings: the run must not be above (lower-is-better metrics)
      judge: bound                 # bound (default): credibly beyond; point: the estimate beyond
      detect: 0.10                 # the smallest drop the gate must catch (power guard)
      underpowered: "reason"       # acknowledges an underpowered gate in CI mode
      stress:                      # what a long-context sweep (leader-eval stress) must hold
        - at: 40000                #   at this prompt length (tokens; a length of the sweep)
          min: {score: 0.5}        #   a floor, judged like the floors above
          max_drop: {score: 0.15}  #   the largest credible drop from the shortest length (paired)

The section is left out of the suite's content hash (``suite._content_hash``): adding a floor
does not make a committed golden stale. ``update-golden`` copies it into the golden (``gate``), so
a golden gated without its suite still carries the contract; the suite's own section wins when
both are at hand. The same rules check both copies (:func:`gate_problem`): the suite's at load,
with its ``FILE:LINE``; the golden's when the gate reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from leader_eval.bounded.limits import MAX_STRESS_TOKENS
from leader_eval.stats.metrics import ALL_METRICS

__all__ = [
    "BUDGETS",
    "DEFAULT_DETECT",
    "JUDGES",
    "STRESS_METRICS",
    "GateSpec",
    "StressRequirement",
    "gate_problem",
    "gate_spec",
]

#: count budget key -> (metric whose events it counts, what an event is)
BUDGETS = {"max_hard_fails": ("hard_fail_rate", "hard-failing samples"), "max_leaks": ("leak_rate", "leaking samples")}
#: the smallest drop (absolute, 0..1 scale) the power guard checks the gate can catch by default
DEFAULT_DETECT = 0.10
#: how a floor or ceiling is judged: on the interval's far bound (credibly beyond) or the point estimate
JUDGES = ("bound", "point")
KEYS = (*BUDGETS, "min", "max", "judge", "detect", "underpowered", "stress")
#: what a stress requirement may hold a length to: the per-variant metrics a sweep measures
STRESS_METRICS = ("score", "strict_format_rate", "tool_accuracy")
STRESS_KEYS = ("at", "min", "max_drop")


@dataclass(frozen=True)
class StressRequirement:
    """What must hold at one prompt length of a stress sweep (``gate: stress:``)."""

    at: int
    floors: dict[str, float] = field(default_factory=dict)
    max_drops: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class GateSpec:
    """The parsed section (defaults filled in)."""

    budgets: dict[str, int] = field(default_factory=dict)
    floors: dict[str, float] = field(default_factory=dict)
    ceilings: dict[str, float] = field(default_factory=dict)
    judge: str = "bound"
    detect: float = DEFAULT_DETECT
    underpowered: str | None = None
    stress: tuple[StressRequirement, ...] = ()

    def limit(self, metric: str) -> tuple[str, float] | None:
        """(``min`` or ``max``, the value) the section sets on ``metric``, else None."""
        if metric in self.floors:
            return "min", self.floors[metric]
        if metric in self.ceilings:
            return "max", self.ceilings[metric]
        return None


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def gate_problem(section: Any) -> tuple[tuple[str, ...], str] | None:
    """(path of the offending key, what is wrong) for a ``gate:`` section that must be refused, else None.

    Names come from the metric table (``metrics.ALL_METRICS``): an unknown metric, a value outside
    [0, 1], a floor on a lower-is-better metric or a ceiling on a higher-is-better one (a floor on
    a hard-fail rate would pass a run that fails every sample), a metric that is not a proportion,
    a ``detect`` outside (0, 1), an unknown ``judge`` and an empty acknowledgement are refused.
    """
    if not isinstance(section, Mapping):
        return (), "gate: must be a mapping (max_hard_fails, max_leaks, min, max, judge, detect, underpowered)"
    for key in section:
        if key not in KEYS:
            return (str(key),), f"gate: unknown key {key!r} (known: {', '.join(KEYS)})"
    for key in BUDGETS:
        if key in section:
            v = section[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                return (key,), f"gate: {key} must be a whole number >= 0, got {v!r}"
    for key, better, word in (("min", True, "floor"), ("max", False, "ceiling")):
        limits = section.get(key, {})
        if not isinstance(limits, Mapping):
            return (key,), f"gate: {key} must map metric names to numbers in [0, 1], e.g. {{score: 0.6}}"
        for name, value in limits.items():
            spec = ALL_METRICS.get(str(name))
            if spec is None:
                known = ", ".join(n for n, m in ALL_METRICS.items() if m.proportion)
                return (key, str(name)), f"gate: {key}: unknown metric {name!r} (known: {known})"
            if not spec.proportion:
                return (key, str(name)), f"gate: {key}: {name} is not a proportion; it cannot take a {word}"
            if not _number(value) or not 0 <= value <= 1:
                return (key, str(name)), f"gate: {key}: {name}: {value!r} is not a number in [0, 1]"
            if spec.higher_is_better != better:
                other = "max" if better else "min"
                return (key, str(name)), (
                    f"gate: {key}: {name} is {spec.direction}-is-better; give it a {'ceiling' if better else 'floor'} "
                    f"under '{other}:' instead"
                )
    if "judge" in section and section["judge"] not in JUDGES:
        return ("judge",), f"gate: judge must be one of {', '.join(JUDGES)}, got {section['judge']!r}"
    if "detect" in section:
        v = section["detect"]
        if not _number(v) or not 0 < v < 1:
            return ("detect",), f"gate: detect must be a number in (0, 1) (a drop on the 0..1 scale), got {v!r}"
    if "underpowered" in section:
        v = section["underpowered"]
        if not isinstance(v, str) or not v.strip():
            return (
                "underpowered",
            ), "gate: underpowered must say why an underpowered gate is accepted (non-empty text)"
    if "stress" in section:
        return _stress_problem(section["stress"])
    return None


def _stress_problem(items: Any) -> tuple[tuple[str, ...], str] | None:
    example = "e.g. [{at: 40000, min: {score: 0.5}, max_drop: {score: 0.15}}]"
    if not isinstance(items, list) or not items:
        return ("stress",), f"gate: stress must be a non-empty list of requirements, {example}"
    seen: set[int] = set()
    for i, item in enumerate(items):
        where: tuple[str, ...] = ("stress", str(i))
        if not isinstance(item, Mapping):
            return where, f"gate: stress[{i}] must be a mapping (at, min, max_drop), {example}"
        for key in item:
            if key not in STRESS_KEYS:
                return (*where, str(key)), f"gate: stress[{i}]: unknown key {key!r} (known: {', '.join(STRESS_KEYS)})"
        at = item.get("at")
        if isinstance(at, bool) or not isinstance(at, int) or at < 1:
            return (
                *where,
                "at",
            ), f"gate: stress[{i}]: at must be a prompt length in tokens (an integer >= 1), got {at!r}"
        if at > MAX_STRESS_TOKENS:
            return (
                *where,
                "at",
            ), f"gate: stress[{i}]: at {at:,} is over the largest sweep length, {MAX_STRESS_TOKENS:,}"
        if at in seen:
            return (*where, "at"), f"gate: stress[{i}]: length {at} has two requirements; merge them"
        seen.add(at)
        if not item.get("min") and not item.get("max_drop"):
            return where, f"gate: stress[{i}]: give a floor (min) or a largest drop (max_drop), or both"
        for key, word in (("min", "floor"), ("max_drop", "largest drop")):
            limits = item.get(key, {})
            if not isinstance(limits, Mapping):
                return (*where, key), f"gate: stress[{i}]: {key} must map metric names to numbers in [0, 1]"
            for name, value in limits.items():
                if name not in STRESS_METRICS:
                    return (*where, key, str(name)), (
                        f"gate: stress[{i}]: {key}: a sweep measures {', '.join(STRESS_METRICS)}, not {name!r}"
                    )
                if not _number(value) or not 0 <= value <= 1:
                    return (*where, key, str(name)), (
                        f"gate: stress[{i}]: {key}: {name}: {value!r} is not a number in [0, 1] (a {word})"
                    )
    return None


def gate_spec(section: Mapping[str, Any] | None) -> GateSpec:
    """The section parsed (call :func:`gate_problem` first; a bad section raises ``ValueError``)."""
    if not section:
        return GateSpec()
    problem = gate_problem(section)
    if problem is not None:
        raise ValueError(problem[1])
    return GateSpec(
        budgets={k: int(section[k]) for k in BUDGETS if k in section},
        floors={str(k): float(v) for k, v in (section.get("min") or {}).items()},
        ceilings={str(k): float(v) for k, v in (section.get("max") or {}).items()},
        judge=str(section.get("judge", "bound")),
        detect=float(section.get("detect", DEFAULT_DETECT)),
        underpowered=section.get("underpowered"),
        stress=tuple(
            StressRequirement(
                at=int(item["at"]),
                floors={str(k): float(v) for k, v in (item.get("min") or {}).items()},
                max_drops={str(k): float(v) for k, v in (item.get("max_drop") or {}).items()},
            )
            for item in section.get("stress") or ()
        ),
    )
