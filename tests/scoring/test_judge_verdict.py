"""A judge's reply is read strictly against its scale: anything but a verdict is a judge error."""

from __future__ import annotations

import pytest

from leader_eval.scoring.judge import grammar, judged_text, parse_verdict
from leader_eval.suite.judge_spec import Judged, Scale

FIVE = Scale("integer", 1, 5)
PF = Scale("pass_fail")


@pytest.mark.parametrize(
    ("reply", "value", "raw"),
    [('{"score": 5}', 1.0, 5), ('{"score": 1}', 0.0, 1), (' {"score":3}\n', 0.5, 3)],
)
def test_an_integer_verdict_is_scaled_to_the_unit_interval(reply: str, value: float, raw: int) -> None:
    v = parse_verdict(reply, FIVE)
    assert v.error is None and v.value == value and v.raw == raw


@pytest.mark.parametrize(
    "reply",
    [
        '{"score": 6}',  # out of scale
        '{"score": 0}',
        '{"score": 4.0}',  # not an integer
        '{"score": true}',
        '{"score": "5"}',
        '{"score": 5, "score": 1}',  # a key twice
        '{"score": NaN}',
        "5",
        "Score: 5",
        '{"score": 5} thanks',
        "",
        '{"score": 5',  # cut off
        "[" * 10_000,  # hostile: long, deeply nested
    ],
)
def test_anything_but_a_verdict_in_scale_is_a_judge_error_never_a_value(reply: str) -> None:
    v = parse_verdict(reply, FIVE)
    assert v.error and v.value is None and v.raw is None


def test_pass_fail_reads_exactly_pass_or_fail() -> None:
    assert parse_verdict('{"verdict": "pass"}', PF).value == 1.0
    assert parse_verdict('{"verdict": "fail"}', PF).value == 0.0
    for bad in ('{"verdict": "Pass"}', '{"verdict": 1}', '{"score": 1}', '"pass"'):
        assert parse_verdict(bad, PF).error


def test_the_grammar_spells_the_scale() -> None:
    assert '"1" | "2" | "3" | "4" | "5"' in grammar(FIVE)
    assert '("pass" | "fail")' in grammar(PF)


def test_judged_text_takes_the_argument_or_the_prose_beside_calls() -> None:
    calls = [{"name": "send", "arguments": {"message": "hi", "n": 2}, "span": [6, 25]}]
    raw = "Sure! <call>......</call> done"
    assert judged_text(Judged("argument", "send", "message"), raw, calls) == "hi"
    assert judged_text(Judged("argument", "send", "n"), raw, calls) == "2"
    assert judged_text(Judged("argument", "other", "x"), raw, calls) is None
    assert judged_text(Judged("message"), raw, calls) == "Sure!  done"
    assert judged_text(Judged("text"), raw, calls) == raw
