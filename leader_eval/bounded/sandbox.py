"""Bounded rendering of untrusted jinja2 templates (scaffolds and model chat templates alike).

A template is code written by someone else. Nothing it does may take more than
``limits.MAX_RENDER_SECONDS``, grow memory by more than ``limits.MAX_RENDER_MEMORY_GROWTH``, or build
a value whose text is longer than ``limits.MAX_RENDER_VALUE`` characters. The bound holds by
construction, not by a list of bad shapes:

- **Every value is measured before it is used.** ``render_size`` is the length of a value's text
  (``str``, ``repr`` inside a container, JSON), found by a walk that stops as soon as it passes the
  limit, so it costs at most the limit. A list literal repeated into itself (``[a, a, a, a]`` four
  levels deep) has a small length and a huge text: the walk counts each shared item every time
  ``str`` would. Every operand of an operator (``+ - * / // % **``, ``~``, comparisons and ``in``),
  every argument of a filter, test or call, every dictionary key and subscript, and every value
  written to the output is measured before the operation runs, and refused when over the limit.
- **Operations whose result can outgrow their operands are sized before they run**: ``*`` (text
  times count), ``**`` and ``*`` on integers (bits), ``%`` (each conversion's width and argument;
  byte strings too, as for every sized method), keyword arguments (``expandtabs(tabsize=...)``),
  ``str.format`` (a bounded formatter tallies each field as it is written), ``join`` (items plus
  separators, over any iterable: a text's characters, a mapping's keys), ``replace``,
  ``expandtabs``, ``translate``, ``indent``, ``wordwrap``, ``urlize``,
  ``center``/``ljust``/``rjust``/``zfill`` (integer arguments), ``tojson``/``pprint`` (their
  indentation at every nesting level), ``batch``/``slice`` (the items they make), an attribute path
  (items times path) and a ``default`` (``groupby``, ``map``: items times default; groupby copies
  it into each item's key). A filter that reads its whole input lists an iterator first, each item
  measured, so these rules see the number of items. Integer arguments are at most
  ``MAX_RENDER_VALUE``; ``range`` at most jinja2's 100,000 items.
- **Every result is measured after it is built**, a last line for anything an operation sized
  wrongly.
- **Time is checked inside every loop and call.** A ``sys.settrace`` hook traces template code
  (file ``<template>``) and, while a filter, test or call runs, every Python frame it starts
  (``unique``, ``groupby``, ``textwrap``, ``pprint`` ...): every 1024 lines it checks the clock and
  the resident set size; the resident set is also read each time another ``MAX_RENDER_VALUE / 16``
  characters have been measured (values a few lines keep alive, with no trace event in between).
  The one C-level step that cannot be interrupted is bounded by its operands' measured size.
  ``sum`` is re-implemented as a loop that sizes each addition (adding lists one by one is
  quadratic: it took 82-89 s in one render).
- **Work is counted.** Every measured operand adds its size to the render's work; past
  ``MAX_RENDER_WORK_FACTOR * MAX_RENDER_VALUE`` the render is refused, whatever the clock says.

Iterators passed to a filter or call (``map``, ``select`` ...) are measured item by item as they
are consumed. Every bound ends in ``LimitExceeded`` with a one-line message; callers add the file
and line (render.py: the suite file and case line, and the template's origin; chat_template.py:
the template's source).
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from contextlib import contextmanager, suppress
from typing import Any, cast

import jinja2.filters
from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import Compare, Concat, Dict
from jinja2.runtime import Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import Namespace, _PassArg
from markupsafe import Markup

from leader_eval.bounded import limits
from leader_eval.bounded.limits import LimitExceeded

# --------------------------------------------------------------------------- sizes

_VIEWS: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))
_SEQUENCES = (list, tuple, set, frozenset, *_VIEWS)


def _int_chars(v: int) -> int:
    return v.bit_length() * 30103 // 100000 + 2


def render_size(value: Any, cap: int | None = None, *, indent: int = 0) -> int:
    """The length of ``value``'s text (``str`` of it, or its ``repr``/JSON inside a container),
    counting every shared item each time it is written, plus ``indent`` characters per nesting
    level on every line when ``indent`` is set (``tojson(indent=...)``, ``pprint``). Stops as soon
    as the count passes ``cap`` (default ``MAX_RENDER_VALUE``) and returns ``cap + 1``: the walk
    costs at most the limit. Escapes are not counted (a ``repr`` is at most ten times longer)."""
    cap = limits.MAX_RENDER_VALUE if cap is None else cap
    v = value
    if type(v) is str or isinstance(v, str):
        return len(v) if len(v) <= cap else cap + 1
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        t = type(v)
        if t is str or isinstance(v, str):
            total += len(v) + 2 * (depth > 0)
        elif t is int or t is bool:
            total += _int_chars(v)
        elif t is float or v is None:
            total += 24
        elif isinstance(v, Undefined):
            pass
        elif isinstance(v, bytes | bytearray):
            total += len(v) + 3
        elif isinstance(v, _SEQUENCES):
            v = cast(Iterable[Any], v)
            n = len(v)  # type: ignore[arg-type]
            total += 2 + 2 * n + (n * (1 + (depth + 1) * indent) if indent else 0)
            if total > cap:
                return cap + 1
            for x in v:
                tx = type(x)
                if tx is str:
                    total += len(x) + 2
                elif tx is int:
                    total += _int_chars(int(x))
                else:
                    stack.append((x, depth + 1))
        elif isinstance(v, Mapping):
            n = len(v)
            total += 2 + 4 * n + (n * (1 + (depth + 1) * indent) if indent else 0)
            if total > cap:
                return cap + 1
            for k, x in v.items():
                stack.append((k, depth + 1))
                stack.append((x, depth + 1))
        elif isinstance(v, Namespace):
            total += 13
            stack.append((object.__getattribute__(v, "_Namespace__attrs"), depth))
        elif isinstance(v, range):
            total += len(v) * (max(_int_chars(v.start), _int_chars(v.stop)) + 2)
        else:
            total += 16  # an object of the runtime (a loop, a macro, a cycler): a short repr
        if total > cap:
            return cap + 1
    return total


def _measure(value: Any, what: str, cap: int | None = None) -> int:
    limit = limits.MAX_RENDER_VALUE if cap is None else cap
    n = render_size(value, limit)
    if n > limit:
        raise LimitExceeded(f"{what}: a value of over {limit:,} characters (limit {limit:,})")
    tick(n)
    return n


def _check_result(value: Any, what: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > limits.MAX_INT_BITS:
        raise LimitExceeded(f"{what} built an integer over {limits.MAX_INT_BITS} bits")
    n = render_size(value)
    if n > limits.MAX_RENDER_VALUE:
        raise LimitExceeded(f"{what} built a value of over {limits.MAX_RENDER_VALUE:,} characters")
    tick(n)
    return value


def _check_int_args(args: Iterable[Any], what: str) -> None:
    for a in args:
        if isinstance(a, int) and not isinstance(a, bool) and abs(a) > limits.MAX_RENDER_VALUE:
            raise LimitExceeded(f"{what}: argument {a} is too large (limit {limits.MAX_RENDER_VALUE:,})")


def _over(n: int, what: str) -> None:
    if n > limits.MAX_RENDER_VALUE:
        raise LimitExceeded(f"{what} would build a value of over {limits.MAX_RENDER_VALUE:,} characters")


class _MeasuredIter:
    """An iterator handed to a filter or call: each item is measured as it is consumed, and all
    of them together may not pass the value limit (as a list of them could not)."""

    __slots__ = ("_it", "_total", "_what")

    def __init__(self, it: Iterator[Any], what: str) -> None:
        self._it, self._total, self._what = it, 0, what

    def __iter__(self) -> _MeasuredIter:
        return self

    def __next__(self) -> Any:
        item = next(self._it)
        t = type(item)
        self._total += (len(item) if t is str else 8 if t in (int, float, bool) else render_size(item)) + 2
        if self._total > limits.MAX_RENDER_VALUE:
            raise LimitExceeded(f"{self._what}: its items come to over {limits.MAX_RENDER_VALUE:,} characters")
        tick(0)
        return item


def _guard(value: Any, what: str) -> Any:
    if isinstance(value, Iterator) and not isinstance(value, _MeasuredIter):
        return _MeasuredIter(value, what)
    _measure(value, what)
    return value


# --------------------------------------------------------------------------- sizing rules

_PERCENT_SPEC = re.compile(r"%(\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)", re.S)
_DIGITS = re.compile(r"\d+")


def _percent_size(fmt: str | bytes | bytearray, args: Any, what: str) -> int:
    """An upper bound on the length of ``fmt % args`` (a text or a byte string: the same specs)."""
    if isinstance(fmt, bytes | bytearray):
        fmt = bytes(fmt).decode("latin-1")
    specs = 0
    named = False
    widest = 0
    for m in _PERCENT_SPEC.finditer(fmt):
        if m.group(4) == "%":
            continue
        specs += 1
        named = named or m.group(1) is not None
        for g in (m.group(2), m.group(3)):
            if g and g != "*":
                if int(g) > limits.MAX_RENDER_VALUE:
                    raise LimitExceeded(f"{what}: format width {g} is too large")
                widest = max(widest, int(g))
    items = args if isinstance(args, tuple) else (args,)
    _check_int_args(items, what)
    widest = max([widest] + [abs(a) for a in items if isinstance(a, int) and not isinstance(a, bool)])
    size = render_size(args)
    # each conversion writes one argument (a tuple's own item; any value of a mapping)
    return len(fmt) + specs * widest + (specs * size if named or not isinstance(args, tuple) else size)


def _brace_widths(fmt: str, what: str, depth: int = 0) -> None:
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format raises its own error
    for _literal, _field, spec, _conv in parsed:
        if spec:
            for d in _DIGITS.findall(spec):
                if int(d) > limits.MAX_RENDER_VALUE:
                    raise LimitExceeded(f"{what}: format width {d} is too large")
            if depth < 2:
                _brace_widths(spec, what, depth + 1)


def _binop_size(op: str, left: Any, right: Any, sizes: tuple[int, int]) -> None:
    what = f"template: {op!r}"
    seqs = str | bytes | list | tuple
    if op == "*":
        if isinstance(left, seqs) and isinstance(right, int):
            n = sizes[0] * max(right, 0)
        elif isinstance(right, seqs) and isinstance(left, int):
            n = sizes[1] * max(left, 0)
        elif isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > limits.MAX_INT_BITS:
                raise LimitExceeded(f"{what} would build an integer over {limits.MAX_INT_BITS} bits")
            return
        else:
            return
        _over(n, what)
    elif op == "+":
        _over(sizes[0] + sizes[1], what)
    elif op == "**":
        big = isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0
        if big and left.bit_length() * right > limits.MAX_INT_BITS:
            raise LimitExceeded(f"{what} would build an integer over {limits.MAX_INT_BITS} bits")
    elif op == "%" and isinstance(left, str | bytes | bytearray):
        _over(_percent_size(left, right, what), what)


_TEXTS = (str, bytes, bytearray)


def _replace_size(s: Any, /, old: Any = "", new: Any = "", count: Any = -1, *_: Any, **__: Any) -> int:
    # a text's or a byte string's; a mix of the two (or anything else) is the method's TypeError
    if not all(isinstance(v, _TEXTS) and isinstance(v, str) == isinstance(s, str) for v in (s, old, new)):
        return 0
    if len(new) <= len(old):
        return len(s)
    hits = (len(s) + 1) if len(old) == 0 else s.count(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(s) + hits * (len(new) - len(old))


def _join_size(sep: Any, /, items: Any = (), *_: Any, **__: Any) -> int:
    # any sized iterable: a text joins its characters, a mapping its keys (an iterator was listed
    # and measured first); the items' own text is at most the container's
    if not isinstance(items, Sized):
        return 0
    return render_size(items) + render_size(sep) * max(len(items) - 1, 0)


def _expandtabs_size(s: Any, /, tabsize: Any = 8, *_: Any, **__: Any) -> int:
    # tabsize may be given by keyword; a byte string counts its b"\t"
    width = max(tabsize, 0) if isinstance(tabsize, int) else 8
    return len(s) + s.count("\t" if isinstance(s, str) else b"\t") * width


def _translate_size(s: Any, /, table: Any = None, *_: Any, **__: Any) -> int:
    if isinstance(table, Mapping):
        longest = max((render_size(v) for v in table.values()), default=1)
        return len(s) * max(longest, 1)
    return len(s)  # a byte string's table maps each byte to one byte


_METHOD_SIZERS: dict[str, Callable[..., int]] = {
    "replace": _replace_size,
    "join": _join_size,
    "expandtabs": _expandtabs_size,
    "translate": _translate_size,
}


def _bound(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        sig = inspect.signature(func)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {}
    bound.apply_defaults()
    return dict(bound.arguments)


def _text_len(v: Any) -> int:
    return len(v) if isinstance(v, str) else render_size(v)


def _filter_size(name: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], what: str) -> None:
    """The size a filter's result can reach, from its arguments, for the filters whose result can
    outgrow them (every other builtin filter writes at most a constant times its input)."""
    if name not in _SIZED_FILTERS and "attribute" not in kwargs and name not in _ATTRIBUTE_FILTERS:
        return
    a = _bound(func, args, kwargs)
    given = a.get("kwargs")
    more: dict[str, Any] = given if name == "map" and isinstance(given, dict) else {}  # map(attribute=...)
    attribute, items = a.get("attribute", more.get("attribute")), a.get("value", a.get("iterable"))  # sum: iterable
    default = a.get("default", more.get("default")) if name in _DEFAULT_FILTERS else None
    if isinstance(attribute, str) and isinstance(items, Sized):
        # each item is looked up by the attribute path (and a miss names it): items x path
        _over(len(items) * len(attribute), what)
    if default is not None and isinstance(items, Sized):
        # any item's key or value can be the default, and groupby lower-cases each key (a copy
        # per item, made before anything is returned): items x default
        _over(len(items) * render_size(default), what)
    if name == "indent":
        s, width = a.get("s", ""), a.get("width", 4)
        w = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        _over(_text_len(s) + w * (str(s).count("\n") + 1 if isinstance(s, str) else 1), what)
    elif name == "join":
        items, sep = a.get("value"), a.get("d", "")
        if isinstance(items, Sized):  # a string joins its characters
            _over(render_size(items) + render_size(sep) * max(len(items) - 1, 0), what)
    elif name == "format":
        _over(_percent_size(str(a.get("value", "")), a.get("kwargs") or a.get("args") or (), what), what)
    elif name == "replace":
        s = a.get("s")
        if isinstance(s, str):
            _over(
                _replace_size(s, a.get("old"), a.get("new"), a.get("count") if a.get("count") is not None else -1), what
            )
    elif name == "wordwrap":
        s, width, wrap = a.get("s", ""), a.get("width", 79), a.get("wrapstring")
        if isinstance(s, str) and isinstance(width, int) and isinstance(wrap, str):
            lines = len(s) // max(width, 1) + s.count("\n") + 1
            _over(len(s) + lines * len(wrap), what)
    elif name == "urlize":
        value = a.get("value", "")
        n = _text_len(value)
        extra = sum(_text_len(a.get(k) or "") for k in ("target", "rel")) + 64
        _over(3 * n + (n // 4 + 1) * extra, what)
    elif name in ("tojson", "pprint"):
        indent = a.get("indent", 1 if name == "pprint" else None)
        w = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
        if w > limits.MAX_JSON_INDENT:
            raise LimitExceeded(f"{what}: indent is too large (limit {limits.MAX_JSON_INDENT})")
        _over(render_size(a.get("value", a.get("x")), indent=max(w, 0)), what)
    elif name == "batch":
        fill, count = a.get("fill_with"), a.get("linecount", 1)
        if fill is not None and isinstance(count, int):
            _over(count * (render_size(fill) + 2), what)
    elif name == "slice":
        count = a.get("slices", 1)
        if isinstance(count, int):
            fill = a.get("fill_with")
            _over(count * (4 + (render_size(fill) + 2 if fill is not None else 0)), what)
    elif name == "center":
        width = a.get("width", 80)
        if isinstance(width, int):
            _over(max(width, _text_len(a.get("value", ""))), what)


_ATTRIBUTE_FILTERS = frozenset(
    {"groupby", "map", "select", "selectattr", "reject", "rejectattr", "sort", "unique", "min", "max", "sum", "join"}
)
_DEFAULT_FILTERS = frozenset({"groupby", "map"})  # filters that put a default in place of each missing attribute
# filters that read their whole input before returning: an iterator is listed (each item measured)
# first, so that the rules above see how many items there are
_WHOLE_INPUT_FILTERS = _ATTRIBUTE_FILTERS - {"map", "select", "selectattr", "reject", "rejectattr"}
_SIZED_FILTERS = frozenset(
    {"indent", "join", "format", "replace", "wordwrap", "urlize", "tojson", "pprint", "batch", "slice", "center"}
)
# filters that neither write nor walk their input: O(1), nothing to measure
_CONSTANT_FILTERS = frozenset({"length", "count", "first", "default", "d", "attr"})
_CONSTANT_TESTS = frozenset(
    {
        "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "mapping", "number",
        "sequence", "iterable", "callable", "sameas", "escaped", "filter", "test", "string", "odd", "even",
    }
)  # fmt: skip


@jinja2.pass_environment
def _bounded_sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """jinja2's ``sum``, one sized addition at a time: adding lists or strings one by one is
    quadratic, and a single C-level ``sum`` over them cannot be interrupted."""
    if attribute is not None:
        iterable = map(jinja2.filters.make_attrgetter(environment, attribute), iterable)
    items = list(iterable)
    if all(type(x) in (int, float, bool) for x in items) and type(start) in (int, float, bool):
        return sum(items, start)
    total = start
    for x in items:
        sizes = (render_size(total), render_size(x))
        _binop_size("+", total, x, sizes)
        tick(sizes[0] + sizes[1])
        total = total + x
    return total


_REPLACEMENTS: dict[str, Callable[..., Any]] = {"sum": _bounded_sum}


def _wrap_filter(name: str, func: Callable[..., Any], kind: str = "filter") -> Callable[..., Any]:
    what = f"template: {kind} {name!r}"
    constant = name in (_CONSTANT_FILTERS if kind == "filter" else _CONSTANT_TESTS)
    skip = 1 if _PassArg.from_obj(func) is not None else 0
    listed = kind == "filter" and name in _WHOLE_INPUT_FILTERS

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if not constant:
            head, rest = args[:skip], args[skip:]
            rest = tuple(
                list(_MeasuredIter(a, what)) if listed and isinstance(a, Iterator) else _guard(a, what) for a in rest
            )
            args = head + rest
            kwargs = {k: _guard(v, what) for k, v in kwargs.items()}
            _check_int_args(rest, what)
            _check_int_args(kwargs.values(), what)
            _filter_size(name, func, args, kwargs, what)
        tick(0)
        with _deep():
            result = func(*args, **kwargs)
        if constant or kind == "test":
            return result
        return _check_result(result, what)

    bounded.__dict__["_leader_eval_bounded"] = True
    return bounded


# --------------------------------------------------------------------------- the environment


class _BoundedCodeGenerator(CodeGenerator):
    """``a ~ b`` goes through the environment's bounded join; every operand of a comparison and
    every key of a dict literal is measured first (comparing or hashing a value walks it)."""

    def visit_Concat(self, node: Concat, frame: Frame) -> None:
        self.write("environment.bounded_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def visit_Compare(self, node: Compare, frame: Frame) -> None:
        self.write("(environment.bounded_operand(")
        self.visit(node.expr, frame)
        self.write(")")
        for op in node.ops:
            self.write(f" {jinja2.compiler.operators[op.op]} environment.bounded_operand(")
            self.visit(op.expr, frame)
            self.write(")")
        self.write(")")

    def visit_Dict(self, node: Dict, frame: Frame) -> None:
        self.write("{")
        for idx, item in enumerate(node.items):
            if idx:
                self.write(", ")
            self.write("environment.bounded_operand(")
            self.visit(item.key, frame)
            self.write("): ")
            self.visit(item.value, frame)
        self.write("}")


class _BoundedFormatterMixin:
    """``str.format`` in a template: each field's width and value are checked before it is
    written, and the fields written so far are tallied (``string.Formatter`` runs in Python)."""

    _tally = 0

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self._tally = len(format_string)
        _over(self._tally, "template: str.format")
        return super().vformat(format_string, args, kwargs)  # type: ignore[misc]

    def format_field(self, value: Any, format_spec: str) -> Any:
        what = "template: str.format"
        for d in _DIGITS.findall(format_spec):
            if int(d) > limits.MAX_RENDER_VALUE:
                raise LimitExceeded(f"{what}: format width {d} is too large")
        self._tally += max(_measure(value, what), max((int(d) for d in _DIGITS.findall(format_spec)), default=0))
        _over(self._tally, what)
        return super().format_field(value, format_spec)  # type: ignore[misc]

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        _measure(value, "template: str.format")
        return super().convert_field(value, conversion)  # type: ignore[misc]


class _BoundedFormatter(_BoundedFormatterMixin, SandboxedFormatter):
    pass


class _BoundedEscapeFormatter(_BoundedFormatterMixin, SandboxedEscapeFormatter):
    pass


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with every operation measured before and after it runs (see the
    module docstring). Used for scaffold templates and for model chat templates alike
    (chat_template.py copies the Hugging Face extensions, filters and globals onto one of these)."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # lipsum(n) writes n paragraphs; no scaffold or chat template needs it
        self.globals.pop("lipsum", None)
        self.filters.update(_REPLACEMENTS)
        given = self.finalize

        def finalize(value: Any) -> Any:
            # every value written to the output: its text may not pass the output bound
            _measure(value, "template output", limits.MAX_RENDER_OUTPUT)
            return given(value) if given is not None else value

        self.finalize = finalize

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        what = f"template: {operator!r}"
        sizes = (_measure(left, what), _measure(right, what))
        _binop_size(operator, left, right, sizes)
        return _check_result(self.binop_table[operator](left, right), what)

    def bounded_operand(self, value: Any) -> Any:
        if type(value) not in (str, int, bool, float) and value is not None:
            _measure(value, "template: comparison or key")
        return value

    def getitem(self, obj: Any, argument: Any) -> Any:
        if type(argument) not in (str, int):
            _measure(argument, "template: subscript")
        return super().getitem(obj, argument)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(__obj, "__name__", type(__obj).__name__)
        what = f"template: {name}()"
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if name == "join" and isinstance(owner, str):  # a joined iterator is consumed whole anyway
            args = tuple(list(_MeasuredIter(a, what)) if isinstance(a, Iterator) else a for a in args)
        args = tuple(_guard(a, what) for a in args)
        kwargs = {k: _guard(v, what) for k, v in kwargs.items()}
        _check_int_args(args, what)
        _check_int_args(kwargs.values(), what)
        if isinstance(owner, str | bytes):
            if name in ("format", "format_map"):
                _brace_widths(owner if isinstance(owner, str) else "", what)
            sizer = _METHOD_SIZERS.get(name)
            if sizer is not None:
                _over(sizer(owner, *args, **kwargs), what)  # keyword arguments too (tabsize=...)
        tick(0)
        with _deep():
            result = super().call(__context, __obj, *args, **kwargs)
        return _check_result(result, what)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        f_self = value.__self__
        is_format_map = value.__name__ == "format_map"
        formatter: SandboxedFormatter
        if isinstance(f_self, Markup):
            formatter = _BoundedEscapeFormatter(self, escape=f_self.escape)
        else:
            formatter = _BoundedFormatter(self)
        str_type = type(f_self)

        def bounded_format(*args: Any, **kwargs: Any) -> str:
            if is_format_map:
                if kwargs:
                    raise TypeError("format_map() takes no keyword arguments")
                if len(args) != 1:
                    raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
                kwargs, args = args[0], ()
            return str_type(formatter.vformat(f_self, args, kwargs))

        return functools.update_wrapper(bounded_format, value)

    def bounded_join(self, parts: tuple[Any, ...]) -> str:
        total = sum(_measure(p, "template: '~'") for p in parts)
        _over(total, "template: '~'")
        return "".join(p if isinstance(p, str) else str(p) for p in parts)

    def concat(self, parts: Iterable[str]) -> str:
        # every rendered output, captured block and macro result is joined here
        out: list[str] = []
        total = 0
        for p in parts:
            total += len(p)
            if total > limits.MAX_RENDER_OUTPUT:
                raise LimitExceeded(f"template output is over {limits.MAX_RENDER_OUTPUT:,} characters")
            out.append(p)
        return "".join(out)

    def _generate(self, *args: Any, **kwargs: Any) -> str:
        # filters and tests registered after construction (tojson, ...) get the same bounds
        # before any template is compiled, because constant folding calls them at compile time
        for table, kind in ((self.filters, "filter"), (self.tests, "test")):
            for name, func in list(table.items()):
                if not getattr(func, "_leader_eval_bounded", False):
                    table[name] = _wrap_filter(name, func, kind)
        return str(super()._generate(*args, **kwargs))


# --------------------------------------------------------------------------- time, memory, work


# [pid, fd, st_dev, st_ino] of /proc/self/statm, kept open: opening it for every render was ~15%
# of rendering a one-line prompt. The descriptor is used only while it is still that file (code
# in the process may close the number and open another file under it: read, that file would feed
# the memory bound stale numbers, so it would stop bounding) and only in the process that opened
# it (a forked child's /proc/self is another process). Otherwise the file is opened again.
_statm: list[int] = []


def _same_file(fd: int, dev: int, ino: int) -> bool:
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


def _rss() -> int:
    if _statm and _statm[0] == os.getpid() and _same_file(*_statm[1:]):
        try:
            return _rss_from(_statm[1])
        except (OSError, ValueError, IndexError, AttributeError):
            pass
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        st = os.fstat(fd)
    except (OSError, AttributeError):
        return 0
    if _statm and _statm[0] != os.getpid() and _same_file(*_statm[1:]):
        with suppress(OSError):
            os.close(_statm[1])  # the parent's, inherited across a fork; any other file is not ours
    _statm[:] = [os.getpid(), fd, st.st_dev, st.st_ino]
    try:
        return _rss_from(fd)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def _rss_from(fd: int) -> int:
    fields = os.pread(fd, 256, 0).split()
    if len(fields) != 7 or not all(f.isdigit() for f in fields):  # statm's seven page counts, or not statm
        raise ValueError("not /proc/self/statm")
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


_TEMPLATE_FILE = "<template>"


class _Budget:
    __slots__ = ("deadline", "deep", "limit", "next_rss", "rss0", "work")

    def __init__(self, seconds: float) -> None:
        self.limit = seconds
        self.deadline = time.monotonic() + seconds
        self.rss0 = _rss()
        self.work = 0
        self.next_rss = _rss_work_step()
        self.deep = 0

    def check_memory(self) -> None:
        if self.rss0 and _rss() - self.rss0 > limits.MAX_RENDER_MEMORY_GROWTH:
            mib = limits.MAX_RENDER_MEMORY_GROWTH // 2**20
            raise LimitExceeded(f"template rendering grew memory by over {mib} MiB")


def _rss_work_step() -> int:
    # the resident set is read again after this much measured work: values kept alive by a few
    # template lines (fewer than the trace hook's 1024 events) are each measured, so their memory
    # is seen within one step (a list of a text's wide characters: ~17 bytes per character of work)
    return max(limits.MAX_RENDER_VALUE // 16, 1)


_active = threading.local()


def tick(work: int) -> None:
    """Count ``work`` (characters measured) and check the clock; nothing outside a render."""
    budget: _Budget | None = getattr(_active, "budget", None)
    if budget is None:
        return
    budget.work += work
    if budget.work > limits.MAX_RENDER_WORK_FACTOR * limits.MAX_RENDER_VALUE:
        raise LimitExceeded(
            f"template rendering did over {limits.MAX_RENDER_WORK_FACTOR * limits.MAX_RENDER_VALUE:,} "
            "characters of work"
        )
    if budget.work >= budget.next_rss:
        budget.next_rss = budget.work + _rss_work_step()
        budget.check_memory()
    if time.monotonic() > budget.deadline:
        raise LimitExceeded(f"template rendering took longer than {budget.limit:g} s")


@contextmanager
def _deep() -> Iterator[None]:
    """Trace every Python frame a filter or call starts (library code), not only templates."""
    budget: _Budget | None = getattr(_active, "budget", None)
    if budget is None:
        yield
        return
    budget.deep += 1
    try:
        yield
    finally:
        budget.deep -= 1


@contextmanager
def render_budget(seconds: float | None = None) -> Iterator[None]:
    """Bound the wall-clock time, memory growth and work of template code run inside the block."""
    if getattr(_active, "budget", None) is not None:  # nested (a chat template inside a bounded call)
        yield
        return
    budget = _Budget(limits.MAX_RENDER_SECONDS if seconds is None else seconds)
    events = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal events
        events += 1
        if not events & 1023:
            if time.monotonic() > budget.deadline:
                raise LimitExceeded(f"template rendering took longer than {budget.limit:g} s")
            budget.check_memory()
        return local

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        return local if budget.deep or frame.f_code.co_filename == _TEMPLATE_FILE else None

    old = sys.gettrace()
    _active.budget = budget
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(old)
        _active.budget = None


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


__all__ = ["BoundedSandbox", "render_budget", "render_size", "run_bounded", "tick"]
