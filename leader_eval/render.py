"""Strict rendering: scaffold templates -> chat messages -> the model's own chat template.

A missing variable is an error, never a blank: the field notes' "placeholder leak" was an
evaluation prompt that silently rendered without the current goal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

# leftover template syntax and placeholders that must never reach a model: one definition,
# shared with the output-time leak detector
from leader_eval.checks.placeholders import PLACEHOLDER_PATTERNS
from leader_eval.errors import SuiteError
from leader_eval.types import Prompt

if TYPE_CHECKING:
    from leader_eval.backends.base import Backend
    from leader_eval.suite import Case, ScaffoldMessage, Suite


def _scaffold_env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, indent=indent, ensure_ascii=False)
    return env


_ENV = _scaffold_env()


def scaffold_env() -> ImmutableSandboxedEnvironment:
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
    return _ENV.from_string(source)


def _compile(msg: ScaffoldMessage) -> jinja2.Template:
    return _compile_source(msg.template)


def check_templates(suite: Suite) -> None:
    """Parse every scaffold template; a syntax error names its file and line."""
    for msg in suite.scaffold:
        try:
            _ENV.parse(msg.template)
        except jinja2.TemplateSyntaxError as exc:
            raise SuiteError(
                msg.path, _template_line(msg, exc.lineno), f"template syntax error: {exc.message}"
            ) from exc


def template_variables(suite: Suite) -> set[str]:
    names: set[str] = set()
    for msg in suite.scaffold:
        names |= _variables_of(msg.template)
    return names


@lru_cache(maxsize=256)
def _variables_of(source: str) -> frozenset[str]:
    return frozenset(jinja2.meta.find_undeclared_variables(_ENV.parse(source)))


def tools_json(suite: Suite) -> str:
    """The ``tools_json`` scaffold variable: what the model reads, and what the scorer compares
    an echo against (non-ASCII text as itself, never as ``\\u`` escapes)."""
    return json.dumps([t.to_openai()["function"] for t in suite.tools], indent=2, ensure_ascii=False)


def render_messages(suite: Suite, case: Case) -> list[dict[str, Any]]:
    """Render the scaffold for one case; raise ``SuiteError`` on any missing or blank variable."""
    context: dict[str, Any] = {
        "tools": [t.to_openai()["function"] for t in suite.tools],
        "tools_json": tools_json(suite),
        "case_id": case.id,
        **case.vars,
    }
    used = template_variables(suite)
    for name in sorted(used):
        if name in case.vars and (case.vars[name] is None or case.vars[name] == ""):
            raise SuiteError(
                suite.path,
                case.line,
                f"case {case.id!r}: template variable {name!r} is empty (a blank would render silently)",
            )
    messages: list[dict[str, Any]] = []
    for msg in suite.scaffold:
        try:
            content = _compile(msg).render(context)
        except jinja2.UndefinedError as exc:
            where = _undefined_location(exc, msg)
            var = _undefined_name(str(exc))
            raise SuiteError(
                suite.path,
                case.line,
                f"case {case.id!r}: missing template variable {var!r} (used at {where})",
            ) from exc
        except jinja2.TemplateError as exc:
            raise SuiteError(suite.path, case.line, f"case {case.id!r}: template error: {exc}") from exc
        except (TypeError, ValueError, AttributeError) as exc:
            where = _undefined_location(exc, msg)
            raise SuiteError(suite.path, case.line, f"case {case.id!r}: template failed at {where}: {exc}") from exc
        if content.strip():
            messages.append({"role": msg.role, "content": content})
    _check_placeholders(suite, case, messages)
    return messages


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


def find_placeholders(
    text: str, extra: list[str] | tuple[str, ...] = (), allowed: tuple[str, ...] = ()
) -> list[re.Match[str]]:
    """Leftover template syntax and placeholder markers in ``text``."""
    found: list[re.Match[str]] = []
    for pattern in (*PLACEHOLDER_PATTERNS, *extra):
        for m in re.finditer(pattern, text):
            if m.group(0) not in allowed:
                found.append(m)
    return sorted(found, key=lambda m: m.start())


def _check_placeholders(suite: Suite, case: Case, messages: list[dict[str, Any]]) -> None:
    extra = suite.render.get("placeholder_patterns", [])
    allowed = tuple(suite.render.get("allowed_placeholders", []))
    for m in messages:
        hits = find_placeholders(m["content"], extra, allowed)
        if hits:
            h = hits[0]
            raise SuiteError(
                suite.path,
                case.line,
                f"case {case.id!r}: rendered {m['role']} message still holds placeholder {h.group(0)!r}; "
                "refusing to sample it",
            )


def render_case(suite: Suite, case: Case, backend: Backend) -> RenderedCase:
    """Scaffold -> messages -> the model's chat template -> exact prompt text and token ids."""
    messages = render_messages(suite, case)
    prompt = backend.apply_chat_template(messages, [t.to_openai() for t in suite.tools])
    return RenderedCase(case.id, messages, prompt)


# --- chat templates (GGUF metadata and Hugging Face tokenizer configs are both jinja2) -------


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


def _chat_env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda v, indent=None, ensure_ascii=False, sort_keys=False: json.dumps(
        v, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys
    )
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


_CHAT_ENV = _chat_env()


@lru_cache(maxsize=32)
def _compile_chat(template: str) -> jinja2.Template:
    return _CHAT_ENV.from_string(template)


def render_chat_template(
    template: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """Apply a model's jinja2 chat template the way Hugging Face's ``apply_chat_template`` does."""
    return _compile_chat(template).render(
        messages=messages,
        tools=tools or None,
        bos_token=bos_token,
        eos_token=eos_token,
        add_generation_prompt=add_generation_prompt,
    )


@lru_cache(maxsize=32)
def template_supports_tools(template: str) -> bool:
    return "tools" in jinja2.meta.find_undeclared_variables(_CHAT_ENV.parse(template))
