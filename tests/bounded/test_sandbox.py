"""Render bounds hold for every jinja2 filter, test, operator and method (issue 20 item 4).

Generated per class: every builtin filter (``jinja2.filters.FILTERS``, plus ``tojson``), every
test, every operator and every public method of a text, a byte string, a list and a dict a template
can reach, on hostile operands (long text, wide-character text, long lists, a list nested into
itself whose text is 10**8 characters, big integers, iterators, mappings) and hostile arguments
(the largest integer allowed, long strings, a default or attribute path applied to every item, a
filter or test applied to every item with a long argument). The limits are scaled down so that each
render is small; each render must end refused (``LimitExceeded``), in an ordinary error or with a
result, and never allocate more than a small multiple of the value limit on the way
(``tracemalloc``'s peak: memory counted, not time). Each template is compiled once and rendered
with every operand and argument set as variables (``x | f(*a, **k)``): compiling dominated before.
The issue's findings run once each with the real limits.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2.filters
import jinja2.tests
import pytest

from leader_eval.bounded import limits, sandbox
from leader_eval.bounded.limits import LimitExceeded
from leader_eval.bounded.sandbox import BoundedSandbox, render_size, run_bounded
from leader_eval.errors import ChatTemplateError, SuiteError

VALUE = 2_000  # the scaled value limit; hostile operands are sized against it
PEAK = 134 * VALUE  # bytes: 512 MiB per 4,000,000 characters, as the real limits allow


def n(count: int) -> int:
    """``count`` as written for a value limit of 5,000, scaled to ``VALUE``."""
    return max(count * VALUE // 5_000, 1)


@pytest.fixture
def scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_RENDER_VALUE", VALUE)
    monkeypatch.setattr(limits, "MAX_RENDER_OUTPUT", 2 * VALUE)
    monkeypatch.setattr(limits, "MAX_RENDER_SECONDS", 30.0)  # never the bound that decides here


def _nested(leaf: int) -> list[Any]:
    """Six small lists, each holding the one before ten times: a text of 10**5 * leaf characters."""
    a: list[Any] = ["x" * leaf] * 10
    for _ in range(5):
        a = [a] * 10
    return a


K = VALUE - 1  # the largest integer argument allowed
Y = "y" * K  # the longest text argument allowed
N6 = _nested(40)  # 4 * 10**6 characters of text from six small lists
WIDE = "中文 \n" * n(1000)  # 4/5 of the limit, each character a new object when split, listed or joined

OPERANDS: dict[str, Callable[[], Any]] = {  # a function: an iterator is used up by one render
    "text": lambda: "ab cd\n" * n(700),
    "wide_text": lambda: WIDE,
    "list": lambda: ["x" * n(100)] * 40,
    "ints": lambda: [0] * n(1200),
    "nested": lambda: N6,
    "bigint": lambda: 2**60000,
    "iterator": lambda: map(str, range(n(800))),
    "dicts": lambda: [{"a": "x" * 20, "b": 1}] * n(120),
    "mapping": lambda: {f"k{i}": "x" * 10 for i in range(n(300))},
}
ARGS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((K,), {}),
    ((K, Y), {}),
    ((Y, Y), {}),
    ((1, Y), {}),  # groupby(1, default=...): every item misses the attribute and takes the default
    ((N6,), {}),
    ((), {"attribute": 0, "default": Y}),  # map and groupby by keyword
    ((), {"attribute": 0, "default": Y, "case_sensitive": True}),
    ((), {"attribute": "a." * (K // 2)}),  # a long attribute path, looked up in every item
    ((), {"attribute": "a," * (K // 2)}),  # many attributes per item (sort, unique, min, max)
    (("center", K), {}),  # map: a filter applied to every item with an argument
    (("replace", "", Y), {}),
    (("equalto", Y), {}),  # select and reject: a test applied to every item
    ((0, "equalto", Y), {}),  # selectattr and rejectattr
]
FILTERS = sorted({*jinja2.filters.FILTERS, "tojson"})


def _renders(env: BoundedSandbox, source: str, variables: list[dict[str, Any]]) -> list[str | None]:
    """Compile ``source`` once and render it with each set of variables under the bounds; None
    where refused or failed. Asserts each render's memory peak."""
    template = env.from_string(source)
    out: list[str | None] = []
    tracemalloc.start()
    try:
        for v in variables:
            v = {k: x() if callable(x) else x for k, x in v.items()}
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            try:
                out.append(str(run_bounded(template.render, v)))
            except LimitExceeded:
                out.append(None)
            except Exception:  # a template error of the operation's own (wrong type...): not a hang
                out.append(None)
            _, peak = tracemalloc.get_traced_memory()
            shown = {k: (x[:40] if isinstance(x, str | bytes) else type(x).__name__) for k, x in v.items()}
            assert peak - before < PEAK, f"{source} with {shown} allocated {peak - before:,} bytes"
            del v
    finally:
        tracemalloc.stop()
    return out


