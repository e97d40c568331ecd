"""gpt-oss harmony function calls. openai-harmony (the vendor's library) needs the o200k vocabulary,
which it downloads on first use, so these tests follow its documented format instead: the
recipient in the role header (the chat template) or after the channel (the documentation),
``<|constrain|>json`` optional, ``<|call|>`` ending the turn."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NOT_ALONE_ERROR, REGISTRY, detect, parse_output
from leader_eval.suite.chat_template import render_chat_template
from tests.support.template_calls import CORPUS, ONE_CALL, SCHEMAS, TOOLS

TEMPLATE_SHAPE = ' to=functions.pause<|channel|>commentary json<|message|>{"minutes": 5}<|call|>'
DOC_SHAPE = '<|channel|>commentary to=functions.pause <|constrain|>json<|message|>{"minutes": 5}<|call|>'
ANALYSIS = ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant")


@pytest.mark.parametrize(
    "text",
    [
        TEMPLATE_SHAPE,
        DOC_SHAPE,
        DOC_SHAPE.replace(" <|constrain|>json", ""),
        TEMPLATE_SHAPE.removesuffix("<|call|>"),  # a server strips the stop token
        "<|start|>assistant" + TEMPLATE_SHAPE,
        "<|start|>assistant" + DOC_SHAPE + "<|return|>",
    ],
)
def test_strict_reads_both_header_orders(text: str) -> None:
    r = parse_output(text, "harmony", eot_tokens=("<|return|>",))
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == [("pause", {"minutes": 5})]
    assert r.visible_text == ""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (TEMPLATE_SHAPE.replace("commentary", "analysis"), "on the 'analysis' channel"),
        (TEMPLATE_SHAPE.replace("to=functions.", "to="), "no tool call"),
        (TEMPLATE_SHAPE.replace("<|message|>", " "), "expected a harmony header"),
        (TEMPLATE_SHAPE.replace('{"minutes": 5}', "[5]"), "must be a JSON object"),
        (TEMPLATE_SHAPE + " Done.", "text after <|call|>"),
        (TEMPLATE_SHAPE + "<|start|>assistant" + TEMPLATE_SHAPE, "harmony ends the turn at the call"),
        (TEMPLATE_SHAPE.replace("<|call|>", "<|end|>"), "expected <|call|>"),
        ('to=functions.pause json<|message|>{"minutes": 5}<|call|>', "expected a harmony header"),
    ],
)
def test_strict_refusals_name_the_reason(text: str, reason: str) -> None:
    r = parse_output(text, "harmony")
    assert not r.strict_ok and r.calls == ()
    assert reason in (r.error or "")


def test_prose_before_fails_strict_and_lenient_finds_the_call() -> None:
    r = parse_output("Let me pause." + TEMPLATE_SHAPE, "harmony")
    assert r.error == NOT_ALONE_ERROR
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("pause", {"minutes": 5})]


def test_an_analysis_message_before_the_call_is_the_reasoning_block() -> None:
    text = "<|channel|>analysis<|message|>Need a pause.<|end|><|start|>assistant" + TEMPLATE_SHAPE
    r = parse_output(text, "harmony", reasoning_tags=ANALYSIS)
    assert r.strict_ok, r.error
    assert r.reasoning == "Need a pause." and r.calls[0].name == "pause"
    # declared only up to <|end|>, the next message's header is still the call's own
    r = parse_output(text, "harmony", reasoning_tags=(ANALYSIS[0], "<|end|>"))
    assert r.strict_ok, r.error


def test_the_template_with_thinking_renders_what_the_parser_reads() -> None:
    """The gpt-oss template writes a tool-call turn's thinking as an analysis message first."""
    template = (CORPUS / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8")
    base = [{"role": "user", "content": "Update the team."}]
    turn = {
        "role": "assistant",
        "thinking": "Post it.",
        "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in ONE_CALL],
    }
    prompt = render_chat_template(template, base, tools=TOOLS, add_generation_prompt=True)
    full = render_chat_template(template, [*base, turn], tools=TOOLS, add_generation_prompt=False)
    assert full.startswith(prompt.removesuffix("<|start|>assistant"))
    out = full[len(prompt) :]
    assert out.startswith("<|channel|>analysis<|message|>Post it.<|end|><|start|>assistant to=functions.")
    r = parse_output(out, "harmony", reasoning_tags=ANALYSIS, tool_schemas=SCHEMAS)
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == ONE_CALL


def test_the_markup_is_the_protocols_own_and_prose_is_not() -> None:
    p = REGISTRY["harmony"]
    assert p.is_attempt(" to=functions.pause<|channel|>") and p.is_attempt("<|channel|>commentary to=functions.x")
    assert all(p.owns(t) for t in ("<|call|>", "<|constrain|>json", "to=functions.pause"))
    assert not p.is_attempt("to=the team") and not p.owns("functions.") and not p.owns("commentary")
    # the frame of every harmony message (a final answer's too) is no call markup
    assert not any(p.owns(t) for t in ("<|message|>", "<|channel|>", "<|start|>assistant", "<|channel|>final"))


@pytest.mark.parametrize(
    "text",
    [
        "to=functions." * 50_000,
        "to=functions.f<|channel|>commentary" + " " * 200_000 + "x",
        "<|channel|>commentary" + " " * 200_000 + "to=functions.f",
        ("to=functions.f<|channel|>commentary json<|message|>{" + '"a": [' * 50) * 2_000,
        "to=functions." + "a" * 300_000,
        ("to=functions.f" + " " * 190 + "<|message|>") * 2_000,
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    r = parse_output(text, "harmony")
    assert time.perf_counter() - t < 1.0
    assert not r.strict_ok


def test_tinker_cookbooks_gpt_oss_renderers_speak_harmony() -> None:
    assert detect(renderer="gpt_oss_low_reasoning") == "harmony"
    assert detect(renderer="gpt_oss_no_sysprompt") == "harmony"
