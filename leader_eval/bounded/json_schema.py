"""Compiled JSON Schema validators that never retrieve and match patterns in bounded time.

A suite's JSON Schemas (a tool's ``parameters`` and ``returns``, a fixture's ``match_schema``)
run on model output. Two things make a stock jsonschema validator unsafe there, and this module
removes both:

- **retrieval**: a ``$ref`` to a URL or a file would be fetched at validation time. Every
  validator here runs over a ``referencing.Registry`` whose retrieve function refuses every URI
  (``empty_registry``); suite/tool_schema.py, which loads a suite's schemas and confines their
  files at lint, hands its validators a registry holding exactly the documents it loaded.
- **backtracking**: ``pattern``, ``patternProperties`` and ``additionalProperties`` would match
  with ``re.search``. The validator class here matches them with regex.py's bounded engines; a
  pattern that runs out of time never matches (never a pass). ``schema_patterns`` lists them for
  the lint, which refuses the catastrophic ones before any validator exists.

``validator_for`` is what a check asks for with a tool's ``parameters`` dict: a schema a suite
loaded (``bind``) validates against that suite's files, any other schema (the Python API,
tests) gets ``compile_validator(schema)``: same rules, no files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from leader_eval.bounded.regex import RegexTimeout, compile_suite_regex

if TYPE_CHECKING:
    from jsonschema.validators import Draft202012Validator
    from referencing import Registry, Resource

# jsonschema and referencing (~35 ms of CPU to import) are heavy dependencies: imported where a
# validator is built or reports, so a suite without tool schemas never loads them

# --------------------------------------------------------------------------- validators


def refuse_retrieval(uri: str) -> Resource[Any]:
    """The registry's retrieve function: every URI not loaded at lint time is refused."""
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


def empty_registry() -> Registry[Any]:
    from referencing import Registry

    return Registry(retrieve=refuse_retrieval)  # type: ignore[call-arg]


def compile_validator(
    schema: Mapping[str, Any], *, registry: Registry[Any] | None = None, base_uri: str | None = None
) -> Draft202012Validator:
    """A Draft 2020-12 validator (format checking on) that never retrieves a reference.

    ``validator.schema is schema`` holds, so callers may cache by identity.
    """
    from jsonschema.validators import Draft202012Validator

    registry = registry if registry is not None else empty_registry()
    checker = Draft202012Validator.FORMAT_CHECKER
    cls = _bounded_class()  # ``pattern`` & co. match in bounded time
    if not base_uri:
        return cls(schema, registry=registry, format_checker=checker)
    try:
        # resolve relative refs against the document's URI without rewriting the schema
        return cls(schema, registry=registry, format_checker=checker, _resolver=registry.resolver(base_uri=base_uri))
    except TypeError:  # a jsonschema without the _resolver field: give the root its base URI instead
        return cls({**schema, "$id": base_uri}, registry=registry, format_checker=checker)


@lru_cache(maxsize=1)
def _bounded_class() -> Any:
    from jsonschema.validators import Draft202012Validator

    return bounded_validator_class(Draft202012Validator)


#: schemas a suite loaded, by identity: (the schema, the registry of its suite's files, its URI)
_BOUND: dict[int, tuple[Mapping[str, Any], Registry[Any] | None, str]] = {}


def bind(schemas: Iterable[tuple[Mapping[str, Any], Registry[Any] | None, str]]) -> None:
    """Remember that each schema (a tool's ``parameters`` dict, by identity) resolves its refs in
    ``registry`` from ``base_uri``: ``validator_for`` then validates it against those files."""
    if len(_BOUND) > 4096:  # a long-lived process loading many suites
        _BOUND.clear()
    for schema, registry, base_uri in schemas:
        _BOUND[id(schema)] = (schema, registry, base_uri)


def validator_for(schema: Mapping[str, Any]) -> Draft202012Validator:
    """The retrieval-free validator for ``schema``: bound to its suite's files if a suite loaded it.

    ``checks/toolcall.py`` calls this with a tool's ``parameters`` dict; a schema no suite loaded
    (the Python API, tests) gets ``compile_validator(schema)``: same rules, no files.
    """
    entry = _BOUND.get(id(schema))
    if entry is not None and entry[0] is schema:
        return compile_validator(schema, registry=entry[1], base_uri=entry[2])
    return compile_validator(schema)


def is_bound(schema: Mapping[str, Any]) -> bool:
    """Whether a suite loaded ``schema`` (its refs resolve against that suite's files)."""
    entry = _BOUND.get(id(schema))
    return entry is not None and entry[0] is schema


# --------------------------------------------------------------------------- patterns

_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def schema_patterns(schema: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Every regex a JSON Schema holds (``pattern`` values, ``patternProperties`` keys), with the
    path to it, for the lint; data keywords (``enum``, ``const`` ...) are not schemas."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in _DATA_KEYWORDS:
                continue
            if key == "pattern" and isinstance(value, str):
                yield (*at, key), value
            elif key == "patternProperties" and isinstance(value, dict):
                for name, sub in value.items():
                    yield (*at, key, name), name
                    yield from schema_patterns(sub, (*at, key, name))
            else:
                yield from schema_patterns(value, (*at, key))
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            yield from schema_patterns(item, (*at, i))


def _search(pattern: str, text: str) -> bool | None:
    """Does ``pattern`` match in ``text``; None when it ran out of time (never a pass)."""
    try:
        return compile_suite_regex(pattern).search(text) is not None
    except RegexTimeout:
        return None
    except re.error:
        return False


def _pattern_keyword(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string"):
        hit = _search(patrn, instance)
        if hit is None:
            yield ValidationError(f"{instance!r}: pattern {patrn!r} ran out of time (counted as not matching)")
        elif not hit:
            yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties_keyword(validator: Any, pp: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pp.items():
        for k, v in instance.items():
            hit = _search(pattern, k)
            if hit is None:
                yield ValidationError(f"{k!r}: pattern {pattern!r} ran out of time (counted as not matching)")
            elif hit:
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional_properties_keyword(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = []
    for name in instance:
        if name in properties:
            continue
        hits = [_search(p, name) for p in patterns]
        if None in hits:
            yield ValidationError(f"{name!r}: a patternProperties pattern ran out of time (counted as not matching)")
        if not any(hits):
            extras.append(name)
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        joined = ", ".join(repr(e) for e in sorted(extras, key=str))
        yield ValidationError(f"Additional properties are not allowed ({joined} unexpected)")


def bounded_validator_class(base: Any) -> Any:
    """``base`` (a jsonschema validator class) whose ``pattern``, ``patternProperties`` and
    ``additionalProperties`` match with the bounded engines instead of ``re.search``."""
    from jsonschema.validators import extend

    return extend(
        base,
        {
            "pattern": _pattern_keyword,
            "patternProperties": _pattern_properties_keyword,
            "additionalProperties": _additional_properties_keyword,
        },
    )
