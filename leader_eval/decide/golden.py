"""Golden baselines and the gate: the contract a new checkpoint must meet in CI.

A golden file (``golden/<suite>/<baseline>.json``, baseline ``main`` unless ``--baseline`` names
another) records one complete run's suite metrics with their direction and tolerance, per-case
pass rates and the run's sampling identity, keyed to the suite content hash and the scorer
version it was measured under. Any model is gated against the baseline; the run's ``--label``
only names the run. A missing golden fails the gate unless ``--allow-missing-golden`` says this
is a suite's first run (docs/design-0.3.md section 1). It is meant to be read in a pull request:
keys sorted, values rounded to 4 decimals, two-space indent, no timestamps.

The gate compares parsed values, never text. A metric fails only when it is worse than the golden
by more than its tolerance *and* the shortfall is statistically credible (``stats.regression_verdict``,
one-sided): the paired decision against the golden's per-case rates when the golden has them
(``stats.decide_paired`` with the metric's declared test; it accounts for the golden run's own
noise), else the golden value lying beyond the current run's bootstrap-over-cases bound. The
tested metrics (``metrics.gated_metrics``) form one Holm-Tarone family, so a run of an unchanged
model fails the whole gate in at most ``alpha`` of runs. Improvements beyond tolerance pass and
suggest ``--update-golden``. The suite's ``gate:`` section adds count budgets, floors and
ceilings, and the power guard (``gate_spec``, ``plan.power_guard``). See docs/gating.md.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.errors import LeaderEvalError, RunDirError
from leader_eval.inert import inert, markdown
from leader_eval.report import table
from leader_eval.runs.argtypes import name_component
from leader_eval.scoring.error_rule import error_verdict, is_stress_manifest
from leader_eval.stats.core import (
    Estimate,
    PairedComparison,
    PairedDecision,
    decide_paired,
    holm_alphas,
    regression_verdict,
    tarone_family,
)
from leader_eval.stats.metrics import ALL_METRICS, METRICS, gated_metrics
from leader_eval.store.formats import GOLDEN_FORMAT_VERSION, SCORER_VERSION, format_version
from leader_eval.store.names import default_label
from leader_eval.store.run_store import read_bytes, shown, write_json_atomic
from leader_eval.suite.gate_spec import BUDGETS, GateSpec, gate_problem, gate_spec

#: the largest golden file read (a golden holds per-case rates: ~200 bytes a case)
GOLDEN_CAP = 64 << 20

if TYPE_CHECKING:
    from leader_eval.runs.evaluate import Run
    from leader_eval.suite.load import Suite

GOLDEN_FORMAT = GOLDEN_FORMAT_VERSION
DECIMALS = 4

#: the baseline a run is gated against unless ``--baseline`` / ``--le-baseline`` names another
DEFAULT_BASELINE = "main"

#: default tolerance per metric (absolute, on the 0..1 scale); a golden file's own value wins,
#: and ``--tolerance score=0.05`` beats both (derived from ``metrics.METRICS``)
DEFAULT_TOLERANCES: dict[str, float] = {name: m.tolerance for name, m in ALL_METRICS.items()}

#: metrics recorded and shown, but never failing the gate (docs/scoring.md: a lenient reading is a
#: diagnostic, never the headline)
DIAGNOSTIC_METRICS = frozenset(name for name, m in ALL_METRICS.items() if not m.gating)

#: how far a golden value may sit from the mean of its rounded per-case rates and still be theirs
CASE_MEAN_SLACK = 5e-4

#: per-case values a golden file keeps, so the gate can pair the current run's cases with them for
#: every gating metric. Without pairing, the golden's own sampling noise is not accounted for and
#: a run of the very same model fails about 12% of the time at alpha 0.05 (measured; docs/gating.md).
CASE_FIELDS = {m.case_field: name for name, m in ALL_METRICS.items() if m.case_field}

#: days an expired quarantine entry is still honoured, with a warning; after that the gate refuses
#: the golden until someone renews or removes the entry
QUARANTINE_GRACE_DAYS = 7

# ``BUDGETS`` (count budgets a suite may declare under ``gate:``: budget key -> (metric whose events
# it counts, what an event is)) lives in ``gate_spec`` with the rest of the section's rules. A
# budget is a contract, not a test: one event more than the budget fails the gate.
# ``holm_alphas`` and ``tarone_family`` live in ``stats`` (one Holm-Tarone for every decision) and
# are imported here under their old names.


class GoldenError(LeaderEvalError):
    """A golden file that cannot be read or a tolerance that cannot be parsed (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# golden files


def golden_path(golden_dir: str | Path, suite: str, baseline: str = DEFAULT_BASELINE) -> Path:
    """``<golden_dir>/<suite>/<baseline>.json``, or ``golden_dir`` itself when it names a ``.json``
    file (users pass the file they see in the repo; ``check_golden_covers`` then refuses a golden
    of another suite)."""
    if Path(golden_dir).suffix == ".json":
        return Path(golden_dir)
    folder = Path(golden_dir) / _safe(suite)
    if folder.is_symlink():  # an entry of the golden directory (golden_dir itself may be a link)
        raise GoldenError(f"{shown(folder)}: golden folder is a symbolic link, not a directory: refused")
    return folder / f"{check_baseline(baseline)}.json"


def check_baseline(name: str) -> str:
    """``name`` when it is a usable baseline name (one safe file name), else ``GoldenError``.

    Never rewritten into another name: ``--baseline ../main`` silently gated against ``main``
    would be a comparison with a file the user did not name."""
    try:
        return name_component(name)
    except argparse.ArgumentTypeError as err:
        raise GoldenError(f"--baseline {err}") from None


def run_label(run: Run) -> str:
    """The run's label (``--label`` at run time), else one derived from its model id."""
    return str(run.manifest.get("label") or default_label(run.manifest["identity"]["model_id"]))


def portable_model_id(model_id: str) -> str:
    """A model id without machine-specific paths (``gguf:/home/me/m.gguf`` -> ``gguf:m.gguf``)."""
    if "://" in model_id:
        return model_id
    prefix, sep, rest = model_id.partition(":")
    if sep and "/" in rest:
        return f"{prefix}:{Path(rest).name}"
    return model_id


def parse_tolerances(items: Iterable[str] | Mapping[str, float] | None) -> dict[str, float]:
    """``["score=0.05", "hard_fail_rate=0"]`` (CLI / ini, commas allowed) -> ``{"score": 0.05, ...}``."""
    if items is None:
        return {}
    raw: list[tuple[str, Any]]
    if isinstance(items, Mapping):
        raw = [(str(k), v) for k, v in items.items()]
    else:
        raw = []
        for item in items:
            for part in str(item).split(","):
                if not part.strip():
                    continue
                key, sep, text = part.partition("=")
                if not sep:
                    raise GoldenError(f"tolerance {part.strip()!r}: expected METRIC=VALUE, e.g. score=0.05")
                raw.append((key.strip(), text.strip()))
    out: dict[str, float] = {}
    for name, value in raw:
        if name not in ALL_METRICS:
            raise GoldenError(f"tolerance for unknown metric {name!r} (known: {', '.join(ALL_METRICS)})")
        try:
            tol = float(value)
        except (TypeError, ValueError):
            raise GoldenError(f"tolerance {name}={value!r}: not a number") from None
        if not 0 <= tol <= 1:
            raise GoldenError(f"tolerance {name}={tol}: must lie in [0, 1]")
        out[name] = tol
    return out


def build_golden(
    run: Run,
    *,
    baseline: str = DEFAULT_BASELINE,
    label: str | None = None,
    tolerances: Mapping[str, float] | None = None,
    budgets: Mapping[str, int] | None = None,
    gate: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The golden document of baseline ``baseline`` made from ``run`` (rounded; key order is
    fixed when written). ``label``: the run's label, recorded for the reader (default the run's).

    ``gate``: the suite's ``gate:`` section (``gate_spec``), copied as ``gate`` so the gate applies
    its floors, budgets and power guard wherever the run is gated (the section is not part of the
    suite hash; the suite's own section wins when the gate has it). Its count budgets are also
    written as ``budgets``, which goldens have carried since 0.2. ``budgets`` alone: the budgets
    of a 0.2 caller."""
    if gate:
        problem = gate_problem(gate)
        if problem is not None:
            raise GoldenError(f"golden not built: the suite's {problem[1]}")
        budgets = {**(budgets or {}), **{k: int(v) for k, v in gate.items() if k in BUDGETS}}
    tolerances = {**DEFAULT_TOLERANCES, **(tolerances or {})}
    ident = run.manifest["identity"]
    metrics = run.summary["overall"]["metrics"]
    out_metrics: dict[str, Any] = {}
    for name, spec in ALL_METRICS.items():  # episode metrics only when the run has episodes
        if spec.episode_key and not spec.gating:
            continue  # reported only (steps to goal is a count of steps, not a rate)
        m = metrics.get(name)
        if m is None or m.get("value") is None:
            continue
        out_metrics[name] = {
            "value": _round(m["value"]),
            "low": _round(m.get("low")),
            "high": _round(m.get("high")),
            "direction": spec.direction,
            "tolerance": _round(tolerances.get(name, 0.0)),
            "n_samples": int(m.get("n_samples") or 0),
            "n_cases": int(m.get("n_cases") or 0),
        }
    cases: dict[str, Any] = {}
    for c in run.cases:
        if not c.get("n_scored"):
            continue
        rec: dict[str, Any] = {"n_samples": int(c["n_scored"])}
        for key, metric in CASE_FIELDS.items():
            if c.get(metric) is not None:  # a case without episodes has no episode metric
                rec[key] = _round(c[metric])
        cases[c["case_id"]] = rec
    return {
        "format_version": GOLDEN_FORMAT,
        "baseline": check_baseline(baseline),
        "sampling": sampling_identity(run.manifest),
        "suite": ident["suite"],
        "suite_hash": ident["suite_hash"],
        "scorer_version": str(run.manifest.get("scorer_version", SCORER_VERSION)),
        "label": label or run_label(run),
        "model_id": portable_model_id(str(ident["model_id"])),
        "created_from": run.manifest.get("run_id"),
        "metrics": out_metrics,
        "cases": cases,
        **({"budgets": {k: int(v) for k, v in sorted(budgets.items())}} if budgets else {}),
        **({"gate": json.loads(json.dumps(dict(gate)))} if gate else {}),
    }


# ---------------------------------------------------------------------------------------------
# sampling identity and drift

#: the keys of a golden's ``sampling`` (docs/design-0.3.md section 1)
SAMPLING_KEYS = (
    "temperature",
    "max_tokens",
    "samples_per_case",
    "protocol",
    "protocol_detected",
    "chat_template_sha256",
)
#: the sampling settings whose change is a drift note (the protocol and template fail instead)
DRIFT_NOTED = (("temperature", "temperature"), ("max_tokens", "max_tokens"), ("samples_per_case", "samples per case"))


def sampling_identity(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """How a run sampled, as a golden records it and the gate compares it.

    ``temperature``, ``max_tokens``, ``samples_per_case``: one value when every case used it,
    else the sorted list of the values its cases used. ``protocol``: the run's tool-call
    protocol; ``protocol_detected``: whether it is the backend's own detected default (neither
    ``--protocol`` nor the suite chose another). ``chat_template_sha256``: the backend's template
    hash, null when the backend renders no template itself."""
    ident = manifest.get("identity") or {}
    cases = [c for c in (ident.get("cases") or {}).values() if isinstance(c, Mapping)]
    model = manifest.get("model") or {}

    def one_or_all(values: Iterable[Any]) -> Any:
        found = sorted({v for v in values if isinstance(v, int | float) and not isinstance(v, bool)})
        return None if not found else found[0] if len(found) == 1 else found

    protocol = ident.get("protocol")
    return {
        "temperature": one_or_all((c.get("params") or {}).get("temperature") for c in cases),
        "max_tokens": one_or_all((c.get("params") or {}).get("max_tokens") for c in cases),
        "samples_per_case": one_or_all(c.get("samples") for c in cases),
        "protocol": protocol,
        "protocol_detected": protocol is not None and protocol == model.get("default_protocol"),
        "chat_template_sha256": model.get("chat_template_sha256"),
    }


def sampling_problem(golden: Mapping[str, Any]) -> tuple[str, str] | None:
    """(a key near the problem, what is wrong) for a ``sampling`` record the drift check cannot
    read (a hand-edited golden), else None. Null means unknown (a 0.2.0 golden)."""
    rec = golden.get("sampling")
    if rec is None:
        return None
    if not isinstance(rec, Mapping):
        return '"sampling"', "'sampling' is not an object"
    unknown = sorted(set(rec) - set(SAMPLING_KEYS))
    if unknown:
        return '"sampling"', f"'sampling' has unknown key {unknown[0]!r} (known: {', '.join(SAMPLING_KEYS)})"

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0

    for key in ("temperature", "max_tokens", "samples_per_case"):
        v = rec.get(key)
        if v is not None and not (number(v) or (isinstance(v, list) and v and all(number(x) for x in v))):
            return f'"{key}"', f"sampling {key} is {v!r}, not a number >= 0 or a list of them"
    for key in ("protocol", "chat_template_sha256"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f'"{key}"', f"sampling {key} is {rec[key]!r}, not text or null"
    if not isinstance(rec.get("protocol_detected", False), bool):
        return '"protocol_detected"', "sampling protocol_detected is not true or false"
    return None


def sampling_drift(run: Run, golden: Mapping[str, Any], golden_file: Path | None = None) -> tuple[list[str], list[str]]:
    """(notes, failures) comparing the run's sampling identity with the golden's.

    A temperature, max_tokens or samples-per-case difference is a note: the gate still decides,
    but the golden's numbers were measured at its own settings. A protocol or chat template
    change fails: the model answers other prompts or is parsed by another protocol, so the
    comparison measures the harness, not the checkpoint. For this release a protocol change is a
    warning when both protocols were the backends' own detection over the same chat template
    (only this leader-eval's detection can then have changed). A 0.2.0 golden records no
    sampling: its drift is unknown, which the note says with how to re-baseline."""
    recorded = golden.get("sampling")
    where = str(golden_file) if golden_file is not None else "the golden"
    baseline = str(golden.get("baseline") or (golden_file.stem if golden_file is not None else DEFAULT_BASELINE))
    rebaseline = f"leader-eval update-golden TRUSTED_RUN_DIR --baseline {baseline}"
    if not isinstance(recorded, Mapping):
        note = (
            f"note: sampling drift unknown: {where} records no sampling identity (a 0.2.0 golden); "
            f"re-create it from a trusted run to record it: {rebaseline}"
        )
        if format_version(golden, "golden") == 1 and golden_file is not None and golden_file.stem != DEFAULT_BASELINE:
            note += f"; to make it the default baseline: git mv {golden_file} {golden_file.with_name('main.json')}"
        return [note], []
    now = sampling_identity(run.manifest)
    notes: list[str] = []
    drift = [
        f"{what} {_shown(now[key])} vs the golden's {_shown(recorded[key])}"
        for key, what in DRIFT_NOTED
        if now.get(key) is not None and recorded.get(key) is not None and now[key] != recorded[key]
    ]
    if drift:
        notes.append(f"note: sampling drift: {'; '.join(drift)} (the golden was measured at its own settings)")
    failures: list[str] = []
    was, proto = recorded.get("protocol"), now.get("protocol")
    same_template = recorded.get("chat_template_sha256") == now.get("chat_template_sha256")
    if was is not None and proto is not None and was != proto:
        if recorded.get("protocol_detected") and now.get("protocol_detected") and same_template:
            notes.append(
                f"warning: protocol changed ({was} -> {proto}) with the same chat template: this leader-eval "
                f"detects another protocol than the golden's did; re-baseline with {rebaseline} "
                "(from 0.4 this fails the gate)"
            )
        else:
            failures.append(f"protocol changed ({was} -> {proto}): outputs are parsed another way than the golden's")
    t_was, t_now = recorded.get("chat_template_sha256"), now.get("chat_template_sha256")
    if t_was and t_now and t_was != t_now:
        failures.append(f"chat template changed (sha256 {t_was} -> {t_now}): the model sees other prompts")
    if failures:
        failures.append(
            f"the golden does not measure this setup: re-baseline from a trusted run of it ({rebaseline}), "
            "or gate with the golden's protocol and template"
        )
    return notes, failures


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "/".join(_shown(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)  # 2.0, not 2: a temperature reads as one


def legacy_goldens(path: Path) -> list[Path]:
    """0.2.0 golden files beside ``path`` (format 1, named by label): a missing ``main.json``
    next to them most likely means the repo has not renamed its baseline yet."""
    found = []
    try:
        candidates = sorted(p for p in path.parent.glob("*.json") if p != path)[:50]
    except OSError:
        return []
    for p in candidates:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("metrics"), dict) and format_version(data, "golden") == 1:
            found.append(p)
    return found


def load_golden(path: str | Path) -> dict[str, Any] | None:
    """A golden file's parsed content, or None when there is none.

    A golden that could pass a run it should fail is refused (``GoldenError``, exit status 2,
    ``FILE:LINE: what``): not JSON or not UTF-8, a wrong shape, a metric value, bound or
    tolerance that is null, NaN, infinite or outside [0, 1], no per-case rates, or fewer
    per-case rates than the cases its metrics were measured on (a golden of an interrupted run).
    """
    p = Path(path)
    try:
        raw = read_bytes(p, "golden file", cap=GOLDEN_CAP)  # never through a symlink, never a FIFO
    except FileNotFoundError:
        return None
    except RunDirError as err:
        raise GoldenError(str(err)) from None
    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise GoldenError(f"{p}:1: golden file is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        raise GoldenError(f"{p}:{getattr(exc, 'lineno', 1)}: unreadable golden file: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        raise GoldenError(f"{p}:1: not a golden file (no 'metrics' object)")
    from leader_eval.store.formats import check_format

    try:
        check_format(p, data, "golden")
    except LeaderEvalError as err:
        raise GoldenError(str(err)) from None
    problem = golden_problem(data) or sampling_problem(data)
    if problem is not None:
        needle, what = problem
        raise GoldenError(f"{p}:{_line_of(text, needle)}: refused golden file: {what}")
    return data


def golden_problem(golden: Mapping[str, Any]) -> tuple[str, str] | None:
    """(a key near the problem, what is wrong) for a golden that must not be gated against, else None."""

    def rate(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1

    for key in ("suite", "suite_hash", "scorer_version"):
        if not isinstance(golden.get(key), str | int) or isinstance(golden.get(key), bool):
            return f'"{key}"', f"{key!r} is missing or not a string"
    metrics = golden["metrics"]
    if not metrics:
        return '"metrics"', "no metrics (a golden of a run that scored nothing)"
    if not any(name in ALL_METRICS and ALL_METRICS[name].gating for name in metrics):
        gating = ", ".join(n for n, m in ALL_METRICS.items() if m.gating)
        return '"metrics"', f"no gating metric (it holds {', '.join(map(str, metrics))}; the gate tests {gating})"
    for name, m in metrics.items():
        if not isinstance(m, Mapping):
            return f'"{name}"', f"metric {name!r} is not an object"
        if not rate(m.get("value")):
            return f'"{name}"', f"metric {name!r} value is {m.get('value')!r}, not a number in [0, 1]"
        for field_name in ("tolerance", "low", "high"):
            if field_name in m and not (rate(m[field_name]) or (field_name != "tolerance" and m[field_name] is None)):
                return f'"{name}"', f"metric {name!r} {field_name} is {m.get(field_name)!r}, not a number in [0, 1]"
        if m.get("direction", "higher") not in ("higher", "lower"):
            return f'"{name}"', f"metric {name!r} direction is {m.get('direction')!r}, not 'higher' or 'lower'"
    cases = golden.get("cases")
    if not isinstance(cases, Mapping) or not cases:
        return '"cases"', "no per-case rates (a golden of a run that scored no case)"
    for cid, rec in cases.items():
        if not isinstance(rec, Mapping):
            return f'"{cid}"', f"case {cid!r} is not an object"
        n = rec.get("n_samples")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            return f'"{cid}"', f"case {cid!r} n_samples is {n!r}: every case of a golden must have scored samples"
        for key in CASE_FIELDS:
            if key in rec and not rate(rec[key]):
                return f'"{cid}"', f"case {cid!r} {key} is {rec[key]!r}, not a number in [0, 1]"
    for name, m in metrics.items():
        n_cases = m.get("n_cases")
        if isinstance(n_cases, int) and not isinstance(n_cases, bool) and n_cases > len(cases):
            return (
                '"cases"',
                f"metric {name!r} was measured on {n_cases} cases but the golden holds rates for {len(cases)}"
                " (missing cases)",
            )
    return None


def check_golden_suite(path: str | Path, golden: Mapping[str, Any] | None, suite: str) -> None:
    """Refuse (``GoldenError``) a golden file of another suite: a file named directly
    (``--golden FILE.json``) is not found by the suite's name, and pairing one suite's run with
    another's golden would compare nothing and pass."""
    if golden is not None and golden.get("suite") not in (None, suite):
        raise GoldenError(f"{path}:1: a golden file of suite {golden.get('suite')!r}, not of suite {suite!r}")


def check_golden_covers(path: str | Path, golden: Mapping[str, Any] | None, run: Run) -> None:
    """Refuse (``GoldenError``) a golden of another suite (``check_golden_suite``), and a golden
    of the run's very suite content that lacks per-case rates for cases the run has: it was made
    from an incomplete run (e.g. a replay of an interrupted one), and gating over its cases alone
    would let the missing ones pass unseen. A golden of other suite content is stale instead,
    which the gate reports."""
    check_golden_suite(path, golden, run.manifest["identity"]["suite"])
    if golden is None or golden.get("suite_hash") != run.manifest["identity"]["suite_hash"]:
        return
    missing = sorted(set(run.manifest["identity"].get("cases") or {}) - set(golden.get("cases") or {}))
    if missing:
        raise GoldenError(
            f"{path}:1: refused golden file: no per-case rates for {len(missing)} case(s) of this suite "
            f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}): made from an incomplete run; "
            "re-create it with --update-golden from a complete run"
        )


