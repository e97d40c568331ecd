"""The typed records of the derived run files (``store/records.py``) and the indented JSON the
store writes them with."""

from __future__ import annotations

import json
import math
import random

import pytest

from leader_eval.store.records import RunTotals, Summary
from leader_eval.store.run_store import indented_json

RUN_SUMMARY = {
    "suite": "mini",
    "overall": {"metrics": {"score": {"value": 0.5}}, "n_cases": 2},
    "by_tag": {"goal": {"n_cases": 1}},
    "run_id": "mini-20260101T000000Z-00000003",
    "model_id": "scripted:test",
    "label": None,
    "tokens": {"prompt": 40, "completion": 20, "per_case": {"hello": [20, 10], "goal": [20, 10]}},
    "retries": 0,
    "usage": {"n_samples": 4},
    "first_error": {"case_id": "goal", "index": 1, "error": "HTTP 500"},
    "adaptive": {"looks": 2},  # added by a later step: kept as read
}


def test_a_run_summary_reads_back_to_the_same_json() -> None:
    summary = Summary.from_json(RUN_SUMMARY)
    assert isinstance(summary.run, RunTotals) and summary.run.retries == 0
    assert summary.extra == {"adaptive": {"looks": 2}} and summary.by_split is None
    assert summary.to_json() == RUN_SUMMARY
    assert list(summary.to_json()) == list(RUN_SUMMARY)


def test_a_session_summary_has_no_run_totals() -> None:
    session = {k: RUN_SUMMARY[k] for k in ("suite", "overall", "by_tag")}
    summary = Summary.from_json(session)
    assert summary.run is None and summary.first_error is None
    assert summary.to_json() == session


def _value(rng: random.Random, depth: int) -> object:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randrange(-(10**6), 10**6)
    if kind == 2:  # every range of magnitudes, where the two encoders write floats differently
        return rng.choice([-1, 1]) * rng.random() * 10.0 ** rng.randrange(-12, 22)
    if kind == 3:
        return rng.choice([math.nan, math.inf, -math.inf, 0.0, -0.0, 2**70, 1e-5, 1e16, 1e21])
    if kind in (4, 5):
        return "".join(rng.choice('ab"\\\n\t\x00\x1f\x7f\u2028é😀 ') for _ in range(rng.randrange(6)))
    if kind in (6, 7):
        return {
            rng.choice(["a", "b", "B", "é", "", "z1"]) + str(i): _value(rng, depth + 1) for i in range(rng.randrange(4))
        }
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_indented_json_is_the_stdlib_s_or_nothing() -> None:
    rng = random.Random(7)
    fast = 0
    for _ in range(3000):
        obj = _value(rng, 0)
        text = indented_json(obj)
        if text is not None:
            fast += 1
            assert text == json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)
    assert fast > 1000  # the usual records take the fast path


@pytest.mark.parametrize(
    "obj", [{"a": math.nan}, {"a": 1e-5}, {"a": 1e-7}, {1: "int key"}, {"a": 2**70}, {"a": "\ud800"}, {"a": {1, 2}}]
)
def test_what_orjson_writes_otherwise_or_refuses_goes_to_the_stdlib(obj: object) -> None:
    assert indented_json(obj) is None
