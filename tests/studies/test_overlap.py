"""Held-out hygiene: n-gram overlap between suite cases and training JSONL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.studies.overlap import format_overlap_report, overlap_report
from leader_eval.suite.load import Suite, load_suite

SUITE_YAML = """\
name: overlap-test
scaffold:
  messages:
    - role: system
      content: |
        You are {{ agent_name }}, the leader agent of a shared chat room where several agents coordinate their work.
        You act only through the tools below and you never describe clicks or interface elements in your replies.
        Current village goal: {{ goal }}
        Tools:
        {{ tools_json }}
    - role: user
      content: |
        Event log:
        {% for e in events %}
        [{{ e.time }}] {{ e.author }}: {{ e.text }}
        {% endfor %}
tools:
  - name: send_message_to_chat
    description: Post a message to the shared chat room so that every agent in the room can read it right away.
    parameters:
      type: object
      properties:
        text: {type: string, description: The message text that every agent in the room will see.}
      required: [text]
defaults:
  vars:
    agent_name: Leader
cases:
  - id: granary
    vars:
      goal: build a granary before the first frost arrives in the northern valley
      events:
        - time: "09:00"
          author: bob
          text: "the wheat harvest in the eastern field is almost finished and we need somewhere dry to keep it"
        - time: "09:05"
          author: carol
          text: "I can gather timber from the pine forest if someone tells me how many planks we need"
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            text: "Bob please finish the harvest today and Carol bring forty pine planks to the granary site by noon"
  - id: bridge
    vars:
      goal: repair the rope bridge over the river gorge so traders can cross again
      events:
        - time: "14:00"
          author: dave
          text: "two planks near the middle of the bridge snapped during the storm last night"
        - time: "14:02"
          author: erin
          text: "the rope merchant from the coast will arrive tomorrow with fresh hemp cords"
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            text: {contains: bridge}
  - id: well
    vars:
      goal: dig a second well on the hill so the upper houses have clean water
      events:
        - time: "07:30"
          author: frank
          text: "the old well by the square tastes of iron again and the bucket rope is frayed"
    expect:
      no_call: true
