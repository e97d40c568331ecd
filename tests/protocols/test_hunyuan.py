"""Hunyuan (Hy3) ``<tool_calls:opensource>`` sections: strict acceptance, the checkpoint's token
suffix, refusals with their reason, schema-typed values, the lenient reading, hostile inputs."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, NOT_ALONE_ERROR, REGISTRY, TOO_MANY_CALLS_ERROR, parse_output

SCHEMAS = {"post": {"type": "object", "properties": {"message": {"type": "string"}, "count": {"type": "integer"}}}}


def _call(name: str = "post", suffix: str = ":opensource", **args: str) -> str:
    pairs = "".join(
        f"<arg_key{suffix}>{k}</arg_key{suffix}>\n<arg_value{suffix}>{v}</arg_value{suffix}>\n" for k, v in args.items()
    )
    return f"<tool_call{suffix}>{name}<tool_sep{suffix}>\n{pairs}</tool_call{suffix}>\n"


def _section(*calls: str, suffix: str = ":opensource") -> str:
    return f"<tool_calls{suffix}>\n{''.join(calls)}</tool_calls{suffix}>"


def test_a_section_of_calls_parses_strictly_with_schema_typed_values() -> None:
    text = _section(_call(message="42", count="3"), _call("wait"))
    r = parse_output(text, "hunyuan", tool_schemas=SCHEMAS)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("post", {"message": "42", "count": 3}), ("wait", {})]
    assert r.visible_text == "" and r.consumed == ((0, len(text)),)


def test_another_checkpoints_suffix_is_read_but_not_mixed() -> None:
    ok = _section(_call(suffix=":6124c78e", count="1"), suffix=":6124c78e")
    assert parse_output(ok, "hunyuan").strict_ok
    mixed = _section(_call(suffix=":opensource", count="1"), suffix=":6124c78e")
    r = parse_output(mixed, "hunyuan")
    assert not r.strict_ok and r.error.startswith("expected <tool_call:6124c78e> at offset")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Sure. " + _section(_call(count="1")), NOT_ALONE_ERROR),
        ("plain reply", NO_CALL_ERROR),
        (_section(_call(count="1")) + " done", "text after </tool_calls:opensource>"),
        ("<tool_calls:opensource></tool_calls:opensource>", "expected <tool_call:opensource> at offset"),
        (_section(_call(count="1"))[: -len("</tool_calls:opensource>")], "expected <tool_call:opensource> or"),
        (
            "<tool_calls:opensource><tool_call:opensource>post<arg_key:opensource>m</arg_key:opensource>",
            "expected <tool_sep:opensource>",
        ),
        (_section(_call(count="1")).replace("</arg_value:opensource>", ""), "is not closed"),
    ],
)
def test_strict_refusals_name_the_reason(text: str, error: str) -> None:
    r = parse_output(text, "hunyuan")
    assert not r.strict_ok
    assert error in r.error, r.error  # type: ignore[operator]


def test_too_many_calls_fail_strict() -> None:
    assert parse_output(_section(*[_call("wait")] * 257), "hunyuan").error == TOO_MANY_CALLS_ERROR


def test_lenient_finds_a_call_outside_a_section() -> None:
    r = parse_output("I will post. " + _call(count="7") + " ok", "hunyuan", tool_schemas=SCHEMAS)
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("post", {"count": 7})]
    assert parse_output("I will post. " + _call(count="7"), "hermes").other_protocols == ("hunyuan",)


def test_its_markup_is_its_own_and_token_shaped() -> None:
    p = REGISTRY["hunyuan"]
    assert p.is_attempt("\n<tool_calls:opensource>") and p.owns("<arg_value:opensource>")
    assert p.owns("</tool_call:opensource>") and not p.owns("<tool_call>") and not p.owns("tool_sep")


@pytest.mark.parametrize(
    "text",
    [
        "<tool_calls:opensource><tool_call:opensource>f<tool_sep:opensource><arg_key:opensource>k"
        "</arg_key:opensource><arg_value:opensource>" * 8_000,
        "".join(f"<tool_call:s{i}>f<tool_sep:s{i}>" for i in range(40_000)),
        "<tool_call:opensource>" * 50_000,
    ],
    ids=["unclosed-values", "many-suffixes", "opens"],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    parse_output(text, "hunyuan")
    parse_output(text, "json")
    assert time.perf_counter() - t < 1.0
