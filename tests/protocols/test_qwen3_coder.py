"""``qwen3_coder`` and ``seed_oss``: the XML-style ``<function=NAME><parameter=KEY>`` format in its
two wrappers, read strictly (with the reason on failure), leniently, and in linear time."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import MAX_CALLS, NO_CALL_ERROR, NOT_ALONE_ERROR, detect, parse_output
from leader_eval.protocols._xml import MAX_PARAMETERS

SCHEMA = {
    "post": {
        "type": "object",
        "properties": {
            "message": {"type": "string"},
            "count": {"type": "integer"},
            "meta": {"type": "object"},
            "tags": {"type": "array"},
            "flag": {"type": "boolean"},
        },
    }
}

QWEN_CALL = "<tool_call>\n<function=post>\n<parameter=message>\nhi\nthere\n</parameter>\n<parameter=count>\n42\n</parameter>\n</function>\n</tool_call>"
SEED_CALL = "<seed:tool_call>\n<function=post>\n<parameter=message>hi</parameter>\n<parameter=meta>{'a': None, 'b': [True, 'x']}</parameter>\n</function>\n</seed:tool_call>"


def _qwen(text: str):  # type: ignore[no-untyped-def]
    return parse_output(text, "qwen3_coder", eot_tokens=("<|im_end|>",), tool_schemas=SCHEMA)


def _seed(text: str):  # type: ignore[no-untyped-def]
    return parse_output(text, "seed_oss", eot_tokens=("<seed:eos>",), tool_schemas=SCHEMA)


def test_a_qwen3_coder_call_parses_with_values_typed_by_the_schema() -> None:
    r = _qwen(QWEN_CALL + "<|im_end|>")
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("post", {"message": "hi\nthere", "count": 42})]
    assert r.visible_text == ""


def test_parallel_blocks_with_or_without_whitespace_between() -> None:
    wait = "<tool_call>\n<function=wait>\n</function>\n</tool_call>"
    for between in ("", "\n\n"):  # StepFun's template writes them back to back
        r = _qwen(QWEN_CALL + between + wait)
        assert r.strict_ok and [c.name for c in r.calls] == ["post", "wait"]


def test_one_newline_each_side_of_a_value_is_the_format_the_rest_is_the_value() -> None:
    r = _qwen("<tool_call><function=post><parameter=message>\n\n  x \n\n</parameter></function></tool_call>")
    assert r.calls[0].arguments == {"message": "\n  x \n"}


def test_a_string_parameter_keeps_text_that_reads_as_a_number() -> None:
    r = _qwen("<tool_call>\n<function=post>\n<parameter=message>\n42\n</parameter>\n</function>\n</tool_call>")
    assert r.calls[0].arguments == {"message": "42"}


def test_a_function_without_parameters() -> None:
    r = _qwen("<tool_call>\n<function=wait>\n</function>\n</tool_call>")
    assert r.strict_ok and r.calls[0].name == "wait" and r.calls[0].arguments == {}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Sure. " + QWEN_CALL, NOT_ALONE_ERROR),
        (QWEN_CALL + " Done.", "expected <tool_call> at offset"),
        ("plain words", NO_CALL_ERROR),
        ("<function=post>\n</function>", "is not inside <tool_call>"),
        ("<tool_call>\n<function=post>\n<parameter=message>\nhi\n</function>\n</tool_call>", "is not closed"),
        ("<tool_call>\n<function=post>\n</tool_call>", "expected <parameter=KEY> or </function>"),
        ("<tool_call>\n<function=post>\n</function>\n", "expected </tool_call>"),
        (
            "<tool_call>\n<function=post>\n<parameter=a>1</parameter><parameter=a>2</parameter></function></tool_call>",
            "given twice",
        ),
        ('<tool_call>\n{"name": "post", "arguments": {}}\n</tool_call>', "expected <function=NAME>"),
        ("<tool_call>\n<function=>\n</function>\n</tool_call>", "expected <function=NAME>"),
        ("<tool_call>\n<function=a b>\n</function>\n</tool_call>", "expected <function=NAME>"),
        ("<tool_call>\n<function=post>\ntext\n</function>\n</tool_call>", "expected <parameter=KEY>"),
    ],
)
def test_strict_refuses_what_is_not_exactly_the_format(text: str, reason: str) -> None:
    r = _qwen(text)
    assert not r.strict_ok and not r.calls
    assert r.error is not None and reason in r.error


def test_too_many_calls_fail_strict() -> None:
    r = _qwen("<tool_call><function=f></function></tool_call>" * (MAX_CALLS + 1))
    assert not r.strict_ok and "more than" in (r.error or "")


def test_lenient_finds_calls_in_prose_with_or_without_the_wrapper() -> None:
    r = _qwen("I will post. <function=post>\n<parameter=count>\n3\n</parameter>\n</function> and " + QWEN_CALL)
    assert not r.strict_ok
    assert [c.arguments for c in r.lenient_calls] == [{"count": 3}, {"message": "hi\nthere", "count": 42}]
    # the same text is no Seed-OSS call, and the hermes JSON reading finds nothing in it
    assert r.other_protocols == ()


def test_a_hermes_json_call_is_not_a_qwen3_coder_call_but_is_named() -> None:
    r = _qwen('<tool_call>\n{"name": "post", "arguments": {"count": 1}}\n</tool_call>')
    assert not r.strict_ok and not r.lenient_calls
    assert "hermes" in r.other_protocols


def test_seed_oss_reads_python_literals_for_object_parameters() -> None:
    r = _seed(SEED_CALL + "<seed:eos>")
    assert r.strict_ok, r.error
    assert r.calls[0].arguments == {"message": "hi", "meta": {"a": None, "b": [True, "x"]}}


def test_seed_oss_python_literals_outside_json_shapes_stay_text() -> None:
    call = "<seed:tool_call><function=post><parameter=meta>{1: {2, 3}}</parameter><parameter=tags>(1, 2)</parameter></function></seed:tool_call>"
    r = _seed(call)
    assert r.strict_ok
    assert r.calls[0].arguments == {"meta": "{1: {2, 3}}", "tags": "(1, 2)"}


def test_qwen3_coder_objects_are_json_only() -> None:
    r = _qwen("<tool_call><function=post><parameter=meta>{'a': 1}</parameter></function></tool_call>")
    assert r.calls[0].arguments == {"meta": "{'a': 1}"}  # the schema check reports the text


def test_seed_oss_reasoning_block_is_set_aside() -> None:
    r = parse_output(
        "<seed:think>plan</seed:think>\n" + SEED_CALL, "seed_oss", reasoning_tags=("<seed:think>", "</seed:think>")
    )
    assert r.strict_ok and r.reasoning == "plan"


def test_seed_oss_wants_its_own_wrapper() -> None:
    r = _seed(QWEN_CALL)
    assert not r.strict_ok and r.error == NO_CALL_ERROR  # a Qwen3-Coder block is no Seed-OSS call
    assert r.lenient_calls == () and r.other_protocols == ("qwen3_coder",)
    assert not _qwen(SEED_CALL).strict_ok


def test_detect_picks_the_xml_form_before_hermes_and_seed_before_both() -> None:
    def tmpl(s: str) -> str:
        return "{% if tools %}" + s + "{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"

    assert detect(chat_template=tmpl("<tool_call>\n<function=x>\n<parameter=y>")) == "qwen3_coder"
    assert detect(chat_template=tmpl("<seed:tool_call>\n<function=x>\n<parameter=y>")) == "seed_oss"
    assert detect(chat_template=tmpl("<tool_call>{json}</tool_call>")) == "hermes"


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call><function=f><parameter=a>" * 40_000,
        "<function=f><parameter=a>x" * 40_000,
        "<function=" * 100_000,
        "<seed:tool_call><function=f><parameter=k>" * 30_000,
        "<tool_call>\n<function=f>\n" + "<parameter=k>v</parameter>\n" * 50_000,
        "<tool_call>\n<function=f>\n<parameter=k>" + "x" * 1_000_000,
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    for protocol in ("qwen3_coder", "seed_oss"):
        t = time.perf_counter()
        r = parse_output(text, protocol)
        assert not r.strict_ok or r.calls
        assert time.perf_counter() - t < 1.0, protocol


def test_more_parameters_than_any_tool_takes_fail_strict_and_stay_fast() -> None:
    params = "".join(f"<parameter=k{i}>v</parameter>\n" for i in range(40_000))
    t = time.perf_counter()
    r = _qwen(f"<tool_call>\n<function=f>\n{params}</function>\n</tool_call>")
    assert not r.strict_ok and "parameters in one output" in (r.error or "")
    assert time.perf_counter() - t < 0.5
    ok = "".join(f"<parameter=k{i}>v</parameter>\n" for i in range(MAX_PARAMETERS))
    assert _qwen(f"<tool_call>\n<function=f>\n{ok}</function>\n</tool_call>").strict_ok
