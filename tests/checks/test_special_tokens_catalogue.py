"""The catalogue of every fixture template's special tokens (checks/special_tokens_catalogue.py)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from leader_eval.checks.leakage import LeakConfig, compile_leak_config, find_leaks
from leader_eval.checks.special_tokens_catalogue import TAG_HEADS, TOKENS
from leader_eval.types import Reason

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = runpy.run_path(str(ROOT / "scripts" / "mine_special_tokens.py"))


def test_the_committed_catalogue_is_what_the_script_mines_from_the_fixtures() -> None:
    committed = (ROOT / "leader_eval" / "checks" / "special_tokens_catalogue.py").read_text(encoding="utf-8")
    assert committed == _SCRIPT["generate"](), "stale: run python scripts/mine_special_tokens.py"


def test_the_families_the_issue_names_are_in_it() -> None:
    for tok in ("<|turn>", "<turn|>", "<|tool_call>", "<tool_call|>", "<seed:eos>", "<seed:tool_call>"):
        assert tok in TOKENS
    for tok in ("<minimax:tool_call>", "]~b]", "[e~[", "<｜tool▁calls▁begin｜>", "<｜DSML｜function_calls>"):
        assert tok in TOKENS
    for tok in ("<|channel|>", "<|message|>", "<|call|>", "[TOOL_CALLS]", "[ARGS]", "<arg_key>", "<|tool_call_start|>"):
        assert tok in TOKENS
    assert "<｜DSML｜invoke" in TAG_HEADS


def test_only_token_shapes_are_mined() -> None:
    """Role words and a system prompt's section tags are text, not tokens."""
    for text in ("User:", "assistant", "<ROLE>", "<IMPORTANT>", "<b>", "<tools>", "<description>"):
        assert text not in TOKENS
    assert all(not any(c.isspace() for c in t) for t in (*TOKENS, *TAG_HEADS))


# mined tokens that are also ordinary writing when spaced in a line of prose (docs/leakage.md,
# "Tokens that are also writing"): Reka's <sep>. Glued, as their templates write them, they leak.
WRITTEN_SPACED = ("<sep>",)


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("gap", [" ", ""], ids=["spaced", "glued"])
def test_every_catalogue_token_is_a_leak_in_any_output(token: str, gap: str) -> None:
    if gap and token in WRITTEN_SPACED:
        pytest.skip("a word in prose when spaced: see test_a_token_that_is_also_writing_leaks_where_it_is_a_token")
    text = f"@Ada take the map{gap}{token}{gap}now."
    at = 17 + len(gap)
    found = find_leaks(text, compile_leak_config(LeakConfig()))
    covering = [f for f in found if f.start <= at and f.end >= at + len(token)]
    assert covering, (token, found)
    assert covering[0].reason in (Reason.LEAK_SPECIAL_TOKEN, Reason.LEAK_TOOL_MARKUP, Reason.LEAK_REASONING)


def test_a_token_that_is_also_writing_leaks_where_it_is_a_token() -> None:
    plain = compile_leak_config(LeakConfig())
    for token in WRITTEN_SPACED:
        assert token in TOKENS
        assert find_leaks(f"Put {token} between the fields.", plain) == []
        for text in (f"@Ada go.{token}human: hi", f"@Ada go.\n\n{token}", f"@Ada go {token}"):
            assert [f.text for f in find_leaks(text, plain)] == [token], text
        # declared by the model, it is its token wherever it stands
        declared = compile_leak_config(LeakConfig(special_tokens=(token,)))
        assert [f.text for f in find_leaks(f"Put {token} between the fields.", declared)] == [token]


@pytest.mark.parametrize("head", TAG_HEADS)
def test_every_tag_head_is_tool_markup_with_its_attributes(head: str) -> None:
    text = f'Sure. {head} name="wait">'
    (f,) = find_leaks(text, compile_leak_config(LeakConfig()))
    assert (f.reason, f.text) == (Reason.LEAK_TOOL_MARKUP, f'{head} name="wait">')
