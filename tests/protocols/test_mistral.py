"""Mistral's ``[TOOL_CALLS]`` variants: ``mistral`` (v3: a JSON list) and ``mistral_v11`` (v11+:
``NAME[CALL_ID]ID[ARGS]{...}`` per call). Where mistral-common is installed (an optional extra:
it only encodes), its own encoder writes the calls and our parser reads them back."""

from __future__ import annotations

import json
import os
import time
from functools import cache
from typing import Any

import pytest

from leader_eval.protocols import NOT_ALONE_ERROR, REGISTRY, parse_output
from tests.support.template_calls import PARALLEL_CALLS, SCHEMAS

LIST_OK = '[TOOL_CALLS][{"name": "pause", "arguments": {"minutes": 5}, "id": "abcDEF123"}]'
V11_OK = '[TOOL_CALLS]pause[CALL_ID]abcDEF123[ARGS]{"minutes": 5}[TOOL_CALLS]wait[ARGS]{}'


@pytest.mark.parametrize(
    ("protocol", "text", "calls"),
    [
        ("mistral", LIST_OK + "</s>", [("pause", {"minutes": 5})]),
        (
            "mistral",
            '[TOOL_CALLS] [ {"name": "a", "arguments": {}} ,\n{"name": "b", "arguments": {"s": "[ARGS]"}} ]',
            [("a", {}), ("b", {"s": "[ARGS]"})],
        ),
        ("mistral_v11", V11_OK + "</s>", [("pause", {"minutes": 5}), ("wait", {})]),
        (
            "mistral_v11",
            '[TOOL_CALLS]team.assign[ARGS]{"a": "[TOOL_CALLS]x[ARGS]{}"}',
            [("team.assign", {"a": "[TOOL_CALLS]x[ARGS]{}"})],
        ),
    ],
)
def test_strict_reads_each_variant(protocol: str, text: str, calls: list[tuple[str, Any]]) -> None:
    r = parse_output(text, protocol, eot_tokens=("</s>",))
    assert r.strict_ok, r.error
    assert [(c.name, c.arguments) for c in r.calls] == calls
    assert r.visible_text == ""


@pytest.mark.parametrize(
    ("protocol", "text", "reason"),
    [
        ("mistral", '[TOOL_CALLS]{"name": "pause", "arguments": {}}', "expected a JSON array of tool calls"),
        ("mistral", "[TOOL_CALLS][]", "empty array"),
        ("mistral", '[TOOL_CALLS][{"name": "pause", "arguments": {}, "type": "function"}]', "unexpected key 'type'"),
        ("mistral", '[TOOL_CALLS][{"name": "pause", "arguments": {}, "id": 7}]', "call id must be a string"),
        ("mistral", '[TOOL_CALLS][{"name": "pause", "arguments": "{}"}]', "JSON-encoded string"),
        ("mistral", '[TOOL_CALLS][{"name": "pause", "arguments": {}} {"name": "b", "arguments": {}}]', "expected ','"),
        ("mistral", LIST_OK + " Done.", "text after"),
        ("mistral", "[TOOL_CALLS]pause[ARGS]{}", "expected a JSON array of tool calls"),
        ("mistral_v11", "[TOOL_CALLS]pause[ARGS][1]", "must be a JSON object"),
        ("mistral_v11", "[TOOL_CALLS]pause {}", "expected NAME"),
        ("mistral_v11", "[TOOL_CALLS]pause[CALL_ID][ARGS]{}", "expected NAME"),
        ("mistral_v11", "[TOOL_CALLS]pause[ARGS] {}", "invalid JSON"),
        ("mistral_v11", '[TOOL_CALLS]pause[ARGS]{"m": 1} and then', "expected [TOOL_CALLS]"),
        ("mistral_v11", '[TOOL_CALLS][{"name": "pause", "arguments": {}}]', "expected NAME"),
    ],
)
def test_strict_refusals_name_the_reason(protocol: str, text: str, reason: str) -> None:
    r = parse_output(text, protocol)
    assert not r.strict_ok and r.calls == ()
    assert reason in (r.error or "")


@pytest.mark.parametrize(("protocol", "text"), [("mistral", LIST_OK), ("mistral_v11", V11_OK)])
def test_prose_before_fails_strict_and_lenient_finds_the_calls(protocol: str, text: str) -> None:
    r = parse_output("On it. " + text, protocol)
    assert r.error == NOT_ALONE_ERROR
    assert r.lenient_calls[0].name == "pause"


def test_each_variant_names_the_other_when_the_model_wrote_it() -> None:
    assert parse_output(V11_OK, "mistral").other_protocols == ("mistral_v11",)
    assert "mistral" in parse_output(LIST_OK, "mistral_v11").other_protocols


