"""``leader-eval flaky``: uncertain cases and runs that disagree (the quarantine list: test_quarantine.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from leader_eval.decide.flaky import find_flaky
from leader_eval.errors import LeaderEvalError
from leader_eval.report.flaky import format_flaky
from leader_eval.stats.core import chi2_sf, clopper_pearson
from tests.support.runs import make_run, make_suite, write_run_dir

ROOT = Path(__file__).resolve().parents[2]


def test_clopper_pearson_and_chi_square_tail_match_known_values() -> None:
    assert clopper_pearson(3, 10) == pytest.approx((0.066739, 0.652453), abs=1e-6)
    assert clopper_pearson(0, 10) == pytest.approx((0.0, 0.308497), abs=1e-6)
    assert clopper_pearson(10, 10)[1] == 1.0
    assert chi2_sf(3.841459, 1) == pytest.approx(0.05, abs=1e-6)
    assert chi2_sf(5.991465, 2) == pytest.approx(0.05, abs=1e-6)
    assert chi2_sf(0.5, 4) == pytest.approx(np.exp(-0.25) * 1.25)  # closed form for df = 4
    # exact coverage: the interval covers p = 0.3 at n = 20 in at least 95% of outcomes
    from math import comb

    cover = sum(
        comb(20, x) * 0.3**x * 0.7 ** (20 - x)
        for x in range(21)
        if clopper_pearson(x, 20)[0] <= 0.3 <= clopper_pearson(x, 20)[1]
    )
    assert cover >= 0.95


def test_flaky_finds_uncertain_cases_and_overdispersed_runs(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 8)
    # c00, c01 always pass; c02..c05 pass half the time; c06, c07: one run always passes,
    # the other two never (a case that depends on the run, not on chance)
    p_runs = [
        [1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0],
        [1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0],
        [1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0],
    ]
    runs = [make_run(suite, p, n=10, seed=s) for s, p in enumerate(p_runs)]
    report = find_flaky(runs)
    by_id = {c.case_id: c for c in report.cases}
    assert not by_id["c00"].flaky and by_id["c00"].p_value is None  # nothing varies
    for cid in ("c02", "c03", "c04", "c05"):
        c = by_id[cid]
        assert c.flaky and 0.05 < c.low < c.rate < c.high < 0.95
        assert not c.overdispersed  # binomial noise
    for cid in ("c06", "c07"):
        c = by_id[cid]
        assert c.overdispersed and c.p_value is not None and c.p_value < 1e-4 and c.p_holm >= c.p_value
    text = format_flaky(report)
    assert "c02" in text and "OVERDISPERSED" in text and "p (Holm)" in text


def test_flaky_refuses_runs_of_different_checkpoints(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, 4)
    a = write_run_dir(make_run(suite, 0.5, seed=1), tmp_path / "a")
    b = write_run_dir(make_run(suite, 0.5, seed=2, model_id="gguf:/m/other.gguf"), tmp_path / "b")
    with pytest.raises(LeaderEvalError, match="model_id"):
        find_flaky([a, b])
    out = subprocess.run(
        [sys.executable, "-m", "leader_eval", "flaky", str(a), str(b)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "model_id" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "leader_eval", "flaky", str(a)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "at least two runs" in out.stderr


@pytest.mark.model
def test_flaky_on_three_seeded_runs_of_the_embedded_model(tmp_path: Path, local_backend) -> None:  # type: ignore[no-untyped-def]
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import RunOptions

    suite = tmp_path / "mini.yaml"
    from tests.conftest import MINIMAL_SUITE

    suite.write_text(MINIMAL_SUITE, encoding="utf-8")
    dirs = []
    for seed in (1, 2, 3):
        out = tmp_path / f"r{seed}"
        run(suite, RunOptions(seed=seed, samples=4, out=out, progress=False), backend=local_backend)
        dirs.append(str(out))
    cli = subprocess.run(
        [sys.executable, "-m", "leader_eval", "flaky", *dirs, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    data = json.loads(cli.stdout)
    assert data["seeds"] == [1, 2, 3] and {c["case_id"] for c in data["cases"]} == {"hello", "goal"}
    for c in data["cases"]:
        assert sum(c["scored"]) > 0 and c["low"] <= c["rate"] <= c["high"]
        assert c["flaky"] == (c["low"] > 0.05 and c["high"] < 0.95)
        varies = 0 < sum(c["passed"]) < sum(c["scored"])
        assert (c["p_value"] is not None) == varies
    text = subprocess.run(
        [sys.executable, "-m", "leader_eval", "flaky", *dirs], capture_output=True, text=True, timeout=300
    ).stdout
    assert "Clopper-Pearson" in text and "chi-square" in text
