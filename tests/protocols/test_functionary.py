"""``functionary``: Functionary v3.1's ``<function=NAME>{json}</function>`` calls."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import REGISTRY, detect, parse_output
from tests.support.template_calls import CORPUS

EOT = ("<|eot_id|>", "<|eom_id|>")


def test_calls_follow_one_another_each_with_its_span() -> None:
    text = '<function=a>{"n": 1, "s": "x</function>"}</function>\n<function=team.b>{}</function><|eom_id|>'
    r = parse_output(text, "functionary", eot_tokens=EOT)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("a", {"n": 1, "s": "x</function>"}), ("team.b", {})]
    assert [c.raw for c in r.calls] == [
        '<function=a>{"n": 1, "s": "x</function>"}</function>',
        "<function=team.b>{}</function>",
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('Sure. <function=a>{"n": 1}</function>', "not alone"),
        ('<function=a>{"n": 1}</function> ok', "expected <function=NAME>"),
        ('<function=a>{"n": 1}', "expected </function>"),
        ("<function=a>[1]</function>", "must be a JSON object"),
        ('<function=a>"{\\"n\\": 1}"</function>', "JSON-encoded string"),
        ('<function=a b>{"n": 1}</function>', "expected <function=NAME>"),
        ("<function=a>\n<parameter=n>\n1\n</parameter>\n</function>", "invalid JSON"),
        ('<|python_tag|>{"code": "print(1)"}', "no tool call"),
    ],
)
def test_strict_refusals_say_why(text: str, error: str) -> None:
    r = parse_output(text, "functionary", eot_tokens=EOT)
    assert not r.strict_ok and error in (r.error or ""), r.error


def test_lenient_reading_finds_calls_in_prose() -> None:
    r = parse_output('I will: <function=a>"{\\"n\\": 1}"</function> then <function=b>{}', "functionary")
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("a", {"n": 1}), ("b", {})]
    p = REGISTRY["functionary"]
    assert p.is_attempt("<function=a>{") and p.owns("</function>") and not p.is_attempt("<function>")


def test_detected_from_the_template_before_llama3_json() -> None:
    template = (CORPUS / "meetkai-functionary-medium-v3.1.jinja").read_text(encoding="utf-8")
    assert "<|python_tag|>" in template and detect(chat_template=template) == "functionary"
    for qwen in ("Qwen3-Coder", "Qwen3.5-4B"):  # their <function=...> sits inside <tool_call>
        assert detect(chat_template=(CORPUS / f"{qwen}.jinja").read_text(encoding="utf-8")) != "functionary"


@pytest.mark.parametrize(
    "text",
    ["<function=" * 100_000, '<function=a>{"s": "' * 50_000, '<function=a>{"m": "' + "x" * 1_000_000 + '"} tail'],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    assert not parse_output(text, "functionary").strict_ok
    assert time.perf_counter() - t < 2.0  # quadratic work would take minutes; the bench times it
