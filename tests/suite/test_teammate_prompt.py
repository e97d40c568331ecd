"""A simulated teammate's definition (``episode: {user: ...}``): checked at load, rendered strictly.

Each broken definition is one ``FILE:LINE: ...`` line before anything is sampled; the prompt the
teammate model reads is the persona and instructions with the case's variables, then the
conversation from its side.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from leader_eval.errors import SuiteError
from leader_eval.suite.load import load_suite
from leader_eval.suite.teammate import render_teammate
from tests.support.teammates import TEAMMATE_SUITE, write_desk


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@pytest.mark.parametrize(
    ("old", "new", "needle", "words"),
    [
        (
            "    model_role: customer\n",
            "    model_role: customer\n    tool: mail\n",
            "tool: mail",
            "not a declared tool",
        ),
        (
            "    model_role: customer\n",
            "    model_role: customer\n    argument: body\n",
            "argument: body",
            "no argument",
        ),
        ("model_role: customer", "model_role: 'no spaces'", "model_role:", "does not match"),
        ("max_turns: 3", "max_turns: 0", "max_turns: 0", "minimum"),
        # the reply never reaches the leader: the scaffold shows results but not replies
        (
            "        [customer] {{ s.reply }}\n",
            "        [customer]\n",
            "model_role: customer",
            "never a teammate's reply",
        ),
        # the persona names a variable no case defines: strict rendering, not a blank
        ("whose order {{ order }}", "whose order {{ parcel }}", "model_role: customer", "'parcel' is undefined"),
    ],
)
def test_a_broken_teammate_is_one_line_naming_its_line(
    tmp_path: Path, old: str, new: str, needle: str, words: str
) -> None:
    assert old in TEAMMATE_SUITE
    text = TEAMMATE_SUITE.replace(old, new, 1)
    suite = write_desk(tmp_path, text)
    with pytest.raises(SuiteError) as err:
        load_suite(suite)
    msg = str(err.value)
    assert "\n" not in msg and words in msg, msg
    assert msg.startswith(f"{suite}:{_line_of(text, needle)}:"), msg


def test_the_message_argument_must_be_named_when_the_tool_has_several(tmp_path: Path) -> None:
    text = TEAMMATE_SUITE.replace(
        "        message: {type: string, minLength: 1}\n",
        "        message: {type: string}\n        to: {type: string}\n",
    )
    with pytest.raises(SuiteError, match=r"user\.argument is needed"):
        load_suite(write_desk(tmp_path, text))


def test_the_teammate_reads_its_persona_then_the_conversation_from_its_side(tmp_path: Path) -> None:
    suite = load_suite(write_desk(tmp_path))
    case = suite.cases[0]
    user = case.episode.user
    assert user is not None and user.tool == "send_message_to_chat" and user.argument == "message"
    messages = render_teammate(
        user, case.vars, [{"from": "leader", "text": "Hi Ada"}, {"from": "teammate", "text": "Hello"}]
    )
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    system = messages[0]["content"]
    assert system.startswith("You are Ada, a customer whose order A-17 is late.")
    assert "###DONE" in system  # the teammate is told how to end the conversation
    # with a teammate the goal tool no longer ends the episode by default: the conversation goes on
    assert case.episode.terminal_tools == ()


def test_a_suite_cannot_name_a_model_only_a_role(tmp_path: Path) -> None:
    text = TEAMMATE_SUITE.replace("    model_role: customer\n", "    model_role: customer\n    model: local:smollm2\n")
    with pytest.raises(SuiteError, match="model"):
        load_suite(write_desk(tmp_path, text))
