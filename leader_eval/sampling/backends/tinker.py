"""Tinker as a sampler: a fine-tuned checkpoint (``tinker://RUN/sampler_weights/NAME``) or a base
model (``tinker:Qwen/Qwen3-8B``), sampled through the ``tinker`` SDK.

Rendering matches training. The prompt is built here, not by the service, with the base model's
own Hugging Face tokenizer and chat template (``transformers``, no torch), or with a
tinker-cookbook renderer by name (``renderer="qwen3"``) when that package is installed; the
prompt's token ids are what is sent (``ModelInput.from_ints``), and the sampled token ids come
back and are decoded with the same tokenizer, special tokens kept.

The tokenizer is never downloaded unless asked (``allow_download=True``): it is read from a local
folder (``tokenizer=PATH`` or ``LEADER_EVAL_TOKENIZER=PATH``) or from the Hugging Face cache, with
``local_files_only=True``, so a missing tokenizer is an immediate ``LeaderEvalError`` that says
how to provide one, never a hang on an unreachable hub.

Nothing touches the network at construction. The ``ServiceClient`` and the sampling client are
built on the first ``sample`` call; the base model of a checkpoint is read from the service only
when neither ``base_model=`` nor a tokenizer was given (``RestClient.get_weights_info_by_tinker_path``,
bounded by ``resolve_timeout_s``).

One ``sample`` request per ``SampleRequest`` with ``num_samples=k``: the prompt is prefilled
once. Tinker takes one seed per request, so the k sequences of a request are seeded together by
the request's first seed (``seed_mode="request"``, the default); ``seed_mode="per_sample"`` sends
one request per seed instead (each sample's own seed, k prefills). docs/tinker.md discusses it.

Failures: the SDK retries transient errors itself; whatever still escapes it (connection errors,
timeouts, 408/409/425/429, 5xx, server-side request failures) is retried here
(``backends.base.retrying``: exponential backoff and full jitter) up to ``max_retries``; after
that, or on any other error (400, 401, 404, ...), every seed of the request comes back as
``Completion(error=...)``, never as an exception.
The API key (``TINKER_API_KEY``, read by the SDK) is never stored, recorded or logged, and is
scrubbed from error texts in case the service echoes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import tinker

from leader_eval import protocols, secrets
from leader_eval.errors import LeaderEvalError, OptionError
from leader_eval.inert import inert
from leader_eval.sampling.backends.base import (
    AttemptError,
    Completion,
    GaveUp,
    RetryPolicy,
    SampleRequest,
    SamplingParams,
    overflow_error,
    overflows,
    retrying,
)
from leader_eval.types import Prompt

log = logging.getLogger(__name__)

SeedMode = Literal["request", "per_sample"]

API_KEY_ENV = "TINKER_API_KEY"
TOKENIZER_ENV = "LEADER_EVAL_TOKENIZER"
BASE_MODEL_ENV = "LEADER_EVAL_BASE_MODEL"
RENDERER_ENV = "LEADER_EVAL_RENDERER"

#: statuses worth another try (the SDK's own list plus 425)
_RETRY_STATUS = frozenset({408, 409, 425, 429})
#: seconds the session's close may take at the end of a run (it only tells the service we are done)
_CLOSE_TIMEOUT_S = 10.0
#: end-of-turn markers, most specific first; the first the template writes leads special_tokens
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|eot|>", "</s>", "<|endoftext|>")


# --- model specs ------------------------------------------------------------------------------


def parse_spec(spec: str) -> tuple[str | None, str | None]:
    """``tinker://RUN/sampler_weights/NAME`` -> (model_path, None); ``tinker:ORG/MODEL`` -> (None, base)."""
    if spec.startswith("tinker://"):
        try:
            tinker.ParsedCheckpointTinkerPath.from_tinker_path(spec)
        except ValueError as exc:
            raise LeaderEvalError(
                f"--model {spec}: not a Tinker checkpoint path (expected tinker://RUN-ID/sampler_weights/NAME)"
            ) from exc
        return spec, None
    name = spec.removeprefix("tinker:").strip()
    if not name or name.startswith("/"):
        raise LeaderEvalError(
            f"--model {spec}: name a checkpoint (tinker://RUN-ID/sampler_weights/NAME) "
            "or a base model (tinker:Qwen/Qwen3-8B)"
        )
    return None, name


