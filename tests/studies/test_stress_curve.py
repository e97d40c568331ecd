"""Stress curves from recorded variant results: intervals over cases, the first credible drop."""

from __future__ import annotations

from leader_eval.studies.stress import Variant
from leader_eval.studies.stress_curve import ALL_DEPTHS, curves


def _v(case: str, length: int, passed: int, n: int = 10, depth: str | None = "end", status: str = "ok") -> Variant:
    sampled = status == "ok"
    return Variant(
        case_id=case,
        variant_id=f"{case}@{length}:{depth}",
        target=length,
        depth=depth,
        prompt_tokens=length,
        n_filler=0,
        status=status,
        score=passed / n if sampled else None,
        n_scored=n if sampled else 0,
        n_passed=passed if sampled else 0,
        n_context_overflow=0 if sampled else n,
        reasons={"wrong_tool": n - passed} if sampled and passed < n else {},
    )


STEPS = [1000, 4000, 8000, 16000]


def test_cases_are_the_clusters_and_the_first_credible_drop_is_paired() -> None:
    variants = [_v(c, s, p) for c in ("a", "b", "c") for s, p in ((1000, 9), (4000, 8), (8000, 2))] + [
        _v(c, 16000, 0, status="overflow") for c in ("a", "b", "c")
    ]
    end, overall = curves(STEPS, variants, {})
    assert (end.depth, overall.depth) == ("end", ALL_DEPTHS)
    p1000, p4000, p8000, p16000 = overall.points
    assert p1000.n_cases == 3 and p1000.n_samples == 30  # 3 cases with 10 samples each, not 30 cases
    assert p1000.score is not None and p1000.score.n_cases == 3 and abs(p1000.score.value - 0.9) < 1e-9
    # 0.2 at 8000 in every case: credibly below 1000's 0.9; 4000's 0.8 is not
    assert overall.first_drop == 8000 and overall.drop_base == 1000
    assert overall.drop_p[4000] >= 0.05 > overall.drop_p[8000]
    assert p8000.reasons["wrong_tool"].value > 0.7 and p8000.reasons["wrong_tool"].low > 0.5
    assert p16000.score is None and p16000.n_overflow == 3  # overflow: marked, never scored
    assert p4000.score is not None and p4000.score.low < p4000.score.value < p4000.score.high


def test_one_case_has_a_band_over_its_samples_and_too_few_samples_show_no_drop() -> None:
    (one, _) = curves([1000, 8000], [_v("a", 1000, 1, n=1), _v("a", 8000, 0, n=1)], {})
    first = one.points[0].score
    assert first is not None and first.n_cases == 1 and first.low < 0.5  # Wilson over 1 sample
    assert one.first_drop is None  # 1 pass to 0 in one sample each is no evidence
