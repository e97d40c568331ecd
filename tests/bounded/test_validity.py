"""The fast validity predicate never says "valid" where jsonschema finds an error.

``leader_eval.bounded.validity`` lets scoring skip jsonschema for arguments it can show valid; a
wrong True there would turn a schema violation into a pass (a false green). These tests generate
schemas from the keywords it handles and values of every JSON type (plus the Python values the
pythonic protocol can produce), and compare with jsonschema's Draft 2020-12 validator.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from leader_eval.bounded.validity import compile_validity
from leader_eval.checks.toolcall import match_calls
from leader_eval.types import ToolCall

_TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
_NAMES = ["a", "b", "message", "n"]

_numbers = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([0.0, 1.0, -1.5, 2.5, math.inf, -math.inf, math.nan, 1e300]),
)
_scalars = st.one_of(st.none(), st.booleans(), _numbers, st.text(max_size=4))
# values a call's arguments can hold: JSON, and what Python literals add (tuples, sets, bytes)
_values = st.recursive(
    st.one_of(_scalars, st.tuples(st.integers()), st.binary(max_size=2), st.frozensets(st.integers(), max_size=2)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(_NAMES), inner, max_size=3),
    ),
    max_leaves=8,
)


def _schemas() -> st.SearchStrategy[Any]:
    leaf_kw = st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(st.sampled_from(_TYPES), st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3)),
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3),
            "minimum": _numbers.filter(lambda x: not (isinstance(x, float) and math.isnan(x))),
            "maximum": _numbers.filter(lambda x: not (isinstance(x, float) and math.isnan(x))),
            "exclusiveMinimum": st.integers(-3, 3),
            "exclusiveMaximum": st.floats(-3, 3),
            "minItems": st.integers(0, 2),
            "maxItems": st.integers(0, 2),
            "description": st.text(max_size=3),
        },
    )

    def nest(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.booleans(),
            leaf_kw,
            st.fixed_dictionaries(
                {"type": st.just("object")},
                optional={
                    "properties": st.dictionaries(st.sampled_from(_NAMES), inner, max_size=3),
                    "required": st.lists(st.sampled_from(_NAMES), max_size=2, unique=True),
                    "additionalProperties": inner,
                },
            ),
            st.fixed_dictionaries({}, optional={"items": inner, "minItems": st.integers(0, 2)}),
        )

    return st.recursive(st.one_of(st.booleans(), leaf_kw), nest, max_leaves=6)


@settings(max_examples=600, deadline=None)
@given(schema=_schemas(), values=st.lists(_values, min_size=1, max_size=6))
def test_valid_here_means_valid_for_jsonschema(schema: Any, values: list[Any]) -> None:
    pred = compile_validity(schema)
    assert pred is not None  # only handled keywords were generated
    validator = Draft202012Validator(schema)
    for value in values:
        if pred(value):
            assert validator.is_valid(value), (schema, value)


def test_schemas_with_other_keywords_are_left_to_jsonschema() -> None:
    for schema in (
        {"type": "object", "properties": {"x": {"$ref": "https://example.org/x.json"}}},
        {"type": "object", "properties": {"x": {"$ref": "file:///etc/passwd"}}},
        {"$defs": {"p": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/p"}}},
        {"type": "string", "format": "email"},
        {"type": "string", "enum": ["a"]},
        {"type": "string", "pattern": "^a"},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}, "additionalProperties": False},
        {"type": "decimal"},
        {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}]}}},
    ):
        assert compile_validity(schema) is None, schema


def test_scoring_reports_jsonschema_failures_unchanged() -> None:
    # arguments the fast path cannot show valid are judged and worded by jsonschema
    tools = {
        "pause": {
            "type": "object",
            "properties": {"minutes": {"type": "integer", "minimum": 1}},
            "required": ["minutes"],
            "additionalProperties": False,
        }
    }
    expect = {"calls": [{"tool": "pause"}]}
    ok = match_calls([ToolCall("pause", {"minutes": 5}, "json")], expect, tools)[1]
    assert ok.passed
    for args, reason, message in (
        ({"minutes": "ten"}, "wrong_type", "'ten' is not of type 'integer'"),
        ({"minutes": 0}, "schema_violation", "0 is less than the minimum of 1"),
        ({}, "missing_arg", "'minutes' is a required property"),
        ({"minutes": 5, "why": "x"}, "unexpected_arg", "Additional properties are not allowed"),
        ({"minutes": True}, "wrong_type", "True is not of type 'integer'"),
    ):
        check = match_calls([ToolCall("pause", args, "json")], expect, tools)[1]
        assert not check.passed and check.reason == reason, (args, check)
        assert message in check.data["failures"][0]["expected"]["message"], check


_PATTERNS = ["^a", "b$", "^[A-Za-z0-9_.-]+$(?![\\s\\S])", "x|y", ""]


def _one_of_required() -> st.SearchStrategy[Any]:
    required = st.fixed_dictionaries({"required": st.lists(st.sampled_from(_NAMES), max_size=2)})
    return st.lists(required, min_size=1, max_size=3)


def _trusted_schemas() -> st.SearchStrategy[Any]:
    leaf = st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(_TYPES),
            "pattern": st.sampled_from(_PATTERNS),
            "enum": st.lists(st.sampled_from(["a", "b", "1", "", "true"]), min_size=1, max_size=3),
            "minLength": st.integers(0, 3),
            "oneOf": _one_of_required(),
        },
    )
    return st.recursive(
        leaf,
        lambda inner: (
            st.fixed_dictionaries(
                {"type": st.just("object")},
                optional={
                    "properties": st.dictionaries(st.sampled_from(_NAMES), inner, max_size=3),
                    "additionalProperties": inner,
                },
            )
            | st.fixed_dictionaries({"items": inner})
        ),
        max_leaves=5,
    )


_trusted_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["a", "b", "1", "", "ab", "x\n", "a.b"])),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_NAMES), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(schema=_trusted_schemas(), values=st.lists(_trusted_values, min_size=1, max_size=6))
def test_trusted_pattern_and_enum_valid_here_means_valid_for_jsonschema(schema: Any, values: list[Any]) -> None:
    # the suite loader's mode: the project's own schema, whose patterns and string enums it runs
    pred = compile_validity(schema, trusted=True)
    assert pred is not None
    validator = Draft202012Validator(schema)
    for value in values:
        if pred(value):
            assert validator.is_valid(value), (schema, value)


@settings(max_examples=200, deadline=None)
@given(one_of=_one_of_required(), values=st.lists(_trusted_values, min_size=1, max_size=6))
def test_trusted_one_of_required_keys_decides_as_jsonschema(one_of: Any, values: list[Any]) -> None:
    # the suite schema's "content or file": alternatives of required keys are decided exactly,
    # so the predicate answers both ways as jsonschema does
    schema = {"oneOf": one_of}
    pred = compile_validity(schema, trusted=True)
    assert pred is not None
    validator = Draft202012Validator(schema)
    for value in values:
        assert pred(value) == validator.is_valid(value), (schema, value)


def test_trusted_one_of_beyond_required_keys_is_left_to_jsonschema() -> None:
    for schema in ({"oneOf": [{"type": "string"}, {"required": ["a"]}]}, {"oneOf": []}, {"oneOf": {"required": []}}):
        assert compile_validity(schema, trusted=True) is None, schema
    assert compile_validity({"oneOf": [{"required": ["a"]}]}) is None  # a suite's or a model's schema


def test_trusted_enum_of_other_types_is_left_to_jsonschema() -> None:
    # jsonschema's enum tells 1 from True and compares containers deeply: only strings here
    for schema in ({"enum": [1, "a"]}, {"enum": [True]}, {"enum": [[1]]}, {"enum": []}, {"pattern": 3}):
        assert compile_validity(schema, trusted=True) is None, schema
