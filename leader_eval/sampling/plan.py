"""Planning a run before anything is sampled: which cases, rendered how, sampled with what.

Every case is selected, rendered and given its sampling (suite, case and options merged, then
checked) before the first sample, so a bad case stops the run with nothing spent. A replay is
planned as the recorded run sampled (``apply_recorded``) or refused.
"""

from __future__ import annotations

import dataclasses
import sys
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from leader_eval.bounded.limits import MAX_RUN_SAMPLES
from leader_eval.errors import LeaderEvalError, RunDirError, SuiteError
from leader_eval.protocols import check_protocol
from leader_eval.sampling.backends.base import Backend, SamplingParams, overflows
from leader_eval.sampling.keys import derive_seed
from leader_eval.suite.load import Case, Suite
from leader_eval.suite.render import RenderedCase, render_case, scaffold_shared
from leader_eval.types import is_finite_number, is_int


class PlanOptions(Protocol):
    """The run options planning reads (``runs.options.RunOptions`` is one): each, when set, beats
    the suite's setting."""

    model: str
    samples: int | None
    seed: int | None
    temperature: float | None
    max_tokens: int | None
    context_length: int | None


@dataclass
class PlannedCase:
    case: Case
    rendered: RenderedCase
    params: SamplingParams
    n_samples: int
    overflow: bool
    context_length: int | None = None
    suite: Suite | None = None  # an episode case renders each step from its suite


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


def resolve_context_length(option: int | None, suite: Suite, backend: Backend) -> int | None:
    """The context length a run plans with: ``--context-length`` beats the suite's, which beats
    what the backend knows of its model (None: unknown, nothing is refused as an overflow)."""
    return option or suite.context_length or backend.context_length


def check_run_size(suite: Suite, cases: Sequence[Case], options: PlanOptions) -> None:
    """Refuse a run that plans more than ``MAX_RUN_SAMPLES`` samples (cases x samples per case)
    before anything is rendered, loaded or allocated: one line naming the cap and the way out."""
    total = 0
    for case in cases:
        n = options.samples if options.samples is not None else suite.case_sampling(case).get("samples", 1)
        total += n if is_int(n) and n > 0 else 1  # a bad count is _check_sampling's to report
    if total > MAX_RUN_SAMPLES:
        raise LeaderEvalError(
            f"{suite.path}: the run plans {total:,} samples ({len(cases)} cases); at most {MAX_RUN_SAMPLES:,} "
            "per run (docs/security.md): lower --samples, select cases (--tags, --case, --limit) or split the "
            "run with --shard"
        )


def _check_sampling(suite: Suite, case: Case, params: SamplingParams, n: int) -> None:
    """The sampling a case ends up with (suite, case and options merged), checked before any sample."""
    problem = None
    if not (is_finite_number(params.temperature) and params.temperature >= 0):
        problem = f"temperature {params.temperature!r} is not a finite number >= 0"
    elif not (is_finite_number(params.top_p) and 0 < params.top_p <= 1):
        problem = f"top_p {params.top_p!r} does not lie in (0, 1]"
    elif not (is_int(params.max_tokens) and params.max_tokens >= 1):
        problem = f"max_tokens {params.max_tokens!r} is not an integer >= 1"
    elif not (is_int(n) and n >= 1):
        problem = f"samples {n!r} is not an integer >= 1"
    if problem:
        raise SuiteError(*case.where(suite.path), f"case {case.id!r}: sampling {problem}")


def plan_cases(suite: Suite, cases: Sequence[Case], backend: Backend, options: PlanOptions) -> list[PlannedCase]:
    """Render every case before anything is sampled: a bad case stops the run with nothing spent."""
    context_length = resolve_context_length(options.context_length, suite, backend)
    planned = []
    shared = scaffold_shared(suite) if cases else None  # what every case renders with alike, derived once
    for case in cases:
        rendered = render_case(suite, case, backend, shared)
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
            raise SuiteError(*case.where(suite.path), f"case {case.id!r}: sampling: {exc}") from None
        _check_sampling(suite, case, params, n)
        overflow = overflows(rendered.prompt.n_tokens, params.max_tokens, context_length)
        planned.append(PlannedCase(case, rendered, params, n, overflow, context_length, suite))
    # Neighbouring prompts that share a prefix let a local backend reuse its KV cache.
    planned.sort(key=_prefix_order)
    return planned


def apply_recorded(
    planned: Sequence[PlannedCase],
    recorded: dict[str, Any],
    options: PlanOptions,
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
        overflow = overflows(p.rendered.prompt.n_tokens, params.max_tokens, p.context_length)
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
