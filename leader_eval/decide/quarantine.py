"""A golden's quarantine list: cases whose scores are shown but cannot fail the gate, for a while.

Each entry (``{case, reason, date, expires}``) is a reviewer's decision, never added by an update
(``golden.update_golden`` carries reviewed entries over). An entry is honoured until its expiry
date, then for ``QUARANTINE_GRACE_DAYS`` more with a warning; after that the gate refuses the golden
until someone renews or removes the entry (docs/gating.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from leader_eval.decide.golden import GoldenError
from leader_eval.inert import inert

#: days an expired quarantine entry is still honoured, with a warning; after that the gate refuses
#: the golden until someone renews or removes the entry
QUARANTINE_GRACE_DAYS = 7


@dataclass(frozen=True)
class Quarantine:
    """A golden's quarantine entry: a case whose scores cannot fail the gate until ``expires``."""

    case: str
    reason: str
    since: date  # the entry's "date"
    expires: date


def read_quarantine(golden: Mapping[str, Any], golden_file: Path | None = None) -> list[Quarantine]:
    """The golden's ``quarantine`` list, checked; a malformed entry is an error naming the file."""
    raw = golden.get("quarantine") or []
    where = f"{golden_file or 'golden'}:1"
    if not isinstance(raw, list):
        raise GoldenError(f"{where}: 'quarantine' must be a list of {{case, reason, date, expires}} objects")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or set(item) != {"case", "reason", "date", "expires"}:
            raise GoldenError(f"{where}: quarantine[{i}]: expected exactly the keys case, reason, date, expires")
        if not isinstance(item["case"], str) or not item["case"] or not isinstance(item["reason"], str):
            raise GoldenError(f"{where}: quarantine[{i}]: case and reason must be non-empty text")
        if not item["reason"].strip():
            raise GoldenError(f"{where}: quarantine[{i}]: give a reason (why the case is quarantined)")
        try:
            when, until = date.fromisoformat(str(item["date"])), date.fromisoformat(str(item["expires"]))
        except ValueError:
            raise GoldenError(f"{where}: quarantine[{i}]: date and expires must be YYYY-MM-DD") from None
        if until < when:
            raise GoldenError(f"{where}: quarantine[{i}]: expires {until} is before its date {when}")
        out.append(Quarantine(item["case"], item["reason"], when, until))
    return out


def active_quarantine(
    golden: Mapping[str, Any], *, today: date | None = None, golden_file: Path | None = None
) -> tuple[set[str], list[str]]:
    """(cases whose scores cannot fail the gate, messages) for ``today``.

    An entry is honoured until its expiry date, then for ``QUARANTINE_GRACE_DAYS`` more with a
    warning; after that the golden is refused (``GoldenError``, exit 2): a quarantine nobody
    renews must not hide a case forever."""
    today = today or date.today()
    cases: set[str] = set()
    notes: list[str] = []
    known = set(golden.get("cases") or {})
    for q in read_quarantine(golden, golden_file):
        late = (today - q.expires).days
        if late > QUARANTINE_GRACE_DAYS:
            raise GoldenError(
                f"{golden_file or 'golden'}:1: quarantine of case {q.case!r} expired on {q.expires} "
                f"(more than {QUARANTINE_GRACE_DAYS} days ago): renew its expiry or remove it"
            )
        if late > 0:
            notes.append(
                f"warning: quarantine of case {q.case!r} expired on {q.expires}; still honoured until "
                f"{q.expires + timedelta(days=QUARANTINE_GRACE_DAYS)}, then the gate refuses this golden"
            )
        if known and q.case not in known:
            notes.append(f"warning: quarantined case {q.case!r} is not a case of the golden")
        cases.add(q.case)
        # the reason is the golden author's free text: one inert line wherever the note is shown
        reason = inert(q.reason)
        notes.append(f"quarantined: {inert(q.case)} ({reason}; since {q.since}, until {q.expires}): shown, cannot fail")
    return cases, notes
