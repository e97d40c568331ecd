"""The one protocol every sampler implements, and the guard every backend is wrapped in.

Shaped after inspect_ai's ``ModelAPI`` (one async generate method) and the Tinker SDK's
``sample(prompt, num_samples, sampling_params)``: a request carries one prompt and k seeds, so a
backend that can prefill once and sample k times (Tinker, vLLM's ``n``) does so.

``guard(backend)`` is the backend boundary (``resolve_backend`` and the runner both apply it, so no
backend can skip it). What leaves it: exactly one ``Completion`` per seed; every field of the type
the record store expects (a wrong type becomes that sample's error with a one-line reason, never
an exception later in scoring, resume or replay); an exception from the backend becomes an error
completion per seed; and every string (text, reasoning, tool-call arguments at any depth, error,
the manifest's ``describe()``) scrubbed of every secret the run holds (``leader_eval.secrets``).

Retries: a backend's request is one or more attempts; ``retrying`` is the one retry loop every
remote backend runs them in (exponential backoff with full jitter, a server's ``Retry-After``
honoured, an optional deadline), driven by the backend's ``should_retry(exc)``, which judges an
attempt's exception (an ``AttemptError`` saying whether another attempt may succeed, or None when
it is not the backend's to judge). A request given up on is the backend's to turn into error
completions (``GaveUp`` carries the message and why it stopped: ``(after 2 retries)``).

Interrupts: when the run is cancelled (Ctrl-C) while a request is in flight, the guard gives it a
grace period (``INTERRUPT_GRACE_S``, 5 s; ``LEADER_EVAL_INTERRUPT_GRACE_S`` overrides, 0 turns it
off) to finish; a request that finishes in time comes back normally, so the runner records its
samples before stopping; one that does not is discarded, and a warning on stderr says how many
samples were discarded (re-running the same command samples them).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import os
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from leader_eval.secrets import scrub, scrub_value, scrubber
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


@dataclass(frozen=True)
class Constraint:
    """What a reply must look like, for backends that can decode under it (a judge's verdict):
    ``gbnf`` a llama.cpp grammar (local and GGUF backends), ``json_schema`` a JSON Schema sent as
    ``response_format`` (OpenAI-compatible servers). A backend that can use neither samples
    unconstrained; the reply is parsed strictly either way."""

    gbnf: str
    json_schema: dict[str, Any]
    name: str = "verdict"


@dataclass
class SampleRequest:
    prompt: Prompt
    params: SamplingParams
    seeds: list[int]  # one sample per seed
    tools: list[dict[str, Any]] = field(default_factory=list)  # for chat APIs that take tools
    constraint: Constraint | None = None  # judges only: runs sample the model unconstrained


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
#: how llama.cpp (its server and llama-cpp-python's), vLLM, SGLang, OpenAI, Anthropic, xAI, Groq
#: and Tinker say "the prompt does not fit the model" in a 400: each phrase names the context, the
#: model's or the prompt's length limit, or the prompt/input as what exceeds a limit. Not "too many
#: tokens" or "exceeds the maximum" alone: a rate limit ("too many tokens per minute") or a bad
#: parameter ("temperature exceeds the maximum") is a sampler error, and an overflow is exempt
#: from the error rule in a stress sweep.
_HTTP_OVERFLOW_RE = re.compile(
    r"context[ _](?:window|length|size|limit)|maximum context|context_length_exceeded"
    r"|\b(?:prompt|input)(?: \([^()]{0,60}\))? is too long"
    r"|longer than the (?:model|maximum model length)|maximum (?:model|prompt|input) length"
    r"|\b(?:prompt|input)(?: length| tokens)?(?: \([^()]{0,60}\))? exceeds? the (?:maximum|configured limit)"
    r"|reduce the length of the messages",
    re.IGNORECASE,
)


def is_context_overflow(error: str | None) -> bool:
    """Whether a completion's error means "the prompt did not fit", not a sampler failure: a
    backend's own refusal (``CONTEXT_OVERFLOW_PREFIX``) or a server's 400 that says so (a 429, a
    422 validation error or any other status never is: rate limits mention tokens too)."""
    if not error:
        return False
    if error.startswith(CONTEXT_OVERFLOW_PREFIX):
        return True
    if not error.startswith("HTTP 400:") or "validation error" in error.lower():
        return False  # a request validation error may echo the prompt's own words back
    return _HTTP_OVERFLOW_RE.search(error) is not None


def overflows(n_prompt: int | None, max_tokens: int, context_length: int | None) -> bool:
    """Whether a prompt of ``n_prompt`` tokens plus ``max_tokens`` cannot fit ``context_length``
    (never when either is unknown): such a sample is recorded as a context overflow, not sent."""
    return bool(context_length and n_prompt is not None and n_prompt + max_tokens > context_length)


def overflow_reason(n_prompt: int | None, max_tokens: int, context_length: int | None) -> str:
    """Why a prompt that ``overflows`` was not sent (a planned overflow sample's error)."""
    return f"prompt {n_prompt} + max_tokens {max_tokens} tokens > context {context_length}"


def overflow_error(n_prompt: int | None, max_tokens: int, context_length: int | None) -> str:
    """The error of a completion refused because its prompt ``overflows`` (``is_context_overflow``)."""
    return f"{CONTEXT_OVERFLOW_PREFIX} {overflow_reason(n_prompt, max_tokens, context_length)}"


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


@runtime_checkable
class Replayable(Protocol):
    """A backend that serves a recorded run (``replay:RUN_DIR``) instead of sampling: a run on it
    is planned as the recorded run sampled (``plan.apply_recorded``), never cached again and
    written beside the evidence, not over it. Ask ``replayable(backend)``, not ``isinstance``:
    the guard hides the backend it wraps."""

    #: the recorded run directory
    run_path: Path

    def recorded(self) -> dict[str, Any]:
        """The recorded run's manifest: its seed and sampling address the recorded samples."""
        ...

    def has_sample(self, case_id: str, seed: int) -> bool:
        """Whether the recorded run finished the sample of ``case_id`` with ``seed``."""
        ...

    def episode_mode(self, case_id: str) -> str | None:
        """The transcript mode the recorded run used for a case's episodes."""
        ...


def replayable(backend: Backend) -> Replayable | None:
    """``backend`` (or the backend its guard wraps) as a ``Replayable``; None when it samples."""
    inner = backend.inner if isinstance(backend, GuardedBackend) else backend
    return inner if isinstance(inner, Replayable) else None


def weights_identity(backend: Backend) -> str | None:
    """What names a backend's weights for the sample cache and its run directory's name: a
    GGUF's content hash, a ``tinker://`` checkpoint path, a ``--cache-id``; None for a server or a
    base model name that can change behind the same name (never cached across runs)."""
    identity: str | None = getattr(backend, "cache_identity", None)
    return identity


log = logging.getLogger(__name__)

#: seconds an in-flight request may still take after the run was interrupted (see the docstring)
INTERRUPT_GRACE_S = 5.0

#: token counts and ids above this are not counts a server can mean (and overflow int64 stores)
_MAX_COUNT = 2**40
#: an error text is one line of at most this many characters
_MAX_ERROR_CHARS = 500
_STOP_VALUES = ("stop", "length", None)


def error_completion(message: str, **extra: Any) -> Completion:
    """A failed sample: one line, bounded, and (like every completion) scrubbed by the guard."""
    line = " ".join(str(message).split())
    if len(line) > _MAX_ERROR_CHARS:
        line = line[: _MAX_ERROR_CHARS - 3] + "..."
    return Completion(text="", token_ids=[], stop_reason=None, error=line or "unknown error", **extra)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _MAX_COUNT


def _json_problem(v: Any, where: str, depth: int = 0) -> str | None:
    """Why ``v`` is not a JSON value the store can write and read back unchanged (None when it is)."""
    if depth > 64:
        return f"{where} is nested more than 64 levels deep"
    if v is None or isinstance(v, bool | str):
        return None
    if isinstance(v, int):
        return None if abs(v) < 2**63 else f"{where} is an integer beyond 64 bits"
    if isinstance(v, float):
        return None if math.isfinite(v) else f"{where} is not a finite number"
    if isinstance(v, list):
        return next((p for i, x in enumerate(v) if (p := _json_problem(x, f"{where}[{i}]", depth + 1))), None)
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                return f"{where} has a non-string key"
            if p := _json_problem(x, f"{where}.{k}", depth + 1):
                return p
        return None
    return f"{where} is a {type(v).__name__}, not JSON"


def completion_problem(c: Any) -> str | None:
    """Why ``c`` is not a well-typed ``Completion`` (None when it is)."""
    if not isinstance(c, Completion):
        return f"a {type(c).__name__} instead of a Completion"
    if not isinstance(c.text, str):
        return f"text is a {type(c.text).__name__}, not a string"
    if c.reasoning is not None and not isinstance(c.reasoning, str):
        return f"reasoning is a {type(c.reasoning).__name__}, not a string"
    if c.error is not None and not isinstance(c.error, str):
        return f"error is a {type(c.error).__name__}, not a string"
    ids = c.token_ids
    # type() is int: no bools, no int subclasses; min/max once instead of a call per id
    if (
        not isinstance(ids, list)
        or not all(type(t) is int for t in ids)
        or (ids and not 0 <= min(ids) <= max(ids) < _MAX_COUNT)
    ):
        return "token_ids is not a list of token ids"
    if c.stop_reason not in _STOP_VALUES:
        return f"stop_reason {str(c.stop_reason)[:40]!r} is not stop, length or null"
    if c.logprobs is not None and not (
        isinstance(c.logprobs, list)
        and all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in c.logprobs)
    ):
        return "logprobs is not a list of finite numbers"
    if c.api_tool_calls is not None:
        if not isinstance(c.api_tool_calls, list) or not all(isinstance(x, dict) for x in c.api_tool_calls):
            return "tool_calls is not a list of objects"
        if p := _json_problem(c.api_tool_calls, "tool_calls"):
            return p
    for name in ("prompt_tokens", "completion_tokens"):
        if not _is_count(getattr(c, name)):
            return f"{name} {str(getattr(c, name))[:40]} is not a token count"
    if not isinstance(c.timings, dict):
        return "timings is not an object"
    return _json_problem(c.timings, "timings")


def _valid_text(s: str) -> str:
    """Lone surrogates (from ``\\ud800`` escapes) cannot be written as UTF-8: replace them."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8")


def _sanitized(c: Completion, scrub: Any) -> Completion:
    """The completion with every string made writable and scrubbed of secrets."""
    problem = completion_problem(c)
    if problem is not None:
        c = error_completion(f"malformed completion from the backend: {problem}")
    c.text = scrub.text(_valid_text(c.text))
    if c.reasoning is not None:
        c.reasoning = scrub.text(_valid_text(c.reasoning))
    if c.error is not None:
        c.error = scrub.text(_valid_text(c.error))
    if c.api_tool_calls is not None:
        c.api_tool_calls = scrub.value(_valid_value(c.api_tool_calls))
    if c.timings:
        c.timings = scrub.value(_valid_value(c.timings))
    return c


def _valid_value(v: Any) -> Any:
    if isinstance(v, str):
        return _valid_text(v)
    if isinstance(v, dict):
        return {_valid_text(k): _valid_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_valid_value(x) for x in v]
    return v


class GuardedBackend:
    """A backend behind the boundary ``guard`` describes; every other attribute is the inner one's."""

    def __init__(self, inner: Backend):
        object.__setattr__(self, "inner", inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        return self.inner.apply_chat_template(messages, tools)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = scrub_value(self.inner.describe())
        return described

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def sample(self, request: SampleRequest) -> list[Completion]:
        n = len(request.seeds)
        try:
            out: Any = await _with_grace(self.inner.sample(request), n)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a backend bug must not lose the run: it becomes each seed's error
            out = [error_completion(f"{type(exc).__name__}: {exc}") for _ in range(n)]
        if not isinstance(out, list) or len(out) != n:
            got = len(out) if isinstance(out, list) else type(out).__name__
            out = [error_completion(f"the backend returned {got} completions for {n} seeds") for _ in range(n)]
        scrub = scrubber()
        return [_sanitized(c, scrub) for c in out]


def interrupt_grace_s() -> float:
    try:
        value = float(os.environ.get("LEADER_EVAL_INTERRUPT_GRACE_S", INTERRUPT_GRACE_S))
    except ValueError:
        return INTERRUPT_GRACE_S
    return value if 0 <= value < float("inf") else INTERRUPT_GRACE_S


#: set in a task whose cancellation ``_with_grace`` withdrew to keep the samples in flight
_interrupted: contextvars.ContextVar[bool] = contextvars.ContextVar("leader_eval_interrupted", default=False)


def stop_if_interrupted() -> None:
    """Raise ``CancelledError`` where this task was cancelled (Ctrl-C, a failed sibling) while its
    request was in flight and kept the samples that finished within the grace period: called once
    they are recorded, so the task stops there instead of sampling on (the withdrawn
    cancellation would not stop it)."""
    if _interrupted.get():
        raise asyncio.CancelledError


async def _with_grace(coro: Any, n: int) -> Any:
    """Await ``coro``; if this task is cancelled meanwhile, let ``coro`` finish within the grace
    period and return its result (the cancellation is then withdrawn: the caller records the
    samples, then ``stop_if_interrupted`` stops it), else cancel it and re-raise."""
    inner = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(inner)
    except asyncio.CancelledError:
        grace = interrupt_grace_s()
        if grace > 0 and not inner.done():
            await asyncio.wait({inner}, timeout=grace)
        if inner.done() and not inner.cancelled() and inner.exception() is None:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            _interrupted.set(True)
            log.warning("interrupted: %d sample(s) in flight finished within the grace period and are kept", n)
            return inner.result()
        inner.cancel()
        log.warning(
            "interrupted: %d sample(s) still in flight after %g s were discarded; "
            "re-run the same command to sample them",
            n,
            grace,
        )
        raise


T = TypeVar("T")


class AttemptError(Exception):
    """One failed attempt of a backend's request, raised and caught inside the backend (never
    past it): ``retryable`` says whether another attempt may succeed, ``retry_after`` how many
    seconds the server asked to wait first."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``max_retries`` retries; before retry k+1 a wait of uniform(0, min(max_s, base_s * 2**k))
    (exponential backoff with full jitter), or longer when the server asks (capped at ``max_s``)."""

    max_retries: int
    base_s: float
    max_s: float

    def backoff(self, retries: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.max_s, self.base_s * (2**retries)))


@dataclass(frozen=True)
class GaveUp:
    """A request given up on: its last failure's message (scrubbed of secrets) and why it was not
    retried further (``suffix``: `` (after 2 retries)``, the deadline, or nothing)."""

    message: str
    suffix: str
    retries: int

    @property
    def error(self) -> str:
        return self.message + self.suffix


async def retrying(
    attempt: Callable[[int], Awaitable[T]],
    should_retry: Callable[[Exception], AttemptError | None],
    policy: RetryPolicy,
    rng: random.Random,
    *,
    deadline: float | None = None,
    deadline_s: float | None = None,
    next_delay: Callable[[AttemptError, float], float] | None = None,
    logger: logging.Logger = log,
    label: str | None = None,
) -> T | GaveUp:
    """``await attempt(retries)`` until it returns, retrying what ``should_retry`` judges
    retryable; an exception it does not judge (None) propagates.

    ``deadline``: the ``time.monotonic()`` past which no retry starts (``deadline_s``: its length,
    for the message); ``next_delay``: the backend's say on the wait (a fleet retries another
    server at once); ``label``: the start of the debug line logged per retry."""
    retries = 0
    while True:
        try:
            return await attempt(retries)
        except Exception as exc:  # CancelledError is a BaseException: an interrupt is never retried
            failure = should_retry(exc)
            if failure is None:
                raise
        message = scrub(str(failure))
        delay = policy.backoff(retries, rng)
        if failure.retry_after is not None:
            delay = max(delay, min(failure.retry_after, policy.max_s))
        if next_delay is not None:
            delay = next_delay(failure, delay)
        past_deadline = deadline is not None and time.monotonic() + delay >= deadline
        if not failure.retryable or retries >= policy.max_retries or past_deadline:
            suffix = f" (after {retries} retries)" if retries else ""
            if failure.retryable and past_deadline and retries < policy.max_retries:
                suffix = f" (sample deadline of {deadline_s:g} s reached after {retries} retries)"
            return GaveUp(message, suffix, retries)
        retries += 1
        if label is not None:
            logger.debug("%s attempt %d failed (%s); retrying in %.2f s", label, retries, message, delay)
        await asyncio.sleep(delay)


def guard(backend: Backend) -> Backend:
    """``backend`` behind the boundary (idempotent)."""
    if isinstance(backend, GuardedBackend):
        return backend
    guarded: Backend = GuardedBackend(backend)
    return guarded
