"""BFCL adapter: turn a Berkeley Function Calling Leaderboard entry into leader-eval's terms,
so anyone can score BFCL's data with ``match_calls`` and reproduce the agreement with BFCL's own
AST checker (``tests/scoring/test_bfcl.py``, docs/protocols.md).

- ``to_schema`` / ``tools_of``: BFCL's function parameters -> JSON Schema per tool.
- ``to_expect``: BFCL's possible answers -> a case ``expect`` (``one_of`` per argument, ``""``
  = optional, strings compared with ``normalize: bfcl``, BFCL's own string standardisation).
- ``ground_truth_calls``: the first allowed value of every argument, as (name, arguments) calls.
- ``render``: calls -> a raw model output in the json, hermes or pythonic protocol.

Reading BFCL's data files and importing its checker are I/O, so they live in
``leader_eval.studies.bfcl`` (``load_entries``, ``load_checker``); this module only converts.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

__all__ = [
    "CATEGORIES",
    "Call",
    "ground_truth_calls",
    "render",
    "to_expect",
    "to_schema",
    "tools_of",
]

#: the single-turn AST categories whose answers are lists of calls
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")

_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "string": "string",
    "integer": "integer",
    "boolean": "boolean",
    "array": "array",
}
_OMIT = object()  # "may be omitted": BFCL writes it as "" among an argument's allowed values
_MAX_EXPANSIONS = 512


Call = tuple[str, dict[str, Any]]


def to_schema(p: dict[str, Any]) -> dict[str, Any]:
    """BFCL's function parameters -> JSON Schema. "any" has no type; BFCL's own "optional" and
    "default" keys are annotations (requiredness comes from "required")."""
    out: dict[str, Any] = {}
    t = p.get("type")
    if t in _TYPES:
        out["type"] = _TYPES[t]
    for key in ("enum", "format", "maximum", "minimum", "description", "required"):
        if key in p:
            out[key] = p[key]
    if isinstance(p.get("properties"), dict):
        out["properties"] = {k: to_schema(v) for k, v in p["properties"].items()}
    if isinstance(p.get("items"), dict):
        out["items"] = to_schema(p["items"])
    return out


def tools_of(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tool name -> parameters JSON Schema, for ``match_calls``."""
    return {f["name"]: to_schema(f["parameters"]) for f in entry["functions"]}


def _expand(value: Any) -> list[Any]:
    """A BFCL dict answer holds a list of allowed values per key ("" = may be omitted); expand it
    into the concrete dicts it allows. Lists of such dicts expand element-wise."""
    if isinstance(value, dict):
        keys, choices = [], []
        for k, allowed in value.items():
            keys.append(k)
            opts: list[Any] = []
            for a in allowed:
                opts.extend([_OMIT] if a == "" else _expand(a))
            choices.append(opts)
        out = []
        for combo in itertools.product(*choices):
            out.append({k: v for k, v in zip(keys, combo, strict=True) if v is not _OMIT})
            if len(out) > _MAX_EXPANSIONS:
                break
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [list(c) for c in itertools.islice(itertools.product(*(_expand(v) for v in value)), _MAX_EXPANSIONS)]
    return [value]


def _has_str(v: Any) -> bool:
    if isinstance(v, str):
        return True
    if isinstance(v, list):
        return any(_has_str(x) for x in v)
    if isinstance(v, dict):
        return any(_has_str(x) for x in v.values())
    return False


def to_expect(entry: dict[str, Any]) -> dict[str, Any]:
    """BFCL possible answers -> a case ``expect``: ``one_of`` per argument, "" = optional, strings
    compared with ``normalize: bfcl``; an undeclared argument that may be omitted must be."""
    functions = {f["name"]: f for f in entry["functions"]}
    calls = []
    for call in entry["answer"]:
        ((name, params),) = call.items()
        props = functions[name]["parameters"].get("properties", {})
        args: dict[str, Any] = {}
        for arg, allowed in params.items():
            optional = "" in allowed
            options = [o for v in allowed if v != "" for o in _expand(v)]
            if arg not in props and optional:
                continue  # BFCL refuses any value for an undeclared argument: omit it
            if not options:
                args[arg] = {"present": False}
                continue
            c: dict[str, Any] = {"one_of": options}
            if optional:
                c["optional"] = True
            if any(_has_str(o) for o in options):
                c["normalize"] = "bfcl"
            args[arg] = c
        calls.append({"tool": name, "args": args})
    return {"calls": calls, "count": "exact"}


def _first(allowed: list[Any]) -> Any:
    """The first allowed value that is not the "may be omitted" marker."""
    values = [a for a in allowed if a != ""]
    if not values:
        return _OMIT
    v = values[0]
    if isinstance(v, dict):
        return {k: x for k, x in ((k, _first(a)) for k, a in v.items()) if x is not _OMIT}
    if isinstance(v, list) and v and all(isinstance(d, dict) for d in v):
        return [{k: x for k, x in ((k, _first(a)) for k, a in d.items()) if x is not _OMIT} for d in v]
    return copy.deepcopy(v)


def ground_truth_calls(entry: dict[str, Any]) -> list[Call]:
    """The first allowed value of every argument (optional ones included when they have a
    value); undeclared optional arguments left out."""
    functions = {f["name"]: f for f in entry["functions"]}
    out = []
    for call in entry["answer"]:
        ((name, params),) = call.items()
        props = functions[name]["parameters"].get("properties", {})
        args = {}
        for arg, allowed in params.items():
            if arg not in props and "" in allowed:
                continue
            v = _first(allowed)
            if v is not _OMIT:
                args[arg] = v
        out.append((name, args))
    return out


def render(calls: list[Call], protocol: str) -> str:
    """Calls as a raw model output in the ``json``, ``hermes`` or ``pythonic`` protocol."""
    if protocol == "json":
        return json.dumps([{"name": n, "arguments": a} for n, a in calls])
    if protocol == "hermes":
        return "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls)
    if protocol == "pythonic":
        return "[" + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls) + "]"
    raise ValueError(f"render: protocol must be json, hermes or pythonic, not {protocol!r}")
