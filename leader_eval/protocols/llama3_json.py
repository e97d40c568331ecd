"""``llama3_json``: Llama 3.x JSON tool calls, ``<|python_tag|>`` optional, ``;`` between calls."""

from __future__ import annotations

from collections.abc import Iterator

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols.json_call import JSON_OPENING
from leader_eval.types import ToolCall

PYTHON_TAG = "<|python_tag|>"
_ARGS = ("parameters", "arguments")


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    pos = lo
    if text.startswith(PYTHON_TAG, pos):
        pos = _scan.skip_ws(text, pos + len(PYTHON_TAG))
    if pos >= hi or text[pos] != "{":
        raise _scan.Fail(_scan.NO_CALL_ERROR if pos == lo else f"expected a JSON object after {PYTHON_TAG}")
    calls: list[ToolCall] = []
    while True:
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        obj, end = _scan.decode(text, pos, memo)
        name, args = _scan.call_from_object(
            obj, name_keys=("name",), args_keys=_ARGS, strict=True, optional={"type": "function"}
        )
        calls.append(ToolCall(name, args, "llama3_json", (pos, end), text[pos:end]))
        pos = _scan.skip_ws(text, end)
        if pos >= hi:
            break
        if text[pos] != ";":
            raise _scan.Fail(f"expected ';' between tool calls at offset {pos}")
        pos = _scan.skip_ws(text, pos + 1)
        if pos >= hi:  # a trailing ';' is harmless
            break
    return calls, [(lo, hi)]


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    for obj, s, e in scan.call_objects():
        if "name" not in obj or not ("parameters" in obj or "arguments" in obj):
            continue
        try:
            name, args = _scan.call_from_object(obj, name_keys=("name",), args_keys=_ARGS, strict=False)
        except _scan.Fail:
            continue
        yield ToolCall(name, args, "llama3_json", (s, e), scan.text[s:e])


PROTOCOL = ToolCallProtocol(
    name="llama3_json",
    strict=strict,
    lenient=lenient,
    opening=r"(?:<\|python_tag\|>)?\s*" + JSON_OPENING,
    inner=(r"<\|python_tag\|>",),
    template_markers=(PYTHON_TAG, "ipython"),
    renderers=("llama3",),
    lenient_needs=("{",),  # its calls are JSON objects, the tag optional
)
