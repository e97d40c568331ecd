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
sample's seed exact). A failed request is retried (``backends.base.retrying``: exponential backoff
and full jitter, honouring ``Retry-After``) on 429, 5xx, connection errors, timeouts and
unreadable bodies; after ``max_retries`` the sample comes back as ``Completion(error=...)``,
never as an exception.

Bounds against a hostile or broken server (each breach is that sample's error, never a crash):

* ``timeout_s`` (default 120, ``--request-timeout``): one attempt (connect, send, headers and
  the whole body) is cut at this many seconds, so a server that stalls or trickles bytes
  (slow-loris) cannot hold a sample longer;
* ``deadline_s`` (default 3 x ``timeout_s``): one sample, all its retries and waits included;
* ``max_response_bytes`` (default 8 MiB, ``--max-response-bytes``): the body after
  decompression; this backend inflates gzip/deflate itself in bounded steps, so a gzip bomb or
  an endless chunked body costs at most that much memory (over-size is not retried);
* redirects are not followed (a 3xx is an error), so the key never goes to another origin;
* a reply of the wrong shape (non-string content, choices that are not a list, tool calls that
  are not objects, token counts that are not counts, invalid UTF-8, numbers beyond a double)
  is an error with a one-line reason.

The API key is read from the environment variable named by ``api_key_env`` at request time and
never stored, recorded or logged; the variable, URL credentials and credential-like headers are
registered with ``leader_eval.secrets``, which scrubs them, in every encoding, from error texts
here and from every string of every completion at the backend boundary.
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
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp

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
    retrying,
)
from leader_eval.sampling.backends.base import (  # 0.2's path (docs/backends.md), for one release
    is_context_overflow as is_context_overflow,
)
from leader_eval.suite.chat_template import render_chat_template, template_supports_tools
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

#: default cap on a response body after decompression
DEFAULT_MAX_RESPONSE_BYTES = 8 << 20
DEFAULT_TIMEOUT_S = 120.0
#: a token count above this is not one a server can mean
_MAX_COUNT = 2**40

#: at most this many servers in one fleet; a server that failed is avoided this long (seconds)
_MAX_FLEET = 64
_FLEET_COOLDOWN_S = 5.0
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
#: end-of-turn markers, most specific first; the first one found in a template leads special_tokens
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|eot|>", "</s>", "<|endoftext|>")
_SPECIAL_RE = re.compile(r"<\|[^|<>\s]{1,40}\|>|<(?:s|/s|start_of_turn|end_of_turn|bos|eos)>|\[/?INST\]")


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


