"""A fast "valid" for the common tool-argument schemas; jsonschema still decides everything else.

Validating one call's arguments with jsonschema costs ~10 us even when they are valid (each
keyword is a generator, each nested value a new validator): about a twentieth of scoring a
sample. ``compile_validity(schema)`` turns a schema written with a small set of keywords into a
plain predicate that answers True only where jsonschema's Draft 2020-12 validator finds no
error. False means "not shown valid here": the caller then runs jsonschema, which decides and
words every failure, so verdicts and messages come from jsonschema alone.

Bounds: the predicate reads only values of the JSON types (``dict``, ``list``, ``str``, ``int``,
``float``, ``bool``, ``None``; anything else is False) and descends only where the schema has
subschemas, so its work is bounded by the schema and the values it constrains. A schema with
any other keyword (``$ref``, ``enum``, ``format``, ``pattern``, ``allOf``, ...), an unknown type
name, or a ``$schema`` gets no predicate (None): nothing here resolves or fetches anything.

The rules copy jsonschema's keyword functions (``jsonschema/_keywords.py``) for the types above:
``type`` (an int is "integer" and "number", a bool is neither; a float is not shown to be an
"integer" here), ``properties``, ``required``, ``additionalProperties`` (no
``patternProperties``), ``minLength``/``maxLength`` (``len`` of a string),
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` (numbers only),
``items`` (no ``prefixItems``), ``minItems``/``maxItems``. tests/bounded/test_validity.py checks
that True implies jsonschema-valid on generated schemas and values.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Any], bool]

#: keywords that never make an instance invalid (annotations)
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated"})
_ANNOTATIONS |= {"readOnly", "writeOnly"}
_HANDLED = frozenset(
    {"type", "properties", "required", "additionalProperties", "minLength", "maxLength", "items"}
    | {"minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    | _ANNOTATIONS
)
_PLAIN = (dict, list, str, int, float, bool, type(None))
# the Python types each JSON type name accepts, among _PLAIN (exact types: a bool is an int
# subclass but neither "integer" nor "number")
_TYPE_OF: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


#: size and bound keywords: the Python types each applies to, and whether it bounds ``len``
_BOUNDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "minLength": ((str,), True),
    "maxLength": ((str,), True),
    "minimum": ((int, float), False),
    "maximum": ((int, float), False),
    "exclusiveMinimum": ((int, float), False),
    "exclusiveMaximum": ((int, float), False),
    "minItems": ((list,), True),
    "maxItems": ((list,), True),
}
#: what holds when the value (or its length) meets the bound (a NaN meets none: not shown valid)
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "minLength": operator.ge,
    "maxLength": operator.le,
    "minimum": operator.ge,
    "maximum": operator.le,
    "exclusiveMinimum": operator.gt,
    "exclusiveMaximum": operator.lt,
    "minItems": operator.ge,
    "maxItems": operator.le,
}


def _bound_check(kinds: tuple[type, ...], size: bool, compare: Callable[[Any, Any], bool], bound: Any) -> Predicate:
    def check(v: Any) -> bool:
        return type(v) not in kinds or bool(compare(len(v) if size else v, bound))

    return check


def _items_check(item: Predicate) -> Predicate:
    def check(v: Any) -> bool:
        return type(v) is not list or all(map(item, v))

    return check


def _object_check(props: dict[str, Predicate], required: tuple[str, ...], extra: Predicate) -> Predicate:
    def check(v: Any) -> bool:
        if type(v) is not dict:
            return True
        for r in required:
            if r not in v:
                return False
        for key, item in v.items():
            pred = props.get(key, extra) if type(key) is str else extra
            if pred is not _always and not pred(item):
                return False
        return True

    return check


#: what ``compile_validity(..., trusted=True)`` handles besides ``_HANDLED``
_TRUSTED = frozenset({"pattern", "enum", "oneOf"})


def compile_validity(schema: Any, *, trusted: bool = False) -> Predicate | None:
    """The predicate for ``schema``, or None when it uses anything outside the handled set.

    ``trusted``: the schema is this project's own (the suite schema), so ``pattern`` is run as
    jsonschema runs it (``re.search``: a pattern from a suite or a model could take exponential
    time there, hence never for those) and ``enum`` of strings is handled too (jsonschema's
    ``equal`` compares a string only with ``==``, and no other type equals a string), and so is
    ``oneOf`` of alternatives that each only require keys (decided exactly: exactly one holds)."""
    if schema is True:
        return _always
    if schema is False:
        return _never
    handled = _HANDLED | _TRUSTED if trusted else _HANDLED
    if not isinstance(schema, Mapping) or not handled.issuperset(schema):
        return None
    checks: list[Predicate] = []

    if "pattern" in schema:
        if not isinstance(schema["pattern"], str):
            return None
        rx = re.compile(schema["pattern"])
        checks.append(lambda v: type(v) is not str or rx.search(v) is not None)

    if "enum" in schema:
        members = schema["enum"]
        if not isinstance(members, list) or not members or not all(type(m) is str for m in members):
            return None
        strings = frozenset(members)
        checks.append(lambda v: type(v) is str and v in strings)

    if "oneOf" in schema:
        # only alternatives of required keys (the suite schema's "content or file"): each is
        # decided exactly (present or not), so "exactly one holds" is jsonschema's oneOf
        branches = schema["oneOf"]
        if not isinstance(branches, list) or not branches:
            return None
        keys: list[tuple[str, ...]] = []
        for b in branches:
            need = b.get("required") if isinstance(b, Mapping) and set(b) == {"required"} else None
            if not isinstance(need, list) or not all(isinstance(k, str) for k in need):
                return None
            keys.append(tuple(need))
        alternatives = tuple(keys)
        checks.append(lambda v: _one_of_required(v, alternatives))

    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not names or not all(isinstance(n, str) and n in _TYPE_OF for n in names):
            return None
        allowed = frozenset(t for n in names for t in _TYPE_OF[n])
        checks.append(lambda v: type(v) in allowed)

    props: dict[str, Predicate] = {}
    if "properties" in schema:
        if not isinstance(schema["properties"], Mapping):
            return None
        for name, sub in schema["properties"].items():
            pred = compile_validity(sub, trusted=trusted)
            if pred is None:
                return None
            props[name] = pred
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return None
    extra: Predicate = _always
    if "additionalProperties" in schema:
        got = compile_validity(schema["additionalProperties"], trusted=trusted)
        if got is None:
            return None
        extra = got
    if props or required or extra is not _always:
        checks.append(_object_check(props, tuple(required), extra))

    for key, (kinds, size) in _BOUNDS.items():
        if key in schema:
            bound = schema[key]
            if type(bound) not in ((int,) if size else (int, float)):
                return None
            checks.append(_bound_check(kinds, size, _COMPARE[key], bound))

    if "items" in schema:
        item = compile_validity(schema["items"], trusted=trusted)
        if item is None:
            return None
        checks.append(_items_check(item))

    def valid(v: Any) -> bool:
        if type(v) not in _PLAIN:
            return False
        for check in checks:  # noqa: SIM110 (a loop, not all(generator): this runs per call and value)
            if not check(v):
                return False
        return True

    return valid


def _one_of_required(v: Any, alternatives: tuple[tuple[str, ...], ...]) -> bool:
    """jsonschema's ``oneOf`` of ``{"required": keys}`` alternatives: ``required`` holds for any
    value that is not an object, so there every alternative holds."""
    if type(v) is not dict:
        return len(alternatives) == 1
    return sum(all(k in v for k in keys) for keys in alternatives) == 1
