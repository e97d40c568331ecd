"""The public scoring API: docs/api.md's examples run as written, and score_output gives the
verdict a run gives for the same sample."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path

import pytest

import leader_eval
from leader_eval.errors import LeaderEvalError, SuiteError
from leader_eval.scoring.scorer import case_scorer
from leader_eval.suite.render import render_messages
from leader_eval.types import Sample

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"


@pytest.mark.model  # the run, gate and compare examples sample the embedded model
def test_the_documented_examples_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    text = "\n".join(blocks)
    # every entry point the page promises is exercised by a block, not only described
    for used in ("run(", "read_run(", "RunOptions(", "gate_run_dir(", "compare_runs(", "score_output("):
        assert used in text, used
    assert len(blocks) >= 7
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the examples' scratch folder
    namespace: dict[str, object] = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{DOC}:block{i + 1}", "exec"), namespace)


def test_score_output_is_the_runs_verdict() -> None:
    suite = leader_eval.load_suite(ROOT / "suites" / "leader_core.yaml")
    case = suite.cases[0]
    text = '{"tool": "send_message_to_chat", "arguments": {"message": "Hi [GOAL] <think>"}}<|im_end|>'
    model = leader_eval.ModelInfo(special_tokens=("<|im_end|>", "<|im_start|>"), eot_tokens=("<|im_end|>",))
    messages = render_messages(suite, case)
    prompt = "\n".join(m["content"] for m in messages)
    by_run = case_scorer(suite, case, "json", model, messages, prompt).score(
        Sample(case.id, 0, 0, "k", "ok", text=text, stop_reason="stop")
    )
    by_api = leader_eval.score_output(suite, text, case=case.id, model=model)
    assert by_api.to_dict() == by_run.to_dict()
    assert by_api.hard_fail and by_api.leak_classes == ["leak_reasoning", "leak_placeholder"]


def test_load_suite_takes_a_path_text_or_a_dict_and_names_bad_text() -> None:
    path = ROOT / "suites" / "examples" / "minimal.yaml"
    from_path = leader_eval.load_suite(str(path))
    from_text = leader_eval.load_suite(path.read_text(encoding="utf-8"))
    assert [c.id for c in from_text.cases] == [c.id for c in from_path.cases]
    assert leader_eval.load_suite(from_path) is from_path
    with pytest.raises(SuiteError, match=r"^<string>:\d+: "):
        leader_eval.load_suite("name: x\ncases: 3\n")
    with pytest.raises(LeaderEvalError, match="no case 'nope'"):
        leader_eval.score_output(from_path, "hi", case="nope")


def test_the_result_types_are_exported() -> None:
    for name in ("SampleScore", "CheckResult", "Finding", "Reason", "ToolCall", "ModelInfo", "Suite", "score_output"):
        assert name in leader_eval.__all__ and getattr(leader_eval, name) is not None


def test_run_options_take_any_path_for_out() -> None:
    from leader_eval.runs.options import RunOptions

    class Where:  # an os.PathLike that is not a Path
        def __fspath__(self) -> str:
            return "runs/elsewhere"

    assert RunOptions(out="runs/x").out == Path("runs/x")
    assert RunOptions(out=Where()).out == Path("runs/elsewhere")
    assert RunOptions().out is None
    options = RunOptions()
    options.out = "runs/later"  # the pytest plugin assigns after construction
    assert options.out == Path("runs/later")
    assert dataclasses.replace(options, out="runs/y").out == Path("runs/y")
    with pytest.raises(TypeError, match="out must be a path"):
        RunOptions(out=3)  # type: ignore[arg-type]