"""

# verbatim from the cases above
BOB_SENTENCE = "the wheat harvest in the eastern field is almost finished and we need somewhere dry to keep it"
GRANARY_ANSWER = "Bob please finish the harvest today and Carol bring forty pine planks to the granary site by noon"


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE_YAML)
    return load_suite(path)


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def chat(user: str, answer: str = "ok") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]}


FILLER = [
    chat("what should we cook for dinner tonight given that the market was closed all afternoon"),
    chat("please summarise the last three messages from the fishing crew about the weather on the lake"),
    {"text": "the blacksmith asked whether anyone has spare charcoal for the forge before the festival"},
]


def by_id(report: Any) -> dict[str, Any]:
    return {c.case_id: c for c in report.cases}


def test_planted_excerpt_is_flagged_with_its_span_and_training_line(suite: Suite, tmp_path: Path) -> None:
    planted = chat(f"log follows. {BOB_SENTENCE}. end of log", "noted")
    train = write_jsonl(tmp_path / "train.jsonl", [FILLER[0], FILLER[1], planted, FILLER[2]])

    report = overlap_report(suite, [train])

    cases = by_id(report)
    granary = cases["granary"]
    assert granary.flagged
    assert granary.matched > 0
    assert [s.text for s in granary.spans] == [BOB_SENTENCE]
    span = granary.spans[0]
    assert span.segment == "messages[1] user"
    user_text = next(m for m in suite_messages(suite, "granary") if m["role"] == "user")["content"]
    assert user_text[span.start : span.end] == BOB_SENTENCE
    assert [str(t) for t in granary.training_lines] == [f"{train}:3"]
    assert granary.training_line_count == 1
    assert not cases["bridge"].flagged and cases["bridge"].matched == 0
    assert report.contamination_rate == pytest.approx(1 / 3)
    assert report.training_examples == 4


def suite_messages(suite: Suite, case_id: str) -> list[dict[str, Any]]:
    from leader_eval.suite.render import render_messages

    return render_messages(suite, next(c for c in suite.cases if c.id == case_id))


def test_scaffold_and_tool_contract_overlap_is_ignored(suite: Suite, tmp_path: Path) -> None:
    """Training examples rendered through the same scaffold, with other variables, are clean."""
    from leader_eval.suite.render import render_messages

    records: list[Any] = []
    for i, case in enumerate(suite.cases):
        other = {
            **case.vars,
            "goal": f"plant {i} rows of barley along the southern wall of the monastery",
            "events": [{"time": "08:00", "author": "zed", "text": "the goats escaped again through the broken gate"}],
        }
        fake = type(case)(id=f"t{i}", line=1, vars=other, expect={})
        messages = render_messages(suite, fake)
        messages.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {"type": "function", "function": {"name": "send_message_to_chat", "arguments": '{"text": "ok"}'}}
                ],
            }
        )
        records.append({"messages": messages, "tools": [t.to_openai() for t in suite.tools]})
    # the tool contract quoted as plain text, and the system prompt sentence with the shared agent name
    records.append({"text": json.dumps([t.to_openai() for t in suite.tools])})
    records.append(
        {"text": "You are Leader, the leader agent of a shared chat room where several agents coordinate their work."}
    )
    train = write_jsonl(tmp_path / "scaffold.jsonl", records)

    report = overlap_report(suite, [train])

    assert report.provenance == "template"
    assert [c.matched for c in report.cases] == [0, 0, 0]
    assert report.contamination_rate == 0.0
    assert all(c.ignored > 0 for c in report.cases)  # the scaffold's n-grams were there to ignore


QUOTED_SCAFFOLD = (  # verbatim from the system prompt template
    "you act only through the tools below and you never describe clicks or interface elements in your replies"
)
QUOTED_CONTRACT = "post a message to the shared chat room so that every agent in the room can read it right away"


@pytest.mark.parametrize("quoted", [QUOTED_SCAFFOLD, QUOTED_CONTRACT], ids=["scaffold-text", "tool-contract"])
@pytest.mark.parametrize("one_case", [False, True], ids=["three-cases", "one-case"])
def test_a_case_variable_that_quotes_the_scaffold_is_not_checked(tmp_path: Path, quoted: str, one_case: bool) -> None:
    yaml_text = SUITE_YAML.replace(
        "the old well by the square tastes of iron again and the bucket rope is frayed", f"frank wrote: {quoted}"
    )
    if one_case:  # no "shared by every case" rule to lean on: the scaffold text itself must be known
        yaml_text = yaml_text[: yaml_text.index("  - id: granary")] + yaml_text[yaml_text.index("  - id: well") :]
    path = tmp_path / "suite.yaml"
    path.write_text(yaml_text)
    suite = load_suite(path)
    train = write_jsonl(tmp_path / "t.jsonl", [chat(f"as the manual says {quoted}")])
    report = overlap_report(suite, [train])
    well = by_id(report)["well"]
    assert well.ngrams > 0  # the case still has text of its own
    assert well.matched == 0


def test_text_every_case_shares_counts_as_scaffold(tmp_path: Path) -> None:
    """A suite-wide default variable renders into every case: it is scaffold, not a case's own text."""
    rules = "always greet newcomers by name and never promise food that the storehouse does not hold"
    yaml_text = SUITE_YAML.replace("agent_name: Leader", f"agent_name: Leader\n    rules: {rules}")
    yaml_text = yaml_text.replace(
        "Current village goal: {{ goal }}", "House rules: {{ rules }}\n        Current village goal: {{ goal }}"
    )
    path = tmp_path / "suite.yaml"
    path.write_text(yaml_text)
    suite = load_suite(path)
    train = write_jsonl(tmp_path / "t.jsonl", [chat(f"the rules: {rules}")])
    report = overlap_report(suite, [train])
    assert [c.matched for c in report.cases] == [0, 0, 0]


