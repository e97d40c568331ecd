"""The matcher: tool choice, schema validation, constraint semantics, optimal pairing, reasons."""

from __future__ import annotations

import itertools
import math
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.checks.toolcall import _STOPWORDS, _assign, _hungarian, match_calls, mentions_goal
from leader_eval.types import Reason, ToolCall

TOOLS: dict[str, dict[str, Any]] = {
    "send_message_to_chat": {
        "type": "object",
        "properties": {
            "message": {"type": "string", "minLength": 1},
            "reply_to": {"type": "integer"},
            "urgency": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["message"],
        "additionalProperties": False,
    },
    "schedule": {
        "type": "object",
        "properties": {"when": {"type": "string", "format": "date"}, "count": {"type": "integer"}},
        "required": ["when"],
    },
    "wait": {"type": "object", "properties": {}},
}


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments, "json")


def checks(calls: list[ToolCall], expect: dict[str, Any], goal: str | None = None) -> dict[str, Any]:
    results = match_calls(calls, expect, TOOLS, goal=goal)
    assert [r.check for r in results] == ["tool_choice", "arguments_schema", "arguments"]
    return {r.check: r for r in results}


def expect_send(**args: Any) -> dict[str, Any]:
    return {"calls": [{"tool": "send_message_to_chat", "args": args}]}


def test_a_right_call_passes_every_check() -> None:
    r = checks([call("send_message_to_chat", message="Gather wood")], expect_send(message="Gather wood"))
    assert all(x.passed for x in r.values())
    assert r["arguments"].data["partial_credit"] == 1.0


def test_no_call_when_one_is_expected() -> None:
    r = checks([], expect_send(message="x"))
    assert r["tool_choice"].reason == Reason.NO_CALL
    assert r["arguments"].reason == Reason.NO_CALL
    assert r["arguments"].data["partial_credit"] == 0.0


def test_a_call_when_none_is_expected_is_an_extra_call() -> None:
    r = checks([call("wait")], {"no_call": True})
    assert r["tool_choice"].reason == Reason.EXTRA_CALL
    assert r["tool_choice"].data["got"] == "wait"
    assert checks([], {"no_call": True})["tool_choice"].passed


def test_wrong_tool_names_the_expected_and_the_got() -> None:
    r = checks([call("wait")], expect_send(message="x"))
    assert r["tool_choice"].reason == Reason.WRONG_TOOL
    assert r["tool_choice"].data["path"] == "calls[0].name"
    assert (r["tool_choice"].data["expected"], r["tool_choice"].data["got"]) == ("send_message_to_chat", "wait")
    assert not r["arguments"].passed


@pytest.mark.parametrize(
    ("arguments", "reason", "path"),
    [
        ({}, Reason.MISSING_ARG, "calls[0].arguments.message"),
        ({"message": "hi", "mood": "x"}, Reason.UNEXPECTED_ARG, "calls[0].arguments"),
        ({"message": 3}, Reason.WRONG_TYPE, "calls[0].arguments.message"),
        ({"message": ""}, Reason.SCHEMA_VIOLATION, "calls[0].arguments.message"),
        ({"message": "hi", "tags": ["a", 1]}, Reason.WRONG_TYPE, "calls[0].arguments.tags[1]"),
    ],
)
def test_schema_failures_map_to_reasons(arguments: dict[str, Any], reason: Reason, path: str) -> None:
    r = checks([ToolCall("send_message_to_chat", arguments, "json")], expect_send(message={"present": True}))
    assert r["arguments_schema"].reason == reason
    assert r["arguments_schema"].data["path"] == path


def test_schema_format_checking_is_on() -> None:
    expect = {"calls": [{"tool": "schedule", "args": {"when": {"present": True}}}]}
    assert checks([call("schedule", when="2026-11-25")], expect)["arguments_schema"].passed
    r = checks([call("schedule", when="next tuesday")], expect)
    assert r["arguments_schema"].reason == Reason.SCHEMA_VIOLATION


