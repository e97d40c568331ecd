"""The one protocol every sampler implements.

Shaped after inspect_ai's ``ModelAPI`` (one async generate method) and the Tinker SDK's
``sample(prompt, num_samples, sampling_params)``: a request carries one prompt and k seeds, so a
backend that can prefill once and sample k times (Tinker, vLLM's ``n``) does so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from leader_eval.types import Prompt, StopReason


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.7
    max_tokens: int = 256
    top_p: float = 1.0
    stop: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "stop": list(self.stop),
        }


@dataclass
class SampleRequest:
    prompt: Prompt
    params: SamplingParams
    seeds: list[int]  # one sample per seed
    tools: list[dict[str, Any]] = field(default_factory=list)  # for chat APIs that take tools


@dataclass
class Completion:
    """What a backend returns for one seed; the runner turns it into a ``Sample`` record."""

    text: str
    token_ids: list[int]
    stop_reason: StopReason | None
    logprobs: list[float] | None = None
    api_tool_calls: list[dict[str, Any]] | None = None
    reasoning: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None  # set when this one sample failed after the backend's retries
    timings: dict[str, float] = field(default_factory=dict)


#: the error prefix a backend uses when it refused a prompt that cannot fit the model's context
CONTEXT_OVERFLOW_PREFIX = "context overflow:"


def is_context_overflow(error: str | None) -> bool:
    """Whether a completion's error means "the prompt did not fit", not a sampler failure."""
    if not error:
        return False
    if error.startswith(CONTEXT_OVERFLOW_PREFIX):
        return True
    from leader_eval.backends.openai_compat import is_context_overflow as http_overflow

    return http_overflow(error)


class BackendError(Exception):
    """A failure of the sampler (network, server, SDK), never of the model's output."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@runtime_checkable
class Backend(Protocol):
    """A sampler for one checkpoint."""

    #: model spec as recorded in manifests: never a secret, never a machine-specific path
    model_id: str
    #: tool-call protocol its chat template speaks natively ("json" when it has none)
    default_protocol: str
    #: prompt + completion tokens the model can take; None when unknown
    context_length: int | None
    #: special tokens of the model's template (for leak detection); end-of-turn first
    special_tokens: tuple[str, ...]
    #: how many requests this backend may have in flight at once
    max_concurrency: int

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        """Render messages with the model's own chat template and tokenize the result."""
        ...

    async def sample(self, request: SampleRequest) -> list[Completion]:
        """Return one completion per seed, in seed order."""
        ...

    def describe(self) -> dict[str, Any]:
        """Facts for the run manifest (no secrets)."""
        ...

    async def aclose(self) -> None: ...
