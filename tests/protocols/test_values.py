"""Values a format writes as text are typed by the called tool's schema, never guessed."""

from __future__ import annotations

from typing import Any

import pytest

from leader_eval.protocols import TextValue, parse_output
from leader_eval.protocols._values import type_arguments

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
