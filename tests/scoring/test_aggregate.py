"""What a run cost: latency and token quantiles in every summary, and a cost estimate with prices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from leader_eval.errors import LeaderEvalError, SuiteError
from leader_eval.scoring.aggregate import parse_prices, usage_summary
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
