"""``judge-check``: measure a judge against people before trusting it (docs/judges.md).

A labelled set is JSON Lines, one text per line: ``{"id": "...", "text": "...", "labels":
{"<criterion>": "pass" | "fail" | <integer>}}``. For each criterion of the suite that the set
labels, the criterion's judge grades every text ``k`` times (seeds 0..k-1) and once more padded
with neutral filler, and the report gives:

- agreement with the labels: Cohen's kappa (quadratic-weighted on an integer scale) with a
  bootstrap interval (``stats.agreement``), over the texts the judge gave a verdict on, beside
  the judge error rate (a judge that errs on the hard texts looks better than it is: both count);
- self-consistency: the share of texts whose k verdicts agree (k >= 2);
- length bias: the mean verdict of the padded texts minus that of the same texts unpadded, and
  the share of verdicts the padding flipped;
- order bias: pairwise judging is not built, so it is reported as not measured.

It writes the criterion's calibration record (``store.calibration``), which a run reads to decide
whether the criterion's metric may gate.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leader_eval.bounded.numeric import np
from leader_eval.errors import LeaderEvalError
from leader_eval.runs import event_loop
from leader_eval.runs.judging import Judge, ask, judge_from_role
from leader_eval.runs.trusted import Trusted
from leader_eval.scoring.judge import parse_verdict
from leader_eval.stats.agreement import kappa_with_ci
from leader_eval.store.calibration import calibration_dir, write_record
from leader_eval.suite.judge_spec import PASS_FAIL, JudgeSpec
from leader_eval.suite.load import load_suite

#: what pads a text in the length probe: neutral to any rubric about tone or content
PADDING = " ".join(["The weather in the village was mild and nothing else happened that day."] * 6)
#: the most texts a labelled set may hold (each is judged k + 1 times)
MAX_ITEMS = 10_000


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    labels: Mapping[str, Any]
    line: int


def read_labelled(path: str | Path) -> list[Item]:
    """The labelled set; a bad line is a one-line error naming the file and line."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise LeaderEvalError(f"{p}: cannot read: {exc.strerror or exc}") from None
    items: list[Item] = []
    seen: set[str] = set()
    for lineno, line in enumerate(raw.decode("utf-8", "replace").split("\n"), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise LeaderEvalError(f"{p}:{lineno}: not JSON: {exc}") from None
        if not (
            isinstance(rec, dict)
            and isinstance(rec.get("id"), str)
            and isinstance(rec.get("text"), str)
            and isinstance(rec.get("labels"), dict)
        ):
            raise LeaderEvalError(f'{p}:{lineno}: expected {{"id": str, "text": str, "labels": {{criterion: label}}}}')
        if rec["id"] in seen:
            raise LeaderEvalError(f"{p}:{lineno}: id {rec['id']!r} given twice")
        seen.add(rec["id"])
        items.append(Item(rec["id"], rec["text"], rec["labels"], lineno))
        if len(items) > MAX_ITEMS:
            raise LeaderEvalError(f"{p}:{lineno}: more than {MAX_ITEMS:,} labelled texts")
    if not items:
        raise LeaderEvalError(f"{p}: no labelled texts")
    return items


def _label_ok(spec: JudgeSpec, label: Any) -> bool:
    if spec.scale.kind == PASS_FAIL:
        return label in ("pass", "fail")
    return isinstance(label, int) and not isinstance(label, bool) and spec.scale.low <= label <= spec.scale.high


def _categories(spec: JudgeSpec) -> list[Any]:
    return ["fail", "pass"] if spec.scale.kind == PASS_FAIL else list(range(spec.scale.low, spec.scale.high + 1))


def check_criterion(
    spec: JudgeSpec,
    judge: Judge,
    items: Sequence[Item],
    *,
    k: int = 1,
    labelled: str = "",
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """The calibration figures of one criterion's judge on the labelled items that label it."""
    mine = [it for it in items if spec.name in it.labels]
    for it in mine:
        if not _label_ok(spec, it.labels[spec.name]):
            raise LeaderEvalError(
                f"{labelled}:{it.line}: label {it.labels[spec.name]!r} of {spec.name} is not on its scale "
                f"({spec.scale.describe()})"
            )
    if not mine:
        raise LeaderEvalError(f"{labelled}: no text labels criterion {spec.name!r}")

    async def verdicts() -> list[list[Any]]:
        out = []
        for it in mine:  # one at a time: a local judge serves one request at a time anyway
            row = []
            for i in range(k):
                reply, error = await ask(judge, spec, it.text, {}, seed + i)
                row.append(None if error else parse_verdict(reply, spec.scale).raw)
            reply, error = await ask(judge, spec, f"{it.text}\n\n{PADDING}", {}, seed)
            row.append(None if error else parse_verdict(reply, spec.scale).raw)
            out.append(row)
            if progress and (len(out) % 10 == 0 or len(out) == len(mine)):
                print(f"judge-check {spec.name}: {len(out)}/{len(mine)} texts judged", file=sys.stderr, flush=True)
        return out

    rows = event_loop.run(verdicts())
    first = [r[0] for r in rows]
    human = [it.labels[spec.name] for it in mine]
    paired = [(h, j) for h, j in zip(human, first, strict=True) if j is not None]
    weights = "none" if spec.scale.kind == PASS_FAIL else "quadratic"
    kappa = kappa_with_ci([h for h, _ in paired], [j for _, j in paired], _categories(spec), weights=weights, seed=seed)
    n_calls = len(rows) * (k + 1)
    n_errors = sum(v is None for r in rows for v in r)
    consistency = None
    if k >= 2:
        complete = [r[:k] for r in rows if all(v is not None for v in r[:k])]
        consistency = sum(len(set(r)) == 1 for r in complete) / len(complete) if complete else None

    def value(v: Any) -> float:
        if spec.scale.kind == PASS_FAIL:
            return 1.0 if v == "pass" else 0.0
        return (float(v) - spec.scale.low) / (spec.scale.high - spec.scale.low)

    both = [(value(r[0]), value(r[-1])) for r in rows if r[0] is not None and r[-1] is not None]
    length: dict[str, Any] = {"n": len(both), "shift": None, "low": None, "high": None, "flipped": None}
    if both:
        d = np.array([b - a for a, b in both])
        boots = np.random.default_rng(seed).choice(d, size=(2000, len(d))).mean(axis=1)
        length.update(
            shift=round(float(d.mean()), 4),
            low=round(float(np.quantile(boots, 0.025)), 4),
            high=round(float(np.quantile(boots, 0.975)), 4),
            flipped=round(float(np.mean(d != 0)), 4),
        )
    accuracy = sum(h == j for h, j in paired) / len(paired) if paired else None
    return {
        "agreement": {**kappa.to_dict(), "statistic": "cohen_kappa"},
        "raw_agreement": None if accuracy is None else round(accuracy, 4),
        "n_items": len(mine),
        "n_verdicts": len(paired),
        "judge_calls": n_calls,
        "judge_errors": n_errors,
        "judge_error_rate": round(n_errors / n_calls, 4),
        "k": k,
        "self_consistency": None if consistency is None else round(consistency, 4),
        "length_bias": length,
        "order_bias": "not measured: pairwise judging is not built",
    }


def judge_check(
    suite_path: str | Path,
    labelled: str | Path,
    trusted: Trusted,
    *,
    criteria: Sequence[str] = (),
    k: int = 1,
    out_dir: str | Path | None = None,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Calibrate the suite's judges on a labelled set; write one record per criterion."""
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 20:
        raise LeaderEvalError(f"--k {k!r}: an integer from 1 to 20")
    event_loop.loop_factory()  # a bad LEADER_EVAL_EVENT_LOOP: before anything is read
    suite = load_suite(suite_path)
    items = read_labelled(labelled)
    by_name = {s.name: s for s in suite.judges if not s.pairwise}  # labels grade one text each
    unknown = [c for c in criteria if c not in by_name]
    if unknown:
        known = ", ".join(by_name) or "none"
        raise LeaderEvalError(f"--criterion {unknown[0]}: the suite has no such judge (judges: {known})")
    wanted = list(criteria) or [s.name for s in suite.judges if any(s.name in it.labels for it in items)]
    if not wanted:
        raise LeaderEvalError(f"{labelled}: labels none of the suite's judges ({', '.join(by_name) or 'none'})")
    folder = Path(out_dir) if out_dir is not None else calibration_dir(suite.path)
    set_hash = hashlib.sha256(Path(labelled).read_bytes()).hexdigest()
    report: dict[str, Any] = {"suite": suite.name, "labelled": str(labelled), "criteria": {}}
    judges: dict[str, Judge] = {}
    try:
        for name in wanted:
            spec = by_name[name]
            where = f"{suite.path}:{spec.line}: judges.{name}"
            judge = judges.get(spec.model_role) or judge_from_role(trusted, spec.model_role, where=where)
            judges[spec.model_role] = judge
            figures = check_criterion(spec, judge, items, k=k, labelled=str(labelled), seed=seed, progress=progress)
            figures["labelled_sha256"] = set_hash
            identity = judge.identity(spec)
            path = write_record(folder, name, identity, figures)
            report["criteria"][name] = {**figures, "judge": identity, "record": str(path)}
    finally:
        for judge in judges.values():
            event_loop.run(judge.backend.aclose())
    return report


def format_report(report: Mapping[str, Any]) -> str:
    lines = [f"judge-check {report['suite']} on {report['labelled']}"]
    for name, f in report["criteria"].items():
        a = f["agreement"]

        def num(v: Any) -> str:
            return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

        lines.append(
            f"  {name}: kappa {num(a['kappa'])} [{num(a['low'])}, {num(a['high'])}] ({a['weights']} weights) "
            f"over {f['n_verdicts']} of {f['n_items']} texts; raw agreement {num(f['raw_agreement'])}; "
            f"judge errors {f['judge_errors']}/{f['judge_calls']}"
        )
        lb = f["length_bias"]
        sc = f["self_consistency"]
        lines.append(
            f"    self-consistency (k={f['k']}): {num(sc) if sc is not None else 'not measured (k=1)'}; "
            f"length bias: shift {num(lb['shift'])} [{num(lb['low'])}, {num(lb['high'])}], "
            f"flipped {num(lb['flipped'])}; order bias: {f['order_bias']}"
        )
        lines.append(f"    judge {f['judge']['model_id']}; record {f['record']}")
    return "\n".join(lines)
