"""The checkpoint recommendation (``decide.checkpoints``): the order of checkpoints and the
earliest one not credibly worse than the best."""

from __future__ import annotations

import pytest

from leader_eval.decide.checkpoints import checkpoint_order, label_numbers, recommend_checkpoint
from tests.support.runs import synthetic_run


def test_recommended_checkpoint_is_the_earliest_not_credibly_worse_than_the_best():
    from leader_eval.decide.compare import compare_runs

    ids = [f"c{i}" for i in range(30)]
    bad = synthetic_run("step-100", dict.fromkeys(ids, 0.0))
    good = synthetic_run("step-200", dict.fromkeys(ids, 0.75))
    also = synthetic_run("step-300", {c: (0.75 if i else 1.0) for i, c in enumerate(ids)})  # a hair better
    # given out of order: the labels' numbers order them
    rec = recommend_checkpoint(compare_runs([also, bad, good]))
    assert [r.name for r in rec.rows] == ["step-100", "step-200", "step-300"]
    assert rec.best == "step-300" and rec.recommended == "step-200"
    assert [r.credibly_worse for r in rec.rows] == [True, False, False]
    # when every checkpoint measures the same, the first is as good as any
    same = [synthetic_run(f"ckpt{k}", dict.fromkeys(ids, 0.5)) for k in (1, 2, 3)]
    assert recommend_checkpoint(compare_runs(same)).recommended == "ckpt1"


@pytest.mark.parametrize(
    ("labels", "numbers"),
    [(["v4", "v7"], [4, 7]), (["step-2k", "step-500"], [2000, 500]), (["ckpt1.5", "ckpt10"], [1.5, 10]),
     (["v4", "w7"], None), (["a", "b"], None), (["s1", "s01"], None), (["only3"], None)],
)  # fmt: skip
def test_checkpoint_labels(labels, numbers):
    assert label_numbers(labels) == numbers
    found = checkpoint_order(labels)
    assert (found is None) == (numbers is None)