class _Failure(AttemptError):
    """One failed attempt, and which server of a fleet it went to (set by ``_post``)."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None):
        super().__init__(message, retryable=retryable, retry_after=retry_after)
        self.server: int | None = None


class _Shape(Exception):
    """A reply that is valid JSON of the wrong shape; the message says where."""


class _BoundedBody:
    """Collects a response body, inflating gzip/deflate itself, and fails past ``limit`` bytes.

    ``zlib``'s ``max_length`` bounds each inflate step, so memory never exceeds the limit plus
    one network chunk, however well the body compresses.
    """

    def __init__(self, encoding: str, limit: int):
        enc = encoding.strip().lower()
        self.limit = limit
        self.size = 0
        self.parts: list[bytes] = []
        self._wbits: int | None
        if enc in ("", "identity"):
            self._wbits = None
        elif enc in ("gzip", "x-gzip"):
            self._wbits = 31
        elif enc == "deflate":
            self._wbits = 15
        else:
            raise _Failure(f"unsupported Content-Encoding {enc[:40]!r}", retryable=False)
        self._z: Any = zlib.decompressobj(self._wbits) if self._wbits is not None else None
        self._started = False

    def _add(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise _Failure(f"response body over {self.limit} bytes (max_response_bytes)", retryable=False)
        self.parts.append(data)

    def feed(self, data: bytes) -> None:
        if self._z is None:
            self._add(data)
            return
        try:
            while data:
                if self._z.eof:  # a second gzip member, or trailing garbage
                    data = self._z.unused_data + data
                    if not data.strip(b"\0"):
                        return
                    self._z = zlib.decompressobj(self._wbits or 15)
                if not self._started and self._wbits == 15 and data[:1] != b"x":
                    self._z = zlib.decompressobj(-15)  # "deflate" sent raw, without the zlib header
                self._started = True
                self._add(self._z.decompress(data, self.limit - self.size + 1))
                data = self._z.unconsumed_tail
        except zlib.error as exc:
            raise _Failure(f"corrupt compressed body: {exc}", retryable=True) from exc

    def body(self) -> bytes:
        return b"".join(self.parts)


async def _read_body(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The (decompressed) body, at most ``limit`` bytes, else a non-retryable ``_Failure``."""
    declared = resp.content_length
    encoding = resp.headers.get("Content-Encoding", "")
    if declared is not None and declared > limit and encoding.strip().lower() in ("", "identity"):
        raise _Failure(f"response body over {limit} bytes (max_response_bytes)", retryable=False)
    body = _BoundedBody(encoding, limit)
    async for chunk in resp.content.iter_chunked(1 << 16):
        body.feed(chunk)
    return body.body()


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
        timeout_s: float = DEFAULT_TIMEOUT_S,
        deadline_s: float | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
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
        # a fleet: several servers of one model ("URL,URL,..."), requests spread by in-flight count
        urls = [u.strip() for u in base_url.split(",")]
        if len(urls) > _MAX_FLEET:
            raise LeaderEvalError(f"openai backend: at most {_MAX_FLEET} base URLs, got {len(urls)}")
        all_parts = []
        for i, u in enumerate(urls):
            parts = urlsplit(u)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                if len(urls) == 1:
                    raise LeaderEvalError(f"openai backend: not an http(s) URL: {strip_credentials(u)!r}")
                # never quote a fleet's piece: a comma inside a password would put part of it here
                raise LeaderEvalError(
                    f"openai backend: base URL {i + 1} of {len(urls)} is not an http(s) URL "
                    "(URLs are comma-separated; write a comma inside a URL as %2C)"
                )
            if "?" in u:
                # every request goes to base URL + "/completions": a query string would be dropped
                # silently (and may carry a key, so it is not echoed)
                which = "the base URL" if len(urls) == 1 else f"base URL {i + 1} of {len(urls)}"
                raise LeaderEvalError(
                    f"openai backend: {which} has a query string (?...), which requests would not carry: "
                    "give the server's base URL without one (e.g. http://host:8080/v1)"
                )
            all_parts.append(parts)
        self.base_urls = [strip_credentials(u) for u in urls]
        if len(set(self.base_urls)) != len(self.base_urls):
            raise LeaderEvalError("openai backend: a base URL appears twice in the fleet")
        self.base_url = self.base_urls[0]
        parts = all_parts[0]
        self.model = model
        self.mode: Mode = mode
        self.api_key_env = api_key_env
        self.max_concurrency = max(1, int(max_concurrency))
        self.timeout_s = _positive("timeout_s", timeout_s)
        self.deadline_s = _positive("deadline_s", deadline_s) if deadline_s is not None else 3 * self.timeout_s
        self.max_response_bytes = int(_positive("max_response_bytes", max_response_bytes))
        self.max_retries = max(0, int(max_retries))
        self.retry_base_s = float(retry_base_s)
        self.retry_max_s = float(retry_max_s)
        self._retry = RetryPolicy(self.max_retries, self.retry_base_s, self.retry_max_s)
        self.logprobs = logprobs
        self.extra_body = dict(extra_body or {})
        if tool_choice is not None:
            self.extra_body["tool_choice"] = _tool_choice(tool_choice)
        self.extra_headers = dict(extra_headers or {})
        # credentials in the URL become Basic auth; they never reach model_id or logs
        # userinfo is percent-encoded in a URL (RFC 3986): "%2C" is a comma of the password
        self._auths = [
            (unquote(q.username or ""), unquote(q.password or "")) if q.username else None for q in all_parts
        ]
        self._basic_auth = self._auths[0]
        secrets.register_env(api_key_env)
        for q in all_parts:
            if q.password:
                secrets.register(q.password)  # the encoded form as written, too
        for auth in self._auths:
            if auth is not None:
                secrets.register(auth[1])
                secrets.register(f"{auth[0]}:{auth[1]}")
                secrets.register(_basic_token(*auth))  # the header's token is itself a secret
        for name, value in self.extra_headers.items():
            secrets.register_header(name, value)
        # one server: its URL names where the model is; a fleet: the model, whichever servers serve it
        self.model_id = f"openai:{self.base_url}/{model}" if len(urls) == 1 else f"openai:fleet/{model}"
        #: a server can swap the weights behind a model name: never cached across runs unless the
        #: user names an identity (``--cache-id``, set by ``resolve_backend``)
        self.cache_identity: str | None = None
        self._url = self.base_url + ("/chat/completions" if mode == "chat" else "/completions")
        self._urls = [u + ("/chat/completions" if mode == "chat" else "/completions") for u in self.base_urls]
        self._inflight = [0] * len(urls)
        #: successful responses per server of the fleet (in ``base_urls`` order)
        self.served = [0] * len(urls)
        self._down_until = [0.0] * len(urls)  # monotonic time before which a failed server is avoided
        self._turn = 0

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
            raise OptionError(
                "openai backend in completions mode needs the model's chat template: give --chat-template FILE "
                "(a jinja2 template) or --template-gguf PATH (read from the GGUF), or --api-mode chat",
                "chat_template",
                "template_gguf",
                "api_mode",
            )

        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: asyncio.Semaphore | None = None
        self._probed: asyncio.Task[dict[str, Any]] | None = None
        self._rng = random.Random()

    # --- construction helpers -----------------------------------------------------------------

    def _read_gguf(self, path: str | os.PathLike[str]) -> None:
        try:
            import llama_cpp
        except ImportError as exc:
            raise LeaderEvalError("openai backend: reading a GGUF's chat template needs llama-cpp-python") from exc
        from leader_eval.sampling.backends.local import route_llama_logs

        route_llama_logs(llama_cpp)
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
            "cache_identity": self.cache_identity,
            "base_url": self.base_url,
            **({"base_urls": list(self.base_urls)} if len(self.base_urls) > 1 else {}),
            "model": self.model,
            "mode": self.mode,
            "api_key_env": self.api_key_env,  # the variable's name, never its value
            "chat_template": self._template_source,
            "chat_template_sha256": template_sha,
            "gguf": self._gguf_name,
            "context_length": self.context_length,
            "max_concurrency": self.max_concurrency,
            "timeout_s": self.timeout_s,
            "deadline_s": self.deadline_s,
            "max_response_bytes": self.max_response_bytes,
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
            async with (
                asyncio.timeout(min(self.timeout_s, 10.0)),
                self._session.get(self.base_url + "/models", headers=self._headers(), allow_redirects=False) as resp,
            ):
                if resp.status == 200:
                    data = _loads(await _read_body(resp, self.max_response_bytes)).get("data") or []
                    models = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
                    entry = next(
                        (m for m in models if m.get("id") == self.model), models[0] if len(models) == 1 else {}
                    )
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
            if isinstance(n, int) and not isinstance(n, bool) and 0 < n < _MAX_COUNT:
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
        # bodies are inflated here, in bounded steps (_BoundedBody), never by aiohttp in one go
        self._session = aiohttp.ClientSession(connector=connector, raise_for_status=False, auto_decompress=False)
        self._loop = loop
        # the semaphore (not the connector's queue) bounds requests, so the per-request timeout
        # starts when a request is sent, not while it waits for a free connection
        self._sem = asyncio.Semaphore(self.max_concurrency)
        self._probed = None

    def _headers(self, server: int = 0) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate", **self.extra_headers}
        auth = self._auths[server]
        if auth is not None:
            user, password = auth
            headers["Authorization"] = "Basic " + _basic_token(user, password)
        else:
            key = os.environ.get(self.api_key_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
        return headers

    @staticmethod
    def _scrub(text: str) -> str:
        """Remove every secret the run holds from a message, in case a server echoed one."""
        return secrets.scrub(text)

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
        if request.constraint is not None:  # a judge's verdict: the server decodes to the schema
            c = request.constraint
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": c.name, "schema": c.json_schema, "strict": True},
            }
            if self.mode != "chat":  # llama.cpp's servers read a GBNF grammar on /completions
                body["grammar"] = c.gbnf
        return body

    async def _sample_seed(self, base: dict[str, Any], seed: int) -> Completion:
        body = dict(base)
        body["seed"] = seed
        payload = _dumps(body)
        t0 = time.perf_counter()
        end = time.monotonic() + self.deadline_s
        avoid: set[int] = set()

        async def attempt(retries: int) -> Completion:
            limit = min(self.timeout_s, max(0.001, end - time.monotonic()))
            # avoid is empty except on a fleet's retry (the plain call stays the same)
            data = await (self._post(payload, limit, avoid) if avoid else self._post(payload, limit))
            try:
                out = self._completion(data)
            except _Shape as exc:
                raise _Failure(f"malformed response: {exc}", retryable=False) from exc
            out.timings = {"retries": retries, "total_s": round(time.perf_counter() - t0, 4)}
            return out

        def next_delay(fail: AttemptError, delay: float) -> float:
            nonlocal avoid
            if isinstance(fail, _Failure) and fail.retryable and fail.server is not None and len(self._urls) > 1:
                # a fleet: the next attempt goes to another server, at once if one is up
                avoid = {fail.server} if len(avoid | {fail.server}) >= len(self._urls) else avoid | {fail.server}
                if self._healthy(avoid):
                    return 0.0
            return delay

        got = await retrying(
            attempt, self.should_retry, self._retry, self._rng, deadline=end, deadline_s=self.deadline_s,
            next_delay=next_delay, logger=log, label=f"openai backend: seed {seed}",
        )  # fmt: skip
        if not isinstance(got, GaveUp):
            return got
        # the server's text reaches stderr: no escape sequence (leader_eval.inert)
        log.warning("openai backend: seed %d failed: %s%s", seed, inert(got.message), got.suffix)
        return Completion(
            text="",
            token_ids=[],
            stop_reason=None,
            error=got.error,
            timings={"retries": got.retries, "total_s": round(time.perf_counter() - t0, 4)},
        )

    @staticmethod
    def should_retry(exc: Exception) -> AttemptError | None:
        """A failed attempt as ``_post`` judged it (by status, transport error or body); any other
        exception is not a failed attempt and propagates (the guard makes it the sample's error)."""
        return exc if isinstance(exc, _Failure) else None

    def _healthy(self, avoid: set[int]) -> list[int]:
        now = time.monotonic()
        return [i for i in range(len(self._urls)) if i not in avoid and self._down_until[i] <= now]

    def _pick(self, avoid: set[int]) -> int:
        """The server with the fewest requests in flight, among those not avoided and not down
        (else among those not avoided, else any); ties go round-robin."""
        pool = (
            self._healthy(avoid)
            or [i for i in range(len(self._urls)) if i not in avoid]
            or list(range(len(self._urls)))
        )
        self._turn += 1
        n = len(self._urls)
        return min(pool, key=lambda i: (self._inflight[i], (i - self._turn) % n))

    async def _post(self, payload: bytes, limit_s: float, avoid: set[int] | None = None) -> dict[str, Any]:
        assert self._session is not None and self._sem is not None
        async with self._sem:
            # chosen once the semaphore lets the request go, so in-flight counts are real requests
            server = self._pick(avoid or set())
            self._inflight[server] += 1
            try:
                data = await self._post_to(server, payload, limit_s)
                self.served[server] += 1
                return data
            except _Failure as fail:
                fail.server = server
                if fail.retryable and len(self._urls) > 1:
                    self._down_until[server] = time.monotonic() + _FLEET_COOLDOWN_S
                raise
            finally:
                self._inflight[server] -= 1

    async def _post_to(self, server: int, payload: bytes, limit_s: float) -> dict[str, Any]:
        assert self._session is not None
        try:
            # one deadline covers connect, headers and the whole body, so a trickle cannot outlast it
            async with (
                asyncio.timeout(limit_s),
                # never follow a redirect: it would carry the Authorization header to another origin
                self._session.post(
                    self._urls[server],
                    data=payload,
                    headers=self._headers(server),
                    timeout=_timeout(limit_s),
                    allow_redirects=False,
                ) as resp,
            ):
                status = resp.status
                raw = await _read_body(resp, self.max_response_bytes)
                retry_after = resp.headers.get("Retry-After") if status != 200 else None
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise _Failure(f"timeout after {limit_s:.3g} s", retryable=True) from exc
        except aiohttp.ClientError as exc:
            # str(ClientResponseError) may quote request info: keep only the type and a safe text
            raise _Failure(f"connection error: {type(exc).__name__}: {_safe_exc_text(exc)}", retryable=True) from exc
        if status != 200:
            text = _error_text(raw)
            retryable = status >= 500 or status in _RETRY_STATUS
            raise _Failure(f"HTTP {status}: {text}", retryable=retryable, retry_after=parse_retry_after(retry_after))
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Failure(f"the response body is not valid UTF-8 (byte {exc.start})", retryable=True) from exc
        try:
            data = _loads(raw)
        except (ValueError, RecursionError) as exc:
            reason = " ".join(str(exc).split())[:120]
            raise _Failure(f"invalid JSON body ({len(raw)} bytes): {reason}", retryable=True) from exc
        if not isinstance(data, dict):
            raise _Failure(f"malformed response: the body is {_kind(data)}, not an object", retryable=False)
        if data.get("choices") is None or data.get("choices") == []:
            detail = _error_text(raw)
            raise _Failure(f"response without choices: {detail}", retryable=True)
        return data

    def _completion(self, data: dict[str, Any]) -> Completion:
        """The reply as a ``Completion``; ``_Shape`` names the first field of the wrong type."""
        choices = data["choices"]
        if not isinstance(choices, list):
            raise _Shape(f"choices is {_kind(choices)}, not a list")
        choice = choices[0]
        if not isinstance(choice, dict):
            raise _Shape(f"choices[0] is {_kind(choice)}, not an object")
        usage = data.get("usage")
        if usage is None:
            usage = {}
        elif not isinstance(usage, dict):
            raise _Shape(f"usage is {_kind(usage)}, not an object")
        logprobs: list[float] | None = None
        lp = choice.get("logprobs")
        if self.mode == "chat":
            message = choice.get("message")
            if message is None:
                message = {}
            elif not isinstance(message, dict):
                raise _Shape(f"choices[0].message is {_kind(message)}, not an object")
            text = _content_text(message.get("content"), "choices[0].message.content")
            tool_calls = _tool_calls(message.get("tool_calls"))
            reasoning_value = message.get("reasoning_content")
            if reasoning_value is None:
                reasoning_value = message.get("reasoning")
            reasoning = _content_text(reasoning_value, "choices[0].message.reasoning_content") or None
            if self.logprobs and isinstance(lp, dict) and lp.get("content"):
                entries = lp["content"]
                if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                    raise _Shape("choices[0].logprobs.content is not a list of objects")
                logprobs = [_number(e.get("logprob", 0.0), "logprobs.content[].logprob") for e in entries]
        else:
            text = _content_text(choice.get("text"), "choices[0].text")
            tool_calls = None
            reasoning = None
            if self.logprobs and isinstance(lp, dict) and lp.get("token_logprobs") is not None:
                entries = lp["token_logprobs"]
                if not isinstance(entries, list):
                    raise _Shape("choices[0].logprobs.token_logprobs is not a list")
                logprobs = [_number(x, "logprobs.token_logprobs[]") if x is not None else 0.0 for x in entries]
        finish = choice.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise _Shape(f"choices[0].finish_reason is {_kind(finish)}, not a string")
        return Completion(
            text=text,
            token_ids=[],  # servers return text, not ids; re-tokenizing would not be exact
            stop_reason=_STOP_REASONS.get(finish, "stop"),
            logprobs=logprobs,
            api_tool_calls=tool_calls,
            reasoning=reasoning,
            prompt_tokens=_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
            completion_tokens=_count(usage.get("completion_tokens"), "usage.completion_tokens"),
        )


