"""Small inputs that used to go wrong quietly or loudly: a case weight past any sensible range,
a sample count that ends in a MemoryError, a server URL whose query string was dropped, a label
that climbs out of ``runs/``, and ``gate --update-golden`` from another working directory.
Each is now a one-line error (exit 2) or works; nothing is sampled or written on refusal."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from leader_eval.bounded.limits import MAX_RUN_SAMPLES, MAX_SAMPLES_PER_CASE
from leader_eval.cli.app import main
from leader_eval.errors import LeaderEvalError, SuiteError
from leader_eval.runs.argtypes import name_component, sample_count
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import SAMPLING_BY_DEST
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.sampling.runner import RunOptions
from leader_eval.suite.load import load_suite
from leader_eval.types import Prompt
from tests.conftest import MINIMAL_SUITE

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ROOT / "suites" / "examples" / "minimal.yaml"


class CannedBackend:
    """Answers every request with one fixed, passing call; no model, no network."""

    model_id = "canned:v1"
    default_protocol = "json"
    context_length = None
    special_tokens: tuple[str, ...] = ()
    max_concurrency = 4
    cache_identity = None

    def __init__(self) -> None:
        self.requests = 0

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: Any) -> Prompt:
        return Prompt("\n".join(str(m["content"]) for m in messages), None, messages)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        self.requests += 1
        text = '{"tool": "send_message_to_chat", "arguments": {"message": "Hi team, we build a treehouse!"}}'
        return [Completion(text, [], "stop") for _ in request.seeds]

    def describe(self) -> dict[str, Any]:
        return {"backend": "canned"}

    async def aclose(self) -> None:
        pass


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


# --- case weights -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "weight", ["1.0e+308", "1e308", "10000000.0", "1" + "0" * 400, "0", "-1", "0.0000001", "true", "'2'"]
)
def test_a_weight_out_of_range_is_refused_at_its_line(tmp_path: Path, weight: str) -> None:
    text = MINIMAL_SUITE.replace("  - id: goal\n", f"  - id: goal\n    weight: {weight}\n")
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert info.value.line == text[: text.index(f"weight: {weight}")].count("\n") + 1, str(info.value)
    assert "cases/1/weight" in info.value.message, str(info.value)


@pytest.mark.parametrize("weight", ["1000000", "1.0e-6", "0.5", "3"])
def test_a_weight_in_range_loads(tmp_path: Path, weight: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(MINIMAL_SUITE.replace("  - id: goal\n", f"  - id: goal\n    weight: {weight}\n"))
    assert load_suite(path).cases[1].weight == float(weight)


# --- sample counts ----------------------------------------------------------------------------


@pytest.mark.parametrize("count", ["1000000000", str(MAX_SAMPLES_PER_CASE + 1), "9" * 40])
def test_samples_past_the_cap_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], count: str) -> None:
    out = tmp_path / "run"
    line = _usage_error(capsys, ["run", str(MINIMAL), "--samples", count, "--out", str(out), "-q"])
    assert "at most 100,000 samples per case" in line, line
    assert not out.exists()
    # the same rule for the pytest plugin's --le-samples / leader_eval_samples and the Python API
    with pytest.raises(argparse.ArgumentTypeError, match="at most 100,000"):
        SAMPLING_BY_DEST["samples"].convert(count)
    with pytest.raises(LeaderEvalError, match="at most 100,000 samples per case"):
        run(MINIMAL, RunOptions(samples=int(count), out=out, progress=False), backend=CannedBackend())
    assert not out.exists()
    for argv in (["plan", str(MINIMAL), "--samples", count], ["stress", str(MINIMAL), "--samples", count]):
        assert "at most 100,000" in _usage_error(capsys, argv)


def test_a_run_past_the_total_cap_is_refused_before_anything(tmp_path: Path) -> None:
    cases = "".join(f"  - id: c{i}\n    vars: {{current_goal: g, request: r}}\n" for i in range(20))
    head = MINIMAL_SUITE[: MINIMAL_SUITE.index("cases:\n")]
    path = tmp_path / "many.yaml"
    path.write_text(head + "cases:\n" + cases)
    out = tmp_path / "run"
    backend = CannedBackend()
    per_case = MAX_RUN_SAMPLES // 20 + 1
    with pytest.raises(LeaderEvalError) as info:
        run(path, RunOptions(samples=per_case, out=out, progress=False), backend=backend)
    message = str(info.value)
    assert "\n" not in message and f"{20 * per_case:,} samples (20 cases)" in message
    assert f"at most {MAX_RUN_SAMPLES:,} per run" in message and "--shard" in message
    assert backend.requests == 0 and not out.exists()
    sample_count(str(MAX_SAMPLES_PER_CASE))  # the per-case cap itself is allowed


# --- openai: URLs with a query string -------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "openai:http://127.0.0.1:9/v1?api-version=2024-06-01#m",
        "openai:http://127.0.0.1:9/v1?key=sk-SECRETSECRET#m",
        "openai:http://127.0.0.1:9/v1?#m",
        "openai:http://127.0.0.1:9/v1,http://127.0.0.1:10/v1?key=sk-SECRETSECRET#m",
    ],
)
def test_a_base_url_with_a_query_string_is_refused_without_echoing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    with pytest.raises(LeaderEvalError, match="query string") as info:
        resolve_backend(spec)
    assert "SECRET" not in str(info.value) and "api-version" not in str(info.value)
    out = tmp_path / "run"
    assert main(["run", str(MINIMAL), "--model", spec, "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "query string" in err[0] and "SECRET" not in err[0]
    assert not out.exists()


# --- labels -----------------------------------------------------------------------------------

BAD_LABELS = ["../x", "..", ".", "a/b", "/abs", "", "-x", ".hidden", "a b", "a\\b", "x" * 101, "é", "a\nb", "a:b"]


@pytest.mark.parametrize("label", BAD_LABELS)
def test_a_label_that_is_not_one_safe_path_component_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, label: str
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _usage_error(capsys, ["run", str(MINIMAL), f"--label={label}", "-q"])
    assert "is not a name" in line
    assert not (tmp_path / "runs").exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(LeaderEvalError, match="run option label"):
        run(MINIMAL, RunOptions(label=label, progress=False), backend=CannedBackend())
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(argparse.ArgumentTypeError):
        SAMPLING_BY_DEST["label"].convert(label)
    for argv in (["gate", str(tmp_path), f"--baseline={label}"], ["plan", str(MINIMAL), f"--label={label}"]):
        assert "is not a name" in _usage_error(capsys, argv)


@pytest.mark.parametrize("label", ["v7", "step-100", "gguf-v2.gguf", "A_b.c-1", "_x", "x" * 100])
def test_ordinary_labels_are_accepted(label: str) -> None:
    assert name_component(label) == label


# --- gate --update-golden from another working directory -----------------------------------


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "suites").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    shutil.copy(MINIMAL, project / "suites" / "mini.yaml")
    return project


@pytest.mark.parametrize("recorded", ["new", "without_from_run_dir"])
def test_update_golden_works_from_another_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], recorded: str
) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    result = run(
        "suites/mini.yaml", RunOptions(seed=1, out="runs/a", progress=False, cache=False), backend=CannedBackend()
    )
    assert result.manifest["status"] == "complete"
    if recorded == "without_from_run_dir":  # a run directory written before the path was recorded
        manifest_path = project / "runs" / "a" / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        del manifest["suite"]["from_run_dir"]
        manifest_path.write_text(json.dumps(manifest))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    status = main(["gate", str(project / "runs" / "a"), "--golden", str(project / "golden"), "--update-golden"])
    out = capsys.readouterr().out
    assert status == 0 and "updated golden: created" in out, out
    golden = json.loads((project / "golden" / "minimal" / "main.json").read_text())
    assert golden["suite_hash"] == result.manifest["identity"]["suite_hash"]


def test_update_golden_still_refuses_a_suite_edited_since_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    run("suites/mini.yaml", RunOptions(seed=1, out="runs/a", progress=False, cache=False), backend=CannedBackend())
    suite = project / "suites" / "mini.yaml"
    suite.write_text(suite.read_text().replace("build a treehouse", "build a boat"))
    monkeypatch.chdir(tmp_path)
    main(["gate", str(project / "runs" / "a"), "--golden", str(project / "golden"), "--update-golden"])
    out = capsys.readouterr().out
    assert "changed since the run" in out and not (project / "golden").exists(), out
