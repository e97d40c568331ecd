"""``show --case`` for an episode: the whole transcript, step by step.

Each step prints its raw output as ``repr()`` (special tokens visible), the calls parsed from it,
the scripted result each call got (or the error the world answered), and the checks the step
failed; after a step a simulated teammate answered, its raw reply and how it ended the
conversation; then the episode's own failed checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leader_eval.inert import inert
from leader_eval.report.check_line import failed_check_line
from leader_eval.scoring.episode import episode_data
from leader_eval.scoring.scorer import SampleScore
from leader_eval.store.run_store import RunDir, read_steps
from leader_eval.types import Sample


def episode_transcript(run_path: Path, sample: Sample, score: SampleScore) -> list[str] | None:
    """Lines of the transcript of one episode, or None when ``score`` is not an episode's.

    What the model, the world or the suite wrote is ``repr``'d or ``inert`` (leader_eval.inert).
    """
    data = episode_data(score)
    if data is None:
        return None
    steps = read_steps(run_path).get((sample.case_id, sample.index), [])
    turns = RunDir(run_path).read_turns().get((sample.case_id, sample.index), {}) if "teammate" in data else {}
    verdict = "PASS" if score.passed else f"FAIL ({score.reason}{', hard' if score.hard_fail else ''})"
    reached = f"goal at step {data['steps_to_goal']}" if data.get("goal_reached") else "goal not reached"
    lines = [
        f"== {sample.case_id} #{sample.index}  episode  {sample.outcome}  {len(steps)} step(s), "
        f"ended: {inert(data.get('end'))}  {reached}  {inert(verdict)}"
    ]
    by_step: dict[int, Mapping[str, Any]] = {int(s["step"]): s for s in data.get("steps", [])}
    for r in steps:
        k = int(r["step"])
        lines.append(
            f"-- step {k + 1}  seed {r['seed']}  {inert(r['outcome'])}  stop={inert(r['stop_reason'])}  "
            f"tokens={r['completion_tokens']}"
        )
        lines.append("raw: " + repr(r["text"]))
        if r.get("error"):
            lines.append(f"error: {inert(r['error'])}")
        if r.get("api_tool_calls"):
            lines.append(f"api tool_calls: {r['api_tool_calls']!r}")
        if not r["calls"] and r["outcome"] == "ok":
            lines.append("(no call)")
        for res in r["results"]:
            lines.append(f"call: {inert(res['tool'])}({res['arguments']!r})")
            shown = f"result: {res['result']!r}" if res["ok"] else f"error result: {res['error']!r}"
            lines.append(f"  -> {shown}" + (f"  [{inert(res['fixture'])}]" if res.get("fixture") else ""))
        for c in by_step.get(k, {}).get("failed_checks", []):
            lines.append(failed_check_line("  x ", c))
        t = turns.get(k)
        if t is not None:
            lines.append(
                f"teammate {inert(t['role'])}  seed {t['seed']}  {inert(t['outcome'])}  tokens={t['completion_tokens']}"
                + (f"  ended: {inert(t['end'])}" if t.get("end") else "")
            )
            lines.append("  raw: " + repr(t["text"]))
            if t.get("error"):
                lines.append(f"  error: {inert(t['error'])}")
    for c in score.checks:
        if not c["passed"]:
            lines.append(failed_check_line("x episode ", c))
    return lines