def tokenizer_repo(base_model: str) -> str:
    """The Hugging Face repository whose tokenizer a Tinker base model uses.

    Tinker names variants ``org/model/variant`` and may add ``:suffix``; the tokenizer is the
    ``org/model`` one. Llama 3 models use an ungated copy of the instruct tokenizer, as the SDK does.
    """
    name = base_model.split(":", 1)[0]
    if name.startswith("meta-llama/Llama-3"):
        return "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"
    if name.count("/") >= 2:
        org, model = name.split("/")[:2]
        return f"{org}/{model}"
    return name


def _missing_tokenizer_hint(repo: str | None) -> str:
    fetch = (
        f"; or fetch it once while online: hf download {repo} tokenizer.json tokenizer_config.json --local-dir DIR"
        if repo
        else ""
    )
    return (
        f"give a local tokenizer: --tokenizer PATH or {TOKENIZER_ENV}=PATH "
        f"(a folder with tokenizer.json and tokenizer_config.json){fetch}"
    )


def load_tokenizer(
    source: str, *, allow_download: bool = False, trust_remote_code: bool = False, repo_hint: str | None = None
) -> Any:
    """A Hugging Face tokenizer from a local folder, or from the hub cache by repository id.

    Never reaches the network unless ``allow_download`` (and then ``HF_HUB_OFFLINE`` still wins).
    """
    from leader_eval.suite.chat_template import quiet_transformers

    quiet_transformers()
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - transformers comes with tinker
        raise LeaderEvalError("tinker backend: rendering needs transformers: pip install transformers") from exc
    path = Path(source).expanduser()
    looks_like_path = source.startswith((".", "/", "~"))
    if path.is_file() and path.name in ("tokenizer.json", "tokenizer_config.json"):
        path = path.parent
    if path.is_dir():
        try:
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=trust_remote_code)
        except Exception as exc:
            raise OptionError(
                f"tinker backend: could not load a tokenizer from {path}: {type(exc).__name__}: {_one_line(exc)}; "
                + _missing_tokenizer_hint(repo_hint)
                + ("" if trust_remote_code else " (a tokenizer with its own code is not run)"),
                "tokenizer",
            ) from exc
    if looks_like_path or path.suffix in (".json", ".gguf", ".model"):
        raise OptionError(
            f"tinker backend: no tokenizer folder at {source}; " + _missing_tokenizer_hint(repo_hint), "tokenizer"
        )
    try:
        return AutoTokenizer.from_pretrained(
            source, local_files_only=not allow_download, trust_remote_code=trust_remote_code
        )
    except Exception as exc:
        where = "on the Hugging Face hub or in its cache" if allow_download else "in the Hugging Face cache"
        raise OptionError(
            f"tinker backend: no tokenizer for {source!r} {where} ({type(exc).__name__}); "
            + _missing_tokenizer_hint(source),
            "tokenizer",
        ) from exc


