"""CaseScorer on handcrafted samples: the verdict, its primary reason, hard fails, where a leak
is, and what is never scored. No model needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.protocols import parse_output
from leader_eval.scoring.scorer import CaseScorer, ModelInfo, SampleScore, _call_dict, case_scorer
from leader_eval.suite.load import Suite, load_suite
from leader_eval.suite.render import render_messages
from leader_eval.types import Sample

SUITE = """\
name: score-tests
description: handcrafted samples for the scoring glue
protocol: json
scaffold:
  messages:
    - role: system
      content: "You are {{ agent_name }}. Goal: {{ current_goal }}. Act only through the chat tool."
    - role: user
      content: "{{ request }}"
tools:
  - name: send_message_to_chat
    description: Post to the room.
    parameters:
      type: object
      properties:
        message: {type: string, minLength: 1}
      required: [message]
      additionalProperties: false
  - name: assign_task
    description: Give an agent a task.
    parameters:
      type: object
      properties:
        agent: {type: string}
        task: {type: string}
      required: [agent, task]
      additionalProperties: false
leakage:
  markers: ["[NO CHAT]"]
hard_fail: [empty, leak_tool_markup, leak_special_token, leak_placeholder]
defaults:
  vars: {agent_name: Mira}
cases:
  - id: kickoff
    vars: {current_goal: build a windmill by the river, request: "What are we doing?"}
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            message: {mentions_goal: true}
  - id: free_text
    vars: {current_goal: build a windmill by the river, request: "Say anything."}
    expect: {forbid: ["FORBIDDEN-WORD"]}
  - id: two_tasks
    vars: {current_goal: build a windmill by the river, request: "Ada wood, Bo stone."}
    expect:
      calls:
        - {tool: assign_task, args: {agent: Ada, task: wood}}
        - {tool: assign_task, args: {agent: Bo, task: stone}}
  - id: lenient_hard
    vars: {current_goal: build a windmill by the river, request: "Say hi."}
    hard_fail: [leak_marker]
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            message: {contains: windmill}
"""

SMOLLM2 = ModelInfo(special_tokens=("<|im_end|>", "<|endoftext|>", "<|im_start|>"), eot_tokens=("<|im_end|>",))
THINKER = ModelInfo(
    special_tokens=("<|im_end|>", "<|im_start|>"), eot_tokens=("<|im_end|>",), reasoning_tags=("<think>", "</think>")
)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    path: Path = tmp_path_factory.mktemp("suite") / "score.yaml"
    path.write_text(SUITE)
    return load_suite(path)


def _scorer(suite: Suite, case_id: str = "kickoff", model: ModelInfo = SMOLLM2, protocol: str = "json") -> CaseScorer:
    case = next(c for c in suite.cases if c.id == case_id)
    messages = render_messages(suite, case)
    prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return case_scorer(suite, case, protocol, model, messages, prompt + "<|im_start|>assistant\n")


def _sample(text: str, case_id: str = "kickoff", **kw: object) -> Sample:
    return Sample(case_id, 0, 0, "k", kw.pop("outcome", "ok"), text=text, stop_reason="stop", **kw)  # type: ignore[arg-type]


def _call(message: str) -> str:
    return json.dumps({"name": "send_message_to_chat", "arguments": {"message": message}})


def _failed(score: SampleScore) -> dict[str, dict[str, object]]:
    return {c["check"]: c for c in score.failed_checks}


def test_a_valid_call_passes(suite: Suite) -> None:
    s = _scorer(suite).score(_sample(_call("Team, today we build the windmill by the river!") + "<|im_end|>"))
    assert s.passed and s.reason is None and not s.hard_fail
    assert s.strict_format and s.lenient_format and s.tool_correct and not s.leaked
    assert s.partial_credit == 1.0
    assert [c["name"] for c in s.calls] == ["send_message_to_chat"]


def test_a_call_with_prose_around_it_is_unparseable(suite: Suite) -> None:
    text = "Sure, here you go:\n" + _call("Let's build the windmill by the river.")
    s = _scorer(suite).score(_sample(text))
    assert not s.passed and s.reason == "unparseable"
    assert not s.strict_format and s.lenient_format  # the call is there, the output is not the protocol
    assert s.calls == [] and len(s.lenient_calls) == 1


def test_tool_markup_inside_a_message_is_a_located_hard_leak(suite: Suite) -> None:
    text = _call("<tool_use><name>send_message_to_chat</name></tool_use> build the windmill by the river")
    s = _scorer(suite).score(_sample(text))
    assert s.strict_format and not s.passed and s.leaked
    assert s.reason == "leak_tool_markup" and s.hard_fail
    leak = _failed(s)["leakage"]
    assert leak["hard"]
    wheres = {f["where"] for f in leak["findings"]}  # type: ignore[union-attr]
    assert wheres == {"call[0].arguments.message"}
    assert all(f["reason"] == "leak_tool_markup" for f in leak["findings"])  # type: ignore[union-attr]


@pytest.mark.parametrize("outcome", ["error", "context_overflow"])
def test_a_sample_the_model_never_produced_is_not_scored(suite: Suite, outcome: str) -> None:
    s = _scorer(suite).score(_sample("", outcome=outcome, error="server said 500"))
    assert not s.scored and not s.passed and not s.hard_fail
    assert s.reason == ("context_overflow" if outcome == "context_overflow" else "sampler_error")
    assert s.calls == [] and [c["check"] for c in s.checks] == [outcome]


def test_hard_fail_follows_the_case_list(suite: Suite) -> None:
    text = _call("[NO CHAT] build the windmill by the river")
    # the suite's hard_fail list does not name leak_marker ...
    soft = _scorer(suite, "kickoff").score(_sample(text))
    assert soft.reason == "leak_marker" and not soft.hard_fail
    # ... the case's own list does
    hard = _scorer(suite, "lenient_hard").score(_sample(text, case_id="lenient_hard"))
    assert hard.reason == "leak_marker" and hard.hard_fail
    assert _failed(hard)["leakage"]["hard"] and not _failed(soft)["leakage"]["hard"]


def test_a_declared_reasoning_block_is_kept_as_reasoning_not_a_leak(suite: Suite) -> None:
    text = "<think>Bo asked first; the goal is the windmill.</think>\n" + _call("We build the windmill by the river.")
    s = _scorer(suite, model=THINKER).score(_sample(text + "<|im_end|>"))
    assert s.passed and not s.leaked
    assert s.reasoning == "Bo asked first; the goal is the windmill."
    # the same text from a model that declares no reasoning block: a visible leak, not the protocol
    undeclared = _scorer(suite).score(_sample(text))
    assert not undeclared.passed and undeclared.reasoning is None
    assert undeclared.reason == "unparseable" and undeclared.leaked


@pytest.mark.parametrize("after", [_call("We build the windmill by the river."), "Hello team, windmill today!"])
def test_a_second_reasoning_block_after_the_declared_one_is_a_leak(suite: Suite, after: str) -> None:
    # the parser keeps the first block as reasoning; a second one is shown to the room
    text = "<think>Bo asked first.</think>\n<think>Again: the goal is the windmill.</think>\n" + after
    s = _scorer(suite, model=THINKER).score(_sample(text + "<|im_end|>"))
    assert s.reasoning == "Bo asked first."
    assert s.leak_classes == ["leak_reasoning"] and not s.passed


@pytest.mark.parametrize("tail", ["", "\n<|im_end|>", "\n\u200b"])
def test_a_declared_reasoning_block_with_nothing_after_it_is_empty(suite: Suite, tail: str) -> None:
    text = "<think>Ada asked what we do; I should answer with the goal. " * 3 + "</think>" + tail
    s = _scorer(suite, model=THINKER).score(_sample(text))
    assert s.reason == "empty" and s.hard_fail and not s.leaked
    assert s.reasoning is not None and "repetition" not in s.failed_reasons  # a looping block: still empty
    # undeclared, the same block is visible text: a reasoning leak, not empty
    undeclared = _scorer(suite).score(_sample(text))
    assert "empty" not in undeclared.failed_reasons and "leak_reasoning" in undeclared.leak_classes


def test_a_loop_inside_a_call_argument_is_repetition_located_at_the_argument(suite: Suite) -> None:
    text = _call("windmill by the river! " + "Okay. " * 10)
    assert len(text) > 2 * len("Okay. " * 10)  # the wrapper alone would dilute the loop under the threshold
    s = _scorer(suite).score(_sample(text))
    assert s.reason == "repetition" and s.strict_format
    (rep,) = [c for c in s.failed_checks if c["check"] == "repetition"]
    assert [f["where"] for f in rep["findings"]] == ["call[0].arguments.message"]
    assert rep["findings"][0]["text"].strip().startswith("Okay. Okay.")  # the loop, in the argument's offsets
    assert _scorer(suite).score(_sample(_call("Yes, yes! We build the windmill by the river, yes."))).passed


def test_score_dicts_of_calls_are_tool_call_dicts() -> None:
    text = json.dumps(
        [
            {"name": "a", "arguments": {"x": [1, 2.5, {"y": None}], "z": True}},
            {"name": "b", "arguments": {"s": "é"}},
        ]
    )
    calls = parse_output(text, "json").calls
    for c in calls:
        d = _call_dict(c)
        assert d == c.to_dict()
        assert d["arguments"] is not c.arguments  # a copy, as asdict makes


# --- order-free verdicts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Hello [NO CHAT] <|im_start|>",
        "Hello <|im_start|> [NO CHAT]",
        "[NO CHAT] then {{goal}}",
        "{{goal}} then [NO CHAT]",
    ],
)
def test_a_hard_leak_is_a_hard_fail_wherever_it_sits_among_soft_ones(suite: Suite, text: str) -> None:
    # the suite's hard_fail names leak_special_token and leak_placeholder, not leak_marker
    s = _scorer(suite).score(_sample(_call(text + " build the windmill by the river")))
    assert s.hard_fail and not s.passed
    assert "leak_marker" in s.leak_classes and len(s.leak_classes) == 2
    assert _failed(s)["leakage"]["reason"] == s.leak_classes[0]  # named by precedence, not position


def test_the_leakage_reason_follows_the_documented_precedence(suite: Suite) -> None:
    for text in ("[NO CHAT] <|im_start|> {{goal}}", "{{goal}} <|im_start|> [NO CHAT]"):
        s = _scorer(suite).score(_sample(_call(text + " windmill by the river")))
        assert _failed(s)["leakage"]["reason"] == "leak_special_token"
        assert s.leak_classes == ["leak_special_token", "leak_placeholder", "leak_marker"]


LEAK_FRAGMENTS = {
    "leak_special_token": "<|im_start|>",
    "leak_tool_markup": "<tool_use>",
    "leak_reasoning": "<think>",
    "leak_placeholder": "[AGENT_NAME]",
    "leak_marker": "[NO CHAT]",
    "forbidden_pattern": "FORBIDDEN-WORD",
}
PROSE = ["Team,", "today", "we", "build", "the", "windmill", "by", "the", "river."]


@settings(max_examples=60, deadline=None)
@given(
    classes=st.lists(st.sampled_from(sorted(LEAK_FRAGMENTS)), min_size=1, max_size=4, unique=True),
    data=st.data(),
)
def test_leak_classes_and_hard_fail_do_not_depend_on_order(
    suite: Suite, classes: list[str], data: st.DataObject
) -> None:
    """Permute the leak fragments within the prose, and the parallel calls that carry them."""
    scorer = _scorer(suite, "free_text")
    results = set()
    for _ in range(3):
        words = list(PROSE)
        for frag in data.draw(st.permutations([LEAK_FRAGMENTS[c] for c in classes])):
            words.insert(data.draw(st.integers(0, len(words))), frag)
        half = data.draw(st.integers(1, len(words) - 1))
        calls = [
            {"name": "send_message_to_chat", "arguments": {"message": " ".join(words[:half])}},
            {"name": "send_message_to_chat", "arguments": {"message": " ".join(words[half:])}},
        ]
        calls = data.draw(st.permutations(calls))
        for text in (" ".join(words), json.dumps(calls)):
            s = scorer.score(_sample(text, case_id="free_text"))
            results.add((text[0] == "[" and text[1] == "{", tuple(s.leak_classes), s.hard_fail, s.reason))
    as_text = {r[1:] for r in results if not r[0]}
    as_calls = {r[1:] for r in results if r[0]}
    assert len(as_text) == 1 and len(as_calls) == 1, results
    ((leaks, hard, _),) = as_calls
    assert set(leaks) == set(classes)
    assert hard == bool(set(classes) & {"leak_special_token", "leak_tool_markup", "leak_placeholder"})


def test_an_argument_failure_is_named_by_precedence_not_by_call_order(suite: Suite) -> None:
    a = {"name": "assign_task", "arguments": {"agent": 5, "task": "wood"}}  # wrong type
    b = {"name": "assign_task", "arguments": {"agent": "Bo"}}  # a required argument missing
    scorer = _scorer(suite, "two_tasks")
    first = scorer.score(_sample(json.dumps([a, b]), case_id="two_tasks"))
    second = scorer.score(_sample(json.dumps([b, a]), case_id="two_tasks"))
    assert first.reason == second.reason == "missing_arg"
    assert first.failed_reasons == second.failed_reasons


# --- failed attempts are one failure, whatever protocol ------------------------------------------

MSG = {"message": "Team, today we build the windmill by the river!"}
ATTEMPTS = {
    "json": json.dumps({"tool": "send_message_to_chat", "arguments": MSG}),
    "hermes": "<tool_call>\n" + json.dumps({"name": "send_message_to_chat", "arguments": MSG}) + "\n</tool_call>",
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.send_message_to_chat:0"
    "<|tool_call_argument_begin|>" + json.dumps(MSG) + "<|tool_call_end|><|tool_calls_section_end|>",
    "llama3_json": "<|python_tag|>" + json.dumps({"name": "send_message_to_chat", "parameters": MSG}),
    "pythonic": f"[send_message_to_chat(message={MSG['message']!r})]",
    "anthropic_xml": "<tool_use><name>send_message_to_chat</name><arguments>"
    + json.dumps(MSG)
    + "</arguments></tool_use>",
}
INVOKE = (
    '<function_calls>\n<invoke name="send_message_to_chat">\n<parameter name="message">'
    + MSG["message"]
    + "</parameter>\n</invoke>\n</function_calls>"
)


@pytest.mark.parametrize("protocol", [*ATTEMPTS, "anthropic_invoke"])
def test_a_call_followed_by_prose_is_unparseable_and_nothing_else(suite: Suite, protocol: str) -> None:
    call = INVOKE if protocol == "anthropic_invoke" else ATTEMPTS[protocol]
    scorer = _scorer(suite, protocol=protocol.replace("anthropic_invoke", "anthropic_xml"))
    assert scorer.score(_sample(call)).passed  # the call alone is the protocol
    s = scorer.score(_sample(call + "\nThat is all."))
    assert s.reason == "unparseable" and "leakage" not in _failed(s)
    assert s.leak_classes == [] and not s.hard_fail


@pytest.mark.parametrize("protocol", [*ATTEMPTS, "anthropic_invoke"])
def test_a_special_token_after_a_failed_attempt_is_a_special_token_leak(suite: Suite, protocol: str) -> None:
    call = INVOKE if protocol == "anthropic_invoke" else ATTEMPTS[protocol]
    scorer = _scorer(suite, protocol=protocol.replace("anthropic_invoke", "anthropic_xml"))
    s = scorer.score(_sample(call + "\nok<|im_start|>user"))
    assert s.reason == "unparseable" and s.hard_fail
    assert s.leak_classes == ["leak_special_token"]
    assert _failed(s)["leakage"]["reason"] == "leak_special_token"


def test_markup_of_another_protocol_after_an_attempt_stays_a_leak(suite: Suite) -> None:
    s = _scorer(suite, protocol="hermes").score(_sample(ATTEMPTS["hermes"] + "\n<tool_use>"))
    assert s.reason == "unparseable" and s.leak_classes == ["leak_tool_markup"]


# --- placeholders --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "slot", ["[AGENT_NAME]", "[GOAL]", "[CURRENT_GOAL]", "[current_goal]", "{AGENT_NAME}", "[request]", "{REQUEST}"]
)
def test_a_bracketed_placeholder_in_a_message_is_a_hard_leak(suite: Suite, slot: str) -> None:
    s = _scorer(suite).score(_sample(_call(f"Hi {slot}, today we build the windmill by the river")))
    assert s.reason == "leak_placeholder" and s.hard_fail
    assert [leak["text"] for leak in s.leaks] == [slot]


@pytest.mark.parametrize(
    "near_miss",
    ["[OK]", "[1]", "[x]", "[ ]", "[UPDATE]", "[the plan](https://example.org/plan)", "[GOAL](#goal)", "[Smith 2020]"],
)
def test_bracketed_near_misses_are_not_placeholders(suite: Suite, near_miss: str) -> None:
    s = _scorer(suite).score(_sample(_call(f"{near_miss} Today we build the windmill by the river")))
    assert s.passed and s.leaks == [], s.leaks


def test_render_and_output_share_one_placeholder_definition() -> None:
    from leader_eval.checks.leakage import LeakConfig, find_leaks
    from leader_eval.suite.render import find_placeholders

    for text in ["[AGENT_NAME]", "[GOAL]", "<CURRENT_GOAL>", "{{ goal }}", "{goal}", "[TODO: x]", "[OK]", "[1]", "[x]"]:
        at_render = [m.group() for m in find_placeholders(f"Hi {text} there")]
        at_output = [f.text for f in find_leaks(f"Hi {text} there", LeakConfig()) if f.reason == "leak_placeholder"]
        assert at_render[:1] == at_output, text


# --- one end of turn ------------------------------------------------------------------------------


@pytest.mark.parametrize("eot", ["<|eot|>", "<|im_end|>", "<|eot_id|>"])
def test_an_output_of_only_the_models_end_of_turn_token_is_empty(suite: Suite, eot: str) -> None:
    model = ModelInfo(special_tokens=(eot, "<|im_start|>"), eot_tokens=(eot,))
    s = _scorer(suite, model=model).score(_sample(eot))
    assert s.reason == "empty" and s.hard_fail and s.leak_classes == []
    # and a message followed by it is the message
    ok = _scorer(suite, model=model).score(_sample(_call("Today we build the windmill by the river") + eot))
    assert ok.passed


def test_a_model_without_declared_end_of_turn_tokens_uses_the_common_list(suite: Suite) -> None:
    for eot in ("<|im_end|>", "<|eot|>", "<|eot_id|>", "</s>"):
        s = _scorer(suite, model=ModelInfo()).score(_sample(eot))
        assert s.reason == "empty" and s.hard_fail and s.leak_classes == [], eot


def test_one_json_type_names_an_int_integer() -> None:
    from leader_eval.types import json_type

    assert json_type(1) == "integer" and json_type(1.5) == "number" and json_type(True) == "boolean"
    assert (
        parse_output('{"tool": "pause", "arguments": 15}', "json").error
        == "arguments must be a JSON object, got integer"
    )


# --- the scaffold echo compares against what the model read ---------------------------------------

ECHO_SUITE = """\
name: echo
protocol: json
scaffold:
  messages:
    - role: system
      content: "You post to the village room. The tools come through the chat template."
    - role: user
      content: "hi"
