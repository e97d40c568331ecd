"""The simulated teammates of a run: each model role a suite's ``user:`` names, resolved to a backend.

A suite names the role only (``episode: {user: {model_role: customer}}``); what it means, a model
spec with the options a run takes, comes from trusted configuration (``runs.trusted``,
``RunOptions.trusted``). A role no trusted source defines is a one-line error naming the suite's
line, before any model loads or anything is written (exit 2). A replay plays every teammate from
the recorded run (``turns.jsonl``), so it needs no role and no model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.runs.options import RunOptions, check_run_options, run_options
from leader_eval.runs.trusted import NamedModel, Trusted, TrustedError
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import Backend, guard
from leader_eval.sampling.teammate import Teammate
from leader_eval.suite.load import Case
from leader_eval.suite.teammate import UserSpec

__all__ = ["check_roles", "resolve_teammates", "roles_named", "teammate_identity"]


def roles_named(cases: Iterable[Case]) -> dict[str, UserSpec]:
    """Each model role the cases' teammates name, with the first ``user:`` that names it."""
    out: dict[str, UserSpec] = {}
    for case in cases:
        user = case.episode.user if case.episode is not None else None
        if user is not None:
            out.setdefault(user.model_role, user)
    return out


def check_roles(cases: Iterable[Case], trusted: Trusted, given: Mapping[str, Any] | None = None) -> None:
    """Every role the cases name is defined (or given as a backend by the caller's code)."""
    for name, user in roles_named(cases).items():
        if name not in (given or {}):
            trusted.model(name, where=f"{user.where}: user.model_role")


def resolve_teammates(
    cases: Iterable[Case],
    options: RunOptions,
    leader: Backend,
    *,
    replay: Mapping[str, Any] | None = None,
    given: Mapping[str, Backend] | None = None,
) -> dict[str, Teammate]:
    """A ``Teammate`` for each role the cases name.

    ``replay``: the recorded manifest when ``leader`` replays a run (each teammate is then played
    by the replay, with the recorded teammate's facts); ``given``: backends the caller's code
    passes by role (``leader_eval.run(..., teammates=...)``), used as they are. A role whose model
    and options are the leader's shares the leader's backend (one model loaded, not two)."""
    named = roles_named(cases)
    out: dict[str, Teammate] = {}
    if not named:
        return out
    if replay is not None:
        recorded = (replay.get("identity") or {}).get("teammates") or {}
        for name, user in named.items():
            facts = recorded.get(name)
            if not isinstance(facts, dict):
                raise LeaderEvalError(f"{user.where}: the replayed run recorded no teammate for model role {name!r}")
            out[name] = Teammate(
                name,
                leader,
                temperature=facts.get("temperature"),
                max_tokens=facts.get("max_tokens"),
                special_tokens=tuple(facts.get("special_tokens") or ()),
                recorded=facts,
            )
        return out
    for name, user in named.items():
        if given and name in given:
            backend = guard(given[name])
            out[name] = Teammate(name, backend, special_tokens=tuple(getattr(backend, "special_tokens", ())))
            continue
        role = options.trusted.model(name, where=f"{user.where}: user.model_role")
        out[name] = _resolve(role, options, leader, user)
    return out


def _resolve(role: NamedModel, options: RunOptions, leader: Backend, user: UserSpec) -> Teammate:
    where = f"{user.where}: model role {role.name} ({role.source})"
    if not role.spec:
        raise TrustedError(f"{where}: no model spec")
    if role.spec.startswith("replay:"):
        raise TrustedError(f"{where}: a teammate cannot be replay:; replay the whole run instead")
    try:
        ro = run_options(role.values)
        check_run_options(ro)
        same = ro.model == options.model and ro.backend_options == options.backend_options
        if same and ro.context_length == options.context_length:
            backend = leader
        else:
            backend = resolve_backend(ro.model, context_length=ro.context_length, **ro.backend_options)
    except LeaderEvalError as exc:
        raise TrustedError(f"{where}: {exc}") from None
    return Teammate(
        role.name,
        backend,
        temperature=ro.temperature,
        max_tokens=ro.max_tokens,
        special_tokens=tuple(getattr(backend, "special_tokens", ())),
    )


def teammate_identity(teammates: Mapping[str, Teammate]) -> dict[str, Any]:
    """The manifest's ``identity.teammates``: each role's model and sampling values."""
    return {name: t.identity() for name, t in sorted(teammates.items())}
