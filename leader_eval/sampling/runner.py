"""Sample every (case, index) slot of a run exactly once, recording each sample as it finishes.

Planning (``plan``), seeds and keys (``keys``) and what both loops share (``slots``) live beside
this module; the multi-turn slots go to the episode loop (``episode``).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from leader_eval.sampling.backends.base import (
    Backend,
    SampleRequest,
    guard,
    overflow_reason,
    replayable,
    stop_if_interrupted,
    weights_identity,
)
from leader_eval.sampling.episode import sample_episodes
from leader_eval.sampling.keys import derive_seed, key_prefix, seed_key
from leader_eval.sampling.plan import PlannedCase
from leader_eval.sampling.slots import (
    SamplingStats,
    SlotSink,
    completion_to_sample,
    gather_or_cancel,
    request_completions,
)
from leader_eval.sampling.teammate import Teammate
from leader_eval.store.cache import SampleCache
from leader_eval.store.run_store import RunDir, sample_record_key
from leader_eval.types import Sample


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.done = 0
        self.enabled = enabled and total > 0
        self.t0 = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def tick(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done < self.total and now - self.last < (0.2 if self.tty else 10.0):
            return
        self.last = now
        el = now - self.t0
        rate = self.done / el if el > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        msg = (
            f"sampling {self.done}/{self.total}  {rate:.2f}/s  ETA {eta:.0f}s"
            if eta != float("inf")
            else f"sampling {self.done}/{self.total}"
        )
        print(("\r" + msg) if self.tty else msg, end="" if self.tty else "\n", file=sys.stderr, flush=True)
        if self.tty and self.done >= self.total:
            print(file=sys.stderr)


async def sample_planned(
    run: RunDir,
    backend: Backend,
    planned: Sequence[PlannedCase],
    run_seed: int,
    *,
    concurrency: int = 64,
    progress: bool = True,
    on_sample: Callable[[Sample], None] | None = None,
    cache: SampleCache | None = None,
    max_samples: int | None = None,
    teammates: Mapping[str, Teammate] | None = None,
) -> SamplingStats:
    """Sample every missing slot; each finished sample is on disk before the next is awaited.

    A slot is served, in order, from the run's own log (resumption), from the content-addressed
    cache, or from the backend. ``max_samples`` caps new backend samples: the run stops cleanly
    before it spends more and its manifest says so; an episode reserves its ``max_steps`` (and
    its teammate's ``max_turns``). ``teammates``: the backend of each model role the episodes'
    ``user:`` name.
    """
    stats = SamplingStats()
    backend = guard(backend)  # typed, secret-free completions whoever built the backend
    # what names the weights for the cache (None: a remote server, never cached across runs)
    identity = weights_identity(backend)
    if identity is None and cache is not None:
        cache.close()
        cache = None
    budget = max_samples
    log = run.samples_log()
    prompts = run.prompts_log()
    # (case, indices, their seeds, their keys): seeds and keys are derived once per slot
    todo: list[tuple[PlannedCase, list[int], list[int], list[str]]] = []
    episodes: list[tuple[PlannedCase, int]] = []  # multi-turn slots: leader_eval.sampling.episode samples them
    try:
        # every case's prompt on disk before its first sample is (a log of what was asked)
        prompts.extend(
            {
                "case_id": p.case.id,
                "text": p.rendered.prompt.text,
                "token_ids": p.rendered.prompt.token_ids,
                "messages": p.rendered.messages,
            }
            for p in planned
            if p.case.id not in prompts
        )
        for p in planned:
            missing = [i for i in range(p.n_samples) if sample_record_key(p.case.id, i) not in log]
            stats.requested += p.n_samples
            stats.reused += p.n_samples - len(missing)
            if not missing:
                continue
            if p.case.episode is not None:
                # an episode spends up to max_steps backend samples, known only as it runs: the
                # cap reserves the worst case, so --max-samples stays a ceiling on cost
                user = p.case.episode.user
                steps = p.case.episode.max_steps + (min(user.max_turns, p.case.episode.max_steps) if user else 0)
                for i in missing:
                    if budget is not None and budget < steps:
                        stats.capped += 1
                        continue
                    if budget is not None:
                        budget -= steps
                    episodes.append((p, i))
                continue
            prefix = key_prefix(identity or backend.model_id, p.rendered.prompt, p.params)
            if p.overflow:
                for i in missing:
                    seed = derive_seed(run_seed, p.case.id, i)
                    s = Sample(
                        case_id=p.case.id,
                        index=i,
                        seed=seed,
                        key=seed_key(prefix, seed),
                        outcome="context_overflow",
                        prompt_tokens=p.rendered.prompt.n_tokens or 0,
                        error=overflow_reason(p.rendered.prompt.n_tokens, p.params.max_tokens, p.context_length),
                    )
                    log.append({"slot": sample_record_key(p.case.id, i), **s.to_dict()})
                    stats.overflow += 1
                continue
            to_sample: list[int] = []
            seeds: list[int] = []
            keys: list[str] = []
            for i in missing:
                seed = derive_seed(run_seed, p.case.id, i)
                key = seed_key(prefix, seed)
                hit = cache.get(key) if cache is not None else None
                if hit is not None:
                    rec = {k: v for k, v in hit.items() if k in Sample.__dataclass_fields__}
                    rec.update(case_id=p.case.id, index=i, seed=seed, key=key)
                    log.append({"slot": sample_record_key(p.case.id, i), **rec})
                    stats.cache_hits += 1
                    continue
                stats.cache_misses += cache is not None
                if budget is not None and budget <= 0:
                    stats.capped += 1
                    continue
                if budget is not None:
                    budget -= 1
                to_sample.append(i)
                seeds.append(seed)
                keys.append(key)
            if to_sample:
                todo.append((p, to_sample, seeds, keys))
        prompts.close()

        bar = _Progress(sum(len(m) for _, m, _, _ in todo) + len(episodes), progress)
        lanes = max(1, min(concurrency, backend.max_concurrency))
        sem = asyncio.Semaphore(lanes)
        t0 = time.monotonic()

        sink = SlotSink(log, stats, bar.tick, on_sample, cache, replay=replayable(backend) is not None)
        queue = iter(todo)

        async def lane() -> None:
            # each lane takes the next case once its last one is recorded: requests go out in plan
            # order, as many at once as the semaphore allows, with one task per lane instead of
            # one per case waiting on the semaphore (a 100,000-case run made 100,000 tasks)
            for p, indices, seeds, keys in queue:
                async with sem:  # shared with the episodes' steps
                    req = SampleRequest(prompt=p.rendered.prompt, params=p.params, seeds=seeds)
                    completions = await request_completions(backend, req)
                for i, seed, key, c in zip(indices, seeds, keys, completions, strict=True):
                    sink.finish(completion_to_sample(p.case.id, i, seed, key, c))
                stop_if_interrupted()  # cancelled in flight, its samples kept: the run stops here

        # One request per case keeps a backend's prefix (KV) reuse; backends split seeds as they like.
        tasks = [asyncio.create_task(lane()) for _ in range(min(lanes, len(todo)))]
        if episodes:
            tasks.append(asyncio.create_task(sample_episodes(run, backend, episodes, run_seed, sem, sink, teammates)))
        await gather_or_cancel(tasks)
        stats.wall_s = time.monotonic() - t0
    finally:
        log.close()
        prompts.close()
        if cache is not None:
            cache.close()
    return stats