def test_clean_training_set_gives_zero_contamination(suite: Suite, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "clean.jsonl", FILLER * 5)
    report = overlap_report(suite, [train])
    assert report.contamination_rate == 0.0
    assert report.flagged == []
    assert all(c.ngrams > 0 and c.spans == [] and c.training_lines == [] for c in report.cases)
    text = format_overlap_report(report)
    assert "3 cases with no overlap" in text
    assert text.splitlines()[-1] == "contamination: 0/3 cases (0.0%) at >= 0.10 overlap"


def test_expected_answer_in_a_tool_call_is_found(suite: Suite, tmp_path: Path) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "send_message_to_chat", "arguments": json.dumps({"text": GRANARY_ANSWER})},
            }
        ],
    }
    train = write_jsonl(tmp_path / "t.jsonl", [FILLER[0], {"messages": [{"role": "user", "content": "go"}, call]}])
    report = overlap_report(suite, [train])
    granary = by_id(report)["granary"]
    assert [s.segment for s in granary.spans] == ["expect"]
    assert GRANARY_ANSWER.lower() in granary.spans[0].text.lower()
    assert [t.line for t in granary.training_lines] == [2]
    # the answer is a handful of the case's n-grams, yet a leaked answer flags the case on its own
    strict = by_id(overlap_report(suite, [train], threshold=0.5))["granary"]
    assert strict.fraction < 0.5
    assert strict.answer_fraction == 1.0
    assert strict.flagged


CAROL = "I can gather timber from the pine forest if someone tells me how many planks we need"


@pytest.mark.parametrize(
    "record",
    [
        pytest.param({"messages": [{"role": "user", "content": CAROL}]}, id="openai"),
        pytest.param(
            {"messages": [{"role": "user", "content": [{"type": "text", "text": CAROL}]}]}, id="openai-content-parts"
        ),
        pytest.param(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"function": {"name": "send_message_to_chat", "arguments": json.dumps({"text": CAROL})}}
                        ],
                    },
                ]
            },
            id="openai-tool-call-arguments",
        ),
        pytest.param({"prompt": "Log:\n" + CAROL, "completion": "noted"}, id="prompt-completion"),
        pytest.param({"prompt": [{"role": "user", "content": CAROL}], "completion": []}, id="prompt-completion-chat"),
        pytest.param({"text": f"<|im_start|>user\n{CAROL}<|im_end|>"}, id="text"),
        pytest.param(
            {"conversations": [{"from": "human", "value": CAROL}, {"from": "gpt", "value": "ok"}]}, id="sharegpt"
        ),
    ],
)
def test_training_formats_parse(suite: Suite, tmp_path: Path, record: dict[str, Any]) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", [FILLER[2], record])
    report = overlap_report(suite, [train])
    granary = by_id(report)["granary"]
    assert [s.text for s in granary.spans] == [CAROL]
    assert [t.line for t in granary.training_lines] == [2]


def test_several_training_files_are_named_per_line(suite: Suite, tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [FILLER[0]])
    b = write_jsonl(tmp_path / "b.jsonl", [FILLER[1], chat(CAROL), chat(BOB_SENTENCE)])
    report = overlap_report(suite, [a, b])
    granary = by_id(report)["granary"]
    assert [str(t) for t in granary.training_lines] == [f"{b}:2", f"{b}:3"]
    assert report.training_examples == 4


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"messages": [{"role": "user", "content": "unterminated}', "invalid JSON"),
        ('{"input": "x", "output": "y"}', "unknown training record"),
        ('["a", "b"]', "must be a JSON object"),
        ('{"messages": "hello"}', "'messages' must be a list"),
    ],
)
def test_bad_training_line_names_file_and_line(suite: Suite, tmp_path: Path, line: str, message: str) -> None:
    train = tmp_path / "bad.jsonl"
    train.write_text(json.dumps(FILLER[0]) + "\n\n" + line + "\n" + json.dumps(FILLER[1]) + "\n")
    with pytest.raises(LeaderEvalError) as err:
        overlap_report(suite, [train])
    text = str(err.value)
    assert text.startswith(f"{train}:3: ")
    assert message in text
    assert "\n" not in text
    assert err.value.exit_status == 2


