"""Resource bounds for untrusted input: suite files, scaffold templates, chat templates, regexes.

A suite file, a scaffold template, a GGUF's chat template and a server's template are all written
by someone other than the person running the evaluation. None of them may hang the process, grow
its memory without bound, or reach a file outside the suite root. Every bound here ends in a
``LimitExceeded`` with a one-line message; callers add the file and line.

Bounds and their defaults (docs/security.md lists them too):

- Rendering (scaffold and chat templates): ``MAX_RENDER_SECONDS`` wall-clock per render,
  ``MAX_RENDER_OUTPUT`` characters of output (also any captured block or macro result),
  ``MAX_RENDER_VALUE`` characters/items for any one value an operator, filter or method builds,
  integer arguments and widths up to ``MAX_RENDER_VALUE``, integers up to ``MAX_INT_BITS`` bits,
  ``range`` up to jinja2's 100,000 items, Python's recursion limit for macros, and
  ``MAX_RENDER_MEMORY_GROWTH`` bytes of resident memory growth while a render runs.
- Regular expressions a suite supplies: at most ``MAX_REGEX_CHARS`` characters; patterns that
  can backtrack catastrophically (a repeated group holding another repeat, or a repeated
  alternation whose branches can start with the same character) are refused at load time.

How the time bound works: rendering runs with a ``sys.settrace`` hook that only traces frames of
compiled templates (file name ``<template>``), so the cost falls on template code alone; every
1024 line events it checks the clock and the resident set size. This works in any thread and
needs no signals. A single C-level operation cannot be interrupted, which is why every operation
that can build a large value in one step (``*``, ``+``, ``**``, ``%``, ``~``, ``str.format``,
string methods, filters) is checked *before* it runs.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import re
import string
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import Concat
from jinja2.sandbox import ImmutableSandboxedEnvironment

# --------------------------------------------------------------------------- the numbers

MAX_SUITE_BYTES = 8 * 2**20
MAX_TEMPLATE_BYTES = 2**20
MAX_YAML_NODES = 200_000  # after alias expansion
MAX_YAML_ALIASES = 1_000
MAX_YAML_DEPTH = 64
MAX_YAML_EXPANDED_CHARS = 32 * 2**20
MAX_REF_FILES = 64

MAX_RENDER_SECONDS = 4.0
MAX_RENDER_OUTPUT = 8_000_000
MAX_RENDER_VALUE = 4_000_000
MAX_RENDER_MEMORY_GROWTH = 512 * 2**20
MAX_INT_BITS = 64 * 1024
MAX_JSON_INDENT = 64

MAX_REGEX_CHARS = 2_000

#: samples per case (the suite format's own maximum, and --samples / RunOptions.samples)
MAX_SAMPLES_PER_CASE = 100_000
#: samples one run plans, cases x samples per case (a shard is a run: --shard splits a bigger one)
MAX_RUN_SAMPLES = 1_000_000


class LimitExceeded(Exception):
    """An input went past one of the bounds above; the message is one line."""


# --------------------------------------------------------------------------- value checks


def _size(value: Any) -> int | None:
    if isinstance(value, str | bytes | list | tuple | dict | set | frozenset):
        return len(value)
    return None


def _check_value(value: Any, what: str) -> Any:
    n = _size(value)
    if n is not None and n > MAX_RENDER_VALUE:
        raise LimitExceeded(f"{what} built a value of {n:,} items (limit {MAX_RENDER_VALUE:,})")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise LimitExceeded(f"{what} built an integer over {MAX_INT_BITS} bits")
    return value


def _check_int_args(args: Iterable[Any], what: str) -> None:
    for a in args:
        if isinstance(a, int) and not isinstance(a, bool) and abs(a) > MAX_RENDER_VALUE:
            raise LimitExceeded(f"{what}: argument {a} is too large (limit {MAX_RENDER_VALUE:,})")


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")


def _check_percent_format(fmt: str, args: Any, what: str) -> None:
    for m in _PERCENT_SPEC.finditer(fmt):
        for g in m.groups():
            if g and g != "*" and int(g) > MAX_RENDER_VALUE:
                raise LimitExceeded(f"{what}: format width {g} is too large")
    _check_int_args(args if isinstance(args, tuple) else (args,), what)


def _check_brace_format(fmt: str, what: str, depth: int = 0) -> None:
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format raises its own error
    for _literal, _field, spec, _conv in parsed:
        if spec:
            for d in _DIGITS.findall(spec):
                if int(d) > MAX_RENDER_VALUE:
                    raise LimitExceeded(f"{what}: format width {d} is too large")
            if depth < 2:
                _check_brace_format(spec, what, depth + 1)


def _expected_len(parts: Iterable[Any]) -> int:
    total = 0
    for p in parts:
        total += len(p) if isinstance(p, str) else len(str(p))
        if total > MAX_RENDER_VALUE:
            break
    return total


def _binop_precheck(op: str, left: Any, right: Any) -> None:
    seqs = str | bytes | list | tuple
    if op == "*":
        if isinstance(left, seqs) and isinstance(right, int):
            n = len(left) * max(right, 0)
        elif isinstance(right, seqs) and isinstance(left, int):
            n = len(right) * max(left, 0)
        elif isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                raise LimitExceeded(f"template: '*' would build an integer over {MAX_INT_BITS} bits")
            return
        else:
            return
        if n > MAX_RENDER_VALUE:
            raise LimitExceeded(f"template: '*' would build a value of {n:,} items (limit {MAX_RENDER_VALUE:,})")
    elif op == "+":
        if isinstance(left, seqs) and isinstance(right, seqs):
            n = len(left) + len(right)
            if n > MAX_RENDER_VALUE:
                raise LimitExceeded(f"template: '+' would build a value of {n:,} items (limit {MAX_RENDER_VALUE:,})")
    elif op == "**":
        big = isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0
        if big and left.bit_length() * right > MAX_INT_BITS:
            raise LimitExceeded(f"template: '**' would build an integer over {MAX_INT_BITS} bits")
    elif op == "%" and isinstance(left, str):
        _check_percent_format(left, right, "template: '%'")


_STR_METHOD_SIZERS: dict[str, Callable[..., int]] = {}


def _replace_size(s: str, old: Any = "", new: Any = "", count: Any = -1, *_: Any) -> int:
    if not isinstance(old, str) or not isinstance(new, str):
        return 0
    if len(new) <= len(old):
        return len(s)
    hits = (len(s) + 1) if old == "" else s.count(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(s) + hits * (len(new) - len(old))


def _join_size(sep: str, items: Any = (), *_: Any) -> int:
    if not isinstance(items, list | tuple):
        return 0
    return _expected_len(items) + len(sep) * max(len(items) - 1, 0)


def _expandtabs_size(s: str, tabsize: Any = 8, *_: Any) -> int:
    return len(s) + s.count("\t") * (tabsize if isinstance(tabsize, int) else 8)


_STR_METHOD_SIZERS.update(replace=_replace_size, join=_join_size, expandtabs=_expandtabs_size)


# --------------------------------------------------------------------------- the environment


class _BoundedCodeGenerator(CodeGenerator):
    """``a ~ b`` goes through the environment's bounded join instead of ``str_join``."""

    def visit_Concat(self, node: Concat, frame: Frame) -> None:
        self.write("environment.bounded_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _wrap_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    what = f"template: filter {name!r}"
    try:
        sig: inspect.Signature | None = inspect.signature(func)
    except (TypeError, ValueError):
        sig = None

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_int_args(args, what)
        _check_int_args(kwargs.values(), what)
        if sig is not None and "indent" in sig.parameters:
            try:
                indent = sig.bind_partial(*args, **kwargs).arguments.get("indent")
            except TypeError:
                indent = None
            if (isinstance(indent, int) and indent > MAX_JSON_INDENT) or (
                isinstance(indent, str) and len(indent) > MAX_JSON_INDENT
            ):
                raise LimitExceeded(f"{what}: indent is too large (limit {MAX_JSON_INDENT})")
        if name == "indent":
            _indent_precheck(args, kwargs, what)
        elif name == "join":
            _join_filter_precheck(args, kwargs, what)
        elif name == "format" and args:
            fmt = next((a for a in args if isinstance(a, str)), None)
            if fmt is not None:
                _check_percent_format(fmt, tuple(args[args.index(fmt) + 1 :]), what)
        elif name == "replace":
            s = next((a for a in args if isinstance(a, str)), None)
            if s is not None:
                rest = args[args.index(s) + 1 :]
                if _replace_size(s, *rest) > MAX_RENDER_VALUE:
                    raise LimitExceeded(f"{what} would build a value over {MAX_RENDER_VALUE:,} characters")
        return _check_value(func(*args, **kwargs), what)

    bounded.__dict__["_leader_eval_bounded"] = True
    return bounded


def _indent_precheck(args: tuple[Any, ...], kwargs: dict[str, Any], what: str) -> None:
    s = next((a for a in args if isinstance(a, str)), "")
    rest = list(args[args.index(s) + 1 :]) if s in args else []
    width = kwargs.get("width", rest[0] if rest else 4)
    w = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    if len(s) + w * (s.count("\n") + 1) > MAX_RENDER_VALUE:
        raise LimitExceeded(f"{what} would build a value over {MAX_RENDER_VALUE:,} characters")


def _join_filter_precheck(args: tuple[Any, ...], kwargs: dict[str, Any], what: str) -> None:
    items = next((a for a in args if isinstance(a, list | tuple)), None)
    if items is None:
        return
    rest = args[args.index(items) + 1 :]
    sep = kwargs.get("d", rest[0] if rest else "")
    if _expected_len(items) + len(str(sep)) * max(len(items) - 1, 0) > MAX_RENDER_VALUE:
        raise LimitExceeded(f"{what} would build a value over {MAX_RENDER_VALUE:,} characters")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with every value-building operation checked before it runs.

    Used for scaffold templates and for model chat templates alike (chat_template.py copies the
    Hugging Face extensions, filters and globals onto one of these).
    """

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # lipsum(n) writes n paragraphs; no scaffold or chat template needs it
        self.globals.pop("lipsum", None)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _binop_precheck(operator, left, right)
        return _check_value(self.binop_table[operator](left, right), f"template: {operator!r}")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(__obj, "__name__", type(__obj).__name__)
        what = f"template: {name}()"
        _check_int_args(args, what)
        _check_int_args(kwargs.values(), what)
        # the sandbox hands out str.format wrapped; the bound method is behind __wrapped__
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if isinstance(owner, str):
            if name in ("format", "format_map"):
                _check_brace_format(owner, what)
            sizer = _STR_METHOD_SIZERS.get(name)
            if sizer is not None and sizer(owner, *args) > MAX_RENDER_VALUE:
                raise LimitExceeded(f"{what} would build a value over {MAX_RENDER_VALUE:,} characters")
        return _check_value(super().call(__context, __obj, *args, **kwargs), what)

    def bounded_join(self, parts: tuple[Any, ...]) -> str:
        pieces = [p if isinstance(p, str) else str(p) for p in parts]
        if sum(map(len, pieces)) > MAX_RENDER_VALUE:
            raise LimitExceeded(f"template: '~' would build a value over {MAX_RENDER_VALUE:,} characters")
        return "".join(pieces)

    def concat(self, parts: Iterable[str]) -> str:
        # every rendered output, captured block and macro result is joined here
        out: list[str] = []
        total = 0
        for p in parts:
            total += len(p)
            if total > MAX_RENDER_OUTPUT:
                raise LimitExceeded(f"template output is over {MAX_RENDER_OUTPUT:,} characters")
            out.append(p)
        return "".join(out)

    def _generate(self, *args: Any, **kwargs: Any) -> str:
        # filters registered after construction (tojson, ...) get the same bounds before any
        # template is compiled, because constant folding calls them at compile time
        for name, func in list(self.filters.items()):
            if not getattr(func, "_leader_eval_bounded", False):
                self.filters[name] = _wrap_filter(name, func)
        return str(super()._generate(*args, **kwargs))


# --------------------------------------------------------------------------- time and memory


def _rss() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


_TEMPLATE_FILE = "<template>"
_active = threading.local()


@contextmanager
def render_budget(seconds: float | None = None) -> Iterator[None]:
    """Bound the wall-clock time and memory growth of template code run inside the block."""
    if getattr(_active, "on", False):  # nested (a chat template inside a bounded call): one budget
        yield
        return
    limit = MAX_RENDER_SECONDS if seconds is None else seconds
    deadline = time.monotonic() + limit
    rss0 = _rss()
    events = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal events
        events += 1
        if not events & 1023:
            if time.monotonic() > deadline:
                raise LimitExceeded(f"template rendering took longer than {limit:g} s")
            if rss0 and _rss() - rss0 > MAX_RENDER_MEMORY_GROWTH:
                raise LimitExceeded(f"template rendering grew memory by over {MAX_RENDER_MEMORY_GROWTH // 2**20} MiB")
        return local

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == _TEMPLATE_FILE else None

    old = sys.gettrace()
    _active.on = True
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(old)
        _active.on = False


def run_bounded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` (a render or compile) under ``render_budget``; resource errors become ``LimitExceeded``."""
    try:
        with render_budget():
            return fn(*args, **kwargs)
    except RecursionError as exc:
        raise LimitExceeded("template nests or recurses too deeply (a macro that calls itself without end?)") from exc
    except MemoryError as exc:
        raise LimitExceeded("template rendering ran out of memory") from exc
    except OverflowError as exc:
        raise LimitExceeded(f"template: {exc}") from exc


# --------------------------------------------------------------------------- regular expressions

# the parser behind ``re`` (private, but the only parser that agrees with ``re`` exactly)
_sre_c: Any = importlib.import_module("re._constants")
_sre_parse: Any = importlib.import_module("re._parser")

_PROBE = [chr(c) for c in range(32, 127)] + ["\t", "\n", "\u00a0", "\u00e9", "\u4e2d", "\u0661"]
_REPEATS = {_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT}


def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` is refused (invalid, too long or can backtrack catastrophically), or None."""
    if len(pattern) > MAX_REGEX_CHARS:
        return f"regular expression is longer than {MAX_REGEX_CHARS} characters"
    try:
        compiled = re.compile(pattern)
        parsed = _sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"invalid regular expression {pattern!r}: {exc}"
    flags = compiled.flags
    try:
        why = _nested_repeat(list(parsed), inside=False, flags=flags)
    except RecursionError:
        return f"regular expression {pattern!r} nests too deeply"
    if why:
        return f"regular expression {pattern!r} can backtrack catastrophically ({why}); rewrite it"
    return None


def _is_repeating(node: tuple[Any, Any]) -> bool:
    op, av = node
    return op in _REPEATS and (av[1] == _sre_c.MAXREPEAT or av[1] > 1)


def _variable(items: list[Any]) -> bool:
    """Can this sequence match strings of more than one length?"""
    lo, hi = _sre_parse.SubPattern(_sre_parse.State(), items).getwidth()
    return bool(lo != hi)


def _nested_repeat(items: list[Any], *, inside: bool, flags: int) -> str | None:
    for i, (op, av) in enumerate(items):
        if op in _REPEATS:
            body = list(av[2])
            repeating = _is_repeating((op, av))
            variable = av[0] != av[1] or _variable(body)
            if inside and repeating and variable and not _guarded(items, i, body, flags):
                return "a repeated group holds another repeat"
            if repeating:
                branch_clash = _overlapping_branches(body, flags)
                if branch_clash:
                    return branch_clash
            why = _nested_repeat(body, inside=inside or repeating, flags=flags)
            if why:
                return why
        elif op is _sre_c.SUBPATTERN:
            why = _nested_repeat(list(av[3]), inside=inside, flags=flags)
            if why:
                return why
        elif op is _sre_c.BRANCH:
            for alt in av[1]:
                why = _nested_repeat(list(alt), inside=inside, flags=flags)
                if why:
                    return why
        elif op in (_sre_c.ASSERT, _sre_c.ASSERT_NOT):
            why = _nested_repeat(list(av[1]), inside=False, flags=flags)
            if why:
                return why
        # atomic groups and possessive repeats never backtrack into themselves: not inspected
    return None


def _guarded(items: list[Any], i: int, body: list[Any], flags: int) -> bool:
    """Is the inner repeat ``items[i]`` fenced by a character it cannot match?

    ``(\\w+\\s)+`` and ``(?: [A-Z][a-z]+)*`` are safe: what follows the inner repeat (the next
    item, or for the last item the start of the next iteration) is mandatory and disjoint from
    it, so there is one way to split the input between iterations.
    """
    inner = _first_chars(body, flags)
    if inner is None:
        return False
    fence = items[i + 1] if i + 1 < len(items) else (items[0] if i > 0 else None)
    if fence is None or _min_width([fence]) == 0:
        return False
    after = _first_chars([fence], flags)
    return after is not None and not (inner & after)


def _min_width(items: list[Any]) -> int:
    return int(_sre_parse.SubPattern(_sre_parse.State(), items).getwidth()[0])


def _overlapping_branches(body: list[Any], flags: int) -> str | None:
    for op, av in body:
        if op is _sre_c.SUBPATTERN:
            clash = _overlapping_branches(list(av[3]), flags)
            if clash:
                return clash
        if op is _sre_c.BRANCH:
            seen: set[str] = set()
            for alt in av[1]:
                chars = _first_chars(list(alt), flags)
                if chars is None or chars & seen:
                    return "a repeated alternation whose branches can start with the same character"
                seen |= chars
    return None


def _first_chars(items: list[Any], flags: int) -> set[str] | None:
    """Probe characters that can start a match of ``items`` (None: could not tell, or empty match)."""
    if not items:
        return None
    op, av = items[0]
    probe = _PROBE
    if op is _sre_c.LITERAL:
        c = chr(av)
        return {c, c.lower(), c.upper()} if flags & re.IGNORECASE else {c}
    if op is _sre_c.NOT_LITERAL:
        return {p for p in probe if p != chr(av)}
    if op is _sre_c.ANY:
        return set(probe)
    if op is _sre_c.IN:
        source = _class_source(av)
        if source is None:
            return None
        rx = re.compile(source, flags & re.IGNORECASE)
        return {p for p in probe if rx.match(p)}
    if op is _sre_c.SUBPATTERN:
        return _first_chars(list(av[3]), flags)
    if op in _REPEATS and av[0] > 0:
        return _first_chars(list(av[2]), flags)
    if op is _sre_c.BRANCH:
        out: set[str] = set()
        for alt in av[1]:
            chars = _first_chars(list(alt), flags)
            if chars is None:
                return None
            out |= chars
        return out
    return None


_CATEGORY_SOURCE = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}


def _class_source(items: list[Any]) -> str | None:
    parts: list[str] = []
    for op, av in items:
        if op is _sre_c.NEGATE:
            parts.insert(0, "^")
        elif op is _sre_c.LITERAL:
            parts.append(re.escape(chr(av)))
        elif op is _sre_c.RANGE:
            parts.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif op is _sre_c.CATEGORY and str(av) in _CATEGORY_SOURCE:
            parts.append(_CATEGORY_SOURCE[str(av)])
        else:
            return None
    return "[" + "".join(parts) + "]" if parts else None


def check_regex(pattern: str) -> None:
    """Raise ``LimitExceeded`` when a suite-supplied regex is invalid, too long or catastrophic."""
    why = regex_problem(pattern)
    if why:
        raise LimitExceeded(why)


def finditer_bounded(pattern: str, text: str, timeout_s: float = 1.0) -> list[Any]:
    """All matches of a suite-supplied ``pattern`` in ``text``, or ``LimitExceeded`` after ``timeout_s``.

    Uses the ``regex`` engine (same syntax as ``re`` for these patterns), whose matcher honours a
    timeout; without it, patterns already passed ``check_regex``.
    """
    try:
        import regex
    except ImportError:  # pragma: no cover - regex ships with transformers
        return list(re.finditer(pattern, text))
    try:
        return list(regex.finditer(pattern, text, timeout=timeout_s))
    except TimeoutError as exc:
        raise LimitExceeded(f"regular expression {pattern!r} took over {timeout_s:g} s") from exc
