"""``replay:RUN_DIR``: serve a recorded run's samples so a changed check never needs re-sampling.

It never imports llama_cpp or any SDK: the prompts, token ids and model facts it needs are all in
the run directory.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from leader_eval.errors import RunDirError
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.store.run_store import RunDir
from leader_eval.types import Prompt, Sample


def prompt_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ReplayBackend:
    max_concurrency = 1024
    #: a replay serves its own record; it is never cached again
    cache_identity: str | None = None

    def __init__(self, path: Path):
        run = RunDir(path)
        self.run_path = path
        self.manifest = run.read_manifest()
        model = self.manifest.get("model", {})
        self.model_id: str = model.get("model_id", "unknown")
        self.default_protocol: str = model.get("default_protocol", "json")
        self.context_length: int | None = model.get("context_length")
        self.special_tokens: tuple[str, ...] = tuple(model.get("special_tokens", ()))
        self._prompts = {prompt_digest(p["text"]): p for p in run.read_prompts().values()}
        self._samples: dict[tuple[str, int], Any] = {}
        # teammate turns also by (prompt, seed): two cases' teammates may be sent the same prompt
        self._turns: dict[tuple[str, int], Any] = {}
        for s in run.read_samples(as_recorded=True):
            self._samples[(s.case_id, s.seed)] = s
        self._modes = self._add_episode_steps(path)
        self._case_of_prompt = {d: p["case_id"] for d, p in self._prompts.items() if p.get("case_id")}
        if not self._samples:
            raise RunDirError(f"{path}: run directory holds no samples to replay")

    def _add_episode_steps(self, path: Path) -> dict[str, str]:
        """Serve each recorded episode step (``steps.jsonl``) by its prompt and seed, like a sample."""
        modes: dict[str, str] = {}
        for (case_id, _), steps in RunDir(path).read_steps().items():
            for r in steps:
                prompt = r.get("prompt") or {}
                rec = {"case_id": case_id, "text": prompt.get("text", ""), "messages": prompt.get("messages")}
                self._prompts.setdefault(prompt_digest(rec["text"]), rec)
                fields = {k: r[k] for k in Sample.__dataclass_fields__ if k in r}
                self._samples[(case_id, r["seed"])] = Sample.from_dict(fields)
                modes[case_id] = r.get("mode", "")
        # a simulated teammate's replies (turns.jsonl), addressed the same way: by prompt and seed
        # (a turn's seed is never a step's), so the replay plays the teammate too
        for (case_id, _), turns in RunDir(path).read_turns().items():
            for r in turns.values():
                prompt = r.get("prompt") or {}
                rec = {"case_id": case_id, "text": prompt.get("text", ""), "messages": prompt.get("messages")}
                self._prompts.setdefault(prompt_digest(rec["text"]), rec)
                fields = {k: r[k] for k in Sample.__dataclass_fields__ if k in r}
                self._samples[(case_id, r["seed"])] = self._turns[(prompt_digest(rec["text"]), r["seed"])] = (
                    Sample.from_dict(fields)
                )
        # every recorded step prompt, also one whose step line is unreadable: replay then finds the
        # prompt and answers "no recorded sample" for that step instead of failing the whole run
        for p in RunDir(path).read_step_prompts().values():
            self._prompts.setdefault(prompt_digest(p["text"]), {"text": p["text"], "messages": p.get("messages")})
        return modes

    def episode_mode(self, case_id: str) -> str | None:
        """The transcript mode the recorded run used for a case's episodes."""
        return self._modes.get(case_id) or None

    #: the recorded run's seed and sampling, which the runner must reuse to address its samples
    def recorded(self) -> dict[str, Any]:
        return self.manifest

    def has_sample(self, case_id: str, seed: int) -> bool:
        """Whether the recorded run finished the sample of ``case_id`` with ``seed``."""
        return (case_id, seed) in self._samples

    def describe(self) -> dict[str, Any]:
        model = dict(self.manifest.get("model", {}))
        model["replay_of"] = self.manifest.get("run_id")
        return model

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        # The recorded prompt is found by the messages that produced it.
        for p in self._prompts.values():
            if p.get("messages") == messages:
                return Prompt(text=p["text"], token_ids=p.get("token_ids"), messages=messages)
        raise RunDirError(
            f"{self.run_path}: no recorded prompt matches these messages "
            "(the suite's scaffold or vars changed since the run)"
        )

    async def sample(self, request: SampleRequest) -> list[Completion]:
        digest = prompt_digest(request.prompt.text)
        case_id = self._case_of_prompt.get(digest)
        out = []
        for seed in request.seeds:
            s = self._samples.get((case_id, seed)) if case_id else None
            s = s or self._turns.get((digest, seed))
            if s is None:
                out.append(Completion(text="", token_ids=[], stop_reason=None, error="replay: no recorded sample"))
                continue
            out.append(
                Completion(
                    text=s.text,
                    token_ids=s.token_ids,
                    stop_reason=s.stop_reason,
                    logprobs=s.logprobs,
                    api_tool_calls=s.api_tool_calls,
                    reasoning=s.reasoning,
                    prompt_tokens=s.prompt_tokens,
                    completion_tokens=s.completion_tokens,
                    error=s.error,
                    timings=s.timings,
                )
            )
        return out

    async def aclose(self) -> None:
        return None
