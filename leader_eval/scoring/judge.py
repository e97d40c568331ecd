"""A judge's reply read strictly against its scale, and the text a criterion judges.

The reply must be exactly one JSON object, ``{"verdict": "pass"|"fail"}`` on a pass/fail scale or
``{"score": N}`` with N an integer in the scale's range; anything else (prose around it, a
second key, a float, a boolean, a number out of range, an empty or cut reply, a sampler error) is
a **judge error**: never a pass, never a zero, counted by the criterion's own error rate
(docs/judges.md). ``grammar`` and ``json_schema`` describe the same replies for backends that can
decode under a constraint (a llama.cpp grammar; ``response_format`` on OpenAI-compatible servers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leader_eval.bounded.strict_json import STRICT_DECODER
from leader_eval.suite.judge_spec import PASS_FAIL, Judged, Scale

#: strict JSON (bounded/strict_json.py): a key given twice or NaN/Infinity is no verdict
_DECODER = STRICT_DECODER


def decode_strict(text: str) -> Any:
    """``text`` as strict JSON (a key twice, NaN or Infinity: ``ValueError``)."""
    return _DECODER.decode(text)


#: a verdict is a few characters; a longer reply is not one (and is not decoded)
MAX_REPLY_CHARS = 200


@dataclass(frozen=True)
class Verdict:
    """One judgement: ``value`` in [0, 1] (pass = 1, fail = 0; an integer score scaled from the
    range) and the scale's own ``raw`` value, or ``error`` (then both are None)."""

    value: float | None
    raw: int | str | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "raw": self.raw, "error": self.error}


def parse_verdict(reply: str, scale: Scale) -> Verdict:
    """The verdict in ``reply``, or a judge error saying what is wrong with it."""
    text = reply.strip()
    if not text:
        return Verdict(None, None, "empty reply")
    if len(text) > MAX_REPLY_CHARS:
        return Verdict(None, None, f"reply of {len(text)} characters is not a verdict")
    try:
        data = _DECODER.decode(text)
    except (ValueError, RecursionError):
        return Verdict(None, None, f"not one JSON object: {text[:60]!r}")
    key = "verdict" if scale.kind == PASS_FAIL else "score"
    if not isinstance(data, dict) or set(data) != {key}:
        return Verdict(None, None, f'expected exactly {{"{key}": ...}}, got {text[:60]!r}')
    value = data[key]
    if scale.kind == PASS_FAIL:
        if value not in ("pass", "fail"):
            return Verdict(None, None, f"verdict {value!r} is not pass or fail")
        return Verdict(1.0 if value == "pass" else 0.0, value)
    if not isinstance(value, int) or isinstance(value, bool):
        return Verdict(None, None, f"score {value!r} is not an integer")
    if not scale.low <= value <= scale.high:
        return Verdict(None, None, f"score {value} is outside {scale.low}..{scale.high}")
    return Verdict((value - scale.low) / (scale.high - scale.low), value)


def grammar(scale: Scale) -> str:
    """A llama.cpp GBNF grammar of exactly the replies ``parse_verdict`` accepts (compact form)."""
    if scale.kind == PASS_FAIL:
        return 'root ::= "{\\"verdict\\": \\"" ("pass" | "fail") "\\"}"\n'
    values = " | ".join(f'"{v}"' for v in range(scale.low, scale.high + 1))
    return f'root ::= "{{\\"score\\": " ({values}) "}}"\n'


def json_schema(scale: Scale) -> dict[str, Any]:
    """The JSON Schema of a verdict (``response_format`` on an OpenAI-compatible server)."""
    if scale.kind == PASS_FAIL:
        value: dict[str, Any] = {"type": "string", "enum": ["pass", "fail"]}
        key = "verdict"
    else:
        value = {"type": "integer", "minimum": scale.low, "maximum": scale.high}
        key = "score"
    return {"type": "object", "properties": {key: value}, "required": [key], "additionalProperties": False}


def judged_text(judged: Judged, raw_text: str, calls: Sequence[Mapping[str, Any]]) -> str | None:
    """The text a criterion judges in one sample; None when the sample has none (no strict call
    to the judged tool, or the argument missing): such a sample is not judged on it."""
    if judged.kind == "text":
        return raw_text
    if judged.kind == "message":  # the prose beside the strict calls: the text less their spans
        spans = sorted(tuple(c["span"]) for c in calls if isinstance(c.get("span"), list | tuple))
        parts, pos = [], 0
        for lo, hi in spans:
            parts.append(raw_text[pos:lo])
            pos = max(pos, hi)
        parts.append(raw_text[pos:])
        message = "".join(parts).strip()
        return message or None
    for call in calls:
        if call.get("name") != judged.tool:
            continue
        args = call.get("arguments")
        if not isinstance(args, Mapping) or judged.arg not in args:
            return None
        value = args[judged.arg]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return None


#: the metric name of a criterion (``stats.metrics.judge_metric``)
PREFIX = "judge:"


def judge_data(score: Any) -> Mapping[str, Any]:
    """A score's judgements (criterion -> verdict record), empty when it has none."""
    for c in score.checks:
        if c.get("check") == "judge":
            data: Mapping[str, Any] = c.get("data") or {}
            return data
    return {}


def judge_case_metrics(scores: Sequence[Any]) -> dict[str, Any]:
    """Per-case values of each criterion over the case's scored samples: ``judge:NAME`` the mean
    verdict (None when no sample got one), ``n_judge:NAME`` the verdicts behind it,
    ``judge_errors:NAME`` the judge errors, ``judge_missing:NAME`` the samples not judged (no
    judged text, or no judgement recorded)."""
    out: dict[str, Any] = {}
    for s in scores:
        if not s.scored:
            continue
        for name, rec in judge_data(s).items():
            key = PREFIX + name
            out.setdefault(key, None)
            for k in ("n_", "judge_errors:", "judge_missing:", "_sum:"):
                out.setdefault(k + (key if k in ("n_", "_sum:") else name), 0)
            if rec.get("value") is not None:
                out["_sum:" + key] += float(rec["value"])
                out["n_" + key] += 1
            elif rec.get("error"):
                out["judge_errors:" + name] += 1
            else:
                out["judge_missing:" + name] += 1
    for key in [k for k in out if k.startswith(PREFIX)]:
        n = out["n_" + key]
        out[key] = out.pop("_sum:" + key) / n if n else None
    return out
