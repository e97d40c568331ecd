"""``apriel``: ServiceNow Apriel 1.5 / 1.6, one block holding a JSON array of calls::

    <tool_calls>[{"name": "NAME", "arguments": {...}}, ...]</tool_calls>

The template writes an ``"id"`` (a string) after the arguments of calls earlier in the
conversation, so a call object may carry one."""

from __future__ import annotations

import re
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import ToolCallProtocol
from leader_eval.protocols._json_list import name_arguments, tagged_array

OPEN, CLOSE = "<tool_calls>", "</tool_calls>"


def _read(obj: Any, strict: bool) -> tuple[str, dict[str, Any]]:
    if isinstance(obj, dict) and "id" in obj:
        if strict and not isinstance(obj["id"], str):
            raise _scan.Fail("a call's id must be a string")
        obj = {k: v for k, v in obj.items() if k != "id"}
    return name_arguments(obj, strict)


strict, lenient = tagged_array(OPEN, CLOSE, _read, "apriel")

PROTOCOL = ToolCallProtocol(
    name="apriel",
    strict=strict,
    lenient=lenient,
    opening=re.escape(OPEN),
    closing=(re.escape(CLOSE),),
    # the templates' own example opens the array on the tag (MiniMax M1's <tool_calls> holds JSON lines)
    template_markers=(OPEN + "[",),
    lenient_needs=(OPEN,),
)
