"""Domain records shared by every pipeline stage.

They are plain dataclasses with builtin-typed fields so that a record can go to JSON (the run
store), through pytest-xdist's serializer (``user_properties``) and back without loss.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

# The scorer builds about fifteen CheckResults per sample (and a ToolCall per call each parse
# finds). A frozen dataclass's generated
# ``__init__`` sets each field through ``object.__setattr__`` (~0.8 us for CheckResult), so
# CheckResult defines its own ``__init__`` that fills ``__dict__`` directly (~0.3 us), with the
# same signature and defaults; the dataclass machinery (eq, hash, repr, replace, asdict,
# fields) is unchanged. bench/bench_scoring.py measures the scorer.
_DEFAULT_DATA: Any = object()  # CheckResult's ``data`` not given: a new empty dict

Outcome = Literal["ok", "error", "context_overflow"]
StopReason = Literal["stop", "length"]

#: End-of-turn / end-of-text tokens of common chat templates, most specific first. Used only
#: when a model does not say which are its own (``ModelInfo.eot_tokens``); parsing, leak
#: detection and the empty check then all use this one list.
END_OF_TURN_TOKENS: tuple[str, ...] = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|eot|>",
    "<|end_of_text|>",
    "<|endoftext|>",
    "<|end|>",
    "<|return|>",
    "<end_of_turn>",
    "<eos>",
    "</s>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>",
)


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value: an int is "integer" (as JSON Schema's
    ``type: integer`` accepts it), a float "number", a bool "boolean" (never a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


class Reason(StrEnum):
    """Primary reason a sample fails. The list is fixed and documented in docs/scoring.md."""

    # output shape
    EMPTY = "empty"
    TRUNCATED = "truncated"
    REPETITION = "repetition"
    RESTATES_PROMPT = "restates_prompt"
    # tool-call dispatch
    NO_CALL = "no_call"
    UNPARSEABLE = "unparseable"
    WRONG_PROTOCOL = "wrong_protocol"
    WRONG_TOOL = "wrong_tool"
    MISSING_CALL = "missing_call"
    EXTRA_CALL = "extra_call"
    SCHEMA_VIOLATION = "schema_violation"
    MISSING_ARG = "missing_arg"
    UNEXPECTED_ARG = "unexpected_arg"
    WRONG_TYPE = "wrong_type"
    WRONG_VALUE = "wrong_value"
    # leakage
    LEAK_TOOL_MARKUP = "leak_tool_markup"
    LEAK_REASONING = "leak_reasoning"
    LEAK_SPECIAL_TOKEN = "leak_special_token"
    LEAK_MARKER = "leak_marker"
    LEAK_PLACEHOLDER = "leak_placeholder"
    LEAK_SCAFFOLD = "leak_scaffold"
    FORBIDDEN_PATTERN = "forbidden_pattern"
    # not a model failure
    SAMPLER_ERROR = "sampler_error"
    CONTEXT_OVERFLOW = "context_overflow"
    # a user's Python check raised or returned something else than a verdict: never a pass, and
    # counted by the error rule (docs/checks.md, "Your own checks in Python")
    CHECK_ERROR = "check_error"


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model wrote it (or as an API returned it)."""

    name: str
    arguments: dict[str, Any]
    protocol: str
    span: tuple[int, int] | None = None  # where in the raw text; None for API-level calls
    raw: str = ""

    def __init__(
        self,
        name: str,
        arguments: dict[str, Any],
        protocol: str,
        span: tuple[int, int] | None = None,
        raw: str = "",
    ) -> None:
        # the parsers build one per call, twice for a call both parses find: fill __dict__
        # directly, as CheckResult does (same signature and defaults)
        self.__dict__.update(name=name, arguments=arguments, protocol=protocol, span=span, raw=raw)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["span"] = list(self.span) if self.span else None
        return d


