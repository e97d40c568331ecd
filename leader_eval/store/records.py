"""Typed records of the run files that scoring derives (``summary.json``), as inspect_ai's
``EvalLog`` types its log: a dataclass per document, ``to_json`` for the JSON value the store
writes and ``from_json`` for one read back.

``Summary.from_json(d).to_json() == d`` for every summary this or an earlier version wrote:
fields a later step adds (``adaptive``) or another version wrote are kept in ``extra``, and a
summary that lacks a group of fields (a pytest session's aggregate has no run totals) reads
back without it. The file bytes come from ``run_store.write_json_atomic`` (sorted keys), so the
order of fields here never shows in a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: the fields of ``RunTotals``, in the order a run's summary has always held them
_RUN_FIELDS = ("run_id", "model_id", "label", "tokens", "retries", "usage")


@dataclass
class RunTotals:
    """What a recorded run adds to its suite's metrics: who ran it and what it cost."""

    run_id: str | None
    model_id: str
    label: str | None
    #: ``prompt``, ``completion`` and ``per_case`` (case id -> [prompt, completion])
    tokens: dict[str, Any]
    #: the backends' retries (429/5xx/timeouts); a sample that still failed counts in n_errors
    retries: int
    #: latency and token quantiles, and the cost when priced (``aggregate.usage_summary``)
    usage: dict[str, Any]


@dataclass
class Summary:
    """``summary.json``: suite metrics overall, per tag and per split, and the run's totals."""

    suite: str
    overall: dict[str, Any]
    by_tag: dict[str, Any]
    #: held-out vs in-distribution, when the suite has both
    by_split: dict[str, Any] | None = None
    #: None for an aggregate of case records alone (a pytest session's ``session_summary.json``)
    run: RunTotals | None = None
    #: file name -> 1-based numbers of the lines that could not be read (at most 1000 each)
    unreadable: dict[str, list[int]] | None = None
    #: the first sampler error in (case, index) order (``error_rule.first_sampler_error``)
    first_error: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.suite, "overall": self.overall, "by_tag": self.by_tag}
        if self.by_split is not None:
            out["by_split"] = self.by_split
        if self.run is not None:
            out.update((name, getattr(self.run, name)) for name in _RUN_FIELDS)
        if self.unreadable is not None:
            out["unreadable"] = self.unreadable
        if self.first_error is not None:
            out["first_error"] = self.first_error
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summary:
        rest = dict(data)
        head = {name: rest.pop(name) for name in ("suite", "overall", "by_tag")}
        run = (
            RunTotals(**{name: rest.pop(name) for name in _RUN_FIELDS}) if all(n in rest for n in _RUN_FIELDS) else None
        )
        return cls(
            **head,
            by_split=rest.pop("by_split", None),
            run=run,
            unreadable=rest.pop("unreadable", None),
            first_error=rest.pop("first_error", None),
            extra=rest,
        )
