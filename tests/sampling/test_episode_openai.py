"""Episodes through the OpenAI-compatible backend against a real llama.cpp server on loopback.

Chat mode sends the tools and the transcript as real ``assistant``/``tool`` messages; completions
mode sends the transcript rendered with the model's own chat template. Every step's messages are
recorded in ``steps.jsonl``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from tests.support.episodes import EPISODE_SUITE, write_repo

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def llama_server():
    if importlib.util.find_spec("uvicorn") is None:
        if os.environ.get("LEADER_EVAL_CI") == "1":
            pytest.fail("the llama.cpp server needs llama-cpp-python[server] (uvicorn)")
        pytest.skip("needs llama-cpp-python[server]")
    from leader_eval.sampling.backends.local import embedded_model_path
    from tests.support import start_llama_server

    gguf = embedded_model_path()
    with start_llama_server(gguf, n_ctx=2048, alias="smollm2") as server:
        yield server, gguf


def _steps(out: Path) -> list[dict[str, Any]]:
    """The step records, each with its prompt (stored once, by hash, in prompts.jsonl)."""
    from leader_eval.store.run_store import read_steps

    return [r for steps in read_steps(out).values() for r in steps]


def _suite(tmp_path: Path, text: str = EPISODE_SUITE) -> Path:
    # two steps: the goal needs a lookup first, which the server is made to call
    # an enum keeps the grammar-constrained arguments short on a slow CPU server
    text = text.replace("        topic: {type: string}\n", "        topic: {type: string, enum: [weather, goal]}\n")
    text = text.replace("  max_steps: 3\n", "  max_steps: 2\n").replace(
        "        args: {message: {mentions_goal: true}}\n",
        "        args: {message: {mentions_goal: true}}\n        after: [lookup]\n",
    )
    return write_repo(tmp_path, text)


def test_chat_mode_sends_real_tool_messages_and_records_them(llama_server, tmp_path: Path) -> None:
    server, _ = llama_server
    out = tmp_path / "run"
    options = RunOptions(
        model=f"openai:{server.base_url}#smollm2",
        protocol="openai",
        out=out,
        seed=5,
        max_tokens=24,
        progress=False,
        cache=False,
        case_ids=["announce"],
        # grammar-constrained calls: the GGUF template ignores tools unless a function is named
        backend_options={"mode": "chat", "tool_choice": "lookup"},
    )
    result = run(_suite(tmp_path), options)
    steps = _steps(out)
    assert [s["step"] for s in steps] == [0, 1]
    assert all(s["outcome"] == "ok" and s["mode"] == "messages" for s in steps)
    first, second = steps
    assert first["api_tool_calls"] and first["calls"][0]["tool"] == "lookup"
    sent = second["prompt"]["messages"]
    assistant, tool = sent[-2], sent[-1]
    call_id = first["api_tool_calls"][0]["id"]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == call_id
    assert assistant["tool_calls"][0]["function"]["name"] == "lookup"
    assert tool == {
        "role": "tool",
        "tool_call_id": call_id,
        "name": "lookup",
        "content": first["results"][0]["text"],
    }
    # the request body held these messages: chat mode sends the prompt's messages as they are
    assert json.loads(second["prompt"]["text"])["messages"] == sent
    assert result.summary["overall"]["n_errors"] == 0


def test_completions_mode_sends_the_rendered_transcript(llama_server, tmp_path: Path) -> None:
    server, gguf = llama_server
    out = tmp_path / "run"
    text = EPISODE_SUITE.replace(
        "      end: {on_no_call: false}\n", "      end: {on_no_call: false}\n      transcript: messages\n"
    )
    options = RunOptions(
        model=f"openai:{server.base_url}#smollm2",
        out=out,
        seed=5,
        max_tokens=24,
        progress=False,
        cache=False,
        case_ids=["announce"],
        backend_options={"mode": "completions", "gguf_path": str(gguf)},
    )
    run(_suite(tmp_path, text), options)
    steps = _steps(out)
    assert [s["step"] for s in steps] == [0, 1]
    first, second = steps
    assert all(s["outcome"] == "ok" and s["mode"] == "messages" for s in steps)
    sent = second["prompt"]["messages"]
    n_tool = len(first["calls"])
    turn = sent[len(sent) - 1 - n_tool]
    assert turn["role"] == "assistant" and turn["content"] == first["text"].removesuffix("<|im_end|>")
    assert [m["content"] for m in sent[len(sent) - n_tool :]] == [r["text"] for r in first["results"]]
    # the text the server got is the chat template's rendering of exactly these messages
    assert "<|im_start|>assistant\n" + turn["content"] + "<|im_end|>" in second["prompt"]["text"]
    for r in first["results"]:
        assert "<|im_start|>tool\n" + r["text"] in second["prompt"]["text"]