@dataclass(frozen=True)
class Finding:
    """A located problem in text the room would see (a leak, a placeholder, a loop)."""

    reason: Reason
    start: int
    end: int
    text: str
    context: str
    where: str = "text"  # "text" or "call[i].arguments.<path>"

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": str(self.reason),
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "context": self.context,
            "where": self.where,
        }


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one named check on one sample."""

    check: str
    passed: bool
    reason: Reason | None = None
    detail: str = ""
    hard: bool = False
    findings: tuple[Finding, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        check: str,
        passed: bool,
        reason: Reason | None = None,
        detail: str = "",
        hard: bool = False,
        findings: tuple[Finding, ...] = (),
        data: dict[str, Any] = _DEFAULT_DATA,
    ) -> None:
        d = self.__dict__
        d["check"] = check
        d["passed"] = passed
        d["reason"] = reason
        d["detail"] = detail
        d["hard"] = hard
        d["findings"] = findings
        d["data"] = {} if data is _DEFAULT_DATA else data

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "passed": self.passed,
            "reason": str(self.reason) if self.reason else None,
            "detail": self.detail,
            "hard": self.hard,
            "findings": [f.to_dict() for f in self.findings] if self.findings else [],
            "data": self.data,
        }


@dataclass(frozen=True)
class CheckContext:
    """What a user's Python check receives (docs/checks.md, "Your own checks in Python"): one
    scored output of one case. ``case`` is the suite's case record (``leader_eval.suite.Case``:
    ``id``, ``vars``, ``expect``, ``tags``); ``calls`` the tool calls the strict parse found;
    ``text`` the raw output, special tokens included; ``visible_text`` what is left outside call
    markup and reasoning; ``message`` what the room reads: the suite's message argument of the
    first call that carries one (``send_message_to_chat.message``), else the visible text;
    ``options`` the check's ``options:`` from the suite."""

    case: Any
    case_id: str
    sample_index: int
    text: str
    visible_text: str
    message: str
    calls: tuple[ToolCall, ...]
    protocol: str
    options: Mapping[str, Any]


@dataclass(frozen=True)
class CheckVerdict:
    """What a user's Python check returns (a bare ``bool`` is read as ``CheckVerdict(passed)``).

    ``reason``: a short word for why it failed (shown as ``python:NAME: reason``); ``detail``:
    the evidence; ``hard``: the failure is a hard fail (also set by ``hard: true`` in the suite);
    ``data``: JSON values kept in the check's record."""

    passed: bool
    reason: str = ""
    detail: str = ""
    hard: bool = False
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BoundCheck:
    """A Python check a suite names, with its function loaded from trusted configuration
    (``runs/python_checks.bind_checks``): what the scorer calls. ``version`` identifies the code
    (the module file's sha256, or the callable's qualified name and source hash)."""

    name: str
    fn: Any  # Callable[[CheckContext], CheckVerdict | bool]
    target: str  # "module:function" or "register_check:<qualified name>"
    version: str
    hard: bool = False
    tags: tuple[str, ...] = ()  # runs on the cases carrying one of these tags; empty: every case
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Prompt:
    """Exactly what the model sees: the chat-templated text and, where known, its token ids."""

    text: str
    token_ids: list[int] | None
    messages: list[dict[str, Any]]

    @property
    def n_tokens(self) -> int | None:
        return len(self.token_ids) if self.token_ids is not None else None


@dataclass
class Sample:
    """One sampled completion of one case, exactly as the backend returned it."""

    case_id: str
    index: int
    seed: int
    key: str  # content address: backend + checkpoint + prompt + params + seed
    outcome: Outcome
    text: str = ""  # raw decoded text, special tokens included
    token_ids: list[int] = field(default_factory=list)
    stop_reason: StopReason | None = None
    logprobs: list[float] | None = None
    api_tool_calls: list[dict[str, Any]] | None = None  # OpenAI-style objects from chat APIs
    reasoning: str | None = None  # a reasoning channel the API returned separately
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Sample:
        return cls(**d)


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


# JSON values read from options and run files: a bool is an int to Python, never to us


def is_int(v: Any) -> bool:
    """An ``int`` that is not a ``bool``."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_finite_number(v: Any) -> bool:
    """A finite ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
