"""Retries of the OpenAI-compatible backend through a fault-injecting proxy in front of the mock."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from typing import Any

import pytest

from leader_eval.sampling.backends.base import Completion, SampleRequest, SamplingParams
from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend
from tests.support import ALL_FAULTS, start_fault_proxy, start_mock_server
from tests.support.servers import pid_listens_on

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "<|im_start|>assistant\n"
)
MESSAGES = [{"role": "user", "content": "Say hi."}]


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(latency_ms=10, content="hi {seed}") as server:
        yield server


def sample(url: str, seeds: list[int], **options: Any) -> list[Completion]:
    # context_length given: no /models probe, so every request through the proxy is a sample's
    backend = OpenAICompatBackend(url, "mock", chat_template=CHATML, context_length=4096, **options)
    prompt = backend.apply_chat_template(MESSAGES, None)

    async def go() -> list[Completion]:
        try:
            return await backend.sample(SampleRequest(prompt, SamplingParams(max_tokens=8), seeds))
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_every_sample_completes_through_20_percent_faults_of_every_kind(mock):
    with start_fault_proxy(mock.base_url, rate=0.2, seed=3, kinds=ALL_FAULTS, retry_after_s=0.2, hang_s=10) as proxy:
        seeds = list(range(200))
        out = sample(proxy.base_url, seeds, timeout_s=2.0, max_retries=8, retry_base_s=0.02, max_concurrency=64)
        stats = proxy.stats()

    assert [c.error for c in out] == [None] * len(seeds)
    assert [c.text for c in out] == [f"hi {s}" for s in seeds]  # no sample dropped or reordered
    injected = stats["injected"]
    assert all(injected[k] > 0 for k in ALL_FAULTS), injected  # every kind was exercised
    # each injected fault cost its sample exactly one retry, and each retry was counted
    assert sum(c.timings["retries"] for c in out) == sum(injected.values())
    assert stats["requests"] == len(seeds) + sum(injected.values())


def test_persistent_500s_become_sample_errors_after_max_retries(mock):
    with start_fault_proxy(mock.base_url, rate=1.0, kinds=("500",)) as proxy:
        out = sample(proxy.base_url, [1, 2, 3], max_retries=3, retry_base_s=0.01)
        stats = proxy.stats()
    assert len(out) == 3
    for c in out:
        assert c.error is not None and c.error.startswith("HTTP 500"), c.error
        assert c.timings["retries"] == 3
        assert (c.text, c.stop_reason) == ("", None)
    assert stats["requests"] == 3 * (1 + 3)


def test_retry_after_is_honoured(mock):
    # backoff alone would wait at most 1 ms; only Retry-After explains the proxy's measured gaps
    with start_fault_proxy(mock.base_url, rate=0.3, seed=1, kinds=("429",), retry_after_s=0.3) as proxy:
        out = sample(proxy.base_url, list(range(20)), max_retries=10, retry_base_s=0.001)
        stats = proxy.stats()
    assert [c.error for c in out] == [None] * 20
    gaps = stats["retry_after_gaps"]
    assert len(gaps) == stats["injected"]["429"] > 0
    assert min(gaps) >= 0.3


def test_a_hung_server_times_out_and_is_retried(mock):
    with start_fault_proxy(mock.base_url, rate=1.0, kinds=("timeout",), hang_s=5) as proxy:
        [c] = sample(proxy.base_url, [0], timeout_s=0.3, max_retries=1, retry_base_s=0.01)
        stats = proxy.stats()
    assert c.error is not None and c.error.startswith("timeout"), c.error
    assert c.timings["retries"] == 1
    assert stats["requests"] == 2


def test_client_errors_are_not_retried(mock):
    [c] = sample(mock.base_url, [0], extra_headers={"X-Mock-Status": "422"}, retry_base_s=0.01)
    assert c.error is not None and c.error.startswith("HTTP 422")
    assert c.timings["retries"] == 0


def test_the_proxy_forwards_untouched_at_rate_zero(mock):
    with start_fault_proxy(mock.base_url, rate=0.0) as proxy:
        body = json.dumps({"model": "mock", "prompt": "x", "seed": 4}).encode()
        req = urllib.request.Request(proxy.base_url + "/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read())["choices"][0]["text"] == "hi 4"
        assert proxy.stats()["forwarded"] == 1
        proxy.reset()
        assert proxy.stats()["requests"] == 0


def test_the_proxy_rejects_unknown_fault_kinds(mock):
    with pytest.raises(ValueError, match="unknown fault kinds"):
        start_fault_proxy(mock.base_url, kinds=("500", "gremlins"))


def test_injected_faults_look_like_the_real_thing(mock):
    with start_fault_proxy(mock.base_url, rate=1.0, kinds=("429",), retry_after_s=7) as proxy:
        req = urllib.request.Request(proxy.base_url + "/completions", b"{}", {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=10)
        info.value.close()
        assert info.value.code == 429
        assert info.value.headers["Retry-After"] == "7"


def test_readiness_checks_know_which_process_owns_a_port(mock):
    # start_llama_server relies on this to ignore a foreign server answering on its port
    assert pid_listens_on(mock.proc.pid, mock.port) is True
    assert pid_listens_on(os.getpid(), mock.port) is False


def test_a_200_sample_run_through_faults_keeps_every_sample_and_counts_retries(mock, tmp_path):
    """The whole pipeline (runner, record store, summary), not only the backend, survives faults."""
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import RunOptions
    from leader_eval.sampling.backends.openai_compat import backend_from_spec

    suite = tmp_path / "s.yaml"
    cases = "\n".join(f"  - id: c{i}\n    vars: {{n: {i}}}\n    expect: {{require: ['hi']}}" for i in range(40))
    suite.write_text(
        "name: faults\nsampling: {samples: 5, max_tokens: 8}\nscaffold:\n  messages:\n"
        "    - {role: user, content: 'Say hi {{ n }}'}\n"
        "tools:\n  - name: noop\n    parameters: {type: object}\n"
        f"hard_fail: []\ncases:\n{cases}\n"
    )
    with start_fault_proxy(mock.base_url, rate=0.2, seed=5, kinds=ALL_FAULTS, retry_after_s=0.2, hang_s=10) as proxy:
        backend = backend_from_spec(
            f"openai:{proxy.base_url}#mock", mode="chat", timeout_s=2.0, max_retries=8, retry_base_s=0.02
        )
        result = run(suite, RunOptions(seed=1, out=tmp_path / "run", progress=False, cache=False), backend=backend)
        injected = sum(proxy.stats()["injected"].values())
    assert len(result.samples) == 200
    assert sorted((s.case_id, s.index) for s in result.samples) == sorted(
        (f"c{i}", j) for i in range(40) for j in range(5)
    )
    assert all(s.outcome == "ok" for s in result.samples)
    assert result.summary["overall"]["n_errors"] == 0
    assert injected > 0 and result.summary["retries"] == injected
