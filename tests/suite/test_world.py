"""The scripted world answers like a real tool: matched results, sequences in order, errors, never a crash."""

from __future__ import annotations

from pathlib import Path

from leader_eval.scoring.episode import call_identity, find_loop, standardize
from leader_eval.suite.load import load_suite
from tests.support.episodes import EPISODE_SUITE, write_repo


def _world(tmp_path: Path, suite: str = EPISODE_SUITE):
    s = load_suite(write_repo(tmp_path, suite))
    case = s.cases[0]
    return s.world.with_fixtures(case.episode.fixtures)


def test_exact_and_constraint_matches_and_sequences_in_order(tmp_path: Path) -> None:
    world = _world(tmp_path)
    calls = [
        ("lookup", {"topic": "weather"}),
        ("lookup", {"topic": "goal today"}),  # regex ^goal: the sequence's first item, an error
        ("lookup", {"topic": "goal again"}),  # its second item, a result
        ("lookup", {"topic": "goal 3"}),  # the last item repeats
        ("lookup", {"topic": "weather", "extra": 1}),  # extra arguments do not stop a match
    ]
    got = world.answer(calls)
    assert [(r.ok, r.value) for r in got] == [
        (True, {"answer": "sunny"}),
        (False, "busy, try again"),
        (True, {"answer": "build a bridge"}),
        (True, {"answer": "build a bridge"}),
        (True, {"answer": "sunny"}),
    ]
    assert got[1].text == "error: busy, try again"
    assert got[0].text == '{"answer": "sunny"}'
    assert got[0].fixture == "fixtures/tools/lookup.yaml:1"  # relative to the suite root, never absolute


def test_unmatched_calls_and_unknown_tools_get_error_results(tmp_path: Path) -> None:
    world = _world(tmp_path)
    unmatched, unknown, malformed = world.answer(
        [("lookup", {"topic": "stocks"}), ("rm_rf", {}), ("lookup", "not a mapping")]  # type: ignore[list-item]
    )
    assert not unmatched.ok and "no result for lookup" in unmatched.value and "stocks" in unmatched.value
    assert not unknown.ok and "unknown tool 'rm_rf'" in unknown.value
    assert not malformed.ok


def test_a_tool_without_fixtures_acknowledges(tmp_path: Path) -> None:
    world = _world(tmp_path)
    (r,) = world.answer([("send_message_to_chat", {"message": "hi"})])
    assert r.ok and r.value == {"ok": True}


def test_case_fixtures_come_before_suite_fixtures_and_match_schema(tmp_path: Path) -> None:
    suite = EPISODE_SUITE.replace(
        "    episode:\n      goal:",
        "    episode:\n      fixtures:\n"
        "        - tool: lookup\n"
        "          match_schema: {required: [topic], properties: {topic: {const: weather}}}\n"
        "          result: {answer: case-level rain}\n"
        "      goal:",
    )
    world = _world(tmp_path, suite)
    (r,) = world.answer([("lookup", {"topic": "weather"})])
    assert r.value == {"answer": "case-level rain"}


def test_the_world_is_a_function_of_the_history(tmp_path: Path) -> None:
    world = _world(tmp_path)
    calls = [("lookup", {"topic": "goal"}), ("lookup", {"topic": "goal"}), ("lookup", {"topic": "weather"})]
    assert world.answer(calls) == world.answer(calls)
    assert world.answer(calls[:2]) == world.answer(calls)[:2]


def test_bfcl_standardisation_for_loops() -> None:
    assert standardize("Hello, World!") == standardize("hello world!")
    assert standardize("a-b_c.d/e*f^g") == "abcdefg"
    assert standardize("it's") == 'it"s'
    assert standardize({"n": 1}) == standardize({"n": 1.0})
    assert standardize(True) is True and standardize(1) == 1.0
    assert call_identity("t", {"q": "New York", "ts": 1}, ignore=["ts"]) == call_identity(
        "t", {"q": "new-york", "ts": 2}, ignore=["ts"]
    )
    assert call_identity("t", {"q": "a"}) != call_identity("u", {"q": "a"})


def test_loop_threshold() -> None:
    calls = [
        {"tool": "read_screen", "arguments": {}, "step": 0},
        {"tool": "send", "arguments": {"m": "x"}, "step": 1},
        {"tool": "read_screen", "arguments": {}, "step": 2},
    ]
    assert find_loop(calls, 2) == {"tool": "read_screen", "arguments": {}, "times": 2, "steps": [0, 2]}
    assert find_loop(calls, 3) is None
    assert find_loop([{"tool": "s", "arguments": {"m": "Hi there", "id": 1}, "step": i} for i in range(2)], 2)
    varied = [{"tool": "s", "arguments": {"m": "Hi", "id": i}, "step": i} for i in range(3)]
    assert find_loop(varied, 2) is None
    assert find_loop(varied, 2, ignore=["id"]) is not None
