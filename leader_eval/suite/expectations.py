"""Expected arguments a model can actually produce: an expectation the tool's own schema refuses
is a case that can never pass, so loading the suite refuses it (``FILE:LINE``).

A sample passes only when its call validates against the tool's schema (``arguments_schema``)
and every argument constraint holds (``checks/toolcall.match_calls``). A constraint is therefore
unsatisfiable when no value the schema accepts meets it:

- ``present: false`` on an argument the schema requires;
- the property is an enum (or a ``const``): no member meets the constraint, judged by the
  scorer's own rule (``check_arg``), so ``normalize``, ``one_of``, ``regex``, ``contains`` and
  ``min``/``max`` count exactly as at scoring;
- ``equals`` (a bare value) or every option of ``one_of`` fails the schema (wrong type, outside
  the bounds, a pattern it does not match, ...), checked with the suite's own retrieval-free
  validator; a string compared with ``normalize`` is checked by type only, since another
  spelling of it may be the valid one;
- ``min``/``max`` on a property typed other than a number, ``regex``/``mentions_goal`` on one
  typed other than a string, ``contains``/``contains_any`` on one typed neither string nor array.

Only what is certain is refused: a property whose type this cannot read (no ``type``, a ``$ref``
to another file, a combinator without a type) is left to scoring.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from leader_eval.checks.toolcall import check_arg

__all__ = ["unsatisfiable"]

_NUMBER = frozenset({"number", "integer"})
#: the types a value must have for each constraint keyword to hold
_NEEDS: tuple[tuple[str, frozenset[str], str], ...] = (
    ("min", _NUMBER, "a number"),
    ("max", _NUMBER, "a number"),
    ("regex", frozenset({"string"}), "a string"),
    ("mentions_goal", frozenset({"string"}), "a string"),
    ("contains", frozenset({"string", "array"}), "a string or an array"),
    ("contains_any", frozenset({"string", "array"}), "a string or an array"),
)
_MAX_REF_HOPS = 16


def unsatisfiable(constraint: Any, arg: str, parameters: Any, validator: Any) -> str | None:
    """Why no call the tool's schema accepts can meet ``constraint`` on ``arg``, or None.

    ``parameters``: the tool's parameters schema; ``validator``: its retrieval-free validator
    (``tool_schema``), or None to skip the checks that validate values.
    """
    if not isinstance(parameters, Mapping):
        return None
    c: Mapping[str, Any] = constraint if isinstance(constraint, Mapping) else {"equals": constraint}
    required = parameters.get("required")
    if c.get("present") is False:
        if isinstance(required, list) and arg in required:
            return f"argument {arg!r} is required by the tool's schema, so 'present: false' can never hold"
        return None  # the argument must be absent: nothing else about it matters
    props = parameters.get("properties")
    prop = _resolve(parameters, props.get(arg)) if isinstance(props, Mapping) else None
    normalize = c.get("normalize") if c.get("normalize") == "bfcl" else bool(c.get("normalize"))
    members = _members(prop)
    if members is not None:
        # a finite set of allowed values: one of them must pass the scorer's own comparison
        judged = {k: v for k, v in c.items() if k not in ("mentions_goal", "present", "optional")}
        if judged and all(check_arg(judged, m, prop, arg, None) is not None for m in members):
            return f"no value the tool's schema allows for {arg!r} ({_shown(members)}) meets {_shown(dict(judged))}"
        return None
    if "equals" in c:
        why = _refused(validator, arg, c["equals"], normalize)
        if why:
            return f"expects {arg}={_shown(c['equals'])}, which the tool's schema refuses: {why}"
    options = c.get("one_of")
    if isinstance(options, list) and options:
        reasons = [_refused(validator, arg, o, normalize) for o in options]
        if all(reasons):
            return f"expects {arg} one of {_shown(options)}, and the tool's schema refuses every one: {reasons[0]}"
    types = _types(prop)
    if types is not None:
        for key, needs, what in _NEEDS:
            if key in c and not types & needs:
                return f"{key!r} needs {what}, but the tool's schema types {arg!r} as {' or '.join(sorted(types))}"
        if normalize and isinstance(c.get("equals"), str) and "string" not in types:
            typed = " or ".join(sorted(types))
            return f"expects {arg}={_shown(c['equals'])}, but the tool's schema types it as {typed}"
    return None


def _refused(validator: Any, arg: str, value: Any, normalize: Any) -> str | None:
    """The schema's objection to ``{arg: value}`` (errors about ``arg`` only), or None."""
    if validator is None or (normalize and _has_str(value)):
        return None  # a loosely compared string: another spelling may be the valid one
    try:
        errors = [e for e in validator.iter_errors({arg: value}) if tuple(e.absolute_path)[:1] == (arg,)]
    except (RecursionError, ValueError, TypeError, LookupError):  # an unreadable schema: scoring decides
        return None
    if not errors:
        return None
    from jsonschema.exceptions import best_match  # a heavy import, loaded once errors exist

    best = best_match(errors)
    return " ".join(str(best.message).split())[:200] if best is not None else None


def _resolve(root: Mapping[str, Any], schema: Any) -> Any:
    """``schema`` with a local ``$ref`` (``#/...`` inside the same document) followed; None when
    it points elsewhere or nowhere (the type is then unknown)."""
    for _ in range(_MAX_REF_HOPS):
        if not isinstance(schema, Mapping):
            return None
        ref = schema.get("$ref")
        if ref is None:
            return schema
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        if any(k in schema for k in ("type", "enum", "const")):
            return schema  # the keywords beside the $ref already say what matters here
        node: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        schema = node
    return None


def _members(prop: Any) -> list[Any] | None:
    if not isinstance(prop, Mapping):
        return None
    if "const" in prop:
        return [prop["const"]]
    enum = prop.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _types(prop: Any) -> frozenset[str] | None:
    if not isinstance(prop, Mapping):
        return None
    t = prop.get("type")
    if isinstance(t, str):
        return frozenset({t})
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return frozenset(t)
    return None


def _has_str(value: Any) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, list):
        return any(_has_str(v) for v in value)
    if isinstance(value, Mapping):
        return any(_has_str(v) for v in value.values())
    return False


def _shown(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
