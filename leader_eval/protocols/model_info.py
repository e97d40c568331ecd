"""The model facts an output is parsed and scored with, read from a run manifest's ``model``.

Below both the episode loop (which parses each step's output and strips its end-of-turn token
for the transcript) and scoring (which parses and checks every sample), so the two read the
manifest one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leader_eval.types import END_OF_TURN_TOKENS


@dataclass(frozen=True)
class ModelInfo:
    """What parsing and scoring need to know about the model that produced the samples.

    ``eot_tokens`` are the model's end-of-turn tokens, as its backend reports them (the first of
    ``special_tokens`` in a run manifest). Parsing, leak detection and the empty check all read
    ``end_of_turn``: these tokens and the common end tokens (``END_OF_TURN_TOKENS``) that are
    among the model's special tokens; the common list itself when the model declares nothing.
    """

    special_tokens: tuple[str, ...] = ()
    eot_tokens: tuple[str, ...] = ()
    reasoning_tags: tuple[str, str] | None = None

    @property
    def end_of_turn(self) -> tuple[str, ...]:
        if not self.eot_tokens and not self.special_tokens:
            return END_OF_TURN_TOKENS
        # a common end-of-turn/end-of-text token that is one of the model's own special tokens
        # ends its turn too (SmolLM2 stops at <|endoftext|> as at <|im_end|>)
        extra = tuple(t for t in END_OF_TURN_TOKENS if t in self.special_tokens and t not in self.eot_tokens)
        return (*self.eot_tokens, *extra)

    @classmethod
    def from_manifest(cls, model: Mapping[str, Any]) -> ModelInfo:
        special = tuple(model.get("special_tokens", ()))
        eot = tuple(model.get("eot_tokens", special[:1]))
        tags = model.get("reasoning_tags")
        return cls(special, eot, (str(tags[0]), str(tags[1])) if tags else None)
