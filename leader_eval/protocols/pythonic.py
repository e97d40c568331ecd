"""``pythonic``: a Python list of keyword-argument calls, ``[f(a=1), g.h(b="x")]`` (Llama 3.2,
Gemma), parsed with ``ast``; values must be literals. Python's parser is only handed bracketed
candidates, and the call cap is checked before parsing a long list."""

from __future__ import annotations

import ast
import itertools
import keyword
import re
from collections.abc import Iterator
from typing import Any

from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.protocols._scan import MAX_CALLS, NO_CALL_ERROR, TOO_MANY_CALLS_ERROR, Fail, Memo, Scan
from leader_eval.types import ToolCall

_PY_BARE_CALL = re.compile(r"[A-Za-z_][\w.]*\(")
_PY_LIST_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_PY_EMPTY_LIST = re.compile(r"\[\s*\]")
# Brackets and quoted strings: enough to find where a bracketed candidate ends. Strings are
# matched without crossing a newline so an unclosed quote cannot swallow the rest of the text.
# A string is written "unrolled", "[^"\\\n]*(?:\\.[^"\\\n]*)*": the same matches as
# "(?:[^"\\\n]|\\.)*" (the two alternatives start with different characters, so neither form
# ever backtracks into a shorter match), but a run of plain characters is one tight loop in
# the regex engine instead of an alternation per character (~50 us less per 2 KB string).
_STR = r""""[^"\\\n]*(?:\\.[^"\\\n]*)*"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"""
_PY_TOKENS = re.compile(r"[\[\](){}]|" + _STR)
_PY_MAX_DEPTH = 100
# The usual list, read without Python's parser (~3x faster on a 2 KB message): ASCII dotted
# names and keyword names that are not Python keywords, spaces (no other layout) between the
# pieces, and values that are one-line strings (no newline, carriage return, NUL or surrogate)
# whose only escapes are \\ \' \" \n \t \r, integers of at most 18 digits, True, False or None.
# What it reads is exactly what ``ast.parse`` and ``literal_eval`` give; anything else (a
# repeated keyword, a float, a nested value, a newline, a comment, ...) goes to Python's parser.
_FAST_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_FAST_CALL = re.compile(rf"({_FAST_NAME}(?:\.{_FAST_NAME})*) *\( *")
_FAST_KEY = re.compile(rf"({_FAST_NAME}) *= *")
_FAST_SEPARATOR = re.compile(r" *(,)? *")
_FAST_SCALAR = re.compile(r"(?:-?(?:0|[1-9][0-9]{0,17})|True|False|None)")
_FAST_SURROGATE = re.compile("[\ud800-\udfff]")
_FAST_ESCAPED = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_FAST_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None}
_PY_TOKEN_BUDGET = 20_000
_PY_MAX_CANDIDATES = 32


def _fast_string(text: str, pos: int) -> tuple[str, int] | None:
    """The value of the one-line string literal opening at ``pos`` (a quote) and where it ends,
    if it is of the usual shape (see ``_FAST_NAME``): found with ``str.find``, where a regex
    would test every character (the message is most of a call)."""
    quote = text[pos]
    pieces = []
    at = pos + 1
    while True:
        close = text.find(quote, at)
        if close == -1:
            return None
        escape = text.find("\\", at, close)
        if escape == -1:
            pieces.append(text[at:close])
            break
        value = _FAST_ESCAPED.get(text[escape + 1])
        if value is None:
            return None
        pieces.append(text[at:escape])
        pieces.append(value)
        at = escape + 2
    raw = text[pos + 1 : close]
    if "\n" in raw or "\r" in raw or "\x00" in raw or (not raw.isascii() and _FAST_SURROGATE.search(raw)):
        return None
    return "".join(pieces), close + 1


def _fast_separator(text: str, pos: int) -> tuple[bool, int]:
    """(whether a comma follows ``pos``, between spaces; where the next piece starts)."""
    m = _FAST_SEPARATOR.match(text, pos)
    return (m is not None and m.group(1) is not None), (m.end() if m is not None else pos)


