"""BFCL adapter: turn a Berkeley Function Calling Leaderboard entry into leader-eval's terms,
so anyone can score BFCL's data with ``match_calls`` and reproduce the agreement with BFCL's own
AST checker (``tests/scoring/test_bfcl.py``, docs/protocols.md).

- ``to_schema`` / ``tools_of``: BFCL's function parameters -> JSON Schema per tool.
- ``to_expect``: BFCL's possible answers -> a case ``expect`` (``one_of`` per argument, ``""``
  = optional, strings compared with ``normalize: bfcl``, BFCL's own string standardisation).
- ``ground_truth_calls``: the first allowed value of every argument, as (name, arguments) calls.
- ``render``: calls -> a raw model output in the json, hermes or pythonic protocol.
- ``load_entries``: BFCL's data files (``bfcl_eval/data``) -> entries with their answers.
- ``load_checker``: BFCL's ``ast_checker`` imported without its model handlers (bfcl-eval is an
  optional, test-only dependency: ``pip install --no-deps bfcl-eval``).
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import itertools
import json
import os
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "CATEGORIES",
    "ground_truth_calls",
    "load_checker",
    "load_entries",
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


def load_entries(data: Path, categories: tuple[str, ...] = CATEGORIES) -> list[dict[str, Any]]:
    """BFCL's entries with their answers: ``{"id", "category", "functions", "answer"}``."""
    entries = []
    for cat in categories:
        answers = {}
        with open(data / "possible_answer" / f"BFCL_v4_{cat}.json", encoding="utf-8") as f:
            for line in f:
                a = json.loads(line)
                answers[a["id"]] = a["ground_truth"]
        with open(data / f"BFCL_v4_{cat}.json", encoding="utf-8") as f:
            for line in f:
                e = json.loads(line)
                entries.append({"id": e["id"], "category": cat, "functions": e["function"], "answer": answers[e["id"]]})
    return entries


@contextmanager
def load_checker() -> Iterator[types.SimpleNamespace]:
    """BFCL's AST checker: ``ns.check(entry, calls) -> bool`` and ``ns.data`` (its data folder).

    ast_checker imports MODEL_CONFIG_MAPPING only to ask whether a model rewrites dots in
    function names; the real module imports every model handler and their SDKs. A stub that
    answers "no" for every model keeps the import light. BFCL creates folders under its project
    root on import: a temporary one is used. Raises ImportError without bfcl-eval.
    """
    if importlib.util.find_spec("bfcl_eval") is None:
        raise ImportError("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23")
    root = tempfile.mkdtemp(prefix="bfcl-root-")
    old_root = os.environ.get("BFCL_PROJECT_ROOT")
    os.environ["BFCL_PROJECT_ROOT"] = root
    stub = types.ModuleType("bfcl_eval.constants.model_config")

    class _Mapping(dict[str, Any]):
        def __missing__(self, key: str) -> Any:
            return types.SimpleNamespace(underscore_to_dot=False)

    stub.MODEL_CONFIG_MAPPING = _Mapping()  # type: ignore[attr-defined]
    saved = sys.modules.get(stub.__name__)
    sys.modules[stub.__name__] = stub
    try:
        checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        enums = importlib.import_module("bfcl_eval.constants.enums")
        spec = importlib.util.find_spec("bfcl_eval")
        data_dir = Path(next(iter(spec.submodule_search_locations or []))) / "data"  # type: ignore[union-attr]

        def check(entry: dict[str, Any], calls: list[Call]) -> bool:
            output = [{n: a} for n, a in calls]
            result = checker.ast_checker(
                entry["functions"], output, entry["answer"], enums.Language.PYTHON, entry["category"], "leader-eval"
            )
            return bool(result["valid"])

        standardize: Callable[[str], str] = checker.standardize_string
        yield types.SimpleNamespace(check=check, data=data_dir, standardize_string=standardize)
    finally:
        if saved is None:
            sys.modules.pop(stub.__name__, None)
        else:
            sys.modules[stub.__name__] = saved
        if old_root is None:
            os.environ.pop("BFCL_PROJECT_ROOT", None)
        else:
            os.environ["BFCL_PROJECT_ROOT"] = old_root
