"""The protocol registry: one module per protocol, what selects each, and that every backend
learns its default protocol from the one ``protocols.detect``."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

from leader_eval import protocols
from leader_eval.protocols import PROTOCOLS, REGISTRY, ToolCallProtocol, detect
from leader_eval.types import Reason

# the Tinker tests' real SmolLM2 tokenizer, built offline from the GGUF (a session fixture)


ROOT = Path(__file__).resolve().parents[2]

CHATML_NO_TOOLS = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _with_tools(marker: str) -> str:
    return "{% if tools %}<|im_start|>system\nCall tools as " + marker + "<|im_end|>\n{% endif %}" + CHATML_NO_TOOLS


TEMPLATES = {
    "json": CHATML_NO_TOOLS,
    "hermes": _with_tools("<tool_call>{...}</tool_call>"),
    "kimi_k2": _with_tools("<|tool_calls_section_begin|><|tool_call_begin|>"),
    "llama3_json": _with_tools("<|python_tag|>{...}"),
    "anthropic_xml": _with_tools("<function_calls><invoke name=...>"),
}


def test_every_protocol_module_exports_one_registered_protocol() -> None:
    pkg = Path(protocols.__file__).parent
    modules = [m.name for m in pkgutil.iter_modules([str(pkg)]) if not m.name.startswith("_")]
    # a family's variants may share a module (``VARIANTS``: deepseek, mistral)
    loaded = [importlib.import_module(f"leader_eval.protocols.{m}") for m in modules]
    exported = {p.name for mod in loaded for p in getattr(mod, "VARIANTS", None) or (mod.PROTOCOL,)}
    assert exported == set(PROTOCOLS)
    for name, p in REGISTRY.items():
        assert isinstance(p, ToolCallProtocol) and p.name == name
        # a text protocol reads text both ways and knows how an attempt at it opens
        assert (p.strict is None) == (p.lenient is None) == (p.opening is None), name


def test_the_suite_schema_protocol_enum_is_the_registry() -> None:
    schema = json.loads((ROOT / "leader_eval" / "suite" / "schema" / "suite.schema.json").read_text(encoding="utf-8"))
    assert schema["$defs"]["protocol"]["enum"] == list(PROTOCOLS)


def test_the_reason_enum_is_the_documented_list() -> None:
    doc = (ROOT / "docs" / "scoring.md").read_text(encoding="utf-8")
    table = doc.split("## Failure reasons (fixed list)", 1)[1].split("\n## ", 1)[0]
    # the first cell of each row, and the sentence naming the two outcomes that are not scored
    cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    cells += [line for line in table.splitlines() if line.startswith("`sampler_error`")]
    documented = {name for cell in cells for name in re.findall(r"`([a-z_]+)`", cell)}
    assert documented == {str(r) for r in Reason}


@pytest.mark.parametrize("expected", sorted(TEMPLATES))
def test_detect_reads_the_template(expected: str) -> None:
    assert detect(chat_template=TEMPLATES[expected]) == expected


def test_detect_without_tools_or_template_is_json_and_a_renderer_wins() -> None:
    assert detect() == "json"
    assert detect(chat_template="") == "json"
    assert detect(chat_template="{% for m in messages %}{{ m }}{% endfor %}{{ tools }}") == "hermes"  # tools, no marker
    assert detect(chat_template="{{ broken") == "json"  # an unparseable template declares nothing
    assert detect(renderer="qwen3") == "hermes"
    assert detect(renderer="Kimi_K2", chat_template=TEMPLATES["hermes"]) == "kimi_k2"
    assert detect(renderer="llama3") == "llama3_json"
    assert detect(renderer="role_colon", chat_template=TEMPLATES["kimi_k2"]) == "kimi_k2"


def test_attempt_and_own_markup_per_protocol() -> None:
    hermes, kimi, xml = REGISTRY["hermes"], REGISTRY["kimi_k2"], REGISTRY["anthropic_xml"]
    assert hermes.is_attempt("  <tool_call>{") and not hermes.is_attempt("Sure <tool_call>")
    assert hermes.owns("</tool_call>") and not hermes.owns("<tool_use>")
    assert kimi.owns("<|tool_call_argument_begin|>") and kimi.owns("<|tool_calls_section_end|>")
    assert xml.owns("</tool_use>") and xml.owns('<invoke name="x">') and not xml.owns("</tool_call>")
    assert REGISTRY["json"].is_attempt('{"tool"') and not REGISTRY["json"].is_attempt("{0:21} Ada")


# --- the same GGUF template, every backend ------------------------------------------------------


def _gguf_with_template(src: Path, template: str | None, out: Path) -> Path:
    if template is None:
        return src
    cmd = [sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--chat-template", template, "--force"]
    subprocess.run([*cmd, str(src), str(out)], check=True, capture_output=True, timeout=120)
    return out


@pytest.mark.model
@pytest.mark.parametrize("template", [None, "kimi_k2", "llama3_json"])
def test_the_same_gguf_template_gives_one_default_protocol_on_every_backend(
    template: str | None, tmp_path: Path, smol_tokenizer_dir: Path
) -> None:
    from leader_eval.sampling.backends.local import LocalBackend, embedded_model_path
    from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend
    from leader_eval.sampling.backends.tinker import TinkerBackend

    gguf = _gguf_with_template(embedded_model_path(), template and TEMPLATES[template], tmp_path / "m.gguf")
    local = LocalBackend(gguf, "local:test")
    openai = OpenAICompatBackend("http://127.0.0.1:9", "m", mode="completions", gguf_path=gguf)
    tinker = TinkerBackend(
        "tinker://run/sampler_weights/x",
        tokenizer=str(smol_tokenizer_dir),
        chat_template=local.chat_template,
        probe_context=False,
    )
    assert local.chat_template == openai.chat_template
    want = detect(chat_template=local.chat_template)
    assert want == (template or "json")
    assert local.default_protocol == openai.default_protocol == tinker.default_protocol == want


def test_a_marker_in_a_template_comment_selects_nothing() -> None:
    hermes = TEMPLATES["hermes"]
    for comment in ("{# unlike Mistral's [TOOL_CALLS] #}", "{# not <arg_key> #}", "{# <minimax:tool_call> #}"):
        assert detect(chat_template=comment + hermes) == "hermes", comment
    assert detect(chat_template=hermes + "{# an unclosed comment <arg_key>") == "hermes"
