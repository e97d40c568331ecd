"""The one chat-template renderer: messages + tools -> the exact prompt text a model sees.

Every backend that renders a jinja2 chat template itself (``local``, ``openai`` in completions
mode, ``tinker`` without a cookbook renderer) calls ``render_chat_template``. It renders with
transformers' own chat-template machinery (``render_jinja_template``: message normalisation,
reasoning-field aliases, the ``{% generation %}`` extension, ``tojson`` with ``indent``,
``separators`` and ``sort_keys``, ``raise_exception``, ``strftime_now``, its ``dict`` and
``namespace``), so a template renders here exactly as ``tokenizer.apply_chat_template`` renders it.

A chat template is untrusted input (it comes from a GGUF file or a server), so the template is
compiled in ``sandbox.BoundedSandbox`` carrying transformers' extensions, filters and globals, and
the render runs under ``sandbox.run_bounded``: the same time, output-size and value-size bounds as
scaffold rendering. transformers is imported on the first render, never before.

Any failure is a ``ChatTemplateError``: one line naming the template and what went wrong.
"""

from __future__ import annotations

import contextvars
import os
import threading
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.meta

from leader_eval.bounded.limits import MAX_TEMPLATE_BYTES, LimitExceeded
from leader_eval.bounded.sandbox import BoundedSandbox, run_bounded
from leader_eval.errors import ChatTemplateError

_BOUNDED = contextvars.ContextVar("leader_eval_bounded_chat_template", default=False)
_HOOK_LOCK = threading.Lock()


def render_chat_template(
    template: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    source: str = "chat template",
    **template_kwargs: Any,
) -> str:
    """Render ``template`` as ``tokenizer.apply_chat_template(..., tokenize=False)`` would.

    ``template_kwargs`` reach the template as variables (a tokenizer's other special tokens,
    ``enable_thinking``, ...). ``source`` names the template in error messages.
    """
    if len(template) > MAX_TEMPLATE_BYTES:
        raise ChatTemplateError(f"{source}: template is over {MAX_TEMPLATE_BYTES:,} characters")
    ctu = _transformers_chat_utils()
    normalize = getattr(ctu, "_normalize_chat_messages", None)
    if normalize is not None:  # apply_chat_template drops None-valued keys before rendering
        messages = normalize(messages)
    token = _BOUNDED.set(True)
    try:
        rendered = run_bounded(
            ctu.render_jinja_template,
            conversations=[messages],
            tools=tools or None,
            chat_template=template,
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            **template_kwargs,
        )
    except LimitExceeded as exc:
        raise ChatTemplateError(f"{source}: {exc}") from exc
    except jinja2.TemplateSyntaxError as exc:
        raise ChatTemplateError(f"{source}: syntax error at template line {exc.lineno}: {exc.message}") from exc
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(f"{source}: the template raised: {exc}") from exc
    except Exception as exc:  # a template is code: any error it makes is the template's, in one line
        raise ChatTemplateError(f"{source}: rendering failed: {type(exc).__name__}: {exc}") from exc
    finally:
        _BOUNDED.reset(token)
    # transformers returns (one text per conversation, generation indices)
    texts = rendered[0] if isinstance(rendered, tuple) else rendered
    return str(texts[0])


def template_supports_tools(template: str) -> bool:
    """Does the template read the ``tools`` variable (so tool contracts go to it)?"""
    return "tools" in _template_variables(template)


@lru_cache(maxsize=32)
def _template_variables(template: str) -> frozenset[str]:
    try:
        ast = run_bounded(_parse_env().parse, template)
    except (jinja2.TemplateSyntaxError, LimitExceeded):
        return frozenset()  # the render reports the error with its line
    return frozenset(jinja2.meta.find_undeclared_variables(ast))


@lru_cache(maxsize=1)
def _parse_env() -> BoundedSandbox:
    # parsing needs the same extensions ({% generation %}) as rendering
    return _chat_environment()


#: set to 1 (``leader-eval --library-logs``) to see what llama.cpp, transformers and matplotlib log
LIBRARY_LOGS_ENV = "LEADER_EVAL_LIBRARY_LOGS"


def library_logs_enabled() -> bool:
    """Whether third-party libraries' own log lines reach the user (off by default: they are noise
    around leader-eval's output, e.g. llama.cpp's context warnings for a vocab-only load)."""
    return os.environ.get(LIBRARY_LOGS_ENV, "").strip().lower() in ("1", "true", "yes")


def quiet_transformers() -> None:
    """Keep transformers' import-time advice ("PyTorch was not found ...") and info logs out of the
    user's output, unless ``library_logs_enabled``; call before importing transformers. A value
    the user set in the environment is left alone."""
    if library_logs_enabled():
        return
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _transformers_chat_utils() -> Any:
    quiet_transformers()
    try:
        from transformers.utils import chat_template_utils as ctu
    except ImportError as exc:
        raise ChatTemplateError(
            "rendering a chat template needs transformers (installed with tinker): pip install transformers"
        ) from exc
    _install_compile_hook(ctu)
    return ctu


def _install_compile_hook(ctu: Any) -> None:
    """Make ``render_jinja_template`` compile in our bounded sandbox while we render.

    transformers compiles through its module-level ``_compile_jinja_template``. The hook answers
    with the bounded compile only inside ``render_chat_template`` (a context variable says so)
    and hands every other caller the original, so other users of transformers see no change.
    """
    with _HOOK_LOCK:
        original = ctu._compile_jinja_template
        if getattr(original, "_leader_eval_hook", False):
            return

        def compile_template(chat_template: str) -> Any:
            if _BOUNDED.get():
                return _compile_bounded(chat_template)
            return original(chat_template)

        compile_template._leader_eval_hook = True  # type: ignore[attr-defined]
        compile_template.cache_clear = getattr(original, "cache_clear", lambda: None)  # type: ignore[attr-defined]
        compile_template.__wrapped__ = original  # type: ignore[attr-defined]
        ctu._compile_jinja_template = compile_template


@lru_cache(maxsize=32)
def _compile_bounded(chat_template: str) -> jinja2.Template:
    return _chat_environment().from_string(chat_template)


@lru_cache(maxsize=1)
def _chat_environment() -> BoundedSandbox:
    """A ``BoundedSandbox`` carrying the extensions, filters and globals transformers sets up."""
    ctu = _transformers_chat_utils()
    original = getattr(ctu._compile_jinja_template, "__wrapped__", ctu._compile_jinja_template)
    reference = original("").environment  # transformers' own environment, from an empty template
    env = BoundedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[type(ext) for ext in reference.extensions.values()],
    )
    env.filters.update(reference.filters)
    env.globals.update({k: v for k, v in reference.globals.items() if k != "lipsum"})
    return env
