"""Pairwise judging: the same case's outputs from two runs, compared by a judge in both orders.

For each ``pairwise: true`` criterion of the suite, and each case and sample index both runs
scored, the judged texts of run A and run B go before the criterion's judge twice: A first, then
B first. Each reply must be exactly ``{"better": "1" | "2" | "tie"}`` (decoded under a grammar
where the backend allows); anything else is a judge error. Per order the outcome for B is 1 (B
better), 0 (A better) or 0.5 (tie); a pair's value is the mean of its two orders, so a judge that
always prefers the first text scores every pair 0.5. The report gives B's preference (weighted
mean over cases of the case's mean, bootstrap interval over cases), the **order consistency**
(the share of pairs whose two orders name the same winner: the order-bias probe) and the judge
errors. Reported, never gated (docs/judges.md).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.runs import event_loop
from leader_eval.runs.evaluate import read_run
from leader_eval.runs.judging import Judge, judge_from_role, without_end_token
from leader_eval.runs.trusted import Trusted
from leader_eval.sampling.backends.base import Constraint, SampleRequest, SamplingParams
from leader_eval.scoring.judge import decode_strict, judged_text
from leader_eval.stats.core import weighted_mean_ci
from leader_eval.suite.judge_spec import JudgeSpec, render_pair_messages
from leader_eval.suite.load import load_suite

PAIR_GBNF = 'root ::= "{\\"better\\": \\"" ("1" | "2" | "tie") "\\"}"\n'
PAIR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"better": {"type": "string", "enum": ["1", "2", "tie"]}},
    "required": ["better"],
    "additionalProperties": False,
}


def parse_preference(reply: str) -> str | None:
    """ "1", "2" or "tie" from a reply that is exactly the verdict object; None otherwise."""

    text = reply.strip()
    if not text or len(text) > 100:
        return None
    try:
        data = decode_strict(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) != {"better"} or data["better"] not in ("1", "2", "tie"):
        return None
    return str(data["better"])


async def _ask_pair(judge: Judge, spec: JudgeSpec, first: str, second: str, seed: int) -> str | None:
    prompt = judge.backend.apply_chat_template(render_pair_messages(spec, first, second), None)
    request = SampleRequest(
        prompt=prompt,
        params=SamplingParams(temperature=judge.temperature, max_tokens=judge.max_tokens),
        seeds=[seed],
        constraint=Constraint(gbnf=PAIR_GBNF, json_schema=PAIR_SCHEMA, name="preference"),
    )
    try:
        out = await asyncio.wait_for(judge.backend.sample(request), judge.timeout_s)
    except TimeoutError:
        return None
    if len(out) != 1 or out[0].error:
        return None
    return parse_preference(without_end_token(out[0].text, out[0].stop_reason, judge.backend.special_tokens))


async def _all_pairs(
    judge: Judge,
    spec: JudgeSpec,
    keys: Sequence[tuple[str, int]],
    a: Mapping[tuple[str, int], str],
    b: Mapping[tuple[str, int], str],
    seed: int,
) -> list[tuple[str | None, str | None]]:
    """Each pair asked in both orders, one call at a time (a local judge serves one anyway)."""
    out = []
    for k in keys:
        s = seed + int(hashlib.sha256(repr(k).encode()).hexdigest()[:6], 16)
        ab = await _ask_pair(judge, spec, a[k], b[k], s)  # A is text 1
        ba = await _ask_pair(judge, spec, b[k], a[k], s)  # B is text 1
        out.append((ab, ba))
    return out


def _texts(run_dir: str | Path, spec: JudgeSpec) -> dict[tuple[str, int], str]:
    run = read_run(run_dir)
    raw = {(s.case_id, s.index): s.text for s in run.samples}
    out = {}
    for score in run.scores:
        if not score.scored:
            continue
        text = judged_text(spec.judged, raw.get((score.case_id, score.index), ""), score.calls)
        if text is not None:
            out[(score.case_id, score.index)] = text
    return out


def judge_pairs(
    suite_path: str | Path, run_a: str | Path, run_b: str | Path, trusted: Trusted, *, seed: int = 0
) -> dict[str, Any]:
    """B against A on every pairwise criterion of the suite, both orders (module docstring)."""
    event_loop.loop_factory()  # a bad LEADER_EVAL_EVENT_LOOP: before anything is read
    suite = load_suite(suite_path)
    specs = [s for s in suite.judges if s.pairwise]
    if not specs:
        raise LeaderEvalError(f"{suite.path}: no pairwise criterion (judges: NAME: {{pairwise: true, ...}})")
    weights = {c.id: c.weight for c in suite.cases}
    tags = {c.id: c.tags for c in suite.cases}
    report: dict[str, Any] = {"suite": suite.name, "a": str(run_a), "b": str(run_b), "criteria": {}}
    judges: dict[str, Judge] = {}
    try:
        for spec in specs:
            where = f"{suite.path}:{spec.line}: judges.{spec.name}"
            judge = judges.get(spec.model_role) or judge_from_role(trusted, spec.model_role, where=where)
            judges[spec.model_role] = judge
            a, b = _texts(run_a, spec), _texts(run_b, spec)
            keys = sorted(k for k in a.keys() & b.keys() if k[0] in tags and spec.applies(tags[k[0]]))

            answers = event_loop.run(_all_pairs(judge, spec, keys, a, b, seed))
            per_case: dict[str, list[float]] = {}
            consistent = errors = complete = 0
            for k, (ab, ba) in zip(keys, answers, strict=True):
                errors += (ab is None) + (ba is None)
                if ab is None or ba is None:
                    continue
                b_ab = {"2": 1.0, "1": 0.0, "tie": 0.5}[ab]
                b_ba = {"1": 1.0, "2": 0.0, "tie": 0.5}[ba]
                complete += 1
                consistent += b_ab == b_ba
                per_case.setdefault(k[0], []).append((b_ab + b_ba) / 2)
            cases = sorted(per_case)
            est = weighted_mean_ci(
                [sum(per_case[c]) / len(per_case[c]) for c in cases],
                [float(weights[c]) for c in cases],
                n_samples=complete,
                seed=seed,
            )
            report["criteria"][spec.name] = {
                "b_preferred": est.to_dict(),
                "pairs": len(keys),
                "pairs_judged_both_orders": complete,
                "order_consistency": round(consistent / complete, 4) if complete else None,
                "judge_calls": 2 * len(keys),
                "judge_errors": errors,
                "judge": judge.identity(spec),
            }
    finally:
        for judge in judges.values():
            event_loop.run(judge.backend.aclose())
    return report
