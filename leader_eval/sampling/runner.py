"""Sample every (case, index) slot of a run exactly once, recording each sample as it finishes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import secrets
import sys
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, overload

from leader_eval.bounded.limits import MAX_RUN_SAMPLES, MAX_SAMPLES_PER_CASE
from leader_eval.errors import LeaderEvalError, RunDirError, SuiteError
from leader_eval.sampling.backends.base import (
    Backend,
    Completion,
    SampleRequest,
    SamplingParams,
    guard,
    is_context_overflow,
)
from leader_eval.store.cache import SampleCache
from leader_eval.store.formats import RUN_FORMAT_VERSION
from leader_eval.store.run_store import LOCK, MANIFEST, RunDir, check_run_dir, lock_holder, sample_record_key
from leader_eval.suite.load import Case, Suite
from leader_eval.suite.render import RenderedCase, render_case
from leader_eval.types import Sample
from leader_eval.version import __version__

SCORER_VERSION = "1"


class _PathField:
    """A dataclass field that holds ``Path | None`` and takes any path: a ``str`` or an
    ``os.PathLike`` is converted on every assignment, at construction and after it (the pytest
    plugin sets ``options.out`` later), so no code behind it meets a ``str`` where it joins paths."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = "_" + name

    @overload
    def __get__(self, obj: None, owner: type) -> None: ...
    @overload
    def __get__(self, obj: object, owner: type) -> Path | None: ...
    def __get__(self, obj: object | None, owner: type) -> Path | None:
        # on the class (the dataclass machinery asks for the default), the default is None
        return None if obj is None else getattr(obj, self._name, None)

    def __set__(self, obj: object, value: str | os.PathLike[str] | None) -> None:
        if value is not None and not isinstance(value, Path):
            if not isinstance(value, str | os.PathLike):
                raise TypeError(f"RunOptions: {self._name[1:]} must be a path (str or os.PathLike), not {value!r}")
            value = Path(value)
        object.__setattr__(obj, self._name, value)


@dataclass
class RunOptions:
    """What ``leader_eval.run`` samples and where it writes (docs/api.md lists every field)."""

    model: str = "local:smollm2"
    samples: int | None = None
    seed: int | None = None
    tags: Sequence[str] = ()
    case_ids: Sequence[str] = ()
    limit: int | None = None
    out: _PathField = _PathField()  # a str or os.PathLike path; read back as Path | None
    protocol: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    concurrency: int = 64
    context_length: int | None = None
    progress: bool = True
    label: str | None = None
    max_samples: int | None = None  # cap on new backend samples (cost control)
    backend_options: dict[str, Any] = field(default_factory=dict)  # e.g. tokenizer= for tinker://
    cache: bool = True  # the content-addressed sample cache (LEADER_EVAL_CACHE_DIR, default ~/.cache/leader-eval)
    extra_manifest: dict[str, Any] = field(default_factory=dict)


@dataclass
class PlannedCase:
    case: Case
    rendered: RenderedCase
    params: SamplingParams
    n_samples: int
    overflow: bool
    context_length: int | None = None
    suite: Suite | None = None  # an episode case renders each step from its suite


def derive_seed(run_seed: int, case_id: str, index: int) -> int:
    """Per-sample seed from (run seed, case id, sample index): independent of order and parallelism."""
    h = hashlib.blake2b(f"{run_seed}\0{case_id}\0{index}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") & 0x7FFFFFFF


def sample_key(model_id: str, prompt: Any, params: SamplingParams, seed: int) -> str:
    """Content address of one sample: backend + checkpoint + exact prompt + params + seed."""
    return _seed_key(_key_prefix(model_id, prompt, params), seed)


def _key_prefix(model_id: str, prompt: Any, params: SamplingParams) -> Any:
    """The hash state of everything in a sample's key but its seed (hashed once per case, not per sample)."""
    h = hashlib.sha256()
    h.update(model_id.encode())
    h.update(b"\0")
    if prompt.token_ids is not None:
        h.update(b"ids:" + ",".join(map(str, prompt.token_ids)).encode())
    else:
        h.update(b"text:" + prompt.text.encode())
    h.update(b"\0" + json.dumps(params.to_dict(), sort_keys=True).encode())
    return h


