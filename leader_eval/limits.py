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
MAX_REGEX_SECONDS = 0.05  # per search of a pattern RE2 cannot run (suite_regex.py); over it: a failing verdict


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
# (suite_regex.py: the lint and the bounded engines; these names stay for older imports)


def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` is refused (invalid, too long or can backtrack catastrophically), or None."""
    from leader_eval.suite_regex import regex_problem as problem

    return problem(pattern)


def check_regex(pattern: str) -> None:
    """Raise ``LimitExceeded`` when a suite-supplied regex is invalid, too long or catastrophic."""
    why = regex_problem(pattern)
    if why:
        raise LimitExceeded(why)


def finditer_bounded(pattern: str, text: str) -> list[Any]:
    """All matches of a suite-supplied ``pattern`` in ``text``, or ``LimitExceeded`` when the
    pattern runs out of time (``MAX_REGEX_SECONDS``; suite_regex.py)."""
    from leader_eval.suite_regex import finditer_bounded as bounded

    return bounded(pattern, text)
