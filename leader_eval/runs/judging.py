"""Rubric judges over a run's samples: each judge call made once, recorded, resumable, replayable.

For every scored sample and every criterion of the suite's ``judges:`` that applies to its case,
the judged text (``scoring.judge.judged_text``) is put before the criterion's judge, a model role
from trusted configuration (``RunOptions.trusted``), decoding under the verdict's constraint where
the backend can (a llama.cpp grammar, ``response_format``). The reply goes to ``judgements.jsonl``
(one record per ``criterion|case|index`` slot, appended and flushed), so a killed run resumes
without asking any judge again. A judge whose weights are named (a GGUF's hash, ``--cache-id``)
also shares its replies across runs through the sample cache, keyed by the judge's identity, the
prompt template, the rubric and the judged text. A replayed run (``replay:RUN``) re-reads the
recorded run's judgements and asks no model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.runs import event_loop
from leader_eval.runs.options import RunOptions, backend_options, run_options
from leader_eval.runs.trusted import Trusted, TrustedError
from leader_eval.sampling.backends import guard, resolve_backend
from leader_eval.sampling.backends.base import Backend, Constraint, SampleRequest, SamplingParams, weights_identity
from leader_eval.scoring.judge import PREFIX, grammar, json_schema, judged_text, parse_verdict
from leader_eval.scoring.scorer import SampleScore
from leader_eval.store.cache import SampleCache
from leader_eval.store.calibration import calibration_dir, read_record, record_path
from leader_eval.store.run_store import RunDir
from leader_eval.suite.judge_spec import JudgeSpec, render_judge_messages
from leader_eval.suite.records import Suite
from leader_eval.types import Sample

#: a verdict is a few tokens; a role's own max_tokens wins
JUDGE_MAX_TOKENS = 24
#: seconds one judge call may take before it is a judge error (a role's request_timeout wins)
JUDGE_TIMEOUT_S = 300.0


class JudgeError(LeaderEvalError):
    """A judge cannot run: an undefined model role, a run judged by another judge."""


def check_judges(suite: Suite, trusted: Trusted) -> None:
    """Every criterion's model role is defined in trusted configuration: a one-line error naming
    the suite file and line otherwise (before anything is sampled; ``lint`` calls it too)."""
    for spec in suite.judges:
        try:
            trusted.model(spec.model_role, where=f"{suite.path}:{spec.line}: judges.{spec.name}")
        except TrustedError as exc:
            raise JudgeError(str(exc)) from None


@dataclass
class Judge:
    """One model role's backend and the identity its judgements are recorded under."""

    role: str
    backend: Backend
    temperature: float
    max_tokens: int
    timeout_s: float

    def identity(self, spec: JudgeSpec) -> dict[str, Any]:
        """What a judgement depends on besides the judged text: recorded with every judgement
        and in the golden (a different identity is a different judge)."""
        return {
            "model_role": self.role,
            "model_id": self.backend.model_id,
            "weights": weights_identity(self.backend),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "template_sha256": spec.template_sha256,
            "rubric_sha256": spec.rubric_sha256,
        }


def judge_from_role(trusted: Trusted, role: str, *, where: str) -> Judge:
    """The judge a model role names, its backend built with the role's options."""
    named = trusted.model(role, where=where)
    values = dict(named.values)
    given = values.pop("backend", None)  # a backend object: only code (conftest.py) can register one
    if given is not None:
        backend: Backend = guard(given)
    else:
        opts: RunOptions = run_options(values)
        backend = resolve_backend(opts.model, context_length=opts.context_length, **backend_options(values))
    temperature = float(values["temperature"]) if values.get("temperature") is not None else 0.0
    max_tokens = int(values["max_tokens"]) if values.get("max_tokens") is not None else JUDGE_MAX_TOKENS
    timeout = float(values["request_timeout"]) if values.get("request_timeout") is not None else JUDGE_TIMEOUT_S
    return Judge(role, backend, temperature, max_tokens, timeout)


