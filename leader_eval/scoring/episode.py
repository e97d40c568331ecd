"""Episode checks: every single-turn check per step, and the checks of the episode as a whole.

Per step, the step's output is scored like a single-turn sample without call expectations
(empty, truncated, repetition, restates_prompt against that step's prompt, format, leakage, the
case's ``expect.forbid``). Per episode (docs/episodes.md):

* ``goal``: the goal was reached (``leader_eval.suite.episode_spec`` defines when), and at which step;
* ``forbidden_tools``: no call to a tool in ``forbid_tools``;
* ``loop``: no call made ``loop_k`` times or more in the episode (not necessarily in a row), two
  calls being the same when the tool is and the arguments are after BFCL's string
  standardisation (lower case; spaces and ``,./-_*^`` removed; ``'`` read as ``"``), integers read
  as floats, and the arguments in ``loop_ignore_args`` left out;
* ``no_call_step``: every step made a call;
* ``final``: the last call to the goal tool satisfies ``final`` (when the case sets it);
* ``steps``: every step passed its own checks (a hard fail of any step is the episode's).

An episode passes when every check passes. A step the sampler failed makes the whole episode a
sampler error (never a pass, never a model failure). The episode's details (per step: outcome,
calls, scripted results, failed checks) go in the data of a check named ``episode``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from leader_eval.checks.toolcall import match_calls
from leader_eval.scoring.scorer import ModelInfo, SampleScore, SuiteScoring, case_scorer
from leader_eval.stats.metrics import EPISODE_METRICS
from leader_eval.store.run_store import STEPS
from leader_eval.suite.teammate import UserSpec, message_of
from leader_eval.types import Sample, ToolCall

_log = logging.getLogger("leader_eval")

#: the check whose data holds an episode's details
EPISODE_CHECK = "episode"

_BFCL_STRIP = re.compile(r"[ ,./\-_*^]")


def standardize(value: Any) -> Any:
    """BFCL's string standardisation, applied to every string in ``value``; ints read as floats."""
    if isinstance(value, str):
        return _BFCL_STRIP.sub("", value).lower().replace("'", '"')
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): standardize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [standardize(v) for v in value]
    return repr(value)


def call_identity(tool: str, arguments: Any, ignore: Sequence[str] = ()) -> str:
    args = arguments if isinstance(arguments, Mapping) else {"": arguments}
    kept = {k: v for k, v in args.items() if k not in ignore}
    return tool + "\0" + json.dumps(standardize(kept), sort_keys=True, ensure_ascii=False)


def find_loop(calls: Sequence[Mapping[str, Any]], k: int, ignore: Sequence[str] = ()) -> dict[str, Any] | None:
    """The first call made ``k`` times (after standardisation), with the steps it was made at."""
    seen: dict[str, list[int]] = {}
    for c in calls:
        steps = seen.setdefault(call_identity(c["tool"], c["arguments"], ignore), [])
        steps.append(int(c["step"]))
        if len(steps) >= k:
            return {"tool": c["tool"], "arguments": c["arguments"], "times": len(steps), "steps": steps}
    return None


def score_episodes(
    suite: Any,
    run_path: Path,
    scores: Sequence[SampleScore],
    protocol: str,
    model: ModelInfo,
    *,
    steps: Mapping[tuple[str, int], Sequence[Mapping[str, Any]]],
    turns: Mapping[tuple[str, int], Mapping[int, Mapping[str, Any]]] | None = None,
) -> list[SampleScore]:
    """``scores`` with each episode case's samples scored as episodes from the run's recorded
    steps (``steps``: ``steps.jsonl`` as the store reads it, ``RunDir.read_steps``; ``run_path``
    names the run in warnings).

    An episode sample whose steps are missing or incomplete (a step number skipped, no step that
    ended it: an unreadable line, a run directory that lost its ``steps.jsonl``) is not scored:
    scoring its last output as a single turn would judge another task. Its case then has fewer
    scored samples than planned, which the gate refuses. ``turns``: the simulated teammate's
    recorded replies (``RunDir.read_turns``), by episode and the step each answers; an episode
    that lacks a reply its case's teammate owed is incomplete too."""
    episodic = {c.id: c for c in suite.cases if c.episode is not None}
    if not episodic:
        return list(scores)
    out = []
    for s in scores:
        case = episodic.get(s.case_id)
        if case is None:
            out.append(s)
            continue
        recorded = steps.get((s.case_id, s.index)) or []
        replies = (turns or {}).get((s.case_id, s.index)) or {}
        if not _whole_episode(recorded, replies, case.episode.user):
            _log.warning(
                "%s: episode %s#%d not scored: its steps in %s are missing or incomplete",
                run_path, s.case_id, s.index, STEPS,
            )  # fmt: skip
            continue
        out.append(score_episode(suite, case, recorded, protocol, model, replies))
    return out