tools:
  - name: send_message_to_chat
    description: "Publie un message dans le café du village où les élèves et les aînés discutent de la récolte à venir près de la rivière"
    parameters: {type: object, properties: {message: {type: string}}, required: [message]}
cases:
  - id: c
    expect: {calls: [{tool: send_message_to_chat}]}
"""


def test_an_echo_of_a_non_ascii_tool_description_is_a_scaffold_leak(tmp_path: Path) -> None:
    path = tmp_path / "echo.yaml"
    path.write_text(ECHO_SUITE, encoding="utf-8")
    echo_suite = load_suite(path)
    scorer = _scorer(echo_suite, "c")
    said = "Publie un message dans le café du village où les élèves et les aînés discutent de la récolte"
    s = scorer.score(_sample(_call(said), case_id="c"))
    assert s.leak_classes == ["leak_scaffold"]


REF_SUITE = """\
name: refs
protocol: json
scaffold:
  messages:
    - {role: system, content: "Post to the room."}
tools:
  - name: send_message_to_chat
    parameters:
      required: [message]
      properties: {message: {$ref: "common.json#/$defs/message"}}
      type: object
    description: Say something; the message schema lives in common.json.
cases:
  - id: c
    expect: {calls: [{tool: send_message_to_chat}]}
"""


def test_a_tool_schema_ref_to_a_suite_file_is_validated_with_the_suites_own_registry(tmp_path: Path) -> None:
    (tmp_path / "common.json").write_text(json.dumps({"$defs": {"message": {"type": "string", "maxLength": 10}}}))
    (tmp_path / "refs.yaml").write_text(REF_SUITE)
    scorer = _scorer(load_suite(tmp_path / "refs.yaml"), "c")
    assert scorer.score(_sample(_call("short"), case_id="c")).passed
    long = scorer.score(_sample(_call("far too long for the schema"), case_id="c"))
    assert long.reason == "schema_violation" and "too long" in _failed(long)["arguments_schema"]["detail"]


def test_a_common_end_token_the_model_owns_ends_its_turn_too(suite: Suite) -> None:
    # SmolLM2 lists <|endoftext|> among its special tokens: alone (or after <|im_end|>) it is empty
    for text in ("<|endoftext|>", "<|im_end|><|endoftext|>"):
        assert _scorer(suite).score(_sample(text)).reason == "empty"
    # a model that does not own <|endoftext|>: it is a special-token leak, not an end of turn
    other = ModelInfo(special_tokens=("<|eot|>",), eot_tokens=("<|eot|>",))
    s = _scorer(suite, model=other).score(_sample(_call("Today we build the windmill by the river") + "<|endoftext|>"))
    assert s.leak_classes == ["leak_special_token"]


@pytest.mark.parametrize("message", ["", "   ", "\n\t", "\u200b "])
@pytest.mark.parametrize("case_id", ["kickoff", "free_text", "lenient_hard"])
def test_a_blank_message_argument_is_an_empty_output(suite: Suite, message: str, case_id: str) -> None:
    """The argument that carries the message (judged for content by some case: here ``kickoff``'s
    ``mentions_goal``) fails ``empty`` when blank, in every case, also ``free_text``, which sets no
    call expectation; ``empty`` is hard where the case lists it (``lenient_hard`` does not)."""
    score = _scorer(suite, case_id).score(_sample(_call(message), case_id))
    assert score.reason == "empty"
    assert _failed(score)["empty"]["detail"] == "call[0].arguments.message is empty"
    assert score.hard_fail is (case_id != "lenient_hard")


def test_other_arguments_follow_their_schema_when_blank(suite: Suite) -> None:
    """``assign_task.task`` is one of two required parameters: a blank task is judged by its
    constraint (a wrong value), not as an empty output; a message with text is no empty output."""
    blank_task = json.dumps(
        [
            {"name": "assign_task", "arguments": {"agent": "Ada", "task": "  "}},
            {"name": "assign_task", "arguments": {"agent": "Bo", "task": "stone"}},
        ]
    )
    score = _scorer(suite, "two_tasks").score(_sample(blank_task, "two_tasks"))
    assert score.reason == "wrong_value" and "empty" not in _failed(score)
    score = _scorer(suite).score(_sample(_call(" windmill by the river "), "kickoff"))
    assert score.passed


def test_the_message_argument_is_a_single_required_parameter_judged_for_content(suite: Suite) -> None:
    from leader_eval.scoring.scorer import message_arguments

    tools = {t.name: t.parameters for t in suite.tools}
    assert message_arguments(suite.cases, tools) == {("send_message_to_chat", "message")}
    # the flagship suite: its chat tool's message, not assign_task.task (judged by contains too)
    flagship = load_suite(Path(__file__).resolve().parents[2] / "suites" / "leader_core.yaml")
    flagship_tools = {t.name: t.parameters for t in flagship.tools}
    assert message_arguments(flagship.cases, flagship_tools) == {("send_message_to_chat", "message")}


def test_a_message_beside_a_channel_is_still_the_message(suite: Suite) -> None:
    """A chat tool that also requires a channel: its ``message`` (judged for content) carries the
    output's message, so a blank one, or one of blank glyphs (Hangul filler, blank braille), is
    ``empty``."""
    from leader_eval.scoring.scorer import message_arguments

    chat = next(t for t in suite.tools if t.name == "send_message_to_chat")
    params = {**chat.parameters, "properties": {**chat.parameters["properties"], "channel": {"type": "string"}},
              "required": ["channel", "message"]}  # fmt: skip
    tools = {**{t.name: t.parameters for t in suite.tools}, "send_message_to_chat": params}
    assert message_arguments(suite.cases, tools) == {("send_message_to_chat", "message")}
    for blank in ("  ", "\u3164\u3164", "\u2800"):
        score = _scorer(suite, "kickoff").score(_sample(_call(blank), "kickoff"))
        assert score.reason == "empty", blank


# --- every family's tokens (issue 22) ---------------------------------------------------------

GEMMA4 = ModelInfo(
    special_tokens=("<turn|>", "<|turn>", "<|channel>", "<channel|>"),
    eot_tokens=("<turn|>",),
    reasoning_tags=("<|channel>", "<channel|>"),
)


def _leaks(s: SampleScore) -> list[tuple[str, str, str]]:
    return [(f["reason"], f["where"], f["text"]) for f in s.leaks]


@pytest.mark.parametrize(
    ("model", "block"),
    [
        (GEMMA4, "<|channel>thought\nwho is free? Ada.<channel|>"),
        (THINKER, "<think>who is free? Ada.</think>"),
    ],
)
def test_a_declared_reasoning_block_inside_the_message_is_a_reasoning_leak(
    suite: Suite, model: ModelInfo, block: str
) -> None:
    """In the text and in a call's argument alike: one reasoning leak, not two special tokens."""
    s = _scorer(suite, model=model).score(_sample(_call(f"{block}We build the windmill by the river.")))
    assert _leaks(s) == [("leak_reasoning", "call[0].arguments.message", block)]


