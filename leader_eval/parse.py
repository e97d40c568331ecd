"""Tool-call parsers: one small parser per protocol, each with a strict and a lenient mode.

Strict mode is the headline: the whole output must be exactly the protocol (surrounding
whitespace, trailing end-of-turn tokens and a declared reasoning block aside). Lenient mode
extracts calls anywhere in the text; it is a diagnostic that explains what a model did, never a
score. docs/protocols.md says what each protocol accepts.

Every parser must survive any input: no exception escapes ``parse_output``, and the work done is
linear in the input (JSON decoding goes through the C scanner at given offsets, lenient scanning
runs under a budget of characters, and Python's parser is only handed bracketed candidates).
"""

from __future__ import annotations

import ast
import bisect
import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from leader_eval.types import ToolCall

PROTOCOLS: tuple[str, ...] = ("json", "hermes", "kimi_k2", "llama3_json", "pythonic", "anthropic_xml", "openai")

# The strict error when the output holds no tool-call markup at all (a plain-text reply).
NO_CALL_ERROR = "no tool call"
# The strict error when calls were found but other text surrounds them.
NOT_ALONE_ERROR = "tool call(s) not alone in the output: other text around the protocol markup"
# No chat template or API emits more calls in one turn. An output with more fails the strict
# parse, and a lenient scan stops there: scoring each call costs tens of microseconds, so a
# 1 MB array of 30,000 tiny calls would otherwise take seconds (bench/bench_scoring.py).
MAX_CALLS = 256
TOO_MANY_CALLS_ERROR = f"more than {MAX_CALLS} tool calls in one output"

# Where a strict parser decoded a JSON value (its start -> the value and its end): the lenient
# scans that follow reuse these instead of decoding the same text again.
_Memo = dict[int, tuple[Any, int]]


@dataclass(frozen=True)
class ParseResult:
    protocol: str
    strict_ok: bool
    calls: tuple[ToolCall, ...]
    lenient_calls: tuple[ToolCall, ...]
    error: str | None
    consumed: tuple[tuple[int, int], ...]
    visible_text: str
    reasoning: str | None
    other_protocols: tuple[str, ...]


class _Fail(Exception):
    """A strict parse failed; the message is the one-line reason."""


# --------------------------------------------------------------------------- JSON helpers


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's decoder accepts them unless told otherwise.
    raise ValueError(f"non-standard JSON constant {name}")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_WS = re.compile(r"\s*")


