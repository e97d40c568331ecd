"""DeepSeek DSML blocks (``deepseek_v32``: ``function_calls``, ``deepseek_v4``: ``tool_calls``):
strict acceptance with ``string="true|false"`` typing, each version refusing the other's block,
refusals with their reason, the lenient reading, hostile inputs."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, NOT_ALONE_ERROR, REGISTRY, TOO_MANY_CALLS_ERROR, parse_output

D = "\uff5cDSML\uff5c"
BLOCK = {"deepseek_v32": "function_calls", "deepseek_v4": "tool_calls"}


def _param(key: str, value: str, string: str = "true") -> str:
    return f'<{D}parameter name="{key}" string="{string}">{value}</{D}parameter>\n'


def _invoke(name: str, *params: str) -> str:
    return f'<{D}invoke name="{name}">\n{"".join(params)}</{D}invoke>\n'


def _block(protocol: str, *invokes: str) -> str:
    b = BLOCK[protocol]
    return f"<{D}{b}>\n{''.join(invokes)}</{D}{b}>"


@pytest.mark.parametrize("protocol", sorted(BLOCK))
def test_the_string_attribute_types_each_value(protocol: str) -> None:
    text = "\n\n" + _block(
        protocol,
        _invoke(
            "post",
            _param("message", '42 "q" <b>x</b>\nline'),
            _param("count", "3", "false"),
            _param("meta", '{"a": [true, null]}', "false"),
        ),
        _invoke("wait"),
    )
    # a schema that says string for count does not turn the model's number into text
    r = parse_output(text, protocol, tool_schemas={"post": {"properties": {"count": {"type": "string"}}}})
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [
        ("post", {"message": '42 "q" <b>x</b>\nline', "count": 3, "meta": {"a": [True, None]}}),
        ("wait", {}),
    ]
    assert r.visible_text == ""


def test_each_version_refuses_the_others_block() -> None:
    v32 = _block("deepseek_v32", _invoke("wait"))
    v4 = _block("deepseek_v4", _invoke("wait"))
    assert parse_output(v32, "deepseek_v4").error == f"calls opened with <{D}function_calls>, expected <{D}tool_calls>"
    assert parse_output(v4, "deepseek_v32").error == f"calls opened with <{D}tool_calls>, expected <{D}function_calls>"
    assert parse_output(v32, "deepseek_v32").strict_ok and parse_output(v4, "deepseek_v4").strict_ok


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Sure. " + _block("deepseek_v4", _invoke("wait")), NOT_ALONE_ERROR),
        ("no call", NO_CALL_ERROR),
        (_block("deepseek_v4", _invoke("wait")) + " done", "expected <\uff5cDSML\uff5ctool_calls> at offset"),
        (_block("deepseek_v4"), 'expected <\uff5cDSML\uff5cinvoke name="..."> at offset'),
        (
            _block("deepseek_v4", _invoke("p", _param("n", "three", "false"))),
            'string="false" but its value is not JSON',
        ),
        (
            _block("deepseek_v4", _invoke("p", f'<{D}parameter name="n">1</{D}parameter>')),
            "expected <\uff5cDSML\uff5cparameter",
        ),
        (_block("deepseek_v4", _invoke("p", _param("n", "1"), _param("n", "2"))), "parameter 'n' given twice"),
        (
            _block("deepseek_v4", _invoke("p", _param("n", "1")))[: -len(f"</{D}tool_calls>")],
            "expected <\uff5cDSML\uff5cinvoke or",
        ),
        (
            f"<{D}tool_calls>\n<{D}invoke name='p'>\n</{D}invoke>\n</{D}tool_calls>",
            'expected <\uff5cDSML\uff5cinvoke name="...">',
        ),
    ],
)
def test_strict_refusals_name_the_reason(text: str, error: str) -> None:
    r = parse_output(text, "deepseek_v4")
    assert not r.strict_ok
    assert error in r.error, r.error  # type: ignore[operator]


def test_a_value_holding_the_closing_tag_is_refused_not_guessed() -> None:
    text = _block("deepseek_v4", _invoke("p", _param("m", f"a</{D}parameter>b")))
    assert not parse_output(text, "deepseek_v4").strict_ok


def test_too_many_calls_fail_strict() -> None:
    assert parse_output(_block("deepseek_v4", *[_invoke("wait")] * 257), "deepseek_v4").error == TOO_MANY_CALLS_ERROR


def test_lenient_reads_invokes_anywhere_loose_attributes_typed_by_schema() -> None:
    text = f"I'll post <{D}invoke name=post><{D}parameter name=count>5</{D}parameter></{D}invoke> ok"
    r = parse_output(text, "deepseek_v4", tool_schemas={"post": {"properties": {"count": {"type": "integer"}}}})
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("post", {"count": 5})]
    assert set(parse_output(text, "hermes").other_protocols) == {"deepseek_v32", "deepseek_v4"}


def test_their_markup_is_their_own() -> None:
    v4 = REGISTRY["deepseek_v4"]
    assert v4.is_attempt(f"\n\n<{D}tool_calls>") and not v4.is_attempt(f"<{D}function_calls>")
    assert v4.owns(f'<{D}invoke name="post">') and v4.owns(f"</{D}parameter>")
    assert v4.owns(f'<{D}parameter name="m" string="true">') and not v4.owns("<invoke>")


@pytest.mark.parametrize(
    "text",
    [
        f'<{D}invoke name="f"><{D}parameter name="k" string="true">' * 15_000,
        f"<{D}function_calls><{D}tool_calls>" * 30_000,
        f'<{D}tool_calls><{D}invoke name="f"><{D}parameter name="k" string="false">[[[[' * 10_000,
    ],
    ids=["unclosed-parameters", "opens", "bad-json"],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    parse_output(text, "deepseek_v4")
    parse_output(text, "json")
    assert time.perf_counter() - t < 1.0