def test_int_accepted_where_a_float_is_expected_but_not_a_bool() -> None:
    assert checks([call("send_message_to_chat", message="m", urgency=1)], expect_send(message="m", urgency=1.0))[
        "arguments"
    ].passed
    r = checks([call("send_message_to_chat", message="m", urgency=True)], expect_send(message="m", urgency=1))
    assert r["arguments"].reason == Reason.WRONG_TYPE


def test_float_where_the_schema_asks_for_an_integer_is_a_wrong_type() -> None:
    r = checks([call("send_message_to_chat", message="m", reply_to=7.0)], expect_send(message="m", reply_to=7))
    assert r["arguments"].reason == Reason.WRONG_TYPE
    assert r["arguments"].data["path"] == "calls[0].arguments.reply_to"


def test_wrong_value_reports_expected_and_got() -> None:
    r = checks([call("send_message_to_chat", message="Gather stone")], expect_send(message="Gather wood"))
    assert r["arguments"].reason == Reason.WRONG_VALUE
    assert r["arguments"].data["expected"] == "Gather wood"
    assert r["arguments"].data["got"] == "Gather stone"


def test_normalize_ignores_case_and_whitespace_only_when_asked() -> None:
    got = [call("send_message_to_chat", message="  gather   WOOD ")]
    assert not checks(got, expect_send(message="Gather wood"))["arguments"].passed
    assert checks(got, expect_send(message={"equals": "Gather wood", "normalize": True}))["arguments"].passed
    assert checks(got, expect_send(message={"one_of": ["x", "gather wood"], "normalize": True}))["arguments"].passed


def test_one_of_type_versus_value() -> None:
    r = checks([call("send_message_to_chat", message="c")], expect_send(message={"one_of": ["a", "b"]}))
    assert r["arguments"].reason == Reason.WRONG_VALUE
    r = checks(
        [call("send_message_to_chat", message="m", reply_to="3")], expect_send(message="m", reply_to={"one_of": [3, 4]})
    )
    assert r["arguments"].reason == Reason.WRONG_TYPE


@pytest.mark.parametrize(
    ("constraint", "value", "ok"),
    [
        ({"regex": r"^Gather\b"}, "Gather wood", True),
        ({"regex": r"wood"}, "Gather wood now", True),  # search, not fullmatch
        ({"regex": r"^wood$"}, "Gather wood", False),
        ({"contains": "WOOD"}, "gather wood", True),
        ({"contains": ["wood", "river"]}, "wood by the river", True),
        ({"contains": ["wood", "stone"]}, "wood by the river", False),
        ({"contains_any": ["stone", "wood"]}, "some wood", True),
        ({"contains_any": ["stone", "iron"]}, "some wood", False),
    ],
)
def test_text_constraints(constraint: dict[str, Any], value: str, ok: bool) -> None:
    r = checks([call("send_message_to_chat", message=value)], expect_send(message=constraint))
    assert r["arguments"].passed is ok
    if not ok:
        assert r["arguments"].reason == Reason.WRONG_VALUE


def test_contains_on_an_array_means_membership() -> None:
    got = [call("send_message_to_chat", message="m", tags=["Urgent", "wood"])]
    assert checks(got, expect_send(message="m", tags={"contains": "urgent"}))["arguments"].passed
    assert not checks(got, expect_send(message="m", tags={"contains": "urg"}))["arguments"].passed


def test_numeric_range_and_its_type() -> None:
    e = expect_send(message="m", urgency={"min": 0, "max": 1})
    assert checks([call("send_message_to_chat", message="m", urgency=0.5)], e)["arguments"].passed
    assert checks([call("send_message_to_chat", message="m", urgency=1.5)], e)["arguments"].reason == Reason.WRONG_VALUE
    e = expect_send(message={"min": 0})
    assert checks([call("send_message_to_chat", message="m")], e)["arguments"].reason == Reason.WRONG_TYPE