def _every(operands: dict[str, Any], args: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"x": x, "a": a, "k": k} for x in operands.values() for a, k in args]


@pytest.mark.parametrize("name", FILTERS)
def test_every_filter_is_refused_or_cheap_on_hostile_operands(scaled: None, name: str) -> None:
    outs = _renders(BoundedSandbox(), f"{{{{ x | {name}(*a, **k) }}}}", _every(OPERANDS, ARGS))
    assert all(out is None or len(out) <= limits.MAX_RENDER_OUTPUT for out in outs)


@pytest.mark.parametrize("name", sorted(n for n in jinja2.tests.TESTS if n.isidentifier()))  # "==" is "eq" ...
def test_every_test_is_refused_or_cheap_on_hostile_operands(scaled: None, name: str) -> None:
    args: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((), {}), ((N6,), {}), ((K,), {}), ((Y,), {})]
    outs = _renders(BoundedSandbox(), f"{{{{ x is {name}(*a, **k) }}}}", _every(OPERANDS, args))
    assert set(outs) <= {None, "True", "False"}


OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "in", "not in"]
SIDES: list[Any] = [
    "ab cd\n" * n(700),
    WIDE,
    N6,
    2**60000,
    ["x" * n(100)] * 40,
    K,
    "%s" * n(1000),
    f"%0{K}d",
    ("y" * n(1200),) * 4,
    {"a": "x" * n(3000)},
    f"%0{VALUE * 1000}d",  # a width over the limit
    f"%0{VALUE * 1000}d".encode(),  # byte strings format with % too
    b"%s" * n(1000),
    ("y" * n(1200)).encode(),
]


@pytest.mark.parametrize("op", OPERATORS)
def test_every_operator_is_refused_or_cheap_on_hostile_operands(scaled: None, op: str) -> None:
    outs = _renders(BoundedSandbox(), f"{{{{ l {op} r }}}}", [{"l": a, "r": b} for a in SIDES for b in SIDES])
    assert all(out is None or len(out) <= limits.MAX_RENDER_OUTPUT for out in outs)