def test_missing_training_file_is_a_user_error(suite: Suite, tmp_path: Path) -> None:
    with pytest.raises(LeaderEvalError, match="cannot read training file"):
        overlap_report(suite, [tmp_path / "nope.jsonl"])


def test_n_is_respected(suite: Suite, tmp_path: Path) -> None:
    excerpt = "snapped during the storm last night"  # 6 words of the bridge case
    train = write_jsonl(tmp_path / "t.jsonl", [chat(f"someone said two planks {excerpt} oh no")])

    long_n = overlap_report(suite, [train], n=13)
    short_n = overlap_report(suite, [train], n=5)

    assert long_n.n == 13 and short_n.n == 5
    assert by_id(long_n)["bridge"].matched == 0
    bridge = by_id(short_n)["bridge"]
    assert bridge.matched > 0
    assert [s.text for s in bridge.spans] == [excerpt]
    assert by_id(short_n)["bridge"].ngrams > by_id(long_n)["bridge"].ngrams


def test_threshold_decides_flagging(suite: Suite, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", [chat(CAROL)])
    fraction = by_id(overlap_report(suite, [train]))["granary"].fraction
    assert 0 < fraction < 1
    assert by_id(overlap_report(suite, [train], threshold=fraction))["granary"].flagged
    assert not by_id(overlap_report(suite, [train], threshold=min(1.0, fraction + 0.01)))["granary"].flagged


def test_report_dict_and_text(suite: Suite, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", [FILLER[0], chat(BOB_SENTENCE)])
    report = overlap_report(suite, [train])
    data = json.loads(json.dumps(report.to_dict()))
    assert data["cases_flagged"] == 1 and data["cases_total"] == 3
    assert data["contamination_rate"] == pytest.approx(1 / 3)
    granary = next(c for c in data["cases"] if c["case_id"] == "granary")
    assert granary["flagged"] is True
    assert granary["training_lines"] == [{"path": str(train), "line": 2}]
    assert granary["spans"][0]["text"] == BOB_SENTENCE

    text = format_overlap_report(report)
    first_case_line = text.splitlines()[1]
    assert "FLAG" in first_case_line and "granary" in first_case_line and f"{train}:2" in first_case_line
    assert BOB_SENTENCE in text
    assert text.splitlines()[-1].startswith("contamination: 1/3 cases (33.3%)")


def test_ascii_fast_path_tokenizes_like_the_case_side() -> None:
    from leader_eval.studies.overlap import _training_tokens, tokenize

    for text in ['Hello, World_2! it\'s [09:00] bob:\tOK\n{"a": 1}', "x" * 3, "", "\x00a\x7fB"]:
        assert [t.decode() for t in _training_tokens(text)] == tokenize(text)  # type: ignore[union-attr]


def test_non_ascii_training_text_matches(suite: Suite, tmp_path: Path) -> None:
    """Curly quotes and accents around the excerpt do not hide it."""
    train = write_jsonl(tmp_path / "t.jsonl", [chat(f"Élodie wrote “{CAROL.upper()}” — ok")])
    granary = by_id(overlap_report(suite, [train]))["granary"]
    assert [s.text for s in granary.spans] == [CAROL]


def test_without_template_provenance_the_content_rules_still_drop_the_scaffold(
    suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the labelled rendering ever drifts from render.py, the report says so and stays usable."""
    from leader_eval.studies import overlap

    monkeypatch.setattr(overlap._ProvenanceRenderer, "render", lambda self, case: None)
    train = write_jsonl(
        tmp_path / "t.jsonl",
        [chat(QUOTED_SCAFFOLD), {"text": json.dumps([t.to_openai() for t in suite.tools])}, chat(BOB_SENTENCE)],
    )
    report = overlap_report(suite, [train])
    assert report.provenance == "content"
    assert [c.case_id for c in report.cases if c.matched] == ["granary"]
    assert [s.text for s in by_id(report)["granary"].spans] == [BOB_SENTENCE]
    assert "could not label template text" in format_overlap_report(report)


@pytest.mark.parametrize(("kwargs", "message"), [({"n": 0}, "--n"), ({"threshold": 1.5}, "--threshold")])
def test_bad_parameters_are_user_errors(suite: Suite, tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", FILLER)
    with pytest.raises(LeaderEvalError, match=message):
        overlap_report(suite, [train], **kwargs)


def test_matches_are_attributed_across_batches(suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from leader_eval.studies import overlap

    monkeypatch.setattr(overlap, "_CHUNK_LINES", 2)
    records = [FILLER[0], FILLER[1], chat(CAROL), FILLER[2], FILLER[0], chat(BOB_SENTENCE), chat(CAROL)]
    train = write_jsonl(tmp_path / "t.jsonl", records)
    granary = by_id(overlap_report(suite, [train]))["granary"]
    assert [t.line for t in granary.training_lines] == [3, 6, 7]
    assert [s.text for s in granary.spans] == [BOB_SENTENCE, CAROL]


def test_a_case_shorter_than_n_has_nothing_to_check(suite: Suite, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", [chat(BOB_SENTENCE)])
    report = overlap_report(suite, [train], n=400)
    assert all(c.ngrams == 0 and not c.flagged for c in report.cases)
    assert report.contamination_rate == 0.0
    assert "nothing to check" in format_overlap_report(report)


SHORT_YAML = """\
name: short-cases
scaffold:
  messages:
    - role: system
      content: You are the leader agent of a shared chat room. Reply with one JSON tool call.
    - role: user
      content: |
        Event log:
        {% for e in events %}
        [{{ e.time }}] {{ e.author }}: {{ e.text }}
        {% endfor %}
tools:
  - name: send_message_to_chat
    description: Post a message to the shared chat room.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
cases:
  - id: mill
    vars:
      events: [{time: "09:00", author: bob, text: "the mill wheel squeaks again"}]
  - id: granary
    vars:
      events:
        - {time: "10:00", author: carol, text: "the wheat harvest in the eastern field is almost finished and we need somewhere dry"}
"""


def test_a_short_case_copied_verbatim_is_found_by_default(tmp_path: Path) -> None:
    """Issue 25: a case shorter than 13 words of its own has no 13-gram, so a verbatim copy in the
    training file went unseen at the old default; each case is now checked at the longest of
    13, 8, 5 at which it has an n-gram, and a case that has 13-grams is checked at 13 as before."""
    from leader_eval.suite.render import render_messages

    path = tmp_path / "short.yaml"
    path.write_text(SHORT_YAML)
    suite = load_suite(path)
    mill = next(c for c in suite.cases if c.id == "mill")
    copied = render_messages(suite, mill)[1]["content"]
    train = write_jsonl(tmp_path / "t.jsonl", [FILLER[0], chat(copied, "noted"), FILLER[2]])

    fixed = by_id(overlap_report(suite, [train], n=13))
    assert fixed["mill"].ngrams == 0 and not fixed["mill"].flagged  # what the old default reported

    report = overlap_report(suite, [train])
    cases = by_id(report)
    assert cases["mill"].flagged and cases["mill"].fraction == 1.0 and cases["mill"].n in (8, 5)
    assert [str(t) for t in cases["mill"].training_lines] == [f"{train}:2"]
    assert cases["granary"].n == 13 and not cases["granary"].flagged
    assert report.n is None and report.to_dict()["n"] == "auto" and report.to_dict()["cases"][0]["n"] == cases["mill"].n
    text = format_overlap_report(report)
    assert "FLAG mill" in text and "n-grams of 13/8/5 words" in text


def test_the_default_checks_a_long_case_at_13_words(suite: Suite, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", [chat(f"log follows. {BOB_SENTENCE}. end of log")])
    default, fixed = by_id(overlap_report(suite, [train])), by_id(overlap_report(suite, [train], n=13))
    for cid in default:
        assert default[cid].n == 13 and default[cid].to_dict() == fixed[cid].to_dict()