def _line_of(text: str, needle: str) -> int:
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def write_golden(path: str | Path, golden: Mapping[str, Any]) -> None:
    """Write atomically (write then rename): keys sorted, indent 2, trailing newline.

    A document ``load_golden`` would refuse (NaN, nulls, no cases) is never written."""
    problem = golden_problem(golden) if isinstance(golden.get("metrics"), Mapping) else ("", "no 'metrics' object")
    if problem is not None:
        raise GoldenError(f"{path}: golden not written: {problem[1]}")
    try:
        write_json_atomic(Path(path), golden, indent=2, sort_keys=True)
    except OSError as exc:
        raise GoldenError(f"{path}: cannot write golden file: {exc.strerror or exc}") from None


@dataclass
class UpdateResult:
    """What ``update_golden`` did: ``written`` is False when it refused (``reason`` says why)."""

    path: Path
    written: bool
    reason: str


def update_refusal(
    run: Run,
    *,
    suite: Suite | None = None,
    suite_case_ids: Sequence[str] | None = None,
    max_error_rate: float = 0.0,
) -> str | None:
    """Why ``run`` must not become a golden baseline, or None when it may.

    A golden must come from the suite's full case set, sampled to the last planned sample, by a
    run that finished: never from an interrupted run (status not ``complete``), a ``--tags`` /
    ``--limit`` selection, or a suite file edited since the run. Every case must have scored
    samples, every metric a finite value, and the run must pass the error rule at
    ``max_error_rate`` (``error_rule``): a run of a server that was down is not a baseline.
    """
    status = run.manifest.get("status")
    if status != "complete":
        return f"run status is {status!r}, not 'complete' (interrupted?): golden files left unchanged"
    ident = run.manifest["identity"]
    planned: Mapping[str, Any] = ident.get("cases", {})
    if suite_case_ids is None:
        if suite is None:
            suite = _load_run_suite(run)
            if suite is None:
                return (
                    f"cannot load the suite at {run.manifest.get('suite', {}).get('path')!r} to check that the "
                    "full case set ran: golden files left unchanged"
                )
        if suite.content_hash != ident["suite_hash"]:
            return (
                f"suite {suite.name!r} changed since the run (hash {ident['suite_hash']} -> {suite.content_hash}): "
                "re-run it before updating the golden"
            )
        suite_case_ids = [c.id for c in suite.cases]
    missing_cases = sorted(set(suite_case_ids) - set(planned))
    if missing_cases:
        return (
            f"run covers {len(planned)} of {len(set(suite_case_ids))} cases of suite {ident['suite']!r} "
            f"(missing {', '.join(missing_cases[:5])}{', ...' if len(missing_cases) > 5 else ''}): "
            "only a full-suite run can update the golden"
        )
    # per-case sample counts (errors and context overflows count: they were sampled); a Run rebuilt
    # from case records alone (the pytest plugin's) has no per-sample records
    have = {c["case_id"]: int(c.get("n_samples") or 0) for c in run.cases}
    if not have:
        for s in run.samples or run.scores:
            have[s.case_id] = have.get(s.case_id, 0) + 1
    short = [cid for cid, spec in planned.items() if have.get(cid, 0) < int(spec.get("samples", 0))]
    if short:
        return f"samples missing for {len(short)} case(s) ({', '.join(sorted(short)[:5])}): golden files left unchanged"
    if not run.summary.get("overall"):
        return "run has no summary (not scored): golden files left unchanged"
    return _measurement_refusal(run, planned, max_error_rate)