def _seed_key(prefix: Any, seed: int) -> str:
    h = prefix.copy()
    h.update(f"\0{seed}".encode())
    return str(h.hexdigest()[:32])


def select_cases(
    suite: Suite, *, tags: Sequence[str] = (), case_ids: Sequence[str] = (), limit: int | None = None
) -> list[Case]:
    cases = list(suite.cases)
    if case_ids:
        known = {c.id for c in cases}
        unknown = [c for c in case_ids if c not in known]
        if unknown:
            raise LeaderEvalError(f"{suite.path}: no case {unknown[0]!r} in suite {suite.name!r}")
        cases = [c for c in cases if c.id in set(case_ids)]
    if tags:
        cases = [c for c in cases if set(tags) & set(c.tags)]
    if limit is not None:
        cases = cases[:limit]
    if not cases:
        raise LeaderEvalError(f"{suite.path}: the selection matches no case")
    return cases


def resolve_protocol(option: str | None, suite: Suite, backend: Backend) -> str:
    """``--protocol`` beats the suite's setting, which beats the backend's default."""
    protocol = option or suite.protocol or backend.default_protocol
    check_protocol(protocol, where=str(suite.path) if not option else "--protocol")
    return protocol


def check_protocol(protocol: str | None, *, where: str) -> None:
    """Refuse a protocol the parser does not know before anything is sampled."""
    from leader_eval.protocols import PROTOCOLS

    if protocol is not None and protocol not in PROTOCOLS:
        raise LeaderEvalError(f"{where}: unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def check_run_options(options: RunOptions) -> None:
    """Refuse option values that would silently change the measurement (the library twin of the
    CLI's ``argtypes``): counts are integers in range, the temperature a finite number >= 0."""
    counts = {
        "samples": (options.samples, 1),
        "limit": (options.limit, 1),
        "max_tokens": (options.max_tokens, 1),
        "context_length": (options.context_length, 1),
        "concurrency": (options.concurrency, 1),
        "max_samples": (options.max_samples, 0),
    }
    for name, (value, low) in counts.items():
        if value is not None and not (_is_int(value) and value >= low):
            raise LeaderEvalError(f"run option {name}={value!r}: must be an integer >= {low}")
    if options.samples is not None and options.samples > MAX_SAMPLES_PER_CASE:
        raise LeaderEvalError(
            f"run option samples={options.samples}: at most {MAX_SAMPLES_PER_CASE:,} samples per case "
            "(docs/security.md)"
        )
    t = options.temperature
    if t is not None and not (_is_num(t) and t >= 0):
        raise LeaderEvalError(f"run option temperature={t!r}: must be a finite number >= 0")
    if options.seed is not None and not _is_int(options.seed):
        raise LeaderEvalError(f"run option seed={options.seed!r}: must be an integer")
    if options.label is not None:
        from leader_eval.runs.argtypes import name_component

        try:
            name_component(options.label)
        except argparse.ArgumentTypeError as exc:
            raise LeaderEvalError(f"run option label: {exc}") from None
    check_protocol(options.protocol, where="run option protocol")
    if options.label is not None:
        from leader_eval.runs.argtypes import name_component

        try:
            name_component(options.label)
        except argparse.ArgumentTypeError as err:
            raise LeaderEvalError(f"run option label: {err}") from None


def check_run_size(suite: Suite, cases: Sequence[Case], options: RunOptions) -> None:
    """Refuse a run that plans more than ``MAX_RUN_SAMPLES`` samples (cases x samples per case)
    before anything is rendered, loaded or allocated: one line naming the cap and the way out."""
    total = 0
    for case in cases:
        n = options.samples if options.samples is not None else suite.case_sampling(case).get("samples", 1)
        total += n if _is_int(n) and n > 0 else 1  # a bad count is _check_sampling's to report
    if total > MAX_RUN_SAMPLES:
        raise LeaderEvalError(
            f"{suite.path}: the run plans {total:,} samples ({len(cases)} cases); at most {MAX_RUN_SAMPLES:,} "
            "per run (docs/security.md): lower --samples, select cases (--tags, --case, --limit) or split the "
            "run with --shard"
        )


def _check_sampling(suite: Suite, case: Case, params: SamplingParams, n: int) -> None:
    """The sampling a case ends up with (suite, case and options merged), checked before any sample."""
    problem = None
    if not (_is_num(params.temperature) and params.temperature >= 0):
        problem = f"temperature {params.temperature!r} is not a finite number >= 0"
    elif not (_is_num(params.top_p) and 0 < params.top_p <= 1):
        problem = f"top_p {params.top_p!r} does not lie in (0, 1]"
    elif not (_is_int(params.max_tokens) and params.max_tokens >= 1):
        problem = f"max_tokens {params.max_tokens!r} is not an integer >= 1"
    elif not (_is_int(n) and n >= 1):
        problem = f"samples {n!r} is not an integer >= 1"
    if problem:
        raise SuiteError(suite.path, case.line, f"case {case.id!r}: sampling {problem}")


def plan_cases(suite: Suite, cases: Sequence[Case], backend: Backend, options: RunOptions) -> list[PlannedCase]:
    """Render every case before anything is sampled: a bad case stops the run with nothing spent."""
    context_length = options.context_length or suite.context_length or backend.context_length
    planned = []
    for case in cases:
        rendered = render_case(suite, case, backend)
        s = suite.case_sampling(case)
        try:
            params = SamplingParams(
                temperature=float(options.temperature if options.temperature is not None else s["temperature"]),
                max_tokens=int(options.max_tokens if options.max_tokens is not None else s["max_tokens"]),
                top_p=float(s["top_p"]),
                stop=tuple(s.get("stop") or ()),
            )
            n = int(options.samples if options.samples is not None else s["samples"])
        except (TypeError, ValueError, OverflowError) as exc:
            raise SuiteError(suite.path, case.line, f"case {case.id!r}: sampling: {exc}") from None
        _check_sampling(suite, case, params, n)
        n_prompt = rendered.prompt.n_tokens
        overflow = bool(context_length and n_prompt is not None and n_prompt + params.max_tokens > context_length)
        planned.append(PlannedCase(case, rendered, params, n, overflow, context_length, suite))
    # Neighbouring prompts that share a prefix let a local backend reuse its KV cache.
    planned.sort(key=_prefix_order)
    return planned


def apply_recorded(
    planned: Sequence[PlannedCase],
    recorded: dict[str, Any],
    options: RunOptions,
    run_seed: int,
    has_sample: Callable[[str, int], bool],
) -> list[PlannedCase]:
    """Plan a replay as the recorded run sampled it, or refuse (one line, nothing written).

    Replay serves what was sampled; it cannot change it. Each case takes the recorded sampling
    parameters and sample count. An override that would change what was sampled (temperature,
    max tokens, a different seed or context length, more samples than recorded) is refused rather
    than written into the manifest as if applied; so is a case, or a sample of a case, that the
    recorded run never finished (``has_sample(case_id, seed)``): select recorded cases with
    ``--case`` or ``--samples``. Fewer samples than recorded is a subset and is allowed.
    """
    where = f"replay:{options.model.split(':', 1)[-1]}" if options.model.startswith("replay:") else "replay"
    ident = recorded.get("identity") or {}
    rec_cases = ident.get("cases") or {}
    if options.seed is not None and options.seed != ident.get("run_seed"):
        raise LeaderEvalError(
            f"{where}: --seed {options.seed} differs from the recorded run seed {ident.get('run_seed')}: "
            "replay cannot re-sample"
        )
    rec_ctx = (recorded.get("model") or {}).get("context_length")
    if options.context_length is not None and options.context_length != rec_ctx:
        raise LeaderEvalError(
            f"{where}: --context-length {options.context_length} differs from the recorded {rec_ctx}: "
            "replay cannot re-sample"
        )
    out = []
    for p in planned:
        spec = rec_cases.get(p.case.id)
        if not isinstance(spec, dict):
            raise LeaderEvalError(f"{where}: case {p.case.id!r} was not in the recorded run; select cases with --case")
        rec = spec.get("params") or {}
        overrides = {"temperature": options.temperature, "max_tokens": options.max_tokens}
        for name, value in overrides.items():
            if value is not None and rec.get(name) != value:
                raise LeaderEvalError(
                    f"{where}: --{name.replace('_', '-')} {value} differs from the recorded {rec.get(name)!r} "
                    f"(case {p.case.id!r}): replay cannot re-sample"
                )
        try:
            params = SamplingParams(
                temperature=float(rec["temperature"]),
                max_tokens=int(rec["max_tokens"]),
                top_p=float(rec.get("top_p", 1.0)),
                stop=tuple(rec.get("stop") or ()),
            )
            n_rec = int(spec["samples"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RunDirError(
                f"{where}: recorded manifest has no usable sampling for case {p.case.id!r}: {exc}"
            ) from None
        n = n_rec if options.samples is None else options.samples
        if n > n_rec:
            raise LeaderEvalError(
                f"{where}: --samples {n} but the recorded run has {n_rec} per case (case {p.case.id!r}): "
                "replay cannot sample more"
            )
        missing = [i for i in range(n) if not has_sample(p.case.id, derive_seed(run_seed, p.case.id, i))]
        if missing:
            raise LeaderEvalError(
                f"{where}: {len(missing)} of {n} samples of case {p.case.id!r} were never recorded (the run was "
                "interrupted?); replay only recorded cases with --case, or finish the recorded run first"
            )
        overflow = bool(p.context_length and p.rendered.prompt.n_tokens is not None
                        and p.rendered.prompt.n_tokens + params.max_tokens > p.context_length)  # fmt: skip
        out.append(dataclasses.replace(p, params=params, n_samples=n, overflow=overflow))
    return out


def _prefix_order(p: PlannedCase) -> tuple[bytes, str]:
    # Big-endian uint32 bytes order exactly as the (non-negative) id lists do, prefixes first, but
    # compare with memcmp: sorting thousands of long prompts that share a scaffold prefix as int
    # lists costs a rich comparison per shared token.
    ids = p.rendered.prompt.token_ids or ()
    try:
        arr = array("I", ids)
    except (OverflowError, TypeError):  # a negative or huge id: fall back to a decimal encoding
        return (b"\xff" + ",".join(map(str, ids)).encode(), p.case.id)
    if sys.byteorder == "little":
        arr.byteswap()
    return (arr.tobytes(), p.case.id)


def _versions() -> dict[str, str]:
    out = {"leader-eval": __version__, "python": sys.version.split()[0]}
    for pkg in ("llama-cpp-python", "jinja2", "jsonschema", "numpy", "tinker", "aiohttp"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def build_manifest(
    suite: Suite, backend: Backend, planned: Sequence[PlannedCase], run_seed: int, protocol: str, options: RunOptions
) -> dict[str, Any]:
    return {
        "identity": {
            "suite": suite.name,
            "suite_hash": suite.content_hash,
            "model_id": backend.model_id,
            "protocol": protocol,
            "run_seed": run_seed,
            "cases": {
                p.case.id: {"samples": p.n_samples, "params": p.params.to_dict()}
                for p in sorted(planned, key=lambda p: p.case.id)
            },
        },
        "run_id": f"{suite.name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{run_seed:08x}",
        "label": options.label or default_label(backend.model_id),
        "suite": {"name": suite.name, "path": str(suite.path), "content_hash": suite.content_hash},
        "model": {
            **backend.describe(),
            "model_id": backend.model_id,
            "default_protocol": backend.default_protocol,
            "context_length": options.context_length or suite.context_length or backend.context_length,
            "special_tokens": list(backend.special_tokens),
        },
        "format_version": RUN_FORMAT_VERSION,
        "scorer_version": SCORER_VERSION,
        "versions": _versions(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "status": "running",
        **options.extra_manifest,
    }


def suite_from_run_dir(suite_path: Path, out: Path) -> str | None:
    """The suite file's path relative to the run directory (``../../suites/x.yaml``): recorded in
    the manifest so that a later ``gate --update-golden`` finds the suite from any working
    directory, without a machine-specific absolute path in the manifest."""
    try:
        return Path(os.path.relpath(Path(suite_path).resolve(), Path(out).resolve())).as_posix()
    except ValueError:  # another drive (Windows): the recorded path and the search still work
        return None


#: how many folders above a run directory a relative suite path is looked up in (runs/<name>: 2)
_SUITE_SEARCH_DEPTH = 6


def recorded_suite_paths(manifest: dict[str, Any], run_dir: Path) -> list[Path]:
    """Where a run's suite file may be, most specific first: as recorded relative to the run
    directory, as recorded relative to the working directory, then that relative path under each
    folder above the run directory (the working directory of the run, for ``runs/<name>``).
    Callers load each in turn and keep the first whose content hash is the run's; only YAML
    files are candidates."""
    recorded = manifest.get("suite")
    rec: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    found: list[Path] = []
    rel = rec.get("from_run_dir")
    if isinstance(rel, str) and rel:
        found.append(Path(run_dir) / rel)
    path = rec.get("path")
    if isinstance(path, str) and path:
        found.append(Path(path))
        if not Path(path).is_absolute():
            found.extend(parent / path for parent in list(Path(run_dir).resolve().parents)[:_SUITE_SEARCH_DEPTH])
    unique = list(dict.fromkeys(found))
    return [p for p in unique if p.suffix in (".yaml", ".yml") and p.is_file()]


def default_label(model_id: str) -> str:
    """A label without machine-specific paths: ``local-smollm2``, ``gguf-model.gguf``."""
    import re

    tail = model_id.split("/")[-1] if "://" in model_id else model_id
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", tail).strip("-.").lower()[:100] or "model"


def model_key(model_id: str, weights: str | None = None) -> str:
    """8 hex digits naming a model in a run directory's name: the SHA-256 of its full model id
    and, when known, its weights' content identity (a GGUF's sha256, a ``--cache-id``). Two
    checkpoints saved under one file name, or two models given one ``--label``, get two names."""
    text = model_id if not weights else f"{model_id}\n{weights}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def backend_model_key(backend: Backend) -> str:
    """``model_key`` of a resolved backend (the weights' identity is the sample cache's)."""
    weights: str | None = getattr(backend, "cache_identity", None)
    return model_key(backend.model_id, weights)


def default_out_dir(
    suite: Suite, label: str, run_seed: int, *, model: str, root: Path = Path("runs"), suffix: str = ""
) -> Path:
    """``<root>/<suite>__<label>__<model8>__seed<S>__<suite8><suffix>`` (docs/design-0.3.md section 6).

    Deterministic for (suite content, label, model identity, seed): the same command resumes its
    run, an edited suite or another model gets a directory of its own. ``model``: ``model_key``."""
    short = suite.content_hash.split(":")[-1][:8]
    return root / f"{suite.name}__{label}__{model}__seed{run_seed}__{short}{suffix}"


@dataclass
class SamplingStats:
    requested: int = 0
    reused: int = 0
    sampled: int = 0
    errors: int = 0
    overflow: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    capped: int = 0  # slots left unsampled by --max-samples
    wall_s: float = 0.0


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.done = 0
        self.enabled = enabled and total > 0
        self.t0 = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def tick(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done < self.total and now - self.last < (0.2 if self.tty else 10.0):
            return
        self.last = now
        el = now - self.t0
        rate = self.done / el if el > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        msg = (
            f"sampling {self.done}/{self.total}  {rate:.2f}/s  ETA {eta:.0f}s"
            if eta != float("inf")
            else f"sampling {self.done}/{self.total}"
        )
        print(("\r" + msg) if self.tty else msg, end="" if self.tty else "\n", file=sys.stderr, flush=True)
        if self.tty and self.done >= self.total:
            print(file=sys.stderr)


def check_out_dir(out: Path, *, check_lock: bool = True) -> None:
    """Refuse an ``--out`` that is not ours to write: a file, or a directory that holds files but
    no manifest (another tool's output, a run's leftovers: adopting them would mix samples)."""
    if out.exists() and not out.is_dir():
        raise RunDirError(f"{out}: --out names a file, not a run directory")
    check_run_dir(out)  # no symlink or special file inside, before anything is read or written
    holder = lock_holder(out / LOCK) if check_lock else None
    if holder is not None:  # asked early, before a model loads; the lock itself is taken later
        raise RunDirError(
            f"run directory {out} is in use by another leader-eval process (pid {holder or 'unknown'}); "
            "wait for it to finish or choose another directory"
        )
    if out.is_dir() and not RunDir(out).manifest_path.exists():
        try:
            foreign = sorted(p.name for p in out.iterdir() if p.name != LOCK)
        except OSError as exc:
            raise RunDirError(f"{out}: cannot read --out directory: {exc.strerror or exc}") from None
        if foreign:
            raise RunDirError(
                f"{out}: --out is a non-empty directory without a {MANIFEST} (holds {foreign[0]!r}"
                f"{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}); choose an empty or new directory"
            )


def open_run_dir(out: Path, manifest: dict[str, Any]) -> RunDir:
    """The run directory for ``manifest``: new, or the same run's to resume (call under its lock)."""
    check_out_dir(out, check_lock=False)
    run = RunDir(out)
    if run.exists():
        old = run.read_manifest()
        if old.get("identity") != manifest["identity"]:
            diff = [k for k in manifest["identity"] if old.get("identity", {}).get(k) != manifest["identity"][k]]
            raise RunDirError(
                f"{out / MANIFEST}:1: run directory belongs to another run ({', '.join(diff)} differ); "
                "choose another --out or delete it"
            )
        # the identity names a GGUF by its file name; two different files of one name must not
        # share a run directory, so the weights' content identity must match too when both know it
        was = old.get("model", {}).get("cache_identity")
        now = manifest.get("model", {}).get("cache_identity")
        if was and now and was != now:
            raise RunDirError(
                f"{out / MANIFEST}:1: run directory belongs to other model weights ({was} vs {now}); "
                "choose another --out or delete it"
            )
        manifest = {**old, "status": "running"}
    run.write_manifest(manifest)
    return run


def completion_to_sample(case_id: str, index: int, seed: int, key: str, c: Completion) -> Sample:
    return Sample(
        case_id=case_id,
        index=index,
        seed=seed,
        key=key,
        outcome=("context_overflow" if is_context_overflow(c.error) else "error") if c.error else "ok",
        text=c.text,
        token_ids=list(c.token_ids),
        stop_reason=c.stop_reason,
        logprobs=c.logprobs,
        api_tool_calls=c.api_tool_calls,
        reasoning=c.reasoning,
        prompt_tokens=c.prompt_tokens,
        completion_tokens=c.completion_tokens,
        error=c.error,
        timings=c.timings,
    )


async def sample_planned(
    run: RunDir,
    backend: Backend,
    planned: Sequence[PlannedCase],
    run_seed: int,
    *,
    concurrency: int = 64,
    progress: bool = True,
    on_sample: Callable[[Sample], None] | None = None,
    cache: SampleCache | None = None,
    max_samples: int | None = None,
) -> SamplingStats:
    """Sample every missing slot; each finished sample is on disk before the next is awaited.

    A slot is served, in order, from the run's own log (resumption), from the content-addressed
    cache, or from the backend. ``max_samples`` caps new backend samples: the run stops cleanly
    before it spends more and its manifest says so; an episode reserves its ``max_steps``.
    """
    stats = SamplingStats()
    backend = guard(backend)  # typed, secret-free completions whoever built the backend
    # what names the weights for the cache (None: a remote server, never cached across runs)
    identity: str | None = getattr(backend, "cache_identity", None)
    if identity is None and cache is not None:
        cache.close()
        cache = None
    budget = max_samples
    log = run.samples_log()
    prompts = run.prompts_log()
    # (case, indices, their seeds, their keys): seeds and keys are derived once per slot
    todo: list[tuple[PlannedCase, list[int], list[int], list[str]]] = []
    episodes: list[tuple[PlannedCase, int]] = []  # multi-turn slots: leader_eval.sampling.episode samples them
    try:
        for p in planned:
            if p.case.id not in prompts:
                prompts.append(
                    {
                        "case_id": p.case.id,
                        "text": p.rendered.prompt.text,
                        "token_ids": p.rendered.prompt.token_ids,
                        "messages": p.rendered.messages,
                    }
                )
            missing = [i for i in range(p.n_samples) if sample_record_key(p.case.id, i) not in log]
            stats.requested += p.n_samples
            stats.reused += p.n_samples - len(missing)
            if not missing:
                continue
            if p.case.episode is not None:
                # an episode spends up to max_steps backend samples, known only as it runs: the
                # cap reserves the worst case, so --max-samples stays a ceiling on cost
                steps = p.case.episode.max_steps
                for i in missing:
                    if budget is not None and budget < steps:
                        stats.capped += 1
                        continue
                    if budget is not None:
                        budget -= steps
                    episodes.append((p, i))
                continue
            prefix = _key_prefix(identity or backend.model_id, p.rendered.prompt, p.params)
            if p.overflow:
                for i in missing:
                    seed = derive_seed(run_seed, p.case.id, i)
                    s = Sample(
                        case_id=p.case.id,
                        index=i,
                        seed=seed,
                        key=_seed_key(prefix, seed),
                        outcome="context_overflow",
                        prompt_tokens=p.rendered.prompt.n_tokens or 0,
                        error=f"prompt {p.rendered.prompt.n_tokens} + max_tokens {p.params.max_tokens} tokens "
                        f"> context {p.context_length}",
                    )
                    log.append({"slot": sample_record_key(p.case.id, i), **s.to_dict()})
                    stats.overflow += 1
                continue
            to_sample: list[int] = []
            seeds: list[int] = []
            keys: list[str] = []
            for i in missing:
                seed = derive_seed(run_seed, p.case.id, i)
                key = _seed_key(prefix, seed)
                hit = cache.get(key) if cache is not None else None
                if hit is not None:
                    rec = {k: v for k, v in hit.items() if k in Sample.__dataclass_fields__}
                    rec.update(case_id=p.case.id, index=i, seed=seed, key=key)
                    log.append({"slot": sample_record_key(p.case.id, i), **rec})
                    stats.cache_hits += 1
                    continue
                stats.cache_misses += cache is not None
                if budget is not None and budget <= 0:
                    stats.capped += 1
                    continue
                if budget is not None:
                    budget -= 1
                to_sample.append(i)
                seeds.append(seed)
                keys.append(key)
            if to_sample:
                todo.append((p, to_sample, seeds, keys))
        prompts.close()

        bar = _Progress(sum(len(m) for _, m, _, _ in todo) + len(episodes), progress)
        sem = asyncio.Semaphore(max(1, min(concurrency, backend.max_concurrency)))
        t0 = time.monotonic()

        async def one(p: PlannedCase, indices: list[int], seeds: list[int], keys: list[str]) -> None:
            async with sem:
                req = SampleRequest(prompt=p.rendered.prompt, params=p.params, seeds=seeds)
                try:
                    completions = await backend.sample(req)
                except Exception as exc:  # a backend bug must not lose the run: record it per sample
                    msg = f"{type(exc).__name__}: {exc}"
                    completions = [Completion(text="", token_ids=[], stop_reason=None, error=msg) for _ in seeds]
            for i, seed, key, c in zip(indices, seeds, keys, completions, strict=True):
                s = completion_to_sample(p.case.id, i, seed, key, c)
                # the record is serialized at once and never mutated: a shallow copy of the
                # fields is enough (dataclasses.asdict deep-copies, ~4% of a sample's CPU)
                rec = dict(s.__dict__)
                log.append({"slot": sample_record_key(p.case.id, i), **rec})
                if cache is not None:
                    cache.put(rec)
                stats.sampled += 1
                stats.errors += s.outcome == "error"
                if on_sample:
                    on_sample(s)
                bar.tick()

        # One request per case keeps a backend's prefix (KV) reuse; backends split seeds as they like.
        tasks = [asyncio.create_task(one(*t)) for t in todo]
        if episodes:
            from leader_eval.sampling.episode import sample_episodes

            tasks.append(
                asyncio.create_task(
                    sample_episodes(run, backend, episodes, run_seed, sem, log, stats, bar.tick, on_sample)
                )
            )
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        stats.wall_s = time.monotonic() - t0
    finally:
        log.close()
        prompts.close()
        if cache is not None:
            cache.close()
    return stats


def new_run_seed() -> int:
    return secrets.randbits(31)
