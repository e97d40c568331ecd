"""Seeds and content keys: what addresses one sample, derived, never drawn in sampling order.

A sample's seed is a hash of (run seed, case id, sample index), and an episode step's of the
same plus the step number, so a run's samples are the same whatever the order, parallelism,
sharding (``runs.merge``) or resumption. A sample's content key hashes the weights' identity,
the exact prompt, the sampling parameters and the seed: the sample cache's address.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from functools import lru_cache
from typing import Any

from leader_eval.sampling.backends.base import Backend, SamplingParams, weights_identity
from leader_eval.store.names import model_key
from leader_eval.types import Prompt


def derive_seed(run_seed: int, case_id: str, index: int) -> int:
    """Per-sample seed from (run seed, case id, sample index): independent of order and parallelism."""
    h = hashlib.blake2b(f"{run_seed}\0{case_id}\0{index}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") & 0x7FFFFFFF


def step_seed(run_seed: int, case_id: str, index: int, step: int) -> int:
    """Per-step seed from (run seed, case id, sample index, step): independent of order and resumption."""
    h = hashlib.blake2b(f"{run_seed}\0{case_id}\0{index}\0step{step}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") & 0x7FFFFFFF


def turn_seed(run_seed: int, case_id: str, index: int, step: int) -> int:
    """The seed of the simulated teammate's reply to step ``step`` (never a step's seed)."""
    h = hashlib.blake2b(f"{run_seed}\0{case_id}\0{index}\0turn{step}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") & 0x7FFFFFFF


def new_run_seed() -> int:
    return secrets.randbits(31)


def sample_key(model_id: str, prompt: Prompt, params: SamplingParams, seed: int) -> str:
    """Content address of one sample: backend + checkpoint + exact prompt + params + seed."""
    return seed_key(key_prefix(model_id, prompt, params), seed)


def key_prefix(model_id: str, prompt: Prompt, params: SamplingParams) -> Any:
    """The hash state of everything in a sample's key but its seed (hashed once per case, not per sample)."""
    h = hashlib.sha256()
    h.update(model_id.encode())
    h.update(b"\0")
    if prompt.token_ids is not None:
        h.update(b"ids:" + ",".join(map(str, prompt.token_ids)).encode())
    else:
        h.update(b"text:" + prompt.text.encode())
    h.update(_params_bytes(params))
    return h


def _params_bytes(params: SamplingParams) -> bytes:
    # each field's type and repr key the memo: 1 == 1.0 == True and -0.0 == 0.0, but json writes
    # each apart (a float as its repr)
    fields = tuple((type(v), repr(v)) for v in (params.temperature, params.max_tokens, params.top_p))
    try:
        return _params_json(fields, tuple((type(s), s) for s in params.stop), params)
    except TypeError:  # a field that cannot be a memo's key (a list for stop): encoded each time
        return _params_json.__wrapped__(fields, (), params)


@lru_cache(maxsize=64)
def _params_json(_fields: tuple[Any, ...], _stop: tuple[Any, ...], params: SamplingParams) -> bytes:
    """The sampling parameters' part of a key; cases share a few settings, so each is encoded once
    (~3 us of a run's ~3.7 us per case)."""
    return b"\0" + json.dumps(params.to_dict(), sort_keys=True).encode()


def seed_key(prefix: Any, seed: int) -> str:
    """The content key of the sample with ``seed`` under ``key_prefix``'s hash state."""
    h = prefix.copy()
    h.update(f"\0{seed}".encode())
    return str(h.hexdigest()[:32])


def backend_model_key(backend: Backend) -> str:
    """``store.names.model_key`` of a resolved backend (the weights' identity is the sample cache's)."""
    return model_key(backend.model_id, weights_identity(backend))
