"""What a name in a suite means: model roles (judges, simulated teammates) and Python checks.

A suite may never run code or choose a network endpoint (docs/security.md). It names *which*
judge, teammate or Python check it wants (``judge: {model_role: grader}``, ``checks: {python:
...}``); what the name means comes only from trusted configuration, in this order (a later
source beats an earlier one, name by name):

1. ``[tool.leader-eval.model-roles]`` / ``[tool.leader-eval.check-functions]`` in
   ``pyproject.toml`` or ``leader-eval.toml`` (``from_tables``),
2. the pytest ini's ``leader_eval_model_roles`` / ``leader_eval_check_functions`` lines,
3. ``leader_eval.register_check`` / ``register_model_role`` called from a ``conftest.py`` or the
   caller's own code (``REGISTERED``),
4. the command line's ``--model-role NAME=SPEC`` / ``--check-function NAME=MODULE:FUNCTION``
   (``--le-model-role`` / ``--le-check-function`` in pytest).

A model role is a model spec with the sampling options a run takes (``values``: option values by
dest, as ``runs.options.run_options`` reads them), so a judge reaches any backend a run reaches.
A check function is imported only when a run needs it (``NamedCheck.load``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from leader_eval.errors import LeaderEvalError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*\Z")


class TrustedError(LeaderEvalError):
    """A definition in trusted configuration is malformed, or a suite names an undefined one."""


@dataclass(frozen=True)
class NamedModel:
    """A model role: ``values`` holds ``model`` (a spec any run takes) and sampling option values."""

    name: str
    values: Mapping[str, Any]
    source: str  # where it was defined: "pyproject.toml", "--model-role", "register_model_role", ...

    @property
    def spec(self) -> str:
        return str(self.values.get("model") or "")


@dataclass(frozen=True)
class NamedCheck:
    """A Python check: ``target`` is ``module:function`` or, when registered in code, the callable."""

    name: str
    target: str | Callable[..., Any]
    source: str

    def load(self) -> Callable[..., Any]:
        """The function, imported on first use; a missing module or name is a one-line error."""
        if callable(self.target):
            return self.target
        module_name, _, attr = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # an import error in user code is reported, never a traceback
            raise TrustedError(
                f"check function {self.name} ({self.source}): cannot import {module_name}: {type(exc).__name__}: {exc}"
            ) from None
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise TrustedError(f"check function {self.name} ({self.source}): {module_name} has no function {attr}")
        return fn


@dataclass
class Trusted:
    """Every model role and check function a run may use, by name."""

    models: dict[str, NamedModel] = field(default_factory=dict)
    checks: dict[str, NamedCheck] = field(default_factory=dict)

    def model(self, name: str, *, where: str) -> NamedModel:
        found = self.models.get(name)
        if found is None:
            raise TrustedError(f"{where}: model role {name!r} is not defined{_defined(self.models)}")
        return found

    def check(self, name: str, *, where: str) -> NamedCheck:
        found = self.checks.get(name)
        if found is None:
            raise TrustedError(f"{where}: check function {name!r} is not defined{_defined(self.checks)}")
        return found

    def over(self, other: Trusted) -> Trusted:
        """``self`` with ``other``'s definitions winning name by name."""
        return Trusted({**self.models, **other.models}, {**self.checks, **other.checks})


def _defined(table: Mapping[str, Any]) -> str:
    if not table:
        return (
            " (define it in [tool.leader-eval] of pyproject.toml, with --model-role/--check-function, "
            "or with leader_eval.register_check in conftest.py)"
        )
    return f" (defined: {', '.join(sorted(table))})"


def check_name(name: str, *, where: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise TrustedError(f"{where}: {name!r} is not a valid name (letters, digits, _ . -; at most 64)")
    return name


def split_pair(text: str, *, where: str) -> tuple[str, str]:
    """``NAME=VALUE`` from a command line or ini line."""
    name, eq, value = text.partition("=")
    if not eq or not value.strip():
        raise TrustedError(f"{where}: {text!r} is not NAME=VALUE")
    return check_name(name.strip(), where=where), value.strip()


def check_target(target: str, *, where: str) -> str:
    if not isinstance(target, str) or not _TARGET.match(target):
        raise TrustedError(f"{where}: {target!r} is not MODULE:FUNCTION (for example mychecks.tone:polite)")
    return target


def checks_from_pairs(pairs: Iterable[str], *, source: str) -> dict[str, NamedCheck]:
    out: dict[str, NamedCheck] = {}
    for text in pairs:
        name, target = split_pair(text, where=source)
        out[name] = NamedCheck(name, check_target(target, where=f"{source} {name}"), source)
    return out


#: Definitions made in code (conftest.py, a notebook); the lowest-but-one rank above files.
REGISTERED = Trusted()


def register_check(name: str, fn: Callable[..., Any] | None = None) -> Any:
    """Register a Python check under ``name`` (usable as ``@register_check("polite")``)."""
    check_name(name, where="register_check")

    def _register(f: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(f):
            raise TrustedError(f"register_check {name}: {f!r} is not callable")
        REGISTERED.checks[name] = NamedCheck(name, f, "register_check")
        return f

    return _register(fn) if fn is not None else _register


def register_model_role(name: str, model: str, **values: Any) -> None:
    """Register a model role under ``name``: a model spec and sampling option values by dest."""
    check_name(name, where="register_model_role")
    REGISTERED.models[name] = NamedModel(name, {"model": model, **values}, "register_model_role")


def assemble(*, files: Trusted | None = None, ini: Trusted | None = None, cli: Trusted | None = None) -> Trusted:
    """The definitions in force, ranked as the module docstring says (a later source wins)."""
    out = Trusted()
    for layer in (files, ini, REGISTERED, cli):
        if layer is not None:
            out = out.over(layer)
    return out
