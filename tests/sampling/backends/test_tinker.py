"""The Tinker backend, against a test double of the SDK's sampling client.

The Tinker API cannot be reached from this machine, and the SDK has no local mode, so the
sampling client is replaced by ``FakeSamplingClientDouble``: it records each call and answers
with real ``tinker.SampleResponse`` / ``tinker.SampledSequence`` objects whose token ids and
logprobs the embedded SmolLM2 model (llama.cpp) actually produced for the requested prompt and
parameters. The tokenizer is a real Hugging Face tokenizer built offline from the same GGUF
(its vocabulary, merges, special tokens and chat template), saved to a folder and loaded the way
a user's ``--tokenizer PATH`` is. No test builds a real ``tinker.ServiceClient``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import tinker

from leader_eval.errors import LeaderEvalError
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import Backend, GuardedBackend
from leader_eval.sampling.backends.tinker import TinkerBackend, backend_from_spec, is_retryable, tokenizer_repo
from tests.support.tinker import (
    CHECKPOINT,
    HERMES_TEMPLATE,
    MESSAGES,
    SMOL_BASE,
    TOOLS,
    EmbeddedModelSampler,
    FakeRestClientDouble,
    FakeSamplingClientDouble,
    FakeServiceClientDouble,
    _response,
    bad_request,
    make_backend,
    rate_limited,
    sample,
    server_error,
)

pytestmark = pytest.mark.model

# --- specs and construction -------------------------------------------------------------------


def test_spec_forms_and_resolve_backend(smol_tokenizer_dir: Path, no_service_client: None) -> None:
    b = resolve_backend(CHECKPOINT, tokenizer=str(smol_tokenizer_dir), context_length=None)
    assert isinstance(b, GuardedBackend) and isinstance(b.inner, TinkerBackend) and isinstance(b, Backend)
    assert b.model_id == CHECKPOINT and b.model_path == CHECKPOINT and b.base_model is None
    base = backend_from_spec("tinker:HuggingFaceTB/SmolLM2-135M-Instruct", tokenizer=str(smol_tokenizer_dir))
    assert base.model_path is None and base.base_model == SMOL_BASE
    assert base.model_id == "tinker:HuggingFaceTB/SmolLM2-135M-Instruct"
    for bad in ("tinker://run-only", "tinker://run/nonsense/name", "tinker:"):
        with pytest.raises(LeaderEvalError, match="tinker"):
            backend_from_spec(bad, tokenizer=str(smol_tokenizer_dir))


def test_tokenizer_repo_follows_tinker_naming() -> None:
    assert tokenizer_repo("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    assert tokenizer_repo("Qwen/Qwen3-8B:peft:131072") == "Qwen/Qwen3-8B"
    assert tokenizer_repo("moonshotai/Kimi-K2-Thinking/fp8") == "moonshotai/Kimi-K2-Thinking"
    assert tokenizer_repo("meta-llama/Llama-3.1-8B") == "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"


def test_environment_supplies_tokenizer_and_base_model(
    smol_tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch, no_service_client: None
) -> None:
    monkeypatch.setenv("LEADER_EVAL_TOKENIZER", str(smol_tokenizer_dir))
    monkeypatch.setenv("LEADER_EVAL_BASE_MODEL", SMOL_BASE)
    b = backend_from_spec(CHECKPOINT)
    assert b.base_model == SMOL_BASE and b.describe()["base_model_source"] == "given"
    assert b.describe()["tokenizer"] == "SmolLM2-135M-Instruct"  # the folder's name, not its path


def test_construction_never_builds_a_service_client(smol_tokenizer_dir: Path, no_service_client: None) -> None:
    b = backend_from_spec(CHECKPOINT, tokenizer=str(smol_tokenizer_dir))
    b.apply_chat_template(MESSAGES, TOOLS)
    assert b.default_protocol and b.special_tokens
    json.dumps(b.describe())
    asyncio.run(b.aclose())


def test_first_sample_builds_the_service_client_once(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, monkeypatch: pytest.MonkeyPatch
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler)
    FakeServiceClientDouble.instances = []
    FakeServiceClientDouble.sampling_client = double
    monkeypatch.setattr(tinker, "ServiceClient", FakeServiceClientDouble)
    b = TinkerBackend(CHECKPOINT, tokenizer=str(smol_tokenizer_dir), probe_context=False)
    assert FakeServiceClientDouble.instances == []
    sample(b, [1], max_tokens=4)
    sample(b, [2], max_tokens=4)
    assert len(FakeServiceClientDouble.instances) == 1
    (service,) = FakeServiceClientDouble.instances
    assert service.init_args == ((), {})  # the SDK reads TINKER_API_KEY itself
    assert len(service.created) == 1 and service.created[0]["model_path"] == CHECKPOINT
    assert len(double.calls) == 2
    # the server says which base model the checkpoint was trained from
    assert b.describe()["base_model"] == SMOL_BASE and b.describe()["base_model_source"] == "server"
    asyncio.run(b.aclose())
    assert service.closed == ["success"]


# --- rendering --------------------------------------------------------------------------------


def test_prompt_is_the_templates_text_tokenized_like_the_embedded_model(
    smol_tokenizer_dir: Path, local_backend: Any, no_service_client: None
) -> None:
    from transformers import AutoTokenizer

    b = make_backend(smol_tokenizer_dir)
    prompt = b.apply_chat_template(MESSAGES, TOOLS)
    tok = AutoTokenizer.from_pretrained(str(smol_tokenizer_dir), local_files_only=True)
    text = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert prompt.text == text
    assert prompt.token_ids is not None and prompt.token_ids == tok.encode(text, add_special_tokens=False)
    assert prompt.text.startswith("<|im_start|>system\nYou are Ada") and prompt.text.endswith("<|im_start|>assistant\n")
    assert prompt.token_ids.count(1) == 3  # <|im_start|> once per turn: no BOS added on top of the template's
    # the same prompt, token for token, as the embedded model's own backend (llama.cpp) builds it
    local = local_backend.apply_chat_template(MESSAGES, TOOLS)
    assert (prompt.text, prompt.token_ids) == (local.text, local.token_ids)
    assert prompt.messages == MESSAGES


def test_default_protocol_and_special_tokens_come_from_the_template(
    smol_tokenizer_dir: Path, no_service_client: None
) -> None:
    b = make_backend(smol_tokenizer_dir)
    assert b.default_protocol == "json"  # SmolLM2's template has no tools section
    assert b.special_tokens[0] == "<|im_end|>"  # end of turn first
    assert "<|im_start|>" in b.special_tokens and "<|endoftext|>" in b.special_tokens
    hermes = make_backend(smol_tokenizer_dir, chat_template=HERMES_TEMPLATE)
    assert hermes.default_protocol == "hermes"
    text = hermes.apply_chat_template(MESSAGES, TOOLS).text
    assert "<tools>" in text and "send_message_to_chat" in text  # tools reach a template that has a place for them
    kimi = make_backend(
        smol_tokenizer_dir, chat_template=HERMES_TEMPLATE.replace("<tool_call>", "<|tool_calls_section_begin|>")
    )
    assert kimi.default_protocol == "kimi_k2"
    llama = make_backend(smol_tokenizer_dir, chat_template=HERMES_TEMPLATE.replace("<tool_call>", "<|python_tag|>"))
    assert llama.default_protocol == "llama3_json"


# --- sampling ---------------------------------------------------------------------------------


def test_one_request_with_k_samples_and_the_exact_params(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler)
    b = make_backend(smol_tokenizer_dir, double)
    prompt = b.apply_chat_template(MESSAGES, TOOLS)
    out = sample(b, [101, 202, 303], temperature=0.8, max_tokens=12, top_p=0.95, stop=("\n\n",))
    assert len(double.calls) == 1  # one request: the prompt is prefilled once
    (call,) = double.calls
    assert call.num_samples == 3
    assert call.prompt.to_ints() == prompt.token_ids
    p = call.sampling_params
    assert (p.max_tokens, p.temperature, p.top_p, p.seed, p.stop) == (12, 0.8, 0.95, 101, ["\n\n"])
    assert len(out) == 3
    (response,) = double.responses
    for j, (c, seq) in enumerate(zip(out, response.sequences, strict=True)):
        assert c.error is None
        assert c.token_ids == seq.tokens and len(c.token_ids) == c.completion_tokens > 0
        assert c.text == embedded_sampler.detokenize(c.token_ids)  # decoded with special tokens kept
        assert c.stop_reason == seq.stop_reason
        assert c.logprobs == pytest.approx(seq.logprobs) and all(lp <= 0.0 for lp in c.logprobs or [])
        assert c.prompt_tokens == len(prompt.token_ids or [])
        assert c.timings["request_seed"] == 101 and c.timings["request_index"] == j and c.timings["retries"] == 0


def test_stop_reasons_map_and_the_end_of_turn_stays_in_the_text(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler)
    b = make_backend(smol_tokenizer_dir, double)
    short = [{"role": "user", "content": "Reply with one word: yes or no. Is the sky blue?"}]
    (cut,) = sample(b, [7], short, temperature=0.0, max_tokens=1)
    assert cut.stop_reason == "length" and cut.completion_tokens == 1
    (done,) = sample(b, [7], short, temperature=0.0, max_tokens=24)
    assert done.stop_reason == "stop" and done.completion_tokens < 24
    assert done.token_ids[-1] == 2 and done.text.endswith("<|im_end|>")  # the raw output, special token included
    # no stop strings: stop=None keeps the model's end-of-sequence stop (stop=[] would disable it)
    assert double.calls[0].sampling_params.stop is None


def test_per_sample_seed_mode_sends_one_request_per_seed(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler)
    b = make_backend(smol_tokenizer_dir, double, seed_mode="per_sample")
    out = sample(b, [11, 22, 33], temperature=1.0, max_tokens=6)
    assert sorted((c.num_samples, c.sampling_params.seed) for c in double.calls) == [(1, 11), (1, 22), (1, 33)]
    assert [c.timings["request_seed"] for c in out] == [11, 22, 33]  # seed order kept
    assert all(c.timings["request_index"] == 0 for c in out)


def test_requests_are_split_at_max_samples_per_request(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler)
    b = make_backend(smol_tokenizer_dir, double, max_samples_per_request=2)
    out = sample(b, [5, 6, 7], temperature=1.0, max_tokens=4)
    assert sorted((c.num_samples, c.sampling_params.seed) for c in double.calls) == [(1, 7), (2, 5)]
    assert [c.timings["request_seed"] for c in out] == [5, 5, 7]


# --- failures ---------------------------------------------------------------------------------


def test_a_transient_error_is_retried_then_succeeds(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler, failures=[server_error(), rate_limited()])
    b = make_backend(smol_tokenizer_dir, double, max_retries=3)
    out = sample(b, [1, 2], max_tokens=5)
    assert len(double.calls) == 3
    assert all(c.error is None and c.timings["retries"] == 2 and c.token_ids for c in out)


def test_persistent_errors_become_error_completions(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler, failures=[server_error() for _ in range(10)])
    b = make_backend(smol_tokenizer_dir, double, max_retries=2)
    out = sample(b, [1, 2, 3], max_tokens=5)
    assert len(double.calls) == 3  # the first try and two retries
    assert len(out) == 3
    for c in out:
        assert c.error == "HTTP 500: upstream sampler crashed (after 2 retries)"
        assert (c.text, c.token_ids, c.stop_reason, c.timings["retries"]) == ("", [], None, 2)


def test_errors_that_cannot_succeed_are_not_retried(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    user_error = tinker.RequestFailedError("max_tokens too large", "req-1", tinker.types.RequestErrorCategory.User)
    for failure, expected in ((bad_request(), "HTTP 400: prompt is too long"), (user_error, "request failed (user)")):
        double = FakeSamplingClientDouble(embedded_sampler, failures=[failure])
        b = make_backend(smol_tokenizer_dir, double, max_retries=5)
        (c,) = sample(b, [1], max_tokens=5)
        assert len(double.calls) == 1 and c.error is not None and c.error.startswith(expected)


def test_retryable_classification() -> None:
    conn = tinker.APIConnectionError(request=httpx.Request("POST", "https://tinker.invalid"))
    timeout = tinker.APITimeoutError(request=httpx.Request("POST", "https://tinker.invalid"))
    server_side = tinker.RequestFailedError("worker lost", "req-2", tinker.types.RequestErrorCategory.Server)
    auth = tinker.AuthenticationError("bad key", response=_response(401), body=None)
    retryable: list[BaseException] = [conn, timeout, server_side, server_error(), rate_limited(), TimeoutError()]
    final: list[BaseException] = [bad_request(), auth, ValueError("bug")]
    assert [is_retryable(e) for e in retryable] == [True] * len(retryable)
    assert [is_retryable(e) for e in final] == [False] * len(final)


def test_wrong_number_of_sequences_is_an_error_not_a_misaligned_sample(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler, extra_sequences=1)
    b = make_backend(smol_tokenizer_dir, double, max_retries=1)
    out = sample(b, [1, 2], max_tokens=3)
    assert [c.error for c in out] == ["the service returned 3 sequences for 2 samples (after 1 retries)"] * 2


def test_a_failing_sampling_client_setup_is_reported_per_sample(
    smol_tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: ClassVar[list[int]] = []

    def refusing_service_client() -> Any:  # test double: the key is rejected
        calls.append(1)
        raise tinker.AuthenticationError("invalid API key", response=_response(401), body=None)

    b = TinkerBackend(
        CHECKPOINT,
        tokenizer=str(smol_tokenizer_dir),
        service_client_factory=refusing_service_client,
        probe_context=False,
    )
    for _ in range(2):
        out = sample(b, [1, 2], max_tokens=3)
        assert [c.error for c in out] == [
            f"could not create a Tinker sampling client for {CHECKPOINT}: HTTP 401: invalid API key"
        ] * 2
    assert calls == [1]  # a rejected key is not retried for every request


def test_a_transient_setup_failure_is_retried(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler)
    attempts: list[int] = []

    def flaky_service_client() -> Any:  # test double: the first connection drops
        attempts.append(1)
        if len(attempts) == 1:
            raise tinker.APIConnectionError(request=httpx.Request("POST", "https://tinker.invalid"))
        FakeServiceClientDouble.sampling_client = double
        return FakeServiceClientDouble()

    b = TinkerBackend(
        CHECKPOINT, tokenizer=str(smol_tokenizer_dir), service_client_factory=flaky_service_client,
        probe_context=False, retry_base_s=0.0,
    )  # fmt: skip
    (c,) = sample(b, [1], max_tokens=3)
    assert c.error is None and c.token_ids and len(attempts) == 2 and len(double.calls) == 1


class HangingServiceClientDouble:
    """Test double: a service that never answers (the SDK retries connection errors for 5 minutes)."""

    released = threading.Event()
    calls: ClassVar[list[int]] = []

    def create_sampling_client(self, **kwargs: Any) -> Any:
        self.calls.append(1)
        self.released.wait(600)
        raise tinker.APIConnectionError(request=httpx.Request("POST", "https://tinker.invalid"))


def test_an_unreachable_service_fails_within_the_setup_deadline_once(
    smol_tokenizer_dir: Path, no_service_client: None
) -> None:
    HangingServiceClientDouble.calls.clear()
    b = TinkerBackend(
        CHECKPOINT, tokenizer=str(smol_tokenizer_dir), service_client_factory=HangingServiceClientDouble,
        probe_context=False, retry_base_s=0.0, connect_timeout_s=0.3, max_retries=3,
    )  # fmt: skip
    try:
        for _ in range(2):
            out = sample(b, [1, 2], max_tokens=3)
            assert [c.error for c in out] == [
                f"could not create a Tinker sampling client for {CHECKPOINT}: no sampling client within "
                "connect_timeout_s=0.3 s (is the network or the Tinker service unreachable?)"
            ] * 2
        # the deadline was the whole budget: no retry, and later requests do not wait again
        assert HangingServiceClientDouble.calls == [1]
    finally:
        HangingServiceClientDouble.released.set()


#: the real SDK against a loopback port nobody listens on, in a fresh interpreter that must exit
UNREACHABLE = r"""
import asyncio, json, socket, sys
import tinker
from leader_eval.sampling.backends.base import SampleRequest, SamplingParams
from leader_eval.sampling.backends.tinker import TinkerBackend
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
b = TinkerBackend(
    "tinker://run-1/sampler_weights/final", tokenizer=sys.argv[1], probe_context=False, retry_base_s=0.0,
    connect_timeout_s=1.0,
    service_client_factory=lambda: tinker.ServiceClient(base_url=f"http://127.0.0.1:{port}", api_key="tml-x" * 8),
)
prompt = b.apply_chat_template([{"role": "user", "content": "hi"}], None)
out = asyncio.run(b.sample(SampleRequest(prompt, SamplingParams(max_tokens=3), [1])))
print(json.dumps([c.error for c in out]))
"""


def test_without_network_the_real_sdk_fails_at_the_deadline_and_the_process_exits(smol_tokenizer_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", UNREACHABLE, str(smol_tokenizer_dir)],
        capture_output=True, text=True, timeout=120,  # the SDK alone retries for 5 minutes
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "TINKER_API_KEY": ""},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    [error] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "no sampling client within connect_timeout_s=1 s" in error, error


#: the real SDK, a key set, against a loopback listener that accepts connections and never answers:
#: a whole run (two cases, so two requests wait on one setup) in a fresh interpreter that must exit
SILENT_SERVICE = r"""
import json, sys
import tinker
from leader_eval.sampling.backends.tinker import TinkerBackend
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
port, tokenizer, suite, out = sys.argv[1:]
built = []

