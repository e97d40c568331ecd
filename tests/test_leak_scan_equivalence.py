"""The leak detector's fast scans find exactly what a plain regex scan finds.

``find_leaks`` runs its combined scanner and its tool-call-as-text pattern only where a match can
start (a candidate first character; a tool name before "("), to avoid a regex pass over every
position. A candidate missed there would be a leak missed: these compare both with
``finditer`` on generated text full of markup fragments, bounds included.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.checks.leakage import LeakConfig, _scan, _tool_call_matches, compile_leak_config

_ATOMS = [
    *("<", "[", "{", "\u25c1", "}", "]", ">", "|", "(", ")", "=", "==", ".", " ", "\t", "\n", "`", "a", "x_y"),
    *("<|im_end|>", "<think>", "</think>", "[NO CHAT]", "{{ goal }}", "<GOAL>", "[INSERT X]", "[TODO: y]"),
    *('{"name": "pause", "arguments": {}}', "[send_message_to_chat(message=", "<tool_call>", "```\n", "{%"),
    *("pause", "assign_task", "send_message_to_chat", "pause (", "pause(x=1)", "a.pause(", "\u00e9", "NOCHAT"),
    *("pause   ()", "x_y \t\t(k=", "ab  (", "pause    (", "  ", "assign_task \t (agent="),
]
_CONFIGS = [
    compile_leak_config(LeakConfig(tool_names=("pause", "assign_task", "send_message_to_chat"))),
    compile_leak_config(
        LeakConfig(
            special_tokens=("<pad>", "\u2581x", "NOCHAT"),
            markers=("ZZ", "[brb:"),
            reasoning_tags=("<r>", "</r>"),
            tool_names=("a", "ab", "x_y"),
        )
    ),
]

_texts = st.lists(st.sampled_from(_ATOMS), max_size=60).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=_texts, cut=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_fast_scans_find_what_finditer_finds(text: str, cut: tuple[float, float]) -> None:
    lo, hi = sorted(int(c * len(text)) for c in cut)
    for lo_, hi_ in ((0, len(text)), (lo, hi)):
        for cfg in _CONFIGS:
            want = [(m.start(), m.end(), m.lastgroup) for m in cfg.scanner.finditer(text, lo_, hi_)]
            assert [(m.start(), m.end(), m.lastgroup) for m in _scan(cfg, text, lo_, hi_)] == want
            if cfg.tool_call_text is not None:
                want = [(m.start(), m.end()) for m in cfg.tool_call_text.finditer(text, lo_, hi_)]
                assert [(m.start(), m.end()) for m in _tool_call_matches(cfg, text, lo_, hi_)] == want