def _basic_token(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def _kind(value: Any) -> str:
    """The JSON type of a parsed value, with its article: "a string", "an object", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(type(value), f"a {type(value).__name__}")


def _content_text(value: Any, where: str) -> str:
    """A content field: a string, null, or a list of ``{"type": "text", "text": ...}`` parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in value):
        return "".join(str(p.get("text", "")) for p in value)
    raise _Shape(f"{where} is {_kind(value)}, not a string")


def _tool_calls(value: Any) -> list[dict[str, Any]] | None:
    """OpenAI tool calls, each ``{"function": {"name": str, "arguments": str}}`` (an object argument
    is kept as its JSON text, as some servers send it)."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise _Shape(f"message.tool_calls is {_kind(value)}, not a list")
    out = []
    for i, call in enumerate(value):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            raise _Shape(f"message.tool_calls[{i}] has no function object")
        name, args = fn.get("name"), fn.get("arguments")
        if not isinstance(name, str):
            raise _Shape(f"message.tool_calls[{i}].function.name is {_kind(name)}, not a string")
        if isinstance(args, dict):
            args = json.dumps(args, ensure_ascii=False)
        elif args is None:
            args = ""
        elif not isinstance(args, str):
            raise _Shape(f"message.tool_calls[{i}].function.arguments is {_kind(args)}, not a string")
        out.append({**call, "function": {**fn, "name": name, "arguments": args}})
    return out


def _count(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < _MAX_COUNT:
        shown = f"{value:.6g}" if isinstance(value, int | float) else _kind(value)
        raise _Shape(f"{where} is {shown}, not a token count")
    return value


def _number(value: Any, where: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value != value or abs(value) == float("inf"):
        raise _Shape(f"{where} {str(value)[:30]} is not a finite number")
    return float(value)


def _positive(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not (number > 0 and number != float("inf")):
        raise LeaderEvalError(f"openai backend: {name} must be a positive number, not {value!r}")
    return number


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
        "context_length", "max_concurrency", "timeout_s", "deadline_s", "max_response_bytes", "max_retries",
        "retry_base_s", "retry_max_s",
        "logprobs", "tool_choice", "extra_body", "extra_headers",
    }  # fmt: skip
    kwargs = {k: v for k, v in options.items() if k in known and v is not None}
    return OpenAICompatBackend(url, model, **kwargs)
