"""Render bounds hold for every jinja2 filter, test and operator (issue 20 item 4).

Generated per class: every builtin filter (``jinja2.filters.FILTERS``, plus ``tojson``) and every
operator, on hostile operands (long text, long lists, a list literal nested into itself whose text
is 10**8 characters, big integers, iterators) and hostile arguments (the largest integer allowed,
long strings). The limits are scaled down so each render is small; each render must end refused
(``LimitExceeded``) or with an ordinary error or a result, and never allocate more than a small
multiple of the value limit on the way (``tracemalloc``'s peak: memory counted, not time).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import jinja2.filters
import jinja2.tests
import pytest

from leader_eval import limits
from leader_eval.errors import ChatTemplateError, SuiteError
from leader_eval.limits import LimitExceeded
from leader_eval.sandbox import BoundedSandbox, render_size, run_bounded

VALUE = 5_000  # the scaled value limit; hostile operands are sized against it
PEAK = 400 * VALUE  # bytes: a bounded operation stays far below, an unbounded one far above


@pytest.fixture
def scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_RENDER_VALUE", VALUE)
    monkeypatch.setattr(limits, "MAX_RENDER_OUTPUT", 2 * VALUE)
    monkeypatch.setattr(limits, "MAX_RENDER_SECONDS", 30.0)  # never the bound that decides here


K = VALUE - 1  # the largest integer argument allowed
TEXT = "'ab cd\\n' * 700"  # 4,200 characters, under the limit
NESTED_DEF = "{% set n1 = ['x' * 40] * 10 %}" + "".join(
    f"{{% set n{i + 1} = [{', '.join([f'n{i}'] * 10)}] %}}" for i in range(1, 6)
)  # n6's text: 10**6 * 50 characters from six small literals
OPERANDS = {
    "text": TEXT,
    "list": "['x' * 100] * 40",
    "ints": "[0] * 1200",
    "nested": "n6",
    "bigint": "2 ** 60000",
    "iterator": "(range(800) | map('string'))",
    "dicts": "[{'a': 'x' * 20, 'b': 1}] * 120",
}
ARGS = ["", f"({K})", f"({K}, 'y' * {K})", f"('y' * {K}, 'y' * {K})", f"(1, 'y' * {K})", "(n6)"]
FILTERS = sorted({*jinja2.filters.FILTERS, "tojson"})


def _render(env: BoundedSandbox, source: str) -> str | None:
    """Render under the bounds; None when refused or failed. Asserts the memory peak."""
    tracemalloc.start()
    try:
        return str(run_bounded(lambda: env.from_string(source).render()))
    except LimitExceeded:
        return None
    except Exception:  # a template error of the filter's own (wrong type...): not a hang
        return None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < PEAK, f"{source[:120]!r} allocated {peak:,} bytes"


OPEN = {  # found by this test, not fixed yet (issue 20): the peak is over the bound, the render is refused
    "groupby": "groupby(default=...) on a long text still allocates per item before the result is refused",
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=OPEN[n])) if n in OPEN else n for n in FILTERS]
)
def test_every_filter_is_refused_or_cheap_on_hostile_operands(scaled: None, name: str) -> None:
    env = BoundedSandbox()
    for operand in OPERANDS.values():
        for args in ARGS:
            out = _render(env, f"{NESTED_DEF}{{{{ ({operand}) | {name}{args} }}}}")
            assert out is None or len(out) <= limits.MAX_RENDER_OUTPUT


@pytest.mark.parametrize("name", sorted(jinja2.tests.TESTS))
def test_every_test_is_refused_or_cheap_on_hostile_operands(scaled: None, name: str) -> None:
    env = BoundedSandbox()
    for operand in OPERANDS.values():
        for args in ("", "(n6)", f"({K})"):
            assert _render(env, f"{NESTED_DEF}{{{{ ({operand}) is {name}{args} }}}}") in (None, "True", "False")


OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "in", "not in"]


@pytest.mark.parametrize("op", OPERATORS)
def test_every_operator_is_refused_or_cheap_on_hostile_operands(scaled: None, op: str) -> None:
    env = BoundedSandbox()
    sides = [
        OPERANDS["text"],
        OPERANDS["nested"],
        OPERANDS["bigint"],
        OPERANDS["list"],
        str(K),
        "'%s' * 1000",
        f"'%0{K}d'",
        "('y' * 1200,) * 4",
    ]
    for left in sides:
        for right in sides:
            out = _render(env, f"{NESTED_DEF}{{{{ ({left}) {op} ({right}) }}}}")
            assert out is None or len(out) <= limits.MAX_RENDER_OUTPUT


STR_METHODS = ["center", "ljust", "rjust", "zfill", "expandtabs", "replace", "join", "format", "translate", "split"]


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(m, marks=pytest.mark.xfail(strict=True, reason="str.join over a text's characters: open"))
        if m == "join"
        else m
        for m in STR_METHODS
    ],
)
def test_string_methods_are_refused_or_cheap(scaled: None, method: str) -> None:
    env = BoundedSandbox()
    args = [f"{K}", f"'a', 'y' * {K}", "n6", "{97: 'y' * 1200}", "['y' * 1200] * 4", f"('y' * {K})"]
    for arg in args:
        _render(env, f"{NESTED_DEF}{{{{ ('a\\t' * 1200).{method}({arg}) }}}}")


def test_a_shared_literal_is_measured_by_the_text_it_writes() -> None:
    """Six small literals make a 10**8-character text: the walk stops at the limit, not the end."""
    a: list[object] = ["x" * 50] * 10
    for _ in range(5):
        a = [a] * 10
    assert render_size(a, 1000) == 1001
    assert render_size(["ab", 1, None, {"k": "v"}]) < 64


# The findings of issue 20, with the real limits: each is refused at once.
FINDINGS = {
    # 82-89 s for one render: adding lists one by one is quadratic, in one uninterruptible call
    "sum": "{{ (['x' * 1000] * 3000) | sum(start='') }}",
    "sum_lists": "{{ ([[0] * 100] * 10000) | sum(start=[]) }}",
    # 3-3.9 GB: each conversion writes one argument of 3,000,000 characters
    "percent": "{% set d = {'a': 'x' * 3000000} %}{{ ('%(a)s' * 100) % d }}",
    "percent_width": "{{ '%0999999999d' % 1 }}",
    "format_width": "{{ '{:>999999999}'.format(1) }}",
    "format_fields": "{% set s = 'x' * 3000000 %}{{ ('{0}' * 1000).format(s) }}",
    "range_sum": "{{ range(10**9) | sum }}",
    "nested_output": NESTED_DEF.replace("'x' * 50", "'x' * 5000") + "{{ n6 }}",
    "nested_tojson": NESTED_DEF + "{{ n6 | tojson }}",
    "deep_tojson_indent": (
        "{% set ns = namespace(x=[0] * 100000) %}{% for i in range(500) %}{% set ns.x = [ns.x] %}{% endfor %}"
        "{{ ns.x | tojson(indent=64) }}"
    ),
    "wordwrap": "{{ ('ab ' * 1000000) | wordwrap(1, wrapstring='y' * 3000000) }}",
}


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_issue_findings_are_refused_in_scaffolds(tmp_path: Path, name: str) -> None:
    from leader_eval.render import render_messages
    from leader_eval.suite import load_suite
    from tests.test_render import CASE_LINE, _suite

    suite = load_suite(_suite(tmp_path, FINDINGS[name]))
    with pytest.raises(SuiteError) as err:
        render_messages(suite, suite.cases[0])
    assert err.value.line == CASE_LINE and "\n" not in str(err.value)


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_issue_findings_are_refused_in_chat_templates(name: str) -> None:
    from leader_eval.chat_template import render_chat_template

    with pytest.raises(ChatTemplateError) as err:
        render_chat_template(FINDINGS[name], [{"role": "user", "content": "hi"}], source="evil.gguf")
    assert str(err.value).startswith("evil.gguf: ") and "\n" not in str(err.value)


def test_ordinary_templates_render_as_before() -> None:
    env = BoundedSandbox()
    source = (
        "{{ [1, 2, 3] | sum }} {{ ['a', 'b'] | sum(start='') }} {{ 'a %s %d' % ('b', 3) }} {{ {'a': 1} | tojson }}"
        " {{ [1, 2] | map('string') | join(',') }} {{ 'x' in 'xy' }} {{ {'k': 1}['k'] }} {{ '{:>3}'.format(1) }}"
        " {{ [3, 1, 2] | sort | list }} {{ 'a b' | wordwrap(1) | length }} {{ ns }}"
    )
    out = run_bounded(env.from_string(source).render, ns=[1])
    assert out == '6 ab a b 3 {"a": 1} 1,2 True 1   1 [1, 2, 3] 3 [1]'