def service():
    built.append(1)
    return tinker.ServiceClient(base_url=f"http://127.0.0.1:{port}")

b = TinkerBackend(
    "tinker://run-1/sampler_weights/final", tokenizer=tokenizer, probe_context=False, retry_base_s=0.0,
    connect_timeout_s=1.0, service_client_factory=service,
)
result = run(suite, RunOptions(model=b.model_id, samples=1, out=out, progress=False, cache=False), backend=b)
from leader_eval.report import format_summary
print(format_summary(result))
print(json.dumps({"errors": [s.error for s in result.samples], "first": result.summary.get("first_error"),
                  "built": len(built)}))
"""


class SilentListener:
    """A loopback port that accepts every TCP connection and never sends a byte."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[Any] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed at the end of the test
            while True:
                self.accepted.append(self.sock.accept()[0])

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_silent_service_fails_the_run_at_the_deadline_and_the_process_exits(
    smol_tokenizer_dir: Path, mini_suite: Path, tmp_path: Path
) -> None:
    key = "tml-SILENTKEY-" + "7" * 24
    listener = SilentListener()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", SILENT_SERVICE, str(listener.port), str(smol_tokenizer_dir), str(mini_suite),
             str(tmp_path / "run")],
            capture_output=True, text=True, timeout=120,  # before: the session's close waited ~5 minutes
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "TINKER_API_KEY": key},
        )  # fmt: skip
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert listener.accepted, "the SDK never reached the listener: the test would prove nothing"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    message = (
        "could not create a Tinker sampling client for tinker://run-1/sampler_weights/final: no sampling client "
        "within connect_timeout_s=1 s (is the network or the Tinker service unreachable?)"
    )
    # both cases fail with the one setup failure: the request that waited does not try again
    assert out["errors"] == [message, message]
    assert out["built"] == 1
    assert out["first"] == {"case_id": "goal", "index": 0, "error": message}
    assert f"first sampler error (case goal, sample 0): {message}" in proc.stdout.splitlines()
    assert key not in proc.stdout + proc.stderr


