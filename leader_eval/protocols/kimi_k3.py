"""``kimi_k3``: Kimi K3's tagged message channels, the calls in a ``tools`` block after the
(empty) ``response`` channel::

    <|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>
    <|open|>call tool="NAME" index="1"<|sep|>
    <|open|>argument key="message" type="string"<|sep|>Gather wood<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>

(one line: the lines are cut here for reading; whitespace between the pieces is allowed)

The generation prompt opens the ``think`` channel (a model declares
``("<|open|>think<|sep|>", "<|close|>think<|sep|>")`` as its reasoning tags), or, without
thinking, the ``response`` channel: so the ``response`` opening is optional, its closing is not.
Text in the ``response`` channel is the visible reply: beside calls it is text around them, as
prose before a Hermes call is. The closing ``<|close|>message<|sep|>`` before the end of turn is
optional.

Each argument's ``type`` attribute (string, number, boolean, null, object, array) says how to
read its text: a string as it is, anything else as JSON of that type. A call may instead carry
one JSON object: ``<|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>``. Attribute
values escape ``&`` and ``"`` (``&amp;``, ``&quot;``); argument text is not escaped, so a string
cannot hold ``<|close|>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._values import TextValue
from leader_eval.types import ToolCall, json_type

OPEN, SEP, CLOSE = "<|open|>", "<|sep|>", "<|close|>"
RESPONSE_OPEN, RESPONSE_CLOSE = f"{OPEN}response{SEP}", f"{CLOSE}response{SEP}"
TOOLS_OPEN, TOOLS_CLOSE = f"{OPEN}tools{SEP}", f"{CLOSE}tools{SEP}"
CALL_CLOSE, ARG_CLOSE, JSON_CLOSE = f"{CLOSE}call{SEP}", f"{CLOSE}argument{SEP}", f"{CLOSE}json{SEP}"
MESSAGE_CLOSE = f"{CLOSE}message{SEP}"
_JSON_OPEN = f'{OPEN}json type="object"{SEP}'
_CALL_HEAD = re.compile(r'<\|open\|>call tool="([^"]{1,256})" index="(\d{1,9})"<\|sep\|>')
_CALL_HEAD_LENIENT = re.compile(r'<\|open\|>call tool="([^"]{1,256})"[^<>|]{0,64}<\|sep\|>')
_TYPES = "string|number|boolean|null|object|array"
_ARG_HEAD = re.compile(rf'<\|open\|>argument key="([^"]{{1,256}})" type="({_TYPES})"<\|sep\|>')
_ARG_HEAD_LENIENT = re.compile(r'<\|open\|>argument key="([^"]{1,256})"(?: type="([a-z]{1,16})")?<\|sep\|>')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _attr(raw: str) -> str:
    """An attribute value unescaped (the template escapes ``&`` first, then ``"``)."""
    return raw.replace("&quot;", '"').replace("&amp;", "&")


def _typed(raw: str, kind: str | None, at: int, strict: bool) -> Any:
    """An argument's text read as its declared ``type``."""
    if kind == "string":
        return raw
    text = raw.strip()
    if kind is not None and (kind != "number" or _NUMBER.fullmatch(text)):
        try:
            value = _scan.STRICT_DECODER.decode(text)
        except (ValueError, RecursionError, MemoryError):
            pass
        else:
            if json_type(value) in _accepts(kind):
                return value
    if strict:
        raise _scan.Fail(f'argument at offset {at} is not a JSON {kind} as its type="{kind}" says')
    return TextValue(raw)


def _accepts(kind: str) -> tuple[str, ...]:
    return ("integer", "number") if kind == "number" else (kind,)


def _call(
    text: str, pos: int, hi: int, *, strict: bool, budget: _scan.Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """One ``<|open|>call ...<|sep|>`` at ``pos``: (name, arguments, end)."""
    m = (_CALL_HEAD if strict else _CALL_HEAD_LENIENT).match(text, pos)
    if not m:
        raise _scan.Fail(f'expected {OPEN}call tool="..." index="N"{SEP} at offset {pos}')
    name = _attr(m.group(1))
    at = _scan.skip_ws(text, m.end())
    args: dict[str, Any] = {}
    if text.startswith(_JSON_OPEN, at):
        start = _scan.skip_ws(text, at + len(_JSON_OPEN))
        obj, end = _scan.decode_for(text, start, budget)
        args = _scan.object_arguments(obj, strict)
        at = _scan.skip_ws(text, end)
        if not text.startswith(JSON_CLOSE, at):
            raise _scan.Fail(f"expected {JSON_CLOSE} at offset {at}")
        at = _scan.skip_ws(text, at + len(JSON_CLOSE))
    else:
        head = _ARG_HEAD if strict else _ARG_HEAD_LENIENT
        while a := head.match(text, at):
            end = text.find(ARG_CLOSE, a.end(), hi)
            if budget is not None and not budget.spend((hi if end == -1 else end) - a.end()):
                raise _scan.Fail("lenient scan budget spent")
            if end == -1:
                raise _scan.Fail(f"argument at offset {at} is not closed")
            key = _attr(a.group(1))
            if strict and key in args:
                raise _scan.Fail(f"argument {key!r} given twice")
            args[key] = _typed(text[a.end() : end], a.group(2), at, strict)
            at = _scan.skip_ws(text, end + len(ARG_CLOSE))
    if text.startswith(CALL_CLOSE, at):
        return name, args, at + len(CALL_CLOSE)
    if strict or not args:
        raise _scan.Fail(f"expected {OPEN}argument ...{SEP} or {CALL_CLOSE} at offset {at}")
    return name, args, at


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    tools = text.find(TOOLS_OPEN, lo, hi)
    if tools == -1:
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    pos = lo + len(RESPONSE_OPEN) if text.startswith(RESPONSE_OPEN, lo) else lo
    close = text.find(RESPONSE_CLOSE, pos, tools)
    if close == -1:
        raise _scan.Fail(f"expected {RESPONSE_CLOSE} before the tools block at offset {tools}")
    if text[pos:close].strip() or _scan.skip_ws(text, close + len(RESPONSE_CLOSE)) != tools:
        raise _scan.Fail(_scan.NOT_ALONE_ERROR)
    calls: list[ToolCall] = []
    pos = _scan.skip_ws(text, tools + len(TOOLS_OPEN))
    while text.startswith(f"{OPEN}call", pos):
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        name, args, end = _call(text, pos, hi, strict=True)
        calls.append(ToolCall(name, args, "kimi_k3", (pos, end), text[pos:end]))
        pos = _scan.skip_ws(text, end)
    if not calls:
        raise _scan.Fail(f'expected {OPEN}call tool="..." at offset {pos}')
    if not text.startswith(TOOLS_CLOSE, pos):
        raise _scan.Fail(f"expected {OPEN}call or {TOOLS_CLOSE} at offset {pos}")
    pos = _scan.skip_ws(text, pos + len(TOOLS_CLOSE))
    if text.startswith(MESSAGE_CLOSE, pos):
        pos += len(MESSAGE_CLOSE)
    if pos != hi:
        raise _scan.Fail(f"text after {TOOLS_CLOSE} at offset {pos}")
    return calls, [(lo, hi)]  # the channel tokens around the calls are markup too


def frame(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """The ``response`` channel's tokens and the closing ``<|close|>message<|sep|>`` around a
    reply: what the room sees of ``<|open|>response<|sep|>Hi<|close|>response<|sep|>`` is ``Hi``.
    Nothing when the reply does not close the response channel (not this format's frame)."""
    start = lo + len(RESPONSE_OPEN) if text.startswith(RESPONSE_OPEN, lo) else lo
    close = text.find(RESPONSE_CLOSE, start, hi)
    if close == -1:
        return []
    spans = [(lo, start)] if start > lo else []
    spans.append((close, close + len(RESPONSE_CLOSE)))
    end = hi
    while end > close + len(RESPONSE_CLOSE) and text[end - 1].isspace():
        end -= 1
    if end - len(MESSAGE_CLOSE) >= close + len(RESPONSE_CLOSE) and text.startswith(
        MESSAGE_CLOSE, end - len(MESSAGE_CLOSE)
    ):
        spans.append((end - len(MESSAGE_CLOSE), end))
    return spans


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    return _scan.block_calls(
        scan, f"{OPEN}call", lambda text, s, budget: _call(text, s, len(text), strict=False, budget=budget), "kimi_k3"
    )


PROTOCOL = ToolCallProtocol(
    name="kimi_k3",
    strict=strict,
    lenient=lenient,
    opening=r'<\|open\|>(?:tools<\|sep\|>|call tool=")',
    closing=(r"<\|close\|>(?:tools|call|argument|json)<\|sep\|>",),
    inner=(
        r'<\|open\|>call tool="[^"\n]{0,256}"[^<>|\n]{0,64}<\|sep\|>',
        r'<\|open\|>argument key="[^"\n]{0,256}"[^<>|\n]{0,64}<\|sep\|>',
        r'<\|open\|>json type="object"<\|sep\|>',
    ),
    template_markers=("'<|open|>'", "<|open|>call"),
    renderers=("kimi_k3",),
    lenient_needs=(f"{OPEN}call",),
    frame=frame,
    tokens=("<|open|>", "<|sep|>", "<|close|>"),
)
