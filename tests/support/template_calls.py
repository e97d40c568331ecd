"""Tool calls rendered by real chat templates, as the model would have written them.

A model trained on a template emits, after the generation prompt, what the template renders for
an assistant turn. ``assistant_output`` recovers that text: the conversation rendered with the
assistant's tool calls, minus the prompt rendered with the generation prompt (backed off to the
start of a tag where the two part inside one, e.g. a generation prompt that opens ``<think>``),
cut at the template's end of turn (the tokens that close a plain text turn in the same template).

The tools and calls cover what a parser must type back: strings with quotes, newlines, Unicode and
markup-like text, a string that reads as a number, integers, floats, booleans, null, nested
objects and arrays.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from leader_eval.errors import ChatTemplateError
from leader_eval.suite.chat_template import render_chat_template, template_supports_tools
from tests.conftest import ROOT

CORPUS = ROOT / "fixtures" / "chat_templates"
TEMPLATES = sorted(CORPUS.glob("*.jinja"))


def _fn(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} (a round-trip test tool).",
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOLS: list[dict[str, Any]] = [
    _fn(
        "post_update",
        {
            "message": {"type": "string"},
            "ticket": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "urgent": {"type": "boolean"},
            "reviewer": {"type": ["integer", "null"]},
            "meta": {"type": "object"},
            "items": {"type": "array", "items": {"type": "integer"}},
        },
        ["message"],
    ),
    _fn(
        "assign_task",
        {"owner": {"type": "string"}, "due": {"type": "string"}, "priority": {"type": "integer"}},
        ["owner"],
    ),
]
SCHEMAS: dict[str, Any] = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}

RICH_ARGS: dict[str, Any] = {
    "message": 'She said "ship it" \u2014 na\u00efve caf\u00e9 \u6771\u4eac \U0001f680\nline two <b>bold</b> {"k": 1}',
    "ticket": "42",
    "count": 42,
    "ratio": 0.75,
    "urgent": True,
    "reviewer": None,
    "meta": {"tags": ["a", "b c"], "owner": {"name": "Mira", "id": 7}},
    "items": [1, 2, 3],
}
SECOND_ARGS: dict[str, Any] = {"owner": "Ravi", "due": "2026-12-01", "priority": 2}

ONE_CALL: list[tuple[str, dict[str, Any]]] = [("post_update", RICH_ARGS)]
PARALLEL_CALLS: list[tuple[str, dict[str, Any]]] = [("post_update", RICH_ARGS), ("assign_task", SECOND_ARGS)]

_LAST_USER = "Update the team."
_BASE = [{"role": "system", "content": "You are Mira, the leader."}, {"role": "user", "content": _LAST_USER}]
_TEXT_TURN = "XYZZY-plain-reply"
_NEXT_USER = "XYZZY-next-question"
# MiniMax's end of turn is "[e~["
_TOKEN = re.compile(r"<[^<>\s]{1,64}>|\[[A-Z_/]{2,32}\]|\[e~\[")


def _assistant(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": f"call{i:05d}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls, 1)
        ],
    }


#: the same tools with only plain types: some templates' schema macros recurse on a list of
#: types (Hermes 2 Pro / 3); the calls they render do not depend on the tool list
_PLAIN_TOOLS: list[dict[str, Any]] = [
    _fn(t["function"]["name"], {k: {"type": "string"} for k in t["function"]["parameters"]["properties"]}, [])
    for t in TOOLS
]


def _render(template: str, messages: list[dict[str, Any]], *, generation: bool) -> str:
    try:
        return render_chat_template(
            template, messages, tools=TOOLS, add_generation_prompt=generation, bos_token="<s>", eos_token="</s>"
        )
    except ChatTemplateError as exc:
        if "recurses" not in str(exc):
            raise
    return render_chat_template(
        template, messages, tools=_PLAIN_TOOLS, add_generation_prompt=generation, bos_token="<s>", eos_token="</s>"
    )


def _after_prompt(prompt: str, full: str) -> str:
    """``full`` past the generation prompt ``prompt`` (backed off to the start of a tag when the
    two part inside one)."""
    i = 0
    n = min(len(prompt), len(full))
    while i < n and prompt[i] == full[i]:
        i += 1
    if i < len(prompt):  # the prompt opened something the turn does not (a <think> block)
        k = max(full.rfind("<", 0, i), full.rfind("[", 0, i))
        if k != -1 and not any(c in full[k:i] for c in ">]\n"):
            i = k
        elif _LAST_USER in prompt[i:]:
            # the template writes the last user turn differently once a reply follows it
            # (Mistral Nemo's puts the system message into the final user turn only): the
            # reply starts after the prompt's end, found in the full text
            tail = prompt[prompt.rindex(_LAST_USER) :]
            at = full.find(tail, i)
            if at != -1:
                i = at + len(tail)
    return full[i:]


@cache
def end_of_turn(path: Path) -> tuple[str, ...]:
    """The token that ends a plain text turn in this template (``<|im_end|>``, ...): the last
    token-shaped piece after the reply (what a model stops at; a server strips it)."""
    template = path.read_text(encoding="utf-8")
    prompt = _render(template, _BASE, generation=True)
    full = _render(template, [*_BASE, {"role": "assistant", "content": _TEXT_TURN}], generation=False)
    tail = _after_prompt(prompt, full)
    at = tail.find(_TEXT_TURN)
    after = tail[at + len(_TEXT_TURN) :] if at != -1 else ""
    if after and prompt == _render(template, _BASE, generation=False):
        # the template appends its generation prompt even when not asked (Command R7B's): the
        # text turn's render ends with it too. The part it shares with the prompt's end opens
        # with the end-of-turn token that closes the user's turn and the reply's alike.
        n = 0
        while n < min(len(after), len(prompt)) and after[-1 - n] == prompt[-1 - n]:
            n += 1
        shared = _TOKEN.findall(after[len(after) - n :])
        if shared:
            return (shared[0],)
    tokens = _TOKEN.findall(after)
    if tokens:
        return (tokens[-1],)
    # A template that leaves the last turn open (Hy3 closes a turn only when another follows):
    # the first token after the reply, before the next user message, that the prompt lacks (the
    # token opening a user turn is in the prompt; the one closing an assistant turn is not).
    more = [*_BASE, {"role": "assistant", "content": _TEXT_TURN}, {"role": "user", "content": _NEXT_USER}]
    again = _render(template, more, generation=False)
    at, nxt = again.find(_TEXT_TURN), again.find(_NEXT_USER)
    if at == -1 or nxt < at:
        return ()
    between = _TOKEN.findall(again[at + len(_TEXT_TURN) : nxt])
    return next(((t,) for t in between if t not in prompt), ())


def assistant_output(path: Path, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """What a model speaking ``path``'s template writes for ``calls``, up to its end of turn."""
    template = path.read_text(encoding="utf-8")
    prompt = _render(template, _BASE, generation=True)
    full = _render(template, [*_BASE, _assistant(calls)], generation=False)
    out = _after_prompt(prompt, full)
    # the first end of turn after some content (a format may open with the token, GigaChat's
    # function-call message does)
    lead = len(out) - len(out.lstrip())
    cuts = [at for tok in end_of_turn(path) if (at := out.find(tok, lead + 1)) != -1]
    return out[: min(cuts)] if cuts else out


@cache
def renders_calls(path: Path) -> bool:
    """Does the template write tool calls into the assistant turn (has a tool-call format)?"""
    try:
        return "post_update" in assistant_output(path, ONE_CALL)
    except Exception:
        return False


def takes_tools(path: Path) -> bool:
    return template_supports_tools(path.read_text(encoding="utf-8"))
