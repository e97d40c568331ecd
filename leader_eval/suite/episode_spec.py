"""What an episode case declares, checked at load time (docs/episodes.md).

A case with ``episode:`` is sampled as a multi-turn episode: up to ``max_steps`` model turns, each
answered by the scripted world (``leader_eval.suite.world``). The suite-level ``episode:`` mapping gives
defaults (``max_steps``, ``forbid_tools``, ``loop_k``, ``loop_ignore_args``, ``transcript``) that a
case's own keys override.

The goal is reached by the first call to ``goal.tool`` whose arguments satisfy ``goal.args`` and
whose scripted result is not an error, provided every tool in ``goal.after`` was called with a
successful result before it. An episode ends after a successful call to a terminal tool (default:
the goal tool), after a step without a call (unless ``end.on_no_call`` is false), or after
``max_steps`` steps.

Load-time errors (each one ``FILE:LINE: ...``): the goal tool or an ``after`` tool is undeclared
or forbidden; the scripted results need more steps than ``max_steps`` to let the goal succeed
(errors a tool gives before its first result, plus one step per prerequisite and one for the
goal); a terminal or forbidden tool is undeclared; a case declares the reserved variable
``episode``.
"""

from __future__ import annotations

import json
from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from leader_eval.bounded.json_schema import validator_for
from leader_eval.errors import SuiteError, SuiteErrors
from leader_eval.suite.expectations import unsatisfiable
from leader_eval.suite.records import Case, Suite
from leader_eval.suite.render import render_messages, template_variables
from leader_eval.suite.teammate import UserSpec, render_teammate, user_spec
from leader_eval.suite.tool_schema import SchemaSite, load_schemas
from leader_eval.suite.world import Fixture, World, check_constraints, load_fixtures
from leader_eval.suite.yaml_source import JsonPath, line_of

DEFAULT_MAX_STEPS = 4
DEFAULT_LOOP_K = 3
#: the template variable that carries the transcript in event-log mode
EPISODE_VAR = "episode"


@dataclass(frozen=True)
class EpisodeSpec:
    max_steps: int
    goal_tool: str
    goal_args: Mapping[str, Any]
    goal_after: tuple[str, ...]
    terminal_tools: tuple[str, ...]
    end_on_no_call: bool
    forbid_tools: tuple[str, ...]
    loop_k: int
    loop_ignore_args: tuple[str, ...]
    transcript: str
    final: Mapping[str, Any] | None
    fixtures: tuple[Fixture, ...] = field(default=(), repr=False)
    #: the simulated teammate who answers the leader's messages (suite/teammate.py), if any
    user: UserSpec | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "max_steps": self.max_steps,
            "goal": {"tool": self.goal_tool, "args": dict(self.goal_args), "after": list(self.goal_after)},
            "terminal_tools": list(self.terminal_tools),
            "end_on_no_call": self.end_on_no_call,
            "forbid_tools": list(self.forbid_tools),
            "loop_k": self.loop_k,
            "loop_ignore_args": list(self.loop_ignore_args),
            "transcript": self.transcript,
        }
        if self.user is not None:  # absent otherwise: a suite without a teammate reads as before
            out["user"] = self.user.to_dict()
        return out


