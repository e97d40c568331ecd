"""``apertus``: Swiss AI Apertus, a JSON array of one-key objects (the key is the tool's name)::

<|tools_prefix|>[{"NAME": {...}}, {"OTHER": {...}}]<|tools_suffix|>
"""

from __future__ import annotations

import re
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import ToolCallProtocol
from leader_eval.protocols._json_list import tagged_array
from leader_eval.types import json_type

OPEN, CLOSE = "<|tools_prefix|>", "<|tools_suffix|>"


def _read(obj: Any, strict: bool) -> tuple[str, dict[str, Any]]:
    if not isinstance(obj, dict):
        raise _scan.Fail(f"a tool call must be a JSON object, got {json_type(obj)}")
    if len(obj) != 1:
        raise _scan.Fail(f"a tool call object has exactly one key (the tool's name), got {len(obj)}")
    ((name, args),) = obj.items()
    if not name.strip():
        raise _scan.Fail("tool name must be a non-empty string")
    return name, _scan.object_arguments(args, strict)


strict, lenient = tagged_array(OPEN, CLOSE, _read, "apertus")

PROTOCOL = ToolCallProtocol(
    name="apertus",
    strict=strict,
    lenient=lenient,
    opening=re.escape(OPEN),
    closing=(re.escape(CLOSE),),
    template_markers=(OPEN,),
    lenient_needs=(OPEN,),
)
