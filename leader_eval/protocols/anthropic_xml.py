"""``anthropic_xml``: ``<tool_use><name>N</name><arguments>{...}</arguments></tool_use>`` blocks
and ``<function_calls><invoke name="N"><parameter name="a">v</parameter></invoke></function_calls>``,
one or more, only whitespace between them. Only where a suite declares it."""

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
    call_from_object,
    decode_for,
    find_all,
    object_arguments,
    skip_ws,
)
from leader_eval.protocols._values import TextValue
from leader_eval.types import ToolCall

_TU_OPEN, _TU_CLOSE = "<tool_use>", "</tool_use>"
_FC_OPEN, _FC_CLOSE = "<function_calls>", "</function_calls>"
_INVOKE_OPEN = re.compile(r"""<invoke\s+name\s*=\s*(?:"([^"<>]*)"|'([^'<>]*)')\s*>""")
_INVOKE_CLOSE = "</invoke>"
_PARAM_OPEN = re.compile(r"""<parameter\s+name\s*=\s*(?:"([^"<>]*)"|'([^'<>]*)')\s*>""")
_PARAM_CLOSE = "</parameter>"


def _xml_value(raw: str) -> Any:
    """A <parameter> body is text: ``parse_output`` types it by the tool's schema."""
    return TextValue(raw)


def _tool_use_block(
    text: str, pos: int, hi: int, strict: bool, budget: Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """Parse ``<tool_use><name>N</name><arguments>{...}</arguments></tool_use>`` at ``pos``.
    A lenient scan passes a budget; strict parsing moves forward only, so it needs none."""
    start = pos
    pos = skip_ws(text, pos + len(_TU_OPEN))
    if not strict and pos < hi and text[pos] == "{":
        obj, end = decode_for(text, pos, budget)
        name, args = call_from_object(obj, name_keys=("name",), args_keys=("arguments", "input"), strict=False)
        close = skip_ws(text, end)
        return name, args, close + len(_TU_CLOSE) if text.startswith(_TU_CLOSE, close) else end
    if not text.startswith("<name>", pos):
        raise Fail(f"expected <name> at offset {pos}")
    # A tool name is short: a bounded search keeps a lenient scan of many <tool_use> linear.
    end_name = text.find("</name>", pos, hi if budget is None else min(hi, pos + 512))
    if end_name == -1:
        raise Fail(f"<name> at offset {pos} is not closed")
    name = text[pos + len("<name>") : end_name].strip()
    if not name or "<" in name:
        raise Fail(f"bad tool name in <tool_use> at offset {start}")
    pos = skip_ws(text, end_name + len("</name>"))
    tags = ("arguments",) if strict else ("arguments", "input")
    tag = next((t for t in tags if text.startswith(f"<{t}>", pos)), None)
    if tag is None:
        if strict:
            raise Fail(f"expected <arguments> at offset {pos}")
        return name, {}, pos
    pos = skip_ws(text, pos + len(tag) + 2)
    obj, end = decode_for(text, pos, budget)
    args = object_arguments(obj, strict)
    pos = skip_ws(text, end)
    if not text.startswith(f"</{tag}>", pos):
        raise Fail(f"expected </{tag}> at offset {pos}")
    pos = skip_ws(text, pos + len(tag) + 3)
    if not text.startswith(_TU_CLOSE, pos):
        raise Fail(f"expected {_TU_CLOSE} at offset {pos}")
    return name, args, pos + len(_TU_CLOSE)


def _invoke_block(
    text: str, pos: int, hi: int, strict: bool, budget: Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """Parse ``<invoke name="N"><parameter name="a">v</parameter>...</invoke>`` at ``pos``."""
    m = _INVOKE_OPEN.match(text, pos)
    if not m:
        raise Fail(f'expected <invoke name="..."> at offset {pos}')
    name = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
    if not name:
        raise Fail(f"empty tool name in <invoke> at offset {pos}")
    pos = skip_ws(text, m.end())
    args: dict[str, Any] = {}
    while True:
        p = _PARAM_OPEN.match(text, pos)
        if not p:
            break
        key = p.group(1) if p.group(1) is not None else p.group(2)
        end = text.find(_PARAM_CLOSE, p.end(), hi)
        if budget is not None and not budget.spend((hi if end == -1 else end) - p.end()):
            raise Fail("lenient scan budget spent")
        if end == -1:
            raise Fail(f"<parameter> at offset {pos} is not closed")
        if strict and key in args:
            raise Fail(f"parameter {key!r} given twice")
        args[key] = _xml_value(text[p.end() : end])
        pos = skip_ws(text, end + len(_PARAM_CLOSE))
    if not text.startswith(_INVOKE_CLOSE, pos):
        raise Fail(f"expected <parameter name=...> or {_INVOKE_CLOSE} at offset {pos}")
    return name, args, pos + len(_INVOKE_CLOSE)


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    if not (text.startswith(_TU_OPEN, lo) or text.startswith(_FC_OPEN, lo)):
        raise Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos = lo
    while pos < hi:
        if len(calls) >= MAX_CALLS:
            raise Fail(TOO_MANY_CALLS_ERROR)
        if text.startswith(_TU_OPEN, pos):
            name, args, end = _tool_use_block(text, pos, hi, strict=True)
            calls.append(ToolCall(name, args, "anthropic_xml", (pos, end), text[pos:end]))
            spans.append((pos, end))
            pos = skip_ws(text, end)
        elif text.startswith(_FC_OPEN, pos):
            block_start = pos
            pos = skip_ws(text, pos + len(_FC_OPEN))
            n_before = len(calls)
            while _INVOKE_OPEN.match(text, pos):
                if len(calls) >= MAX_CALLS:
                    raise Fail(TOO_MANY_CALLS_ERROR)
                name, args, end = _invoke_block(text, pos, hi, strict=True)
                calls.append(ToolCall(name, args, "anthropic_xml", (pos, end), text[pos:end]))
                pos = skip_ws(text, end)
            if len(calls) == n_before:
                raise Fail(f'expected <invoke name="..."> at offset {pos}')
            if not text.startswith(_FC_CLOSE, pos):
                raise Fail(f"expected {_FC_CLOSE} at offset {pos}")
            pos += len(_FC_CLOSE)
            spans.append((block_start, pos))
            pos = skip_ws(text, pos)
        else:
            raise Fail(f"expected {_TU_OPEN} or {_FC_OPEN} at offset {pos}")
    return calls, spans


def lenient(scan: Scan) -> Iterator[ToolCall]:
    text, hi, budget = scan.text, len(scan.text), scan.budget()
    for tag, block in ((_TU_OPEN, _tool_use_block), ("<invoke", _invoke_block)):
        if tag not in text:
            continue
        for s in find_all(text, tag, scan.start):
            if budget.spent:
                break
            try:
                name, args, e = block(text, s, hi, strict=False, budget=budget)
            except Fail:
                budget.fail()
                continue
            yield ToolCall(name, args, "anthropic_xml", (s, e), text[s:e])


PROTOCOL = ToolCallProtocol(
    name="anthropic_xml",
    strict=strict,
    lenient=lenient,
    opening=r"<(?:tool_use|function_calls|invoke)\b",
    closing=(r"</(?:tool_use|function_calls|invoke|parameter|name|arguments|input)>",),
    inner=(
        r"<(?:tool_use|function_calls|name|arguments|input)>",
        r"<invoke\s+name\s*=[^<>\n]*>?",
        r"<parameter\s+name\s*=[^<>\n]*>",
    ),
    template_markers=("<function_calls>", "<tool_use>"),
    lenient_needs=(_TU_OPEN, "<invoke"),
)
