"""A judge's verdict constraint reaches an OpenAI-compatible server as the request says: the
JSON Schema as ``response_format`` (chat and completions), the GBNF grammar on ``/completions``
(llama.cpp's servers read it there). A run's own requests carry neither."""

from __future__ import annotations

from typing import Any

import pytest

from leader_eval.sampling.backends.base import Constraint, SampleRequest, SamplingParams
from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend
from leader_eval.types import Prompt

SCHEMA = {"type": "object", "properties": {"verdict": {"enum": ["pass", "fail"]}}, "required": ["verdict"]}
GBNF = 'root ::= "{\\"verdict\\": \\"" ("pass" | "fail") "\\"}"\n'


def _body(mode: str, constraint: Constraint | None) -> dict[str, Any]:
    template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    backend = OpenAICompatBackend("http://127.0.0.1:9/v1", "m", mode=mode, chat_template=template)  # type: ignore[arg-type]
    prompt = Prompt(text="t", token_ids=None, messages=[{"role": "user", "content": "t"}])
    request = SampleRequest(prompt, SamplingParams(temperature=0.0, max_tokens=8), [1], constraint=constraint)
    return backend._request_body(request)


@pytest.mark.parametrize("mode", ["completions", "chat"])
def test_the_verdict_schema_goes_as_response_format(mode: str) -> None:
    body = _body(mode, Constraint(gbnf=GBNF, json_schema=SCHEMA))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": True},
    }
    assert ("grammar" in body) == (mode == "completions")
    if mode == "completions":
        assert body["grammar"] == GBNF


def test_an_unconstrained_request_carries_neither() -> None:
    body = _body("completions", None)
    assert "response_format" not in body and "grammar" not in body


@pytest.mark.model
def test_the_embedded_model_decodes_under_the_grammar() -> None:
    """Asked to chat, SmolLM2 chats; under the verdict grammar it can only answer a verdict."""
    import asyncio

    from leader_eval.sampling.backends import resolve_backend
    from leader_eval.scoring.judge import grammar, json_schema, parse_verdict
    from leader_eval.suite.judge_spec import Scale

    scale = Scale("integer", 1, 5)
    backend = resolve_backend("local:smollm2")
    prompt = backend.apply_chat_template([{"role": "user", "content": "Write a poem about rivers."}], None)
    constraint = Constraint(gbnf=grammar(scale), json_schema=json_schema(scale))
    request = SampleRequest(prompt, SamplingParams(temperature=1.0, max_tokens=16), [1, 2, 3], constraint=constraint)

    async def sample() -> list[Any]:
        try:
            return await backend.sample(request)
        finally:
            await backend.aclose()

    for c in asyncio.run(sample()):
        reply = c.text.removesuffix("<|im_end|>")
        assert parse_verdict(reply, scale).error is None, reply
