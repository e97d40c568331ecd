"""``lfm2``: Liquid's Python list of calls between ``<|tool_call_start|>`` and
``<|tool_call_end|>``, read as ``pythonic`` reads a list; what the LFM2.5 template cannot express
is refused, not guessed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from leader_eval.protocols import REGISTRY, detect, parse_output
from tests.support.template_calls import CORPUS, RICH_ARGS, SCHEMAS, assistant_output

LFM25 = CORPUS / "LFM2.5-8B-A1B.jinja"
EOT = ("<|im_end|>",)


def _wrap(body: str) -> str:
    return f"<|tool_call_start|>{body}<|tool_call_end|>"


def test_the_list_parses_with_its_own_protocol_name_and_spans() -> None:
    text = _wrap("[a(n=1, s='x', t=True, z=None, xs=[1, 'b'], d={'k': 2}), team.b()]") + "<|im_end|>"
    r = parse_output(text, "lfm2", eot_tokens=EOT)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [
        ("a", {"n": 1, "s": "x", "t": True, "z": None, "xs": [1, "b"], "d": {"k": 2}}),
        ("team.b", {}),
    ]
    assert all(c.protocol == "lfm2" and text[c.span[0] : c.span[1]] == c.raw for c in r.calls if c.span)
    assert r.calls[1].raw == "team.b()"


# what the template can express: strings without a single quote or backslash (a raw line break
# inside the quotes is read as the line break it writes), mappings without true/false/null (it
# writes a string raw between single quotes and a mapping as JSON)
EXPRESSIBLE: dict[str, Any] = {**RICH_ARGS, "message": RICH_ARGS["message"] + "\nand a third line"}


@pytest.mark.parametrize(
    "calls",
    [[("post_update", EXPRESSIBLE)], [("post_update", EXPRESSIBLE), ("assign_task", {"owner": "Ravi", "priority": 2})]],
)
def test_what_the_template_can_express_round_trips(calls: list[tuple[str, dict[str, Any]]]) -> None:
    text = assistant_output(LFM25, calls)
    r = parse_output(text, "lfm2", eot_tokens=EOT, tool_schemas=SCHEMAS)
    assert r.strict_ok, (r.error, text)
    assert [(c.name, c.arguments) for c in r.calls] == calls


@pytest.mark.parametrize(
    "args",
    [{"message": "it's"}, {"meta": {"ok": True}}, {"meta": {"x": None}}],
)
def test_what_the_template_cannot_express_is_refused_not_guessed(args: dict[str, Any]) -> None:
    text = assistant_output(LFM25, [("post_update", args)])
    r = parse_output(text, "lfm2", eot_tokens=EOT, tool_schemas=SCHEMAS)
    assert not r.strict_ok
    assert "not a Python expression" in (r.error or "") or "not a literal" in (r.error or ""), r.error


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Okay. " + _wrap("[a()]"), "not alone"),
        (_wrap("[a()]") + " done", "must end with <|tool_call_end|>"),
        ("<|tool_call_start|>[a()]", "must end with <|tool_call_end|>"),
        (_wrap("a()"), "inside a list"),
        (_wrap("[]"), "empty list"),
        (_wrap("[a()]") + _wrap("[b()]"), "a second <|tool_call_start|>"),
        (_wrap("[a(1)]"), "positional arguments"),
        (_wrap(" "), "no calls between"),
        ("[a()]", "no tool call"),
    ],
)
def test_strict_refusals_say_why(text: str, error: str) -> None:
    r = parse_output(text, "lfm2", eot_tokens=EOT)
    assert not r.strict_ok and error in (r.error or ""), r.error


def test_lenient_reading_finds_each_block() -> None:
    text = "First " + _wrap("[a(n=1)]") + " then <|tool_call_start|>[b(m=2)] and prose"
    r = parse_output(text, "lfm2")
    assert [(c.name, c.arguments, c.protocol) for c in r.lenient_calls] == [
        ("a", {"n": 1}, "lfm2"),
        ("b", {"m": 2}, "lfm2"),
    ]
    assert all(text[c.span[0] : c.span[1]] == c.raw for c in r.lenient_calls if c.span)
    assert "pythonic" not in r.other_protocols  # the list inside the tokens is lfm2's own
    assert REGISTRY["lfm2"].is_attempt("<|tool_call_start|>[") and REGISTRY["lfm2"].owns("<|tool_call_end|>")


@pytest.mark.parametrize("stem", ["LFM2.5-8B-A1B", "LFM2-8B-A1B", "LFM2.5-Instruct"])
def test_detected_from_liquids_templates(stem: str) -> None:
    assert detect(chat_template=(CORPUS / f"{stem}.jinja").read_text(encoding="utf-8")) == "lfm2"


@pytest.mark.parametrize(
    "text",
    [
        "<|tool_call_start|>[a(" * 60_000,
        "<|tool_call_start|>" * 60_000 + "<|tool_call_end|>",
        _wrap("[" + ", ".join(["a(m='hi')"] * 300) + "]"),
        _wrap("[a(m='" + "x" * 1_000_000 + "')]") + " tail",
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    assert not parse_output(text, "lfm2").strict_ok
    assert time.perf_counter() - t < 2.0  # quadratic work would take minutes; the bench times it


def test_an_apostrophe_in_a_comment_opens_no_string() -> None:
    """The line-break reading tracks quotes; a comment's apostrophe must not hide the next call."""
    text = "<|tool_call_start|>[f(a=1),  # don't\n g(b=2)  # won't\n]<|tool_call_end|>"
    r = parse_output(text, "lfm2")
    assert r.strict_ok and [c.name for c in r.calls] == ["f", "g"]
    hidden = "<|tool_call_start|>[f(a=1), # it's\n g(b=((( '\n]<|tool_call_end|>"
    assert not parse_output(hidden, "lfm2").strict_ok
