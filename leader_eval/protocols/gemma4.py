"""``gemma4``: Gemma 4's tool calls, written in its own literal syntax (not JSON)::

    <|tool_call>call:NAME{key:<|"|>text<|"|>,n:42,ok:true,none:None,obj:{k:1},xs:[1,2]}<tool_call|>

Keys are bare; a string runs between two ``<|"|>`` tokens with no escaping (so it cannot hold
``<|"|>`` itself); numbers, ``true``/``false`` and ``None`` (what the template writes for null)
are bare; objects and arrays nest. Calls follow one another; the model stops at
``<|tool_response>`` (the tool's turn), which may end the output. The format carries types: a
string stays a string, ``42`` is an integer (no ``TextValue``).

FunctionGemma (``protocols/functiongemma.py``) writes the same syntax with other delimiters;
``Syntax`` names a set of them and ``parsers`` reads any set.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._base import LenientExtractor, StrictOut, StrictParser, ToolCallProtocol
from leader_eval.types import ToolCall


@dataclass(frozen=True)
class Syntax:
    """The delimiters a format writes the syntax with: what opens and closes a call, what quotes
    a string, and the token that hands the turn to the tool (the model's stop)."""

    name: str
    open: str
    close: str
    quote: str
    response: str


GEMMA4 = Syntax("gemma4", "<|tool_call>", "<tool_call|>", '<|"|>', "<|tool_response>")
OPEN, CLOSE, QUOTE, TOOL_RESPONSE = GEMMA4.open, GEMMA4.close, GEMMA4.quote, GEMMA4.response
_CALL = "call:"
_NAME = re.compile(r"[\w.\-]+")
# a bare key (words separated by runs of blanks: the template writes a key as it is), then ':';
# each regex does one piece of the grammar in one call (values are read in Python)
_FIELD = re.compile(r"\s*([^\s:,{}\[\]<>|\"]+(?:[ \t]+[^\s:,{}\[\]<>|\"]+)*)\s*:\s*")
_SCALAR = re.compile(r"(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)(?![\w.])|[A-Za-z_]\w*")
_SEPARATOR = re.compile(r"\s*([,}\]])")
_STRICT_WORDS: dict[str, Any] = {"true": True, "false": False, "None": None}
_LENIENT_WORDS: dict[str, Any] = {**_STRICT_WORDS, "True": True, "False": False, "null": None}
_MAX_DEPTH = 100
# Values are read in Python (microseconds each): a cap keeps a megabyte of tiny values within
# the scoring time budget, as MAX_CALLS does for calls. No tool call carries this many; a lenient
# scan (a diagnostic that runs on every failed output, whatever the protocol) reads fewer.
MAX_VALUES = 4096
_LENIENT_MAX_VALUES = 1024
TOO_MANY_VALUES_ERROR = f"more than {MAX_VALUES} values in one output"


class _Reader:
    """Reads values of the syntax from ``text[:hi]``; ``far`` is how far it looked (what a
    lenient attempt is charged); ``left`` the values the output may still hold."""

    __slots__ = ("far", "hi", "left", "quote", "strict", "text")

    def __init__(self, text: str, hi: int, strict: bool, quote: str) -> None:
        self.text, self.hi, self.strict, self.far, self.quote = text, hi, strict, 0, quote
        self.left = MAX_VALUES if strict else _LENIENT_MAX_VALUES

    def _next(self, pos: int, closer: str) -> tuple[bool, int]:
        """After a value: (another follows, where it starts) or (the container closed, its end)."""
        m = _SEPARATOR.match(self.text, pos, self.hi)
        self.far = max(self.far, pos)
        if m is None or m.group(1) not in (",", closer):
            raise _scan.Fail(f"expected ',' or '{closer}' at offset {_scan.skip_ws(self.text, pos)}")
        return m.group(1) == ",", m.end()

    def fields(self, pos: int, depth: int) -> tuple[dict[str, Any], int]:
        """``key:value,...}`` from just after ``{``: the object and where it ends."""
        text, hi, out = self.text, self.hi, dict[str, Any]()
        m = _SEPARATOR.match(text, pos, hi)
        if m is not None and m.group(1) == "}":
            return out, m.end()
        while True:
            m = _FIELD.match(text, pos, hi)
            if m is None:
                raise _scan.Fail(f"expected a key and ':' at offset {_scan.skip_ws(text, pos)}")
            key = m.group(1)
            if key in out and self.strict:
                raise _scan.Fail(f"key {key!r} given twice")
            out[key], pos = self.value(m.end(), depth)
            more, pos = self._next(pos, "}")
            if not more:
                return out, pos

    def items(self, pos: int, depth: int) -> tuple[list[Any], int]:
        """``value,...]`` from just after ``[``."""
        text, hi, out = self.text, self.hi, list[Any]()
        m = _SEPARATOR.match(text, pos, hi)
        if m is not None and m.group(1) == "]":
            return out, m.end()
        while True:
            value, pos = self.value(_scan.skip_ws(text, pos), depth)
            out.append(value)
            more, pos = self._next(pos, "]")
            if not more:
                return out, pos

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        text, hi = self.text, self.hi
        self.left -= 1
        if self.left < 0:
            raise _scan.Fail(TOO_MANY_VALUES_ERROR)
        if pos >= hi:
            raise _scan.Fail(f"expected a value at offset {pos}")
        quote = self.quote
        if text.startswith(quote, pos):
            start = pos + len(quote)
            end = text.find(quote, start, hi)
            if end == -1:
                self.far = hi
                raise _scan.Fail(f"string opened at offset {pos} is not closed with {quote}")
            return text[start:end], end + len(quote)
        c = text[pos]
        if c == "{" or c == "[":
            if depth >= _MAX_DEPTH:
                raise _scan.Fail(f"value nested too deeply at offset {pos}")
            return self.fields(pos + 1, depth + 1) if c == "{" else self.items(pos + 1, depth + 1)
        m = _SCALAR.match(text, pos, hi)
        if m is None:
            raise _scan.Fail(f"expected a value at offset {pos}")
        number = m.group(1)
        if number is not None:
            try:
                return (float(number) if "." in number or "e" in number or "E" in number else int(number)), m.end()
            except ValueError:  # an integer past Python's digit limit
                raise _scan.Fail(f"number at offset {pos} is too long") from None
        words = _STRICT_WORDS if self.strict else _LENIENT_WORDS
        word = m.group()
        if word in words:
            return words[word], m.end()
        raise _scan.Fail(
            f"bare word {word[:40]!r} at offset {pos}: a value is {self.quote}text{self.quote}, a number, "
            "true, false, None, {...} or [...]"
        )


def _call(reader: _Reader, pos: int, opening: str) -> tuple[str, dict[str, Any], int]:
    """``OPEN call:NAME{...}`` at ``pos`` (the closing token is the caller's)."""
    text = reader.text
    at = pos + len(opening) if reader.strict else _scan.skip_ws(text, pos + len(opening))
    if text.startswith(_CALL, at):
        at += len(_CALL)
    elif reader.strict:
        raise _scan.Fail(f"expected 'call:' after {opening} at offset {at}")
    m = _NAME.match(text, at, reader.hi)
    if m is None:
        raise _scan.Fail(f"expected a tool name at offset {at}")
    if not text.startswith("{", m.end()) or m.end() >= reader.hi:
        raise _scan.Fail(f"expected '{{' after the tool name at offset {m.end()}")
    args, end = reader.fields(m.end() + 1, 0)
    return m.group(), args, end


def parsers(syntax: Syntax) -> tuple[StrictParser, LenientExtractor]:
    """The strict parser and the lenient extractor of the syntax written with ``syntax``."""
    opening, closing, response, name = syntax.open, syntax.close, syntax.response, syntax.name

    def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
        if not text.startswith(opening, lo):
            raise _scan.Fail(_scan.NO_CALL_ERROR)
        reader = _Reader(text, hi, True, syntax.quote)
        calls: list[ToolCall] = []
        pos = lo
        while pos < hi:
            if text.startswith(response, pos):
                if pos + len(response) != hi:
                    raise _scan.Fail(f"text after {response} at offset {pos + len(response)}")
                break
            if len(calls) == _scan.MAX_CALLS:
                raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
            if not text.startswith(opening, pos):
                raise _scan.Fail(f"expected {opening} or {response} at offset {pos}")
            call_name, args, end = _call(reader, pos, opening)
            if not text.startswith(closing, end):
                raise _scan.Fail(f"expected {closing} at offset {end}")
            end += len(closing)
            calls.append(ToolCall(call_name, args, name, (pos, end), text[pos:end]))
            pos = _scan.skip_ws(text, end)
        return calls, [(lo, hi)]

    def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
        text, budget = scan.text, scan.budget()
        reader = _Reader(text, len(text), False, syntax.quote)  # one value cap for the whole scan
        for s in _scan.find_all(text, opening, scan.start):
            if budget.spent or reader.left <= 0:
                return
            reader.far = s
            try:
                call_name, args, end = _call(reader, s, opening)
            except (_scan.Fail, RecursionError):
                budget.spend(reader.far - s)
                budget.fail()
                continue
            if not budget.spend(end - s):
                return
            e = end + len(closing) if text.startswith(closing, end) else end
            yield ToolCall(call_name, args, name, (s, e), text[s:e])

    return strict, lenient


def protocol(syntax: Syntax, template_markers: tuple[str, ...]) -> ToolCallProtocol:
    """The protocol of the syntax written with ``syntax``, selected by ``template_markers``."""
    strict, lenient = parsers(syntax)
    return ToolCallProtocol(
        name=syntax.name,
        strict=strict,
        lenient=lenient,
        opening=re.escape(syntax.open),
        closing=(re.escape(syntax.close), re.escape(syntax.response)),
        inner=(re.escape(syntax.quote),),
        template_markers=template_markers,
        lenient_needs=(syntax.open,),
        tokens=(syntax.quote, syntax.response),
    )


PROTOCOL = protocol(GEMMA4, (OPEN + _CALL,))
