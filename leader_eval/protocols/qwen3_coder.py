"""``qwen3_coder``: XML-style calls with the name and keys written after ``=``.

Qwen3-Coder (and Qwen3.5, Nemotron 3 Nano, StepFun 3.5)::

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

One block per call, only whitespace between blocks. A value is the text up to the first
``</parameter>``, less one newline at each end (the templates write them; the vendors' parsers
drop them): text, typed by the tool's schema in ``parse_output`` (objects and arrays as JSON, as
the templates write them). ``seed_oss`` shares the function block.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._scan import (
    MAX_CALLS,
    NO_CALL_ERROR,
    TOO_MANY_CALLS_ERROR,
    Budget,
    Fail,
    Memo,
    Scan,
    find_all,
    skip_ws,
)
from leader_eval.protocols._values import TextValue
from leader_eval.protocols._xml import MAX_PARAMETERS, ParamCount, drop_newlines
from leader_eval.types import ToolCall

QWEN_OPEN, QWEN_CLOSE = "<tool_call>", "</tool_call>"
FUNCTION = "<function="
_FUNCTION_OPEN = re.compile(r"<function=([^\s<>]{1,256})>")
_FUNCTION_CLOSE = "</function>"
_PARAM_OPEN = re.compile(r"<parameter=([^\s<>]{1,256})>")
_PARAM_CLOSE = "</parameter>"


def function_block(
    text: str, pos: int, hi: int, value: type[TextValue], count: ParamCount, budget: Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """Parse ``<function=NAME> <parameter=K>V</parameter>... </function>`` at ``pos``: (name,
    arguments, end). Strict without a budget (a parameter named twice fails); a lenient scan
    passes one (the last of a repeated parameter wins)."""
    m = _FUNCTION_OPEN.match(text, pos)
    if not m:
        raise Fail(f"expected <function=NAME> at offset {pos}")
    pos = skip_ws(text, m.end())
    args: dict[str, Any] = {}
    while True:
        p = _PARAM_OPEN.match(text, pos)
        if not p:
            break
        end = text.find(_PARAM_CLOSE, p.end(), hi)
        if budget is not None and not budget.spend((hi if end == -1 else end) - p.end()):
            raise Fail("lenient scan budget spent")
        if end == -1:
            raise Fail(f"<parameter=...> at offset {pos} is not closed")
        count.add()
        key = p.group(1)
        if budget is None and key in args:
            raise Fail(f"parameter {key!r} given twice")
        args[key] = value(drop_newlines(text[p.end() : end]))
        pos = skip_ws(text, end + len(_PARAM_CLOSE))
    if not text.startswith(_FUNCTION_CLOSE, pos):
        raise Fail(f"expected <parameter=KEY> or {_FUNCTION_CLOSE} at offset {pos}")
    return m.group(1), args, pos + len(_FUNCTION_CLOSE)


def strict_blocks(
    name: str, open_tag: str, close_tag: str, value: type[TextValue], text: str, lo: int, hi: int
) -> StrictOut:
    if not text.startswith(open_tag, lo):
        if text.startswith(FUNCTION, lo):
            raise Fail(f"<function=...> at offset {lo} is not inside {open_tag}")
        raise Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos, count = lo, ParamCount()
    while pos < hi:
        if len(calls) == MAX_CALLS:
            raise Fail(TOO_MANY_CALLS_ERROR)
        if not text.startswith(open_tag, pos):
            raise Fail(f"expected {open_tag} at offset {pos}")
        start = pos
        fname, args, end = function_block(text, skip_ws(text, pos + len(open_tag)), hi, value, count)
        pos = skip_ws(text, end)
        if not text.startswith(close_tag, pos):
            raise Fail(f"expected {close_tag} at offset {pos}")
        pos += len(close_tag)
        calls.append(ToolCall(fname, args, name, (start, pos), text[start:pos]))
        spans.append((start, pos))
        pos = skip_ws(text, pos)
    return calls, spans


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    return strict_blocks("qwen3_coder", QWEN_OPEN, QWEN_CLOSE, TextValue, text, lo, hi)


def lenient_blocks(scan: Scan, name: str, needle: str, close_tag: str, value: type[TextValue]) -> Iterator[ToolCall]:
    """Every ``needle`` that opens a function block (after whitespace when the needle is the
    wrapping tag); the span runs from the needle over a following ``close_tag``."""
    text, hi, budget, count = scan.text, len(scan.text), scan.budget(), ParamCount()
    for s in find_all(text, needle, scan.start):
        if budget.spent:
            return
        at = s if needle == FUNCTION else skip_ws(text, s + len(needle))
        try:
            fname, args, end = function_block(text, at, hi, value, count, budget)
        except Fail:
            if count.n > MAX_PARAMETERS:
                return
            budget.fail()
            continue
        e = scan.close_after(end, close_tag)
        yield ToolCall(fname, args, name, (s, e), text[s:e])


def lenient(scan: Scan) -> Iterator[ToolCall]:
    return lenient_blocks(scan, "qwen3_coder", FUNCTION, QWEN_CLOSE, TextValue)


INNER = (r"<function=[^\s<>]{1,256}>", r"<parameter=[^\s<>]{1,256}>")

PROTOCOL = ToolCallProtocol(
    name="qwen3_coder",
    strict=strict,
    lenient=lenient,
    opening=r"<tool_call>|<function=[^\s<>]{1,256}>",
    closing=(r"</tool_call>", r"</function>", r"</parameter>"),
    inner=INNER,
    # the Qwen3-Coder templates write parameters as <parameter=KEY> inside <tool_call> (which
    # selects hermes, the JSON form, on its own: this protocol must come first)
    template_markers=("<parameter=",),
    lenient_needs=(FUNCTION,),
)
