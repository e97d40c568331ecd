"""Runs made by pytest are kept to the newest N per suite and label; a locked run, a run a golden
was made from, and runs pytest did not make are never deleted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from leader_eval.pytest_plugin.ci import prune_runs
from leader_eval.store.run_store import run_dir_lock

pytest_plugins = ["pytester"]

DATA = Path(__file__).parents[1] / "data" / "v0_1_0"


def _fake_run(root: Path, name: str, created: str, *, by: str | None = "pytest", suite: str = "minimal") -> Path:
    d = root / name
    d.mkdir(parents=True)
    manifest = {
        "identity": {"suite": suite},
        "label": "local-smollm2",
        "created": created,
        "run_id": f"run-{name}",
        **({"created_by": by} if by else {}),
    }
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "samples.jsonl").write_text("")
    return d


def test_prune_keeps_the_newest_and_never_deletes_protected_runs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    made = [_fake_run(runs, f"r{i}", f"2026-01-0{i + 1}T00:00:00+00:00") for i in range(8)]
    cli_run = _fake_run(runs, "cli", "2020-01-01T00:00:00+00:00", by=None)
    other_suite = _fake_run(runs, "other", "2020-01-01T00:00:00+00:00", suite="leader_core")
    (runs / "notes").mkdir()  # not a run directory at all
    golden = tmp_path / "golden" / "minimal"
    golden.mkdir(parents=True)
    (golden / "local-smollm2.json").write_text(json.dumps({"created_from": "run-r0", "metrics": {}}))
    with run_dir_lock(made[1]):  # another process is writing it
        deleted = prune_runs(runs, "minimal", "local-smollm2", 3, protect=[made[2]], golden_dir=tmp_path / "golden")
    assert sorted(d.name for d in deleted) == ["r3", "r4"]
    left = sorted(p.name for p in runs.iterdir() if p.is_dir())  # beside them: the history's index
    # newest 3 (r5-r7); r0 a golden's source, r1 locked, r2 this session's; the rest not pytest's
    assert left == ["cli", "notes", "other", "r0", "r1", "r2", "r5", "r6", "r7"]
    assert cli_run.exists() and other_suite.exists()


def test_zero_keeps_every_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for i in range(3):
        _fake_run(runs, f"r{i}", f"2026-01-0{i + 1}")
    assert prune_runs(runs, "minimal", "local-smollm2", 0, protect=[], golden_dir=tmp_path / "golden") == []
    assert len(list(runs.iterdir())) == 3


def test_a_session_prunes_older_pytest_runs_per_ini_keep_runs(pytester: pytest.Pytester) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    runs = pytester.path / "runs"
    for i in range(4):
        _fake_run(runs, f"old{i}", f"2000-01-0{i + 1}T00:00:00+00:00")
    pytester.makeini("[pytest]\nleader_eval_keep_runs = 2\n")
    res = pytester.runpytest_subprocess(
        "mini.yaml",
        f"--le-model=replay:{DATA / 'run'}",
        "--le-samples=1",
        "--le-allow-missing-golden",
        "-p",
        "no:cacheprovider",
    )
    assert res.ret == 0, res.stdout.str()
    left = sorted(p.name for p in runs.iterdir() if p.is_dir())
    # this session's run and the newest old one
    assert len(left) == 2 and "old3" in left, left
    (mine,) = [p for p in left if not p.startswith("old")]
    assert json.loads((runs / mine / "manifest.json").read_text())["created_by"] == "pytest"


def test_pruned_runs_stay_in_the_history_index(tmp_path: Path) -> None:
    from leader_eval.runs.history import collect

    runs = tmp_path / "runs"
    for i in range(4):
        _fake_run(runs, f"r{i}", f"2026-01-0{i + 1}T00:00:00+00:00")
    deleted = prune_runs(runs, "minimal", "local-smollm2", 2, protect=[], golden_dir=tmp_path / "golden")
    assert sorted(d.name for d in deleted) == ["r0", "r1"]
    h = collect([runs])
    assert [(e["run_id"], e["pruned"]) for e in h.entries] == [
        ("run-r3", False), ("run-r2", False), ("run-r1", True), ("run-r0", True),
    ]  # fmt: skip


def test_a_run_whose_history_entry_cannot_be_kept_is_not_pruned(tmp_path: Path) -> None:
    from leader_eval.store.run_store import HISTORY_INDEX

    runs = tmp_path / "runs"
    for i in range(3):
        _fake_run(runs, f"r{i}", f"2026-01-0{i + 1}T00:00:00+00:00")
    (tmp_path / "elsewhere").write_text("")
    (runs / HISTORY_INDEX).symlink_to(tmp_path / "elsewhere")  # refused: the entry cannot be written
    assert prune_runs(runs, "minimal", "local-smollm2", 1, protect=[], golden_dir=tmp_path / "golden") == []
    assert sorted(p.name for p in runs.iterdir() if p.is_dir()) == ["r0", "r1", "r2"]
