"""Chat templates render as the ecosystem renders them, through one bounded renderer.

The corpus is real: fixtures/chat_templates/ holds the templates llama.cpp ships (from the
llama-cpp-python 0.3.36 sdist) and the embedded SmolLM2's own, read from its GGUF.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from leader_eval.bounded import limits, sandbox
from leader_eval.errors import ChatTemplateError
from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend
from leader_eval.suite.chat_template import render_chat_template, template_supports_tools
from tests.conftest import ROOT

CORPUS = ROOT / "fixtures" / "chat_templates"
TEMPLATES = sorted(CORPUS.glob("*.jinja"))

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_message_to_chat",
            "description": "Post to the room.",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            },
        },
    }
]
CONVERSATION = [
    {"role": "system", "content": "You are Mira, the leader."},
    {"role": "user", "content": "Say hello to the team."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call00001",
                "type": "function",
                "function": {"name": "send_message_to_chat", "arguments": {"message": "Hello team!"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call00001", "name": "send_message_to_chat", "content": '{"ok": true}'},
]
MESSAGES = [{"role": "system", "content": "You are Mira."}, {"role": "user", "content": "hi"}]


def _transformers_render(template: str, messages, tools) -> str:
    """transformers' own rendering, unbounded: the reference the renderer must equal."""
    from transformers.utils import chat_template_utils as ctu

    rendered, _ = ctu.render_jinja_template(
        conversations=[ctu._normalize_chat_messages(messages)],
        tools=tools,
        chat_template=template,
        add_generation_prompt=True,
        bos_token="<s>",
        eos_token="</s>",
    )
    return str(rendered[0])


def test_corpus_holds_the_families_the_issue_names() -> None:
    names = " ".join(p.name for p in TEMPLATES).lower()
    for family in (
        "qwen2.5",
        "qwen3",
        "llama-3.1",
        "llama-3.2",
        "mistral",
        "hermes-2-pro",
        "hermes-3",
        "deepseek",
        "kimi-k2",
        "gpt-oss",
        "smollm2",
    ):
        assert family in names, family
    assert len(TEMPLATES) >= 40
    readme = (CORPUS / "README.md").read_text()
    assert "0.3.36" in readme
    for p in TEMPLATES:
        assert f"`{p.name}`" in readme, f"{p.name} is not named in fixtures/chat_templates/README.md"


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.stem for p in TEMPLATES])
def test_real_template_renders_tools_call_and_result_as_transformers_does(path: Path) -> None:
    template = path.read_text(encoding="utf-8")
    text = render_chat_template(template, CONVERSATION, tools=TOOLS, bos_token="<s>", eos_token="</s>")
    assert "Say hello to the team." in text
    if template_supports_tools(template):
        assert "send_message_to_chat" in text
    assert text == _transformers_render(template, CONVERSATION, TOOLS)


GENERATION = (
    "{% for m in messages %}<|{{ m.role }}|>"
    "{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SEPARATORS = (
    "{% if tools %}<tools>{{ tools | tojson(separators=(',', ':'), sort_keys=true) }}</tools>{% endif %}"
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"
)


def test_generation_block_renders_through_the_backend() -> None:
    """Regression: ``{% generation %}`` raised TemplateSyntaxError in the hand-written environment."""
    backend = OpenAICompatBackend("http://127.0.0.1:1/v1", "m", chat_template=GENERATION)
    convo = [*MESSAGES, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]
    prompt = backend.apply_chat_template(convo, None)
    assert prompt.text == "<|system|>You are Mira.<|user|>hi<|assistant|>hello<|user|>again<|assistant|>"


def test_tojson_separators_render_through_the_backend() -> None:
    """Regression: ``tojson(separators=...)`` raised TypeError in the hand-written environment."""
    backend = OpenAICompatBackend("http://127.0.0.1:1/v1", "m", chat_template=SEPARATORS)
    text = backend.apply_chat_template(MESSAGES, TOOLS).text
    assert text.startswith('<tools>[{"function":{"description":"Post to the room.","name":"send_message_to_chat",')
    assert ", " not in text.split("</tools>")[0]


def test_template_variables_and_none_keys_match_apply_chat_template() -> None:
    template = "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{{ m.get('name', '-') }};{% endfor %}{{ extra }}"
    messages = [{"role": "user", "content": "hi", "name": None}]
    # None-valued keys are dropped (as tokenizer.apply_chat_template does), extra variables reach the template
    assert render_chat_template(template, messages, bos_token="<s>", extra="!") == "<s>user:hi-;!"


HOSTILE_CHAT_TEMPLATES = {
    "range": "{% for i in range(10**9) %}x{% endfor %}",
    "str_times": "{{ 'x' * 10**10 }}",
    "center": "{{ 'x'.center(10**10) }}",
    "tojson_indent": "{{ messages | tojson(indent=10**8) }}",
    "recursive_macro": "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "huge_output": "{% for i in range(99999) %}{% for j in range(999) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}",
    "nested_loops": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "power": "{{ 7 ** 9999999999 }}",
    "sandbox_escape": "{{ messages.__class__.__mro__ }}",
    "syntax": "{% for m in messages %}",
    "raise": "{{ raise_exception('no system role') }}",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CHAT_TEMPLATES))
