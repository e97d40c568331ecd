"""Run directories are named by the model's identity as well as the suite, label and seed
(docs/design-0.3.md section 6): two models gated with one seed and one label never share one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.store.names import default_out_dir, model_key
from leader_eval.suite.load import load_suite
from leader_eval.types import Prompt


class CannedBackend:
    """No model: a fixed prompt and answer, and whatever model id and weights identity a test names."""

    max_concurrency = 1
    default_protocol = "json"
    context_length = None
    special_tokens: tuple[str, ...] = ()

    def __init__(self, model_id: str, weights: str | None):
        self.model_id = model_id
        self.cache_identity = weights

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        return Prompt(text=str(messages), token_ids=None, messages=messages)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        answer = '{"tool": "send_message_to_chat", "arguments": {"message": "hi team"}}'
        return [Completion(answer, [1], "stop") for _ in request.seeds]

    def describe(self) -> dict[str, Any]:
        return {"backend": "canned", "cache_identity": self.cache_identity}

    async def aclose(self) -> None:
        pass


def test_the_model_key_names_the_model_id_and_its_weights() -> None:
    assert model_key("gguf:model.gguf", "gguf-sha256:aa") != model_key("gguf:model.gguf", "gguf-sha256:bb")
    assert model_key("gguf:v7.gguf") != model_key("gguf:v8.gguf")
    assert model_key("gguf:v7.gguf", "gguf-sha256:aa") == model_key("gguf:v7.gguf", "gguf-sha256:aa")
    key = model_key("local:smollm2")
    assert len(key) == 8 and int(key, 16) >= 0


def test_two_checkpoints_with_one_file_name_label_and_seed_get_two_run_directories(
    mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    options = RunOptions(seed=5, label="ci", progress=False, cache=False)
    # ckpt/v2/model.gguf and ckpt/v3/model.gguf: one model id (the file name), other weights
    a = run(mini_suite, options, backend=CannedBackend("gguf:model.gguf", "gguf-sha256:" + "a" * 64))
    b = run(mini_suite, options, backend=CannedBackend("gguf:model.gguf", "gguf-sha256:" + "b" * 64))
    c = run(mini_suite, options, backend=CannedBackend("gguf:other.gguf", None))
    assert len({a.path, b.path, c.path}) == 3  # 0.2 named all three runs/mini__ci__seed5__HASH
    for r in (a, b, c):
        assert r.manifest["status"] == "complete" and r.path.parent == Path("runs")
        assert r.path.name.startswith("mini__ci__") and "__seed5__" in r.path.name
    suite = load_suite(mini_suite)
    assert a.path == default_out_dir(suite, "ci", 5, model=model_key("gguf:model.gguf", "gguf-sha256:" + "a" * 64))
    # the same model again resumes its own directory: nothing new is sampled
    again = run(mini_suite, options, backend=CannedBackend("gguf:model.gguf", "gguf-sha256:" + "a" * 64))
    assert again.path == a.path and again.stats is not None and again.stats.sampled == 0


@pytest.mark.parametrize("label", ["../up", "a/b", ".hidden", "with space", "x" * 101])
def test_a_label_that_is_not_one_safe_name_is_refused_before_anything_is_written(
    mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, label: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LeaderEvalError, match="label"):
        run(mini_suite, RunOptions(seed=5, label=label, progress=False), backend=CannedBackend("m:x", None))
    assert not (tmp_path / "runs").exists() and not (tmp_path.parent / "up").exists()
