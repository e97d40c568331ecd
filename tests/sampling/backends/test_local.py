"""The embedded llama.cpp backend's output hygiene: llama.cpp's own log lines stay out of the
user's output unless ``LEADER_EVAL_LIBRARY_LOGS=1`` (``leader-eval --library-logs``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.model
def test_llama_cpp_log_lines_are_kept_out_unless_asked_for() -> None:
    pytest.importorskip("llama_cpp")
    assert "n_ctx_seq" not in _stderr(VOCAB_ONLY)
    assert "n_ctx_seq (256) > n_ctx_train (0)" in _stderr(VOCAB_ONLY, LEADER_EVAL_LIBRARY_LOGS="1")
