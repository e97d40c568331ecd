"""Scoring while sampling: each sample the sampler records is scored, its line of
``results.jsonl`` encoded and, once a case has all its planned samples, the case aggregated, while
the other requests are still in flight. ``score_run`` then only scores what was not scored here
and writes the files in their usual order, so the work after the last response shrinks to the
last samples' share.

Sampling and scoring never import each other: ``evaluate.run`` joins them here, through the
sampler's per-sample callback, which it calls after the sample's record is on disk. The callback
only queues the sample; ``drain``, a task on the sampler's event loop, scores what has arrived
when a turn of the loop finds nothing else to run, a few samples at a time (``TURN_S``): requests
go out and responses are read first, and scoring fills the time the loop would spend waiting for
the network. Before the first sample arrives, in the first such idle turn, it builds what every
score reads (the suite's compiled leak rules, ~80 ms): the first responses then find it ready
instead of waiting behind it.

``samples.jsonl`` stays the evidence and every file it derives is re-derived from it: a crash
loses nothing scored here (it is derived again on resume), and ``score_run`` reuses a score only
for a sample that reads back from disk equal to the one scored, with the same manifest and case
prompts. A sample that fails to score here is left to ``score_run``, which scores it (and raises
where it raises) exactly as without this module: the bytes of ``results.jsonl``, ``cases.json``
and ``summary.json`` are the same either way.

Episodes are scored from their recorded steps after sampling, as before (their samples are not
scored here).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leader_eval.bounded.numeric import load_numpy
from leader_eval.scoring.aggregate import case_result
from leader_eval.scoring.scorer import CaseScorer, ModelInfo, SampleScore, SuiteScoring, case_scorer
from leader_eval.store.run_store import RunDir, encode_capped
from leader_eval.suite.load import Case, Suite
from leader_eval.types import Sample

#: how often ``drain`` looks for samples to score: waking for each sample cost the loop more
#: than scoring it
POLL_S = 0.01
#: the most time one turn of the event loop spends scoring (~10 samples): short against a
#: request's latency, long against the loop's own cost of a turn (~30 us)
TURN_S = 0.002
#: a turn of the loop this short ran nothing but this task: no response is waiting to be read
#: and no request to be sent (a loop with work to do takes longer over it)
IDLE_TURN_S = 0.0002
#: scored even while the loop is busy once this many samples wait: a server that answers
#: without pause never leaves the loop idle, and the samples must not pile up until the end
MAX_BACKLOG = 256
#: scored anyway after this many busy turns in a row: on a loaded machine even an idle turn can
#: take longer than ``IDLE_TURN_S``, and waiting for one would spin the loop while it waits for
#: the network
MAX_BUSY_TURNS = 16


class LiveScores:
    """The scores of one run's samples as they arrive (``on_sample``), for ``score_run`` to reuse."""

    def __init__(self, suite: Suite, run_path: Path):
        self.suite = suite
        self.run_path = run_path
        #: read at the first sample (the sampler has written them by then): what scoring reads
        self.protocol: str | None = None
        self.model: Mapping[str, Any] | None = None
        self.prompts: dict[str, dict[str, Any]] = {}
        self.planned: dict[str, int] = {}
        self._model_info: ModelInfo | None = None
        self._cases = {c.id: c for c in suite.cases if c.episode is None}
        self._scorers: dict[str, CaseScorer] = {}
        self._shared: SuiteScoring | None = None  # what every case's scorer shares
        #: (case id, index) -> the sample as scored, its score, its results line and whether that
        #: line holds the score whole (``encode_capped``)
        self.scored: dict[tuple[str, int], tuple[Sample, SampleScore, str, bool]] = {}
        self._by_case: dict[str, list[SampleScore]] = {}
        #: case id -> its record (``aggregate.case_result``) and the scores it was computed over
        self.case_records: dict[str, tuple[dict[str, Any], list[SampleScore]]] = {}
        self._started = False
        self._queue: deque[Sample] = deque()
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None  # what drain sleeps on, close() ends it

    def on_sample(self, sample: Sample) -> None:
        """Queue a recorded sample for ``drain``."""
        self._queue.append(sample)

    async def drain(self) -> None:
        """Score the queued samples until ``close``: what has arrived, in turns of the event loop
        that find nothing else to run (or once ``MAX_BACKLOG`` wait, or after ``MAX_BUSY_TURNS``
        busy turns), at most ``TURN_S`` per turn.
        Returns once closed and the queue is empty (``close`` may come first: a run whose
        samples were all recorded samples nothing and never yields to this task before it is
        closed)."""
        warm = [self._warm_up, self._warm_numpy]  # built ahead, one step per idle turn
        busy = 0  # busy turns in a row while something waits to be done here
        while True:
            waiting = (warm or self._queue) and not self._closed and len(self._queue) < MAX_BACKLOG
            if waiting and busy < MAX_BUSY_TURNS and not await _idle_turn():
                busy += 1
                continue  # responses to read or requests to send first
            busy = 0
            if warm and not self._closed:
                with contextlib.suppress(Exception):  # what fails here, scoring meets again
                    warm.pop(0)()
                if warm and not self._queue:
                    continue  # the next step in the next idle turn
            end = time.perf_counter() + TURN_S
            while self._queue and time.perf_counter() < end:
                self.score(self._queue.popleft())
            if self._queue:
                await asyncio.sleep(0)  # let the loop send and receive before the next ones
            elif self._closed:
                return
            else:
                # POLL_S or until close(), whichever comes first: a bare future and a timer (a
                # wait_for made a task and cancelled it every time, ~1,000 times a run)
                loop = asyncio.get_running_loop()
                self._waiter = waiter = loop.create_future()
                timer = loop.call_later(POLL_S, _wake, waiter)
                try:
                    await waiter
                finally:
                    timer.cancel()
                    self._waiter = None

    def _warm_up(self) -> None:
        """Build what scoring the first sample would build (the manifest and prompts read, the
        suite's shared parts, the first case's scorer and its compiled leak rules), while the first
        requests are in flight. A part that fails is left to ``score``, which meets it again.
        (The next idle turn loads numpy where the summary will need it: ``_warm_numpy``.)"""
        case = next(iter(self._cases.values()), None)
        if case is not None:
            self._scorer(case)

    def _warm_numpy(self) -> None:
        """Load numpy (``bounded.numeric``) while requests are in flight where the summary will
        bootstrap over case scores that need not be 0 or 1: a case of several samples, an
        episode, a judge, a weight that is not a whole number. A suite of one-sample cases gets
        Wilson intervals and its latency quantiles without numpy (``stats.core._whole_counts``),
        so its run never pays the import; a need missed here only loads numpy later."""
        suite = self.suite
        if (
            any(n > 1 for n in self.planned.values())
            or suite.judges
            or any(c.episode is not None or c.weight != int(c.weight) for c in suite.cases)
        ):
            load_numpy()

    def close(self) -> None:
        """No more samples: ``drain`` returns once the queue is empty."""
        self._closed = True
        if self._waiter is not None:
            _wake(self._waiter)

    def score(self, sample: Sample) -> None:
        """Score one recorded sample. Never raises for a sample that fails to score: ``score_run``
        scores it again after sampling and reports what it reports today."""
        case = self._cases.get(sample.case_id)
        if case is None:
            return
        try:
            scorer = self._scorer(case)
            score = scorer.score(sample)
            line, whole = encode_capped(score.to_dict())
        except Exception:  # scored again by score_run, which raises as it always did
            if not self._started:  # no manifest or prompts to score with: leave it all to score_run
                self._cases = {}
            return
        self.scored[(sample.case_id, sample.index)] = (sample, score, line, whole)
        scores = self._by_case.setdefault(case.id, [])
        scores.append(score)
        if len(scores) == self.planned.get(case.id):
            self._scorers.pop(case.id, None)  # the case is done: its compiled checks can go
            scores.sort(key=lambda s: s.index)
            with contextlib.suppress(Exception):  # aggregated again by score_run, as above
                self.case_records[case.id] = (case_result(case, scores), list(scores))

    def _scorer(self, case: Case) -> CaseScorer:
        scorer = self._scorers.get(case.id)
        if scorer is None:
            if not self._started:
                self._start()
            assert self.protocol is not None and self._model_info is not None
            p = self.prompts.get(case.id, {})
            if self._shared is None:
                self._shared = SuiteScoring(self.suite, self.protocol, self._model_info)
            scorer = case_scorer(
                self.suite,
                case,
                self.protocol,
                self._model_info,
                p.get("messages", []),
                p.get("text", ""),
                self._shared,
            )
            self._scorers[case.id] = scorer
        return scorer

    def _start(self) -> None:
        # a RunDir of our own: what it records of unreadable lines is score_run's to find and say
        rundir = RunDir(self.run_path)
        manifest = rundir.read_manifest()
        self.protocol = manifest["identity"]["protocol"]
        self.model = manifest.get("model", {})
        self._model_info = ModelInfo.from_manifest(self.model)
        self.planned = {cid: int(spec["samples"]) for cid, spec in manifest["identity"]["cases"].items()}
        self.prompts = rundir.read_prompts(shared=True)
        self._started = True

    def reusable(self, manifest: Mapping[str, Any], prompts: Mapping[str, Any]) -> bool:
        """Whether what was scored here was scored with what ``score_run`` scores with."""
        return (
            self._started
            and manifest["identity"]["protocol"] == self.protocol
            and manifest.get("model", {}) == self.model
            and prompts == self.prompts
        )

    def score_of(self, sample: Sample) -> tuple[SampleScore, str, bool] | None:
        """The score, results line and whether the line holds it whole, of ``sample`` as read
        back, if it was scored here as it is."""
        hit = self.scored.get((sample.case_id, sample.index))
        if hit is None or hit[0] != sample:
            return None
        return hit[1], hit[2], hit[3]

    def case_record(self, case: Case, scores: Sequence[SampleScore]) -> dict[str, Any] | None:
        """The case's record aggregated here, if it was over exactly ``scores``."""
        hit = self.case_records.get(case.id)
        if hit is None or len(hit[1]) != len(scores) or any(a is not b for a, b in zip(hit[1], scores, strict=True)):
            return None
        return hit[0]


async def _idle_turn() -> bool:
    """Yield one turn of the event loop; whether it ran nothing else (``IDLE_TURN_S``)."""
    t = time.perf_counter()
    await asyncio.sleep(0)
    return time.perf_counter() - t < IDLE_TURN_S


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