def _measurement_refusal(run: Run, planned: Mapping[str, Any], max_error_rate: float) -> str | None:
    """Why the run's numbers cannot be a baseline: errors, unscored cases, NaN metrics."""
    verdict = error_verdict(run.summary, max_error_rate, overflow_is_error=not is_stress_manifest(run.manifest))
    if verdict.failed:
        return f"{verdict.message()}: golden files left unchanged"
    scored = {c["case_id"]: int(c.get("n_scored") or 0) for c in run.cases}
    unscored = sorted(cid for cid in planned if scored.get(cid, 0) < 1)
    if unscored:
        return f"{len(unscored)} case(s) have no scored sample ({', '.join(unscored[:5])}): golden files left unchanged"
    metrics = run.summary["overall"].get("metrics") or {}
    bad = sorted(
        name
        for name in METRICS
        if not isinstance((metrics.get(name) or {}).get("value"), int | float)
        or not math.isfinite(float(metrics[name]["value"]))
    )
    if bad:
        return f"metric(s) {', '.join(bad)} have no finite value: golden files left unchanged"
    return None


def update_golden(
    run: Run,
    golden_dir: str | Path = "golden",
    *,
    baseline: str = DEFAULT_BASELINE,
    suite: Suite | None = None,
    suite_case_ids: Sequence[str] | None = None,
    tolerances: Mapping[str, float] | None = None,
    max_error_rate: float = 0.0,
) -> UpdateResult:
    """Write ``golden/<suite>/<baseline>.json`` from ``run``, or refuse and leave every file untouched.

    Refuses (``written=False``) unless ``update_refusal`` finds nothing: the run completed and
    sampled every case of the suite (``suite`` / ``suite_case_ids``; by default the suite is
    loaded from the path recorded in the manifest). Tolerances: ``tolerances`` beats the ones
    in the existing golden file (a reviewer may have edited them), which beat the defaults.
    The file is written atomically (write then rename) and only if its content changes.
    """
    path = golden_path(golden_dir, run.manifest["identity"]["suite"], baseline)
    reason = update_refusal(run, suite=suite, suite_case_ids=suite_case_ids, max_error_rate=max_error_rate)
    if reason is not None:
        return UpdateResult(path, False, reason)
    old = load_golden(path)
    kept = {k: m["tolerance"] for k, m in (old or {}).get("metrics", {}).items() if "tolerance" in m}
    budget_suite = suite if suite is not None else _load_run_suite(run)
    same = budget_suite is not None and budget_suite.content_hash == run.manifest["identity"]["suite_hash"]
    section = dict(getattr(budget_suite, "gate", None) or {}) if same else {}
    baseline = path.stem if Path(golden_dir).suffix == ".json" else baseline
    new = build_golden(run, baseline=baseline, tolerances={**kept, **(tolerances or {})}, gate=section)
    if old is not None and old.get("quarantine"):
        # reviewed entries carry over; an update never adds one (a flaky case is a reviewer's call)
        new["quarantine"] = old["quarantine"]
    if old is not None and _without(old, "created_from") == _without(new, "created_from"):
        return UpdateResult(path, False, "golden already matches this run: unchanged")
    write_golden(path, new)
    return UpdateResult(path, True, f"{'updated' if old else 'created'} {path}")


