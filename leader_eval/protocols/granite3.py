"""``granite3``: IBM Granite 3.x, the ``<|tool_call|>`` token and a JSON array of calls that
ends the output::

    <|tool_call|>[{"name": "NAME", "arguments": {...}}, ...]

Granite 3.3's template renders no assistant tool calls; its system prompt says the format
("respond only with <|tool_call|> followed by a JSON list of tools used"), and vLLM's ``granite``
parser reads it. (Granite 4 writes Hermes ``<tool_call>`` blocks: ``hermes``.)"""

from __future__ import annotations

import re

from leader_eval.protocols._base import ToolCallProtocol
from leader_eval.protocols._json_list import name_arguments, tagged_array

OPEN = "<|tool_call|>"

strict, lenient = tagged_array(OPEN, None, name_arguments, "granite3")

PROTOCOL = ToolCallProtocol(
    name="granite3",
    strict=strict,
    lenient=lenient,
    opening=re.escape(OPEN),
    template_markers=(OPEN + " followed by a JSON list",),
    lenient_needs=(OPEN,),
)
