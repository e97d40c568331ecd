"""Values a format writes as text are typed by the called tool's schema, never guessed."""

from __future__ import annotations

from typing import Any

import pytest

from leader_eval.protocols import TextValue, parse_output
from leader_eval.protocols._values import PyTextValue, type_arguments

PARAMS = {
    "type": "object",
    "properties": {
        "task": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "urgent": {"type": "boolean"},
        "owner": {"type": ["integer", "null"]},
        "tags": {"type": "array"},
        "meta": {"type": "object"},
        "either": {"type": ["string", "integer"]},
    },
}


@pytest.mark.parametrize(
    ("name", "text", "typed"),
    [
        ("task", "42", "42"),  # a string parameter keeps digits as text
        ("task", " padded\n", " padded\n"),
        ("count", "42", 42),
        ("count", " -7\n", -7),
        ("count", "4.0", "4.0"),  # not an integer literal: left as text, the schema check says so
        ("ratio", "0.75", 0.75),
        ("ratio", "3", 3),
        ("urgent", "true", True),
        ("urgent", "False", False),  # templates that render Python values
        ("owner", "None", None),
        ("owner", "12", 12),
        ("tags", '["a", "b"]', ["a", "b"]),
        ("tags", '{"a": 1}', '{"a": 1}'),  # JSON, but not the declared type
        ("meta", '{"a": 1}', {"a": 1}),
        ("either", "42", "42"),  # a union with string cannot be told apart: judged as the string
        ("undeclared", "42", 42),  # no schema: JSON where the whole text is JSON
        ("undeclared", "hello", "hello"),
    ],
)
def test_text_values_are_typed_by_the_schema(name: str, text: str, typed: Any) -> None:
    out = type_arguments({name: TextValue(text)}, PARAMS)
    assert out[name] == typed and type(out[name]) is type(typed)


def test_values_a_format_carried_as_json_are_never_retyped() -> None:
    args = {"task": 42}
    assert type_arguments(args, PARAMS) is args


def test_parse_output_types_xml_parameters_by_the_called_tools_schema() -> None:
    text = '<function_calls><invoke name="t"><parameter name="task">42</parameter></invoke></function_calls>'
    typed = parse_output(text, "anthropic_xml", tool_schemas={"t": PARAMS})
    assert typed.strict_ok and typed.calls[0].arguments == {"task": "42"}
    untyped = parse_output(text, "anthropic_xml")
    assert untyped.calls[0].arguments == {"task": 42}


def test_python_literals_type_objects_only_for_formats_that_write_them() -> None:
    schema = {"properties": {"m": {"type": "object"}, "a": {"type": "array"}}}
    py = type_arguments({"m": PyTextValue("{'k': None, 'v': [True, 1.5]}"), "a": PyTextValue("['x']")}, schema)
    assert py == {"m": {"k": None, "v": [True, 1.5]}, "a": ["x"]}
    assert type_arguments({"m": TextValue("{'k': None}")}, schema) == {"m": "{'k': None}"}
    # not JSON-shaped (a set, a tuple, a non-string key), or too long for Python's parser: text
    for raw in ("{'k': {1, 2}}", "{1: 'a'}", "{'k': (1, 2)}", "{'k': float('nan')}", "{'k': '" + "x" * 40_000 + "'}"):
        assert type_arguments({"m": PyTextValue(raw)}, schema) == {"m": raw}


def test_text_nested_in_objects_and_arrays_is_typed_at_its_place() -> None:
    schema = {
        "properties": {
            "meta": {"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}},
            "xs": {"type": "array", "items": {"type": "number"}},
        }
    }
    args = {"meta": {"id": TextValue("7"), "n": TextValue("7"), "free": TextValue("7")}, "xs": [TextValue("1.5")]}
    assert type_arguments(args, schema) == {"meta": {"id": "7", "n": 7, "free": 7}, "xs": [1.5]}


@pytest.mark.parametrize(
    ("text", "schema"),
    [
        ("1" + "0" * 4300, {"type": "integer"}),  # past Python's digit limit: text, never a crash
        ('{"a": 1, "a": 2}', {"type": "object"}),  # a key given twice: which value was meant?
        ('{"a": NaN}', {"type": "object"}),  # not JSON
        ("-Infinity", None),
    ],
)
def test_text_that_is_no_clean_value_of_its_type_stays_text(text: str, schema: Any) -> None:
    out = type_arguments({"x": TextValue(text)}, {"type": "object", "properties": {"x": schema} if schema else {}})
    assert out["x"] == text and type(out["x"]) is str
