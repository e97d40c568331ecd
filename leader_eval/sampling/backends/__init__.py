"""Backend registry. Optional SDKs are imported inside each factory, so a missing extra never
breaks ``import leader_eval`` (inspect_ai's lazy provider registration)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.sampling.backends.base import Backend, Completion, SampleRequest, SamplingParams, guard

__all__ = ["Backend", "Completion", "SampleRequest", "SamplingParams", "guard", "resolve_backend"]


def resolve_backend(spec: str, **options: Any) -> Backend:
    """Build the backend a model spec names, behind the boundary guard (``backends.base.guard``).

    ``local:smollm2`` | ``gguf:/path/model.gguf`` | ``replay:RUN_DIR`` |
    ``openai:http://host:port/v1#model`` (or ``model=`` option) | ``tinker://...``
    """
    cache_id = options.pop("cache_id", None)
    backend = guard(_build_backend(spec, **options))
    if cache_id:
        # the user vouches that this name always means the same weights
        backend.cache_identity = f"{backend.model_id}#cache-id={cache_id}"  # type: ignore[attr-defined]
    return backend


def _build_backend(spec: str, **options: Any) -> Backend:
    if spec.startswith("local:"):
        from leader_eval.sampling.backends.local import LocalBackend, embedded_model_path

        name = spec.split(":", 1)[1]
        return LocalBackend(
            embedded_model_path(name),
            spec,
            n_ctx=options.get("context_length"),
            rope_scaling=options.get("rope_scaling"),
        )
    if spec.startswith("gguf:"):
        from leader_eval.sampling.backends.local import LocalBackend

        path = Path(spec.split(":", 1)[1]).expanduser()
        if not path.is_file():
            raise LeaderEvalError(f"--model {spec}: no such GGUF file")
        _check_gguf_magic(spec, path)
        # the model id names the file, not the machine-specific directory it sits in
        return LocalBackend(
            path, f"gguf:{path.name}", n_ctx=options.get("context_length"), rope_scaling=options.get("rope_scaling")
        )
    if spec.startswith("replay:"):
        from leader_eval.sampling.backends.replay import ReplayBackend

        return ReplayBackend(Path(spec.split(":", 1)[1]))
    if spec.startswith("openai:"):
        try:
            from leader_eval.sampling.backends.openai_compat import backend_from_spec
        except ImportError as exc:
            raise LeaderEvalError(f"--model {spec}: the OpenAI-compatible backend is unavailable: {exc}") from exc
        backend: Backend = backend_from_spec(spec, **options)
        return backend
    if spec.startswith("tinker://") or spec.startswith("tinker:"):
        try:
            from leader_eval.sampling.backends.tinker import backend_from_spec as tinker_from_spec
        except ImportError as exc:
            raise LeaderEvalError(f"--model {spec}: the Tinker backend is unavailable: {exc}") from exc
        tinker_backend: Backend = tinker_from_spec(spec, **options)
        return tinker_backend
    raise LeaderEvalError(
        f"--model {spec!r}: unknown model spec (use local:smollm2, gguf:PATH, replay:RUN_DIR, openai:URL#MODEL, tinker://...)"
    )


def _check_gguf_magic(spec: str, path: Path) -> None:
    """A file that does not start with the GGUF magic is refused before llama.cpp parses it."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise LeaderEvalError(f"--model {spec}: cannot read: {exc.strerror or exc}") from None
    if magic != b"GGUF":
        raise LeaderEvalError(f"--model {spec}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
