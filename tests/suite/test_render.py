"""Scaffold rendering under bounds: hostile templates and patterns end in one-line suite errors.

Each template below hung, crashed or exhausted memory before (issue 9 item 15); now each is a
``SuiteError`` naming the suite, the case's line and the bound, within seconds.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.bounded import limits
from leader_eval.errors import SuiteError
from leader_eval.suite.load import load_suite
from leader_eval.suite.render import render_messages
from tests.conftest import MINIMAL_SUITE

REQUEST = 'content: "{{ request }}"'
CASE_LINE = 26  # the line of case 'hello' in MINIMAL_SUITE


def _suite(tmp_path: Path, template: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL_SUITE.replace(REQUEST, "content: " + repr(template).replace("\\\\", "\\")))
    return path


HOSTILE = {
    "range": ("{% for i in range(10**9) %}x{% endfor %}", "too large"),
    "nested_loops": ("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", "longer than"),
    "str_times": ("{{ 'x' * 10**10 }}", "'*' would build"),
    "list_times": ("{{ [1] * 10**10 }}", "'*' would build"),
    "center_method": ("{{ 'x'.center(10**10) }}", "too large"),
    "ljust_method": ("{{ 'x'.ljust(10**10) }}", "too large"),
    "center_filter": ("{{ 'x' | center(10**10) }}", "too large"),
    "indent_filter": ("{{ ('a\\n' * 100000) | indent(1000) }}", "indent"),
    "tojson_indent": ("{{ tools | tojson(indent=100) }}", "indent is too large"),
    "recursive_macro": ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "recurses too deeply"),
    "huge_output": (
        "{% for i in range(99999) %}{% for j in range(999) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}",
        ("output is over", "longer than"),
    ),
    "concat_doubling": (
        "{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}",
        "'~' would build",
    ),
    "plus_doubling": (
        "{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set ns.x = ns.x + ns.x %}{% endfor %}",
        "'+' would build",
    ),
    "block_doubling": (
        "{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set y %}{{ ns.x }}{{ ns.x }}{% endset %}{% set ns.x = y %}{% endfor %}",
        "output is over",
    ),
    "macro_doubling": (
        "{% macro d(s) %}{{ s }}{{ s }}{% endmacro %}{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set ns.x = d(ns.x) %}{% endfor %}",
        ("built a value", "output is over"),
    ),
    "join_growth": ("{% set l = ['x' * 1000] * 5000 %}{{ l | join }}", ("join", "'*' would build")),
    "replace_growth": (
        "{% set ns = namespace(x='aa') %}{% for i in range(40) %}{% set ns.x = ns.x.replace('a', 'aaaa') %}{% endfor %}",
        "replace",
    ),
    "bigint_squaring": (
        "{% set ns = namespace(x=10) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
        "bits",
    ),
    "power": ("{{ 9 ** 9999999999 }}", "bits"),
    "format_width": ("{{ '{:>9999999999}'.format('x') }}", "format width"),
    "format_kwarg_width": ("{{ '{:>{w}}'.format('x', w=10**10) }}", "too large"),
    "percent_width": ("{{ '%9999999999s' % 'x' }}", "format width"),
    "format_filter_width": ("{{ '%9999999999s' | format('x') }}", "format width"),
    "lipsum": ("{{ lipsum(10**6) }}", "lipsum"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_scaffold_is_a_suite_error_on_the_case_line(tmp_path: Path, monkeypatch, name: str) -> None:
    monkeypatch.setattr(limits, "MAX_RENDER_SECONDS", 1.0)
    template, words = HOSTILE[name]
    suite = load_suite(_suite(tmp_path, template))
    start = time.monotonic()
    with pytest.raises(SuiteError) as err:
        render_messages(suite, suite.cases[0])
    assert time.monotonic() - start < 10
    assert err.value.line == CASE_LINE and err.value.path == str(suite.path)
    assert "\n" not in str(err.value)
    assert any(w in str(err.value) for w in ((words,) if isinstance(words, str) else words)), str(err.value)


def test_bounded_sandbox_renders_ordinary_templates_unchanged(tmp_path: Path) -> None:
    template = (
        "{% set ns = namespace(n=0) %}{% for t in tools %}{% set ns.n = ns.n + 1 %}{{ t.name | upper }} {% endfor %}"
        "{{ ns.n }} {{ '%-5s|' % 'ab' }}{{ '{:>4}'.format(7) }} {{ [1, 2] * 2 }} {{ 'a' ~ 'b' }} {{ 2 ** 10 }}"
        " {{ request | center(30) | trim }} {{ tools | tojson(indent=2) | length > 10 }} {{ case_id }}"
    )
    suite = load_suite(_suite(tmp_path, template))
    messages = render_messages(suite, suite.cases[0])
    assert messages[1]["content"] == (
        "SEND_MESSAGE_TO_CHAT 1 ab   |   7 [1, 2, 1, 2] ab 1024 Say hello to the team. True hello"
    )


def test_scaffold_bound_holds_in_a_worker_thread(tmp_path: Path, monkeypatch) -> None:
    """No signals: the runner renders in threads, and the time bound still stops a hang there."""
    monkeypatch.setattr(limits, "MAX_RENDER_SECONDS", 0.5)
    suite = load_suite(_suite(tmp_path, HOSTILE["nested_loops"][0]))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            render_messages(suite, suite.cases[0])
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join(30)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], SuiteError) and "longer than 0.5 s" in str(errors[0])


def test_a_template_syntax_error_deep_in_a_template_names_its_line(tmp_path: Path) -> None:
    path = _suite(tmp_path, "ok\\n{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}")
    with pytest.raises(SuiteError, match="nests or recurses too deeply"):
        load_suite(path)


def test_placeholder_patterns_from_the_suite_still_refuse_a_leftover(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        MINIMAL_SUITE.replace("defaults:", "render:\n  placeholder_patterns: ['<<[A-Z_]+>>']\ndefaults:").replace(
            'request: "Say hello to the team."', 'request: "Say <<GREETING>> to the team."'
        )
    )
    suite = load_suite(path)
    with pytest.raises(SuiteError, match="<<GREETING>>"):
        render_messages(suite, suite.cases[0])


@pytest.mark.parametrize(
    "leftover",
    [
        "Hallo [Name des Empfängers]!",
        "【担当者名】様",
        "Hi %s, go.",
        "〇〇さん、こんにちは",
        "Thanks, (Your Name)",
        "Hi <%= team_name %>, go.",
    ],
)
def test_a_slot_in_any_language_is_refused_at_render_time(tmp_path: Path, leftover: str) -> None:
    """The renderer judges slots as the leak detector does (checks/placeholders.is_slot_at)."""
    path = tmp_path / "s.yaml"
    path.write_text(
        MINIMAL_SUITE.replace('request: "Say hello to the team."', f"request: {leftover!r}"), encoding="utf-8"
    )
    suite = load_suite(path)
    with pytest.raises(SuiteError, match="still holds placeholder"):
        render_messages(suite, suite.cases[0])


def test_a_filled_label_in_any_script_renders(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    text = "【日時】11月28日\n[이름] 홍길동\nIn 二〇二〇年 we paid $5 (your call); growth was <5% and 5 <% of 9."
    path.write_text(
        MINIMAL_SUITE.replace('request: "Say hello to the team."', f"request: {json.dumps(text)}"), encoding="utf-8"
    )
    suite = load_suite(path)
    assert any(text in m["content"] for m in render_messages(suite, suite.cases[0]))


# templates that only substitute variables render without the sandbox; each must come out as
# jinja2 renders it, and anything else must still be jinja2's to render (and to refuse)
SUBSTITUTION_TEMPLATES = [
    "Say hi. (sample {{ i }})",
    "{{i}}",
    "{{ request }}\n",
    "{{ request }}\n\n",
    "line one\n{{ request }}\nline three\n",
    "{{\trequest\n}} and {{ case_id }} }} stray closers }",
    "{ {{ request }} }",
    "",
    "\n",
    "plain text only",
]
NOT_SUBSTITUTION = [
    "{{ request | upper }}",
    "{{- request -}}",
    "{% if request %}{{ request }}{% endif %}",
    "{# note #}{{ request }}",
    "{{ request }}\r\n",
    "{{ true }}",
    "{{ None }}",
    "{{ range }}",
    "{{ missing }}",
    "{{ tools }}",
    "{{ flag }}",
    "{{ ratio }}",
    "{{ big }}",
    "{{ self }}",  # jinja2's template reference, not a case var named self
]


@pytest.mark.parametrize("template", SUBSTITUTION_TEMPLATES + NOT_SUBSTITUTION)
def test_a_substitution_only_template_renders_as_jinja2_renders_it(template: str) -> None:
    from leader_eval.suite.render import _substitute, scaffold_env

    context = {
        "request": "a {{ b }} {% c %} text\r\n",  # a value is never parsed as a template
        "i": -12,
        "case_id": "hello",
        "tools": [{"name": "f"}],
        "flag": True,
        "ratio": 0.5,
        "big": 10**30,
        "self": "a case var named self",
    }
    fast = _substitute(template, context)
    if template in NOT_SUBSTITUTION:
        assert fast is None
        return
    assert fast == scaffold_env().from_string(template).render(context)


def test_a_substituted_value_over_the_output_bound_is_still_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(limits, "MAX_RENDER_OUTPUT", 1000)
    path = _suite(tmp_path, "{{ request }}")
    suite = load_suite(path)
    case = suite.cases[0]
    case.vars["request"] = "x" * 5000
    with pytest.raises(SuiteError, match="output"):
        render_messages(suite, case)


_PIECES = [
    "{{ i }}",
    "{{name}}",
    "{{ x",
    "}}",
    "{",
    "}",
    "{%",
    "%}",
    "{#",
    "-",
    " ",
    "\n",
    "\r",
    "a",
    "é",
    "{{ true }}",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12))
def test_the_substitution_fast_path_agrees_with_jinja2_on_any_template(pieces: list[str]) -> None:
    from leader_eval.suite.render import _substitute, scaffold_env

    template = "".join(pieces)
    context = {"i": 7, "name": "{{ i }}\n"}
    fast = _substitute(template, context)
    if fast is None:
        return  # jinja2's to render or refuse, as before
    assert fast == scaffold_env().from_string(template).render(context)


def test_each_shape_is_skipped_only_for_texts_without_the_character_its_matches_open_with() -> None:
    """``find_placeholders`` runs a shape only over texts holding its opening character: that
    character must be what parsing the shape's pattern says every match opens with (a literal
    first item, not repeated, no alternative at the top), or None (run over every text)."""
    import re
    from re import _constants as sre_constants  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    from leader_eval.suite.render import _shapes

    def parsed_opening(pattern: str) -> str | None:
        parsed = sre_parse.parse(pattern)
        items = list(parsed)
        if items and items[0][0] is sre_constants.LITERAL and not parsed.state.flags & re.IGNORECASE:
            return chr(items[0][1])
        return None

    placeholders, slots = _shapes()
    assert len(placeholders) + len(slots) > 30
    for opening, pattern in (*placeholders, *slots):
        assert opening == parsed_opening(pattern), pattern[:60]