def test_a_declared_call_token_of_the_model_stays_tool_markup(suite: Suite) -> None:
    mistral = ModelInfo(special_tokens=("</s>", "[TOOL_CALLS]", "[ARGS]", "[INST]"), eot_tokens=("</s>",))
    s = _scorer(suite, model=mistral).score(_sample(_call("[TOOL_CALLS]wait[ARGS]{} the windmill by the river")))
    assert _leaks(s) == [
        ("leak_tool_markup", "call[0].arguments.message", "[TOOL_CALLS]"),
        ("leak_tool_markup", "call[0].arguments.message", "[ARGS]"),
    ]


def test_other_families_tokens_leak_in_any_model_output(suite: Suite) -> None:
    text = '<|turn>model We build <seed:eos> the windmill ]~b] by the river <｜DSML｜invoke name="x">'
    s = _scorer(suite).score(_sample(_call(text)))
    assert [(r, t) for r, _, t in _leaks(s)] == [
        ("leak_special_token", "<|turn>"),
        ("leak_special_token", "<seed:eos>"),
        ("leak_special_token", "]~b]"),
        ("leak_tool_markup", '<｜DSML｜invoke name="x">'),
    ]


def test_every_registered_protocol_markup_reaches_the_leak_rules() -> None:
    """Derived from the registry, not listed: a protocol added there counts in every output."""
    from leader_eval.protocols import REGISTRY
    from leader_eval.scoring.scorer import registry_call_markup

    markup = registry_call_markup()
    for p in REGISTRY.values():
        assert all(piece in markup for piece in (p.opening, *p.closing) if piece), p.name
