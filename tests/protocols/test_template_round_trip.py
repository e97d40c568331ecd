"""Every real chat template's tool calls parse back, strictly, under ``detect()``'s protocol.

For every template in fixtures/chat_templates/ that writes tool calls into the assistant turn,
one call and two parallel calls (arguments of every JSON type, strings with quotes, newlines,
Unicode and markup-like text) are rendered through the project's renderer
(``tests/support/template_calls.py``) and parsed under the protocol ``detect`` picks for the
template: the calls come back equal, values typed by the tool's schema; the same text with prose
before or after fails strict parsing. ``NATIVE`` is the family table (docs/protocols.md): which
protocol each template speaks, so a fallback that happens to parse cannot pass for the native one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import ChatTemplateError
from leader_eval.protocols import detect, parse_output
from leader_eval.types import END_OF_TURN_TOKENS
from tests.support.template_calls import (
    CORPUS,
    ONE_CALL,
    PARALLEL_CALLS,
    SCHEMAS,
    TEMPLATES,
    assistant_output,
    end_of_turn,
    renders_calls,
    takes_tools,
)

#: template stem -> the protocol it speaks natively (every template that renders tool calls)
NATIVE: dict[str, str] = {
    "Bielik-11B-v3.0-Instruct": "hermes",
    "GLM-4.6": "glm",
    "GLM-4.7-Flash": "glm",
    "Kimi-K3": "kimi_k3",
    "Spark2.5": "glm",
    "deepseek-ai-DeepSeek-V3.2": "deepseek_v32",
    "deepseek-ai-DeepSeek-V4": "deepseek_v4",
    "deepseek-ai-DeepSeek-V4-Flash-0731": "deepseek_v4",
    "inclusionai-ling-3.0-flash": "glm",
    "poolside-Laguna-S-2.1": "glm",
    "poolside-Laguna-XS-2.1": "glm",
    "poolside-Laguna-XS.2": "glm",
    "tencent-Hy3": "hunyuan",
    "MiMo-VL": "hermes",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "hermes",
    "Qwen-QwQ-32B": "hermes",
    "Qwen-Qwen2.5-7B-Instruct": "hermes",
    "Qwen-Qwen3-0.6B": "hermes",
    "Reka-Edge": "hermes",
    "ibm-granite-granite-4.0": "hermes",
    "ibm-granite-granite-4.1": "hermes",
    "meta-llama-Llama-3.1-8B-Instruct": "llama3_json",
    "meta-llama-Llama-3.2-3B-Instruct": "llama3_json",
    "meta-llama-Llama-3.3-70B-Instruct": "llama3_json",
    "moonshotai-Kimi-K2": "kimi_k2",
    "google-gemma-4-31B-it": "gemma4",
    "google-gemma-4-31B-it-interleaved": "gemma4",
    "meetkai-functionary-medium-v3.1": "functionary",
    "Apertus-8B-Instruct": "apertus",
    "unsloth-Apriel-1.5": "apriel",
    "Apriel-1.6-15b-Thinker-fixed": "apriel",
    "GigaChat3-10B-A1.8B": "gigachat3",
    "GigaChat3.1-10B-A1.8B": "gigachat3_1",
    "LFM2.5-8B-A1B": "lfm2",
    "NVIDIA-Nemotron-Nano-v2": "nemotron_v2",
    "Qwen3-Coder": "qwen3_coder",
    "Qwen3.5-4B": "qwen3_coder",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "qwen3_coder",
    "StepFun3.5-Flash": "qwen3_coder",
    "ByteDance-Seed-OSS": "seed_oss",
    "MiniMax-M1": "minimax_m1",
    "MiniMax-M2": "minimax_m2",
    "MiniMax-M3": "minimax_m3",
    "openbmb-MiniCPM5-1B": "minicpm5",
    "muse-glimmer": "muse_glimmer",
    # group c (issue 22)
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "deepseek_v3",
    "deepseek-ai-DeepSeek-V3.1": "deepseek_v31",
    "mistralai-Mistral-Nemo-Instruct-2407": "mistral",
    "Mistral-Small-3.2-24B-Instruct-2506": "mistral_v11",
    "unsloth-mistral-Devstral-Small-2507": "mistral_v11",
    "mistralai-Ministral-3-14B-Reasoning-2512": "mistral_v11",
    "openai-gpt-oss-120b": "harmony",
    "upstage-Solar-Open-100B": "solar_open",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "command_r",
    "Cohere2MoE": "command_r",
}

#: templates that take tools but render no assistant tool calls (the model writes its calls as
#: text the template does not build): stem -> the protocol the vendor documents. Granite 3.3's
#: system prompt says "<|tool_call|> followed by a JSON list"; LFM2's and LFM2.5's instruct
#: templates list the tools in Liquid's own shape, and Liquid's models write the lfm2 format
#: (LFM2.5-8B-A1B's template renders it). There is nothing to round-trip until they render calls.
UNRENDERED: dict[str, str] = {
    "ibm-granite-granite-3.3-2B-Instruct": "granite3",
    "LFM2-8B-A1B": "lfm2",
    "LFM2.5-Instruct": "lfm2",
}

#: templates that speak a format but that transformers' renderer (the project's) cannot make
#: write a call: stem -> (protocol, why); tests/protocols/test_deepseek.py renders it the way a
#: renderer that keeps None values does and checks what the parser makes of that
UNRENDERABLE: dict[str, tuple[str, str]] = {
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": (
        "deepseek_v3",
        "renders calls only for content None, a key transformers drops before rendering",
    ),
}

#: (template stem, which calls) -> why the template cannot express them (documented per format
#: in docs/protocols.md); the test asserts the exclusion still holds
EXCLUDED: dict[tuple[str, str], str] = (
    {
        (f"meta-llama-Llama-{v}-Instruct", "parallel"): "Llama 3.x templates refuse parallel calls"
        for v in ("3.1-8B", "3.2-3B", "3.3-70B")
    }
    | {
        (f"{stem}", "parallel"): "GigaChat 3/3.1 templates render only the first of several calls"
        for stem in ("GigaChat3-10B-A1.8B", "GigaChat3.1-10B-A1.8B")
    }
    | {
        (
            "openai-gpt-oss-120b",
            "parallel",
        ): "harmony ends the turn at <|call|>: the template renders the first call only"
    }
)

#: reasoning tags a template's assistant turn may start with (a model declares its own; these are
#: the ones the fixture templates write)
REASONING_TAGS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),
    ("<|channel>", "<channel|>"),  # Gemma 4's thought channel
    ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]"),  # Apriel 1.6 (the opener is in the prompt)
    ("<|inner_prefix|>", "<|inner_suffix|>"),  # Apertus's inner thoughts
    ("<|open|>think<|sep|>", "<|close|>think<|sep|>"),  # Kimi K3's think channel
    ("<seed:think>", "</seed:think>"),
    ("<mm:think>", "</mm:think>"),
    # group c (issue 22)
    ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
)

#: templates whose native protocol is being built (issue 22): expected to fail until it lands
PENDING: frozenset[str] = frozenset(
    p.stem
    for p in TEMPLATES
    if p.stem not in NATIVE
    and p.stem not in UNRENDERED
    and p.stem not in UNRENDERABLE
    and p.stem
    not in {
        "HuggingFaceTB-SmolLM2-135M-Instruct",
        "HuggingFaceTB-SmolLM3-3B",
        "llama-cpp-rwkv-world",
        "microsoft-Phi-3.5-mini-instruct",
    }
)
WITH_CALLS = [p for p in TEMPLATES if renders_calls(p)]
_PENDING = pytest.mark.xfail(reason="native protocol not built yet (issue 22)", strict=True)


def _cases(paths: list[Path], *, pending_too: bool) -> list[Any]:
    return [
        pytest.param(p, kind, id=f"{p.stem}-{kind}", marks=[_PENDING] if p.stem in PENDING else [])
        for p in paths
        for kind in ("one", "parallel")
        if (pending_too or p.stem not in PENDING) and (p.stem, kind) not in EXCLUDED
    ]


@pytest.mark.parametrize(("stem", "kind"), sorted(EXCLUDED))
def test_what_a_template_cannot_express_stays_excluded(stem: str, kind: str) -> None:
    """The template refuses the calls, or renders something else (fewer calls, text that is
    not the format): then the strict parse must not come back with the calls asked for."""
    path = CORPUS / f"{stem}.jinja"
    try:
        text = assistant_output(path, _expected(kind))
    except ChatTemplateError:
        return
    result = _parse(path, text)
    assert not (result.strict_ok and [(c.name, c.arguments) for c in result.calls] == _expected(kind))


@pytest.mark.parametrize("stem", sorted(UNRENDERABLE))
def test_a_template_the_renderer_cannot_make_write_calls_stays_so(stem: str) -> None:
    path = CORPUS / f"{stem}.jinja"
    assert not renders_calls(path)
    assert detect(chat_template=path.read_text(encoding="utf-8")) == UNRENDERABLE[stem][0]


def _expected(kind: str) -> list[tuple[str, dict[str, Any]]]:
    return ONE_CALL if kind == "one" else PARALLEL_CALLS


def _without_nulls(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, {k: v for k, v in args.items() if v is not None}) for name, args in calls]


#: template stem -> (what it leaves out of the calls it renders, the calls it does write): a
#: documented exclusion per format (docs/protocols.md); the parser reads back what is written and
#: invents nothing (the test below)
LOSSY: dict[str, tuple[str, Any]] = {
    "MiniMax-M3": ("the template omits arguments whose value is null", _without_nulls),
}


def _written(stem: str, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    return LOSSY[stem][1](calls) if stem in LOSSY else calls


@pytest.mark.parametrize("stem", sorted(LOSSY))
def test_what_a_template_leaves_out_is_not_invented_by_the_parser(stem: str) -> None:
    path = CORPUS / f"{stem}.jinja"
    written = _written(stem, PARALLEL_CALLS)
    assert written != PARALLEL_CALLS, "the template now writes everything: drop the exclusion"
    result = _parse(path, assistant_output(path, PARALLEL_CALLS))
    assert [(c.name, c.arguments) for c in result.calls] == written


def _tags(text: str) -> tuple[str, str] | None:
    return next((t for t in REASONING_TAGS if t[1] in text), None)


def _parse(path: Path, text: str) -> Any:
    protocol = detect(chat_template=path.read_text(encoding="utf-8"))
    return parse_output(
        text,
        protocol,
        eot_tokens=(*end_of_turn(path), *END_OF_TURN_TOKENS),
        reasoning_tags=_tags(text),
        tool_schemas=SCHEMAS,
    )


def test_every_template_with_a_tool_format_has_its_native_protocol_named() -> None:
    assert len(WITH_CALLS) >= 56
    assert sorted(NATIVE) == sorted(p.stem for p in WITH_CALLS if p.stem not in PENDING)


@pytest.mark.parametrize("stem", sorted(UNRENDERED))
def test_an_unrendered_template_takes_tools_and_renders_no_call(stem: str) -> None:
    path = CORPUS / f"{stem}.jinja"
    assert takes_tools(path) and not renders_calls(path)


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(reason="issue 22")] if p.stem in PENDING else [])
        for p in TEMPLATES
    ],
)
def test_detect_picks_the_native_protocol(path: Path) -> None:
    expected = NATIVE.get(path.stem) or UNRENDERED.get(path.stem) or UNRENDERABLE.get(path.stem, ("json", ""))[0]
    assert detect(chat_template=path.read_text(encoding="utf-8")) == expected


@pytest.mark.parametrize(("path", "kind"), _cases(WITH_CALLS, pending_too=True))
def test_rendered_calls_parse_back_strictly(path: Path, kind: str) -> None:
    text = assistant_output(path, _expected(kind))
    result = _parse(path, text)
    assert result.strict_ok, f"{result.protocol}: {result.error}\n{text!r}"
    assert [(c.name, c.arguments) for c in result.calls] == _written(path.stem, _expected(kind))


@pytest.mark.parametrize(("path", "kind"), _cases(WITH_CALLS, pending_too=False))
def test_prose_around_the_calls_fails_strict(path: Path, kind: str) -> None:
    text = assistant_output(path, _expected(kind))
    # after the reasoning block where the turn has one: before it, prose is reasoning
    tags = _tags(text)
    cut = text.index(tags[1]) + len(tags[1]) if tags else 0
    before = _parse(path, text[:cut] + "Sure, here you go. " + text[cut:])
    assert not before.strict_ok
    assert before.lenient_calls, "the lenient diagnostic still finds the calls"
    after = _parse(path, text.rstrip() + " Done, anything else?")
    assert not after.strict_ok


#: template stem -> a string its format cannot carry (its own closing markup, which the template
#: writes unescaped): documented per format in docs/protocols.md
UNSAYABLE: dict[str, str] = {
    **{
        stem: "a </parameter> b"
        for stem in (
            "Qwen3-Coder",
            "Qwen3.5-4B",
            "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
            "StepFun3.5-Flash",
            "ByteDance-Seed-OSS",
            "MiniMax-M2",
        )
    },
    "openbmb-MiniCPM5-1B": "a <b> ]]> c",  # in a CDATA section, which ends at the first ]]>
    "muse-glimmer": "a </atem:parameter> b",
    "MiniMax-M3": "a ]<]minimax[>[ b",
}


@pytest.mark.parametrize("stem", sorted(UNSAYABLE))
def test_a_string_holding_the_formats_own_markup_fails_strict_instead_of_a_wrong_value(stem: str) -> None:
    path = CORPUS / f"{stem}.jinja"
    text = assistant_output(path, [("assign_task", {"owner": UNSAYABLE[stem], "priority": 2})])
    result = _parse(path, text)
    assert not result.strict_ok and not result.calls, result.calls
