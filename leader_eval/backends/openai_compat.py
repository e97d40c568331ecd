"""An OpenAI-compatible HTTP server as a sampler: llama.cpp, vLLM, SGLang, a hosted endpoint.

Spec: ``openai:http://host:port/v1#model`` (or the ``model=`` option).

Two modes:

* ``completions`` (default): this library renders the prompt with the model's own chat template
  and POSTs ``/v1/completions``, so the text the model sees is exactly the text recorded, and
  the raw output (special tokens as the server decodes them) is what gets scored. The template
  comes from ``chat_template=`` (a jinja2 string) or ``gguf_path=`` (read from the GGUF's
  ``tokenizer.chat_template`` metadata through llama-cpp-python, which also gives a tokenizer);
  servers do not expose it over the API.
* ``chat``: POSTs ``/v1/chat/completions`` with the messages and tools; the server applies its
  template and parses tool calls. The API's ``tool_calls``, ``content`` and any
  ``reasoning_content`` are all kept.

One request per seed (``n`` is not used: servers differ on it, and per-seed requests keep every
sample's seed exact). A failed request is retried with exponential backoff and full jitter on
429, 5xx, connection errors, timeouts and unreadable bodies, honouring ``Retry-After``; after
``max_retries`` the sample comes back as ``Completion(error=...)``, never as an exception.

The API key is read from the environment variable named by ``api_key_env`` at request time and
never stored, recorded or logged; error texts are built from the status and the response body
(never request headers) and scrubbed of the key in case a server echoes it.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import hashlib
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from leader_eval import protocols
from leader_eval.backends.base import Completion, SampleRequest, SamplingParams
from leader_eval.errors import LeaderEvalError
from leader_eval.render import render_chat_template, template_supports_tools
from leader_eval.types import Prompt

try:  # orjson (already a dependency of tinker) is ~5x faster than json for these small bodies
    import orjson

    _dumps: Callable[[Any], bytes] = orjson.dumps
    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - the stdlib fallback

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()

    _loads = json.loads

log = logging.getLogger(__name__)

Mode = Literal["completions", "chat"]

#: statuses worth retrying: rate limits, timeouts, and any server-side failure (5xx)
_RETRY_STATUS = frozenset({408, 409, 425, 429})
_STOP_REASONS: dict[str | None, Any] = {
    "stop": "stop",
    "eos": "stop",
    "tool_calls": "stop",
    "function_call": "stop",
    "content_filter": "stop",
    "length": "length",
    None: None,
}
#: llama.cpp, vLLM, SGLang and OpenAI phrasings of "the prompt does not fit"
_OVERFLOW_RE = re.compile(
    r"context (?:window|length)|maximum context|exceeds? (?:the )?(?:max|context)|too many tokens|prompt is too long",
    re.IGNORECASE,
)
#: end-of-turn markers, most specific first; the first one found in a template leads special_tokens
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|eot|>", "</s>", "<|endoftext|>")
_SPECIAL_RE = re.compile(r"<\|[^|<>\s]{1,40}\|>|<(?:s|/s|start_of_turn|end_of_turn|bos|eos)>|\[/?INST\]")


def is_context_overflow(error: str | None) -> bool:
    """Whether a ``Completion.error`` says the prompt did not fit the server's context."""
    return error is not None and error.startswith("HTTP 4") and _OVERFLOW_RE.search(error) is not None


