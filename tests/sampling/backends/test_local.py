"""The embedded model's prefix reuse and context extension (real SmolLM2 weights, small prompts).

A stress sweep relies on two promises of the local backend: a prompt that shares a prefix with
the previous one is not prefilled again from the start, and what it samples is still exactly
what a fresh prefill would sample (a seed reproduces in any order). YaRN extension is a
different model, so it must never share an identity or cached samples with the plain one.

llama.cpp's own log lines stay out of the user's output unless ``LEADER_EVAL_LIBRARY_LOGS=1``
(``leader-eval --library-logs``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.sampling.backends.base import SampleRequest, SamplingParams
from leader_eval.sampling.backends.local import LocalBackend, embedded_model_path

pytestmark = pytest.mark.model


def _prompt(backend: LocalBackend, lines: int):  # a system anchor, then nested chat lines
    log = "\n".join(f"[{k // 60:02d}:{k % 60:02d}] Ada: line {k} about the weather and the tide" for k in range(lines))
    messages = [
        {"role": "system", "content": "You read a chat log and answer in one word."},
        {"role": "user", "content": f"{log}\nWho spoke last?"},
    ]
    return backend.apply_chat_template(messages, None)


def _sample(backend: LocalBackend, prompt, seed: int = 11):
    params = SamplingParams(temperature=1.0, max_tokens=8)
    (c,) = asyncio.run(backend.sample(SampleRequest(prompt=prompt, params=params, seeds=[seed])))
    return c


def test_a_shared_prefix_is_reused_and_samples_as_a_fresh_prefill() -> None:
    backend = LocalBackend(embedded_model_path(), "local:smollm2", n_ctx=1024, n_threads=1, n_batch=16)
    short, long = _prompt(backend, 5), _prompt(backend, 12)
    anchor = len(backend.anchor_tokens(short))
    assert anchor and long.token_ids[: len(short.token_ids) - 12] == short.token_ids[: len(short.token_ids) - 12]

    fresh = _sample(backend, short)  # the cache holds nothing of it: the whole prompt is evaluated
    assert fresh.timings["prefill_tokens"] == len(short.token_ids) - 1
    first = _sample(backend, long)
    assert 0 < first.timings["prefill_tokens"] < len(long.token_ids) - 1 - 48  # the short one's batches kept
    again = _sample(backend, short)  # after the long prompt: its prefix again, then the short tail
    assert 0 < again.timings["prefill_tokens"] < len(short.token_ids) - anchor
    assert again.token_ids == fresh.token_ids  # the same decode calls: the same sample
    backend._close_blocking()  # a fresh llama.cpp context, as a new process has
    assert _sample(backend, long).token_ids == first.token_ids
    backend._close_blocking()


def test_yarn_extension_is_its_own_model() -> None:
    plain = LocalBackend(embedded_model_path(), "local:smollm2")
    yarn = LocalBackend(embedded_model_path(), "local:smollm2", n_ctx=16384, rope_scaling="yarn")
    assert plain.n_ctx_train == 8192 and yarn.context_length == 16384
    assert yarn.rope == {"type": "yarn", "orig_ctx": 8192, "n_ctx": 16384, "freq_scale": 0.5}
    assert yarn.model_id == "local:smollm2+yarn16384" and plain.model_id == "local:smollm2"
    assert yarn.cache_identity != plain.cache_identity and yarn.cache_identity.startswith(plain.cache_identity)
    assert yarn.describe()["rope_scaling"]["n_ctx"] == 16384
    # it runs: a short prompt through the extended model
    assert _sample(yarn, _prompt(yarn, 3)).completion_tokens >= 1
    yarn._close_blocking()
    with pytest.raises(LeaderEvalError, match=r"needs --context-length above the model's training context \(8,192\)"):
        LocalBackend(embedded_model_path(), "local:smollm2", rope_scaling="yarn")


ROOT = Path(__file__).resolve().parents[3]

#: what ``lint --model`` and the openai backend's ``--template-gguf`` do: a vocab-only load, on
#: which llama.cpp warns ``n_ctx_seq (256) > n_ctx_train (0)``
VOCAB_ONLY = """
from leader_eval.sampling.backends.local import _import_llama, embedded_model_path
llama_cpp = _import_llama()
llama_cpp.Llama(model_path=str(embedded_model_path()), n_ctx=256, vocab_only=True, verbose=False)
print("loaded")
"""


def _stderr(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "LEADER_EVAL_LIBRARY_LOGS"}
    environ.update(PYTHONPATH=os.pathsep.join([str(ROOT), environ.get("PYTHONPATH", "")]), **env)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_llama_cpp_log_lines_are_kept_out_unless_asked_for() -> None:
    pytest.importorskip("llama_cpp")
    assert "n_ctx_seq" not in _stderr(VOCAB_ONLY)
    assert "n_ctx_seq (256) > n_ctx_train (0)" in _stderr(VOCAB_ONLY, LEADER_EVAL_LIBRARY_LOGS="1")
