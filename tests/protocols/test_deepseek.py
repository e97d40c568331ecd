"""DeepSeek's two tool-call variants: ``deepseek_v3`` (V3 / R1, fenced JSON after the name) and
``deepseek_v31`` (V3.1, JSON right after the separator)."""

from __future__ import annotations

import json
import time

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from leader_eval.protocols import NOT_ALONE_ERROR, REGISTRY, detect, parse_output
from leader_eval.protocols.deepseek import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP
from tests.support.template_calls import CORPUS, PARALLEL_CALLS, SCHEMAS

EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"


def v3(name: str, args: str, gap: str = "\n") -> str:
    return f"{CALL_BEGIN}function{SEP}{name}{gap}```json{gap}{args}{gap}```{CALL_END}"


def v31(name: str, args: str) -> str:
    return f"{CALL_BEGIN}{name}{SEP}{args}{CALL_END}"


def section(*calls: str, sep: str = "") -> str:
    return CALLS_BEGIN + sep.join(calls) + CALLS_END


@pytest.mark.parametrize(
    ("protocol", "text", "calls"),
    [
        ("deepseek_v3", section(v3("pause", '{"minutes": 5}')), [("pause", {"minutes": 5})]),
        (
            "deepseek_v3",
            section(v3("a", '{"x": "```"}'), v3("b.c", "{}"), sep="\n") + EOS,
            [("a", {"x": "```"}), ("b.c", {})],
        ),
        # blanks the templates do not write but a sampler may: around the fence and the calls
        ("deepseek_v3", section(v3("pause", '{"minutes": 5}', gap=" \n ")), [("pause", {"minutes": 5})]),
        ("deepseek_v31", section(v31("pause", '{"minutes": 5}')), [("pause", {"minutes": 5})]),
        (
            "deepseek_v31",
            section(v31("a", '{"s": "<\\uff5ctool\\u2581call\\u2581end\\uff5c>"}'), v31("b", "{}")),
            [("a", {"s": CALL_END}), ("b", {})],
        ),
    ],
)
def test_strict_reads_each_variant(protocol: str, text: str, calls: list[tuple[str, dict[str, object]]]) -> None:
    r = parse_output(text, protocol, eot_tokens=(EOS,))
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == calls
    assert r.visible_text == ""


@pytest.mark.parametrize(
    ("protocol", "text", "reason"),
    [
        ("deepseek_v3", CALLS_BEGIN + v3("pause", "{}"), "section not closed"),
        ("deepseek_v3", v3("pause", "{}") + CALLS_END, "without the"),
        ("deepseek_v3", section(v31("pause", "{}")), "```json fence"),
        ("deepseek_v31", section(v3("pause", "{}")), "found the V3/R1 shape"),
        ("deepseek_v3", section(v3("pause", "[1]")), "must be a JSON object"),
        ("deepseek_v3", section(v3("pause", "{}").replace("\n```<", "<")), "closing ``` fence"),
        ("deepseek_v31", section(v31("pause", '"{}"')), "must be a JSON object"),
        ("deepseek_v31", section(v31("pause", "{}")) + " Done.", "text after"),
        ("deepseek_v31", section(v31("pause", "{}"), "Also this."), "expected"),
        ("deepseek_v31", CALLS_BEGIN + CALLS_END, "expected"),
    ],
)
def test_strict_refusals_name_the_reason(protocol: str, text: str, reason: str) -> None:
    r = parse_output(text, protocol)
    assert not r.strict_ok and r.calls == ()
    assert reason in (r.error or "")


def test_prose_around_a_section_fails_strict_and_lenient_finds_the_call() -> None:
    r = parse_output("Pausing now. " + section(v31("pause", '{"minutes": 5}')), "deepseek_v31")
    assert r.error == NOT_ALONE_ERROR
    assert [(c.name, c.arguments) for c in r.lenient_calls] == [("pause", {"minutes": 5})]


def test_each_variant_names_the_other_when_the_model_wrote_it() -> None:
    r = parse_output(section(v3("pause", "{}")), "deepseek_v31")
    assert not r.strict_ok and r.lenient_calls == ()
    assert r.other_protocols == ("deepseek_v3",)
    r = parse_output(section(v31("pause", "{}")), "deepseek_v3")
    assert r.other_protocols == ("deepseek_v31",)


def test_the_markup_is_the_protocols_own() -> None:
    for name in ("deepseek_v3", "deepseek_v31"):
        p = REGISTRY[name]
        assert p.is_attempt("  " + CALLS_BEGIN) and p.is_attempt(CALL_BEGIN)
        assert all(p.owns(t) for t in (CALLS_END, CALL_END, SEP))
        assert not p.owns("function") and not p.is_attempt("```json")


def _render_keeping_none(calls: list[tuple[str, dict[str, object]]]) -> str:
    """R1-Distill-Llama-8B's template as a renderer that keeps None values (llama.cpp's does;
    transformers drops them, so the project's renderer gets no call out of it)."""
    env = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined)
    template = env.from_string((CORPUS / "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja").read_text("utf-8"))
    tool_calls = [
        {"type": "function", "function": {"name": n, "arguments": json.dumps(a, ensure_ascii=False)}} for n, a in calls
    ]
    messages = [{"role": "user", "content": "Go."}, {"role": "assistant", "content": None, "tool_calls": tool_calls}]
    out = template.render(messages=messages, bos_token="", add_generation_prompt=False)
    return out.split("<\uff5cAssistant\uff5c>", 1)[1]


def test_r1_distill_llama_rendered_with_none_kept_parses_parallel_and_refuses_its_unclosed_single_call() -> None:
    parallel = parse_output(
        _render_keeping_none(PARALLEL_CALLS), "deepseek_v3", eot_tokens=(EOS,), tool_schemas=SCHEMAS
    )
    assert parallel.strict_ok, parallel.error
    assert [(c.name, c.arguments) for c in parallel.calls] == PARALLEL_CALLS
    # the template closes the section only after a second call: a lone call is left open, and
    # the parser says so rather than guessing the turn ended there
    one = parse_output(_render_keeping_none(PARALLEL_CALLS[:1]), "deepseek_v3", eot_tokens=(EOS,))
    assert not one.strict_ok and "section not closed" in (one.error or "")
    assert [c.name for c in one.lenient_calls] == ["post_update"]


@pytest.mark.parametrize("protocol", ["deepseek_v3", "deepseek_v31"])
@pytest.mark.parametrize(
    "text",
    [
        CALLS_BEGIN + CALL_BEGIN * 50_000,
        CALLS_BEGIN + (CALL_BEGIN + "function" + SEP + "x" * 300) * 2_000,
        CALL_BEGIN + "a" * 200_000 + SEP + "{" * 50_000,
        (CALL_BEGIN + "f" + SEP + '{"a": "' + "x" * 100) * 3_000,
        CALLS_BEGIN + v31("a", "{}") * 300 + CALLS_END,
    ],
)
def test_hostile_inputs_stay_fast(protocol: str, text: str) -> None:
    t = time.perf_counter()
    r = parse_output(text, protocol)
    assert time.perf_counter() - t < 1.0
    assert not r.strict_ok


def test_tinker_cookbooks_deepseek_renderer_speaks_v31() -> None:
    assert detect(renderer="deepseekv3_disable_thinking") == "deepseek_v31"
