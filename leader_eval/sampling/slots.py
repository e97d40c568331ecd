"""What the single-sample loop (``runner``) and the episode loop (``episode``) share: one request
to the backend, its completion as a sample, and a finished slot recorded, counted and reported.

A slot is one (case, sample index) of a run. Whichever loop fills it, its sample goes through
``SlotSink.finish``: on disk in ``samples.jsonl`` first, then counted, then handed to the caller's
``on_sample`` and the progress bar, in that order, so a sample a caller sees is always recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from leader_eval.sampling.backends.base import Backend, Completion, SampleRequest, is_context_overflow
from leader_eval.store.cache import SampleCache
from leader_eval.store.run_store import RecordLog, sample_record_key
from leader_eval.types import Sample


@dataclass
class SamplingStats:
    requested: int = 0
    reused: int = 0
    sampled: int = 0
    #: slots served by a replay backend from the recorded run (``replay:RUN``): not sampled
    replayed: int = 0
    errors: int = 0
    overflow: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    capped: int = 0  # slots left unsampled by --max-samples
    wall_s: float = 0.0


def completion_to_sample(case_id: str, index: int, seed: int, key: str, c: Completion) -> Sample:
    return Sample(
        case_id=case_id,
        index=index,
        seed=seed,
        key=key,
        outcome=("context_overflow" if is_context_overflow(c.error) else "error") if c.error else "ok",
        text=c.text,
        token_ids=list(c.token_ids),
        stop_reason=c.stop_reason,
        logprobs=c.logprobs,
        api_tool_calls=c.api_tool_calls,
        reasoning=c.reasoning,
        prompt_tokens=c.prompt_tokens,
        completion_tokens=c.completion_tokens,
        error=c.error,
        timings=c.timings,
    )


async def request_completions(backend: Backend, request: SampleRequest) -> list[Completion]:
    """The backend's completions for ``request``; an exception becomes every seed's error."""
    try:
        return await backend.sample(request)
    except Exception as exc:  # a backend bug must not lose the run: record it per sample
        msg = f"{type(exc).__name__}: {exc}"
        return [Completion(text="", token_ids=[], stop_reason=None, error=msg) for _ in request.seeds]


@dataclass
class SlotSink:
    """Where a finished slot's sample goes: the run's ``samples.jsonl``, the sample cache, the
    run's counts, the caller's ``on_sample`` and the progress bar."""

    samples: RecordLog
    stats: SamplingStats
    tick: Callable[[], None]
    on_sample: Callable[[Sample], None] | None = None
    cache: SampleCache | None = None
    #: the backend replays a recorded run: its slots count as replayed, never as sampled
    replay: bool = False

    def finish(self, s: Sample, *, cache: bool = True, sampled: bool = True) -> None:
        """Record ``s`` (``cache``: also in the sample cache, when the run has one; ``sampled``:
        False for an episode whose every step came from the cache, which the counts then leave out)."""
        # the record is serialized at once and never mutated: a shallow copy of the fields is
        # enough (dataclasses.asdict deep-copies, ~4% of a sample's CPU)
        rec = dict(s.__dict__)
        self.samples.append({"slot": sample_record_key(s.case_id, s.index), **rec})
        if cache and self.cache is not None:
            self.cache.put(rec)
        if self.replay:
            self.stats.replayed += 1
        elif sampled:
            self.stats.sampled += 1
        self.stats.errors += s.outcome == "error"
        if self.on_sample:
            self.on_sample(s)
        self.tick()


async def gather_or_cancel(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Await every task; when one fails (or this is cancelled), cancel the rest and wait for them."""
    tasks = list(tasks)
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            # one already cancelled is finishing its request in flight within the grace period
            # (backends/base.py ``_with_grace``): cancelled again, it would discard it
            if not t.cancelling():
                t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
