"""Parameter values a format carries as text, typed by the tool's schema.

XML-style formats (Qwen3-Coder's ``<parameter=x>``, GLM's ``<arg_value>``, MiniMax's and DSML's
``<parameter name="x">``, ...) write every scalar as text: ``42`` and ``"42"`` render alike, so the
text alone cannot say which the model meant. Their parsers return such values as ``TextValue``
(a ``str``) and ``parse_output`` types them by the called tool's JSON Schema, the way vLLM's and
SGLang's parsers for these formats do: a ``string`` parameter keeps the text, an ``integer`` one
takes an integer literal, ``object``/``array`` take JSON. What the schema cannot decide is left
as text and so judged as a string (a union of ``string`` and a non-string type, or no schema for
the parameter and text that is not JSON): the schema check then reports the mismatch instead of
the parser guessing.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from typing import Any

from leader_eval.protocols._scan import STRICT_DECODER

__all__ = ["LiteralBudget", "PyTextValue", "TextValue", "type_arguments"]

_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,4300})")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,4300})(?:\.[0-9]{1,4300})?(?:[eE][+-]?[0-9]{1,4})?")
_TRUE = frozenset(("true", "True"))  # templates that render Python values write True/False/None
_FALSE = frozenset(("false", "False"))
_NULL = frozenset(("null", "None"))
# the strict parsers' decoder: a key given twice or NaN/Infinity is not a value a model meant
_DECODER = STRICT_DECODER
_JSON_START = frozenset('{["-0123456789tfn')


class TextValue(str):
    """A parameter value the format wrote as text, not yet typed by a schema."""

    __slots__ = ()


class PyTextValue(TextValue):
    """A ``TextValue`` from a template that writes objects and arrays with Python's ``str()``
    (Seed-OSS's and MiniCPM5's ``{{ value | string }}``: ``{'k': None}``): an ``object`` or
    ``array`` parameter also takes a Python literal of JSON-shaped values where JSON fails, as
    the vendors' parsers read it (``ast.literal_eval``). Up to ``_PY_LITERAL_MAX`` characters
    in one output (a ``LiteralBudget``): Python's parser costs about 1 us a character, so past it
    a literal stays text (the schema check reports it) rather than costing an adversarial output
    (256 calls of large objects) seconds."""

    __slots__ = ()


_PY_LITERAL_MAX = 32_768


class LiteralBudget:
    """The Python-literal characters one output may still have parsed (see ``PyTextValue``)."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = _PY_LITERAL_MAX


# nesting a format's parser builds is bounded by the parser; this only guards the recursion
_MAX_DEPTH = 128


def _types(schema: Any) -> tuple[str, ...]:
    if not isinstance(schema, Mapping):
        return ()
    t = schema.get("type")
    if isinstance(t, str):
        return (t,)
    if isinstance(t, list):
        return tuple(x for x in t if isinstance(x, str))
    if "enum" in schema and isinstance(schema["enum"], list):
        return tuple(sorted({_json_type(v) for v in schema["enum"]}))
    if "const" in schema:
        return (_json_type(schema["const"]),)
    return ()


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _json(text: str) -> tuple[bool, Any]:
    if text[:1] not in _JSON_START:  # most text: no decode attempt (a failed one costs an exception)
        return False, None
    try:
        return True, _DECODER.decode(text)
    except (ValueError, RecursionError):
        return False, None


def _jsonable(v: Any) -> bool:
    """Is ``v`` (from ``literal_eval``) made only of what JSON can hold?"""
    if v is None or isinstance(v, bool | int | str):
        return True
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return all(map(_jsonable, v))
    if isinstance(v, dict):
        return all(isinstance(k, str) and _jsonable(x) for k, x in v.items())
    return False  # tuples, sets, bytes, complex: str() of JSON values never writes them


def _py_literal(text: str, budget: LiteralBudget) -> tuple[bool, Any]:
    if len(text) > budget.left or text[:1] not in ("{", "["):
        return False, None
    budget.left -= len(text)
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False, None
    try:
        return (True, value) if _jsonable(value) else (False, None)
    except RecursionError:
        return False, None


def _as(kind: str, text: str, python: LiteralBudget | None = None) -> tuple[bool, Any]:
    """Can ``text`` be read as a value of JSON type ``kind``? (ok, value)"""
    s = text.strip()
    try:
        return _read_as(kind, s, python)
    except ValueError:  # past Python's integer digit limit, say: not a value of that type
        return False, None


def _read_as(kind: str, s: str, python: LiteralBudget | None) -> tuple[bool, Any]:
    if kind == "integer":
        return (True, int(s)) if _INT.fullmatch(s) else (False, None)
    if kind == "number":
        if _NUMBER.fullmatch(s):
            return True, int(s) if _INT.fullmatch(s) else float(s)
        return False, None
    if kind == "boolean":
        return (True, True) if s in _TRUE else (True, False) if s in _FALSE else (False, None)
    if kind == "null":
        return (True, None) if s in _NULL else (False, None)
    if kind in ("object", "array"):
        ok, value = _json(s)
        if not ok and python is not None:
            ok, value = _py_literal(s, python)
        return (True, value) if ok and _json_type(value) == kind else (False, None)
    return False, None


def type_value(value: Any, schema: Any, budget: LiteralBudget, depth: int = 0) -> Any:
    """``value`` typed by ``schema`` where it is a ``TextValue``, and inside objects and arrays
    that hold one (a format that writes nested values as elements, MiniMax M3's, types each
    leaf by the schema's ``properties`` or ``items`` at its place); anything else unchanged."""
    if not isinstance(value, TextValue):
        if depth < _MAX_DEPTH and isinstance(value, dict | list) and _has_text(value):
            sub = schema if isinstance(schema, Mapping) else {}
            if isinstance(value, list):
                items = sub.get("items")
                return [type_value(v, items, budget, depth + 1) for v in value]
            props = sub.get("properties")
            props = props if isinstance(props, Mapping) else {}
            return {k: type_value(v, props.get(k), budget, depth + 1) for k, v in value.items()}
        return value
    kinds = _types(schema)
    text = str(value)
    if not kinds:
        # No type to go by: JSON when the whole text is a JSON value, else the text.
        ok, decoded = _json(text.strip()) if text.strip() else (False, None)
        return decoded if ok else text
    if "string" in kinds:
        # A string parameter keeps its text exactly, even when it reads as a number: the format
        # cannot say otherwise, and a union with string is judged as the string.
        return text
    python = budget if isinstance(value, PyTextValue) else None
    for kind in kinds:
        ok, typed = _as(kind, text, python)
        if ok:
            return typed
    return text  # not readable as the declared type: the schema check reports it


def _has_text(value: Any) -> bool:
    if isinstance(value, TextValue):
        return True
    if isinstance(value, dict):
        return any(_has_text(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_text(v) for v in value)
    return False


def type_arguments(arguments: dict[str, Any], parameters: Any, budget: LiteralBudget | None = None) -> dict[str, Any]:
    """The call's arguments with every ``TextValue`` typed by the tool's ``parameters`` schema
    (top-level properties; a parameter the schema does not name is typed as JSON-or-text)."""
    if not any(_has_text(v) for v in arguments.values()):
        return arguments
    props = parameters.get("properties") if isinstance(parameters, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    budget = LiteralBudget() if budget is None else budget  # one per output: parse_output's
    return {k: type_value(v, props.get(k), budget) for k, v in arguments.items()}
