"""The content-addressed sample cache never pays twice for the same sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from leader_eval.cache import SampleCache, cache_info, cache_prune
from leader_eval.evaluate import run
from leader_eval.runner import RunOptions


@pytest.mark.model
def test_same_seed_samples_nothing_new_and_one_edit_resamples_one_case(
    local_backend, mini_suite: Path, tmp_path: Path
) -> None:
    first = run(mini_suite, RunOptions(seed=2, out=tmp_path / "a", progress=False), backend=local_backend)
    assert first.stats is not None and first.stats.sampled == 4 and first.stats.cache_hits == 0
    again = run(mini_suite, RunOptions(seed=2, out=tmp_path / "b", progress=False), backend=local_backend)
    assert again.stats is not None and again.stats.sampled == 0 and again.stats.cache_hits == 4
    assert [s.text for s in again.samples] == [s.text for s in first.samples]

    edited = tmp_path / "edited.yaml"
    edited.write_text(mini_suite.read_text().replace("Say hello to the team.", "Say good morning to the team."))
    third = run(edited, RunOptions(seed=2, out=tmp_path / "c", progress=False), backend=local_backend)
    assert third.stats is not None and third.stats.sampled == 2 and third.stats.cache_hits == 2
    assert {
        s.case_id
        for s in third.samples
        if s.text != next(f.text for f in first.samples if (f.case_id, f.index) == (s.case_id, s.index))
    } <= {"hello"}

    fresh = run(mini_suite, RunOptions(out=tmp_path / "d", progress=False), backend=local_backend)  # no seed
    assert fresh.stats is not None and fresh.stats.sampled == 4


@pytest.mark.model
def test_max_samples_caps_spending_and_says_so(local_backend, mini_suite: Path, tmp_path: Path) -> None:
    capped = run(
        mini_suite, RunOptions(seed=8, out=tmp_path / "a", max_samples=1, progress=False), backend=local_backend
    )
    assert capped.stats is not None and capped.stats.sampled == 1 and capped.stats.capped == 3
    assert capped.manifest["status"] == "capped"
    assert len(capped.samples) == 1


def test_errors_are_not_cached_and_prune_empties(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path)
    cache.put({"key": "ab12", "outcome": "error", "text": ""})
    cache.put({"key": "ab34", "outcome": "ok", "text": "hi"})
    cache.close()
    cache = SampleCache(tmp_path)
    assert cache.get("ab12") is None and cache.get("ab34")["text"] == "hi"
    assert (cache.hits, cache.misses) == (1, 1)
    cache.close()
    assert cache_info(tmp_path)["samples"] == 1
    assert cache_prune(tmp_path, older_than_days=1)["kept"] == 1
    assert cache_prune(tmp_path)["dropped"] == 1
    assert cache_info(tmp_path)["samples"] == 0
