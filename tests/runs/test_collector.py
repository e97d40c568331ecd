"""The collector's regime around long-lived objects (``runs/collector.py``): what is alive is out
of the collector's passes inside the block, everything is as it was after it, and a caller that
tunes the collector itself is left alone."""

from __future__ import annotations

import gc

import pytest

from leader_eval.runs.collector import BUILDING_GC_THRESHOLD, RUN_GC_THRESHOLD, long_lived


@pytest.fixture
def untuned() -> object:
    was, threshold = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if not was:
        gc.disable()


def test_inside_the_block_what_lives_is_frozen_and_after_it_nothing_is(untuned: object) -> None:
    threshold = gc.get_threshold()
    with long_lived() as settle:
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == max(threshold[0], RUN_GC_THRESHOLD)
        made = [[i] for i in range(10)]  # containers: objects the collector tracks
        settle()  # what the block made so far lives to its end: frozen too
        # (a frozen object freed by its last reference leaves the count: only a lower bound holds)
        assert gc.get_freeze_count() >= len(made)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


def test_an_error_in_the_block_still_restores_the_collector(untuned: object) -> None:
    threshold = gc.get_threshold()
    with pytest.raises(RuntimeError), long_lived():
        raise RuntimeError("stopped")
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


@pytest.mark.parametrize("how", ["disabled", "frozen", "nested"])
def test_a_collector_tuned_by_the_caller_is_left_as_it_is(untuned: object, how: str) -> None:
    if how == "disabled":
        gc.disable()
    else:
        gc.freeze()
    before = (gc.isenabled(), gc.get_threshold())
    frozen = gc.get_freeze_count() > 0
    with long_lived() as settle:
        settle()
        assert (gc.isenabled(), gc.get_threshold()) == before
        if how == "nested":
            with long_lived():
                pass
    # nothing unfrozen by the block (a frozen object freed meanwhile leaves the count: not compared)
    assert (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count() > 0) == (*before, frozen)


def test_a_block_that_builds_is_never_collected_until_it_settles(untuned: object) -> None:
    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    threshold = gc.get_threshold()
    gc.callbacks.append(count)
    try:
        with long_lived(building=True) as settle:
            # what a suite's loading makes: many containers kept, past any threshold of a run
            built = [[i] for i in range(3 * RUN_GC_THRESHOLD)]
            assert passes == []
            settle()  # built: frozen, and the run's threshold from here on
            assert gc.get_freeze_count() >= len(built)
            assert gc.get_threshold()[0] == max(threshold[0], RUN_GC_THRESHOLD) < BUILDING_GC_THRESHOLD
            made = [[i] for i in range(3 * RUN_GC_THRESHOLD)]
            assert passes, "collections resume once the block settles"
            del made
    finally:
        gc.callbacks.remove(count)