def _fast_list(
    text: str, s: int, max_tokens: int = _PY_TOKEN_BUDGET
) -> tuple[list[tuple[str, dict[str, Any], int, int]], int, int] | None:
    """The list of calls opening at ``s`` if it is of the usual shape (see ``_FAST_NAME``):
    ((name, arguments, start, end) per call, where the list ends, how many bracket and string
    tokens ``_PY_TOKENS`` finds in it); None for anything else, and as soon as the list has
    more than ``MAX_CALLS`` calls or ``max_tokens`` tokens (the caller's own path decides
    those, and a 1 MB list is not read twice)."""
    calls: list[tuple[str, dict[str, Any], int, int]] = []
    tokens = 2  # the list's brackets
    pos = s + 1
    while text.startswith(" ", pos):
        pos += 1
    while True:
        m = _FAST_CALL.match(text, pos)
        if m is None:
            return None
        name = m.group(1)
        if any(keyword.iskeyword(part) for part in name.split(".")):
            return None
        start, pos = m.start(), m.end()
        tokens += 2  # the call's parentheses
        if len(calls) == MAX_CALLS or tokens > max_tokens:
            return None
        args: dict[str, Any] = {}
        while not text.startswith(")", pos):
            k = _FAST_KEY.match(text, pos)
            if k is None:
                return None
            key = k.group(1)
            if keyword.iskeyword(key) or key in args:
                return None
            pos = k.end()
            if text.startswith(("'", '"'), pos):
                got = _fast_string(text, pos)
                if got is None:
                    return None
                args[key], pos = got
                tokens += 1
            else:
                v = _FAST_SCALAR.match(text, pos)
                if v is None:
                    return None
                literal = v.group()
                args[key] = _FAST_CONSTANTS[literal] if literal in _FAST_CONSTANTS else int(literal)
                pos = v.end()
            comma, pos = _fast_separator(text, pos)
            if not comma and not text.startswith(")", pos):
                return None
        pos += 1
        calls.append((name, args, start, pos))
        comma, pos = _fast_separator(text, pos)
        if text.startswith("]", pos):
            return calls, pos + 1, tokens
        if not comma:
            return None


def lenient(scan: Scan) -> Iterator[ToolCall]:
    text, budget = scan.text, scan.budget()
    tokens_left = _PY_TOKEN_BUDGET
    pos = scan.start
    for _ in range(_PY_MAX_CANDIDATES):
        m = _PY_LIST_START.search(text, pos)
        if not m:
            return
        s = m.start()
        fast = _fast_list(text, s, tokens_left - 1)
        if fast is not None and tokens_left > fast[2]:
            # the bracket scan below would end this list where it ends, spending its tokens
            tokens_left -= fast[2]
            end = fast[1]
            if not budget.spend(end - s):
                return
            for name, args, a, b in fast[0]:
                yield ToolCall(name, args, "pythonic", (a, b), text[a:b])
            pos = end
            continue
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
        except Fail:
            pos = s + 1
            continue
        if not isinstance(tree.body, ast.List):
            pos = s + 1
            continue
        index = _LineIndex(text[s:end])
        for node in tree.body.elts:
            try:
                name, args = _py_call(node, strict=False)
            except Fail:
                continue
            a, b = index.span(node)
            yield ToolCall(name, args, "pythonic", (s + a, s + b), text[s + a : s + b])
        pos = end