# ---------------------------------------------------------------------------------------------
# the gate


@dataclass
class MetricRow:
    """One metric of the gate table."""

    metric: str
    direction: str  # "higher" | "lower" is better
    tolerance: float
    golden: float
    now: float | None
    now_low: float | None
    now_high: float | None
    delta: float | None
    delta_low: float | None
    delta_high: float | None
    p_value: float | None  # one-sided p that the run is worse than the golden (paired test), else None
    paired: bool
    verdict: str  # "pass" | "fail" | "improved" | "info" (diagnostic, never fails)
    explanation: str
    #: "test": a metric tested against the golden; "budget": a declared count budget; "floor" /
    #: "ceiling": a declared absolute limit (``golden`` holds the limit)
    kind: str = "test"
    #: what the run's interval is when it is not an ordinary one (a one-case group's degenerate
    #: interval), as the report shows it
    note: str = ""


@dataclass
class GateResult:
    """The gate's decision for one run against one golden file.

    ``status``: ``pass`` | ``fail`` (a metric regressed credibly, a floor, ceiling or budget is
    broken, or an underpowered gate in CI mode) | ``stale`` (suite content or scorer version
    changed) | ``incomplete`` (the run did not finish or misses golden cases) | ``errors`` (more
    sampler errors than ``--max-error-rate`` allows) | ``missing`` (no golden: a failure, a warning
    only with ``allow_missing``, ``--allow-missing-golden``).
    """

    suite: str
    label: str  # the run's label (it names the run, never the golden)
    golden_path: Path | None
    run_path: Path | None
    status: str
    rows: list[MetricRow] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    strict: bool = False
    alpha: float = 0.05
    update: UpdateResult | None = None
    #: metrics reported, never gated (pass@k, pass^k): name -> summary entry (value, low, high, note)
    reported: dict[str, Any] = field(default_factory=dict)
    baseline: str = DEFAULT_BASELINE
    #: a missing golden only warns (``--allow-missing-golden``: a suite's very first run)
    allow_missing: bool = False
    #: the command that creates the missing golden from a trusted run (the CLI's or pytest's)
    create_command: str = ""
    #: the power guard (``plan.power_guard``): the gate's power per tested metric for ``detect``
    power: list[Any] = field(default_factory=list)
    detect: float | None = None
    #: the tested metrics whose power is under 80% (the weakest first)
    underpowered: list[str] = field(default_factory=list)
    #: the suite's acknowledgement of an underpowered gate (``gate: underpowered:``)
    acknowledged: str | None = None
    #: CI mode refused the gate for these underpowered metrics (no floor, no acknowledgement)
    power_refused: list[str] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        """0 pass, 1 fail (a missing golden fails unless ``allow_missing``; a written update is accepted)."""
        if self.status == "pass" or (self.update is not None and self.update.written):
            return 0
        if self.status == "missing":
            return 0 if self.allow_missing else 1
        return 1

    @property
    def improved(self) -> list[str]:
        return [r.metric for r in self.rows if r.verdict == "improved"]

    @property
    def failed(self) -> list[str]:
        return [r.metric for r in self.rows if r.verdict == "fail"]

    def power_note(self) -> str:
        """The headline's warning for an underpowered gate ('' when every tested metric has 80%)."""
        if not self.underpowered:
            return ""
        by = {p.metric: p for p in self.power}
        weakest = by[self.underpowered[0]]
        need = (
            f"80% needs {weakest.samples_needed} samples/case"
            if weakest.samples_needed is not None
            else "80% needs more than 1024 samples/case"
        )
        more = f" (+{len(self.underpowered) - 1} more metric(s))" if len(self.underpowered) > 1 else ""
        ack = f"; acknowledged: {self.acknowledged}" if self.acknowledged else ""
        return (
            f"UNDERPOWERED: {weakest.power:.0%} power to catch a {weakest.drop:g} drop in {weakest.metric}, "
            f"{need}{more}{ack}"
        )

    def headline(self) -> str:
        """One line: what the gate decided and why."""
        where = f"suite {self.suite}, baseline {self.baseline}, label {self.label}"
        warn = self.power_note()
        if self.update is not None and self.update.written:
            return f"gate ACCEPTED ({where}): golden rewritten from this run (was: {self.status})"
        if self.status == "pass":
            parts = []
            if self.improved:
                parts.append(f"improved {', '.join(self.improved)} beyond tolerance; consider --update-golden")
            if warn:
                parts.append(warn)
            return f"gate PASS ({where})" + (f": {'; '.join(parts)}" if parts else "")
        if self.status == "fail":
            tested = [r.metric for r in self.rows if r.verdict == "fail" and r.kind == "test"]
            over = [
                f"{r.metric} ({r.now:g} > {r.golden:g})"
                for r in self.rows
                if r.verdict == "fail" and r.kind == "budget"
            ]
            limits = [
                f"{r.metric} ({_f(r.now)} {'<' if r.kind == 'floor' else '>'} {r.golden:g})"
                for r in self.rows
                if r.verdict == "fail" and r.kind in ("floor", "ceiling")
            ]
            why = (
                ([f"credible regression in {', '.join(tested)}"] if tested else [])
                + ([f"beyond the suite's limit: {', '.join(limits)}"] if limits else [])
                + ([f"over budget: {', '.join(over)}"] if over else [])
            )
            if self.power_refused:
                why.append(
                    f"underpowered in CI mode ({warn.removeprefix('UNDERPOWERED: ')}); declare a floor for "
                    f"{', '.join(self.power_refused)} (gate: min:/max:) or acknowledge it (gate: underpowered: WHY)"
                )
            elif warn:
                why.append(warn)
            return f"gate FAIL ({where}): {'; '.join(why)}"
        if self.status == "missing":
            return self._missing_line(where)
        return f"gate FAIL ({where}): " + "; ".join(self.messages[:2])

    def _missing_line(self, where: str) -> str:
        """One line: the file that is missing and how to make it, from a trusted run (never from
        the candidate being gated, which is what the missing baseline was to judge)."""
        line = f"no golden baseline {self.baseline!r} at {self.golden_path}"
        legacy = legacy_goldens(self.golden_path) if self.golden_path is not None else []
        if legacy and self.golden_path is not None:
            old = legacy[0]
            line += (
                f"; {old.name} is a 0.2.0 golden (named by label): make it this baseline with "
                f"git mv {old} {self.golden_path}, or gate with --baseline {old.stem}"
            )
        else:
            line += f"; create it from a run of the model you trust: {self.create_command}"
        if self.allow_missing:
            return f"gate WARN ({where}): {line} (--allow-missing-golden: not gated)"
        return f"gate FAIL ({where}): {line}"


