"""``nemotron_v2``: NVIDIA Nemotron Nano v2, one block holding a JSON array of calls::

<TOOLCALL>[{"name": "NAME", "arguments": {...}}, ...]</TOOLCALL>
"""

from __future__ import annotations

import re

from leader_eval.protocols._base import ToolCallProtocol
from leader_eval.protocols._json_list import name_arguments, tagged_array

OPEN, CLOSE = "<TOOLCALL>", "</TOOLCALL>"

strict, lenient = tagged_array(OPEN, CLOSE, name_arguments, "nemotron_v2")

PROTOCOL = ToolCallProtocol(
    name="nemotron_v2",
    strict=strict,
    lenient=lenient,
    opening=re.escape(OPEN),
    closing=(re.escape(CLOSE),),
    template_markers=(OPEN,),
    lenient_needs=(OPEN,),
)