def strict(text: str, lo: int, hi: int, memo: Memo | None = None) -> StrictOut:
    if text[lo] != "[":
        if _PY_BARE_CALL.match(text, lo):
            raise Fail("pythonic calls must be written inside a list: [f(a=1)]")
        raise Fail(NO_CALL_ERROR)
    if not _PY_LIST_START.match(text, lo):
        if _PY_EMPTY_LIST.match(text, lo):
            raise Fail("empty list of tool calls")
        raise Fail("expected a list of calls [f(a=...)]")
    if text[hi - 1] != "]":
        raise Fail("text after the list of calls")
    fast = _fast_list(text, lo)
    if fast is not None and fast[1] == hi and len(fast[0]) <= MAX_CALLS:
        return [ToolCall(name, args, "pythonic", (a, b), text[a:b]) for name, args, a, b in fast[0]], [(lo, hi)]
    if _py_past_cap(text, lo, hi):
        raise Fail(TOO_MANY_CALLS_ERROR)
    tree = _ast_parse(text[lo:hi])
    if not isinstance(tree.body, ast.List):
        raise Fail("expected one list of calls")
    if not tree.body.elts:
        raise Fail("empty list of tool calls")
    if len(tree.body.elts) > MAX_CALLS:
        raise Fail(TOO_MANY_CALLS_ERROR)
    index = _LineIndex(text[lo:hi])
    calls: list[ToolCall] = []
    for node in tree.body.elts:
        name, args = _py_call(node, strict=True)
        s, e = index.span(node)
        calls.append(ToolCall(name, args, "pythonic", (lo + s, lo + e), text[lo + s : lo + e]))
    return calls, [(lo, hi)]


# Brackets, commas and one-line strings: enough to find the commas between list elements.
_PY_COMMA_TOKENS = re.compile(r"[\[\](){},]|" + _STR)


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
        raise Fail(f"not a Python expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise Fail("Python expression nested too deeply") from None
    except ValueError as exc:  # null bytes, on some Python versions
        raise Fail(f"not a Python expression: {exc}") from None


_LINE_BREAK = re.compile("\r\n|\r|\n")
_LINE_BREAK_BYTES = re.compile(b"\r\n|\r|\n")


class _LineIndex:
    r"""Turns ast positions (line, UTF-8 byte column) into character offsets.

    Lines end where Python's tokenizer ends them: at ``\r\n``, ``\r`` or ``\n`` (a lone
    ``\r`` counted as no line break put a call's line past the last one: an IndexError out of
    every lenient scan). Calls come in source order, so a cursor makes the conversion linear
    for non-ASCII sources.
    """

    def __init__(self, source: str) -> None:
        self.ascii = source.isascii()
        self.data = source.encode("utf-8", "surrogatepass") if not self.ascii else b""
        src = source if self.ascii else self.data
        nl = "\n" if self.ascii else b"\n"
        self.starts = [0]
        if "\r" in source:
            breaks = _LINE_BREAK.finditer(source) if self.ascii else _LINE_BREAK_BYTES.finditer(self.data)
            self.starts += [m.end() for m in breaks]
        else:
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
        raise Fail("every list element must be a call f(a=...)")
    name = _dotted_name(node.func)
    if name is None:
        raise Fail("a call must name a function (dotted names allowed)")
    if node.args and strict:
        raise Fail(f"positional arguments in {name}(...): only keyword arguments are allowed")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise Fail(f"**kwargs in {name}(...) is not allowed")
        try:
            value = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise Fail(f"argument {kw.arg!r} of {name}(...) is not a literal") from None
        args[kw.arg] = _jsonable(value, f"{name}({kw.arg}=...)")
    return name, args


def _jsonable(value: Any, where: str, depth: int = 0) -> Any:
    """Python literals to JSON values: tuples become lists; sets, bytes, complex are refused."""
    if depth > 500:
        raise Fail(f"value in {where} nested too deeply")
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise Fail(f"non-finite number in {where}")
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v, where, depth + 1) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise Fail(f"non-string dict key {k!r} in {where}")
            out[k] = _jsonable(v, where, depth + 1)
        return out
    raise Fail(f"{type(value).__name__} value in {where} has no JSON equivalent")


PROTOCOL = ToolCallProtocol(
    name="pythonic",
    strict=strict,
    lenient=lenient,
    lenient_needs=("[",),
    opening=r"\[\s*[A-Za-z_][\w.]*\s*\(",
    # the head the leak detector reports: "[name(arg="
    inner=(r"\[\s*[A-Za-z_][\w.]*\s*\(\s*[A-Za-z_]\w*\s*=",),
)
