"""``openai``: tool calls an OpenAI-compatible chat API returns beside the content text
(``message.tool_calls``). Strict: every call is ``{"type": "function", "function": {"name": ...,
"arguments": "<a JSON object as a string>"}}``; decoded argument objects are accepted too."""

from __future__ import annotations

import json
from typing import Any

from leader_eval.protocols._base import ToolCallProtocol
from leader_eval.protocols._scan import Fail, decode, object_arguments, skip_ws
from leader_eval.types import ToolCall, json_type


def api_calls(api_tool_calls: list[dict[str, Any]] | None, strict: bool) -> list[ToolCall]:
    calls: list[ToolCall] = []
    if not api_tool_calls:
        return calls
    if not isinstance(api_tool_calls, list):
        raise Fail("tool_calls must be a list")
    for i, item in enumerate(api_tool_calls):
        try:
            calls.append(_api_call(item, strict))
        except Fail as exc:
            if strict:
                raise Fail(f"tool_calls[{i}]: {exc}") from None
    return calls


def _api_call(item: Any, strict: bool) -> ToolCall:
    if not isinstance(item, dict):
        raise Fail(f"a tool call must be an object, got {json_type(item)}")
    if strict and item.get("type", "function") != "function":
        raise Fail(f"type must be 'function', got {item.get('type')!r}")
    fn = item.get("function")
    if not isinstance(fn, dict):
        raise Fail("no 'function' object")
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        raise Fail("function.name must be a non-empty string")
    raw_args = fn.get("arguments")
    if isinstance(raw_args, dict):  # some servers hand back decoded arguments
        args = raw_args
    elif isinstance(raw_args, str):
        args = _api_arguments(raw_args, strict)
    elif raw_args is None and not strict:
        args = {}
    else:
        raise Fail(f"function.arguments must be a JSON string, got {json_type(raw_args)}")
    try:
        raw = json.dumps(item, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        raw = repr(item)
    return ToolCall(name, args, "openai", None, raw)


def _api_arguments(s: str, strict: bool) -> dict[str, Any]:
    lo = skip_ws(s, 0)
    if strict:
        if lo == len(s):
            raise Fail("function.arguments is empty")
        obj, end = decode(s, lo)
        if skip_ws(s, end) != len(s):
            raise Fail(f"function.arguments has text after the JSON value at offset {end}")
        if not isinstance(obj, dict):
            raise Fail(f"function.arguments must hold a JSON object, got {json_type(obj)}")
        return obj
    if lo == len(s):
        return {}
    obj, _ = decode(s, lo, unique_keys=False)  # lenient: ignore trailing junk, unwrap a double-encoded string
    return object_arguments(obj, strict=False)


PROTOCOL = ToolCallProtocol(name="openai", strict=None, lenient=None)
