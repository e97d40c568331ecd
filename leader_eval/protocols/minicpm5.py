"""``minicpm5``: MiniCPM5's calls, one ``<function>`` element per call::

    <function name="NAME"><param name="KEY">VALUE</param><param name="KEY2"><![CDATA[a
    multi-line <value>]]></param></function>

Only whitespace between calls. The template wraps a string holding ``<``, ``&`` or a newline in
a CDATA section (its content is the value, exactly) and writes every other value with Python's
``str()`` (``True``, ``None``, ``{'k': 1}``): text typed by the tool's schema in
``parse_output`` (``PyTextValue``).
"""

from __future__ import annotations

from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._scan import (
    MAX_CALLS,
    NO_CALL_ERROR,
    TOO_MANY_CALLS_ERROR,
    Fail,
    Memo,
    skip_ws,
)
from leader_eval.protocols._values import PyTextValue
from leader_eval.protocols._xml import InvokeTags, ParamCount, invoke_block, invoke_lenient
from leader_eval.types import ToolCall

TAGS = InvokeTags("function", "param", cdata=True)
_OPEN = "<function name"


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    if not text.startswith(_OPEN, lo):
        raise Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    pos, count = lo, ParamCount()
    while pos < hi:
        if len(calls) == MAX_CALLS:
            raise Fail(TOO_MANY_CALLS_ERROR)
        name, args, end = invoke_block(text, pos, hi, TAGS, PyTextValue, count)
        calls.append(ToolCall(name, args, "minicpm5", (pos, end), text[pos:end]))
        pos = skip_ws(text, end)
    return calls, [(c.span[0], c.span[1]) for c in calls if c.span is not None]


#: every block anywhere (the invoke-shaped formats' one lenient reader, protocols/_xml.py)
lenient = invoke_lenient(_OPEN, TAGS, PyTextValue, "minicpm5")


PROTOCOL = ToolCallProtocol(
    name="minicpm5",
    strict=strict,
    lenient=lenient,
    opening=r"""<function\s+name\s*=\s*["']""",
    closing=(r"</function>", r"</param>"),
    inner=TAGS.markup(),
    template_markers=('<param name="',),
    lenient_needs=(_OPEN,),
)
