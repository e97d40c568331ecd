"""``judge-check`` on the shipped labelled set, with a scripted judge (a test double)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.runs.judge_check import PADDING, judge_check, read_labelled
from leader_eval.runs.trusted import NamedModel, Trusted
from tests.support.scripted import ScriptedBackend

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "fixtures" / "judge" / "leader_core_judges.yaml"
LABELLED = ROOT / "fixtures" / "judge" / "leader_core_labelled.jsonl"
LABELS = {json.loads(line)["text"]: json.loads(line)["labels"] for line in LABELLED.read_text().splitlines()}


def _oracle(flip_padded: bool) -> Any:
    def pick(prompt: str, seed: int) -> str:
        criterion = "polite" if "Rubric (polite)" in prompt else "actionable"
        body = prompt.split("BEGIN JUDGED-TEXT-")[1].split("\n", 1)[1].rsplit("\nEND JUDGED-TEXT-", 1)[0]
        padded = body.endswith(PADDING)
        text = body.removesuffix(f"\n\n{PADDING}")
        verdict = LABELS[text][criterion]
        if padded and flip_padded:
            verdict = "pass"
        return json.dumps({"verdict": verdict})

    return pick


def _trusted(judge: Any) -> Trusted:
    return Trusted(models={"grader": NamedModel("grader", {"model": "test:oracle", "backend": judge}, "test")})


def test_the_shipped_set_has_sixty_labelled_messages_per_criterion() -> None:
    items = read_labelled(LABELLED)
    assert len(items) >= 60
    for name in ("polite", "actionable"):
        labels = [it.labels[name] for it in items]
        assert set(labels) == {"pass", "fail"}


def test_an_oracle_judge_agrees_perfectly_and_a_length_biased_one_is_caught(tmp_path: Path) -> None:
    judge = ScriptedBackend([], pick=_oracle(flip_padded=False), model_id="test:oracle")
    report = judge_check(SUITE, LABELLED, _trusted(judge), k=2, out_dir=tmp_path)
    polite = report["criteria"]["polite"]
    assert polite["agreement"]["kappa"] == 1.0 and polite["self_consistency"] == 1.0
    assert polite["length_bias"]["shift"] == 0.0
    assert judge.requests == 2 * 66 * 3  # two criteria, k = 2 plus the padded text
    record = json.loads(Path(polite["record"]).read_text())
    assert record["judge"]["model_id"] == "test:oracle" and record["agreement"]["kappa"] == 1.0

    biased = ScriptedBackend([], pick=_oracle(flip_padded=True), model_id="test:oracle")
    report = judge_check(SUITE, LABELLED, _trusted(biased), criteria=["polite"], out_dir=tmp_path)
    lb = report["criteria"]["polite"]["length_bias"]
    assert lb["shift"] > 0.2 and lb["low"] > 0  # padding turned every fail into a pass


def test_a_judge_that_never_answers_in_scale_has_no_kappa_and_all_errors(tmp_path: Path) -> None:
    judge = ScriptedBackend(["I think it passes."], model_id="test:chatty")
    report = judge_check(SUITE, LABELLED, _trusted(judge), criteria=["polite"], out_dir=tmp_path)
    polite = report["criteria"]["polite"]
    assert polite["agreement"]["kappa"] is None and polite["judge_error_rate"] == 1.0


def test_a_label_off_the_scale_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "a", "text": "hi", "labels": {"polite": "pass"}}\n{"id": "b", "text": "x", "labels": {"polite": 3}}\n'
    )
    judge = ScriptedBackend(['{"verdict": "pass"}'], model_id="test:x")
    with pytest.raises(LeaderEvalError, match=r"bad.jsonl:2: label 3 of polite is not on its scale"):
        judge_check(SUITE, bad, _trusted(judge), out_dir=tmp_path)