def gate(
    run: Run,
    golden: Mapping[str, Any] | None,
    *,
    strict: bool = False,
    alpha: float = 0.05,
    tolerances: Mapping[str, float] | None = None,
    golden_file: Path | None = None,
    label: str | None = None,
    today: date | None = None,
    baseline: str | None = None,
    allow_missing: bool = False,
    create_command: str | None = None,
    suite_gate: Mapping[str, Any] | None = None,
    power: bool = True,
) -> GateResult:
    """Gate ``run`` against a parsed golden document (None: no golden yet).

    Per metric of the golden: ``fail`` when the current value is worse than the golden by more
    than the tolerance and the shortfall is credible at ``alpha`` (one-sided; see
    ``stats.regression_verdict``); ``improved`` when better by more than the tolerance; else
    ``pass``. The run must be complete and cover the golden's cases, and the golden must have
    been made from the same suite content, or the gate fails saying so (another scorer version
    only warns: ``scorer_warning``).
    ``tolerances`` (e.g. from ``--tolerance``) override the golden file's. Cases on the golden's
    quarantine list (``active_quarantine``; ``today`` for its expiry, default the current date)
    are shown but cannot fail the gate.

    ``baseline``: the golden's baseline name (for the headline; default the golden's own, else
    the file's name). ``golden is None`` fails (status ``missing``) unless ``allow_missing``;
    ``create_command`` is the command the failure line shows. The run's sampling is compared
    with the golden's (``sampling_drift``) before any metric.

    The suite's ``gate:`` section (``suite_gate``; else the golden's copy, else the golden's
    ``budgets``) adds its count budgets, floors and ceilings (``gate_spec``) and the power guard:
    with ``power`` (default) the gate reports its power to catch a drop of ``detect`` in each
    tested metric (``plan.power_guard``); with ``strict`` (CI mode) a metric under 80% power
    without a floor or ceiling fails the gate unless the section acknowledges it.
    """
    ident = run.manifest["identity"]
    label = label or run_label(run)
    if baseline is None:
        baseline = str((golden or {}).get("baseline") or (golden_file.stem if golden_file else DEFAULT_BASELINE))
    gdir = golden_file.parent.parent if golden_file is not None else Path("golden")
    result = GateResult(
        suite=ident["suite"],
        label=label,
        golden_path=golden_file,
        run_path=getattr(run, "path", None),
        status="pass",
        strict=strict,
        alpha=alpha,
        baseline=baseline,
        allow_missing=allow_missing,
        create_command=create_command
        or f"leader-eval update-golden TRUSTED_RUN_DIR --golden {gdir} --baseline {baseline}",
    )
    result.reported = dict(run.summary.get("overall", {}).get("pass_k") or {})
    if golden is None:
        result.status = "missing"
        result.messages.append(f"no golden baseline {baseline!r} for suite {ident['suite']!r}")
        return result
    if not any(ALL_METRICS[n].gating for n in golden.get("metrics") or {} if n in ALL_METRICS):
        # load_golden refuses such a file; gate() is public and must refuse the document too (a
        # subset's golden, cut to its cases, keeps every metric: only this check applies to it)
        result.status = "incomplete"
        result.messages.append("refused golden: no gating metric, nothing the gate can test")
        return result
    spec = _gate_spec(suite_gate, golden, golden_file)
    stale = staleness(run, golden)
    if stale:
        result.status = "stale"
        result.messages.extend(stale)
        return result
    drift_notes, drift_failures = sampling_drift(run, golden, golden_file)
    if drift_failures:
        result.status = "stale"
        result.messages.extend(drift_failures + drift_notes)
        return result
    result.messages.extend(drift_notes)
    warning = scorer_warning(run, golden)
    if warning:
        result.messages.append(warning)
    incomplete = _coverage_problem(run, golden)
    if incomplete:
        result.status = "incomplete"
        result.messages.append(incomplete)
        return result

    overrides = parse_tolerances(tolerances) if tolerances else {}
    current_metrics = run.summary["overall"]["metrics"]
    by_case = {c["case_id"]: c for c in run.cases}
    quarantined, notes = active_quarantine(golden, today=today, golden_file=golden_file)
    result.messages.extend(notes)
    if quarantined:
        # sampled and shown, but their scores cannot fail the gate: every metric, paired test and
        # budget is taken over the other cases (errors are not scores and keep counting)
        from leader_eval.scoring.aggregate import group_metrics

        weights = {cid: float(c.get("weight", 1.0)) for cid, c in by_case.items()}
        by_case = {cid: c for cid, c in by_case.items() if cid not in quarantined}
        current_metrics = group_metrics(list(by_case.values()))["metrics"]
        golden = golden_without_cases(golden, quarantined, weights)
    prepared = []
    uncompared = []
    for name, g in golden["metrics"].items():
        value = (current_metrics.get(name) or {}).get("value")
        if not isinstance(value, int | float) or not math.isfinite(value):  # absent, None or NaN
            if name in ALL_METRICS and ALL_METRICS[name].gating:
                uncompared.append(name)  # e.g. every episode errored: nothing to compare is no pass
            else:
                result.messages.append(f"metric {name!r} is in the golden but not in the run: skipped")
            continue
        prepared.append(_prepare_metric(name, g, current_metrics[name], golden, by_case, overrides))
    if uncompared or not set(gated_metrics(current_metrics)) & set(golden["metrics"]):
        result.status = "incomplete"
        what = ", ".join(uncompared) if uncompared else "any gated metric"
        result.messages.append(f"the run has no value for {what} of the golden: nothing to compare, cannot pass")
        return result
    # one family of tests (``metrics.gated_metrics``): the gate fails if any gated metric regresses,
    # so each is tested at a Holm-adjusted level and the chance of a false alarm for the whole gate
    # stays at alpha; a metric whose test cannot reach significance (no events anywhere) takes no
    # share (Tarone)
    family_names = set(gated_metrics(current_metrics)) & set(golden["metrics"])
    gating = [p for p in prepared if p.current is not None and p.row.metric in family_names]
    p_worse = {p.row.metric: p.p_worse for p in gating}
    min_p = {p.row.metric: p.min_p for p in gating}
    levels = holm_alphas(p_worse, alpha, min_p=min_p)
    family = tarone_family(min_p, alpha)
    for p in prepared:
        result.rows.append(p.decide(levels.get(p.row.metric, alpha), family, p.row.metric in family_names))
    run_cases = [c for c in run.cases if c["case_id"] not in quarantined]
    result.rows.extend(_limit_rows(spec, current_metrics))
    result.rows.extend(_budget_rows(spec.budgets, run_cases))
    if power:
        _power_guard(result, run_cases, golden, spec, sorted(family_names, key=list(ALL_METRICS).index))
    if any(r.verdict == "fail" for r in result.rows) or result.power_refused:
        result.status = "fail"
    return result


