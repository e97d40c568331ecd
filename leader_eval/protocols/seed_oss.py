"""``seed_oss``: Seed-OSS's calls, Qwen3-Coder's function block in its own wrapper::

    <seed:tool_call>
    <function=NAME>
    <parameter=KEY>VALUE</parameter>
    </function>
    </seed:tool_call>

One block per call, only whitespace between blocks; values as in ``qwen3_coder`` (one newline at
each end dropped), but the template writes objects and arrays with Python's ``str()``
(``{'k': None}``), so they are ``PyTextValue``. Reasoning is ``<seed:think>...</seed:think>``.
"""

from __future__ import annotations

from collections.abc import Iterator

from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._scan import Memo, Scan
from leader_eval.protocols._values import PyTextValue
from leader_eval.protocols.qwen3_coder import INNER, lenient_blocks, strict_blocks
from leader_eval.types import ToolCall

OPEN, CLOSE = "<seed:tool_call>", "</seed:tool_call>"


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    return strict_blocks("seed_oss", OPEN, CLOSE, PyTextValue, text, lo, hi)


def lenient(scan: Scan) -> Iterator[ToolCall]:
    return lenient_blocks(scan, "seed_oss", OPEN, CLOSE, PyTextValue)


PROTOCOL = ToolCallProtocol(
    name="seed_oss",
    strict=strict,
    lenient=lenient,
    opening=r"<seed:tool_call>",
    closing=(r"</seed:tool_call>", r"</function>", r"</parameter>"),
    inner=INNER,
    template_markers=(OPEN,),
    lenient_needs=(OPEN,),
)
