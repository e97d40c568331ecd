"""The one strict JSON decoder: what a model, a judge or a data file writes as JSON is read with
no key given twice and no NaN/Infinity (Python's own decoder keeps the last of two keys and accepts
the constants). Which of two values a writer meant cannot be told, and silently keeping the last
would judge a call, a verdict or a record nobody wrote."""

from __future__ import annotations

import json
from typing import Any


def reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"key {dup!r} given twice in one object")
    return d


#: no NaN/Infinity, but a key may repeat (a lenient reading keeps the last)
DECODER = json.JSONDecoder(parse_constant=reject_constant)
#: no NaN/Infinity and no key given twice
STRICT_DECODER = json.JSONDecoder(parse_constant=reject_constant, object_pairs_hook=unique_pairs)