def test_api_key_never_reaches_describe_errors_or_logs(
    smol_tokenizer_dir: Path,
    embedded_sampler: EmbeddedModelSampler,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    no_service_client: None,
) -> None:
    canary = "tml-CANARY-5f0c2a9e7d"
    monkeypatch.setenv("TINKER_API_KEY", canary)
    echoed = tinker.BadRequestError(f"key {canary} may not sample this checkpoint", response=_response(400), body=None)
    double = FakeSamplingClientDouble(embedded_sampler, failures=[server_error(f"retry later, {canary}"), echoed])
    b = make_backend(smol_tokenizer_dir, double, max_retries=3)
    with caplog.at_level(logging.DEBUG, logger="leader_eval"):
        (c,) = sample(b, [1], max_tokens=3)
    assert c.error is not None and "[redacted]" in c.error
    seen = json.dumps(b.describe()) + b.model_id + c.error + caplog.text + repr(c)
    assert canary not in seen
    assert b.describe()["api_key_env"] == "TINKER_API_KEY"


def test_context_overflow_is_reported_without_a_request(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    double = FakeSamplingClientDouble(embedded_sampler)
    b = make_backend(smol_tokenizer_dir, double)
    n = len(b.apply_chat_template(MESSAGES, TOOLS).token_ids or [])
    b.context_length = n + 10
    out = sample(b, [1, 2], max_tokens=48)
    assert double.calls == []
    assert [c.error for c in out] == [f"context overflow: prompt {n} + max_tokens 48 tokens > context {n + 10}"] * 2


def test_context_length_comes_from_the_service_capabilities(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, no_service_client: None
) -> None:
    rest = FakeRestClientDouble(base_model=SMOL_BASE, max_context=8192)
    double = FakeSamplingClientDouble(embedded_sampler)
    b = TinkerBackend(
        CHECKPOINT,
        tokenizer=str(smol_tokenizer_dir),
        sampling_client=double,
        rest_client_factory=lambda: rest,
        base_model=SMOL_BASE,
    )
    assert b.context_length is None and rest.capability_calls == 0  # nothing asked at construction
    sample(b, [1], max_tokens=3)
    assert b.context_length == 8192 and rest.capability_calls == 1
    given = TinkerBackend(
        CHECKPOINT, tokenizer=str(smol_tokenizer_dir), sampling_client=double, rest_client_factory=lambda: rest,
        base_model=SMOL_BASE, context_length=4096,
    )  # fmt: skip
    sample(given, [1], max_tokens=3)
    assert given.context_length == 4096 and rest.capability_calls == 1


# --- tokenizer resolution ---------------------------------------------------------------------


def test_a_missing_tokenizer_is_a_clear_error(tmp_path: Path, no_service_client: None) -> None:
    with pytest.raises(LeaderEvalError) as err:
        TinkerBackend(CHECKPOINT, tokenizer=str(tmp_path / "no-such-tokenizer"))
    assert "--tokenizer PATH or LEADER_EVAL_TOKENIZER=PATH" in str(err.value)
    # a base model whose tokenizer is not in the local cache: no download, an error naming the fix
    with pytest.raises(LeaderEvalError) as err:
        backend_from_spec("tinker:NoSuchOrg/NoSuchModel-7B")
    message = str(err.value)
    assert "NoSuchOrg/NoSuchModel-7B" in message and "--tokenizer PATH" in message and "hf download" in message
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LeaderEvalError, match="could not load a tokenizer from"):
        TinkerBackend(CHECKPOINT, tokenizer=str(empty))