def cache_key(identity: Mapping[str, Any], judged: str) -> str:
    """The content address of one judgement: the judge's identity and the judged text."""
    body = json.dumps({"judge": dict(identity), "judged": judged}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def slot_of(criterion: str, case_id: str, index: int) -> str:
    return f"{criterion}|{case_id}|{index}"


@dataclass
class Stats:
    asked: int = 0  # judge calls made
    resumed: int = 0  # judgements already in the run directory
    cached: int = 0  # judgements served by the cross-run cache
    replayed: int = 0


async def ask(
    judge: Judge, spec: JudgeSpec, text: str, case_vars: Mapping[str, Any], seed: int
) -> tuple[str, str | None]:
    """One judge call: the reply and None, or "" and the judge error (a sampler error, a timeout)."""
    messages = render_judge_messages(spec, text, case_vars)
    prompt = judge.backend.apply_chat_template(messages, None)
    request = SampleRequest(
        prompt=prompt,
        params=SamplingParams(temperature=judge.temperature, max_tokens=judge.max_tokens),
        seeds=[seed],
        constraint=Constraint(gbnf=grammar(spec.scale), json_schema=json_schema(spec.scale)),
    )
    try:
        out = await asyncio.wait_for(judge.backend.sample(request), judge.timeout_s)
    except TimeoutError:
        return "", f"judge call timed out after {judge.timeout_s:g} s"
    if len(out) != 1:
        return "", f"judge backend returned {len(out)} completions for one request"
    if out[0].error:
        return "", f"judge call failed: {out[0].error}"
    return without_end_token(out[0].text, out[0].stop_reason, judge.backend.special_tokens), None


def without_end_token(text: str, stop_reason: str | None, special: Sequence[str]) -> str:
    """The reply less the one special token it stopped on (a local backend's text keeps the
    end-of-turn token it sampled; it is the model stopping, not part of the verdict)."""
    if stop_reason == "stop":
        for tok in special:
            if tok and text.endswith(tok):
                return text[: -len(tok)]
    return text


def judge_run(
    rundir: RunDir,
    suite: Suite,
    samples: Sequence[Sample],
    scores: Sequence[SampleScore],
    trusted: Trusted,
    *,
    replay_from: Path | None = None,
    judges: Mapping[str, Judge] | None = None,
    cache: SampleCache | None = None,
) -> Stats:
    """Judge every scored sample on every criterion that applies to its case; record each reply.

    ``judges``: the judge of each model role (built from ``trusted`` when not given; tests pass
    doubles). ``replay_from``: a recorded run whose judgements are copied, no model asked."""
    event_loop.loop_factory()  # a bad LEADER_EVAL_EVENT_LOOP: one error, before any judge is built
    stats = Stats()
    if not suite.judges:
        return stats
    check_judges(suite, trusted)
    by_case = {c.id: c for c in suite.cases}
    text_of = {(s.case_id, s.index): s.text for s in samples}
    work: list[tuple[JudgeSpec, SampleScore, str]] = []
    for score in scores:
        case = by_case.get(score.case_id)
        if case is None or not score.scored:
            continue
        for spec in suite.judges:
            if spec.pairwise or not spec.applies(case.tags):  # pairwise: two runs (runs.pairwise)
                continue
            text = judged_text(spec.judged, text_of.get((score.case_id, score.index), ""), score.calls)
            if text is not None:
                work.append((spec, score, text))
    log = rundir.judgements_log()
    try:
        if replay_from is not None:
            recorded = RunDir(replay_from).read_judgements()
            for spec, score, _ in work:
                slot = slot_of(spec.name, score.case_id, score.index)
                if slot not in log and slot in recorded:
                    log.append(recorded[slot])
                    stats.replayed += 1
            return stats  # a slot the recorded run lacks stays unjudged: reported, never a pass
        built: dict[str, Judge] = dict(judges or {})
        for spec in suite.judges:
            if spec.model_role not in built and not spec.pairwise:
                built[spec.model_role] = judge_from_role(
                    trusted, spec.model_role, where=f"{suite.path}:{spec.line}: judges.{spec.name}"
                )
        todo = []
        for spec, score, text in work:
            judge = built[spec.model_role]
            identity = judge.identity(spec)
            slot = slot_of(spec.name, score.case_id, score.index)
            have = log.get(slot)
            if have is not None:
                if have.get("judge") != identity:
                    raise JudgeError(
                        f"{rundir.path}: judgements were made by another judge ({have['judge'].get('model_id')}, "
                        f"{spec.name}); this run's judge is {identity['model_id']}: use a fresh --out"
                    )
                stats.resumed += 1
                continue
            todo.append((spec, score, text, judge, identity, slot))
        if todo:
            event_loop.run(_ask_all(todo, by_case, log, cache, stats))
    finally:
        log.close()
        if judges is None:
            for judge in {id(j): j for j in (built if replay_from is None else {}).values()}.values():
                event_loop.run(judge.backend.aclose())
    return stats


async def _ask_all(
    todo: Sequence[tuple[JudgeSpec, SampleScore, str, Judge, dict[str, Any], str]],
    by_case: Mapping[str, Any],
    log: Any,
    cache: SampleCache | None,
    stats: Stats,
) -> None:
    limit = asyncio.Semaphore(max(1, min(j.backend.max_concurrency for *_, j, _, _ in todo)))

    async def one(
        spec: JudgeSpec, score: SampleScore, text: str, judge: Judge, identity: dict[str, Any], slot: str
    ) -> None:
        key = cache_key(identity, text)
        hit = cache.get(key) if cache is not None and identity["weights"] else None
        if hit is not None:
            reply, error = str(hit["text"]), None
            stats.cached += 1
        else:
            async with limit:
                reply, error = await ask(judge, spec, text, by_case[score.case_id].vars, int(key[:8], 16))
            stats.asked += 1
        record = {
            "slot": slot,
            "criterion": spec.name,
            "case_id": score.case_id,
            "index": score.index,
            "key": key,
            "judge": identity,
            "reply": reply,
            "error": error,
        }
        log.append(record)  # flushed: a kill after this line never asks for this slot again
        if cache is not None and identity["weights"] and error is None and hit is None:
            cache.put({"key": key, "outcome": "ok", "text": reply})

    await asyncio.gather(*(one(*t) for t in todo))


def attach(
    suite: Suite, scores: Sequence[SampleScore], judgements: Mapping[str, Mapping[str, Any]]
) -> list[SampleScore]:
    """Each score with its judgements as one ``judge`` check (``data``: criterion -> verdict).

    The check never fails the sample (a judge's verdict is its own metric, ``judge:NAME``); a
    criterion that applies to the case but has no verdict is recorded as not judged."""
    if not suite.judges:
        return list(scores)
    by_case = {c.id: c for c in suite.cases}
    out = []
    for score in scores:
        case = by_case.get(score.case_id)
        if case is None or not score.scored:
            out.append(score)
            continue
        data: dict[str, Any] = {}
        for spec in suite.judges:
            if spec.pairwise or not spec.applies(case.tags):
                continue
            rec = judgements.get(slot_of(spec.name, score.case_id, score.index))
            if rec is None:
                data[spec.name] = {"value": None, "raw": None, "error": None, "judged": False}
                continue
            if rec.get("error"):
                verdict = {"value": None, "raw": None, "error": str(rec["error"])}
            else:
                verdict = parse_verdict(str(rec["reply"]), spec.scale).to_json()
            data[spec.name] = {**verdict, "judged": True, "reply": rec["reply"]}
        if data:
            check = {"check": "judge", "passed": True, "hard": False, "reason": None, "data": data}
            score = SampleScore.from_dict({**score.to_dict(), "checks": [*score.checks, check]})
        out.append(score)
    return out


def judge_summary(suite: Suite, judgements: Mapping[str, Mapping[str, Any]], summary: dict[str, Any]) -> None:
    """Record each criterion's judge, calibration and error rate in ``summary["judges"]``, and
    mark its metric ``gated`` only when a calibration record of this very judge on this rubric
    shows at least the suite's ``min_agreement`` (docs/judges.md); otherwise it is reported with
    the reason it does not gate."""
    if not suite.judges:
        return
    metrics = summary.get("overall", {}).get("metrics", {})
    folder = calibration_dir(suite.path)
    out: dict[str, Any] = {}
    for spec in suite.judges:
        if spec.pairwise:
            continue
        identities = {
            json.dumps(r["judge"], sort_keys=True) for r in judgements.values() if r.get("criterion") == spec.name
        }
        entry = metrics.get(PREFIX + spec.name) or {}
        n_errors = int(entry.get("n_judge_errors") or 0)
        rate = float(entry.get("judge_error_rate") or 0.0)
        info: dict[str, Any] = {
            "model_role": spec.model_role,
            "rubric_sha256": spec.rubric_sha256,
            "min_agreement": spec.min_agreement,
            "max_error_rate": spec.max_error_rate,
            "judge_errors": n_errors,
            "judge_error_rate": round(rate, 4),
            "errors_over_limit": rate > spec.max_error_rate,
        }
        gated, why = False, ""
        if len(identities) > 1:
            why = "judged by more than one judge in this run"
        elif not identities:
            why = "no judgement recorded"
        else:
            identity = json.loads(next(iter(identities)))
            info["judge"] = identity
            record = read_record(folder, spec.name, identity)
            if record is not None:
                info["calibration"] = {
                    **(record.get("agreement") or {}),
                    "judge_error_rate": record.get("judge_error_rate"),
                    "labelled_sha256": record.get("labelled_sha256"),
                    "record": str(record_path(folder, spec.name, identity)),
                }
            kappa = (record or {}).get("agreement", {}).get("kappa")
            if spec.min_agreement is None:
                why = "the suite sets no min_agreement for it"
            elif record is None:
                why = f"no calibration record for this judge (leader-eval judge-check; looked in {folder})"
            elif kappa is None or kappa < spec.min_agreement:
                why = f"calibrated kappa {kappa} is below min_agreement {spec.min_agreement}"
            else:
                gated = True
        info["gated"] = gated
        info["not_gated_because"] = why or None
        out[spec.name] = info
        if entry:
            entry["gated"] = gated
            if why:
                entry["note"] = "; ".join(x for x in (entry.get("note"), f"not gated: {why}") if x)
    summary["judges"] = out
