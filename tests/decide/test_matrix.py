"""``leader-eval run --model A --model B --model C``: one command samples every model with one
seed, writes one run directory per model and one comparison (with the checkpoint recommendation
for ordered checkpoints); the CI step summary carries the comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leader_eval.cli.app import main
from leader_eval.decide.matrix import matrix_labels
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import run
from leader_eval.runs.model_spec import model_entries
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.types import Prompt

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ROOT / "suites" / "examples" / "minimal.yaml"
GOOD = '{"tool": "send_message_to_chat", "arguments": {"message": "Hi team, we build a treehouse!"}}'


class Canned:
    """A model that answers every request with one fixed text; no model, no network."""

    default_protocol = "json"
    context_length = None
    special_tokens: tuple[str, ...] = ()
    max_concurrency = 4
    cache_identity = None

    def __init__(self, name: str, text: str) -> None:
        self.model_id = f"canned:{name}"
        self.text = text

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: Any) -> Prompt:
        return Prompt("\n".join(str(m["content"]) for m in messages), None, messages)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        return [Completion(self.text, [], "stop") for _ in request.seeds]

    def describe(self) -> dict[str, Any]:
        return {"backend": "canned"}

    async def aclose(self) -> None:
        pass


def _record(tmp_path: Path) -> dict[str, Path]:
    """Three recorded checkpoints: two that pass every sample and one that answers in prose."""
    out = {}
    for name, text in (("step-100", GOOD), ("step-200", GOOD), ("step-300", "Hello there!")):
        path = tmp_path / "recorded" / name
        run(MINIMAL, RunOptions(seed=11, samples=3, out=path, progress=False, cache=False), backend=Canned(name, text))
        out[name] = path
    return out


def test_a_three_model_matrix_writes_three_runs_and_one_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = _record(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = tmp_path / "matrix"
    argv = ["run", str(MINIMAL), "--out", str(out), "-q"]
    for name, path in recorded.items():
        argv += ["--model", f"replay:{path} --label {name}"]
    status = main(argv)
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["step-100", "step-200", "step-300"]
    manifests = [json.loads((out / n / "manifest.json").read_text()) for n in ("step-100", "step-200", "step-300")]
    assert {m["identity"]["run_seed"] for m in manifests} == {11}  # paired: one seed for every model
    assert [m["label"] for m in manifests] == ["step-100", "step-200", "step-300"]
    assert "== matrix: 3 models, run seed 11" in printed
    assert "B step-200 vs A step-100" in printed and "B step-300 vs A step-100" in printed
    assert "credibly REGRESSES" in printed, printed
    assert "recommended checkpoint: step-100" in printed
    assert status == 1  # step-300 credibly regresses on the first model
    text = summary.read_text()
    assert "step-300" in text and "step-200" in text


def test_entries_of_one_model_get_labels_from_their_settings() -> None:
    entries = model_entries(
        {"model": ["gguf:m.gguf --temperature 0.2", "gguf:m.gguf --temperature 1", "gguf:m.gguf --label base"]}
    )
    assert matrix_labels(entries, ["m", "m", "m"]) == ["m-temperature0.2", "m-temperature1.0", "base"]
    same = model_entries({"model": ["gguf:m.gguf", "gguf:m.gguf"]})
    with pytest.raises(LeaderEvalError, match="two entries would write runs labelled 'm'"):
        matrix_labels(same, ["m", "m"])


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--model", "replay:x --seed 3", "--model", "replay:y"], "give --seed once for all"),
        (["--model", "replay:x --max-error-rate 0", "--model", "replay:y"], "give --max-error-rate once for all"),
        (["--model", "replay:x", "--model", "replay:y", "--adaptive", "--budget", "3"], "--adaptive samples one model"),
        (["--model", "replay:x", "--model", "replay:y --temperature -1"], "argument --temperature"),
    ],
)
def test_a_bad_matrix_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    out = tmp_path / "matrix"
    assert main(["run", str(MINIMAL), "--out", str(out), "-q", *extra]) == 2
    assert expected in capsys.readouterr().err
    assert not out.exists()


def test_only_run_takes_a_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["stress", str(MINIMAL)], ["lint", str(MINIMAL)]):
        assert main([*command, "--model", "local:smollm2", "--model", "local:smollm2 --temperature 1"]) == 2
        assert "--model given 2 times" in capsys.readouterr().err


def test_runs_of_two_models_that_share_a_run_id_are_both_compared(tmp_path: Path) -> None:
    """A run id is the suite, the start second and the seed: a matrix's runs often share one, and
    compare used to keep only the first of them as "the same run twice"."""
    from leader_eval.decide.compare import compare_runs

    recorded = _record(tmp_path)
    first = json.loads((recorded["step-100"] / "manifest.json").read_text())["run_id"]
    manifest_path = recorded["step-300"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["run_id"] = first
    manifest_path.write_text(json.dumps(manifest))
    comparison = compare_runs([recorded["step-100"], recorded["step-300"]])
    assert len(comparison.groups) == 2 and comparison.groups[0].name != comparison.groups[1].name
    assert len(comparison.pairs) == 1
    # the same directory given twice is still one run
    with pytest.raises(LeaderEvalError, match="at least two different runs"):
        compare_runs([recorded["step-100"], recorded["step-100"]])
