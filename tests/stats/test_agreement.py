"""Cohen's kappa with a bootstrap interval: the figure a judge must reach before it gates."""

from __future__ import annotations

import math

import pytest

from leader_eval.stats.agreement import cohen_kappa, kappa_with_ci

PF = ["fail", "pass"]


def test_kappa_of_a_textbook_table() -> None:
    # 20 pass/pass, 5 pass/fail, 10 fail/pass, 15 fail/fail: po 0.7, pe 0.5 -> 0.4
    a = ["pass"] * 25 + ["fail"] * 25
    b = ["pass"] * 20 + ["fail"] * 5 + ["pass"] * 10 + ["fail"] * 15
    assert cohen_kappa(a, b, PF) == pytest.approx(0.4)


def test_perfect_chance_and_undefined_agreement() -> None:
    a = ["pass", "fail"] * 10
    assert cohen_kappa(a, a, PF) == 1.0
    assert cohen_kappa(a, ["pass", "pass", "fail", "fail"] * 5, PF) == pytest.approx(0.0)
    assert math.isnan(cohen_kappa(["pass"] * 4, ["pass"] * 4, PF))  # one shared category


def test_quadratic_weights_count_a_near_miss_as_less_wrong() -> None:
    human = [1, 2, 3, 4, 5] * 4
    near = [min(5, v + 1) for v in human]
    far = [6 - v for v in human]
    cats = [1, 2, 3, 4, 5]
    assert cohen_kappa(human, near, cats, weights="quadratic") > 0.7
    assert cohen_kappa(human, far, cats, weights="quadratic") < 0


def test_the_interval_holds_the_estimate_and_narrows_with_items() -> None:
    a = ["pass"] * 25 + ["fail"] * 25
    b = ["pass"] * 20 + ["fail"] * 5 + ["pass"] * 10 + ["fail"] * 15
    small = kappa_with_ci(a, b, PF, seed=1)
    large = kappa_with_ci(a * 4, b * 4, PF, seed=1)
    assert small.low < small.value < small.high
    assert large.high - large.low < small.high - small.low


def test_a_label_off_the_scale_is_refused() -> None:
    with pytest.raises(ValueError, match="maybe"):
        cohen_kappa(["pass"], ["maybe"], PF)