def _skip_ws(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


def _decode(text: str, pos: int, memo: _Memo | None = None) -> tuple[Any, int]:
    """Decode one JSON value starting exactly at ``pos``; raise ``_Fail`` with a one-line reason."""
    try:
        got: tuple[Any, int] = _DECODER.raw_decode(text, pos)
        if memo is not None:
            memo[pos] = got
        return got
    except json.JSONDecodeError as exc:
        raise _Fail(f"invalid JSON at offset {exc.pos}: {exc.msg}") from None
    except RecursionError:
        raise _Fail(f"JSON nested too deeply at offset {pos}") from None
    except (ValueError, MemoryError) as exc:  # e.g. an integer over Python's digit limit
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _Fail(f"invalid JSON at offset {pos}: {why}") from None


class _Budget:
    """What a lenient scan may spend: characters handed to decoders, and failed attempts
    (each costs Python-level work however short). Keeps adversarial inputs linear and cheap."""

    __slots__ = ("fails_left", "left")

    def __init__(self, n: int) -> None:
        self.left = n
        self.fails_left = _LENIENT_MAX_FAILURES

    def spend(self, n: int) -> bool:
        self.left -= max(n, 1)
        return self.left > 0

    def fail(self) -> bool:
        self.fails_left -= 1
        return self.fails_left > 0 and self.left > 0

    @property
    def spent(self) -> bool:
        return self.left <= 0 or self.fails_left <= 0


_FIRST_WINDOW = 512


def _try_decode(text: str, pos: int, budget: _Budget, charges: list[int] | None = None) -> tuple[Any, int] | None:
    """Decode one JSON value at ``pos`` for a lenient scan, or None.

    A failed decode costs O(pos) on top of the scan, because JSONDecodeError counts the lines
    before the error. Decoding a growing window instead of the whole text keeps each attempt's
    cost proportional to the value it reads: the window grows only while the failure could be
    the window's own cut (an error near its end, or an unterminated string). ``charges``
    receives what each attempt spent, and a final -1 when the budget ran out first.
    """
    n = len(text)
    width = _FIRST_WINDOW
    while True:
        stop = min(n, pos + width)
        chunk = text if (pos == 0 and stop == n) else text[pos:stop]
        if charges is not None:
            charges.append(len(chunk))
        if not budget.spend(len(chunk)):
            if charges is not None:
                charges.append(-1)
            return None
        try:
            value, end = _DECODER.raw_decode(chunk)
        except json.JSONDecodeError as exc:
            cut = stop < n and (exc.pos >= len(chunk) - 16 or exc.msg.startswith("Unterminated string"))
            if not cut:
                return None
            width *= 4
            continue
        except (RecursionError, ValueError, MemoryError):
            return None
        return value, pos + end


def _window_charges(n: int, pos: int, end: int) -> tuple[int, ...]:
    """What ``_try_decode`` spends on a value known to span [pos, end) of an n-char text: each
    window that cuts the value fails as a cut (the decoder stops at the window's end, or inside
    an unterminated string) and the window grows, until one holds the whole value."""
    charges, width = [], _FIRST_WINDOW
    while True:
        stop = min(n, pos + width)
        charges.append(stop - pos)
        if stop >= end:
            return tuple(charges)
        width *= 4


def _json_object_arguments(value: Any, strict: bool) -> dict[str, Any]:
    """Arguments must be a JSON object. A JSON *string* holding an object is a strict failure
    (the double-encoding slip) that the lenient reading forgives."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        if strict:
            raise _Fail("arguments is a JSON-encoded string, not an object")
        try:
            inner = _DECODER.decode(value)
        except (ValueError, RecursionError, MemoryError):
            inner = None
        if isinstance(inner, dict):
            return inner
    raise _Fail(f"arguments must be a JSON object, got {_json_type(value)}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _call_from_object(
    obj: Any,
    *,
    name_keys: tuple[str, ...],
    args_keys: tuple[str, ...],
    strict: bool,
    optional: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Read ``{name: ..., arguments: {...}}``-shaped objects. ``optional`` lists keys allowed
    with a fixed value (llama3's ``"type": "function"``)."""
    if not isinstance(obj, dict):
        raise _Fail(f"a tool call must be a JSON object, got {_json_type(obj)}")
    names = [k for k in name_keys if k in obj]
    args = [k for k in args_keys if k in obj]
    if strict:
        for key in obj:
            if key in name_keys or key in args_keys:
                continue
            if optional and key in optional and obj[key] == optional[key]:
                continue
            raise _Fail(f"unexpected key {key!r} in tool call object")
        if len(names) > 1:
            raise _Fail(f"both {names[0]!r} and {names[1]!r} given")
        if len(args) > 1:
            raise _Fail(f"both {args[0]!r} and {args[1]!r} given")
    if not names:
        raise _Fail(f"tool call object has no {' or '.join(repr(k) for k in name_keys)} key")
    name = obj[names[0]]
    if not isinstance(name, str) or not name.strip():
        raise _Fail("tool name must be a non-empty string")
    if not args:
        if strict:
            raise _Fail(f"tool call object has no {' or '.join(repr(k) for k in args_keys)} key")
        return name, {}
    return name, _json_object_arguments(obj[args[0]], strict)


# --------------------------------------------------------------------------- strict parsers
#
# Each takes (text, lo, hi): the body of the output in raw-text coordinates, already free of
# surrounding whitespace, trailing end-of-turn tokens and a declared reasoning block. Each returns
# the calls and the consumed spans, or raises _Fail.

_StrictOut = tuple[list[ToolCall], list[tuple[int, int]]]

_JSON_NAME = ("tool", "name")
_JSON_ARGS = ("arguments", "parameters")


def _strict_json(text: str, lo: int, hi: int, memo: _Memo | None = None) -> _StrictOut:
    if text[lo] not in "{[":
        raise _Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    if text[lo] == "{":
        obj, end = _decode(text, lo, memo)
        if end != hi:
            raise _Fail(f"text after the JSON object at offset {end}")
        name, args = _call_from_object(obj, name_keys=_JSON_NAME, args_keys=_JSON_ARGS, strict=True)
        calls.append(ToolCall(name, args, "json", (lo, end), text[lo:end]))
        return calls, [(lo, end)]
    # An array of call objects: decode element by element so each call keeps its own span.
    pos = _skip_ws(text, lo + 1)
    if pos < hi and text[pos] == "]":
        raise _Fail("empty array of tool calls")
    while True:
        if len(calls) == MAX_CALLS:
            raise _Fail(TOO_MANY_CALLS_ERROR)
        obj, end = _decode(text, pos, memo)
        name, args = _call_from_object(obj, name_keys=_JSON_NAME, args_keys=_JSON_ARGS, strict=True)
        calls.append(ToolCall(name, args, "json", (pos, end), text[pos:end]))
        pos = _skip_ws(text, end)
        if pos < hi and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
            continue
        if pos < hi and text[pos] == "]":
            break
        raise _Fail(f"expected ',' or ']' in the array of tool calls at offset {pos}")
    if pos + 1 != hi:
        raise _Fail(f"text after the JSON array at offset {pos + 1}")
    return calls, [(lo, hi)]


_HERMES_OPEN, _HERMES_CLOSE = "<tool_call>", "</tool_call>"


def _strict_hermes(text: str, lo: int, hi: int, memo: _Memo | None = None) -> _StrictOut:
    if not text.startswith(_HERMES_OPEN, lo):
        raise _Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos = lo
    while pos < hi:
        if len(calls) == MAX_CALLS:
            raise _Fail(TOO_MANY_CALLS_ERROR)
        if not text.startswith(_HERMES_OPEN, pos):
            raise _Fail(f"expected {_HERMES_OPEN} at offset {pos}")
        start = pos
        pos = _skip_ws(text, pos + len(_HERMES_OPEN))
        obj, end = _decode(text, pos, memo)
        name, args = _call_from_object(obj, name_keys=("name",), args_keys=("arguments",), strict=True)
        pos = _skip_ws(text, end)
        if not text.startswith(_HERMES_CLOSE, pos):
            raise _Fail(f"expected {_HERMES_CLOSE} at offset {pos}")
        pos += len(_HERMES_CLOSE)
        calls.append(ToolCall(name, args, "hermes", (start, pos), text[start:pos]))
        spans.append((start, pos))
        pos = _skip_ws(text, pos)
    return calls, spans


_K_SECTION_BEGIN = "<|tool_calls_section_begin|>"
_K_SECTION_BEGIN_ALT = "<|tool_call_section_begin|>"  # singular variant some servers accept
_K_SECTION_END = "<|tool_calls_section_end|>"
_K_SECTION_END_ALT = "<|tool_call_section_end|>"
_K_CALL_BEGIN = "<|tool_call_begin|>"
_K_ARG_BEGIN = "<|tool_call_argument_begin|>"
_K_CALL_END = "<|tool_call_end|>"
# The call id is functions.NAME:INDEX. The name runs to the last ':' before the index; the
# character class excludes ':' so the match is linear.
_K_ID_STRICT = re.compile(r"functions\.([^\s:<>|]+):(\d+)")
_K_ID_LENIENT = re.compile(r"(?:functions\.)?([^\s:<>|]+):(\d+)")


def _strict_kimi(text: str, lo: int, hi: int, memo: _Memo | None = None) -> _StrictOut:
    if not text.startswith(_K_SECTION_BEGIN, lo):
        if text.startswith(_K_SECTION_BEGIN_ALT, lo):
            raise _Fail(f"section opened with {_K_SECTION_BEGIN_ALT}, expected {_K_SECTION_BEGIN}")
        raise _Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos = _skip_ws(text, lo + len(_K_SECTION_BEGIN))
    while text.startswith(_K_CALL_BEGIN, pos):
        if len(calls) == MAX_CALLS:
            raise _Fail(TOO_MANY_CALLS_ERROR)
        start = pos
        pos = _skip_ws(text, pos + len(_K_CALL_BEGIN))
        m = _K_ID_STRICT.match(text, pos)
        if not m:
            raise _Fail(f"expected a call id functions.NAME:INDEX at offset {pos}")
        name = m.group(1)
        pos = _skip_ws(text, m.end())
        if not text.startswith(_K_ARG_BEGIN, pos):
            raise _Fail(f"expected {_K_ARG_BEGIN} at offset {pos}")
        pos = _skip_ws(text, pos + len(_K_ARG_BEGIN))
        obj, end = _decode(text, pos, memo)
        if not isinstance(obj, dict):
            raise _Fail(f"arguments must be a JSON object, got {_json_type(obj)}")
        pos = _skip_ws(text, end)
        if not text.startswith(_K_CALL_END, pos):
            raise _Fail(f"expected {_K_CALL_END} at offset {pos}")
        pos += len(_K_CALL_END)
        calls.append(ToolCall(name, obj, "kimi_k2", (start, pos), text[start:pos]))
        spans.append((start, pos))
        pos = _skip_ws(text, pos)
    if not calls:
        raise _Fail(f"expected {_K_CALL_BEGIN} at offset {pos}")
    if not text.startswith(_K_SECTION_END, pos):
        raise _Fail(f"expected {_K_CALL_BEGIN} or {_K_SECTION_END} at offset {pos}")
    pos += len(_K_SECTION_END)
    if pos != hi:
        raise _Fail(f"text after {_K_SECTION_END} at offset {pos}")
    # The section tokens are markup too: consume the whole section.
    return calls, [(lo, hi)]


_PYTHON_TAG = "<|python_tag|>"


def _strict_llama3(text: str, lo: int, hi: int, memo: _Memo | None = None) -> _StrictOut:
    pos = lo
    if text.startswith(_PYTHON_TAG, pos):
        pos = _skip_ws(text, pos + len(_PYTHON_TAG))
    if pos >= hi or text[pos] != "{":
        raise _Fail(NO_CALL_ERROR if pos == lo else f"expected a JSON object after {_PYTHON_TAG}")
    calls: list[ToolCall] = []
    while True:
        if len(calls) == MAX_CALLS:
            raise _Fail(TOO_MANY_CALLS_ERROR)
        obj, end = _decode(text, pos, memo)
        name, args = _call_from_object(
            obj, name_keys=("name",), args_keys=("parameters", "arguments"), strict=True, optional={"type": "function"}
        )
        calls.append(ToolCall(name, args, "llama3_json", (pos, end), text[pos:end]))
        pos = _skip_ws(text, end)
        if pos >= hi:
            break
        if text[pos] != ";":
            raise _Fail(f"expected ';' between tool calls at offset {pos}")
        pos = _skip_ws(text, pos + 1)
        if pos >= hi:  # a trailing ';' is harmless
            break
    return calls, [(lo, hi)]


def _strict_pythonic(text: str, lo: int, hi: int, memo: _Memo | None = None) -> _StrictOut:
    if text[lo] != "[":
        if _PY_BARE_CALL.match(text, lo):
            raise _Fail("pythonic calls must be written inside a list: [f(a=1)]")
        raise _Fail(NO_CALL_ERROR)
    if not _PY_LIST_START.match(text, lo):
        if _PY_EMPTY_LIST.match(text, lo):
            raise _Fail("empty list of tool calls")
        raise _Fail("expected a list of calls [f(a=...)]")
    if text[hi - 1] != "]":
        raise _Fail("text after the list of calls")
    if _py_past_cap(text, lo, hi):
        raise _Fail(TOO_MANY_CALLS_ERROR)
    tree = _ast_parse(text[lo:hi])
    if not isinstance(tree.body, ast.List):
        raise _Fail("expected one list of calls")
    if not tree.body.elts:
        raise _Fail("empty list of tool calls")
    if len(tree.body.elts) > MAX_CALLS:
        raise _Fail(TOO_MANY_CALLS_ERROR)
    index = _LineIndex(text[lo:hi])
    calls: list[ToolCall] = []
    for node in tree.body.elts:
        name, args = _py_call(node, strict=True)
        s, e = index.span(node)
        calls.append(ToolCall(name, args, "pythonic", (lo + s, lo + e), text[lo + s : lo + e]))
    return calls, [(lo, hi)]


# Brackets, commas and one-line strings: enough to find the commas between list elements.
_PY_COMMA_TOKENS = re.compile(r"""[\[\](){},]|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'""")


def _py_past_cap(text: str, lo: int, hi: int) -> bool:
    """Does the list at ``lo`` hold more than MAX_CALLS elements? Decided without parsing all of
    it (Python's parser takes ~0.3 s per MB of small calls): find the comma after element
    MAX_CALLS + 1 with a rough tokenizer, then parse only the list up to there, closed. If that
    parses as a list of MAX_CALLS + 1 elements, the tokenizer state at the comma was right, a
    comma there ends the element, and the whole list (if it parses at all) is longer still.
    False when unsure: the full parse then decides."""
    depth = commas = 0
    for tok in itertools.islice(_PY_COMMA_TOKENS.finditer(text, lo, hi), 64 * MAX_CALLS):
        c = tok.group()
        if c in "[({":
            depth += 1
        elif c in "])}":
            depth -= 1
            if depth <= 0:
                return False
        elif c == "," and depth == 1:
            commas += 1
            if commas == MAX_CALLS + 1:
                try:
                    tree = ast.parse(text[lo : tok.start()] + "]", mode="eval")
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    return False
                return isinstance(tree.body, ast.List) and len(tree.body.elts) == MAX_CALLS + 1
    return False


def _ast_parse(source: str) -> ast.Expression:
    try:
        return ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise _Fail(f"not a Python expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise _Fail("Python expression nested too deeply") from None
    except ValueError as exc:  # null bytes, on some Python versions
        raise _Fail(f"not a Python expression: {exc}") from None


class _LineIndex:
    """Turns ast positions (line, UTF-8 byte column) into character offsets.

    Calls come in source order, so a cursor makes the conversion linear for non-ASCII sources.
    """

    def __init__(self, source: str) -> None:
        self.ascii = source.isascii()
        self.data = source.encode("utf-8", "surrogatepass") if not self.ascii else b""
        src = source if self.ascii else self.data
        nl = "\n" if self.ascii else b"\n"
        self.starts = [0]
        pos = src.find(nl)  # type: ignore[arg-type]
        while pos != -1:
            self.starts.append(pos + 1)
            pos = src.find(nl, pos + 1)  # type: ignore[arg-type]
        self.cursor = (0, 0)  # (byte offset, char offset)

    def offset(self, line: int, col: int) -> int:
        b = self.starts[line - 1] + col
        if self.ascii:
            return b
        cb, cc = self.cursor
        if b < cb:
            cb, cc = 0, 0
        c = cc + len(self.data[cb:b].decode("utf-8", "ignore"))
        self.cursor = (b, c)
        return c

    def span(self, node: ast.expr) -> tuple[int, int]:
        end_line = node.end_lineno if node.end_lineno is not None else node.lineno
        end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset
        return self.offset(node.lineno, node.col_offset), self.offset(end_line, end_col)


def _dotted_name(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _py_call(node: ast.expr, strict: bool) -> tuple[str, dict[str, Any]]:
    if not isinstance(node, ast.Call):
        raise _Fail("every list element must be a call f(a=...)")
    name = _dotted_name(node.func)
    if name is None:
        raise _Fail("a call must name a function (dotted names allowed)")
    if node.args and strict:
        raise _Fail(f"positional arguments in {name}(...): only keyword arguments are allowed")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise _Fail(f"**kwargs in {name}(...) is not allowed")
        try:
            value = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise _Fail(f"argument {kw.arg!r} of {name}(...) is not a literal") from None
        args[kw.arg] = _jsonable(value, f"{name}({kw.arg}=...)")
    return name, args


def _jsonable(value: Any, where: str, depth: int = 0) -> Any:
    """Python literals to JSON values: tuples become lists; sets, bytes, complex are refused."""
    if depth > 500:
        raise _Fail(f"value in {where} nested too deeply")
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _Fail(f"non-finite number in {where}")
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v, where, depth + 1) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _Fail(f"non-string dict key {k!r} in {where}")
            out[k] = _jsonable(v, where, depth + 1)
        return out
    raise _Fail(f"{type(value).__name__} value in {where} has no JSON equivalent")


_TU_OPEN, _TU_CLOSE = "<tool_use>", "</tool_use>"
_FC_OPEN, _FC_CLOSE = "<function_calls>", "</function_calls>"
_INVOKE_OPEN = re.compile(r"""<invoke\s+name\s*=\s*(?:"([^"<>]*)"|'([^'<>]*)')\s*>""")
_INVOKE_CLOSE = "</invoke>"
_PARAM_OPEN = re.compile(r"""<parameter\s+name\s*=\s*(?:"([^"<>]*)"|'([^'<>]*)')\s*>""")
_PARAM_CLOSE = "</parameter>"
_JSONISH_START = frozenset('{["-0123456789tfn')


def _xml_value(raw: str) -> Any:
    """A <parameter> body: JSON when the whole (stripped) body is a JSON value, else the text."""
    s = raw.strip()
    if s and s[0] in _JSONISH_START:
        try:
            return _DECODER.decode(s)
        except (ValueError, RecursionError, MemoryError):
            pass
    return raw


def _decode_for(text: str, pos: int, budget: _Budget | None) -> tuple[Any, int]:
    if budget is None:
        return _decode(text, pos)
    got = _try_decode(text, pos, budget)
    if got is None:
        raise _Fail(f"invalid JSON at offset {pos}")
    return got


def _tool_use_block(
    text: str, pos: int, hi: int, strict: bool, budget: _Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """Parse ``<tool_use><name>N</name><arguments>{...}</arguments></tool_use>`` at ``pos``.
    A lenient scan passes a budget; strict parsing moves forward only, so it needs none."""
    start = pos
    pos = _skip_ws(text, pos + len(_TU_OPEN))
    if not strict and pos < hi and text[pos] == "{":
        obj, end = _decode_for(text, pos, budget)
        name, args = _call_from_object(obj, name_keys=("name",), args_keys=("arguments", "input"), strict=False)
        close = _skip_ws(text, end)
        return name, args, close + len(_TU_CLOSE) if text.startswith(_TU_CLOSE, close) else end
    if not text.startswith("<name>", pos):
        raise _Fail(f"expected <name> at offset {pos}")
    # A tool name is short: a bounded search keeps a lenient scan of many <tool_use> linear.
    end_name = text.find("</name>", pos, hi if budget is None else min(hi, pos + 512))
    if end_name == -1:
        raise _Fail(f"<name> at offset {pos} is not closed")
    name = text[pos + len("<name>") : end_name].strip()
    if not name or "<" in name:
        raise _Fail(f"bad tool name in <tool_use> at offset {start}")
    pos = _skip_ws(text, end_name + len("</name>"))
    tags = ("arguments",) if strict else ("arguments", "input")
    tag = next((t for t in tags if text.startswith(f"<{t}>", pos)), None)
    if tag is None:
        if strict:
            raise _Fail(f"expected <arguments> at offset {pos}")
        return name, {}, pos
    pos = _skip_ws(text, pos + len(tag) + 2)
    obj, end = _decode_for(text, pos, budget)
    args = _json_object_arguments(obj, strict)
    pos = _skip_ws(text, end)
    if not text.startswith(f"</{tag}>", pos):
        raise _Fail(f"expected </{tag}> at offset {pos}")
    pos = _skip_ws(text, pos + len(tag) + 3)
    if not text.startswith(_TU_CLOSE, pos):
        raise _Fail(f"expected {_TU_CLOSE} at offset {pos}")
    return name, args, pos + len(_TU_CLOSE)


def _invoke_block(
    text: str, pos: int, hi: int, strict: bool, budget: _Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """Parse ``<invoke name="N"><parameter name="a">v</parameter>...</invoke>`` at ``pos``."""
    m = _INVOKE_OPEN.match(text, pos)
    if not m:
        raise _Fail(f'expected <invoke name="..."> at offset {pos}')
    name = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
    if not name:
        raise _Fail(f"empty tool name in <invoke> at offset {pos}")
    pos = _skip_ws(text, m.end())
    args: dict[str, Any] = {}
    while True:
        p = _PARAM_OPEN.match(text, pos)
        if not p:
            break
        key = p.group(1) if p.group(1) is not None else p.group(2)
        end = text.find(_PARAM_CLOSE, p.end(), hi)
        if budget is not None and not budget.spend((hi if end == -1 else end) - p.end()):
            raise _Fail("lenient scan budget spent")
        if end == -1:
            raise _Fail(f"<parameter> at offset {pos} is not closed")
        if strict and key in args:
            raise _Fail(f"parameter {key!r} given twice")
        args[key] = _xml_value(text[p.end() : end])
        pos = _skip_ws(text, end + len(_PARAM_CLOSE))
    if not text.startswith(_INVOKE_CLOSE, pos):
        raise _Fail(f"expected <parameter name=...> or {_INVOKE_CLOSE} at offset {pos}")
    return name, args, pos + len(_INVOKE_CLOSE)


def _strict_anthropic(text: str, lo: int, hi: int, memo: _Memo | None = None) -> _StrictOut:
    if not (text.startswith(_TU_OPEN, lo) or text.startswith(_FC_OPEN, lo)):
        raise _Fail(NO_CALL_ERROR)
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    pos = lo
    while pos < hi:
        if len(calls) >= MAX_CALLS:
            raise _Fail(TOO_MANY_CALLS_ERROR)
        if text.startswith(_TU_OPEN, pos):
            name, args, end = _tool_use_block(text, pos, hi, strict=True)
            calls.append(ToolCall(name, args, "anthropic_xml", (pos, end), text[pos:end]))
            spans.append((pos, end))
            pos = _skip_ws(text, end)
        elif text.startswith(_FC_OPEN, pos):
            block_start = pos
            pos = _skip_ws(text, pos + len(_FC_OPEN))
            n_before = len(calls)
            while _INVOKE_OPEN.match(text, pos):
                if len(calls) >= MAX_CALLS:
                    raise _Fail(TOO_MANY_CALLS_ERROR)
                name, args, end = _invoke_block(text, pos, hi, strict=True)
                calls.append(ToolCall(name, args, "anthropic_xml", (pos, end), text[pos:end]))
                pos = _skip_ws(text, end)
            if len(calls) == n_before:
                raise _Fail(f'expected <invoke name="..."> at offset {pos}')
            if not text.startswith(_FC_CLOSE, pos):
                raise _Fail(f"expected {_FC_CLOSE} at offset {pos}")
            pos += len(_FC_CLOSE)
            spans.append((block_start, pos))
            pos = _skip_ws(text, pos)
        else:
            raise _Fail(f"expected {_TU_OPEN} or {_FC_OPEN} at offset {pos}")
    return calls, spans


_STRICT: dict[str, Callable[[str, int, int, _Memo | None], _StrictOut]] = {
    "json": _strict_json,
    "hermes": _strict_hermes,
    "kimi_k2": _strict_kimi,
    "llama3_json": _strict_llama3,
    "pythonic": _strict_pythonic,
    "anthropic_xml": _strict_anthropic,
}


# --------------------------------------------------------------------------- API tool calls


def _api_calls(api_tool_calls: list[dict[str, Any]] | None, strict: bool) -> list[ToolCall]:
    calls: list[ToolCall] = []
    if not api_tool_calls:
        return calls
    if not isinstance(api_tool_calls, list):
        raise _Fail("tool_calls must be a list")
    for i, item in enumerate(api_tool_calls):
        try:
            calls.append(_api_call(item, strict))
        except _Fail as exc:
            if strict:
                raise _Fail(f"tool_calls[{i}]: {exc}") from None
    return calls


def _api_call(item: Any, strict: bool) -> ToolCall:
    if not isinstance(item, dict):
        raise _Fail(f"a tool call must be an object, got {_json_type(item)}")
    if strict and item.get("type", "function") != "function":
        raise _Fail(f"type must be 'function', got {item.get('type')!r}")
    fn = item.get("function")
    if not isinstance(fn, dict):
        raise _Fail("no 'function' object")
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _Fail("function.name must be a non-empty string")
    raw_args = fn.get("arguments")
    if isinstance(raw_args, dict):  # some servers hand back decoded arguments
        args = raw_args
    elif isinstance(raw_args, str):
        args = _api_arguments(raw_args, strict)
    elif raw_args is None and not strict:
        args = {}
    else:
        raise _Fail(f"function.arguments must be a JSON string, got {_json_type(raw_args)}")
    try:
        raw = json.dumps(item, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        raw = repr(item)
    return ToolCall(name, args, "openai", None, raw)


def _api_arguments(s: str, strict: bool) -> dict[str, Any]:
    lo = _skip_ws(s, 0)
    if strict:
        if lo == len(s):
            raise _Fail("function.arguments is empty")
        obj, end = _decode(s, lo)
        if _skip_ws(s, end) != len(s):
            raise _Fail(f"function.arguments has text after the JSON value at offset {end}")
        if not isinstance(obj, dict):
            raise _Fail(f"function.arguments must hold a JSON object, got {_json_type(obj)}")
        return obj
    if lo == len(s):
        return {}
    obj, _ = _decode(s, lo)  # lenient: ignore trailing junk, unwrap a double-encoded string
    return _json_object_arguments(obj, strict=False)


# --------------------------------------------------------------------------- lenient parsers
#
# Each yields ToolCalls found anywhere in text[start:], spans in raw-text coordinates.

_LENIENT_BUDGET_FACTOR = 2
_LENIENT_MAX_FAILURES = 200
_OBJ_START = re.compile(r'\{\s*"')


class _Scan:
    """One output being scanned leniently. Shared work (JSON objects) is done once."""

    def __init__(self, text: str, start: int, memo: _Memo | None = None) -> None:
        self.text = text
        self.start = start
        self._objects: list[tuple[dict[str, Any], int, int]] | None = None
        # start -> (what decoding there spent, the value and its end, or None): the lenient
        # parsers of every protocol try the same JSON objects, each under its own budget
        n = len(text)
        self._decoded: dict[int, tuple[tuple[int, ...], tuple[Any, int] | None]] = {
            pos: (_window_charges(n, pos, got[1]), got) for pos, got in (memo or {}).items()
        }

    def budget(self) -> _Budget:
        return _Budget(_LENIENT_BUDGET_FACTOR * (len(self.text) - self.start) + 4096)

    def decode(self, pos: int, budget: _Budget) -> tuple[Any, int] | None:
        """``_try_decode`` done once per position: a repeat replays its spending on ``budget``,
        so each parser gets the answer (and the budget state) it would have computed."""
        known = self._decoded.get(pos)
        if known is not None:
            charges, got = known
            for c in charges:
                if not budget.spend(c):
                    return None
            return got
        spent: list[int] = []
        got = _try_decode(self.text, pos, budget, spent)
        if spent[-1] != -1:  # ran to an answer, not out of budget
            self._decoded[pos] = (tuple(spent), got)
        return got

    def call_objects(self) -> list[tuple[dict[str, Any], int, int]]:
        """JSON objects with a "name" or "tool" key, outermost first; found objects are skipped
        over so a call's nested values are not read as calls."""
        if self._objects is None:
            self._objects = []
            text, budget, pos = self.text, self.budget(), self.start
            if "{" in text:
                while True:
                    m = _OBJ_START.search(text, pos)
                    if not m:
                        break
                    s = m.start()
                    got = self.decode(s, budget)
                    if got is not None and isinstance(got[0], dict) and ("name" in got[0] or "tool" in got[0]):
                        self._objects.append((got[0], s, got[1]))
                        if len(self._objects) == MAX_CALLS:
                            break
                        pos = got[1]
                    else:
                        pos = s + 1
                        budget.fail()
                    if budget.spent:
                        break
        return self._objects


def _lenient_json(scan: _Scan) -> Iterator[ToolCall]:
    for obj, s, e in scan.call_objects():
        try:
            name, args = _call_from_object(obj, name_keys=_JSON_NAME, args_keys=_JSON_ARGS, strict=False)
        except _Fail:
            continue
        yield ToolCall(name, args, "json", (s, e), scan.text[s:e])


def _lenient_llama3(scan: _Scan) -> Iterator[ToolCall]:
    for obj, s, e in scan.call_objects():
        if "name" not in obj or not ("parameters" in obj or "arguments" in obj):
            continue
        try:
            name, args = _call_from_object(
                obj, name_keys=("name",), args_keys=("parameters", "arguments"), strict=False
            )
        except _Fail:
            continue
        yield ToolCall(name, args, "llama3_json", (s, e), scan.text[s:e])


def _find_all(text: str, needle: str, start: int) -> Iterator[int]:
    pos = text.find(needle, start)
    while pos != -1:
        yield pos
        pos = text.find(needle, pos + len(needle))


def _lenient_hermes(scan: _Scan) -> Iterator[ToolCall]:
    text, budget = scan.text, scan.budget()
    for s in _find_all(text, _HERMES_OPEN, scan.start):
        if budget.spent:
            return
        pos = _skip_ws(text, s + len(_HERMES_OPEN))
        got = scan.decode(pos, budget)
        if got is None:
            budget.fail()
            continue
        try:
            name, args = _call_from_object(
                got[0], name_keys=("name",), args_keys=("arguments", "parameters"), strict=False
            )
        except _Fail:
            budget.fail()
            continue
        e = got[1]
        close = _skip_ws(text, e)
        if text.startswith(_HERMES_CLOSE, close):
            e = close + len(_HERMES_CLOSE)
        yield ToolCall(name, args, "hermes", (s, e), text[s:e])


def _lenient_kimi(scan: _Scan) -> Iterator[ToolCall]:
    text, budget = scan.text, scan.budget()
    for s in _find_all(text, _K_CALL_BEGIN, scan.start):
        if budget.spent:
            return
        pos = _skip_ws(text, s + len(_K_CALL_BEGIN))
        m = _K_ID_LENIENT.match(text, pos)
        if not m:
            budget.fail()
            continue
        pos = _skip_ws(text, m.end())
        if not text.startswith(_K_ARG_BEGIN, pos):
            budget.fail()
            continue
        got = scan.decode(_skip_ws(text, pos + len(_K_ARG_BEGIN)), budget)
        if got is None:
            budget.fail()
            continue
        try:
            args = _json_object_arguments(got[0], strict=False)
        except _Fail:
            budget.fail()
            continue
        e = got[1]
        close = _skip_ws(text, e)
        if text.startswith(_K_CALL_END, close):
            e = close + len(_K_CALL_END)
        yield ToolCall(m.group(1), args, "kimi_k2", (s, e), text[s:e])


_PY_BARE_CALL = re.compile(r"[A-Za-z_][\w.]*\(")
_PY_LIST_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_PY_EMPTY_LIST = re.compile(r"\[\s*\]")
# Brackets and quoted strings: enough to find where a bracketed candidate ends. Strings are
# matched without crossing a newline so an unclosed quote cannot swallow the rest of the text.
_PY_TOKENS = re.compile(r"""[\[\](){}]|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'""")
_PY_MAX_DEPTH = 100
_PY_TOKEN_BUDGET = 20_000
_PY_MAX_CANDIDATES = 32


def _lenient_pythonic(scan: _Scan) -> Iterator[ToolCall]:
    text, budget = scan.text, scan.budget()
    tokens_left = _PY_TOKEN_BUDGET
    pos = scan.start
    for _ in range(_PY_MAX_CANDIDATES):
        m = _PY_LIST_START.search(text, pos)
        if not m:
            return
        s = m.start()
        depth, end = 0, -1
        for tok in _PY_TOKENS.finditer(text, s):
            tokens_left -= 1
            if tokens_left <= 0:
                return
            c = tok.group()
            if c in "[({":
                depth += 1
                if depth > _PY_MAX_DEPTH:
                    break
            elif c in "])}":
                depth -= 1
                if depth == 0:
                    end = tok.end()
                    break
        if end == -1:
            pos = s + 1
            continue
        if not budget.spend(end - s):
            return
        try:
            tree = _ast_parse(text[s:end])
        except _Fail:
            pos = s + 1
            continue
        if not isinstance(tree.body, ast.List):
            pos = s + 1
            continue
        index = _LineIndex(text[s:end])
        for node in tree.body.elts:
            try:
                name, args = _py_call(node, strict=False)
            except _Fail:
                continue
            a, b = index.span(node)
            yield ToolCall(name, args, "pythonic", (s + a, s + b), text[s + a : s + b])
        pos = end


def _lenient_anthropic(scan: _Scan) -> Iterator[ToolCall]:
    text, hi, budget = scan.text, len(scan.text), scan.budget()
    if _TU_OPEN in text:
        for s in _find_all(text, _TU_OPEN, scan.start):
            if budget.spent:
                break
            try:
                name, args, e = _tool_use_block(text, s, hi, strict=False, budget=budget)
            except _Fail:
                budget.fail()
                continue
            yield ToolCall(name, args, "anthropic_xml", (s, e), text[s:e])
    if "<invoke" in text:
        for s in _find_all(text, "<invoke", scan.start):
            if budget.spent:
                break
            try:
                name, args, e = _invoke_block(text, s, hi, strict=False, budget=budget)
            except _Fail:
                budget.fail()
                continue
            yield ToolCall(name, args, "anthropic_xml", (s, e), text[s:e])


_LENIENT: dict[str, Callable[[_Scan], Iterator[ToolCall]]] = {
    "json": _lenient_json,
    "hermes": _lenient_hermes,
    "kimi_k2": _lenient_kimi,
    "llama3_json": _lenient_llama3,
    "pythonic": _lenient_pythonic,
    "anthropic_xml": _lenient_anthropic,
}


def _lenient(protocol: str, scan: _Scan, api_tool_calls: list[dict[str, Any]] | None) -> list[ToolCall]:
    try:
        if protocol == "openai":
            return _api_calls(api_tool_calls, strict=False)
        return list(itertools.islice(_LENIENT[protocol](scan), MAX_CALLS))
    except (_Fail, RecursionError, MemoryError, ValueError, TypeError):
        # A diagnostic must never take scoring down with it.
        return []


# --------------------------------------------------------------------------- the entry point


def _reasoning_bounds(text: str, tags: tuple[str, str] | None) -> tuple[int, str | None, str | None]:
    """(where the body starts, reasoning content, error). A declared block counts only at the
    start of the output; a template that opens the block in the prompt shows up as an output
    with the closing tag and no opening tag before it."""
    if not tags:
        return 0, None, None
    open_tag, close_tag = tags
    first = _skip_ws(text, 0)
    if open_tag and text.startswith(open_tag, first):
        close = text.find(close_tag, first + len(open_tag))
        if close == -1:
            return 0, None, f"reasoning block {open_tag} is not closed"
        return close + len(close_tag), text[first + len(open_tag) : close], None
    close = text.find(close_tag) if close_tag else -1
    if close != -1 and (not open_tag or text.find(open_tag, 0, close) == -1):
        return close + len(close_tag), text[:close], None
    return 0, None, None


def _body_end(text: str, lo: int, eot_tokens: tuple[str, ...]) -> int:
    """Strip trailing whitespace and end-of-turn tokens (any number, any order)."""
    hi = len(text)
    while True:
        while hi > lo and text[hi - 1].isspace():
            hi -= 1
        for tok in eot_tokens:
            if tok and hi - len(tok) >= lo and text.startswith(tok, hi - len(tok)):
                hi -= len(tok)
                break
        else:
            return hi


def _contained(span: tuple[int, int] | None, starts: list[int], spans: list[tuple[int, int]]) -> bool:
    """Is ``span`` inside one of ``spans`` (sorted, disjoint; ``starts`` their starts)?"""
    if span is None:
        return False
    i = bisect.bisect_right(starts, span[0]) - 1
    return i >= 0 and spans[i][0] <= span[0] and span[1] <= spans[i][1]


def parse_output(
    text: str,
    protocol: str,
    *,
    eot_tokens: tuple[str, ...] = (),
    reasoning_tags: tuple[str, str] | None = None,
    api_tool_calls: list[dict[str, Any]] | None = None,
) -> ParseResult:
    """Parse one raw output under ``protocol``; never raises on any text."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "replace")
    elif not isinstance(text, str):
        text = "" if text is None else str(text)
    body_lo, reasoning, reasoning_error = _reasoning_bounds(text, reasoning_tags)
    hi = _body_end(text, body_lo, tuple(eot_tokens))
    lo = _skip_ws(text, body_lo)
    lo = min(lo, hi)

    calls: list[ToolCall] = []
    consumed: list[tuple[int, int]] = []
    memo: _Memo = {}
    error: str | None = reasoning_error
    if error is None:
        try:
            if protocol == "openai":
                calls = _api_calls(api_tool_calls, strict=True)
                if not calls:
                    raise _Fail(NO_CALL_ERROR)
            elif lo >= hi:
                raise _Fail(NO_CALL_ERROR)
            else:
                # The body ends at hi: a parser must not read into the end-of-turn tokens.
                calls, consumed = _STRICT[protocol](text[:hi] if hi < len(text) else text, lo, hi, memo)
        except _Fail as exc:
            error = str(exc) or "parse error"
        except (RecursionError, MemoryError, ValueError, TypeError) as exc:  # belt and braces
            error = f"parse error: {type(exc).__name__}"
    if error is not None:
        calls, consumed = [], []

    # the strict decodes start at or after body_lo, where the lenient scans look too
    scan = _Scan(text, body_lo, memo)
    lenient = list(calls) if error is None else _lenient(protocol, scan, api_tool_calls)
    if error == NO_CALL_ERROR and lenient:
        error = NOT_ALONE_ERROR

    # Other protocols explain what the model did instead. A call another parser finds inside a
    # call of the protocol in force (the JSON inside a Hermes tag) explains nothing new.
    own = sorted({c.span for c in lenient if c.span is not None})
    own_starts = [a for a, _ in own]
    others: list[str] = []
    # A strict success consumed the whole body: no text is left for another protocol to explain
    # (API calls are the exception: their content text sits beside them), so skip the scans.
    for other in PROTOCOLS if (error is not None or protocol == "openai") else ():
        if other == protocol:
            continue
        found = _lenient(other, scan, api_tool_calls)
        if any(c.span is None or not _contained(c.span, own_starts, own) for c in found):
            others.append(other)

    # What the room sees: the body without the consumed markup.
    if consumed:
        pieces, pos = [], lo
        for a, b in consumed:
            pieces.append(text[pos:a])
            pos = b
        pieces.append(text[pos:hi])
        visible = "".join(pieces)
    else:
        visible = text[lo:hi] if reasoning_error is None else text[:hi]
    return ParseResult(
        protocol=protocol,
        strict_ok=error is None,
        calls=tuple(calls),
        lenient_calls=tuple(lenient),
        error=error,
        consumed=tuple(consumed),
        visible_text=visible.strip(),
        reasoning=reasoning,
        other_protocols=tuple(others),
    )
