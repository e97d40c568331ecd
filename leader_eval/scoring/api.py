"""The public scoring API: score one raw output exactly as a run would, without a backend.

::

    import leader_eval

    suite = leader_eval.load_suite("suites/leader_core.yaml")        # or YAML text, or a dict
    result = leader_eval.score_output(suite, '{"tool": "wait", "arguments": {}}', case="kickoff")
    result.passed, result.reason, result.hard_fail, result.failed_reasons, result.leaks

``score_output`` renders the case's scaffold (the same strict rendering a run does), builds the
case's scorer and scores the text as an ``ok`` sample: every check, the same verdict rules
(docs/scoring.md), the same result record a run stores (``SampleScore``). docs/api.md documents
the shape of the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.scoring.python_check import bind
from leader_eval.scoring.scorer import ModelInfo, SampleScore, case_scorer

# ``leader_eval.load_suite``: a suite from a path, YAML text or a dict (reading files is the suite
# layer's; scoring does no I/O)
from leader_eval.suite.load import load_suite_source as load_suite
from leader_eval.suite.records import Case, Suite
from leader_eval.suite.render import render_messages
from leader_eval.types import CheckContext, Sample, StopReason

__all__ = ["load_suite", "score_output"]


def _case_of(suite: Suite, case: str | Case | None) -> Case:
    if isinstance(case, Case):
        return case
    if case is None:
        if len(suite.cases) == 1:
            return suite.cases[0]
        raise LeaderEvalError(f"score_output: suite {suite.name!r} has {len(suite.cases)} cases; pass case=ID")
    found = next((c for c in suite.cases if c.id == case), None)
    if found is None:
        known = ", ".join(c.id for c in suite.cases[:10])
        raise LeaderEvalError(f"score_output: no case {case!r} in suite {suite.name!r} (cases: {known})")
    return found


def score_output(
    suite: str | Path | Mapping[str, Any] | Suite,
    text: str,
    *,
    case: str | Case | None = None,
    protocol: str | None = None,
    model: ModelInfo | None = None,
    api_tool_calls: Sequence[Mapping[str, Any]] | None = None,
    stop_reason: StopReason | None = "stop",
    prompt_text: str | None = None,
    checks: Mapping[str, Callable[[CheckContext], Any]] | None = None,
) -> SampleScore:
    """Score one raw output of ``case`` (an id; optional when the suite has one case).

    ``protocol``: the tool-call protocol in force (default: the suite's, else ``json``).
    ``model``: the model's special and end-of-turn tokens and reasoning tags (default: none
    declared, so the common end-of-turn tokens count as end of turn). ``api_tool_calls``: the
    OpenAI-style ``tool_calls`` a chat API returned beside ``text`` (protocol ``openai``).
    ``stop_reason``: ``"length"`` marks the output truncated. ``prompt_text``: the chat-templated
    prompt the model saw (for the restates-prompt check; default: the rendered messages).
    ``checks``: the functions of the Python checks the suite names (``checks: python:``), by
    name; a suite that names one not given here is refused (``CheckNotBound``), never scored
    without it.
    """
    suite = load_suite(suite)
    if checks is not None:
        suite = bind(suite, {n: (fn, f"score_output:{n}", "") for n, fn in checks.items()})
    the_case = _case_of(suite, case)
    messages = render_messages(suite, the_case)
    prompt = prompt_text if prompt_text is not None else "\n".join(str(m["content"]) for m in messages)
    scorer = case_scorer(suite, the_case, protocol or suite.protocol or "json", model or ModelInfo(), messages, prompt)
    sample = Sample(
        case_id=the_case.id,
        index=0,
        seed=0,
        key="score_output",
        outcome="ok",
        text=text,
        stop_reason=stop_reason,
        api_tool_calls=[dict(c) for c in api_tool_calls] if api_tool_calls is not None else None,
    )
    return scorer.score(sample)