def _gate_spec(suite_gate: Mapping[str, Any] | None, golden: Mapping[str, Any], golden_file: Path | None) -> GateSpec:
    """The ``gate:`` section in force: the suite's, else the golden's copy, else the golden's budgets.

    The golden's copies are checked whichever wins: a budget or floor the gate cannot read is an
    error, never skipped (a misspelled ``max_hard_fail`` silently not enforced is a false green)."""
    where = f"{golden_file or 'golden'}:1"
    budgets = golden.get("budgets") or {}
    if not isinstance(budgets, Mapping):
        raise GoldenError(f"{where}: 'budgets' must be an object such as {{\"max_hard_fails\": 0}}")
    for key, limit in sorted(budgets.items()):
        if key not in BUDGETS:
            raise GoldenError(f"{where}: unknown budget {key!r} (known: {', '.join(BUDGETS)})")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise GoldenError(f"{where}: budget {key}: expected a whole number >= 0, got {limit!r}")
    copy = golden.get("gate")
    if copy is not None:
        problem = gate_problem(copy)
        if problem is not None:
            raise GoldenError(f"{where}: refused golden file: its copy of the suite's {problem[1]}")
    if suite_gate is not None:
        problem = gate_problem(suite_gate)
        if problem is not None:
            raise GoldenError(f"suite gate section: {problem[1]}")
        return gate_spec(suite_gate)
    return gate_spec(copy if copy is not None else dict(budgets))


def _limit_rows(spec: GateSpec, current_metrics: Mapping[str, Any]) -> list[MetricRow]:
    """One row per floor (``min:``) or ceiling (``max:``) the suite declares.

    ``judge: bound`` (default) fails a floor when the run is credibly below it: the upper end of
    its 95% interval is under the floor (a checkpoint sitting exactly on the floor fails in at
    most 2.5% of runs; one just under it passes until the samples show it). ``judge: point``
    fails when the estimate is below (catches a checkpoint just under the floor; one sitting on
    it fails in about half of its runs). Ceilings are the mirror image. A metric the run has no
    value for fails its limit: a contract that cannot be checked is not met."""
    rows = []
    for kind, limits in (("floor", spec.floors), ("ceiling", spec.ceilings)):
        for name, limit in sorted(limits.items()):
            cur = current_metrics.get(name) or {}
            value, low, high = cur.get("value"), cur.get("low"), cur.get("high")
            floor = kind == "floor"
            sign = "<" if floor else ">"
            if not isinstance(value, int | float) or math.isnan(float(value)):
                verdict = "fail"
                why = f"fail: the run has no value of {name} to hold to its {kind} {limit:g}"
                value = low = high = None
            else:
                if spec.judge == "point":
                    judged, what = float(value), "the estimate"
                else:
                    end = high if floor else low
                    judged = float(end if isinstance(end, int | float) else value)
                    what = f"the 95% interval's {'upper' if floor else 'lower'} end"
                beyond = judged < limit if floor else judged > limit
                verdict = "fail" if beyond else "pass"
                rel = sign if beyond else (">=" if floor else "<=")
                why = (
                    f"{verdict}: {name} {float(value):.4g} [{_f(low)}, {_f(high)}] against the suite's {kind} "
                    f"{limit:g} (judge: {spec.judge}; {what} {judged:.4g} {rel} {limit:g})"
                )
            note = str(cur.get("note") or "")
            rows.append(
                MetricRow(
                    metric=name,
                    direction="higher" if floor else "lower",
                    tolerance=0.0,
                    golden=float(limit),
                    now=value,
                    now_low=low,
                    now_high=high,
                    delta=None if value is None else float(value) - float(limit),
                    delta_low=None,
                    delta_high=None,
                    p_value=None,
                    paired=False,
                    verdict=verdict,
                    explanation=why,
                    kind=kind,
                    note=note if note.startswith("one case") else "",
                )
            )
    return rows


