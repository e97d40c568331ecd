"""What counts as a context overflow in a server's error (``is_context_overflow``): a stress sweep
exempts overflows from the error rule, so an ordinary failure read as one is a false green."""

from __future__ import annotations

import pytest

from leader_eval.sampling.backends.base import is_context_overflow, overflow_error

# each server's own wording of "the prompt does not fit" (status as the backends format it)
OVERFLOWS = [
    "HTTP 400: Requested tokens (2110) exceed context window of 2048",  # llama-cpp-python's server
    "HTTP 400: the request exceeds the available context size, try increasing it",  # llama.cpp server
    "HTTP 400: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",  # vLLM, OpenAI
    "HTTP 400: The prompt (total length 9000) is too long to fit into the model (context length 8192)",  # vLLM
    "HTTP 400: The input (9000 tokens) is longer than the model's context length (8192 tokens).",  # SGLang
    "HTTP 400: prompt is too long: 210000 tokens > 200000 maximum",  # Anthropic
    "HTTP 400: prompt is too long for this model",  # Tinker
    "HTTP 400: context_length_exceeded",
    "HTTP 400: Input length (57719 tokens) exceeds the maximum allowed length (55539 tokens). Use a shorter input",  # SGLang
    "HTTP 400: input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000",  # Anthropic
    "HTTP 400: The decoder prompt (length 9000) is longer than the maximum model length of 8192",  # vLLM V1
    "HTTP 400: Prompt length of 9000 is longer than the maximum model length of 8192",  # vLLM V1
    "HTTP 400: This model's maximum prompt length is 131072 but the request contains 140000 tokens",  # xAI
    "HTTP 400: Input tokens exceed the configured limit of 272000 tokens",  # OpenAI
    "HTTP 400: Please reduce the length of the messages or completion",  # Groq
    "HTTP 400: request (9000 tokens) exceeds the available context size (8192 tokens)",  # llama.cpp
    overflow_error(9000, 64, 8192),  # a backend's own refusal, never sent
]

NOT_OVERFLOWS = [
    "HTTP 429: too many tokens per minute",  # a rate limit
    "HTTP 429: Rate limit reached for tokens per min (TPM): Limit 30000, Used 29000; context window 8k",
    "HTTP 400: temperature exceeds the maximum of 2",
    "HTTP 400: n exceeds max allowed",
    "HTTP 400: too many tokens in stop sequences",
    "HTTP 422: [{'loc': ['body', 'prompt'], 'msg': 'field required', 'input': 'the context window of a model'}]",
    "HTTP 401: invalid key for the maximum context plan",
    "HTTP 503: context length service unavailable",
    "timeout: read timed out after 60 s (context window 8192)",
    "HTTP 400: invalid request",
    "HTTP 400: Invalid value for 'input': the tool name is too long",
    "HTTP 400: 1 validation error for ChatCompletionRequest messages input_value={'text': 'keep the context window small'}",
    "HTTP 400: max_tokens exceeds the maximum of 4096",
    "",
    None,
]


@pytest.mark.parametrize("error", OVERFLOWS)
def test_every_server_wording_of_a_prompt_that_does_not_fit_is_an_overflow(error: str) -> None:
    assert is_context_overflow(error)


@pytest.mark.parametrize("error", NOT_OVERFLOWS)
def test_rate_limits_bad_parameters_and_other_statuses_are_sampler_errors(error: str | None) -> None:
    assert not is_context_overflow(error)
