"""``minimax_m3``: MiniMax-M3's calls, every tag behind the ``]<]minimax[>[`` token (``NS``)::

    NS<tool_call>
    NS<invoke name="NAME">NS<KEY>VALUE NS</KEY>NS<META>NS<k>v NS</k>NS</META>NS</invoke>
    NS</tool_call>

(shown with spaces before ``NS</...>`` for reading only; the template writes none). One block,
one or more invokes, whitespace between invokes and around the block's tags. A parameter's value
is text (``true``/``false``, numbers and strings as written) or, for an object or array, child
elements: an array's children are all ``<item>``, an object's are its keys (a key given twice
fails). Leaves are text typed by the tool's schema at their place in ``parse_output``. The
template omits arguments whose value is null, and writes ``{}``, ``[]`` and ``""`` alike (empty).
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
    block_calls,
    skip_ws,
)
from leader_eval.protocols._values import TextValue
from leader_eval.protocols._xml import MAX_PARAMETERS, ParamCount
from leader_eval.types import ToolCall

NS = "]<]minimax[>["
OPEN, CLOSE = NS + "<tool_call>", NS + "</tool_call>"
_INVOKE = NS + "<invoke"
_INVOKE_OPEN = re.compile(re.escape(NS) + r"""<invoke name="([^"<>\n]{1,256})">""")
_INVOKE_CLOSE = NS + "</invoke>"
_ELEMENT_OPEN = re.compile(re.escape(NS) + r"<([^\s<>/\[\]]{1,256})>")
_CLOSING = NS + "</"
_MAX_DEPTH = 32


def _element(
    text: str, pos: int, hi: int, count: ParamCount, budget: Budget | None, depth: int
) -> tuple[str, Any, int]:
    """The element at ``pos`` (``NS<KEY>``): (key, value, end past ``NS</KEY>``)."""
    m = _ELEMENT_OPEN.match(text, pos)
    if not m:
        raise Fail(f"expected {NS}<KEY> at offset {pos}")
    count.add()
    key, pos = m.group(1), m.end()
    if text.startswith(NS, pos) and not text.startswith(_CLOSING, pos):  # child elements
        if depth == _MAX_DEPTH:
            raise Fail(f"elements nested more than {_MAX_DEPTH} deep at offset {pos}")
        children: list[tuple[str, Any]] = []
        while text.startswith(NS, pos) and not text.startswith(_CLOSING, pos):
            k, v, pos = _element(text, pos, hi, count, budget, depth + 1)
            children.append((k, v))
        value: Any
        if all(k == "item" for k, _ in children):
            value = [v for _, v in children]
        else:
            value = {}
            for k, v in children:
                if budget is None and k in value:
                    raise Fail(f"element {k!r} given twice in {key!r}")
                value[k] = v
    else:
        end = text.find(NS, pos, hi)
        if budget is not None and not budget.spend((hi if end == -1 else end) - pos):
            raise Fail("lenient scan budget spent")
        if end == -1:
            raise Fail(f"{NS}<{key}> at offset {m.start()} is not closed")
        value, pos = TextValue(text[pos:end]), end
    close = f"{NS}</{key}>"
    if not text.startswith(close, pos):
        raise Fail(f"expected {close} at offset {pos}")
    return key, value, pos + len(close)


def _invoke(text: str, pos: int, hi: int, count: ParamCount, budget: Budget | None = None) -> tuple[str, Any, int]:
    """``NS<invoke name="N">`` elements ``NS</invoke>`` at ``pos``: (name, arguments, end)."""
    m = _INVOKE_OPEN.match(text, pos)
    if not m:
        raise Fail(f'expected {NS}<invoke name="..."> at offset {pos}')
    name = m.group(1)
    if not name.strip():
        raise Fail(f"empty tool name in <invoke> at offset {pos}")
    pos = m.end()
    args: dict[str, Any] = {}
    while text.startswith(NS, pos) and not text.startswith(_CLOSING, pos):
        key, value, pos = _element(text, pos, hi, count, budget, 1)
        if budget is None and key in args:
            raise Fail(f"parameter {key!r} given twice")
        args[key] = value
    if not text.startswith(_INVOKE_CLOSE, pos):
        raise Fail(f"expected {NS}<KEY> or {_INVOKE_CLOSE} at offset {pos}")
    return name, args, pos + len(_INVOKE_CLOSE)


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    if not text.startswith(OPEN, lo):
        raise Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    pos, count = skip_ws(text, lo + len(OPEN)), ParamCount()
    while text.startswith(_INVOKE, pos):
        if len(calls) == MAX_CALLS:
            raise Fail(TOO_MANY_CALLS_ERROR)
        name, args, end = _invoke(text, pos, hi, count)
        calls.append(ToolCall(name, args, "minimax_m3", (pos, end), text[pos:end]))
        pos = skip_ws(text, end)
    if not calls:
        raise Fail(f'expected {NS}<invoke name="..."> at offset {pos}')
    if not text.startswith(CLOSE, pos):
        raise Fail(f'expected {NS}<invoke name="..."> or {CLOSE} at offset {pos}')
    pos += len(CLOSE)
    if pos != hi:
        raise Fail(f"text after {CLOSE} at offset {pos}")
    return calls, [(lo, hi)]


def lenient(scan: Scan) -> Iterator[ToolCall]:
    count = ParamCount()
    return block_calls(
        scan,
        _INVOKE,
        lambda text, s, budget: _invoke(text, s, len(text), count, budget),
        "minimax_m3",
        lambda: count.n > MAX_PARAMETERS,
    )


_NS = re.escape(NS)

PROTOCOL = ToolCallProtocol(
    name="minimax_m3",
    strict=strict,
    lenient=lenient,
    opening=_NS + r"<tool_call>",
    # each tag with or without the separator token before it (a leak scan finds the tag alone)
    closing=(f"(?:{_NS})?</tool_call>", f"(?:{_NS})?</invoke>"),
    # the separator token itself is markup wherever it stands
    inner=(f"(?:{_NS})?<tool_call>", f"(?:{_NS})?" + r"""<invoke name="[^"<>\n]{1,256}">""", _NS),
    template_markers=(NS,),
    lenient_needs=(_INVOKE,),
    tokens=(NS,),
)