def test_base_model_of_a_checkpoint_is_read_lazily_from_the_service(no_service_client: None) -> None:
    rest = FakeRestClientDouble(base_model="NoSuchOrg/Tuned-Base-1B")
    b = TinkerBackend(CHECKPOINT, rest_client_factory=lambda: rest)
    assert rest.weights_info_paths == []  # construction asks nothing
    with pytest.raises(LeaderEvalError, match=r"no tokenizer for 'NoSuchOrg/Tuned-Base-1B'"):
        b.apply_chat_template(MESSAGES, TOOLS)
    assert rest.weights_info_paths == [CHECKPOINT]
    assert b.base_model == "NoSuchOrg/Tuned-Base-1B" and b.describe()["base_model_source"] == "server"

    down = FakeRestClientDouble(
        error=tinker.APIConnectionError(request=httpx.Request("POST", "https://tinker.invalid"))
    )
    with pytest.raises(LeaderEvalError, match="pass --base-model NAME"):
        TinkerBackend(CHECKPOINT, rest_client_factory=lambda: down).apply_chat_template(MESSAGES, None)


# --- tinker-cookbook renderers ----------------------------------------------------------------


def test_a_renderer_needs_tinker_cookbook(smol_tokenizer_dir: Path, no_service_client: None) -> None:
    if importlib.util.find_spec("tinker_cookbook") is not None:
        pytest.skip("tinker-cookbook is installed here")
    with pytest.raises(LeaderEvalError, match="tinker-cookbook"):
        make_backend(smol_tokenizer_dir, renderer="qwen3")


