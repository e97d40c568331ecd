"""The OpenAI-compatible backend against a real llama.cpp server and a local mock."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.request
from dataclasses import asdict
from typing import Any

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import (
    Backend,
    Completion,
    GuardedBackend,
    SampleRequest,
    SamplingParams,
    is_context_overflow,
)
from leader_eval.sampling.backends.openai_compat import (
    OpenAICompatBackend,
    backend_from_spec,
    parse_retry_after,
    protocol_from_template,
    special_tokens_from_template,
)
from tests.support import start_llama_server, start_mock_server

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
HERMES_LIKE = (
    "{% if tools %}<|im_start|>system\n<tools>{{ tools | tojson }}</tools>\n"
    "Call a tool inside <tool_call></tool_call> tags.<|im_end|>\n{% endif %}" + CHATML
)
# an enum keeps the grammar-constrained arguments short on a slow CPU server
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_message_to_chat",
            "description": "Send a message to the room.",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string", "enum": ["hello"]}},
                "required": ["message"],
            },
        },
    }
]
MESSAGES = [{"role": "user", "content": "Say hello to the room."}]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def sample_and_close(backend: OpenAICompatBackend, request: SampleRequest) -> list[Completion]:
    try:
        return await backend.sample(request)
    finally:
        await backend.aclose()


# --- the real llama.cpp server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_server():
    pytest.importorskip("uvicorn", reason="needs llama-cpp-python[server]")
    from leader_eval.sampling.backends.local import embedded_model_path

    gguf = embedded_model_path()
    with start_llama_server(gguf, n_ctx=2048, alias="smollm2") as server:
        yield server, gguf


@pytest.mark.server
def test_completions_mode_renders_with_the_gguf_template_and_returns_raw_text(llama_server):
    server, gguf = llama_server
    backend = OpenAICompatBackend(server.base_url, "smollm2", gguf_path=gguf, context_length=2048)
    assert isinstance(backend, Backend)
    prompt = backend.apply_chat_template(MESSAGES, None)
    # SmolLM2's own template: ChatML with a default system message
    assert prompt.text.startswith("<|im_start|>system\n")
    assert prompt.text.endswith("<|im_start|>assistant\n")
    assert prompt.token_ids and prompt.token_ids[0] == 1  # <|im_start|> is one special token
    params = SamplingParams(temperature=1.0, max_tokens=8)
    same_seed = run(sample_and_close(backend, SampleRequest(prompt, params, [7, 7])))

    assert [c.error for c in same_seed] == [None, None]
    assert same_seed[0].text == same_seed[1].text  # one seed, one text
    for c in same_seed:
        assert c.prompt_tokens == len(prompt.token_ids)  # the server saw exactly our tokens
        assert 1 <= c.completion_tokens <= 8
        assert c.stop_reason in ("stop", "length")
    # raw: exactly what the server's own /v1/completions answers for that body
    body = {"model": "smollm2", "prompt": prompt.text, "max_tokens": 8, "temperature": 1.0, "top_p": 1.0, "seed": 7}
    req = urllib.request.Request(
        server.base_url + "/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert json.loads(resp.read())["choices"][0]["text"] == same_seed[0].text


@pytest.mark.server
def test_tiny_max_tokens_stops_for_length_and_counts_usage(llama_server):
    server, gguf = llama_server
    backend = OpenAICompatBackend(server.base_url, "smollm2", gguf_path=gguf, context_length=2048)
    prompt = backend.apply_chat_template(MESSAGES, None)
    [c] = run(sample_and_close(backend, SampleRequest(prompt, SamplingParams(temperature=0.0, max_tokens=2), [1])))
    assert c.error is None
    assert c.stop_reason == "length"
    assert c.completion_tokens == 2
    assert c.prompt_tokens == len(prompt.token_ids or [])


@pytest.mark.server
def test_chat_mode_keeps_api_tool_calls_and_content(llama_server):
    server, _ = llama_server
    backend = OpenAICompatBackend(server.base_url, "smollm2", mode="chat", tool_choice="send_message_to_chat")
    assert backend.default_protocol == "openai"
    prompt = backend.apply_chat_template(MESSAGES, TOOLS)
    request = SampleRequest(prompt, SamplingParams(temperature=0.7, max_tokens=32), [3], tools=TOOLS)
    [c] = run(sample_and_close(backend, request))
    assert c.error is None
    assert c.api_tool_calls, c
    call = c.api_tool_calls[0]
    assert call["type"] == "function"
    assert call["function"]["name"] == "send_message_to_chat"
    assert json.loads(call["function"]["arguments"]) == {"message": "hello"}
    assert isinstance(c.text, str)  # the content (often empty next to a call) is kept, never None
    assert c.prompt_tokens > 0 and c.completion_tokens > 0


@pytest.mark.server
def test_context_overflow_is_a_sample_error_not_an_exception(llama_server):
    server, gguf = llama_server
    backend = OpenAICompatBackend(server.base_url, "smollm2", gguf_path=gguf, context_length=2048, max_retries=3)
    prompt = backend.apply_chat_template([{"role": "user", "content": "word " * 2100}], None)
    [c] = run(sample_and_close(backend, SampleRequest(prompt, SamplingParams(max_tokens=4), [0])))
    assert c.error is not None and c.error.startswith("HTTP 400")
    assert c.timings["retries"] == 0  # a 400 is not worth retrying
    assert is_context_overflow(c.error)


# --- against the mock --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(latency_ms=20, content="hi {seed}", context_length=4096) as server:
        yield server


@pytest.fixture(scope="module")
def tool_mock():
    with start_mock_server(latency_ms=0, content="hello", tool_call=True) as server:
        yield server


def test_one_request_per_seed_in_seed_order(mock):
    mock.reset()
    backend = OpenAICompatBackend(mock.base_url, "mock", chat_template=CHATML, context_length=4096)
    prompt = backend.apply_chat_template(MESSAGES, None)
    seeds = [5, 1, 9, 1]
    out = run(sample_and_close(backend, SampleRequest(prompt, SamplingParams(), seeds)))
    assert [c.text for c in out] == [f"hi {s}" for s in seeds]
    assert mock.stats()["requests"] == len(seeds)
    assert all(c.timings["retries"] == 0 and c.error is None for c in out)
    assert out[0].prompt_tokens == 10 and out[0].completion_tokens == 1


def test_in_flight_requests_are_bounded_by_max_concurrency(mock):
    mock.reset()
    backend = OpenAICompatBackend(mock.base_url, "mock", chat_template=CHATML, context_length=4096, max_concurrency=3)
    prompt = backend.apply_chat_template(MESSAGES, None)

    async def go() -> list[list[Completion]]:
        try:
            reqs = [SampleRequest(prompt, SamplingParams(), [i, i + 100]) for i in range(10)]
            return list(await asyncio.gather(*(backend.sample(r) for r in reqs)))
        finally:
            await backend.aclose()

    out = run(go())
    assert all(c.error is None for group in out for c in group)
    assert mock.stats()["max_inflight"] == 3


def test_probe_reads_the_context_length_from_models(mock):
    backend = OpenAICompatBackend(mock.base_url, "mock", chat_template=CHATML)
    assert backend.context_length is None

    async def go() -> dict[str, Any]:
        try:
            return await backend.probe()
        finally:
            await backend.aclose()

    assert run(go())["id"] == "mock"
    assert backend.context_length == 4096  # vLLM's max_model_len
    assert backend.describe()["context_length"] == 4096


def test_a_backend_serves_one_event_loop_after_another(mock):
    # a CLI may call asyncio.run more than once with the same backend
    backend = OpenAICompatBackend(mock.base_url, "mock", chat_template=CHATML, context_length=4096)
    prompt = backend.apply_chat_template(MESSAGES, None)
    first = run(sample_and_close(backend, SampleRequest(prompt, SamplingParams(), [1])))
    second = run(sample_and_close(backend, SampleRequest(prompt, SamplingParams(), [2])))
    assert [first[0].text, second[0].text] == ["hi 1", "hi 2"]


def test_chat_mode_against_a_tool_calling_server(tool_mock):
    backend = OpenAICompatBackend(tool_mock.base_url, "mock", mode="chat", context_length=4096)
    prompt = backend.apply_chat_template(MESSAGES, TOOLS)
    assert prompt.token_ids is None  # the server tokenizes
    [c] = run(sample_and_close(backend, SampleRequest(prompt, SamplingParams(), [0], tools=TOOLS)))
    assert c.text == ""
    assert c.stop_reason == "stop"  # finish_reason "tool_calls"
    assert c.api_tool_calls is not None
    assert c.api_tool_calls[0]["function"] == {"name": "send_message_to_chat", "arguments": '{"message": "hello"}'}


def test_chat_response_keeps_content_tool_calls_and_reasoning():
    backend = OpenAICompatBackend("http://127.0.0.1:1/v1", "m", mode="chat")
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    data = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {"content": "Sure.", "tool_calls": [call], "reasoning_content": "<plan>"},
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    c = backend._completion(data)
    assert (c.text, c.api_tool_calls, c.reasoning) == ("Sure.", [call], "<plan>")
    assert (c.prompt_tokens, c.completion_tokens) == (7, 3)


def test_a_malformed_response_is_a_sample_error_not_an_exception(monkeypatch):
    backend = OpenAICompatBackend("http://127.0.0.1:1/v1", "m", chat_template=CHATML, max_retries=1, retry_base_s=0)

    calls = []

    async def post(payload: bytes, limit_s: float) -> dict[str, Any]:
        calls.append(limit_s)
        return {"choices": [{"text": "x"}], "usage": {"prompt_tokens": "many"}}

    monkeypatch.setattr(backend, "_post", post)
    prompt = backend.apply_chat_template(MESSAGES, None)
    [c] = run(sample_and_close(backend, SampleRequest(prompt, SamplingParams(), [0])))
    assert c.error == "malformed response: usage.prompt_tokens is a string, not a token count"
    assert len(calls) == 1  # the same server would send the same shape again: not retried


def test_chat_mode_prompt_text_changes_with_tools():
    backend = OpenAICompatBackend("http://127.0.0.1:1/v1", "m", mode="chat")
    assert backend.apply_chat_template(MESSAGES, TOOLS).text != backend.apply_chat_template(MESSAGES, None).text


# --- the API key never leaks -------------------------------------------------------------------

CANARY = "sk-canary-7f3e9a1c2b4d"


def test_the_api_key_is_sent_but_never_recorded(mock, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("LEADER_EVAL_TEST_KEY", CANARY)
    mock.reset()
    kwargs: dict[str, Any] = dict(
        api_key_env="LEADER_EVAL_TEST_KEY", chat_template=CHATML, context_length=4096, retry_base_s=0.01
    )
    ok = OpenAICompatBackend(mock.base_url, "mock", **kwargs)
    # the mock answers these with an error body that echoes the Authorization header
    echo_401 = OpenAICompatBackend(mock.base_url, "mock", extra_headers={"X-Mock-Status": "401"}, **kwargs)
    echo_503 = OpenAICompatBackend(
        mock.base_url, "mock", extra_headers={"X-Mock-Status": "503"}, max_retries=2, **kwargs
    )
    unreachable = OpenAICompatBackend("http://127.0.0.1:9/v1", "mock", max_retries=1, **kwargs)
    prompt = ok.apply_chat_template(MESSAGES, None)
    request = SampleRequest(prompt, SamplingParams(), [1, 2])
    results: list[Completion] = []
    for backend in (ok, echo_401, echo_503, unreachable):
        results += run(sample_and_close(backend, request))

    assert mock.stats()["authorized"] == 2 + 2 + 2 * 3  # the key did go out
    assert [c.error is None for c in results] == [True, True] + [False] * 6
    assert results[2].error is not None and results[2].error.startswith("HTTP 401")
    assert "[redacted]" in results[2].error  # the echoed key was scrubbed, the rest kept
    assert results[4].error is not None and results[4].error.startswith("HTTP 503")
    assert results[6].error is not None and "connection error" in results[6].error
    exposed = [json.dumps(asdict(c)) for c in results]
    for backend in (ok, echo_401, echo_503, unreachable):
        exposed += [backend.model_id, json.dumps(backend.describe()), repr(backend)]
    exposed.append(caplog.text)
    assert "503" in caplog.text  # the failures were logged ...
    for text in exposed:
        assert CANARY not in text  # ... without the key


def test_url_credentials_stay_out_of_model_id_and_errors(mock, caplog):
    caplog.set_level(logging.DEBUG)
    url = mock.base_url.replace("http://", "http://alice:pw-canary-91ab@")
    backend = OpenAICompatBackend(
        url, "mock", chat_template=CHATML, context_length=4096, extra_headers={"X-Mock-Status": "403"}
    )
    assert backend.model_id == f"openai:{mock.base_url}/mock"
    prompt = backend.apply_chat_template(MESSAGES, None)
    [c] = run(sample_and_close(backend, SampleRequest(prompt, SamplingParams(), [0])))
    assert c.error is not None and c.error.startswith("HTTP 403")
    assert "Basic [redacted]" in c.error  # they went out as Basic auth, the mock echoed them, we scrubbed them
    basic = base64.b64encode(b"alice:pw-canary-91ab").decode()
    for text in (c.error, backend.model_id, json.dumps(backend.describe()), caplog.text):
        assert "pw-canary-91ab" not in text
        assert basic not in text


# --- construction ----------------------------------------------------------------------------


def test_spec_parsing_and_registry():
    b = resolve_backend("openai:http://127.0.0.1:8000/v1#qwen3-8b", chat_template=CHATML, max_concurrency=8)
    assert isinstance(b, GuardedBackend) and isinstance(b.inner, OpenAICompatBackend)
    assert (b.model, b.model_id, b.max_concurrency) == ("qwen3-8b", "openai:http://127.0.0.1:8000/v1/qwen3-8b", 8)
    b = backend_from_spec("openai:https://u:secret@example.test/v1/", model="m", mode="chat")
    assert b.model_id == "openai:https://example.test/v1/m"
    with pytest.raises(LeaderEvalError, match="name the served model"):
        backend_from_spec("openai:http://127.0.0.1:8000/v1", chat_template=CHATML)
    with pytest.raises(LeaderEvalError, match="chat template"):
        OpenAICompatBackend("http://127.0.0.1:8000/v1", "m")  # completions mode cannot render without one


def test_template_decides_special_tokens_and_protocol():
    assert special_tokens_from_template(CHATML)[0] == "<|im_end|>"
    assert set(special_tokens_from_template(CHATML)) == {"<|im_end|>", "<|im_start|>"}
    assert protocol_from_template(CHATML) == "json"  # no tools section
    assert protocol_from_template(HERMES_LIKE) == "hermes"
    b = OpenAICompatBackend("http://127.0.0.1:1/v1", "m", chat_template=HERMES_LIKE)
    assert b.default_protocol == "hermes"
    assert "<tools>" in b.apply_chat_template(MESSAGES, TOOLS).text  # tools reach a template that takes them
    llama3 = (
        "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
        "{{ m['content'] }}<|eot_id|>{% endfor %}"
    )
    assert special_tokens_from_template(llama3)[0] == "<|eot_id|>"


def test_retry_after_parsing():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0  # in the past
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