def strip_credentials(url: str) -> str:
    """``url`` without ``user:pass@``, query or fragment (they can carry secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.now(UTC).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


def special_tokens_from_template(template: str, bos: str = "", eos: str = "") -> tuple[str, ...]:
    """Special-token strings a chat template writes; its end-of-turn marker first."""
    found: list[str] = []
    for tok in (*_SPECIAL_RE.findall(template), bos, eos):
        if tok and tok not in found:
            found.append(tok)
    end = next((t for t in _END_OF_TURN if t in found), eos or None)
    if end:
        found = [end, *[t for t in found if t != end]]
    return tuple(found)


def protocol_from_template(template: str | None) -> str:
    """The tool-call protocol a chat template speaks natively; ``json`` when it has none."""
    return protocols.detect(chat_template=template)


class _Failure(Exception):
    """One failed attempt; ``retryable`` says whether another attempt may succeed."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class OpenAICompatBackend:
    """Sampler over an OpenAI-compatible HTTP API (aiohttp, one session per backend)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        mode: Mode = "completions",
        api_key_env: str = "OPENAI_API_KEY",
        chat_template: str | None = None,
        gguf_path: str | os.PathLike[str] | None = None,
        tokenizer: Callable[[str], list[int]] | None = None,
        bos_token: str | None = None,
        eos_token: str | None = None,
        context_length: int | None = None,
        max_concurrency: int = 64,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        retry_base_s: float = 0.5,
        retry_max_s: float = 60.0,
        logprobs: bool = False,
        tool_choice: str | dict[str, Any] | None = None,
        extra_body: dict[str, Any] | None = None,
        extra_headers: dict[str, str] | None = None,
    ):
        if mode not in ("completions", "chat"):
            raise LeaderEvalError(f"openai backend: mode must be 'completions' or 'chat', not {mode!r}")
        if not model:
            raise LeaderEvalError("openai backend: a model name is required (openai:URL#MODEL)")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LeaderEvalError(f"openai backend: not an http(s) URL: {strip_credentials(base_url)!r}")
        self.base_url = strip_credentials(base_url)
        self.model = model
        self.mode: Mode = mode
        self.api_key_env = api_key_env
        self.max_concurrency = max(1, int(max_concurrency))
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self.retry_base_s = float(retry_base_s)
        self.retry_max_s = float(retry_max_s)
        self.logprobs = logprobs
        self.extra_body = dict(extra_body or {})
        if tool_choice is not None:
            self.extra_body["tool_choice"] = _tool_choice(tool_choice)
        self.extra_headers = dict(extra_headers or {})
        # credentials in the URL become Basic auth; they never reach model_id or logs
        self._basic_auth = (parts.username or "", parts.password or "") if parts.username else None
        self.model_id = f"openai:{self.base_url}/{model}"
        self._url = self.base_url + ("/chat/completions" if mode == "chat" else "/completions")

        self._tokenizer = tokenizer
        self._template_source = "given" if chat_template else None
        self.chat_template = chat_template
        self.bos_token = bos_token or ""
        self.eos_token = eos_token or ""
        self._n_ctx_train: int | None = None
        self._gguf_control_tokens: tuple[str, ...] = ()
        self._gguf_name: str | None = None
        if gguf_path is not None:
            self._read_gguf(gguf_path)
        self._given_context_length = context_length
        self.context_length: int | None = context_length
        specials = special_tokens_from_template(self.chat_template or "", self.bos_token, self.eos_token)
        # the GGUF's vocabulary knows every control token, also those the template never writes
        self.special_tokens: tuple[str, ...] = specials + tuple(
            sorted(set(self._gguf_control_tokens) - set(specials), key=self._gguf_control_tokens.index)
        )
        self.default_protocol = "openai" if mode == "chat" else protocol_from_template(self.chat_template)
        if mode == "completions" and not self.chat_template:
            raise LeaderEvalError(
                "openai backend in completions mode needs the model's chat template: pass chat_template= "
                "(a jinja2 string) or gguf_path= (read from the GGUF), or use mode='chat'"
            )

        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: asyncio.Semaphore | None = None
        self._probed: asyncio.Task[dict[str, Any]] | None = None
        self._rng = random.Random()
        self._client_timeout = _timeout(self.timeout_s)

    # --- construction helpers -----------------------------------------------------------------

    def _read_gguf(self, path: str | os.PathLike[str]) -> None:
        try:
            import llama_cpp
        except ImportError as exc:
            raise LeaderEvalError("openai backend: reading a GGUF's chat template needs llama-cpp-python") from exc
        # vocab_only loads the tokenizer and metadata in milliseconds, without the weights
        vocab = llama_cpp.Llama(model_path=os.fspath(path), n_ctx=16, vocab_only=True, verbose=False)
        meta = dict(vocab.metadata)
        self._gguf_name = os.path.basename(os.fspath(path))
        if not self.chat_template and meta.get("tokenizer.chat_template"):
            self.chat_template = meta["tokenizer.chat_template"]
            self._template_source = "gguf"

        def text(tid: int) -> str:
            return "" if tid < 0 else bytes(vocab.detokenize([tid], special=True)).decode("utf-8", "replace")

        self.bos_token = self.bos_token or text(vocab.token_bos())
        self.eos_token = self.eos_token or text(vocab.token_eos())
        ctx = meta.get(f"{meta.get('general.architecture', '')}.context_length")
        self._n_ctx_train = int(ctx) if ctx and str(ctx).isdigit() else None
        if self._tokenizer is None:
            self._tokenizer = lambda s: list(vocab.tokenize(s.encode("utf-8"), add_bos=False, special=True))
        self._gguf_control_tokens = _control_tokens(llama_cpp, vocab, text)

    # --- Backend protocol ---------------------------------------------------------------------

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        """Render the prompt; in chat mode without a template, a canonical JSON of what is sent."""
        if self.chat_template:
            use_tools = tools if tools and template_supports_tools(self.chat_template) else None
            text = render_chat_template(
                self.chat_template, messages, tools=use_tools, bos_token=self.bos_token, eos_token=self.eos_token
            )
        else:
            # the server renders; this text still changes whenever the request would
            text = json.dumps({"messages": messages, "tools": tools or []}, ensure_ascii=False, sort_keys=True)
        ids = self._tokenizer(text) if self._tokenizer is not None and self.mode == "completions" else None
        return Prompt(text=text, token_ids=list(ids) if ids is not None else None, messages=messages)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        """One completion per seed, in seed order; failures come back as ``Completion(error=...)``."""
        self._ensure_session()
        if self.context_length is None and self._probed is None:
            self._probed = asyncio.ensure_future(self.probe())
        base = self._request_body(request)
        if len(request.seeds) == 1:
            return [await self._sample_seed(base, request.seeds[0])]
        return list(await asyncio.gather(*(self._sample_seed(base, s) for s in request.seeds)))

    def describe(self) -> dict[str, Any]:
        template_sha = hashlib.sha256(self.chat_template.encode()).hexdigest()[:16] if self.chat_template else None
        return {
            "backend": "openai",
            "model_id": self.model_id,
            "base_url": self.base_url,
            "model": self.model,
            "mode": self.mode,
            "api_key_env": self.api_key_env,  # the variable's name, never its value
            "chat_template": self._template_source,
            "chat_template_sha256": template_sha,
            "gguf": self._gguf_name,
            "context_length": self.context_length,
            "max_concurrency": self.max_concurrency,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "logprobs": self.logprobs,
            "extra_body": self.extra_body,
            "extra_headers": sorted(self.extra_headers),  # names only: values may be credentials
        }

    async def aclose(self) -> None:
        if self._probed is not None and not self._probed.done():
            self._probed.cancel()
        if self._session is not None:
            await self._session.close()
        self._session = None
        self._loop = None
        self._sem = None

    # --- context length -----------------------------------------------------------------------

    async def probe(self) -> dict[str, Any]:
        """Ask ``GET /models`` about the model; fill ``context_length`` if it was not given.

        vLLM reports ``max_model_len``; llama.cpp's C++ server ``meta.n_ctx_train``;
        llama-cpp-python's server reports nothing, so the GGUF's ``n_ctx_train`` is the
        fallback (the server's ``--n_ctx`` may be smaller: pass ``context_length=`` then).
        Never raises; returns the model's entry (or ``{}``).
        """
        self._ensure_session()
        assert self._session is not None
        entry: dict[str, Any] = {}
        try:
            async with self._session.get(
                self.base_url + "/models", headers=self._headers(), timeout=_timeout(min(self.timeout_s, 10.0))
            ) as resp:
                if resp.status == 200:
                    data = _loads(await resp.read()).get("data") or []
                    entry = next((m for m in data if m.get("id") == self.model), data[0] if len(data) == 1 else {})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("openai backend: GET /models failed: %s", self._scrub(f"{type(exc).__name__}: {exc}"))
        if self._given_context_length is None:
            meta: dict[str, Any] = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
            n = (
                entry.get("max_model_len")
                or meta.get("n_ctx")
                or meta.get("n_ctx_train")
                or entry.get("context_length")
            )
            if isinstance(n, int) and n > 0:
                self.context_length = n
            elif self._n_ctx_train:
                self.context_length = self._n_ctx_train
        return dict(entry)

    # --- HTTP ---------------------------------------------------------------------------------

    def _ensure_session(self) -> None:
        loop = asyncio.get_running_loop()
        if self._session is not None and self._loop is loop and not self._session.closed:
            return
        # a session is bound to the loop that made it; a new loop (asyncio.run again) needs a new one
        connector = aiohttp.TCPConnector(limit=self.max_concurrency, limit_per_host=0, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, raise_for_status=False)
        self._loop = loop
        # the semaphore (not the connector's queue) bounds requests, so the per-request timeout
        # starts when a request is sent, not while it waits for a free connection
        self._sem = asyncio.Semaphore(self.max_concurrency)
        self._probed = None

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.extra_headers}
        if self._basic_auth is not None:
            user, password = self._basic_auth
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        else:
            key = os.environ.get(self.api_key_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
        return headers

    def _scrub(self, text: str) -> str:
        """Remove the API key (and URL credentials) from a message, in case a server echoed them."""
        key = os.environ.get(self.api_key_env)
        if key and len(key) >= 4:
            text = text.replace(key, "[redacted]")
        if self._basic_auth:
            user, password = self._basic_auth
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            for secret in (token, password):
                if secret:
                    text = text.replace(secret, "[redacted]")
        return text

    def _request_body(self, request: SampleRequest) -> dict[str, Any]:
        p: SamplingParams = request.params
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": p.max_tokens,
            "temperature": p.temperature,
            "top_p": p.top_p,
        }
        if p.stop:
            body["stop"] = list(p.stop)
        if self.mode == "chat":
            body["messages"] = request.prompt.messages
            if request.tools:
                body["tools"] = request.tools
            if self.logprobs:
                body["logprobs"] = True
        else:
            body["prompt"] = request.prompt.text
            if self.logprobs:
                body["logprobs"] = 1
        body.update(self.extra_body)
        return body

    async def _sample_seed(self, base: dict[str, Any], seed: int) -> Completion:
        body = dict(base)
        body["seed"] = seed
        payload = _dumps(body)
        t0 = time.perf_counter()
        retries = 0
        while True:
            try:
                data = await self._post(payload)
                try:
                    out = self._completion(data)
                except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                    raise _Failure(f"unexpected response shape: {type(exc).__name__}", retryable=True) from exc
                out.timings = {"retries": retries, "total_s": round(time.perf_counter() - t0, 4)}
                return out
            except _Failure as fail:
                message = self._scrub(str(fail))
                if not fail.retryable or retries >= self.max_retries:
                    suffix = f" (after {retries} retries)" if retries else ""
                    log.warning("openai backend: seed %d failed: %s%s", seed, message, suffix)
                    return Completion(
                        text="",
                        token_ids=[],
                        stop_reason=None,
                        error=message + suffix,
                        timings={"retries": retries, "total_s": round(time.perf_counter() - t0, 4)},
                    )
                delay = self._rng.uniform(0.0, min(self.retry_max_s, self.retry_base_s * (2**retries)))
                if fail.retry_after is not None:
                    delay = max(delay, min(fail.retry_after, self.retry_max_s))
                retries += 1
                log.debug("openai backend: seed %d attempt %d failed (%s); retrying in %.2f s",
                          seed, retries, message, delay)  # fmt: skip
                await asyncio.sleep(delay)

    async def _post(self, payload: bytes) -> dict[str, Any]:
        assert self._session is not None and self._sem is not None
        try:
            async with (
                self._sem,
                self._session.post(
                    self._url, data=payload, headers=self._headers(), timeout=self._client_timeout
                ) as resp,
            ):
                status = resp.status
                raw = await resp.read()
                retry_after = resp.headers.get("Retry-After") if status != 200 else None
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise _Failure(f"timeout after {self.timeout_s:g} s", retryable=True) from exc
        except aiohttp.ClientError as exc:
            # str(ClientResponseError) may quote request info: keep only the type and a safe text
            raise _Failure(f"connection error: {type(exc).__name__}: {_safe_exc_text(exc)}", retryable=True) from exc
        if status != 200:
            text = _error_text(raw)
            retryable = status >= 500 or status in _RETRY_STATUS
            raise _Failure(f"HTTP {status}: {text}", retryable=retryable, retry_after=parse_retry_after(retry_after))
        try:
            data = _loads(raw)
        except ValueError as exc:
            raise _Failure(f"invalid JSON body ({len(raw)} bytes)", retryable=True) from exc
        if not isinstance(data, dict) or not data.get("choices"):
            detail = _error_text(raw)
            raise _Failure(f"response without choices: {detail}", retryable=True)
        return data

    def _completion(self, data: dict[str, Any]) -> Completion:
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        logprobs: list[float] | None = None
        if self.mode == "chat":
            message = choice.get("message") or {}
            text = message.get("content") or ""
            tool_calls = message.get("tool_calls") or None
            reasoning = message.get("reasoning_content") or message.get("reasoning") or None
            lp = choice.get("logprobs")
            if self.logprobs and isinstance(lp, dict) and lp.get("content"):
                logprobs = [float(t.get("logprob", 0.0)) for t in lp["content"]]
        else:
            text = choice.get("text") or ""
            tool_calls = None
            reasoning = None
            lp = choice.get("logprobs")
            if self.logprobs and isinstance(lp, dict) and lp.get("token_logprobs") is not None:
                logprobs = [float(x) if x is not None else 0.0 for x in lp["token_logprobs"]]
        return Completion(
            text=text,
            token_ids=[],  # servers return text, not ids; re-tokenizing would not be exact
            stop_reason=_STOP_REASONS.get(choice.get("finish_reason"), "stop"),
            logprobs=logprobs,
            api_tool_calls=tool_calls,
            reasoning=reasoning,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )


def _control_tokens(llama_cpp: Any, vocab: Any, text: Callable[[int], str]) -> tuple[str, ...]:
    try:
        handle = vocab._model.vocab  # llama-cpp-python keeps the C vocab on a private attribute
        flag = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
        found = (text(i) for i in range(vocab.n_vocab()) if llama_cpp.llama_vocab_get_attr(handle, i) & flag)
        return tuple(t for t in found if t)
    except (AttributeError, TypeError):  # another binding version: the template's tokens still count
        return ()


def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=seconds)


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """A bare function name becomes the API's ``{"type": "function", ...}`` object."""
    if isinstance(choice, str) and choice not in ("auto", "none", "required"):
        return {"type": "function", "function": {"name": choice}}
    return choice


def _error_text(raw: bytes, limit: int = 300) -> str:
    try:
        data = _loads(raw)
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and err.get("message"):
            msg = str(err["message"])
        elif isinstance(err, str):
            msg = err
        elif isinstance(data, dict) and data.get("detail"):
            msg = str(data["detail"])
        else:
            msg = raw.decode("utf-8", "replace")
    except ValueError:
        msg = raw.decode("utf-8", "replace")
    msg = " ".join(msg.split())
    return msg[:limit] + ("..." if len(msg) > limit else "") if msg else "(empty body)"


def _safe_exc_text(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"{exc.status} {exc.message}"
    return " ".join(str(exc).split())[:200]


def backend_from_spec(spec: str, **options: Any) -> OpenAICompatBackend:
    """``openai:http://host:port/v1#model`` (or ``model=`` in options) -> a backend."""
    url = spec.removeprefix("openai:")
    model = options.pop("model", None)
    if "#" in url:
        url, frag_model = url.split("#", 1)
        model = model or frag_model
    if not model:
        raise LeaderEvalError(f"--model {strip_credentials(url)}: name the served model: openai:URL#MODEL")
    known = {
        "mode", "api_key_env", "chat_template", "gguf_path", "tokenizer", "bos_token", "eos_token",
        "context_length", "max_concurrency", "timeout_s", "max_retries", "retry_base_s", "retry_max_s",
        "logprobs", "tool_choice", "extra_body", "extra_headers",
    }  # fmt: skip
    kwargs = {k: v for k, v in options.items() if k in known and v is not None}
    return OpenAICompatBackend(url, model, **kwargs)
