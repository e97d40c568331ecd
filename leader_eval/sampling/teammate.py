"""A simulated teammate's turns in the episode loop (``episode: {user: ...}``, docs/episodes.md).

After a leader step that sent the teammate a message (a successful call to ``user.tool``), the
teammate's model replies once: its prompt is rendered strictly from the persona, the instructions
and the conversation so far (``suite.teammate.render_teammate``), sampled with the seed
``turn_seed(run seed, case id, sample index, step)``, and recorded in ``turns.jsonl`` (its prompt
once, by hash, in ``prompts.jsonl``) before the leader's next step is sampled. A resumed run reads
finished turns back and never resamples them; a replay serves them from the recorded run.

Which model plays the teammate is a model role of trusted configuration (``runs.trusted``): the
runs layer resolves it to a backend and hands it here as a ``Teammate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from leader_eval.sampling.backends.base import (
    Completion,
    SampleRequest,
    SamplingParams,
    overflow_error,
    overflows,
    weights_identity,
)
from leader_eval.sampling.keys import sample_key, turn_seed
from leader_eval.sampling.slots import completion_to_sample, request_completions
from leader_eval.store.run_store import prompt_sha256, step_record_key
from leader_eval.suite.teammate import UserSpec, message_of, render_teammate, stopped
from leader_eval.types import ModelInfo

if TYPE_CHECKING:
    from leader_eval.sampling.backends.base import Backend

__all__ = ["Teammate", "conversation", "reply_text", "sample_turn"]


@dataclass(frozen=True)
class Teammate:
    """The model that plays one model role, resolved from trusted configuration (or a replay)."""

    role: str
    backend: Backend
    #: the role's own sampling values; None: the case's
    temperature: float | None = None
    max_tokens: int | None = None
    #: the teammate model's special tokens (its end of turn is cut from the reply the leader reads)
    special_tokens: tuple[str, ...] = ()
    #: a replay's teammate: what the recorded run's manifest said of it (its identity and key)
    recorded: Mapping[str, Any] | None = None

    @property
    def key_model(self) -> str:
        """What names the teammate's model in its turns' keys (so in the episode's key)."""
        facts = self.recorded if self.recorded is not None else self.identity()
        return str(facts.get("cache_identity") or facts.get("model_id") or "")

    def params(self, case_params: SamplingParams) -> SamplingParams:
        # the leader's stop strings are its own: the teammate stops at its end of turn
        return replace(
            case_params,
            temperature=case_params.temperature if self.temperature is None else self.temperature,
            max_tokens=case_params.max_tokens if self.max_tokens is None else self.max_tokens,
            stop=(),
        )

    def identity(self) -> dict[str, Any]:
        """What the manifest records of the teammate (its model enters the run's identity)."""
        if self.recorded is not None:
            return dict(self.recorded)
        backend = self.backend
        return {
            "model_id": backend.model_id,
            "cache_identity": weights_identity(backend),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "special_tokens": list(self.special_tokens),
        }


def reply_text(teammate: Teammate, text: str) -> str:
    """The reply as the leader reads it: without the teammate model's end-of-turn token."""
    info = ModelInfo(teammate.special_tokens, teammate.special_tokens[:1])
    for tok in info.end_of_turn:
        if tok and text.endswith(tok):
            text = text[: -len(tok)]
            break
    return text.strip()


def conversation(
    user: UserSpec, steps: Sequence[Mapping[str, Any]], turns: Mapping[int, Mapping[str, Any]]
) -> list[dict[str, str]]:
    """The conversation so far from the teammate's side: each step's messages, then its reply."""
    out: list[dict[str, str]] = []
    for r in steps:
        for text in message_of(user, r["results"]):
            out.append({"from": "leader", "text": text})
        t = turns.get(int(r["step"]))
        if t is not None and t.get("reply") is not None:
            out.append({"from": "teammate", "text": str(t["reply"])})
    return out


async def sample_turn(
    teammate: Teammate,
    user: UserSpec,
    variables: Mapping[str, Any],
    case_id: str,
    case_params: SamplingParams,
    run_seed: int,
    index: int,
    steps: Sequence[Mapping[str, Any]],
    turns: Mapping[int, Mapping[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The teammate's reply to the last of ``steps``: its record for ``turns.jsonl`` and its
    prompt's record for ``prompts.jsonl``."""
    k = int(steps[-1]["step"])
    n_turn = len(turns)
    messages = render_teammate(user, variables, conversation(user, steps, turns))
    backend = teammate.backend
    prompt = backend.apply_chat_template(messages, None)
    params = teammate.params(case_params)
    seed = turn_seed(run_seed, case_id, index, k)
    key = sample_key(teammate.key_model, prompt, params, seed)
    context = getattr(backend, "context_length", None)
    if overflows(prompt.n_tokens, params.max_tokens, context):
        c = Completion(
            text="",
            token_ids=[],
            stop_reason=None,
            prompt_tokens=prompt.n_tokens or 0,
            error=overflow_error(prompt.n_tokens, params.max_tokens, context),
        )
    else:
        got = await request_completions(backend, SampleRequest(prompt=prompt, params=params, seeds=[seed]))
        c = got[0] if got else Completion("", [], None, error="backend returned no completion")
    sample = completion_to_sample(case_id, index, seed, key, c)
    digest = prompt_sha256(prompt.text, prompt.messages)
    reply = reply_text(teammate, sample.text) if sample.outcome == "ok" else None
    if sample.outcome != "ok":
        end: str | None = "teammate_" + sample.outcome
    elif stopped(user, sample.text):
        end = "user_stop"
    elif n_turn + 1 >= user.max_turns:
        end = "max_turns"
    else:
        end = None
    rec: dict[str, Any] = {
        "slot": step_record_key(case_id, index, k),
        **sample.__dict__,
        "step": k,
        "turn": n_turn,
        "role": teammate.role,
        "prompt_sha256": digest,
        "reply": reply,
        "end": end,
    }
    return rec, {"prompt_sha256": digest, "text": prompt.text, "messages": prompt.messages}
