#!/usr/bin/env bash
# Create .venv and install leader-eval with the embedded model. `--dev` adds the test tools.
#
# llama-cpp-python compiles from source (about 5-11 minutes on 2 cores). The flags pin a portable
# AVX2 build: the default -march=native build enables Intel AMX kernels, which crashed (SIGSEGV in
# ggml_backend_amx_mul_mat) on virtual machines that report AMX; LLAVA is off because nothing here
# uses the multimodal targets. --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS, so a cached
# native build would otherwise be reused.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LLAMA_CPP_VERSION=${LLAMA_CPP_VERSION:-0.3.36}
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF}"

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  if [ -n "${LLAMA_CPP_WHEEL:-}" ]; then
    .venv/bin/pip install -q "$LLAMA_CPP_WHEEL"
  else
    echo "building llama-cpp-python $LLAMA_CPP_VERSION from source (several minutes)..." >&2
    .venv/bin/pip install -q --no-cache-dir "llama-cpp-python==$LLAMA_CPP_VERSION"
  fi
fi
if [ "${1:-}" = "--dev" ]; then
  # playwright (the report's browser test) drives the system's chromium; it never fetches one
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 .venv/bin/pip install -q -e ".[dev,server,mistral,data]"
  # BFCL's data and AST checker, lean: its full install pulls 6 GB of CUDA torch we do not use
  .venv/bin/pip install -q --no-deps bfcl-eval==2026.3.23
  .venv/bin/pip install -q filelock tenacity tree_sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4
else
  .venv/bin/pip install -q -e .
fi
