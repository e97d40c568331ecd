"""``json``: one plain JSON object ``{"tool"|"name": ..., "arguments"|"parameters": {...}}``, or
an array of them (parallel calls). For models without native tool calling."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._json_list import array_calls
from leader_eval.types import ToolCall

NAME_KEYS = ("tool", "name")
ARGS_KEYS = ("arguments", "parameters")
#: an object or array whose first key is quoted (double quotes, or single: a Python dict is a
#: failed attempt too), or an empty one; ``{0:21}`` is no attempt, and nor is a Python list of
#: strings (``['wood', 'stone'] is what we need``): single quotes only as a dict key, ``{'tool':``
JSON_OPENING = r"[\[{][\s\[{]*(?:\"|\}|\])|(?:\[[\s\[]*)?\{\s*'[^'\n]{0,100}'\s*:"


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    if text[lo] not in "{[":
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    calls: list[ToolCall] = []
    if text[lo] == "{":
        obj, end = _scan.decode(text, lo, memo)
        if end != hi:
            raise _scan.Fail(f"text after the JSON object at offset {end}")
        name, args = _read(obj, True)
        calls.append(ToolCall(name, args, "json", (lo, end), text[lo:end]))
        return calls, [(lo, end)]
    # An array of call objects, each keeping its own span
    calls, end = array_calls(text, lo, hi, memo, _read, "json")
    if end != hi:
        raise _scan.Fail(f"text after the JSON array at offset {end}")
    return calls, [(lo, hi)]


def _read(obj: Any, strict: bool) -> tuple[str, dict[str, Any]]:
    return _scan.call_from_object(obj, name_keys=NAME_KEYS, args_keys=ARGS_KEYS, strict=strict)


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    for obj, s, e in scan.call_objects():
        try:
            name, args = _read(obj, False)
        except _scan.Fail:
            continue
        yield ToolCall(name, args, "json", (s, e), scan.text[s:e])


PROTOCOL = ToolCallProtocol(name="json", strict=strict, lenient=lenient, opening=JSON_OPENING, lenient_needs=("{",))
