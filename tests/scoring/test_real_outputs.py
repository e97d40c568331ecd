"""The scorer against real outputs of the embedded model, labeled by hand.

``tests/corpus/real/samples.jsonl`` holds raw outputs recorded from SmolLM2-135M-Instruct (the
embedded model) on the suites, exactly as sampled (end-of-turn token included).
``tests/corpus/real/labels.yaml`` holds, for each, the verdict a person reached by reading the
output against docs/scoring.md, docs/protocols.md and docs/leakage.md: passed, primary reason,
strict format, and every leak finding with its class and span. The labels were written before
the checker was run on these outputs; where the checker disagreed, the output was read again and
the label kept when the checker was wrong (see each label's ``why``).

No model is needed: the prompts are re-rendered from a frozen copy of each suite (used when the
suite in ``suites/`` has changed since recording) and SmolLM2's ChatML template, and must hash to
the prompt the model actually saw.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from leader_eval.scoring.scorer import ModelInfo, SampleScore, score_samples
from leader_eval.suite.chat_template import render_chat_template
from leader_eval.suite.load import Suite, load_suite
from leader_eval.suite.render import render_messages
from leader_eval.types import Sample
from tests.corpus import PRF_TARGET, prf_table

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "real"

Finding = tuple[str, str, int, int]  # (class, where, start, end)


@dataclass(frozen=True)
class Record:
    id: str
    run: str
    case_id: str
    index: int
    text: str
    stop_reason: str
    passed: bool
    reason: str | None
    strict_format: bool
    findings: frozenset[Finding]
    why: str


@cache
def _meta() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / "meta.json").read_text(encoding="utf-8"))
    return data


@cache
def _records() -> tuple[Record, ...]:
    labels = yaml.safe_load((CORPUS / "labels.yaml").read_text(encoding="utf-8"))["labels"]
    out = []
    with (CORPUS / "samples.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            s = json.loads(line)
            lab = labels[s["id"]]
            out.append(
                Record(
                    id=s["id"],
                    run=s["run"],
                    case_id=s["case_id"],
                    index=s["index"],
                    text=s["text"],
                    stop_reason=s["stop_reason"],
                    passed=lab["passed"],
                    reason=lab.get("reason"),
                    strict_format=lab["strict_format"],
                    findings=frozenset((f["class"], f["where"], f["start"], f["end"]) for f in lab.get("findings", ())),
                    why=lab.get("why", ""),
                )
            )
    assert set(labels) == {r.id for r in out}, "every label belongs to a recorded sample and vice versa"
    return tuple(out)


def _suite_for(run: str) -> Suite:
    """The suite the run was recorded with: the live one if unchanged, else the frozen copy."""
    info = _meta()["runs"][run]
    live = ROOT / info["suite"]
    if live.is_file():
        try:
            suite = load_suite(live)
        except Exception:  # a later edit may not even load; the frozen copy still does
            suite = None
        if suite is not None and suite.content_hash == info["suite_hash"]:
            return suite
    frozen = load_suite(CORPUS / info["frozen_suite"])
    assert frozen.content_hash == info["suite_hash"], "the frozen suite copy was edited"
    return frozen


def _model() -> ModelInfo:
    m = _meta()["model"]
    return ModelInfo(special_tokens=tuple(m["special_tokens"]), eot_tokens=tuple(m["eot_tokens"]))


@cache
def _scores() -> dict[str, SampleScore]:
    """Score every recorded sample with the real pipeline, one run at a time."""
    template = _meta()["model"]["chat_template"]
    by_run: dict[str, list[Record]] = {}
    for r in _records():
        by_run.setdefault(r.run, []).append(r)
    out: dict[str, SampleScore] = {}
    for run, recs in by_run.items():
        info = _meta()["runs"][run]
        suite = _suite_for(run)
        prompts: dict[str, dict[str, Any]] = {}
        for case in suite.cases:
            messages = render_messages(suite, case)
            text = render_chat_template(template, messages, bos_token="<|im_start|>", eos_token="<|im_end|>")
            digest = hashlib.sha256(text.encode()).hexdigest()
            # the restates check compares with this text: it must be what the model saw
            assert digest == info["prompt_sha256"][case.id], f"{run}: prompt of {case.id} differs from the recording"
            prompts[case.id] = {"messages": messages, "text": text}
        samples = [
            Sample(
                case_id=r.case_id,
                index=r.index,
                seed=0,
                key=r.id,
                outcome="ok",
                text=r.text,
                stop_reason=r.stop_reason,  # type: ignore[arg-type]
            )
            for r in recs
        ]
        scores = score_samples(suite, samples, prompts, info["protocol"], _model())
        by_slot = {(s.case_id, s.index): s for s in scores}
        for r in recs:
            out[r.id] = by_slot[(r.case_id, r.index)]
    return out


def _findings(score: SampleScore) -> dict[Finding, str]:
    for c in score.checks:
        if c["check"] == "leakage":
            return {(f["reason"], f["where"], f["start"], f["end"]): f["text"] for f in c["findings"]}
    return {}


def test_corpus_is_big_enough_and_real() -> None:
    recs = _records()
    assert len(recs) >= 100
    # the same text may come back for two cases (a bare '{...}' call did), never twice for one
    assert len({(r.case_id, r.text) for r in recs}) == len(recs), "no output recorded twice"
    assert all(r.text.endswith("<|im_end|>") or r.stop_reason == "length" for r in recs)


@pytest.mark.parametrize("rec", _records(), ids=lambda r: r.id)
def test_real_output(rec: Record) -> None:
    got = _scores()[rec.id]
    found = _findings(got)
    want = {
        "passed": rec.passed,
        "reason": rec.reason,
        "strict_format": rec.strict_format,
        "findings": sorted(rec.findings),
    }
    have = {
        "passed": got.passed,
        "reason": got.reason,
        "strict_format": got.strict_format,
        "findings": sorted(found),
    }
    assert have == want, (
        f"{rec.id}\n raw={rec.text!r}\n label why: {rec.why}\n"
        f" finding texts: {[(k, v) for k, v in found.items()]}\n"
        f" failed checks: {[(c['check'], c['reason'], c['detail']) for c in got.failed_checks]}"
    )


def _prf(pairs: list[tuple[set[Any], set[Any]]]) -> dict[str, tuple[int, int, int]]:
    """Per class: (true positives, predicted, labeled) over (labeled items, predicted items) pairs."""
    tp: Counter[str] = Counter()
    pred: Counter[str] = Counter()
    lab: Counter[str] = Counter()
    for want, have in pairs:
        for item in have:
            pred[item[0]] += 1
        for item in want:
            lab[item[0]] += 1
        for item in want & have:
            tp[item[0]] += 1
    return {c: (tp[c], pred[c], lab[c]) for c in sorted(set(pred) | set(lab))}


def test_precision_and_recall_per_class(capsys: pytest.CaptureFixture[str]) -> None:
    """Per failure reason (the sample's primary reason, "pass" for a pass), per strict-format
    verdict, and per leak class (a finding counts only with its exact class, place and span)."""
    recs = _records()
    scores = _scores()
    tables = {
        "primary reason": _prf([({(r.reason or "pass",)}, {(scores[r.id].reason or "pass",)}) for r in recs]),
        "strict format": _prf(
            [({(str(r.strict_format).lower(),)}, {(str(scores[r.id].strict_format).lower(),)}) for r in recs]
        ),
        "leak findings": _prf([(set(r.findings), set(_findings(scores[r.id]))) for r in recs]),
    }
    low = []
    lines = []
    for name, table in tables.items():
        prf_table(name, table, lines, low)
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert not low, f"below {PRF_TARGET}: {low}\n" + "\n".join(lines)
