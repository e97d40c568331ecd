"""Golden baselines: the file a new checkpoint must meet in CI.

A golden file (``golden/<suite>/<baseline>.json``, baseline ``main`` unless ``--baseline`` names
another) records one complete run's suite metrics with their direction and tolerance, per-case
pass rates and the run's sampling identity, keyed to the suite content hash and the scorer
version it was measured under. Any model is gated against the baseline; the run's ``--label``
only names the run. It is meant to be read in a pull request: keys sorted, values rounded to 4
decimals, two-space indent, no timestamps.

This module is the file: where it lives (``golden_path``), how a trusted run becomes one
(``build_golden``, ``update_golden``, refused by ``update_refusal``), how it is read and when it
is refused (``load_golden``, ``golden_problem``), the sampling identity it records and its drift
(``sampling_identity``, ``sampling_drift``), and the golden over a subset of its cases
(``golden_without_cases``). The gate that reads it is ``decide.gate``, its quarantine list
``decide.quarantine``, its tables ``report.gate`` (docs/design-0.3.md section 1, docs/gating.md).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.errors import LeaderEvalError, RunDirError
from leader_eval.runs.argtypes import name_component
from leader_eval.runs.manifest import recorded_suite_paths
from leader_eval.scoring.error_rule import error_verdict, is_stress_manifest
from leader_eval.stats.metrics import ALL_METRICS, JUDGE_PREFIX, METRICS, gated_metrics, judge_metric, judges_gated
from leader_eval.store.formats import GOLDEN_FORMAT_VERSION, SCORER_VERSION, check_format, format_version
from leader_eval.store.names import default_label
from leader_eval.store.run_store import read_bytes, shown, write_json_atomic
from leader_eval.suite.gate_spec import BUDGETS, gate_problem
from leader_eval.suite.load import Suite, load_suite

if TYPE_CHECKING:
    from leader_eval.runs.evaluate import Run

#: the largest golden file read (a golden holds per-case rates: ~200 bytes a case)
GOLDEN_CAP = 64 << 20

GOLDEN_FORMAT = GOLDEN_FORMAT_VERSION

DECIMALS = 4

#: the baseline a run is gated against unless ``--baseline`` / ``--le-baseline`` names another
DEFAULT_BASELINE = "main"

#: how far a golden value may sit from the mean of its rounded per-case rates and still be theirs
CASE_MEAN_SLACK = 5e-4


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
    tolerances = dict(tolerances or {})
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
            "tolerance": _round(tolerances.get(name, spec.tolerance)),
            "n_samples": int(m.get("n_samples") or 0),
            "n_cases": int(m.get("n_cases") or 0),
        }
    # a rubric criterion gates only where its judge was calibrated for it (the run decided: ``gated``)
    gated_judges = judges_gated(metrics)
    for name in gated_judges:
        m = metrics[name]
        if m.get("value") is None:
            continue
        out_metrics[name] = {
            "value": _round(m["value"]),
            "low": _round(m.get("low")),
            "high": _round(m.get("high")),
            "direction": "higher",
            "tolerance": _round(tolerances.get(name, judge_metric(name[len(JUDGE_PREFIX) :]).tolerance)),
            "n_samples": int(m.get("n_samples") or 0),
            "n_cases": int(m.get("n_cases") or 0),
            "gated": True,
        }
    cases: dict[str, Any] = {}
    for c in run.cases:
        if not c.get("n_scored"):
            continue
        rec: dict[str, Any] = {"n_samples": int(c["n_scored"])}
        # the per-case values the gate pairs with the run's cases, for every gating metric: without
        # them the golden's own sampling noise is not accounted for, and a run of the very same
        # model fails about 12% of the time at alpha 0.05 (measured; docs/gating.md)
        for metric, spec in ALL_METRICS.items():
            if spec.case_field and c.get(metric) is not None:  # a case without episodes has no episode metric
                rec[spec.case_field] = _round(c[metric])
        for name in gated_judges:
            if c.get(name) is not None:
                rec[name] = _round(c[name])
                rec[f"n_{name}"] = int(c.get(f"n_{name}") or 0)
        cases[c["case_id"]] = rec
    # who judged: a different judge against this golden is a gate error (``judge_drift``)
    judges = {
        name: {k: info.get(k) for k in ("judge", "calibration", "gated", "rubric_sha256", "min_agreement")}
        for name, info in (run.summary.get("judges") or {}).items()
    }
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
        **({"judges": json.loads(json.dumps(judges))} if judges else {}),
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


def _judge_words(identity: Mapping[str, Any] | None) -> str:
    if not isinstance(identity, Mapping):
        return "an unknown judge"
    weights = identity.get("weights") or "weights unknown"
    prompt = str(identity.get("template_sha256") or "")[:12]
    return (
        f"{identity.get('model_id')} ({weights}, temperature {identity.get('temperature')}, "
        f"prompt {prompt}, rubric {str(identity.get('rubric_sha256') or '')[:12]})"
    )


def judge_drift(run: Run, golden: Mapping[str, Any], golden_file: Path | None = None) -> list[str]:
    """One line per rubric criterion whose judge differs between the golden and the run: a
    different judge is a different ruler, so the gate refuses to compare ("judge changed:
    re-baseline"), naming both. A criterion only one side judged is left to the metric rows."""
    mine = run.summary.get("judges") or {}
    theirs = golden.get("judges") or {}
    where = str(golden_file) if golden_file is not None else "the golden"
    out = []
    for name in sorted(set(mine) & set(theirs)):
        a = (theirs.get(name) or {}).get("judge")
        b = (mine.get(name) or {}).get("judge")
        if a is not None and b is not None and a != b:
            out.append(
                f"judge changed: re-baseline: criterion {name!r} was judged by {_judge_words(a)} in {where} "
                f"and by {_judge_words(b)} in this run"
            )
    return out


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
        gating = ", ".join(gated_metrics(ALL_METRICS))
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
        judged = [k for k in rec if isinstance(k, str) and k.startswith(JUDGE_PREFIX)]
        for key in [*(m.case_field for m in ALL_METRICS.values() if m.case_field), *judged]:
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
            suite = load_run_suite(run)
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
    budget_suite = suite if suite is not None else load_run_suite(run)
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


# ---------------------------------------------------------------------------------------------
# helpers


def _round(v: Any) -> Any:
    return None if v is None else round(float(v), DECIMALS)


def _safe(name: str) -> str:
    # one path component: a label or suite name must never climb out of the golden directory
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "unnamed"


def _without(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def load_run_suite(run: Run) -> Suite | None:
    """The suite the run was made from, found from any working directory
    (``runner.recorded_suite_paths``): the first candidate with the run's content hash, else
    the first that loads (the caller then reports the changed hash), else None."""
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
