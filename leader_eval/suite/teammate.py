"""A simulated teammate in an episode (``episode: {user: ...}``, docs/episodes.md).

The suite says who the teammate is (``persona``, ``instructions``), when the conversation ends
(``stop``, ``max_turns``) and which tool call is a message to it (``tool``, ``argument``); it names
the model that plays it only by a model role (``model_role``), whose meaning comes from trusted
configuration (``leader_eval.runs.trusted``), never from the suite.

The teammate's prompt is rendered here, strictly, in the scaffold's sandbox
(``render.scaffold_env``: StrictUndefined, bounded): a system message from the persona and
instructions (each a template over the case's variables), then the conversation from the
teammate's side: the leader's messages as ``user`` turns, the teammate's own replies as
``assistant`` turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from leader_eval.bounded.limits import LimitExceeded
from leader_eval.bounded.sandbox import run_bounded
from leader_eval.errors import SuiteError
from leader_eval.suite.render import scaffold_env
from leader_eval.suite.yaml_source import JsonPath, line_of

DEFAULT_MAX_TURNS = 3

#: the teammate's system message; persona and instructions are rendered first, with the case's vars
SYSTEM_TEMPLATE = """\
{{ persona }}

{{ instructions }}
{% if stop %}

Reply with one short chat message, in character. When your request has been handled, or the \
conversation has nothing more to give you, end your message with {{ stop }}.
{% else %}

Reply with one short chat message, in character.
{% endif %}"""


@dataclass(frozen=True)
class UserSpec:
    """What a case declares about its simulated teammate."""

    model_role: str
    persona: str
    instructions: str
    max_turns: int
    stop: str | None
    tool: str
    argument: str
    #: where ``model_role`` is written: a missing role's error and a template error name it
    path: Path
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_role": self.model_role,
            "persona": self.persona,
            "instructions": self.instructions,
            "max_turns": self.max_turns,
            "stop": self.stop,
            "tool": self.tool,
            "argument": self.argument,
        }


def user_spec(
    path: Path,
    lines: Mapping[JsonPath, int],
    at: JsonPath,
    raw: Mapping[str, Any],
    tools: Mapping[str, Mapping[str, Any]],
    goal_tool: str,
    case_id: str,
) -> UserSpec:
    """The checked ``user:`` of one episode (``at``: its path in the suite); a ``SuiteError``
    names the line of whatever is wrong."""
    tool = str(raw.get("tool", goal_tool))
    if tool not in tools:
        raise SuiteError(
            path,
            line_of(lines, (*at, "tool") if "tool" in raw else at),
            f"case {case_id!r}: user.tool {tool!r} is not a declared tool (tools: {', '.join(sorted(tools))})",
        )
    props = tools[tool].get("properties") or {}
    argument = raw.get("argument")
    if argument is None:
        strings = [k for k, v in props.items() if isinstance(v, Mapping) and v.get("type") == "string"]
        if len(strings) != 1:
            raise SuiteError(
                path,
                line_of(lines, at),
                f"case {case_id!r}: user.argument is needed: tool {tool!r} has "
                f"{len(strings)} string arguments, which one is the message?",
            )
        argument = strings[0]
    elif props and argument not in props:
        raise SuiteError(
            path,
            line_of(lines, (*at, "argument")),
            f"case {case_id!r}: tool {tool!r} has no argument {argument!r}",
        )
    return UserSpec(
        model_role=str(raw["model_role"]),
        persona=str(raw.get("persona", "You are a member of the team.")),
        instructions=str(raw.get("instructions", "Answer the leader's messages.")),
        max_turns=int(raw.get("max_turns", DEFAULT_MAX_TURNS)),
        stop=raw.get("stop"),
        tool=tool,
        argument=str(argument),
        path=path,
        line=line_of(lines, (*at, "model_role")),
    )


def message_of(user: UserSpec, results: Sequence[Mapping[str, Any]]) -> list[str]:
    """The messages a step sent the teammate: each successful call to ``user.tool``'s message
    argument (a call the world answered with an error was not delivered)."""
    out = []
    for r in results:
        if r.get("tool") == user.tool and r.get("ok"):
            args = r.get("arguments")
            text = args.get(user.argument) if isinstance(args, Mapping) else None
            if isinstance(text, str) and text.strip():
                out.append(text)
    return out


def render_teammate(
    user: UserSpec, variables: Mapping[str, Any], conversation: Sequence[Mapping[str, str]]
) -> list[dict[str, str]]:
    """The teammate's chat messages: the system message, then ``conversation`` from its side
    (``{"from": "leader" | "teammate", "text": ...}``). A missing variable, a template error or a
    bound exceeded is a ``SuiteError`` naming the ``user:`` line."""
    env = scaffold_env()
    path, line = user.path, user.line
    try:
        persona = _render(env, user.persona, variables)
        instructions = _render(env, user.instructions, variables)
        system = _render(env, SYSTEM_TEMPLATE, {"persona": persona, "instructions": instructions, "stop": user.stop})
    except jinja2.UndefinedError as exc:
        raise SuiteError(path, line, f"teammate persona/instructions: {exc.message}") from exc
    except jinja2.TemplateError as exc:
        raise SuiteError(path, line, f"teammate persona/instructions: template error: {exc}") from exc
    except LimitExceeded as exc:
        raise SuiteError(path, line, f"teammate persona/instructions: {exc}") from exc
    except (TypeError, ValueError, AttributeError, ArithmeticError, LookupError) as exc:
        raise SuiteError(path, line, f"teammate persona/instructions: template failed: {exc}") from exc
    messages = [{"role": "system", "content": system}]
    for turn in conversation:
        role = "user" if turn["from"] == "leader" else "assistant"
        messages.append({"role": role, "content": turn["text"]})
    return messages


def _render(env: Any, source: str, variables: Mapping[str, Any]) -> str:
    template = run_bounded(env.from_string, source)
    return str(run_bounded(template.render, dict(variables))).strip()


def stopped(user: UserSpec, reply: str) -> bool:
    """Whether the teammate's reply ends the conversation by its stop phrase."""
    return user.stop is not None and user.stop in reply
