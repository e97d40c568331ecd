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
``items`` (no ``prefixItems``), ``minItems``/``maxItems``. tests/test_fast_validity.py checks
that True implies jsonschema-valid on generated schemas and values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Any], bool]

#: keywords that never make an instance invalid (annotations)
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated"})
_ANNOTATIONS |= {"readOnly", "writeOnly"}
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_HANDLED = frozenset(
    {"type", "properties", "required", "additionalProperties", "minLength", "maxLength", "items"}
    | {"minItems", "maxItems", *_NUMBER_BOUNDS}
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


def _is_number(bound: Any) -> bool:
    return type(bound) in (int, float)


def compile_validity(schema: Any) -> Predicate | None:
    """The predicate for ``schema``, or None when it uses anything outside the handled set."""
    if schema is True:
        return _always
    if schema is False:
        return _never
    if not isinstance(schema, Mapping) or not _HANDLED.issuperset(schema):
        return None
    checks: list[Predicate] = []

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
            pred = compile_validity(sub)
            if pred is None:
                return None
            props[name] = pred
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return None
    extra: Predicate | None = _always
    if "additionalProperties" in schema:
        extra = compile_validity(schema["additionalProperties"])
        if extra is None:
            return None
    if props or required or extra is not _always:

        def object_ok(v: Any) -> bool:
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

        checks.append(object_ok)

    for key, compare in (("minLength", int.__ge__), ("maxLength", int.__le__)):
        if key in schema:
            bound = schema[key]
            if type(bound) is not int:
                return None
            checks.append(lambda v, b=bound, c=compare: type(v) is not str or c(len(v), b))

    for key in _NUMBER_BOUNDS:
        if key in schema:
            bound = schema[key]
            if not _is_number(bound):
                return None
            test = {
                "minimum": lambda v, b: v >= b,
                "maximum": lambda v, b: v <= b,
                "exclusiveMinimum": lambda v, b: v > b,
                "exclusiveMaximum": lambda v, b: v < b,
            }[key]
            checks.append(lambda v, b=bound, t=test: type(v) not in (int, float) or t(v, b))

    if "items" in schema:
        item = compile_validity(schema["items"])
        if item is None:
            return None
        checks.append(lambda v, p=item: type(v) is not list or all(map(p, v)))
    for key, compare in (("minItems", int.__ge__), ("maxItems", int.__le__)):
        if key in schema:
            bound = schema[key]
            if type(bound) is not int:
                return None
            checks.append(lambda v, b=bound, c=compare: type(v) is not list or c(len(v), b))

    def valid(v: Any) -> bool:
        if type(v) not in _PLAIN:
            return False
        return all(check(v) for check in checks)

    return valid