class FakeCookbookRendererDouble:
    """TEST DOUBLE of a tinker-cookbook renderer (the package is not installable here): ChatML
    through the real tokenizer, a Hermes-style tool declaration, and a ``parse_response`` that
    reads ``<tool_call>`` JSON the way the cookbook's Qwen3 renderer does."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.prefix_calls: list[tuple[list[dict[str, Any]], str]] = []

    def create_conversation_prefix_with_tools(self, tools: list[dict[str, Any]], system_prompt: str = "") -> list[Any]:
        self.prefix_calls.append((tools, system_prompt))
        return [{"role": "system", "content": f"{system_prompt}\n<tools>{json.dumps(tools)}</tools>"}]

    def build_generation_prompt(self, messages: list[dict[str, Any]]) -> tinker.ModelInput:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return tinker.ModelInput.from_ints(
            self.tokenizer.encode(text + "<|im_start|>assistant\n", add_special_tokens=False)
        )

    def get_stop_sequences(self) -> list[int]:
        return [2]

    def parse_response(self, tokens: list[int]) -> tuple[dict[str, Any], bool]:
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        calls = []
        if "<tool_call>" in text and "</tool_call>" in text:
            body = json.loads(text.split("<tool_call>", 1)[1].split("</tool_call>", 1)[0])
            calls.append(types.SimpleNamespace(id="call-0", function=types.SimpleNamespace(**body)))
        return {"role": "assistant", "content": text, "tool_calls": calls}, True


def test_a_cookbook_renderer_renders_and_parses(
    smol_tokenizer_dir: Path, embedded_sampler: EmbeddedModelSampler, monkeypatch: pytest.MonkeyPatch,
    no_service_client: None,
) -> None:  # fmt: skip
    made: list[FakeCookbookRendererDouble] = []

    def get_renderer(name: str, tokenizer: Any, model_name: str | None = None) -> Any:
        assert name == "qwen3"
        made.append(FakeCookbookRendererDouble(tokenizer))
        return made[-1]

    cookbook = types.ModuleType("tinker_cookbook")
    cookbook.renderers = types.SimpleNamespace(get_renderer=get_renderer)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tinker_cookbook", cookbook)
    double = FakeSamplingClientDouble(embedded_sampler)
    b = make_backend(smol_tokenizer_dir, double, renderer="qwen3")
    assert b.default_protocol == "hermes"
    prompt = b.apply_chat_template(MESSAGES, TOOLS)
    (renderer,) = made
    assert renderer.prefix_calls == [([TOOLS[0]["function"]], MESSAGES[0]["content"])]
    assert "<tools>" in prompt.text and prompt.token_ids == b.tokenize(prompt.text)
    (c,) = sample(b, [3], max_tokens=4)
    assert double.calls[0].sampling_params.stop == [2]  # the renderer's stop tokens, as in training
    assert double.calls[0].prompt.to_ints() == prompt.token_ids
    # a real output has no tool call; the renderer's parse of a scripted one is kept as api_tool_calls
    assert c.api_tool_calls is None
    calls, _ = b._renderer_parse(
        b.tokenize('<tool_call>{"name": "send_message_to_chat", "arguments": {"message": "hi"}}</tool_call>')
    )
    assert calls == [
        {
            "id": "call-0",
            "type": "function",
            "function": {"name": "send_message_to_chat", "arguments": '{"message": "hi"}'},
        }
    ]


# --- through the runner -----------------------------------------------------------------------


def test_a_suite_samples_through_the_runner(
    smol_tokenizer_dir: Path,
    embedded_sampler: EmbeddedModelSampler,
    mini_suite: Path,
    tmp_path: Path,
    no_service_client: None,
) -> None:
    from leader_eval.runs.options import RunOptions
    from leader_eval.sampling.keys import derive_seed
    from leader_eval.sampling.plan import plan_cases, select_cases
    from leader_eval.sampling.runner import sample_planned
    from leader_eval.store.run_store import RunDir
    from leader_eval.suite.load import load_suite

    double = FakeSamplingClientDouble(embedded_sampler)
    b = make_backend(smol_tokenizer_dir, double)
    suite = load_suite(mini_suite)
    planned = plan_cases(suite, select_cases(suite), b, RunOptions(model=CHECKPOINT, samples=2, max_tokens=8))
    rundir = RunDir(tmp_path / "run")
    rundir.path.mkdir(parents=True, exist_ok=True)
    samples: list[Any] = []
    stats = asyncio.run(sample_planned(rundir, b, planned, 42, progress=False, on_sample=samples.append))
    assert stats.sampled == 4 and stats.errors == 0
    # one request per case with num_samples=2, seeded by the case's first sample's seed
    assert sorted((c.num_samples, c.sampling_params.seed) for c in double.calls) == sorted(
        (2, derive_seed(42, case, 0)) for case in ("hello", "goal")
    )
    prompts = {p.case.id: p.rendered.prompt.token_ids or [] for p in planned}
    assert sorted(c.prompt.to_ints() for c in double.calls) == sorted(prompts.values())
    for s in samples:
        assert s.outcome == "ok" and s.token_ids and s.prompt_tokens == len(prompts[s.case_id])
        assert s.seed == derive_seed(42, s.case_id, s.index)