def test_optional_present_and_extra_arguments() -> None:
    got = [call("send_message_to_chat", message="m")]
    assert checks(got, expect_send(message="m", reply_to={"optional": True, "equals": 3}))["arguments"].passed
    assert checks(got, expect_send(message="m", reply_to=3))["arguments"].reason == Reason.MISSING_ARG
    r = checks(
        [call("send_message_to_chat", message="m", reply_to=3)], expect_send(message="m", reply_to={"present": False})
    )
    assert r["arguments"].reason == Reason.UNEXPECTED_ARG
    extra = [call("send_message_to_chat", message="m", reply_to=3)]
    assert checks(extra, expect_send(message="m"))["arguments"].reason == Reason.UNEXPECTED_ARG
    allowed = {"calls": [{"tool": "send_message_to_chat", "args": {"message": "m"}, "allow_extra_args": True}]}
    assert checks(extra, allowed)["arguments"].passed


def test_mentions_goal() -> None:
    goal = "Gather wood for the winter shelter"
    e = expect_send(message={"mentions_goal": True})
    assert checks([call("send_message_to_chat", message="Team: gathering wood now for our shelter!")], e, goal)[
        "arguments"
    ].passed
    r = checks([call("send_message_to_chat", message="Hello everyone, how are you?")], e, goal)
    assert r["arguments"].reason == Reason.WRONG_VALUE
    assert checks([call("send_message_to_chat", message="wood")], e, None)["arguments"].reason == Reason.WRONG_VALUE
    assert mentions_goal("WOODS and shelters for WINTER", goal)
    assert not mentions_goal("winter", goal)


def test_parallel_calls_are_paired_optimally_not_greedily() -> None:
    # The first expected call accepts either target; the second only "a". Greedy pairing in
    # output order would give "a" to the first and fail the second.
    expect = {
        "calls": [
            {"tool": "send_message_to_chat", "args": {"message": {"one_of": ["a", "b"]}}},
            {"tool": "send_message_to_chat", "args": {"message": "a"}},
        ]
    }
    got = [call("send_message_to_chat", message="a"), call("send_message_to_chat", message="b")]
    r = checks(got, expect)
    assert all(x.passed for x in r.values())
    assert checks(list(reversed(got)), expect)["arguments"].passed


def test_count_rule_exact_and_at_least() -> None:
    got = [call("send_message_to_chat", message="m"), call("wait")]
    r = checks(got, expect_send(message="m"))
    assert r["tool_choice"].reason == Reason.EXTRA_CALL
    assert r["tool_choice"].data["path"] == "calls[1]"
    assert r["arguments"].passed
    assert checks(got, {**expect_send(message="m"), "count": "at_least"})["tool_choice"].passed


def test_missing_parallel_call_and_partial_credit() -> None:
    expect = {
        "calls": [
            {"tool": "send_message_to_chat", "args": {"message": "m", "reply_to": 1}},
            {"tool": "schedule", "args": {"when": "2026-01-01"}},
        ]
    }
    r = checks([call("send_message_to_chat", message="m", reply_to=2)], expect)
    assert r["tool_choice"].reason == Reason.MISSING_CALL
    assert r["arguments"].reason == Reason.WRONG_VALUE  # a real argument miss is reported first
    assert r["arguments"].data["partial_credit"] == pytest.approx(1 / 3)


def test_results_are_deterministic_and_serialisable() -> None:
    import json

    got = [call("send_message_to_chat", message="x", reply_to=2.5)]
    a = [x.to_dict() for x in match_calls(got, expect_send(message="m", reply_to=1), TOOLS)]
    b = [x.to_dict() for x in match_calls(got, expect_send(message="m", reply_to=1), TOOLS)]
    assert a == b
    json.dumps(a)


def test_assignment_is_optimal() -> None:
    rng = random.Random(7)
    for _ in range(300):
        r, c = rng.randint(1, 6), rng.randint(1, 6)
        w = [[rng.choice([0.0, 0.5, 1.0, 3.0, 7.25]) for _ in range(c)] for _ in range(r)]
        k = min(r, c)
        best = max(
            sum(w[i][j] for i, j in zip(rows, cols, strict=True))
            for rows in itertools.combinations(range(r), k)
            for cols in itertools.permutations(range(c), k)
        )
        got = _assign(w)
        assert len(got) == k
        assert len({i for i, _ in got}) == k and len({j for _, j in got}) == k
        assert sum(w[i][j] for i, j in got) == pytest.approx(best)
        if r <= c:
            assert sum(w[i][j] for i, j in _hungarian(w)) == pytest.approx(best)


