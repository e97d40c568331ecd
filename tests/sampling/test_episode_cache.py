"""Episodes through the cross-run sample cache (``sampling.episode``): each step has a content key
(weights, exact prompt, parameters, seed, tools), so a second run of the same episode samples no
step again, says so in its counts, and ends in the same steps; a changed prompt misses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.types import Prompt
from tests.support.episodes import write_repo


class ScriptedBackend:
    """Deterministic per (prompt, seed), with an identity for its weights (so it is cached)."""

    model_id = "scripted"
    default_protocol = "json"
    context_length = 4096
    special_tokens: tuple[str, ...] = ()
    max_concurrency = 4
    cache_identity = "scripted-weights-v1"

    def __init__(self) -> None:
        self.requests = 0

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: Any) -> Prompt:
        return Prompt(text="\n".join(str(m.get("content")) for m in messages), token_ids=None, messages=messages)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        self.requests += len(request.seeds)
        out = []
        for seed in request.seeds:
            topic = "weather" if seed % 2 else "goal"
            text = json.dumps({"tool": "lookup", "arguments": {"topic": topic}})
            out.append(Completion(text=text, token_ids=[], stop_reason="stop", prompt_tokens=10, completion_tokens=5))
        return out

    def describe(self) -> dict[str, Any]:
        return {"model_id": self.model_id}

    async def aclose(self) -> None:
        pass


def _steps(out: Path) -> list[dict[str, Any]]:
    recs = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    return sorted(({k: v for k, v in r.items() if k != "timings"} for r in recs), key=lambda r: r["slot"])


def test_a_second_run_of_the_same_episodes_samples_no_step(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    suite = write_repo(tmp_path / "repo")
    first_backend = ScriptedBackend()
    first = run(suite, RunOptions(seed=3, out=tmp_path / "a", progress=False), backend=first_backend)  # type: ignore[arg-type]
    n_steps = len(_steps(tmp_path / "a"))
    assert first_backend.requests == n_steps >= 4  # two episodes of up to 3 steps
    assert first.stats is not None and (first.stats.sampled, first.stats.cache_misses) == (2, n_steps)

    again_backend = ScriptedBackend()
    again = run(suite, RunOptions(seed=3, out=tmp_path / "b", progress=False), backend=again_backend)  # type: ignore[arg-type]
    assert again_backend.requests == 0  # every step came from the cache
    assert again.stats is not None and (again.stats.sampled, again.stats.cache_hits) == (0, n_steps)
    assert _steps(tmp_path / "b") == _steps(tmp_path / "a")
    assert [s.to_dict() for s in again.samples] == [s.to_dict() for s in first.samples]


def test_an_edited_case_resamples_its_steps_only(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    suite = write_repo(tmp_path / "repo")
    run(suite, RunOptions(seed=3, out=tmp_path / "a", progress=False), backend=ScriptedBackend())  # type: ignore[arg-type]

    suite.write_text(suite.read_text().replace("plant a garden", "plant an orchard"))
    backend = ScriptedBackend()
    edited = run(suite, RunOptions(seed=3, out=tmp_path / "b", progress=False), backend=backend)  # type: ignore[arg-type]
    garden_steps = [r for r in _steps(tmp_path / "b") if r["case_id"] == "announce_garden"]
    assert backend.requests == len(garden_steps) >= 1  # the other case's steps were cached
    assert edited.stats is not None and edited.stats.sampled == 1


def test_a_backend_without_a_weights_identity_is_never_cached(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    suite = write_repo(tmp_path / "repo")

    class Remote(ScriptedBackend):
        cache_identity = None  # type: ignore[assignment]

    run(suite, RunOptions(seed=3, out=tmp_path / "a", progress=False), backend=Remote())  # type: ignore[arg-type]
    backend = Remote()
    run(suite, RunOptions(seed=3, out=tmp_path / "b", progress=False), backend=backend)  # type: ignore[arg-type]
    assert backend.requests == len(_steps(tmp_path / "b"))