def test_the_markup_is_the_protocols_own() -> None:
    v11, v3 = REGISTRY["mistral_v11"], REGISTRY["mistral"]
    assert v11.is_attempt(" [TOOL_CALLS]x") and v3.is_attempt("[TOOL_CALLS][")
    assert v11.owns("[ARGS]") and v11.owns("[CALL_ID]") and v3.owns("[TOOL_CALLS]")
    assert not v3.is_attempt("[TOOL CALLS]") and not v11.owns("[ARGS ]")


@pytest.mark.parametrize("protocol", ["mistral", "mistral_v11"])
@pytest.mark.parametrize(
    "text",
    [
        "[TOOL_CALLS]" * 100_000,
        "[TOOL_CALLS]" + "a" * 300_000 + "[ARGS]",
        ("[TOOL_CALLS]f[CALL_ID]" + "1" * 100) * 3_000,
        ('[TOOL_CALLS][{"name": "a", "arguments": {"x": "' + "y" * 100) * 3_000,
        "[TOOL_CALLS]f[ARGS]{}" * 300,
        "[TOOL_CALLS][" + '{"name": "a", "arguments": {}},' * 300 + "]",
    ],
)
def test_hostile_inputs_stay_fast(protocol: str, text: str) -> None:
    t = time.perf_counter()
    r = parse_output(text, protocol)
    assert time.perf_counter() - t < 1.0
    assert not r.strict_ok


# ------------------------------------------------------------------ mistral-common's own encoder


_RANKS = 4096


@cache
def _vocabulary() -> Any:
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    return json.loads((MistralTokenizer._data_path() / "tekken_240911.json").read_text(encoding="utf-8"))


def _need_mistral_common() -> None:
    """mistral-common is an optional extra (``.[mistral]``); CI installs it, so there its absence
    is a failure, elsewhere a skip with the reason."""
    try:
        import mistral_common  # noqa: F401
    except ImportError:
        if os.environ.get("LEADER_EVAL_CI") == "1":
            pytest.fail("mistral-common is not installed: pip install -e '.[mistral]' (scripts/install.sh --dev)")
        pytest.skip("mistral-common is not installed (pip install -e '.[mistral]')")


@cache
def _tekken(version: str) -> Any:
    """A tekken tokenizer from the vocabulary shipped in mistral-common's wheel (no download).
    The wheel's files are v3; v11 and v13 vocabularies add the [ARGS] and [CALL_ID] control
    tokens, which the library's own v11/v13 instruct encoders then write."""
    _need_mistral_common()
    from mistral_common.tokens.tokenizers.base import TokenizerVersion
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    data = _vocabulary()
    special = [dict(t) for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS]
    if version != "v3":
        special += [
            {"rank": len(special), "token_str": "[ARGS]", "is_control": True},
            {"rank": len(special) + 1, "token_str": "[CALL_ID]", "is_control": True},
        ]
    config = data["config"]
    # the first ranks of the vocabulary (every single byte among them) encode any text, in more
    # tokens: building the BPE of all 150,000 costs seconds per tokenizer
    vocab = data["vocab"][:_RANKS]
    return Tekkenizer(
        vocab=vocab,
        special_tokens=special,  # type: ignore[arg-type]
        pattern=config["pattern"],
        vocab_size=len(vocab) + config["default_num_special_tokens"],
        num_special_tokens=config["default_num_special_tokens"],
        version=TokenizerVersion(version),
    )


def _encoded(version: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    from mistral_common.protocol.instruct.messages import AssistantMessage
    from mistral_common.protocol.instruct.tool_calls import FunctionCall, ToolCall
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
    from mistral_common.tokens.tokenizers.instruct import (
        InstructTokenizerV3,
        InstructTokenizerV11,
        InstructTokenizerV13,
    )

    tok = _tekken(version)
    instruct = {"v3": InstructTokenizerV3, "v11": InstructTokenizerV11, "v13": InstructTokenizerV13}[version](tok)
    message = AssistantMessage(
        tool_calls=[
            ToolCall(id=f"call{i:05d}", function=FunctionCall(name=name, arguments=json.dumps(args)))
            for i, (name, args) in enumerate(calls, 1)
        ]
    )
    tokens = instruct.encode_assistant_message(message, is_before_last_user_message=False)
    return str(tok.decode(tokens, special_token_policy=SpecialTokenPolicy.KEEP))


@pytest.mark.parametrize(("version", "protocol"), [("v3", "mistral"), ("v11", "mistral_v11"), ("v13", "mistral_v11")])
def test_what_mistral_commons_encoder_writes_parses_back(version: str, protocol: str) -> None:
    text = _encoded(version, PARALLEL_CALLS)
    assert ("[CALL_ID]" in text) == (version == "v11")
    r = parse_output(text, protocol, eot_tokens=("</s>",), tool_schemas=SCHEMAS)
    assert r.strict_ok, (r.error, text)
    assert [(c.name, c.arguments) for c in r.calls] == PARALLEL_CALLS
