"""The episode loop: render, sample, parse, answer from the scripted world, and again.

One episode is one (case, sample index) slot of a run. Step ``k`` renders the scaffold with the
transcript of steps ``0..k-1``, samples once with the seed ``step_seed(run seed, case id, sample
index, k)``, parses the output's calls in the run's protocol, answers them from the scripted world
and records the step in ``steps.jsonl`` before the next step is sampled. A resumed run reads the
finished steps back, never resamples them, and continues at the first missing step; since the
world is a pure function of the calls and every seed is derived, an interrupted episode ends
exactly as an uninterrupted one.

How earlier steps reach the model (``transcript``):

* ``messages``: the assistant turn (with ``tool_calls``) and one ``tool`` message per call are
  appended to the scaffold's messages. Chosen by ``auto`` when the backend's default protocol is
  not ``json``, i.e. its chat template or renderer speaks a tool protocol (Qwen3's hermes, Kimi
  K2, ...) or it is a chat API (which then receives real ``tools`` and ``tool`` messages).
* ``event_log``: the scaffold renders the transcript itself from the template variable
  ``episode`` (``episode.steps[i].output``, ``.calls``, ``.results[j].text``, ``episode.step``,
  ``episode.max_steps``), the way a deployed scaffold shows tool results in its event log.
  Chosen by ``auto`` otherwise when the scaffold uses ``episode`` (the embedded SmolLM2's mode).

Only strict calls (the output is exactly the protocol) are dispatched: a deployed scaffold would
not act on a call buried in prose either.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from leader_eval.protocols import parse_output
from leader_eval.sampling.backends.base import (
    Completion,
    SampleRequest,
    SamplingParams,
    overflow_error,
    overflows,
    replayable,
    stop_if_interrupted,
    weights_identity,
)
from leader_eval.sampling.keys import derive_seed, key_prefix, seed_key, step_seed
from leader_eval.sampling.plan import PlannedCase
from leader_eval.sampling.slots import (
    SamplingStats,
    SlotSink,
    completion_to_sample,
    gather_or_cancel,
    request_completions,
)
from leader_eval.sampling.teammate import Teammate, sample_turn
from leader_eval.store.run_store import RecordLog, RunDir, dumps, prompt_sha256, step_record_key
from leader_eval.suite.episode_spec import EPISODE_VAR, EpisodeSpec
from leader_eval.suite.render import find_placeholders, render_messages, template_variables
from leader_eval.suite.teammate import message_of
from leader_eval.types import ModelInfo, Prompt, Sample

if TYPE_CHECKING:
    from leader_eval.protocols import ParseResult
    from leader_eval.sampling.backends.base import Backend
    from leader_eval.store.cache import SampleCache
    from leader_eval.suite.load import Case, Suite
    from leader_eval.suite.world import ToolResult

__all__ = ["EpisodeRunner", "sample_episodes"]


def parse_step(
    text: str,
    protocol: str,
    *,
    eot_tokens: tuple[str, ...],
    reasoning_tags: tuple[str, str] | None,
    api_tool_calls: list[dict[str, Any]] | None,
    tool_schemas: Mapping[str, Any] | None = None,
) -> ParseResult:
    """The one place episodes parse an output (the single-turn scorer's parser)."""

    return parse_output(
        text,
        protocol,
        eot_tokens=eot_tokens,
        reasoning_tags=reasoning_tags,
        api_tool_calls=api_tool_calls,
        tool_schemas=tool_schemas,
    )


def transcript_mode(spec: EpisodeSpec, suite: Suite, backend: Backend, case_id: str) -> str:
    if spec.transcript != "auto":
        return spec.transcript
    replay = replayable(backend)
    if replay is not None:
        mode = replay.episode_mode(case_id)  # the mode the recorded run used
        if mode:
            return str(mode)
    # a backend whose chat template (or API) speaks a native tool protocol takes real tool turns;
    # one without (default "json", like the embedded SmolLM2) sees them through the scaffold's log
    if backend.default_protocol != "json":
        return "messages"
    return "event_log" if EPISODE_VAR in template_variables(suite) else "messages"


def strip_end_of_turn(text: str, eot_tokens: Sequence[str]) -> str:
    for tok in eot_tokens:
        if tok and text.endswith(tok):
            return text[: -len(tok)]
    return text


class EpisodeRunner:
    """Runs the episodes of one case; everything that does not change between steps, built once."""

    def __init__(
        self,
        suite: Suite,
        case: Case,
        backend: Backend,
        params: SamplingParams,
        protocol: str,
        model: Mapping[str, Any],
        context_length: int | None,
        teammate: Teammate | None = None,
    ):
        assert case.episode is not None
        self.suite = suite
        self.case = case
        self.spec: EpisodeSpec = case.episode
        self.backend = backend
        self.params = params
        self.protocol = protocol
        self.info = ModelInfo.from_manifest(model)
        self.context_length = context_length
        self.world = suite.world.with_fixtures(self.spec.fixtures)
        self.tools = [t.to_openai() for t in suite.tools]
        self.mode = transcript_mode(self.spec, suite, backend, case.id)
        if self.spec.user is not None and teammate is None:  # runs.teammates resolves every role first
            raise ValueError(f"case {case.id!r}: no backend for model role {self.spec.user.model_role!r}")
        self.teammate = teammate
        #: what a step's content key names the weights by: the sample cache's identity (a GGUF's
        #: sha256, a tinker path, a --cache-id), else the model id (such a run is never cached)
        self.identity = weights_identity(backend) or backend.model_id
        #: the sample cache (None: not cached, e.g. a remote server or a replay) and the run's counts
        self.cache: SampleCache | None = None
        self.stats: SamplingStats | None = None

    # -- prompts -------------------------------------------------------------------------------

    def prompt(
        self, history: Sequence[Mapping[str, Any]], turns: Mapping[int, Mapping[str, Any]] | None = None
    ) -> Prompt:
        step = len(history)
        turns = turns or {}
        steps = [self._step_view(r, turns.get(int(r["step"]))) for r in history]
        var = {"step": step, "max_steps": self.spec.max_steps, "steps": steps if self.mode == "event_log" else []}
        # Model outputs and tool results may hold text that looks like a placeholder: it is the
        # transcript, not a template left unrendered, so only the scaffold's own text is scanned.
        seen = tuple(
            m.group(0)
            for s in steps
            for text in (s["output"], *(r["text"] for r in s["results"]), s.get("reply") or "")
            for m in find_placeholders(text)
        )
        suite = self.suite
        if seen:
            allowed = [*suite.render.get("allowed_placeholders", []), *seen]
            suite = replace(suite, render={**suite.render, "allowed_placeholders": allowed})
        case = replace(self.case, vars={**self.case.vars, EPISODE_VAR: var})
        messages = render_messages(suite, case)
        if self.mode == "messages":
            for r in history:
                messages.extend(self._turn_messages(r))
                t = turns.get(int(r["step"]))
                if t is not None and t.get("reply") is not None:  # the teammate speaks as the user
                    messages.append({"role": "user", "content": str(t["reply"])})
        return self.backend.apply_chat_template(messages, self.tools)

    def _step_view(self, r: Mapping[str, Any], turn: Mapping[str, Any] | None = None) -> dict[str, Any]:
        view = {
            "index": r["step"],
            "output": strip_end_of_turn(r["text"], self.info.eot_tokens),
            "calls": [{"tool": c["tool"], "arguments": c["arguments"]} for c in r["calls"]],
            "results": r["results"],
        }
        if self.spec.user is not None:  # the key exists only where a teammate can answer
            view["reply"] = turn.get("reply") if turn is not None else None
        return view

    def _turn_messages(self, r: Mapping[str, Any]) -> list[dict[str, Any]]:
        api_calls = r.get("api_tool_calls") or []
        ids = [
            (api_calls[j].get("id") if j < len(api_calls) and isinstance(api_calls[j], dict) else None)
            or f"call_{r['step']}_{j}"
            for j in range(len(r["calls"]))
        ]
        assistant: dict[str, Any] = {"role": "assistant", "content": strip_end_of_turn(r["text"], self.info.eot_tokens)}
        if r["calls"]:
            assistant["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": c["tool"], "arguments": dumps(c["arguments"])}}
                for i, c in zip(ids, r["calls"], strict=True)
            ]
        out = [assistant]
        for i, res in zip(ids, r["results"], strict=True):
            out.append({"role": "tool", "tool_call_id": i, "name": res["tool"], "content": res["text"]})
        return out

    # -- one step ------------------------------------------------------------------------------

    async def step(
        self,
        history: Sequence[Mapping[str, Any]],
        run_seed: int,
        index: int,
        turns: Mapping[int, Mapping[str, Any]] | None = None,
        sampled: list[int] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Sample, parse and answer step ``len(history)``: its record for ``steps.jsonl`` and its
        prompt's record for ``prompts.jsonl`` (the step names it by ``prompt_sha256``: a prompt
        holds the whole transcript so far, and is stored once however many steps share it).
        ``sampled[0]`` counts the steps the backend sampled (not served by the cache)."""
        k = len(history)
        seed = step_seed(run_seed, self.case.id, index, k)
        prompt = self.prompt(history, turns)
        key = self.step_key(prompt, seed)
        n = prompt.n_tokens
        hit = (
            None
            if self.cache is None or overflows(n, self.params.max_tokens, self.context_length)
            else (self.cache.get(key))
        )
        if hit is not None:
            # the step this prompt, these weights, parameters and seed produce: as sampled before
            fields = {f: v for f, v in hit.items() if f in Sample.__dataclass_fields__}
            fields.update(case_id=self.case.id, index=index, seed=seed, key=key)
            sample = Sample.from_dict(fields)
            if self.stats is not None:
                self.stats.cache_hits += 1
        else:
            if overflows(n, self.params.max_tokens, self.context_length):
                c = Completion(
                    text="",
                    token_ids=[],
                    stop_reason=None,
                    prompt_tokens=n or 0,
                    error=overflow_error(n, self.params.max_tokens, self.context_length),
                )
            else:
                req = SampleRequest(prompt=prompt, params=self.params, seeds=[seed], tools=self.tools)
                got = await request_completions(self.backend, req)
                c = got[0] if got else Completion("", [], None, error="backend returned no completion")
                if sampled is not None:
                    sampled[0] += 1
                if self.cache is not None and self.stats is not None:
                    self.stats.cache_misses += 1
            sample = completion_to_sample(self.case.id, index, seed, key, c)
            if self.cache is not None:
                self.cache.put(dict(sample.__dict__))  # a failed sample is never cached (SampleCache.put)
        rec: dict[str, Any] = {"slot": step_record_key(self.case.id, index, k), **sample.__dict__, "step": k}
        rec["mode"] = self.mode
        digest = prompt_sha256(prompt.text, prompt.messages)
        rec["prompt_sha256"] = digest
        prompt_rec = {"prompt_sha256": digest, "text": prompt.text, "messages": prompt.messages}
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        end: str | None = None
        if sample.outcome != "ok":
            end = sample.outcome
        else:
            parsed = self.parse(sample.text, sample.api_tool_calls)
            calls = [{"tool": c.name, "arguments": c.arguments} for c in parsed.calls]
            before = [(c["tool"], c["arguments"]) for r in history for c in r["calls"]]
            answered = self.world.answer([*before, *((c["tool"], c["arguments"]) for c in calls)])
            mine: list[ToolResult] = answered[len(before) :]
            results = [r.to_dict() for r in mine]
            end = self._end(k, mine)
        rec.update(calls=calls, results=results, end=end)
        return rec, prompt_rec

    def step_key(self, prompt: Prompt, seed: int) -> str:
        """A step's content key: a single-turn sample's (weights, exact prompt, parameters, seed)
        plus the tools the request carries (an API backend receives them beside the messages)."""
        prefix = key_prefix(self.identity, prompt, self.params)
        prefix.update(b"\0tools:" + dumps(self.tools).encode())
        return seed_key(prefix, seed)

    def parse(self, text: str, api_tool_calls: list[dict[str, Any]] | None) -> ParseResult:
        return parse_step(
            text,
            self.protocol,
            eot_tokens=self.info.eot_tokens,
            reasoning_tags=self.info.reasoning_tags,
            api_tool_calls=api_tool_calls,
            tool_schemas={t.name: t.parameters for t in self.suite.tools},
        )

    def _end(self, k: int, results: Sequence[ToolResult]) -> str | None:
        if any(r.ok and r.tool in self.spec.terminal_tools for r in results):
            return "terminal"
        if not results and self.spec.end_on_no_call:
            return "no_call"
        if k + 1 >= self.spec.max_steps:
            return "max_steps"
        return None

    async def run(
        self,
        log: RecordLog,
        run_seed: int,
        index: int,
        on_step: Callable[[dict[str, Any]], None] | None = None,
        prompts: RecordLog | None = None,
        turns_log: RecordLog | None = None,
        sampled: list[int] | None = None,
    ) -> Sample:
        """Finish one episode (resuming after its recorded steps and teammate turns) and return
        its summary sample.

        ``prompts``: the run's ``prompts.jsonl``, where each step's (and turn's) prompt goes
        (once, by hash) before the step itself; ``turns_log``: the run's ``turns.jsonl``, where
        the teammate's replies go (a case with ``user:`` needs it); ``sampled[0]`` counts the
        steps the backend sampled."""
        history: list[dict[str, Any]] = []
        turns: dict[int, dict[str, Any]] = {}
        user = self.spec.user
        for k in range(self.spec.max_steps):
            rec = log.get(step_record_key(self.case.id, index, k))
            if rec is None:
                rec, prompt_rec = await self.step(history, run_seed, index, turns, sampled)
                if prompts is not None:
                    prompts.append(prompt_rec)  # a step never names a prompt that is not on disk
                log.append(rec)  # on disk before the next step is sampled
                if on_step:
                    on_step(rec)
                stop_if_interrupted()  # cancelled in flight, the step kept: the rest on resume
            history.append(rec)
            if rec.get("end"):
                break
            if user is None or not message_of(user, rec["results"]):
                continue
            assert turns_log is not None and self.teammate is not None
            turn = turns_log.get(step_record_key(self.case.id, index, k))
            if turn is None:
                turn, prompt_rec = await sample_turn(
                    self.teammate, user, self.case.vars, self.case.id, self.params, run_seed, index, history, turns
                )
                if prompts is not None:
                    prompts.append(prompt_rec)
                turns_log.append(turn)  # on disk before the leader's next step is sampled
                stop_if_interrupted()
            turns[k] = turn
            if turn.get("end"):
                break
        return episode_sample(
            self.case.id, index, derive_seed(run_seed, self.case.id, index), history, [turns[k] for k in sorted(turns)]
        )


def episode_sample(
    case_id: str,
    index: int,
    seed: int,
    steps: Sequence[Mapping[str, Any]],
    turns: Sequence[Mapping[str, Any]] = (),
) -> Sample:
    """One record per episode for ``samples.jsonl``: its outcome, last output and token totals.

    Its seed is the slot's (``keys.derive_seed``), as a single-turn sample's would be; each step
    has its own (``step_seed``), each teammate turn too (``turn_seed``). Its key hashes every
    step's key and, after each step a teammate answered, the turn's (whose key names the
    teammate's model): an episode without a teammate keeps the key it always had."""
    bad = next((s for s in steps if s["outcome"] != "ok"), None)
    bad_turn = next((t for t in turns if t["outcome"] != "ok"), None)
    last = steps[-1]
    by_step = {int(t["step"]): t for t in turns}
    h = hashlib.sha256()
    for s in steps:
        h.update(str(s["key"]).encode() + b"\0")
        t = by_step.get(int(s["step"]))
        if t is not None:
            h.update(b"turn:" + str(t["key"]).encode() + b"\0")
    return Sample(
        case_id=case_id,
        index=index,
        seed=seed,
        key="episode:" + h.hexdigest()[:32],
        outcome=bad["outcome"] if bad else "error" if bad_turn else "ok",
        text=last["text"],
        stop_reason=last["stop_reason"],
        api_tool_calls=last.get("api_tool_calls"),
        prompt_tokens=sum(int(s["prompt_tokens"]) for s in steps),
        completion_tokens=sum(int(s["completion_tokens"]) for s in steps),
        error=bad["error"] if bad else f"teammate: {bad_turn['error']}" if bad_turn else None,
        timings={"steps": float(len(steps))},
    )


async def sample_episodes(
    run: RunDir,
    backend: Backend,
    slots: Sequence[tuple[PlannedCase, int]],
    run_seed: int,
    sem: asyncio.Semaphore,
    sink: SlotSink,
    teammates: Mapping[str, Teammate] | None = None,
) -> None:
    """Sample the missing episode slots of a run (the runner's hook for cases with ``episode:``).

    ``slots`` holds (planned case, sample index) pairs; each finished episode's summary goes to
    ``sink`` (the run's ``samples.jsonl``, never the sample cache), each finished step to
    ``steps.jsonl`` first, each teammate reply to ``turns.jsonl``. ``teammates``: the backend of
    every model role the slots' ``user:`` name (``runs.teammates`` resolves them). Steps go
    through the sample cache (``sink.cache``) by their content key (``EpisodeRunner.step_key``):
    a step whose prompt (a teammate's replies included), weights, parameters and seed were
    sampled before, by any run, is not sampled again, and since the world's answers are a pure
    function of the calls, a re-run episode follows the same steps. ``cache_hits`` and
    ``cache_misses`` count steps; an episode every step of which came from the cache is not
    counted as sampled.
    """
    manifest = run.read_manifest()
    protocol = manifest["identity"]["protocol"]
    model = manifest.get("model", {})
    log = run.steps_log()
    prompts = run.prompts_log()
    needs_turns = any(p.case.episode is not None and p.case.episode.user is not None for p, _ in slots)
    turns_log = run.turns_log() if needs_turns else None
    runners: dict[str, EpisodeRunner] = {}

    async def one(p: PlannedCase, index: int) -> None:
        if p.case.id not in runners:
            assert p.suite is not None  # a planned case carries its suite
            user = p.case.episode.user if p.case.episode is not None else None
            mate = (teammates or {}).get(user.model_role) if user is not None else None
            runner = EpisodeRunner(p.suite, p.case, backend, p.params, protocol, model, p.context_length, teammate=mate)
            runner.cache, runner.stats = sink.cache, sink.stats
            runners[p.case.id] = runner
        sampled = [0]
        async with sem:
            s = await runners[p.case.id].run(
                log, run_seed, index, prompts=prompts, turns_log=turns_log, sampled=sampled
            )
        sink.finish(s, cache=False, sampled=sampled[0] > 0)

    try:
        await gather_or_cancel([asyncio.create_task(one(p, i)) for p, i in slots])
    finally:
        try:
            log.close()
        finally:
            try:
                prompts.close()
            finally:
                if turns_log is not None:
                    turns_log.close()
