"""GLM's ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`` calls: strict
acceptance in each template's whitespace, refusals with their reason, values typed by the tool's
schema, the lenient reading, and hostile inputs staying cheap."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, NOT_ALONE_ERROR, TOO_MANY_CALLS_ERROR, detect, parse_output
from tests.support.template_calls import CORPUS

SCHEMAS = {
    "post": {
        "type": "object",
        "properties": {"message": {"type": "string"}, "count": {"type": "integer"}, "tags": {"type": "array"}},
    }
}
# GLM-4.6 writes newlines between the tags, GLM-4.7 none, Ling a newline before each value only
SPELLINGS = [
    "<tool_call>post\n<arg_key>message</arg_key>\n<arg_value>Gather wood</arg_value>\n"
    '<arg_key>count</arg_key>\n<arg_value>3</arg_value>\n<arg_key>tags</arg_key>\n<arg_value>["a"]</arg_value>\n</tool_call>',
    "<tool_call>post<arg_key>message</arg_key><arg_value>Gather wood</arg_value><arg_key>count</arg_key>"
    '<arg_value>3</arg_value><arg_key>tags</arg_key><arg_value>["a"]</arg_value></tool_call>',
    "<tool_call>post\n<arg_key>message</arg_key>\n<arg_value>Gather wood</arg_value><arg_key>count</arg_key>\n"
    '<arg_value>3</arg_value><arg_key>tags</arg_key>\n<arg_value>["a"]</arg_value>\n</tool_call>',
]
WANT = [("post", {"message": "Gather wood", "count": 3, "tags": ["a"]})]


def _parse(text: str, **kw: object) -> object:
    return parse_output(text, "glm", tool_schemas=SCHEMAS, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", SPELLINGS)
def test_every_template_spelling_parses_strictly_with_schema_typed_values(text: str) -> None:
    r = parse_output(text, "glm", tool_schemas=SCHEMAS)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == WANT
    assert r.visible_text == "" and r.consumed == ((0, len(text)),)


def test_a_string_parameter_keeps_text_that_reads_as_a_number() -> None:
    r = _parse("<tool_call>post<arg_key>message</arg_key><arg_value>42</arg_value></tool_call>")
    assert r.calls[0].arguments == {"message": "42"}  # type: ignore[attr-defined]


def test_parallel_calls_and_a_call_without_arguments() -> None:
    text = "<tool_call>wait</tool_call>\n<tool_call>post<arg_key>count</arg_key><arg_value>2</arg_value></tool_call>"
    r = parse_output(text, "glm", tool_schemas=SCHEMAS)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("wait", {}), ("post", {"count": 2})]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Sure. <tool_call>post</tool_call>", NOT_ALONE_ERROR),
        ("no call here", NO_CALL_ERROR),
        ("<tool_call>post</tool_call> done", "expected <tool_call> at offset 28"),
        ('<tool_call>{"name": "post", "arguments": {}}</tool_call>', "expected a tool name after <tool_call>"),
        ("<tool_call>post<arg_key>m</arg_key><arg_value>x</arg_value>", "expected <arg_key> or </tool_call>"),
        ("<tool_call>post<arg_key>m</arg_key>x</tool_call>", "expected <arg_value> at offset"),
        ("<tool_call>post<arg_key>m</arg_key><arg_value>x", "<arg_value> at offset 35 is not closed"),
        ("<tool_call>post<arg_key>m", "<arg_key> at offset 15 is not closed"),
        ("<tool_call>post<arg_key> </arg_key><arg_value>x</arg_value></tool_call>", "bad parameter name"),
        (
            "<tool_call>post<arg_key>m</arg_key><arg_value>1</arg_value><arg_key>m</arg_key><arg_value>2</arg_value></tool_call>",
            "parameter 'm' given twice",
        ),
        ("<tool_call>post extra<arg_key>m</arg_key><arg_value>1</arg_value></tool_call>", "expected <arg_key> or"),
    ],
)
def test_strict_refusals_name_the_reason(text: str, error: str) -> None:
    r = _parse(text)
    assert not r.strict_ok  # type: ignore[attr-defined]
    assert r.error.startswith(error) or error in r.error, r.error  # type: ignore[attr-defined]


def test_a_value_holding_its_own_closing_tag_is_refused_not_guessed() -> None:
    # the template writes the string as it is: the first </arg_value> ends it, the rest is junk
    text = "<tool_call>post<arg_key>message</arg_key><arg_value>a</arg_value>b</arg_value></tool_call>"
    r = _parse(text)
    assert not r.strict_ok and "expected <arg_key> or </tool_call>" in r.error  # type: ignore[attr-defined]


def test_more_calls_than_the_limit_fail_strict() -> None:
    r = _parse("<tool_call>wait</tool_call>" * 257)
    assert r.error == TOO_MANY_CALLS_ERROR  # type: ignore[attr-defined]


def test_lenient_finds_calls_in_prose_and_forgives_a_missing_close() -> None:
    text = "Let me do it. <tool_call>post<arg_key>count</arg_key><arg_value>5</arg_value> and more"
    r = _parse(text)
    assert not r.strict_ok  # type: ignore[attr-defined]
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("post", {"count": 5})]  # type: ignore[attr-defined]


def test_hermes_and_glm_calls_are_told_apart() -> None:
    glm = "<tool_call>post<arg_key>count</arg_key><arg_value>5</arg_value></tool_call>"
    hermes = '<tool_call>{"name": "post", "arguments": {"count": 5}}</tool_call>'
    assert not parse_output(glm, "hermes").strict_ok
    assert "hermes" in parse_output(hermes, "glm").other_protocols
    assert not parse_output(hermes, "glm").lenient_calls  # a JSON body is not a GLM name
    assert parse_output(glm, "hermes").other_protocols == ("glm",)


def test_the_glm_templates_select_glm_and_hermes_templates_stay_hermes() -> None:
    for stem in ("GLM-4.6", "GLM-4.7-Flash", "Spark2.5", "inclusionai-ling-3.0-flash", "poolside-Laguna-XS.2"):
        assert detect(chat_template=(CORPUS / f"{stem}.jinja").read_text(encoding="utf-8")) == "glm", stem
    for stem in ("Qwen-Qwen3-0.6B", "Qwen-Qwen2.5-7B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"):
        assert detect(chat_template=(CORPUS / f"{stem}.jinja").read_text(encoding="utf-8")) == "hermes", stem


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>" * 50_000,
        "<tool_call>f<arg_key>k</arg_key><arg_value>" * 30_000,
        "<tool_call>f<arg_key>" * 50_000,
        "<tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>" * 15_000,
    ],
    ids=["opens", "unclosed-values", "unclosed-keys", "many-calls"],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    parse_output(text, "glm")
    parse_output(text, "json")  # every protocol's lenient scan
    assert time.perf_counter() - t < 1.0
