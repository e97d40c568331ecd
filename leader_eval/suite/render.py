"""Strict rendering: scaffold templates -> chat messages -> the model's own chat template.

A missing variable is an error, never a blank: the field notes' "placeholder leak" was an
evaluation prompt that silently rendered without the current goal.

Scaffold templates are untrusted: they compile and render in ``sandbox.BoundedSandbox`` under
``sandbox.run_bounded`` (time, output size, value size, recursion; see limits.py), and any bound
exceeded is a ``SuiteError`` naming the case's file and line. The model's chat template is
rendered by ``chat_template.render_chat_template`` under the same bounds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Protocol

import jinja2
import jinja2.meta

from leader_eval.bounded import limits
from leader_eval.bounded.limits import LimitExceeded
from leader_eval.bounded.regex import finditer_bounded
from leader_eval.bounded.sandbox import BoundedSandbox, run_bounded

# leftover template syntax and placeholders that must never reach a model: one definition,
# shared with the output-time leak detector
from leader_eval.checks.placeholders import (
    PLACEHOLDER_PATTERNS,
    PLACEHOLDER_SHAPES,
    SLOT_CANDIDATES,
    SLOT_PATTERNS,
    TEMPLATE_TAG_LITERAL,
    TEMPLATE_TAG_PATTERN,
    is_slot_at,
)
from leader_eval.errors import SuiteError
from leader_eval.suite.records import Case, ScaffoldMessage, Suite
from leader_eval.types import Prompt

__all__ = [
    "ChatTemplater",
    "RenderedCase",
    "ScaffoldShared",
    "check_templates",
    "find_placeholders",
    "render_case",
    "render_messages",
    "scaffold_env",
    "scaffold_shared",
    "template_variables",
]


class ChatTemplater(Protocol):
    """What ``render_case`` needs of a backend: its model's chat template, applied and tokenized
    (every sampling backend has it; the suite layer sits below sampling and names no backend)."""

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt: ...


def _scaffold_env() -> BoundedSandbox:
    env = BoundedSandbox(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, indent=indent, ensure_ascii=False)
    return env


_ENV = _scaffold_env()


@lru_cache(maxsize=1)
def _shapes() -> tuple[tuple[tuple[str | None, str], ...], tuple[tuple[str | None, str], ...]]:
    """``PLACEHOLDER_PATTERNS`` and ``SLOT_PATTERNS``, each with the character every match of it
    opens with: a pattern whose character is not in a text is not run over it, nor compiled until
    a text has it (33 patterns, ~14 ms to compile; a rendered prompt holds the opening of one or
    two). Each pattern is its shape's first character, escaped, before the rest, so that character
    opens every match unless the rest repeats it (then None: run on every text);
    tests/suite/test_render.py holds this to what parsing each pattern says."""

    def openings(shapes: tuple[tuple[str, str], ...]) -> list[str | None]:
        return [None if rest[:1] in _REPEATS else first for first, rest in shapes]

    return (
        tuple(zip(openings(PLACEHOLDER_SHAPES), PLACEHOLDER_PATTERNS, strict=True)),
        tuple(zip(openings(SLOT_CANDIDATES), SLOT_PATTERNS, strict=True)),
    )


_REPEATS = frozenset("*+?{")


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    # one of the 33 shapes, compiled once: ``re.finditer(str, ...)`` looks each one up in re's
    # cache on every call
    return re.compile(pattern)


def scaffold_env() -> BoundedSandbox:
    """The strict sandboxed environment scaffolds render in (shared, so its template cache is too)."""
    return _ENV


@dataclass
class RenderedCase:
    case_id: str
    messages: list[dict[str, Any]]
    prompt: Prompt


def _template_line(msg: ScaffoldMessage, lineno: int | None) -> int:
    if lineno is None:
        return msg.line
    # an inline block scalar starts on the line after its key
    if msg.path.endswith((".yaml", ".yml")) and "\n" in msg.template:
        return msg.line + lineno
    return msg.line + lineno - 1 if msg.path.endswith((".yaml", ".yml")) else lineno


@lru_cache(maxsize=256)
def _compile_source(source: str) -> jinja2.Template:
    return run_bounded(_ENV.from_string, source)


def _compile(msg: ScaffoldMessage) -> jinja2.Template:
    return _compile_source(msg.template)


# ``{{ name }}`` and nothing else: the one shape of tag the fast path below renders itself
_PLAIN_VARIABLE = re.compile(r"\{\{[ \t\n]*([A-Za-z_][A-Za-z0-9_]*)[ \t\n]*\}\}")
# names jinja2 reads as constants or operators, never as a variable
# names a template reads as something other than the context's variable (``self`` is jinja2's
# template reference, whatever a case's vars say): those templates go through jinja2 itself
_NOT_VARIABLES = frozenset(
    {"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "self"}
)
# an int of at most this many digits: its text is a few bytes, never near a bound
_SMALL_INT = 10**18


@lru_cache(maxsize=256)
def _substitution_only(source: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """A template that is text and ``{{ name }}`` tags only, as (texts, names) alternating
    (``texts`` one longer); None for anything else (any other tag, a comment, whitespace control,
    a carriage return jinja2 would rewrite), which jinja2 renders. The text is jinja2's own data:
    with these options it changes no character of it but one trailing newline, which it drops."""
    if "\r" in source or "{%" in source or "{#" in source:
        return None
    if source.endswith("\n"):  # keep_trailing_newline=False
        source = source[:-1]
    parts = _PLAIN_VARIABLE.split(source)
    texts, names = tuple(parts[0::2]), tuple(parts[1::2])
    if any("{{" in t for t in texts) or any(n in _NOT_VARIABLES for n in names):
        return None
    if any(t.endswith("{") for t in texts[:-1]):  # "{{{ i }}": jinja2's tag opens one brace earlier
        return None
    return texts, names


def _substitute(source: str, context: dict[str, Any]) -> str | None:
    """What jinja2 renders for a substitution-only template (``str`` of each value), without a
    sandboxed render per case; None, for jinja2 to decide, where a name is not in ``context``
    (an undefined variable, a global) or a value is anything but a text or a small int (whose
    text jinja2 writes as ``str`` does) or a text long enough to meet a render bound."""
    shape = _substitution_only(source)
    if shape is None:
        return None
    texts, names = shape
    out = [texts[0]]
    total = 0
    bound = min(limits.MAX_RENDER_VALUE, limits.MAX_RENDER_OUTPUT)  # read now: tests lower them
    for name, text in zip(names, texts[1:], strict=True):
        if name not in context:
            return None
        value = context[name]
        kind = type(value)
        if kind is int and -_SMALL_INT < value < _SMALL_INT:
            value = str(value)
        elif kind is not str:
            return None
        total += len(value)
        if total > bound:
            return None
        out.append(value)
        out.append(text)
    return "".join(out)


def check_templates(suite: Suite) -> None:
    """Parse every scaffold template; a syntax error names its file and line."""
    for msg in suite.scaffold:
        try:
            _compile(msg)
        except jinja2.TemplateSyntaxError as exc:
            raise SuiteError(
                msg.path, _template_line(msg, exc.lineno), f"template syntax error: {exc.message}"
            ) from exc
        except LimitExceeded as exc:
            raise SuiteError(msg.path, msg.line, str(exc)) from exc


def template_variables(suite: Suite) -> set[str]:
    names: set[str] = set()
    for msg in suite.scaffold:
        names |= _variables_of(msg.template)
    return names


@lru_cache(maxsize=256)
def _variables_of(source: str) -> frozenset[str]:
    return frozenset(jinja2.meta.find_undeclared_variables(run_bounded(_ENV.parse, source)))


def tools_json(suite: Suite) -> str:
    """The ``tools_json`` scaffold variable: what the model reads, and what the scorer compares
    an echo against (non-ASCII text as itself, never as ``\\u`` escapes)."""
    return json.dumps([t.to_openai()["function"] for t in suite.tools], indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class ScaffoldShared:
    """What every case of one suite renders with alike (``scaffold_shared``): derived once per
    suite where many cases render (a run's plan), not again for each case. Shared between the
    cases' renders safely: the sandbox is immutable, so no template can change them."""

    tools: list[dict[str, Any]]
    tools_json: str
    #: the scaffold's template variables, sorted
    used: tuple[str, ...]


def scaffold_shared(suite: Suite) -> ScaffoldShared:
    return ScaffoldShared(
        [t.to_openai()["function"] for t in suite.tools], tools_json(suite), tuple(sorted(template_variables(suite)))
    )


def render_messages(suite: Suite, case: Case, shared: ScaffoldShared | None = None) -> list[dict[str, Any]]:
    """Render the scaffold for one case; raise ``SuiteError`` on any missing or blank variable.
    ``shared``: ``scaffold_shared(suite)``, where the caller renders many cases of ``suite``."""
    shared = shared or scaffold_shared(suite)
    context: dict[str, Any] = {
        "tools": shared.tools,
        "tools_json": shared.tools_json,
        "case_id": case.id,
        **case.vars,
    }
    for name in shared.used:
        if name in case.vars and (case.vars[name] is None or case.vars[name] == ""):
            raise SuiteError(
                *case.where(suite.path),
                f"case {case.id!r}: template variable {name!r} is empty (a blank would render silently)",
            )
    messages: list[dict[str, Any]] = []
    for msg in suite.scaffold:
        # the text jinja2 would render (tested against it), where the template only substitutes;
        # ``check_templates`` still compiles every template at load, so syntax errors are as before
        content = _substitute(msg.template, context)
        if content is None:
            content = _render(suite, case, msg, context)
        if content.strip():
            messages.append({"role": msg.role, "content": content})
    _check_placeholders(suite, case, messages)
    return messages


def _render(suite: Suite, case: Case, msg: ScaffoldMessage, context: dict[str, Any]) -> str:
    """One scaffold message rendered by the bounded sandbox; every failure a ``SuiteError``."""
    try:
        content: str = run_bounded(_compile(msg).render, context)
    except LimitExceeded as exc:
        raise SuiteError(*case.where(suite.path), f"case {case.id!r}: {exc} (template at {msg.origin})") from exc
    except jinja2.UndefinedError as exc:
        where = _undefined_location(exc, msg)
        var = _undefined_name(str(exc))
        raise SuiteError(
            *case.where(suite.path),
            f"case {case.id!r}: missing template variable {var!r} (used at {where})",
        ) from exc
    except jinja2.TemplateError as exc:
        raise SuiteError(*case.where(suite.path), f"case {case.id!r}: template error: {exc}") from exc
    except (TypeError, ValueError, AttributeError, ArithmeticError, LookupError) as exc:
        where = _undefined_location(exc, msg)
        raise SuiteError(*case.where(suite.path), f"case {case.id!r}: template failed at {where}: {exc}") from exc
    return content


def _undefined_name(message: str) -> str:
    m = re.search(r"'([^']+)' is undefined", message) or re.search(r"has no attribute '([^']+)'", message)
    return m.group(1) if m else message


def _undefined_location(exc: BaseException, msg: ScaffoldMessage) -> str:
    tb = exc.__traceback__
    lineno = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            lineno = tb.tb_lineno
        tb = tb.tb_next
    line = _template_line(msg, lineno)
    return f"{msg.path}:{line}"


def find_placeholders(text: str, extra: list[str] | tuple[str, ...] = (), allowed: tuple[str, ...] = ()) -> list[Any]:
    """Leftover template syntax and placeholder markers in ``text`` (``re.Match``-like: ``start()``,
    ``end()``, ``group()``)."""
    found: list[Any] = []
    placeholders, slots = _shapes()
    for first, pattern in placeholders:
        if first is None or first in text:
            found.extend(m for m in _regex(pattern).finditer(text) if m.group(0) not in allowed)
    # slots in words, roles, format fields: judged as the leak detector judges them (a filled
    # form label, "[Team Role] Scout", is none)
    for first, pattern in slots:
        if first is None or first in text:
            matches = _regex(pattern).finditer(text)
            found.extend(m for m in matches if m.group(0) not in allowed and is_slot_at(text, m.start(), m.end()))
    if TEMPLATE_TAG_LITERAL in text:
        found.extend(m for m in _regex(TEMPLATE_TAG_PATTERN).finditer(text) if m.group(0) not in allowed)
    for pattern in extra:  # a suite's own patterns run with a time bound (bounded/regex.py)
        found.extend(m for m in finditer_bounded(pattern, text) if m.group(0) not in allowed)
    return sorted(found, key=lambda m: m.start())


def _check_placeholders(suite: Suite, case: Case, messages: list[dict[str, Any]]) -> None:
    extra = suite.render.get("placeholder_patterns", [])
    allowed = tuple(suite.render.get("allowed_placeholders", []))
    for m in messages:
        try:
            hits = find_placeholders(m["content"], extra, allowed)
        except LimitExceeded as exc:
            raise SuiteError(*case.where(suite.path), f"case {case.id!r}: render.placeholder_patterns: {exc}") from exc
        if hits:
            h = hits[0]
            raise SuiteError(
                *case.where(suite.path),
                f"case {case.id!r}: rendered {m['role']} message still holds placeholder {h.group(0)!r}; "
                "refusing to sample it",
            )


def render_case(suite: Suite, case: Case, backend: ChatTemplater, shared: ScaffoldShared | None = None) -> RenderedCase:
    """Scaffold -> messages -> the model's chat template -> exact prompt text and token ids
    (``shared`` as for ``render_messages``)."""
    messages = render_messages(suite, case, shared)
    prompt = backend.apply_chat_template(messages, [t.to_openai() for t in suite.tools])
    return RenderedCase(case.id, messages, prompt)
