"""``compare``'s checkpoint lines (``report.checkpoints``): printed for more than two configurations."""

from __future__ import annotations

import pytest

from leader_eval.errors import LeaderEvalError
from tests.support.runs import synthetic_run


def test_compare_prints_the_recommendation_for_more_than_two_labels():
    from leader_eval.decide.compare import compare_runs
    from leader_eval.report.compare import format_compare

    ids = [f"c{i}" for i in range(30)]
    runs = [synthetic_run("a", dict.fromkeys(ids, 0.0)), synthetic_run("b", dict.fromkeys(ids, 1.0)),
            synthetic_run("c", dict.fromkeys(ids, 1.0))]  # fmt: skip
    out = format_compare(compare_runs(runs))
    assert "recommended checkpoint: b " in out and "order from command line" in out
    assert "recommended checkpoint" not in format_compare(compare_runs(runs[:2]))
    out = format_compare(compare_runs(runs), order=["c", "b", "a"])
    assert "recommended checkpoint: c " in out
    with pytest.raises(LeaderEvalError, match="unknown label"):
        format_compare(compare_runs(runs), order=["a", "b", "zz"])
