"""A scripted in-process backend: outputs chosen by seed from a fixed list, no model, no network.

For tests of what happens around sampling (run directories, shards, merge, the gate): each
output is a pure function of the request's seed, so two runs with one seed sample the same
records, as a real model with a fixed seed does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.types import Prompt


def call(tool: str, **arguments: Any) -> str:
    """One call in the ``json`` protocol."""
    return json.dumps({"tool": tool, "arguments": arguments})


class ScriptedBackend:
    """``outputs[seed % len(outputs)]`` for every seed; ``pick`` replaces that rule when given."""

    default_protocol = "json"
    context_length: int | None = 4096
    special_tokens: tuple[str, ...] = ()
    max_concurrency = 8

    def __init__(
        self,
        outputs: Sequence[str],
        *,
        model_id: str = "scripted:test",
        cache_identity: str | None = "scripted-weights-1",
        pick: Callable[[str, int], str] | None = None,
    ):
        self.outputs = list(outputs)
        self.model_id = model_id
        self.cache_identity = cache_identity
        self.pick = pick
        self.requests = 0

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        text = "".join(f"<{m['role']}>{m.get('content') or ''}\n" for m in messages)
        return Prompt(text=text, token_ids=None, messages=messages)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        self.requests += len(request.seeds)
        out = []
        for seed in request.seeds:
            text = self.pick(request.prompt.text, seed) if self.pick else self.outputs[seed % len(self.outputs)]
            out.append(Completion(text=text, token_ids=[], stop_reason="stop", prompt_tokens=10, completion_tokens=5))
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": "scripted", "cache_identity": self.cache_identity}

    async def aclose(self) -> None:
        return None


class Canned:
    """A named test double that answers every request with one fixed text (no cache identity: never
    served from the sample cache); no model, no network. The model-matrix tests record with it."""

    default_protocol = "json"
    context_length = None
    special_tokens: tuple[str, ...] = ()
    max_concurrency = 4
    cache_identity = None

    def __init__(self, name: str, text: str) -> None:
        self.model_id = f"canned:{name}"
        self.text = text

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: Any) -> Prompt:
        return Prompt("\n".join(str(m["content"]) for m in messages), None, messages)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        return [Completion(self.text, [], "stop") for _ in request.seeds]

    def describe(self) -> dict[str, Any]:
        return {"backend": "canned"}

    async def aclose(self) -> None:
        pass
