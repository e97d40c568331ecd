"""Arbitrary text never makes a detector raise, and the same input gives the same answer."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leader_eval.checks.degeneration import DegenerationConfig, check_degeneration
from leader_eval.checks.leakage import LeakConfig, compile_leak_config, find_leaks

# pieces that start (or almost start) a candidate, so the fuzzer reaches the post-passes
# fmt: off
FRAGMENTS = [
    "<", ">", "{", "}", "[", "]", "|", "`", "```", "\n", " ", '"', "'", ":", "\\",
    "<think>", "</think>", "<thinking>", "<tool_call>", "</tool_use>", "<function=", "<invoke name=",
    "<|im_end|>", "<|im_start|>", "<|", "|>", "<｜", "｜>", "</s>", "[NO CHAT]", "[brb:", "[INSERT ",
    "{{", "}}", "{%", "%}", "{goal}", "<GOAL>", "[TODO", '{"name": ', '"arguments": ', '{"tool": "x", ',
    "◁think▷", "@Ada please take the map task. ", "you never do the work yourself", "\ud800", "🎉", "é",
]
# fmt: on
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=60).map("".join)

CONFIGS = [
    compile_leak_config(LeakConfig()),
    compile_leak_config(
        LeakConfig(
            special_tokens=("<|im_start|>", "<|im_end|>"),
            eot_tokens=("<|im_end|>",),
            reasoning_tags=("<think>", "</think>"),
            markers=("[NO CHAT]", "[brb:"),
            placeholder_patterns=(r"\$\{[A-Z_]{1,20}\}",),
            forbid=(r"(?i)\bas an ai\b",),
            scaffold_texts=("You are Leader. You never do the work yourself: you read the room and decide.",),
            scaffold_min_words=4,
        )
    ),
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.sampled_from(range(len(CONFIGS))))
def test_find_leaks_never_raises_and_is_deterministic(text: str, which: int) -> None:
    cfg = CONFIGS[which]
    first = find_leaks(text, cfg, where="call[0].arguments.message")
    assert first == find_leaks(text, cfg, where="call[0].arguments.message")
    keys = [(f.start, f.end, str(f.reason)) for f in first]
    assert keys == sorted(keys)
    for f in first:
        assert 0 <= f.start < f.end <= len(text)
        assert f.text == text[f.start : f.end]
        assert "\n" not in f.context
        assert f.where == "call[0].arguments.message"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts,
    st.sampled_from([None, "stop", "length"]),
    texts,
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=0, max_value=80),
)
def test_check_degeneration_never_raises_and_is_deterministic(
    text: str, stop: str | None, prompt: str, ngram: int, min_chars: int
) -> None:
    cfg = DegenerationConfig(ngram=ngram, min_chars=min_chars)
    first = check_degeneration(text, stop_reason=stop, prompt_text=prompt, cfg=cfg)
    assert first == check_degeneration(text, stop_reason=stop, prompt_text=prompt, cfg=cfg)
    assert [r.check for r in first] == ["empty", "truncated", "repetition", "restates_prompt"]
    for r in first:
        assert r.passed == (r.reason is None)
        for f in r.findings:
            assert 0 <= f.start < f.end <= len(text) and f.text == text[f.start : f.end]
    rep = first[2]
    if rep.findings:
        i, j = rep.findings[0].start, rep.findings[0].end
        length = rep.data["longest_repeat_chars"]
        # the span is two copies of one substring: the first at i, the next ending at j
        assert text[i : i + length] == text[j - length : j]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_plain_unicode_text(text: str) -> None:
    find_leaks(text, CONFIGS[1])
    check_degeneration(text, stop_reason=None, prompt_text=text, cfg=DegenerationConfig())
