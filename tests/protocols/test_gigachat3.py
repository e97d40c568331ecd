"""``gigachat3`` and ``gigachat3_1``: GigaChat's one call per message, after its role header
(3) or its ``<|function_call|>`` token (3.1)."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import REGISTRY, detect, parse_output
from tests.support.template_calls import CORPUS, assistant_output

EOT = ("<|message_sep|>", "</s>")
CALL = '{"name": "a", "arguments": {"n": 1, "s": "function call<|role_sep|>"}}'
V3 = "<|message_sep|>\n\nfunction call<|role_sep|>\n" + CALL
V31 = "<|function_call|>" + CALL


@pytest.mark.parametrize(("protocol", "text"), [("gigachat3", V3), ("gigachat3_1", V31)])
def test_one_call_parses_strictly(protocol: str, text: str) -> None:
    r = parse_output(text + "<|message_sep|>\n\n", protocol, eot_tokens=EOT)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("a", {"n": 1, "s": "function call<|role_sep|>"})]
    assert r.visible_text == "" and r.calls[0].protocol == protocol


@pytest.mark.parametrize(
    ("protocol", "text", "error"),
    [
        ("gigachat3", "function call<|role_sep|>\n" + CALL, "must follow <|message_sep|>"),
        ("gigachat3", "<|message_sep|>\n\nassistant<|role_sep|>\n" + CALL, "expected 'function call<|role_sep|>'"),
        ("gigachat3", "Okay." + V3, "not alone"),
        ("gigachat3", V3 + V3, "one call per message"),
        ("gigachat3", V3 + " done", "one call per message"),
        ("gigachat3", V3.replace("arguments", "parameters"), "unexpected key 'parameters'"),
        ("gigachat3_1", V31 + V31, "one call per message"),
        ("gigachat3_1", "Okay." + V31, "not alone"),
        ("gigachat3_1", V31[:-1], "invalid JSON"),
        ("gigachat3_1", V3, "no tool call"),
    ],
)
def test_strict_refusals_say_why(protocol: str, text: str, error: str) -> None:
    r = parse_output(text, protocol, eot_tokens=EOT)
    assert not r.strict_ok and error in (r.error or ""), r.error


def test_the_role_name_alone_is_prose_not_markup() -> None:
    r = parse_output("I will make a function call now.", "gigachat3")
    assert not r.strict_ok and r.error == "no tool call" and r.lenient_calls == ()
    p = REGISTRY["gigachat3"]
    assert p.is_attempt(V3) and p.is_attempt("function call<|role_sep|>")
    assert not p.is_attempt("function call: pause") and not p.owns("function call")


def test_the_templates_render_only_the_first_of_parallel_calls() -> None:
    # the exclusion in docs/protocols.md: a second call never reaches the text
    for stem in ("GigaChat3-10B-A1.8B", "GigaChat3.1-10B-A1.8B"):
        text = assistant_output(CORPUS / f"{stem}.jinja", [("a", {"n": 1}), ("b", {})])
        assert '"b"' not in text


def test_detected_from_the_template() -> None:
    for stem, protocol in (("GigaChat3-10B-A1.8B", "gigachat3"), ("GigaChat3.1-10B-A1.8B", "gigachat3_1")):
        assert detect(chat_template=(CORPUS / f"{stem}.jinja").read_text(encoding="utf-8")) == protocol


@pytest.mark.parametrize("protocol", ["gigachat3", "gigachat3_1"])
@pytest.mark.parametrize(
    "text",
    [
        "function call<|role_sep|>" * 60_000,
        "<|function_call|>{" * 60_000,
        V3 + V31 + '{"name": "a", "arguments": {"m": "' + "x" * 1_000_000,
    ],
)
def test_hostile_inputs_stay_fast(protocol: str, text: str) -> None:
    t = time.perf_counter()
    assert not parse_output(text, protocol).strict_ok
    assert time.perf_counter() - t < 2.0  # quadratic work would take minutes; the bench times it