def test_many_parallel_calls_use_the_hungarian_path() -> None:
    n = 12
    expect = {"calls": [{"tool": "send_message_to_chat", "args": {"message": str(i)}} for i in range(n)]}
    got = [call("send_message_to_chat", message=str(i)) for i in reversed(range(n))]
    r = checks(got, expect)
    assert all(x.passed for x in r.values())


def _mentions_goal_by_stemming(text: str, goal: str) -> bool:
    """The definition, stemming the whole text (what ``mentions_goal`` computed before it
    searched for each goal stem instead): the oracle for the equivalence test below."""
    suffix = re.compile(r"(?<=[^\W_]{3})(?:ing|ed|es|s)\b")
    word = re.compile(r"[^\W_]+")

    def stems(t: str) -> list[str]:
        return word.findall(suffix.sub("", t.casefold()))

    all_words = [w.casefold() for w in word.findall(goal)]
    content = " ".join(w for w in all_words if len(w) >= 3 and w not in _STOPWORDS) or " ".join(all_words)
    words = tuple(dict.fromkeys(stems(content)))
    if not words:
        return False
    present = set(stems(text))
    return sum(1 for w in words if w in present) >= math.ceil(0.6 * len(words))


_GOAL_PIECES = [
    "build", "builds", "building", "buildings", "built", "wood", "woods", "wooded", "goes", "go", "bus", "buses",
    "river", "rivers", "River", "RIVERS", "ring", "ing", "es", "s", "ed", "_", " ", ", ", "-", "é", "ß", "SS",
    "straße", "İ", "1", "x", "\n",
]  # fmt: skip
_GOALS = ["build a windmill by the river", "Gather wood for the winter shelter", "go", "buses and rings", "ß é ing"]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(_GOAL_PIECES), st.text(max_size=3)), max_size=30).map("".join),
    st.one_of(st.sampled_from(_GOALS), st.lists(st.sampled_from(_GOAL_PIECES), max_size=6).map(" ".join)),
)
def test_mentions_goal_agrees_with_stemming_the_whole_text(text: str, goal: str) -> None:
    assert mentions_goal(text, goal) == _mentions_goal_by_stemming(text, goal)


@pytest.mark.parametrize(
    ("got", "answer"),
    [("Apple Inc", "Apple Inc."), ("April 1 2024", "April 1, 2024"), ("new york", "New-York"), ("it's", 'it"s')],
)
def test_normalize_bfcl_drops_what_bfcl_drops(got: str, answer: str) -> None:
    call = ToolCall("f", {"x": got}, "json")
    tools = {"f": {"type": "object", "properties": {"x": {"type": "string"}}}}
    bfcl = {"calls": [{"tool": "f", "args": {"x": {"one_of": [answer], "normalize": "bfcl"}}}]}
    folded = {"calls": [{"tool": "f", "args": {"x": {"one_of": [answer], "normalize": True}}}]}
    assert all(c.passed for c in match_calls([call], bfcl, tools))
    assert not match_calls([call], folded, tools)[2].passed  # case and whitespace folding is not enough


def test_schema_validation_never_fetches_a_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import urllib.request

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("schema validation tried to reach the network")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    tools = {
        "f": {"type": "object", "properties": {"x": {"$ref": "https://example.org/x.json"}}},
        "g": {"type": "object", "properties": {"x": {"$ref": "file:///etc/passwd"}}},
    }
    for name in tools:
        call = ToolCall(name, {"x": "anything"}, "json")
        schema = match_calls([call], {"calls": [{"tool": name}]}, tools)[1]
        assert not schema.passed and schema.reason == "schema_violation"
        assert "not resolvable (nothing is fetched)" in schema.detail