def _whole_episode(
    steps: Sequence[Mapping[str, Any]], turns: Mapping[int, Mapping[str, Any]], user: UserSpec | None
) -> bool:
    """Every step there, in order; every reply the teammate owed there; and one of them ended it."""
    if not steps or [r.get("step") for r in steps] != list(range(len(steps))):
        return False
    if user is None:
        return bool(steps[-1].get("end"))
    for r in steps[:-1]:  # a step before the last went on: if it spoke, its reply went on too
        if r.get("end") or (message_of(user, r["results"]) and (r["step"] not in turns or turns[r["step"]].get("end"))):
            return False
    last = steps[-1]
    if last.get("end"):
        return last["step"] not in turns
    turn = turns.get(last["step"])
    return turn is not None and bool(turn.get("end"))


def score_episode(
    suite: Any,
    case: Any,
    steps: Sequence[Mapping[str, Any]],
    protocol: str,
    model: ModelInfo,
    turns: Mapping[int, Mapping[str, Any]] | None = None,
) -> SampleScore:
    spec = case.episode
    turns = turns or {}
    # a teammate reply the sampler failed is a sampler error of the episode, never the leader's
    bad = next((r for r in (*steps, *turns.values()) if r["outcome"] != "ok"), None)
    # per-step checks: the single-turn scorer without call expectations
    step_case = replace(case, expect={k: v for k, v in case.expect.items() if k == "forbid"})
    step_scores: list[SampleScore] = []
    shared = SuiteScoring(suite, protocol, model)  # every step's scorer shares the suite's parts
    for r in steps:
        sample = Sample(**{k: r[k] for k in Sample.__dataclass_fields__ if k in r})
        p = r.get("prompt") or {}
        scorer = case_scorer(suite, step_case, protocol, model, p.get("messages", []), p.get("text", ""), shared)
        step_scores.append(scorer.score(sample))
    calls = [
        {**c, "step": int(r["step"]), "ok": res["ok"]}
        for r in steps
        for c, res in zip(r["calls"], r["results"], strict=True)
    ]
    tools = {t.name: t.parameters for t in suite.tools}
    goal_text = scorer.goal if steps else None  # the case's current goal, read as single-turn scoring does

    def satisfies(c: Mapping[str, Any], constraints: Mapping[str, Any]) -> list[dict[str, Any]]:
        call = ToolCall(c["tool"], c["arguments"] if isinstance(c["arguments"], dict) else {}, protocol)
        exp = {"calls": [{"tool": c["tool"], "args": dict(constraints), "allow_extra_args": True}]}
        return [x.to_dict() for x in match_calls([call], exp, tools, goal=goal_text) if not x.passed]

    reached_at: int | None = None
    succeeded: set[str] = set()
    for c in calls:
        if (
            c["tool"] == spec.goal_tool
            and c["ok"]
            and all(t in succeeded for t in spec.goal_after)
            and not satisfies(c, spec.goal_args)
        ):
            reached_at = c["step"]
            break
        if c["ok"]:
            succeeded.add(c["tool"])
    checks: list[dict[str, Any]] = []

    def check(name: str, passed: bool, reason: str | None, detail: str = "", hard: bool = False) -> None:
        checks.append(
            {
                "check": name,
                "passed": passed,
                "reason": None if passed else reason,
                "detail": detail,
                "hard": hard and not passed,
                "findings": [],
                "data": {},
            }
        )

    goal_calls = [c for c in calls if c["tool"] == spec.goal_tool]
    if reached_at is not None:
        check("goal", True, None, f"reached at step {reached_at + 1}")
    else:
        why = "no call to " + spec.goal_tool
        if goal_calls:
            failed = satisfies(goal_calls[-1], spec.goal_args)
            why = failed[0]["detail"] if failed else "its result was an error or a prerequisite was missing"
        check("goal", False, "goal_not_reached", f"goal {spec.goal_tool} not reached: {why}")
    forbidden = [c for c in calls if c["tool"] in spec.forbid_tools]
    check(
        "forbidden_tools",
        not forbidden,
        "forbidden_tool",
        f"called {forbidden[0]['tool']} at step {forbidden[0]['step'] + 1}" if forbidden else "",
    )
    loop = find_loop(calls, spec.loop_k, spec.loop_ignore_args)
    check(
        "loop",
        loop is None,
        "loop",
        _loop_detail(loop),
    )
    no_call = [int(r["step"]) for r in steps if r["outcome"] == "ok" and not r["calls"]]
    check("no_call_step", not no_call, "no_call", f"step {no_call[0] + 1} made no call" if no_call else "")
    if spec.final:
        failed = satisfies(goal_calls[-1], spec.final) if goal_calls else [{"detail": f"no call to {spec.goal_tool}"}]
        check("final", not failed, "wrong_value", failed[0]["detail"] if failed else "")
    failing_steps = [(r, sc) for r, sc in zip(steps, step_scores, strict=True) if sc.scored and not sc.passed]
    step_hard = any(sc.hard_fail for sc in step_scores)
    first = failing_steps[0] if failing_steps else None
    check(
        "steps",
        not failing_steps,
        first[1].reason if first else None,
        f"step {int(first[0]['step']) + 1}: {first[1].reason}" if first else "",
        hard=step_hard,
    )
    scored_steps = [sc for sc in step_scores if sc.scored]
    leaked_steps = [int(r["step"]) for r, sc in zip(steps, step_scores, strict=True) if sc.scored and sc.leaked]
    data = {
        "goal_reached": reached_at is not None,
        "steps_to_goal": reached_at + 1 if reached_at is not None else None,
        "n_steps": len(steps),
        "end": steps[-1].get("end") or (turns.get(steps[-1]["step"]) or {}).get("end"),
        "loop": loop,
        "looped": loop is not None,
        "forbidden": [{"tool": c["tool"], "step": c["step"]} for c in forbidden],
        "no_call_steps": no_call,
        "leaked_steps": leaked_steps,
        "step_leak_rate": len(leaked_steps) / len(scored_steps) if scored_steps else None,
        "steps": [
            {
                "step": int(r["step"]),
                "outcome": r["outcome"],
                "passed": sc.passed,
                "hard_fail": sc.hard_fail,
                "reason": sc.reason,
                "calls": r["calls"],
                "results": r["results"],
                "failed_checks": sc.failed_checks,
                **({"reply": (turns.get(r["step"]) or {}).get("reply")} if spec.user is not None else {}),
            }
            for r, sc in zip(steps, step_scores, strict=True)
        ],
    }
    if spec.user is not None:
        data["teammate"] = {
            "role": spec.user.model_role,
            "turns": len(turns),
            "stopped": any(t.get("end") == "user_stop" for t in turns.values()),
        }
    failed_checks = [c for c in checks if not c["passed"]]
    checks.append(
        {
            "check": EPISODE_CHECK,
            "passed": True,
            "reason": None,
            "detail": "",
            "hard": False,
            "findings": [],
            "data": data,
        }
    )
    if bad is not None:
        return SampleScore(
            case.id,
            int(steps[0]["index"]),
            bad["outcome"],
            False,
            False,
            "context_overflow" if bad["outcome"] == "context_overflow" else "sampler_error",
            False,
            False,
            False,
            False,
            0.0,
            checks=checks,
        )
    return SampleScore(
        case_id=case.id,
        index=int(steps[0]["index"]),
        outcome="ok",
        passed=not failed_checks,
        hard_fail=step_hard,
        reason=failed_checks[0]["reason"] or failed_checks[0]["check"] if failed_checks else None,
        strict_format=all(sc.strict_format for sc in scored_steps),
        lenient_format=all(sc.lenient_format for sc in scored_steps),
        tool_correct=reached_at is not None,
        leaked=bool(leaked_steps),
        partial_credit=1.0 if reached_at is not None else 0.0,
        calls=[{"name": c["tool"], "arguments": c["arguments"], "step": c["step"]} for c in calls],
        checks=checks,
    )


def _loop_detail(loop: Mapping[str, Any] | None) -> str:
    if loop is None:
        return ""
    at = ", ".join(str(s + 1) for s in loop["steps"])
    return f"{loop['tool']} with the same arguments {loop['times']} times (steps {at})"


def episode_data(score: SampleScore) -> dict[str, Any] | None:
    for c in score.checks:
        if c.get("check") == EPISODE_CHECK:
            data: dict[str, Any] = c.get("data") or {}
            return data
    return None


def episode_case_metrics(scores: Sequence[SampleScore]) -> dict[str, Any]:
    """Per-case values of the episode metrics (``metrics.EPISODE_METRICS``) over the case's scored
    episodes, each with ``n_<name>``, the episodes behind it; empty for a case without episodes."""

    out: dict[str, Any] = {}
    scored = [s for s in scores if s.scored]
    if not any(episode_data(s) is not None for s in scored):
        return out  # single-turn samples: no episode metric has a value (one scan, not one per metric)
    for name, spec in EPISODE_METRICS.items():
        values = spec.episode_values(scored)
        if values:
            out[name] = sum(values) / len(values)
            out[f"n_{name}"] = len(values)
    return out
