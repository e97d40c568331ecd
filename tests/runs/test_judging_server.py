"""A rubric judge behind a real llama.cpp server (llama-cpp-python's), decoding under the verdict
grammar it is sent: every reply parses. The leader is a test double; the judge is SmolLM2."""

from __future__ import annotations

from pathlib import Path

import pytest

from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.runs.trusted import NamedModel, Trusted
from leader_eval.store.run_store import RunDir
from tests.support import start_llama_server
from tests.support.scripted import ScriptedBackend, call

SUITE = """\
name: judged_server
protocol: json
sampling: {temperature: 0.7, max_tokens: 64, samples: 2, seed: 7}
scaffold: {messages: [{role: user, content: "say hello"}]}
tools:
  - name: send
    parameters: {type: object, properties: {message: {type: string}}, required: [message]}
judges:
  polite:
    model_role: grader
    rubric: The message is polite.
    judged: {argument: send.message}
  helpful:
    model_role: grader
    rubric: The message asks for something concrete.
    scale: {min: 1, max: 5}
    judged: {argument: send.message}
cases:
  - id: greet
    expect: {calls: [{tool: send}]}
"""
LEADER = [call("send", message="Hello team, could you bring the planks?"), call("send", message="Go away.")]


@pytest.mark.server
@pytest.mark.model
def test_a_judge_behind_a_llama_cpp_server_answers_in_scale(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn", reason="needs llama-cpp-python[server]")
    from leader_eval.sampling.backends.local import embedded_model_path

    gguf = embedded_model_path()
    (tmp_path / "s.yaml").write_text(SUITE)
    with start_llama_server(gguf, n_ctx=2048, alias="smollm2") as server:
        role = {"model": f"openai:{server.base_url}#smollm2", "template_gguf": str(gguf), "context_length": 2048}
        trusted = Trusted(models={"grader": NamedModel("grader", role, "test")})
        opts = RunOptions(out=tmp_path / "run", progress=False, cache=False, trusted=trusted)
        result = run(tmp_path / "s.yaml", opts, backend=ScriptedBackend(LEADER))
    records = RunDir(result.path).read_judgements()
    assert len(records) == 4 and all(r["judge"]["model_id"].startswith("openai:") for r in records.values())
    for name in ("judge:polite", "judge:helpful"):
        m = result.summary["overall"]["metrics"][name]
        assert m["n_judged"] == 2 and m["n_judge_errors"] == 0, [r["reply"] for r in records.values()]
