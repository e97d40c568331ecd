"""The history's entries (``runs.history``): what each run directory contributes, the bounds, the
one-line notes for hostile directories, the gate records and the index of pruned runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.runs.history import collect, read_index, record_gate, record_pruned, run_entry
from leader_eval.store.run_store import HISTORY_INDEX
from tests.corpus.report_runs import RUN_A, copy_run, history_runs


def test_an_entry_holds_the_runs_metrics_with_their_intervals() -> None:
    entry = run_entry(RUN_A)
    summary = json.loads((RUN_A / "summary.json").read_text())["overall"]["metrics"]["score"]
    assert entry["metrics"]["score"] == {
        "value": summary["value"], "low": summary["low"], "high": summary["high"], "higher_is_better": True,
    }  # fmt: skip
    assert (entry["suite"], entry["label"], entry["seed"]) == ("leader_core", "seed101", 101)
    assert entry["gates"] == {} and entry["pruned"] is False


def test_collect_reads_every_run_newest_first_and_notes_each_bad_directory(tmp_path: Path) -> None:
    history_runs(tmp_path)
    (tmp_path / "notes").mkdir()  # a plain folder: not a run, nothing to say
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{not json")
    (tmp_path / "linked").symlink_to(tmp_path / "run0")
    fifo = copy_run(RUN_A, tmp_path / "fifo")
    os.mkfifo(fifo / "cases.json.tmp")  # a special file inside a run directory
    huge = copy_run(RUN_A, tmp_path / "huge")
    with open(huge / "summary.json", "r+b") as f:
        f.truncate(64 << 20)  # sparse: over the history's read cap
    h = collect([tmp_path])
    assert [e["label"] for e in h.entries] == ["step500", "step400", "step300", "step200", "step100"]
    assert h.entries[2]["gates"]["main"]["status"] == "fail"
    assert len(h.notes) == 4 and all("\n" not in n for n in h.notes)
    joined = "\n".join(h.notes)
    for name in ("broken", "linked", "fifo", "huge"):
        assert f"{tmp_path / name}" in joined


def test_collect_reads_at_most_max_runs_and_says_how_many_it_left(tmp_path: Path) -> None:
    history_runs(tmp_path)
    h = collect([tmp_path], max_runs=3)
    assert len(h.entries) == 3
    assert any("2 older directories not read (at most 3)" in n for n in h.notes)


def test_the_gate_record_keeps_the_latest_verdict_per_baseline(tmp_path: Path) -> None:
    run = copy_run(RUN_A, tmp_path / "run")
    record_gate(run, "main", {"status": "fail", "failed": ["score"]})
    record_gate(run, "v2", {"status": "pass", "failed": []})
    record_gate(run, "main", {"status": "pass", "failed": []})
    gates = run_entry(run)["gates"]
    assert {b: g["status"] for b, g in gates.items()} == {"main": "pass", "v2": "pass"}


def test_a_pruned_runs_entry_stays_in_the_history(tmp_path: Path) -> None:
    runs = history_runs(tmp_path, n=2)
    entry = run_entry(runs[0])
    record_pruned(tmp_path, entry)
    import shutil

    shutil.rmtree(runs[0])
    (kept,) = read_index(tmp_path)
    assert kept["pruned"] is True and kept["metrics"] == entry["metrics"] and kept["run_id"] == "r0"
    h = collect([tmp_path])
    assert [(e["run_id"], e["pruned"]) for e in h.entries] == [("r1", False), ("r0", True)]


def test_a_damaged_index_line_is_a_note_and_the_rest_is_kept(tmp_path: Path) -> None:
    runs = history_runs(tmp_path, n=1)
    record_pruned(tmp_path, run_entry(runs[0]) | {"run_id": "old"})
    with open(tmp_path / HISTORY_INDEX, "a") as f:
        f.write("{broken\n")
    notes: list[str] = []
    assert [e["run_id"] for e in read_index(tmp_path, notes)] == ["old"]
    assert notes and "unreadable line" in notes[0]


def test_an_index_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / HISTORY_INDEX).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LeaderEvalError):
        record_pruned(tmp_path, run_entry(RUN_A))
    notes: list[str] = []
    assert read_index(tmp_path, notes) == [] and len(notes) == 1


def test_runs_one_folder_down_are_found(tmp_path: Path) -> None:
    """A downloaded CI artifact holds ``shard1/RUN``: the history reads one folder further."""
    history_runs(tmp_path / "artifact" / "runs", n=2)
    h = collect([tmp_path / "artifact"])
    assert sorted(e["run_id"] for e in h.entries) == ["r0", "r1"] and h.notes == []
