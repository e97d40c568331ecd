"""What a run cost: latency and token quantiles in every summary, and a cost estimate with prices;
the one summary builder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from leader_eval.errors import LeaderEvalError, SuiteError
from leader_eval.scoring.aggregate import build_summary, case_results, parse_prices, summarize, usage_summary
from leader_eval.scoring.scorer import SampleScore
from leader_eval.suite.load import load_suite
from leader_eval.types import Sample
from tests.conftest import MINIMAL_SUITE


def _sample(i: int, total_s: float | None, prompt: int, completion: int, outcome: str = "ok") -> Sample:
    timings = {} if total_s is None else {"total_s": total_s}
    return Sample(
        case_id=f"c{i % 3}",
        index=i,
        seed=i,
        key=str(i),
        outcome=outcome,  # type: ignore[arg-type]
        prompt_tokens=prompt,
        completion_tokens=completion,
        timings=timings,
    )


def test_usage_reports_latency_and_token_quantiles_and_cost() -> None:
    rng = np.random.default_rng(1)
    lat = rng.gamma(2.0, 0.5, 40)
    samples = [_sample(i, float(lat[i]), 500 + i, 20 + i % 7) for i in range(40)]
    samples.append(_sample(40, 30.0, 0, 0, outcome="error"))  # a timeout: latency counts, no tokens
    u = usage_summary(samples, {"prompt_per_million": 0.2, "completion_per_million": 0.8, "currency": "EUR"})
    assert u["n_samples"] == 41
    assert u["latency_s"]["p50"] == pytest.approx(np.percentile([*lat, 30.0], 50))
    assert u["latency_s"]["p95"] == pytest.approx(np.percentile([*lat, 30.0], 95)) and u["latency_s"]["max"] == 30.0
    prompt = [500 + i for i in range(40)]
    assert u["prompt_tokens"]["total"] == sum(prompt) and u["prompt_tokens"]["p50"] == np.percentile(prompt, 50)
    completion = sum(20 + i % 7 for i in range(40))
    assert u["completion_tokens"]["total"] == completion
    want = sum(prompt) * 0.2 / 1e6 + completion * 0.8 / 1e6
    assert u["cost"]["total"] == pytest.approx(want) and u["cost"]["currency"] == "EUR"
    assert u["cost"]["per_sample"] == pytest.approx(want / 41)
    assert "cost" not in usage_summary(samples)
    # no backend timing at all (an old recording): no latency figures, never zeros
    assert usage_summary([_sample(0, None, 10, 2)])["latency_s"] is None


def test_latency_and_token_quantiles_are_numpys_bit_for_bit() -> None:
    """The quantiles are taken without numpy (a run of one-sample cases never loads it): the
    figures are ``numpy.percentile``'s default, exactly, at every size and for ties and ints."""
    rng = np.random.default_rng(3)
    for trial in range(300):
        n = int(rng.integers(1, 80))
        lat = [float(v) for v in rng.gamma(2.0, 0.5, n)] if trial % 3 else [float(v) for v in rng.integers(0, 4, n)]
        tokens = [int(v) for v in rng.integers(0, 5000, n)]
        samples = [_sample(i, lat[i], tokens[i], tokens[-1 - i]) for i in range(n)]
        u = usage_summary(samples)
        for key, values in (("latency_s", lat), ("prompt_tokens", tokens), ("completion_tokens", tokens[::-1])):
            x = np.asarray(values, dtype=float)
            want = {"p50": float(np.percentile(x, 50)), "p95": float(np.percentile(x, 95)), "max": float(x.max())}
            assert {k: u[key][k] for k in want} == want
            assert all(type(u[key][k]) is float for k in want)
    # NaN anywhere (it sorts anywhere) and infinities read as numpy reads them
    for lat in ([1.0, float("nan"), 0.5, 3.0], [float("inf"), 1.0, 2.0], [1.0, 2.0, float("-inf")]):
        got = usage_summary([_sample(i, v, 1, 1) for i, v in enumerate(lat)])["latency_s"]
        x = np.asarray(lat)
        with np.errstate(invalid="ignore"):
            want = [float(np.percentile(x, 50)), float(np.percentile(x, 95)), float(x.max())]
        assert repr([got["p50"], got["p95"], got["max"]]) == repr(want)


def test_prices_from_the_command_and_the_suite_are_checked(tmp_path: Path) -> None:
    assert parse_prices("0.2,0.8") == {"prompt_per_million": 0.2, "completion_per_million": 0.8}
    assert parse_prices("1, 3, USD")["currency"] == "USD"
    for bad in ("0.2", "a,b", "-1,2", "1,2,3,4", "nan,1"):
        with pytest.raises(LeaderEvalError, match="--prices"):
            parse_prices(bad)
    p = tmp_path / "s.yaml"
    p.write_text(
        MINIMAL_SUITE.replace("cases:\n", "prices: {prompt_per_million: 0.5, completion_per_million: 1.5}\ncases:\n", 1)
    )
    assert load_suite(p).prices == {"prompt_per_million": 0.5, "completion_per_million": 1.5}
    p.write_text(
        MINIMAL_SUITE.replace("cases:\n", "prices: {prompt_per_million: -1, completion_per_million: 1}\ncases:\n", 1)
    )
    with pytest.raises(SuiteError, match="prompt_per_million"):
        load_suite(p)


def _score(case_id: str, index: int, passed: bool) -> SampleScore:
    return SampleScore(
        case_id, index, "ok", passed, False, None if passed else "wrong_tool", True, True, passed, False, 1.0
    )


def test_one_builder_for_a_run_summary_and_a_session_summary(tmp_path: Path) -> None:
    p = tmp_path / "mini.yaml"
    p.write_text(MINIMAL_SUITE)
    suite = load_suite(p)
    cases = case_results(suite.cases, [_score("hello", 0, True), _score("hello", 1, False), _score("goal", 0, True)])
    for rec in cases:
        rec["prompt_tokens"], rec["completion_tokens"] = 10, 2
    samples = [_sample(0, 1.0, 10, 2), _sample(1, 2.0, 10, 2, outcome="error")]
    samples[1].error = "HTTP 500"
    # a pytest session aggregates case records alone: the suite's metrics, no run totals
    same = json.dumps(build_summary(suite, cases).to_json(), sort_keys=True)  # NaN != NaN: compare the text
    assert same == json.dumps(summarize(suite, cases), sort_keys=True)
    manifest = {"run_id": "r1", "identity": {"model_id": "m"}, "label": "main"}
    summary = build_summary(
        suite, cases, manifest=manifest, samples=samples, unreadable={"samples.jsonl": range(1, 2000)}
    )
    got = summary.to_json()
    assert {k: got[k] for k in ("run_id", "model_id", "label", "retries")} == {
        "run_id": "r1",
        "model_id": "m",
        "label": "main",
        "retries": 0,
    }
    assert got["tokens"] == {"prompt": 20, "completion": 4, "per_case": {"hello": [10, 2], "goal": [10, 2]}}
    assert got["usage"] == usage_summary(samples) and got["first_error"]["error"] == "HTTP 500"
    assert got["unreadable"]["samples.jsonl"] == list(range(1, 1001))
    # merge without the suite file: totals from the case records, retries from the shards
    merged = build_summary(suite, cases, manifest=manifest, samples=samples, token_totals=(7, 1), retries=3).to_json()
    assert merged["tokens"]["prompt"] == 7 and merged["retries"] == 3 and "unreadable" not in merged