def _one_line(exc: object, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text[:limit] + ("..." if len(text) > limit else "")


# --- errors -----------------------------------------------------------------------------------


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt may succeed: transport failures, rate limits, server errors."""
    if isinstance(exc, TimeoutError | tinker.APIConnectionError):  # APITimeoutError included
        return True
    if isinstance(exc, tinker.APIStatusError):
        status = int(getattr(exc, "status_code", 0) or 0)
        return status in _RETRY_STATUS or status >= 500
    if isinstance(exc, tinker.RequestFailedError):
        return str(getattr(exc, "category", "")).lower() != "user"
    try:
        from tinker.lib.retryable_exception import RetryableException
    except ImportError:  # pragma: no cover - another SDK layout
        return False
    return isinstance(exc, RetryableException)


def error_text(exc: BaseException) -> str:
    """A one-line description of an SDK failure, from the status and message only (no headers)."""
    if isinstance(exc, tinker.APIStatusError):
        return f"HTTP {exc.status_code}: {_one_line(exc.message or exc)}"
    if isinstance(exc, tinker.APITimeoutError | TimeoutError):
        return f"timeout: {_one_line(exc) or type(exc).__name__}"
    if isinstance(exc, tinker.APIConnectionError):
        return f"connection error: {_one_line(exc.message or exc)}"
    if isinstance(exc, tinker.RequestFailedError):
        return f"request failed ({exc.category}): {_one_line(exc.message)}"
    return f"{type(exc).__name__}: {_one_line(exc)}"


def _scrub(text: str) -> str:
    """``text`` without any secret the run holds (``TINKER_API_KEY`` included), in any encoding."""
    return secrets.scrub(text)


async def _settle(value: Any, timeout: float | None) -> Any:
    """The result of an SDK call: an ``APIFuture`` (awaitable, ``.result()``), a coroutine, or a value."""
    if inspect.isawaitable(value):
        return await asyncio.wait_for(value, timeout)
    result = getattr(value, "result", None)
    if callable(result):
        return await asyncio.wait_for(_in_daemon_thread(result, timeout), timeout)
    return value


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a daemon thread. Unlike ``asyncio.to_thread``, a call still blocked when we
    give up (the SDK retries connection errors for 5 minutes, unconfigurably) neither delays
    ``asyncio.run``'s exit, which joins the default executor, nor the interpreter's."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def work() -> None:
        try:
            value, ok = fn(*args), True
        except BaseException as exc:  # handed to the awaiting coroutine
            value, ok = exc, False
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, ok, value)

    threading.Thread(target=work, name="leader-eval-tinker-setup", daemon=True).start()
    return await future


def _default_service_client() -> Any:
    # reads TINKER_API_KEY (or stored credentials) itself: the key never passes through here
    return tinker.ServiceClient()


def _default_rest_client() -> Any:
    return tinker.RestClient()


def _retry_config(timeout_s: float, max_connections: int) -> Any:
    """Bound the SDK's own retry loop (its default waits up to 2 hours for progress)."""
    try:
        from tinker.lib.retry_handler import RetryConfig
    except ImportError:  # pragma: no cover - another SDK layout: keep its defaults
        return None
    return RetryConfig(progress_timeout=timeout_s, max_connections=max_connections)


# --- the backend ------------------------------------------------------------------------------


class TinkerBackend:
    """Sampler over the Tinker API. Build with ``backend_from_spec`` or directly.

    ``sampling_client`` / ``service_client_factory`` / ``rest_client_factory`` replace the SDK's
    clients (tests pass doubles); by default ``tinker.ServiceClient()`` is built on first use.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        base_model: str | None = None,
        tokenizer: str | os.PathLike[str] | Any | None = None,
        renderer: str | None = None,
        chat_template: str | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        context_length: int | None = None,
        max_concurrency: int = 32,
        max_retries: int = 3,
        retry_base_s: float = 1.0,
        retry_max_s: float = 30.0,
        timeout_s: float = 900.0,
        connect_timeout_s: float = 30.0,
        resolve_timeout_s: float = 30.0,
        seed_mode: SeedMode = "request",
        max_samples_per_request: int | None = None,
        allow_download: bool = False,
        trust_remote_code: bool = False,
        probe_context: bool = True,
        sampling_client: Any = None,
        service_client_factory: Callable[[], Any] | None = None,
        rest_client_factory: Callable[[], Any] | None = None,
    ):
        if not model_path and not base_model:
            raise LeaderEvalError("tinker backend: give a checkpoint (tinker://...) or a base model name")
        if model_path:
            parse_spec(model_path)  # validates the path's shape
        if seed_mode not in ("request", "per_sample"):
            raise LeaderEvalError(f"tinker backend: seed_mode must be 'request' or 'per_sample', not {seed_mode!r}")
        self.model_path = model_path
        self.model_id = model_path or f"tinker:{base_model}"
        #: a tinker:// checkpoint path names immutable weights; a base model name may be updated
        #: by the service behind the same name, so it is not cached across runs (--cache-id to vouch)
        self.cache_identity: str | None = model_path or None
        self._given_base_model = base_model
        self.base_model: str | None = base_model
        self._base_model_source = "given" if base_model else None
        self._server_base_model: str | None = None
        self.renderer_name = renderer
        self.chat_template_override = chat_template
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._given_context_length = context_length
        self.context_length: int | None = context_length
        self.max_concurrency = max(1, int(max_concurrency))
        self.max_retries = max(0, int(max_retries))
        self.retry_base_s = float(retry_base_s)
        self.retry_max_s = float(retry_max_s)
        self._retry = RetryPolicy(self.max_retries, self.retry_base_s, self.retry_max_s)
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.resolve_timeout_s = float(resolve_timeout_s)
        self.seed_mode: SeedMode = seed_mode
        self.max_samples_per_request = int(max_samples_per_request) if max_samples_per_request else None
        self.allow_download = allow_download
        self.trust_remote_code = trust_remote_code
        self.probe_context = probe_context

        self._tokenizer_source = tokenizer
        self._tokenizer: Any = None
        self._tokenizer_label: str | None = None
        self._renderer: Any = None
        self._template: str | None = None
        self._protocol_override: str | None = None
        self._special_override: tuple[str, ...] | None = None

        self._sampling_client = sampling_client
        self._service_client: Any = None
        self._service_client_factory = service_client_factory or _default_service_client
        self._rest_client_factory = rest_client_factory or _default_rest_client
        self._setup_error: AttemptError | None = None
        self._checked = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._sem: asyncio.Semaphore | None = None
        self._rng = random.Random()

        # A tokenizer that needs no network loads now, so a missing one fails before any work.
        if tokenizer is not None or self.base_model is not None:
            self._ensure_tokenizer()

    # --- tokenizer, template, renderer ---------------------------------------------------------

    def resolve_base_model(self) -> str:
        """The checkpoint's base model: given, or read from the Tinker API (network, bounded)."""
        if self.base_model:
            return self.base_model
        assert self.model_path is not None
        try:
            rest = self._rest_client_factory()
            info = rest.get_weights_info_by_tinker_path(self.model_path)
            info = info.result(timeout=self.resolve_timeout_s) if hasattr(info, "result") else info
            base = str(info.base_model)
        except Exception as exc:
            raise OptionError(
                _scrub(
                    f"tinker backend: could not read the base model of {self.model_path} from the Tinker API "
                    f"({error_text(exc)}); pass --base-model NAME (e.g. Qwen/Qwen3-8B, or {BASE_MODEL_ENV}=NAME) "
                    f"or a local tokenizer (--tokenizer PATH or {TOKENIZER_ENV}=PATH)"
                ),
                "base_model",
                "tokenizer",
            ) from exc
        self.base_model = base
        self._base_model_source = "server"
        return base

    def _ensure_tokenizer(self) -> Any:
        if self._tokenizer is not None:
            return self._tokenizer
        source = self._tokenizer_source
        if source is None:
            repo = tokenizer_repo(self.resolve_base_model())
            tok = load_tokenizer(
                repo, allow_download=self.allow_download, trust_remote_code=self.trust_remote_code, repo_hint=repo
            )
            label = repo
        elif isinstance(source, str | os.PathLike):
            hint = tokenizer_repo(self.base_model) if self.base_model else None
            tok = load_tokenizer(
                os.fspath(source),
                allow_download=self.allow_download,
                trust_remote_code=self.trust_remote_code,
                repo_hint=hint,
            )
            # a folder name, not the machine-specific path, goes to manifests
            label = Path(os.fspath(source)).name if Path(os.fspath(source)).exists() else os.fspath(source)
        else:
            tok = source  # an already-built tokenizer object (Python API)
            label = str(getattr(tok, "name_or_path", "") or type(tok).__name__)
            label = Path(label).name if Path(label).exists() else label
        template = self.chat_template_override or getattr(tok, "chat_template", None)
        if isinstance(template, dict):  # some tokenizers keep several named templates
            template = template.get("default") or next(iter(template.values()), None)
        self._template = template or None
        if self.renderer_name:
            self._renderer = _make_renderer(self.renderer_name, tok, self.base_model)
        elif not self._template:
            raise OptionError(
                f"tinker backend: the tokenizer {label!r} has no chat template; give --renderer NAME "
                "(a tinker-cookbook renderer)",
                "renderer",
            )
        self._tokenizer = tok
        self._tokenizer_label = label
        return tok

    @property
    def tokenizer(self) -> Any:
        return self._ensure_tokenizer()

    @property
    def default_protocol(self) -> str:
        if self._protocol_override:
            return self._protocol_override
        self._ensure_tokenizer()
        return protocols.detect(chat_template=self._template, renderer=self.renderer_name)

    @default_protocol.setter
    def default_protocol(self, value: str) -> None:
        self._protocol_override = value

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """The tokenizer's special tokens (and added tokens marked special); end-of-turn first."""
        if self._special_override is not None:
            return self._special_override
        tok = self._ensure_tokenizer()
        found: list[str] = []
        for t in list(getattr(tok, "all_special_tokens", []) or []):
            if t and t not in found:
                found.append(str(t))
        decoder = getattr(tok, "added_tokens_decoder", None) or {}
        for _, added in sorted(decoder.items()):
            if getattr(added, "special", False) and added.content not in found:
                found.append(str(added.content))
        template = self._template or ""
        eos = str(getattr(tok, "eos_token", "") or "")
        end = next((t for t in _END_OF_TURN if t in template and t in found), eos if eos in found else None)
        if end:
            found = [end, *[t for t in found if t != end]]
        return tuple(found)

    @special_tokens.setter
    def special_tokens(self, value: tuple[str, ...]) -> None:
        self._special_override = tuple(value)

    def tokenize(self, text: str) -> list[int]:
        return list(self._ensure_tokenizer().encode(text, add_special_tokens=False))

    def detokenize(self, ids: Sequence[int]) -> str:
        return str(
            self._ensure_tokenizer().decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
        )

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        """Render with the base model's template (or the named renderer) and tokenize the result."""
        tok = self._ensure_tokenizer()
        if self._renderer is not None:
            ids = self._render_with_renderer(messages, tools)
            return Prompt(text=self.detokenize(ids), token_ids=ids, messages=messages)
        from leader_eval.suite.chat_template import render_chat_template

        # as tokenizer.apply_chat_template does: the special tokens are template variables,
        # and the caller's template kwargs win over them
        variables = {**dict(getattr(tok, "special_tokens_map", None) or {}), **self.chat_template_kwargs}
        variables.pop("chat_template", None)
        text = render_chat_template(
            str(self._template),
            messages,
            tools=tools or None,
            add_generation_prompt=True,
            source=f"tinker backend: the chat template of {self._tokenizer_label!r}",
            **variables,
        )
        # the template already wrote BOS and every marker: encoding must not add them again
        return Prompt(text=text, token_ids=self.tokenize(text), messages=messages)

    def _render_with_renderer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        renderer = self._renderer
        convo = list(messages)
        if tools and hasattr(renderer, "create_conversation_prefix_with_tools"):
            system = ""
            if convo and convo[0].get("role") == "system":
                system = str(convo[0].get("content") or "")
                convo = convo[1:]
            specs = [t.get("function", t) for t in tools]
            convo = list(renderer.create_conversation_prefix_with_tools(specs, system_prompt=system)) + convo
        model_input = renderer.build_generation_prompt(convo)
        return list(model_input.to_ints())

    # --- sampling ------------------------------------------------------------------------------

    async def sample(self, request: SampleRequest) -> list[Completion]:
        """One completion per seed, in seed order; failures come back as ``Completion(error=...)``."""
        seeds = list(request.seeds)
        if not seeds:
            return []
        ids = (
            list(request.prompt.token_ids)
            if request.prompt.token_ids is not None
            else self.tokenize(request.prompt.text)
        )
        self._bind_loop()
        t0 = time.perf_counter()
        client = await retrying(lambda _: self._ensure_client(), _setup_failure, self._retry, self._rng)
        if isinstance(client, GaveUp):
            elapsed = time.perf_counter() - t0
            return [self._failed(client.error, client.retries, elapsed, len(ids)) for _ in seeds]
        if overflows(len(ids), request.params.max_tokens, self.context_length):
            message = overflow_error(len(ids), request.params.max_tokens, self.context_length)
            return [self._failed(message, 0, 0.0, len(ids)) for _ in seeds]
        model_input = tinker.ModelInput.from_ints(ids)
        groups = self._groups(seeds)
        results = await asyncio.gather(
            *(self._sample_group(client, model_input, len(ids), request.params, g) for g in groups)
        )
        return [c for group in results for c in group]

    def _groups(self, seeds: list[int]) -> list[list[int]]:
        if self.seed_mode == "per_sample":
            return [[s] for s in seeds]
        size = self.max_samples_per_request or len(seeds)
        return [seeds[i : i + size] for i in range(0, len(seeds), size)]

    def _sdk_params(self, params: SamplingParams, seed: int) -> Any:
        stop: list[Any] | None = list(params.stop) if params.stop else None
        if stop is None and self._renderer is not None and hasattr(self._renderer, "get_stop_sequences"):
            stop = list(self._renderer.get_stop_sequences()) or None
        # stop=None keeps the model's own end-of-sequence stop; stop=[] would disable it
        return tinker.SamplingParams(
            max_tokens=params.max_tokens, temperature=params.temperature, top_p=params.top_p, seed=seed, stop=stop
        )

    async def _sample_group(
        self, client: Any, model_input: Any, n_prompt: int, params: SamplingParams, seeds: list[int]
    ) -> list[Completion]:
        sdk_params = self._sdk_params(params, seeds[0])
        t0 = time.perf_counter()

        async def attempt(retries: int) -> list[Completion]:
            assert self._sem is not None
            async with self._sem:
                response = await _settle(
                    client.sample(prompt=model_input, num_samples=len(seeds), sampling_params=sdk_params),
                    self.timeout_s,
                )
            sequences = list(getattr(response, "sequences", None) or [])
            if len(sequences) != len(seeds):
                raise AttemptError(
                    f"the service returned {len(sequences)} sequences for {len(seeds)} samples", retryable=True
                )
            total = round(time.perf_counter() - t0, 4)
            return [self._completion(seq, n_prompt, seeds[0], j, retries, total) for j, seq in enumerate(sequences)]

        got = await retrying(attempt, self.should_retry, self._retry, self._rng, logger=log, label="tinker backend:")
        if not isinstance(got, GaveUp):
            return got
        # the service's text reaches stderr: no escape sequence (leader_eval.inert)
        log.warning("tinker backend: request seeded %d failed: %s%s", seeds[0], inert(got.message), got.suffix)
        elapsed = time.perf_counter() - t0
        return [self._failed(got.error, got.retries, elapsed, n_prompt) for _ in seeds]

    def should_retry(self, exc: Exception) -> AttemptError:
        """A failed sampling attempt judged: timeouts, transport failures, rate limits and server
        errors may succeed on another attempt (``is_retryable``); anything else is final."""
        if isinstance(exc, AttemptError):
            return exc
        if isinstance(exc, asyncio.TimeoutError | TimeoutError):
            return AttemptError(f"timeout after {self.timeout_s:g} s", retryable=True)
        return AttemptError(error_text(exc), retryable=is_retryable(exc))

    def _completion(
        self, seq: Any, n_prompt: int, request_seed: int, index: int, retries: int, total: float
    ) -> Completion:
        tokens = [int(t) for t in (seq.tokens or [])]
        logprobs = seq.logprobs
        api_calls, reasoning = self._renderer_parse(tokens) if self._renderer is not None else (None, None)
        return Completion(
            text=self.detokenize(tokens),
            token_ids=tokens,
            stop_reason="length" if seq.stop_reason == "length" else "stop",
            logprobs=[float(x) for x in logprobs] if logprobs is not None else None,
            api_tool_calls=api_calls,
            reasoning=reasoning,
            prompt_tokens=n_prompt,
            completion_tokens=len(tokens),
            # which request produced this sequence: the request's seed and its place in the request
            timings={"total_s": total, "retries": retries, "request_seed": request_seed, "request_index": index},
        )

    @staticmethod
    def _failed(message: str, retries: int, elapsed: float, n_prompt: int) -> Completion:
        return Completion(
            text="",
            token_ids=[],
            stop_reason=None,
            prompt_tokens=n_prompt,
            error=message,
            timings={"retries": retries, "total_s": round(elapsed, 4)},
        )

    def _renderer_parse(self, tokens: list[int]) -> tuple[list[dict[str, Any]] | None, str | None]:
        """Tool calls and reasoning as the renderer the model was trained with parses them."""
        try:
            message, _ok = self._renderer.parse_response(tokens)
        except Exception as exc:  # a parse failure is the model's, and the raw text is kept anyway
            log.debug("tinker backend: renderer could not parse a response: %s", exc)
            return None, None
        calls: list[dict[str, Any]] = []
        for tc in _get(message, "tool_calls") or []:
            fn = _get(tc, "function")
            args = _get(fn, "arguments")
            calls.append(
                {
                    "id": _get(tc, "id"),
                    "type": "function",
                    "function": {
                        "name": _get(fn, "name"),
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        content = _get(message, "content")
        thinking = [
            str(_get(p, "thinking") or "")
            for p in (content if isinstance(content, list) else [])
            if _get(p, "type") == "thinking"
        ]
        return (calls or None), ("".join(thinking) or None)

    # --- clients -------------------------------------------------------------------------------

    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # asyncio primitives belong to one loop; a new asyncio.run() needs new ones
            self._loop = loop
            self._lock = asyncio.Lock()
            self._sem = asyncio.Semaphore(self.max_concurrency)

    async def _ensure_client(self) -> Any:
        if self._sampling_client is None:
            await self._create_sampling_client()
        if not self._checked:
            # once per client: which base model it serves, and (if not given) the context length
            self._checked = True
            self._note_base_model(self._sampling_client)
            if self.probe_context:
                await self.probe()
        return self._sampling_client

    async def _create_sampling_client(self) -> None:
        if self._setup_error is not None:
            raise self._setup_error
        assert self._lock is not None
        async with self._lock:
            if self._sampling_client is not None:
                return
            if self._setup_error is not None:
                # another request failed the setup while this one waited for the lock: report
                # that failure at once instead of spending a second deadline on the same service
                raise self._setup_error
            try:
                # one deadline over the whole setup (session, sampling client): the SDK's own
                # retries of connection errors last 5 minutes and cannot be configured
                async with asyncio.timeout(self.connect_timeout_s):
                    pending = await _in_daemon_thread(self._create_client)
                    client = await _settle(pending, self.connect_timeout_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, asyncio.TimeoutError | TimeoutError):
                    # the deadline was the whole budget: later requests report it at once
                    text = (
                        f"no sampling client within connect_timeout_s={self.connect_timeout_s:g} s "
                        "(is the network or the Tinker service unreachable?)"
                    )
                    retryable = False
                else:
                    text, retryable = error_text(exc), is_retryable(exc)
                fail = AttemptError(
                    _scrub(f"could not create a Tinker sampling client for {self.model_id}: {text}"),
                    retryable=retryable,
                )
                if not retryable:
                    self._setup_error = fail  # a bad key or path fails every later request the same way
                raise fail from exc
            self._sampling_client = client

    def _create_client(self) -> Any:
        # ServiceClient() and the session it opens may block on the network: run in a thread
        service = self._service_client_factory()
        self._service_client = service
        kwargs: dict[str, Any] = {"model_path": self.model_path} if self.model_path else {"base_model": self.base_model}
        config = _retry_config(self.timeout_s, self.max_concurrency)
        if config is not None:
            kwargs["retry_config"] = config
        return service.create_sampling_client(**kwargs)

    def _note_base_model(self, client: Any) -> None:
        getter = getattr(client, "get_base_model", None)
        try:
            server = str(getter()) if callable(getter) else None
        except Exception:
            server = None
        if not server:
            return
        self._server_base_model = server
        if self.base_model and tokenizer_repo(server) != tokenizer_repo(self.base_model):
            log.warning(
                "tinker backend: %s was trained from %s, but prompts are rendered for %s",
                self.model_id, inert(server), self.base_model,
            )  # fmt: skip
        if not self.base_model:
            self.base_model = server
            self._base_model_source = "server"

    async def probe(self) -> int | None:
        """Fill ``context_length`` from the service's capabilities if it was not given. Never raises."""
        if self._given_context_length is not None or not self.base_model:
            return self.context_length
        try:
            rest = self._rest_client_factory()
            caps = await _settle(rest.get_server_capabilities(), min(self.resolve_timeout_s, 30.0))
            for m in getattr(caps, "supported_models", None) or []:
                if m.model_name == self.base_model and m.max_context_length:
                    self.context_length = int(m.max_context_length)
                    break
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("tinker backend: server capabilities unavailable: %s", _scrub(error_text(exc)))
        return self.context_length

    # --- protocol ------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        template = self._template
        return {
            "backend": "tinker",
            "model_id": self.model_id,
            "model_path": self.model_path,
            "base_model": self.base_model,
            "base_model_source": self._base_model_source,
            "base_model_server": self._server_base_model,
            "tokenizer": self._tokenizer_label,
            "tokenizer_class": type(self._tokenizer).__name__ if self._tokenizer is not None else None,
            "renderer": self.renderer_name,
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()[:16] if template else None,
            "chat_template_kwargs": self.chat_template_kwargs,
            "context_length": self.context_length,
            "seed_mode": self.seed_mode,
            "max_samples_per_request": self.max_samples_per_request,
            "max_concurrency": self.max_concurrency,
            "max_retries": self.max_retries,
            "timeout_s": self.timeout_s,
            "api_key_env": API_KEY_ENV,  # the variable's name, never its value
            "tinker_sdk": getattr(tinker, "__version__", "?"),
        }

    async def aclose(self) -> None:
        service, self._service_client = self._service_client, None
        if service is None:
            return  # nothing was opened here (an injected sampling client stays as it is)
        opened, self._sampling_client = self._sampling_client is not None, None
        self._checked = False
        if not opened or not hasattr(service, "close"):
            # the setup never finished: its session is still being created in a daemon thread
            # (the SDK holds its lifecycle lock meanwhile, so close() would block this thread
            # until the SDK gives up, minutes later); there is no session to finish
            return
        try:
            # close() itself may block on that lock or on the network: call it in a daemon
            # thread, so a service that stops answering cannot hold the process's exit
            async with asyncio.timeout(_CLOSE_TIMEOUT_S):
                pending = await _in_daemon_thread(service.close, "success")
                await _settle(pending, _CLOSE_TIMEOUT_S)
        except Exception as exc:
            log.debug("tinker backend: closing the session failed: %s", _scrub(error_text(exc)))


def _setup_failure(exc: Exception) -> AttemptError | None:
    """A failed setup attempt (``_create_sampling_client`` judged it); anything else propagates."""
    return exc if isinstance(exc, AttemptError) else None


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _make_renderer(name: str, tokenizer: Any, base_model: str | None) -> Any:
    try:
        from tinker_cookbook import renderers
    except ImportError as exc:
        raise LeaderEvalError(
            f"tinker backend: renderer {name!r} needs the tinker-cookbook package (pip install tinker-cookbook); "
            "without it, leave the renderer out to render with the tokenizer's chat template"
        ) from exc
    try:
        return renderers.get_renderer(name, tokenizer, model_name=base_model)
    except TypeError:  # older cookbook without model_name
        return renderers.get_renderer(name, tokenizer)
    except Exception as exc:
        raise LeaderEvalError(f"tinker backend: renderer {name!r}: {type(exc).__name__}: {_one_line(exc)}") from exc


def backend_from_spec(spec: str, **options: Any) -> TinkerBackend:
    """``tinker://RUN/sampler_weights/NAME`` or ``tinker:ORG/MODEL`` (+ options) -> a backend.

    Options left unset fall back to ``LEADER_EVAL_TOKENIZER``, ``LEADER_EVAL_BASE_MODEL`` and
    ``LEADER_EVAL_RENDERER``.
    """
    model_path, base_model = parse_spec(spec)
    opts = {k: v for k, v in options.items() if v is not None}
    base_model = opts.pop("base_model", None) or base_model or os.environ.get(BASE_MODEL_ENV) or None
    opts.setdefault("tokenizer", os.environ.get(TOKENIZER_ENV) or None)
    opts.setdefault("renderer", os.environ.get(RENDERER_ENV) or None)
    known = set(inspect.signature(TinkerBackend.__init__).parameters) - {"self", "model_path", "base_model"}
    unknown = sorted(set(opts) - known)
    if unknown:
        log.debug("tinker backend: ignoring options %s", ", ".join(unknown))
    kwargs = {k: v for k, v in opts.items() if k in known}
    return TinkerBackend(model_path, base_model=base_model, **kwargs)


__all__ = [
    "TinkerBackend",
    "backend_from_spec",
    "error_text",
    "is_retryable",
    "load_tokenizer",
    "parse_spec",
    "tokenizer_repo",
]