def with_episodes(suite: Suite, data: Mapping[str, Any], *, indices: Sequence[int] | None = None) -> Suite:
    """The suite with its scripted world and every episode case's ``EpisodeSpec`` (all linted).

    An episode case gets the step-0 value of the ``episode`` template variable, so the scaffold
    renders (and lints) at step 0 exactly as the loop renders it later. ``indices``: where each
    of ``suite.cases`` sits in ``data["cases"]`` (default: one for one; a case that failed the
    schema or repeats an id is left out of the suite). Every episode case is checked: the errors
    of all of them are raised together (``SuiteErrors``).
    """
    path, lines = suite.path, suite.lines
    world = build_world(path, suite.root, data, lines)
    raw_cases = data.get("cases", [])
    if not any(isinstance(c, Mapping) and "episode" in c for c in raw_cases):
        return replace(suite, world=world)
    template_vars = template_variables(suite)
    defaults = data.get("episode", {})
    # a key a case inherits from the suite-level episode: defaults is reported at its own line there
    default_lines = {p: n for p, n in lines.items() if len(p) >= 2 and p[0] == "episode"}
    kept = list(indices) if indices is not None else list(range(len(suite.cases)))
    errors: list[SuiteError] = []
    cases: list[Case] = []
    for i, case in zip(kept, suite.cases, strict=True):
        raw = raw_cases[i].get("episode")
        if raw is None:
            cases.append(case)
            continue
        at: JsonPath = ("cases", i, "episode")
        inherited = {(*at, *p[1:]): n for p, n in default_lines.items() if p[1] not in raw}
        case_lines = cast(dict[JsonPath, int], ChainMap(inherited, lines)) if inherited else lines
        try:
            if EPISODE_VAR in case.vars:
                raise SuiteError(
                    path,
                    line_of(lines, ("cases", i, "vars", EPISODE_VAR)),
                    f"case {case.id!r}: the variable {EPISODE_VAR!r} is reserved for the episode transcript",
                )
            spec = _spec(path, suite.root, case_lines, at, {**defaults, **raw}, world, case.id)
            if spec.transcript == "event_log" and EPISODE_VAR not in template_vars:
                raise SuiteError(
                    path,
                    line_of(case_lines, (*at, "transcript")),
                    f"case {case.id!r}: transcript event_log needs the scaffold to render {EPISODE_VAR}.steps",
                )
        except SuiteError as exc:
            errors.append(exc)
            continue
        variables = {**case.vars, EPISODE_VAR: initial_episode_var(spec)}
        cases.append(replace(case, vars=variables, episode=spec))
    if errors:
        raise SuiteErrors(errors)
    # fixture files and $ref targets join the content hash in load_suite (every file read)
    out = replace(suite, world=world, cases=tuple(cases))
    for case in out.cases:
        if case.episode is not None:
            try:
                _render_a_later_step(out, case)
            except SuiteError as exc:
                errors.append(exc)
    if errors:
        raise SuiteErrors(errors)
    return out


def _render_a_later_step(suite: Suite, case: Case) -> None:
    """Render the scaffold as step 2 sees it (one earlier step: a call with a result and one with
    an error), so a template that breaks on a transcript fails at lint, not mid-run."""
    spec: EpisodeSpec = case.episode
    calls = [{"tool": spec.goal_tool, "arguments": {}}, {"tool": spec.goal_tool, "arguments": {}}]
    step = {
        "index": 0,
        "output": json.dumps({"tool": spec.goal_tool, "arguments": {}}),
        "calls": calls,
        "results": [
            {"tool": spec.goal_tool, "arguments": {}, "ok": True, "result": {"ok": True}, "text": '{"ok": true}',
             "fixture": None},
            {"tool": spec.goal_tool, "arguments": {}, "ok": False, "error": "busy", "text": "error: busy",
             "fixture": None},
        ],
    }  # fmt: skip
    if spec.user is not None:
        step["reply"] = _REPLY_PROBE
    later = {**case.vars, EPISODE_VAR: {"step": 1, "max_steps": spec.max_steps, "steps": [step]}}
    messages = render_messages(suite, replace(case, vars=later))
    if spec.user is None:
        return
    # the teammate's prompt renders strictly too, with a conversation of one exchange
    render_teammate(spec.user, case.vars, [{"from": "leader", "text": "hello"}, {"from": "teammate", "text": "hi"}])
    # event_log: the scaffold shows the transcript itself; one that never shows the replies would
    # run a conversation the leader cannot hear
    shown = any(_REPLY_PROBE in str(m.get("content", "")) for m in messages)
    if spec.transcript != "messages" and EPISODE_VAR in template_variables(suite) and not shown:
        raise SuiteError(
            suite.path,
            spec.user.line,
            f"case {case.id!r}: the scaffold renders the episode's steps but never a teammate's reply "
            "(render episode.steps[i].reply, or set transcript: messages)",
        )


#: a reply the lint render looks for in the rendered scaffold
_REPLY_PROBE = "teammate-reply-7f3a"


def build_world(path: Path, root: Path, data: Mapping[str, Any], lines: dict[JsonPath, int]) -> World:
    """The suite-level world: every tool's parameters and results schema, the suite's fixtures."""
    params: dict[str, Mapping[str, Any]] = {}
    sites: list[SchemaSite] = []
    for i, t in enumerate(data.get("tools", [])):
        params[t["name"]] = t["parameters"]
        if t.get("returns") is not None:
            sites.append(
                SchemaSite(t["name"], f"tool {t['name']!r} returns", t["returns"], path, lines, ("tools", i, "returns"))
            )
    loaded = load_schemas(root, sites)  # one registry: the returns schemas may share $ref files
    returns = {name: loaded.validator(name) for name in loaded.schemas}
    fixtures = load_fixtures(path, root, data.get("fixtures", []), lines, ("fixtures",), params, returns)
    return World(params, tuple(fixtures), returns)


def initial_episode_var(spec: EpisodeSpec) -> dict[str, Any]:
    return {"step": 0, "max_steps": spec.max_steps, "steps": []}


