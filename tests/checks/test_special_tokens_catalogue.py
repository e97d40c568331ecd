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


@pytest.mark.parametrize("token", TOKENS)
def test_every_catalogue_token_is_a_leak_in_any_output(token: str) -> None:
    text = f"@Ada take the map {token} now."
    found = find_leaks(text, compile_leak_config(LeakConfig()))
    covering = [f for f in found if f.start <= 18 and f.end >= 18 + len(token)]
    assert covering, (token, found)
    assert covering[0].reason in (Reason.LEAK_SPECIAL_TOKEN, Reason.LEAK_TOOL_MARKUP, Reason.LEAK_REASONING)


@pytest.mark.parametrize("head", TAG_HEADS)
def test_every_tag_head_is_tool_markup_with_its_attributes(head: str) -> None:
    text = f'Sure. {head} name="wait">'
    (f,) = find_leaks(text, compile_leak_config(LeakConfig()))
    assert (f.reason, f.text) == (Reason.LEAK_TOOL_MARKUP, f'{head} name="wait">')
