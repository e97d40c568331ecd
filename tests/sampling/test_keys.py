"""Seeds are derived, never drawn in sampling order: the same (run seed, case, index) gives the
same seed in any order, subset, shard or resumption."""

from __future__ import annotations

from leader_eval.sampling.keys import derive_seed


def test_seed_depends_only_on_run_seed_case_and_index() -> None:
    a = derive_seed(7, "case_a", 0)
    assert a == derive_seed(7, "case_a", 0)
    assert len({derive_seed(7, "case_a", i) for i in range(50)}) == 50
    assert a != derive_seed(8, "case_a", 0) and a != derive_seed(7, "case_b", 0)