def _spec(
    path: Path, root: Path, lines: dict[JsonPath, int], at: JsonPath, ep: Mapping[str, Any], world: World, case_id: str
) -> EpisodeSpec:
    tools = world.params
    case_fixtures = load_fixtures(path, root, ep.get("fixtures", []), lines, (*at, "fixtures"), tools, world.returns)
    goal = ep["goal"]
    gtool = goal["tool"]
    forbid = tuple(ep.get("forbid_tools", ()))
    max_steps = int(ep.get("max_steps", DEFAULT_MAX_STEPS))

    def unknown(name: str, key: JsonPath, what: str) -> None:
        if name not in tools:
            raise SuiteError(
                path,
                line_of(lines, key),
                f"case {case_id!r}: {what} {name!r} is not a declared tool (tools: {', '.join(sorted(tools))})",
            )

    for j, name in enumerate(forbid):
        unknown(name, (*at, "forbid_tools", j), "forbidden tool")
    goal_line = line_of(lines, (*at, "goal", "tool"))
    if gtool not in tools:
        raise SuiteError(
            path,
            goal_line,
            f"case {case_id!r}: unreachable goal: tool {gtool!r} is not declared (tools: {', '.join(sorted(tools))})",
        )
    if gtool in forbid:
        raise SuiteError(path, goal_line, f"case {case_id!r}: unreachable goal: tool {gtool!r} is forbidden")
    after = tuple(goal.get("after", ()))
    for j, name in enumerate(after):
        if name not in tools or name in forbid:
            why = "not declared" if name not in tools else "forbidden"
            raise SuiteError(
                path,
                line_of(lines, (*at, "goal", "after", j)),
                f"case {case_id!r}: unreachable goal: prerequisite tool {name!r} is {why}",
            )
    check_constraints(path, goal.get("args", {}), lines, (*at, "goal", "args"))
    check_constraints(path, ep.get("final") or {}, lines, (*at, "final"))
    for arg in goal.get("args", {}):
        props = tools[gtool].get("properties", {})
        if props and arg not in props:
            raise SuiteError(
                path,
                line_of(lines, (*at, "goal", "args", arg)),
                f"case {case_id!r}: goal tool {gtool!r} has no argument {arg!r}",
            )
    validator = validator_for(tools[gtool])
    for key, constraints in ((("goal", "args"), goal.get("args", {})), (("final",), ep.get("final") or {})):
        for arg, constraint in constraints.items():
            refusal = unsatisfiable(constraint, arg, tools[gtool], validator)
            if refusal:
                raise SuiteError(
                    path, line_of(lines, (*at, *key, arg)), f"case {case_id!r}: unreachable goal: {gtool}: {refusal}"
                )
    end = ep.get("end", {})
    user = user_spec(path, lines, (*at, "user"), ep["user"], tools, gtool, case_id) if ep.get("user") else None
    # with a teammate the conversation goes on after a message: ended by the stop phrase,
    # max_turns or max_steps, unless the case names terminal tools itself
    terminal = tuple(end.get("terminal_tools", (gtool,) if user is None else ()))
    for j, name in enumerate(terminal):
        unknown(name, (*at, "end", "terminal_tools", j), "terminal tool")
    case_world = world.with_fixtures(case_fixtures)
    need = sum(case_world.errors_before_success(t) + 1 for t in (*dict.fromkeys(after), gtool))
    if need > max_steps:
        shown = "never let it succeed" if need == float("inf") else f"need {int(need)} steps to let it succeed"
        raise SuiteError(
            path,
            goal_line,
            f"case {case_id!r}: unreachable goal {gtool!r}: the scripted results {shown}, max_steps is {max_steps}",
        )
    for name in terminal:
        if name != gtool and name in after:
            raise SuiteError(
                path,
                line_of(lines, (*at, "end")),
                f"case {case_id!r}: unreachable goal: prerequisite {name!r} is a terminal tool",
            )
    return EpisodeSpec(
        max_steps=max_steps,
        goal_tool=gtool,
        goal_args=dict(goal.get("args", {})),
        goal_after=after,
        terminal_tools=terminal,
        end_on_no_call=bool(end.get("on_no_call", True)),
        forbid_tools=forbid,
        loop_k=int(ep.get("loop_k", DEFAULT_LOOP_K)),
        loop_ignore_args=tuple(ep.get("loop_ignore_args", ())),
        transcript=str(ep.get("transcript", "auto")),
        final=ep.get("final"),
        fixtures=tuple(case_fixtures),
        user=user,
    )