def _power_guard(
    result: GateResult,
    run_cases: Sequence[Mapping[str, Any]],
    golden: Mapping[str, Any],
    spec: GateSpec,
    family: Sequence[str],
) -> None:
    """The power guard: the gate's power to catch a drop of ``spec.detect`` per tested metric
    (``plan.power_guard``, plan's numbers), a note, and in CI mode the refusal of an underpowered
    metric that no floor or ceiling covers, unless the suite acknowledges it."""
    from leader_eval.decide.plan import TARGET_POWER, power_guard

    scored = sorted(int(c.get("n_scored") or 0) for c in run_cases if c.get("n_scored"))
    if not scored or not family:
        return
    run_samples = scored[len(scored) // 2]
    result.detect = spec.detect
    result.acknowledged = spec.underpowered
    result.power = power_guard(golden, run_samples=run_samples, alpha=result.alpha, detect=spec.detect, metrics=family)
    if not result.power:
        return
    weak = sorted((p for p in result.power if p.power < TARGET_POWER), key=lambda p: p.power)
    result.underpowered = [p.metric for p in weak]
    level = result.power[0].level
    parts = []
    for p in result.power:
        need = ""
        if p.power < TARGET_POWER:
            need = f" (80% needs {p.samples_needed if p.samples_needed is not None else '> 1024'} samples/case)"
        less = f" of {p.drop:.3g} (all it can fall)" if p.drop < spec.detect else ""
        parts.append(f"{p.metric} {p.power:.0%}{less}{need}")
    result.messages.append(
        f"power to catch a {spec.detect:g} drop (gate: detect) at Holm level {level:.3g} with {run_samples} "
        f"samples/case: {', '.join(parts)}"
    )
    if result.strict and not spec.underpowered:
        result.power_refused = [m for m in result.underpowered if spec.limit(m) is None]


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


def golden_without_cases(golden: Mapping[str, Any], drop: set[str], weights: Mapping[str, float]) -> dict[str, Any]:
    """The golden over the cases not in ``drop`` (quarantined, or outside a ``-m`` subset).

    Per-case records of the dropped cases go; each paired metric's value is recomputed from the
    remaining per-case rates (when it is still their mean: a reviewer-edited value stays the
    contract). A diagnostic metric without per-case values cannot be restricted and is left
    out; a gating one stays, judged by the unpaired rule against its value."""
    gcases = golden.get("cases") or {}
    kept = {cid: rec for cid, rec in gcases.items() if cid not in drop}
    metrics = {}
    for name, g in golden["metrics"].items():
        spec = METRICS.get(name)
        key = spec.case_field if spec else None
        new = dict(g)
        restrictable = bool(key) and bool(gcases) and all(rec.get(key) is not None for rec in gcases.values())
        if not restrictable and (spec is None or not spec.gating):
            continue
        if restrictable and kept:

            def mean(recs: Mapping[str, Any], key: str = str(key)) -> float:
                w = {cid: weights.get(cid, 1.0) for cid in recs}
                return sum(w[cid] * float(rec[key]) for cid, rec in recs.items()) / sum(w.values())

            if abs(mean(gcases) - float(g["value"])) <= CASE_MEAN_SLACK:
                new["value"] = mean(kept)
        metrics[name] = new
    return {**golden, "cases": kept, "metrics": metrics}


#: the name the pytest plugin imported first
_golden_without = golden_without_cases


def _budget_rows(budgets: Mapping[str, int], run_cases: Sequence[Mapping[str, Any]]) -> list[MetricRow]:
    """One row per count budget in force (the suite's ``gate:``, else the golden's copy)."""
    rows = []
    for key, limit in sorted(budgets.items()):
        metric_name, what = BUDGETS[key]
        spec = METRICS[metric_name]
        count = sum(spec.count(c) for c in run_cases if c.get("n_scored"))
        where = [f"{c['case_id']} ({spec.count(c)})" for c in run_cases if c.get("n_scored") and spec.count(c)]
        over = count > int(limit)
        explanation = f"{'fail' if over else 'pass'}: {count} {what} against the suite's budget {key}: {limit}" + (
            f" ({', '.join(where[:5])}{', ...' if len(where) > 5 else ''})" if where else ""
        )
        rows.append(
            MetricRow(
                metric=key,
                direction="lower",
                tolerance=0.0,
                golden=float(limit),
                now=float(count),
                now_low=None,
                now_high=None,
                delta=float(count - int(limit)),
                delta_low=None,
                delta_high=None,
                p_value=None,
                paired=False,
                verdict="fail" if over else "pass",
                explanation=explanation,
                kind="budget",
            )
        )
    return rows


def staleness(run: Run, golden: Mapping[str, Any]) -> list[str]:
    """Messages saying why a golden no longer applies to ``run`` (empty when it does)."""
    ident = run.manifest["identity"]
    out = []
    if golden.get("suite_hash") != ident["suite_hash"]:
        out.append(f"golden is stale: suite content changed (hash {golden.get('suite_hash')} -> {ident['suite_hash']})")
    if out:
        out.append("re-run the suite and review a new golden with --update-golden")
    return out


def scorer_warning(run: Run, golden: Mapping[str, Any]) -> str | None:
    """A warning when the golden was scored by another scorer version than the run (the gate still
    decides: a scorer change that moves scores comes with regenerated goldens; docs/gating.md)."""
    run_scorer = str(run.manifest.get("scorer_version", SCORER_VERSION))
    if str(golden.get("scorer_version")) == run_scorer:
        return None
    return (
        f"warning: scorer version changed ({golden.get('scorer_version')} -> {run_scorer}): a difference may come "
        "from the checks, not the model; review and re-create the golden with --update-golden"
    )


def gate_run_dir(
    run_dir: str | Path,
    golden_dir: str | Path = "golden",
    *,
    baseline: str = DEFAULT_BASELINE,
    update: bool = False,
    strict: bool = False,
    allow_missing: bool = False,
    alpha: float = 0.05,
    tolerances: Iterable[str] | Mapping[str, float] | None = None,
    suite: Suite | None = None,
    max_error_rate: float = 0.0,
) -> GateResult:
    """``leader-eval gate RUN_DIR [--golden DIR] [--baseline NAME] [--update-golden] [--strict]``
    as a function.

    Reads the run, gates it against ``<golden_dir>/<suite>/<baseline>.json`` (whatever model made
    the run) and, with ``update``, then rewrites that golden from the run when ``update_golden``
    allows it (the gate's result is still the one against the old golden; ``result.update`` says
    what was written). A missing golden fails unless ``allow_missing``. Exit status:
    ``result.exit_status`` (bad input raises ``LeaderEvalError``, exit 2).
    """
    from leader_eval.runs.evaluate import read_run

    run = read_run(run_dir)
    tols = parse_tolerances(tolerances)
    path = golden_path(golden_dir, run.manifest["identity"]["suite"], baseline)
    golden = load_golden(path)
    check_golden_covers(path, golden, run)
    # the suite's own gate: section wins over the golden's copy, when the suite is the run's
    gate_suite = suite if suite is not None else _load_run_suite(run)
    same = gate_suite is not None and gate_suite.content_hash == run.manifest["identity"]["suite_hash"]
    suite_gate = dict(gate_suite.gate) if same and gate_suite is not None else None
    result = gate(
        run,
        golden,
        strict=strict,
        alpha=alpha,
        tolerances=tols,
        golden_file=path,
        baseline=None if Path(golden_dir).suffix == ".json" else baseline,
        allow_missing=allow_missing,
        suite_gate=suite_gate,
    )
    apply_error_rule(result, run, max_error_rate)
    if update:
        # the comparison above is against the old golden and stays in the table; a written update
        # means the user accepted this run as the new baseline, so the exit status is 0
        result.update = update_golden(
            run, golden_dir, baseline=baseline, suite=suite, tolerances=tols or None, max_error_rate=max_error_rate
        )
    return result


def apply_error_rule(result: GateResult, run: Run, max_error_rate: float = 0.0) -> None:
    """Fail the gate (status ``errors``) when the run's sampler errors exceed ``max_error_rate``:
    a passing table over the samples that did not error would be a false green."""
    verdict = error_verdict(run.summary, max_error_rate, overflow_is_error=not is_stress_manifest(run.manifest))
    if not verdict.failed:
        return
    if result.status in ("pass", "missing"):
        result.status = "errors"
    result.messages.insert(0, verdict.message())


@dataclass
class _Prepared:
    """One metric between pairing and the verdict (the verdict needs the whole family's p-values)."""

    row: MetricRow
    golden: float
    higher: bool
    current: Estimate | None
    paired: PairedComparison | None
    note: str
    #: one-sided p-value that the run is worse than the golden (the metric's declared test)
    p_worse: float | None = None
    #: the smallest p_worse the test could give with these data (Tarone; 0 when unbounded)
    min_p: float = 0.0

    def decide(self, level: float, family: Sequence[str], tested: bool) -> MetricRow:
        """The row's verdict at its Holm ``level``; ``tested``: the metric is in the gate's family
        (``metrics.gated_metrics``), else it is shown and never fails (``info``)."""
        row = self.row
        if self.current is None:
            if not tested:
                row.verdict = "info"
            return row
        verdict, explanation = regression_verdict(
            self.golden,
            self.current,
            higher_is_better=self.higher,
            tolerance=row.tolerance,
            paired=self.paired,
            # a level of 0 (no share of alpha left, holm_alphas) can reject nothing; the smallest
            # positive float keeps that meaning where regression_verdict refuses alpha 0
            alpha=max(level, sys.float_info.min),
        )
        notes = [self.note] if self.note else []
        if tested:
            if row.metric not in family:
                notes.append(
                    f"its test cannot reach significance here (smallest possible p {self.min_p:.3g}), so it takes "
                    f"no share of alpha; a family of {len(family)} gating metric(s)"
                )
            elif len(family) > 1:
                notes.append(f"Holm level {level:.3g} in a family of {len(family)} gating metrics")
        row.verdict = verdict if tested else "info"
        row.explanation = explanation + (f" ({'; '.join(notes)})" if notes else "")
        return row


def _prepare_metric(
    name: str,
    g: Mapping[str, Any],
    cur: Mapping[str, Any],
    golden: Mapping[str, Any],
    by_case: Mapping[str, Mapping[str, Any]],
    overrides: Mapping[str, float],
) -> _Prepared:
    spec = ALL_METRICS.get(name)
    higher = g.get("direction", spec.direction if spec else "higher") == "higher"
    tol = float(overrides.get(name, g.get("tolerance", DEFAULT_TOLERANCES.get(name, 0.0))))
    gval = float(g["value"])
    note = str(cur.get("note") or "")
    row = MetricRow(
        metric=name,
        direction="higher" if higher else "lower",
        tolerance=tol,
        golden=gval,
        now=cur.get("value"),
        now_low=cur.get("low"),
        now_high=cur.get("high"),
        delta=None,
        delta_low=None,
        delta_high=None,
        p_value=None,
        paired=False,
        verdict="fail",
        explanation="",
        # the report shows a one-case group's interval note; so do the gate's tables
        note=note if note.startswith("one case") else "",
    )
    if row.now is None or math.isnan(float(row.now)) or not cur.get("n_cases"):
        row.now = None
        row.verdict = "info" if name in DIAGNOSTIC_METRICS else "fail"
        row.explanation = "no scored sample in this run"
        return _Prepared(row, gval, higher, None, None, "")
    current = Estimate.from_dict(cur)
    decision, why = _paired_with_golden(name, gval, higher, golden, by_case)
    row.delta = current.value - gval
    prepared = _Prepared(row, gval, higher, current, None, why)
    if decision is None:
        row.delta_low, row.delta_high = current.low - gval, current.high - gval
        return prepared
    prepared.paired = decision.comparison
    prepared.note = "; ".join(x for x in (why, decision.note) if x)
    prepared.p_worse = decision.p_worse
    prepared.min_p = decision.min_p_worse
    row.paired = True
    row.delta_low, row.delta_high = decision.comparison.low, decision.comparison.high
    row.p_value = decision.p_worse
    return prepared


def _paired_with_golden(
    name: str,
    golden_value: float,
    higher: bool,
    golden: Mapping[str, Any],
    by_case: Mapping[str, Mapping[str, Any]],
) -> tuple[PairedDecision | None, str]:
    """The metric's paired decision (``stats.decide_paired``, its declared test) over the cases
    both scored: the golden's per-case rates and samples against the run's (diff = now - golden).

    Returns (None, why) when there is nothing to pair, or when the golden's per-case rates no
    longer average to its value: someone edited the value to demand more, and pairing with the
    old per-case rates would test the old value instead (the unpaired rule then decides).
    """
    spec = ALL_METRICS.get(name)
    key = spec.case_field if spec is not None else None
    gcases = golden.get("cases") or {}
    if spec is None or key is None or not gcases:
        return None, ""
    recs = {cid: rec for cid, rec in gcases.items() if rec.get(key) is not None}
    w_all = {cid: float(by_case.get(cid, {}).get("weight", 1.0)) for cid in recs}
    if recs and sum(w_all.values()) > 0:
        mean = sum(w_all[cid] * float(rec[key]) for cid, rec in recs.items()) / sum(w_all.values())
        if abs(mean - golden_value) > CASE_MEAN_SLACK:
            return None, f"golden value {golden_value:.4g} differs from its per-case mean {mean:.4g}: unpaired test"
    common = sorted(cid for cid in recs if by_case.get(cid, {}).get("n_scored") and by_case[cid].get(name) is not None)
    if len(common) < 2:
        return None, ""
    a = {cid: (float(recs[cid][key]), int(recs[cid].get("n_samples") or 0)) for cid in common}
    b = {cid: (float(by_case[cid][name]), spec.observations(by_case[cid])) for cid in common}
    weights = {cid: float(by_case[cid].get("weight", 1.0)) for cid in common}
    decision = decide_paired(a, b, weights, metric=name, higher_is_better=higher, test=spec.test)
    return decision, ""


def _coverage_problem(run: Run, golden: Mapping[str, Any]) -> str | None:
    status = run.manifest.get("status")
    if status != "complete":
        return f"run is not complete (status {status!r}): an interrupted run cannot pass the gate"
    from leader_eval.runs.evaluate import planned_shortfall

    short = planned_shortfall(run)
    if short:
        return short
    gcases = set((golden.get("cases") or {}).keys())
    ran = set(run.manifest["identity"].get("cases", {}))
    missing = sorted(gcases - ran)
    if missing:
        return (
            f"run covers {len(gcases) - len(missing)} of the golden's {len(gcases)} cases "
            f"(missing {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}): gate the full suite"
        )
    return None


# ---------------------------------------------------------------------------------------------
# formatting


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _signed(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.3f}"


def _reported(result: GateResult) -> str:
    from leader_eval.scoring.aggregate import format_pass_k

    return format_pass_k(result.reported)


def _rows(result: GateResult) -> list[list[str]]:
    rows = []
    for r in result.rows:
        arrow = "^" if r.direction == "higher" else "v"
        ci = f"[{_signed(r.delta_low)}, {_signed(r.delta_high)}]"
        if r.kind in ("floor", "ceiling"):
            bound = f"{'>=' if r.kind == 'floor' else '<='} {r.golden:g}"
            rows.append(
                [
                    f"{r.metric} {arrow}",
                    bound,
                    f"{_f(r.now)} [{_f(r.now_low)}, {_f(r.now_high)}]" + (" *" if r.note else ""),
                    "-",
                    "-",
                    r.kind,
                    r.verdict.upper() if r.verdict == "fail" else r.verdict,
                ]
            )
            continue
        if r.kind == "budget":
            rows.append(
                [
                    r.metric,
                    f"<= {r.golden:g}",
                    f"{r.now:g}",
                    "-",
                    "-",
                    "budget",
                    r.verdict.upper() if r.verdict == "fail" else r.verdict,
                ]
            )
            continue
        p = f"{r.p_value:.3f}" if r.p_value is not None else "unpaired"
        rows.append(
            [
                f"{r.metric} {arrow}",
                _f(r.golden),
                f"{_f(r.now)} [{_f(r.now_low)}, {_f(r.now_high)}]" + (" *" if r.note else ""),
                f"{_signed(r.delta)} {ci}",
                f"±{r.tolerance:g}",
                p,
                r.verdict.upper() if r.verdict == "fail" else r.verdict,
            ]
        )
    return rows


_HEADERS = ["metric", "golden", "now [95% CI]", "delta [95% CI]", "tolerance", "p (worse)", "verdict"]


def _interval_notes(result: GateResult) -> list[str]:
    """The notes of the intervals marked ``*`` (a one-case group's degenerate interval), one per metric."""
    seen: dict[str, str] = {}
    for r in result.rows:
        if r.note and r.metric not in seen:
            seen[r.metric] = r.note
    return [f"{m}: {n}" for m, n in seen.items()]


def format_gate_table(result: GateResult) -> str:
    """The terminal summary: headline, the table (metric, golden, now, delta with CI, verdict), notes."""
    lines = [result.headline()]
    if result.rows:
        lines.append(table(_HEADERS, _rows(result)))
    lines.extend(f"  {m}" for m in result.messages if m not in result.headline())
    lines.extend(f"  * {note}" for note in _interval_notes(result))
    for r in result.rows:
        if r.verdict in ("fail", "improved"):
            lines.append(f"  {r.metric}: {r.explanation}")
    if result.reported:
        lines.append(f"reported, not gated: {_reported(result)}")
    if result.golden_path is not None:
        lines.append(f"golden: {result.golden_path}")
    if result.update is not None:
        lines.append(("updated golden: " if result.update.written else "golden not updated: ") + result.update.reason)
    return inert("\n".join(lines), multiline=True)  # a fragment from a suite, run or golden: one line, no escapes


def gate_markdown(result: GateResult) -> str:
    """The same summary as Markdown, for a pull request comment or ``$GITHUB_STEP_SUMMARY``."""
    # a missing golden fails unless --allow-missing-golden: only then is it a warning
    icon = {"pass": "✅", "fail": "❌", "stale": "❌", "incomplete": "❌", "errors": "❌"}.get(
        result.status, "⚠️" if result.exit_status == 0 else "❌"
    )
    lines = [f"### {icon} {_md(result.headline())}", ""]
    if result.rows:
        lines.append("| " + " | ".join(_HEADERS) + " |")
        lines.append("|" + "|".join(["---"] * len(_HEADERS)) + "|")
        for row in _rows(result):
            cells = [_md(c) for c in row]
            if cells[-1] in ("FAIL", "improved"):
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    notes = [_md(m) for m in result.messages if m not in result.headline()]
    notes += [f"\\* {_md(note)}" for note in _interval_notes(result)]
    notes += [f"`{r.metric}`: {_md(r.explanation)}" for r in result.rows if r.verdict in ("fail", "improved")]
    if result.update is not None:
        update = ("updated golden: " if result.update.written else "golden not updated: ") + result.update.reason
        notes.append(_md(update))
    if result.reported:
        notes.append(_md(f"reported, not gated: {_reported(result)}"))
    lines.extend(f"- {n}" for n in notes)
    if result.golden_path is not None:
        lines.append(
            f"\n<sub>golden {_md(result.golden_path)}; alpha {result.alpha:g} (one-sided); delta = now − golden</sub>"
        )
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------
# helpers


def _round(v: Any) -> Any:
    return None if v is None else round(float(v), DECIMALS)


def _safe(name: str) -> str:
    # one path component: a label or suite name must never climb out of the golden directory
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "unnamed"


def _without(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def _load_run_suite(run: Run) -> Suite | None:
    """The suite the run was made from, found from any working directory
    (``runs.manifest.recorded_suite_paths``): the first candidate with the run's content hash, else
    the first that loads (the caller then reports the changed hash), else None."""
    from leader_eval.runs.manifest import recorded_suite_paths
    from leader_eval.suite.load import load_suite

    want = (run.manifest.get("identity") or {}).get("suite_hash")
    fallback: Suite | None = None
    for path in recorded_suite_paths(run.manifest, Path(run.path)):
        try:
            suite = load_suite(path)
        except (OSError, LeaderEvalError):
            continue
        if suite.content_hash == want:
            return suite
        fallback = fallback or suite
    return fallback


def _md(text: object) -> str:
    # a golden's reason, a server's error text, a path: rendered as that text, never as markup
    return markdown(text)