def test_hostile_chat_template_is_a_one_line_error(monkeypatch, name: str) -> None:
    """A GGUF's template is untrusted: the same bounds as scaffold rendering, one-line errors."""
    monkeypatch.setattr(limits, "MAX_RENDER_SECONDS", 1.0)
    start = time.monotonic()
    with pytest.raises(ChatTemplateError) as err:
        render_chat_template(HOSTILE_CHAT_TEMPLATES[name], MESSAGES, source="chat template of evil.gguf")
    assert time.monotonic() - start < 10
    message = str(err.value)
    assert "\n" not in message and message.startswith("chat template of evil.gguf: ")


def test_time_bound_holds_in_a_worker_thread(monkeypatch) -> None:
    """The bound uses no signals: a render in a thread (as the runner's workers do) stops too."""
    import concurrent.futures

    monkeypatch.setattr(limits, "MAX_RENDER_SECONDS", 0.5)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(render_chat_template, HOSTILE_CHAT_TEMPLATES["nested_loops"], MESSAGES)
        with pytest.raises(ChatTemplateError, match=r"longer than 0\.5 s"):
            future.result(timeout=30)


def test_transformers_is_imported_only_when_a_template_is_rendered() -> None:
    code = (
        "import sys, leader_eval.suite.chat_template, leader_eval.suite.render, leader_eval.suite.load, leader_eval.sampling.backends.local;"
        "assert 'transformers' not in sys.modules, 'imported too early'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_other_transformers_users_are_unaffected() -> None:
    """The renderer's compile hook answers only inside render_chat_template."""
    render_chat_template("{{ 'x' }}", MESSAGES)
    from transformers.utils import chat_template_utils as ctu

    compiled = ctu._compile_jinja_template("{{ 'y' * 3 }}")
    assert not isinstance(compiled.environment, sandbox.BoundedSandbox)
    assert compiled.render() == "yyy"


@pytest.mark.model
def test_local_backend_tokens_are_the_renderers_text(local_backend) -> None:
    smollm2 = (CORPUS / "HuggingFaceTB-SmolLM2-135M-Instruct.jinja").read_text(encoding="utf-8")
    assert local_backend.chat_template == smollm2  # the fixture is the GGUF's own template
    prompt = local_backend.apply_chat_template(MESSAGES, TOOLS)
    text = render_chat_template(smollm2, MESSAGES, bos_token=local_backend.bos_token, eos_token=local_backend.eos_token)
    assert prompt.text == text == _transformers_render(smollm2, MESSAGES, None)  # SmolLM2's uses no bos/eos
    assert prompt.token_ids == local_backend.tokenize(text)


def _spy_renders(monkeypatch) -> list[str]:
    """Record every template the one renderer compiles-and-renders, whoever calls it."""
    import leader_eval.suite.chat_template as ct

    seen: list[str] = []
    real = ct.run_bounded

    def spy(fn, *args, **kwargs):
        if "chat_template" in kwargs:
            seen.append(kwargs["chat_template"])
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(ct, "run_bounded", spy)
    return seen


def test_openai_completions_mode_renders_through_the_one_renderer(monkeypatch) -> None:
    seen = _spy_renders(monkeypatch)
    backend = OpenAICompatBackend("http://127.0.0.1:1/v1", "m", chat_template=SEPARATORS)
    backend.apply_chat_template(MESSAGES, TOOLS)
    assert seen == [SEPARATORS]


@pytest.mark.model
def test_local_backend_renders_through_the_one_renderer(monkeypatch, local_backend) -> None:
    seen = _spy_renders(monkeypatch)
    local_backend.apply_chat_template(MESSAGES, TOOLS)
    assert seen and seen[0] == local_backend.chat_template


def test_transformers_import_advice_is_kept_out_unless_asked_for() -> None:
    """transformers without PyTorch says "PyTorch was not found" on import: not ours to show
    (``LEADER_EVAL_LIBRARY_LOGS=1`` shows it)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("transformers")
    try:
        import torch  # noqa: F401

        pytest.skip("PyTorch is installed: transformers has no advice to give")
    except ImportError:
        pass
    root = Path(__file__).resolve().parents[2]
    code = "from leader_eval.suite.chat_template import _transformers_chat_utils; _transformers_chat_utils()"

    def stderr(**env: str) -> str:
        drop = ("LEADER_EVAL_LIBRARY_LOGS", "TRANSFORMERS_VERBOSITY", "TRANSFORMERS_NO_ADVISORY_WARNINGS")
        environ = {k: v for k, v in os.environ.items() if k not in drop}
        environ.update(PYTHONPATH=os.pathsep.join([str(root), environ.get("PYTHONPATH", "")]), **env)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert "PyTorch was not found" not in stderr()
    assert "PyTorch was not found" in stderr(LEADER_EVAL_LIBRARY_LOGS="1")
