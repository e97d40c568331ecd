"""What the GLM, Hunyuan, Kimi K3 and DSML templates cannot express, rendered through the real
templates: a string holding the format's own closing tag. The template writes it as it is, so the
first closing tag ends the value; the strict parser refuses the rest instead of guessing where the
value ended (docs/protocols.md)."""

from __future__ import annotations

import pytest

from leader_eval.protocols import detect, parse_output
from leader_eval.types import END_OF_TURN_TOKENS
from tests.support.template_calls import CORPUS, SCHEMAS, assistant_output, end_of_turn

CLOSING = {
    "GLM-4.6": "</arg_value>",
    "GLM-4.7-Flash": "</arg_value>",
    "tencent-Hy3": "</arg_value:opensource>",
    "Kimi-K3": "<|close|>argument<|sep|>",
    "deepseek-ai-DeepSeek-V3.2": "</\uff5cDSML\uff5cparameter>",
    "deepseek-ai-DeepSeek-V4": "</\uff5cDSML\uff5cparameter>",
}
TAGS = (("<think>", "</think>"), ("<|open|>think<|sep|>", "<|close|>think<|sep|>"))


@pytest.mark.parametrize("stem", sorted(CLOSING))
def test_a_string_holding_the_closing_tag_is_refused_not_guessed(stem: str) -> None:
    path = CORPUS / f"{stem}.jinja"
    protocol = detect(chat_template=path.read_text(encoding="utf-8"))
    calls = [("post_update", {"message": f"see {CLOSING[stem]} here", "count": 1})]
    text = assistant_output(path, calls)
    tags = next((t for t in TAGS if t[1] in text), None)
    eot = (*end_of_turn(path), *END_OF_TURN_TOKENS)
    r = parse_output(text, protocol, eot_tokens=eot, reasoning_tags=tags, tool_schemas=SCHEMAS)
    assert not r.strict_ok, r.calls
    # the same call without the tag parses: the refusal is the tag's, not the template's
    fine = assistant_output(path, [("post_update", {"message": "see here", "count": 1})])
    ok = parse_output(fine, protocol, eot_tokens=eot, reasoning_tags=tags, tool_schemas=SCHEMAS)
    assert ok.strict_ok and [(c.name, c.arguments) for c in ok.calls] == [
        ("post_update", {"message": "see here", "count": 1})
    ]
