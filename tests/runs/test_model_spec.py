"""A model entry ``SPEC [--flag value ...]``: the same option table and converters as ``leader-eval
run``, errors naming the CLI flag; a GGUF path with spaces stays one spec."""

from __future__ import annotations

import pytest

from leader_eval.runs.model_spec import MAX_ENTRY_CHARS, model_entries, one_model, parse_entry, roles_from_pairs
from leader_eval.runs.trusted import TrustedError


def test_an_entry_is_a_spec_then_run_flags() -> None:
    assert parse_entry("local:smollm2", where="w") == {"model": "local:smollm2"}
    assert parse_entry("gguf:/my models/m.gguf --temperature 0.2 --api-mode chat --no-cache", where="w") == {
        "model": "gguf:/my models/m.gguf",
        "temperature": 0.2,
        "api_mode": "chat",
        "no_cache": True,
    }
    assert parse_entry("openai:http://h/v1#m --chat-template 'my file.jinja'", where="w")["chat_template"] == (
        "my file.jinja"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("local:smollm2 --temperature -1", "argument --temperature: '-1' must be a finite number >= 0"),
        ("local:smollm2 --temp 0.2", "unrecognized arguments: --temp"),  # no abbreviations
        ("local:smollm2 --model other", "unrecognized arguments: --model other"),
        ("local:smollm2 --api-mode raw", "argument --api-mode: invalid choice: 'raw'"),
        ("local:smollm2 --label 'x y'", "is not a name"),
        ("--temperature 0", "does not start with a model spec"),
        ("local:smollm2 --chat-template 'open", "No closing quotation"),
        ("x" * (MAX_ENTRY_CHARS + 1), f"longer than {MAX_ENTRY_CHARS} characters"),
    ],
)
def test_a_bad_entry_names_where_and_the_cli_flag(text: str, expected: str) -> None:
    with pytest.raises(TrustedError) as info:
        parse_entry(text, where="--model-role grader")
    assert str(info.value).startswith("--model-role grader: ") and expected in str(info.value), str(info.value)


def test_an_entrys_own_options_beat_the_commands() -> None:
    base = {"model": ["local:smollm2 --temperature 0.2", "local:smollm2"], "temperature": 0.7, "concurrency": 4}
    first, second = model_entries(base)
    assert first.values["temperature"] == 0.2 and second.values["temperature"] == 0.7
    assert first.own == {"temperature": 0.2} and second.own == {}
    assert first.values["concurrency"] == second.values["concurrency"] == 4
    assert [e.model for e in model_entries({"model": None})] == ["local:smollm2"]
    with pytest.raises(TrustedError, match="--model given 2 times: stress samples one model"):
        one_model(base, command="stress")
    assert one_model({"model": "gguf:a.gguf --max-tokens 9"}, command="stress")["max_tokens"] == 9


def test_model_roles_from_lines() -> None:
    roles = roles_from_pairs(["grader=local:smollm2 --temperature 0", "fast = openai:http://h/v1#m"], source="ini x")
    assert roles["grader"].values == {"model": "local:smollm2", "temperature": 0.0}
    assert roles["fast"].spec == "openai:http://h/v1#m" and roles["fast"].source == "ini x"
    with pytest.raises(TrustedError, match="ini x: 'grader' is not NAME=VALUE"):
        roles_from_pairs(["grader"], source="ini x")