OWNERS: dict[str, Any] = {
    "text": "a\t" * n(1200),
    "wide_text": "中\t" * n(1200),
    "short_tabs": "\t" * n(500),  # under the limit at tab size 8; a tab size given by keyword is not
    "bytes": b"a\t" * n(1200),
    "short_byte_tabs": b"\t" * n(500),
    "list": ["y" * n(100)] * 40,
    "dict": {f"k{i}": "x" * 10 for i in range(n(300))},
}
METHOD_ARGS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((K,), {}),
    (("a", Y), {}),
    ((N6,), {}),
    (({97: "y" * n(1200)},), {}),
    ((["y" * n(1200)] * 4,), {}),
    ((Y,), {}),
    ((K, "😀"), {}),
    (("a", K), {}),
    (("\t", Y), {}),
    (("a", Y[: K // 2]), {}),  # under the limit as an argument (a byte string's text is longer than its length)
    (("", Y[: K // 2]), {}),
    ((), {"tabsize": K}),  # a size given by keyword
    (("ascii", "namereplace"), {}),  # an encoding error handler that writes each character's name
]
METHODS = sorted({m for owner in OWNERS.values() for m in dir(owner) if not m.startswith("_")})


def _as_bytes(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.encode() if isinstance(a, str) else [b"y" * n(1200)] * 4 if isinstance(a, list) else a for a in args)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_is_refused_or_cheap(scaled: None, method: str) -> None:
    """Every public method of every kind of value a template builds, on long and wide owners and
    hostile arguments (``str.join`` over a text's characters was found here)."""
    variables = [
        {"s": owner, "a": _as_bytes(args) if isinstance(owner, bytes) else args, "k": kwargs}
        for owner in OWNERS.values()
        if hasattr(owner, method)
        for args, kwargs in METHOD_ARGS
    ]
    outs = _renders(BoundedSandbox(), f"{{{{ s.{method}(*a, **k) }}}}", variables)
    assert all(out is None or len(out) <= limits.MAX_RENDER_OUTPUT for out in outs)


def test_an_iterator_is_sized_like_the_list_it_makes(scaled: None) -> None:
    """A filter that reads its whole input lists an iterator first (each item measured), so the
    rules that size by the number of items hold for it too: groupby's default, an attribute path."""
    env = BoundedSandbox()
    for source in (
        "{{ (x | map('string')) | groupby(0, default=y) }}",
        "{{ (x | map('string')) | sort(attribute=path) }}",
        "{{ (x | map('string')) | join(y) }}",
    ):
        with pytest.raises(LimitExceeded, match="would build"):
            run_bounded(env.from_string(source).render, x="ab cd" * n(200), y="y" * 100, path="a." * 100)


def test_groupby_and_join_over_a_text_are_sized_before_they_run(scaled: None) -> None:
    """The two holes the generated tests found: refused before the per-item copies are made, and
    the same operations on small operands give jinja2's answers."""
    env = BoundedSandbox()
    for source in (
        "{{ x | groupby(0, default=y) }}",
        "{{ y.join(x) }}",
        "{{ x | map(attribute=0, default=y) | list }}",
    ):
        with pytest.raises(LimitExceeded, match="would build"):
            run_bounded(env.from_string(source).render, x="ab cd" * n(600), y="y" * 100)
    source = "{{ x | groupby(0, default='d') | list }} {{ '-'.join(x) }} {{ '.'.join({'a': 1, 'b': 2}) }}"
    plain = jinja2.Environment().from_string(source)
    assert (
        run_bounded(env.from_string(source).render, x="aB")
        == plain.render(x="aB")
        == ("[('a', ['a']), ('B', ['B'])] a-B a.b")
    )


def test_memory_kept_by_a_few_lines_is_checked_as_work_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trace hook reads the resident set every 1024 events; values kept alive by a few lines
    (each list of a wide text's characters is ~17 bytes per character measured) are caught as their
    measured size adds up, with no event in between."""
    monkeypatch.setattr(limits, "MAX_RENDER_VALUE", VALUE)
    reads = iter(range(2**30, 2**40, 2**20))  # each read of the resident set: 1 MiB more than the last
    monkeypatch.setattr(sandbox, "_rss", lambda: next(reads))
    monkeypatch.setattr(limits, "MAX_RENDER_MEMORY_GROWTH", 8 * 2**20)
    source = "{% set a = [x | list, x | list, x | list, x | list, x | list, x | list, x | list, x | list] %}" * 4
    with pytest.raises(LimitExceeded, match="grew memory"):
        run_bounded(BoundedSandbox().from_string(source).render, x="中" * n(900))


def test_a_shared_literal_is_measured_by_the_text_it_writes() -> None:
    """Six small literals make a 10**8-character text: the walk stops at the limit, not the end."""
    assert render_size(_nested(50), 1000) == 1001
    assert render_size(["ab", 1, None, {"k": "v"}]) < 64


# The findings of issue 20 with the real limits, each once (the scaffold and chat template surfaces
# share the sandbox: each surface gets half, and each of the issue's two classes, sum and %, runs in both).
NESTED_DEF = "{% set n1 = ['x' * 5000] * 10 %}" + "".join(
    f"{{% set n{i + 1} = [{', '.join([f'n{i}'] * 10)}] %}}" for i in range(1, 6)
)  # n6's text: 10**5 * 5000 characters from six small literals
FINDINGS = {
    # 82-89 s for one render: adding lists one by one is quadratic, in one uninterruptible call
    "sum": ("scaffold", "{{ (['x' * 1000] * 3000) | sum(start='') }}"),
    "sum_lists": ("chat", "{{ ([[0] * 100] * 10000) | sum(start=[]) }}"),
    # 3-3.9 GB: each conversion writes one argument of 3,000,000 characters
    "percent": ("scaffold", "{% set d = {'a': 'x' * 3000000} %}{{ ('%(a)s' * 100) % d }}"),
    "percent_width": ("chat", "{{ '%0999999999d' % 1 }}"),
    "format_width": ("scaffold", "{{ '{:>999999999}'.format(1) }}"),
    "format_fields": ("chat", "{% set s = 'x' * 3000000 %}{{ ('{0}' * 1000).format(s) }}"),
    "range_sum": ("scaffold", "{{ range(10**9) | sum }}"),
    "nested_output": ("chat", NESTED_DEF + "{{ n6 }}"),
    "nested_tojson": ("scaffold", NESTED_DEF + "{{ n6 | tojson }}"),
    "deep_tojson_indent": (
        "chat",
        "{% set ns = namespace(x=[0] * 1000) %}{% for i in range(500) %}{% set ns.x = [ns.x] %}{% endfor %}"
        "{{ ns.x | tojson(indent=64) }}",
    ),
    "wordwrap": ("scaffold", "{{ ('ab ' * 1000000) | wordwrap(1, wrapstring='y' * 3000000) }}"),
    "groupby_default": ("chat", "{{ ('ab' * 1000000) | groupby(0, default='y' * 1000) }}"),
    "join_characters": ("scaffold", "{{ ('y' * 1000).join('ab' * 1000000) }}"),
}


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_issue_findings_are_refused(tmp_path: Path, name: str) -> None:
    surface, source = FINDINGS[name]
    if surface == "scaffold":
        from leader_eval.suite.load import load_suite
        from leader_eval.suite.render import render_messages
        from tests.suite.test_render import CASE_LINE, _suite

        suite = load_suite(_suite(tmp_path, source))
        with pytest.raises(SuiteError) as err:
            render_messages(suite, suite.cases[0])
        assert err.value.line == CASE_LINE and "\n" not in str(err.value)
    else:
        from leader_eval.suite.chat_template import render_chat_template

        with pytest.raises(ChatTemplateError) as chat_err:
            render_chat_template(source, [{"role": "user", "content": "hi"}], source="evil.gguf")
        assert str(chat_err.value).startswith("evil.gguf: ") and "\n" not in str(chat_err.value)


def test_ordinary_templates_render_as_before() -> None:
    env = BoundedSandbox()
    source = (
        "{{ [1, 2, 3] | sum }} {{ ['a', 'b'] | sum(start='') }} {{ 'a %s %d' % ('b', 3) }} {{ {'a': 1} | tojson }}"
        " {{ [1, 2] | map('string') | join(',') }} {{ 'x' in 'xy' }} {{ {'k': 1}['k'] }} {{ '{:>3}'.format(1) }}"
        " {{ [3, 1, 2] | sort | list }} {{ 'a b' | wordwrap(1) | length }} {{ ns }}"
        " {{ [{'c': 'NY'}, {}] | groupby('c', default='LA') | map(attribute='grouper') | join(',') }}"
        " {{ [{'n': 'a'}, {}] | map(attribute='n', default='-') | join }} {{ ', '.join('ab') }}"
    )
    out = run_bounded(env.from_string(source).render, ns=[1])
    assert out == '6 ab a b 3 {"a": 1} 1,2 True 1   1 [1, 2, 3] 3 [1] LA,NY a- a, b'


def test_the_reports_provenance_render_has_the_same_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """overlap.py renders the scaffold again for the report; a template can take another branch
    there (``random``), so that render runs under the same bounds (before: unbounded, a loop of
    loops rendered to the end, and each written value was turned into text unmeasured)."""
    from leader_eval.studies.overlap import _ProvenanceRenderer
    from leader_eval.suite.load import load_suite
    from tests.suite.test_render import _suite

    monkeypatch.setattr(limits, "MAX_RENDER_SECONDS", 0.2)
    slow = "{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}done"
    suite = load_suite(_suite(tmp_path, slow))
    assert _ProvenanceRenderer(suite, set()).render(suite.cases[0]) is None
    ok = load_suite(_suite(tmp_path, "{{ 'a' ~ 'b' }}"))
    assert _ProvenanceRenderer(ok, set()).render(ok.cases[0]) is not None


def test_the_memory_probe_reads_its_own_file_even_when_its_descriptor_number_is_reused(tmp_path: Path) -> None:
    """The render budget's memory probe keeps /proc/self/statm open; if other code in the process
    closes that descriptor and a file of numbers takes its number, the probe must not read that
    file (its numbers never grow: the memory bound would stop bounding)."""
    import os

    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc here: the probe reports 0 and the time bound alone applies")
    sandbox._rss()
    kept = sandbox._statm[1]
    os.close(kept)
    impostor = tmp_path / "numbers"
    impostor.write_text("1 2 3 4 5 6 7\n")
    fd = os.open(impostor, os.O_RDONLY)
    if fd != kept:  # put the impostor under the kept number
        os.dup2(fd, kept)
        os.close(fd)
    try:
        before = sandbox._rss()
        block = bytearray(64 * 2**20)
        block[::4096] = b"\1" * len(block[::4096])  # touch every page: resident
        assert sandbox._rss() - before >= 48 * 2**20
    finally:
        os.close(kept)
