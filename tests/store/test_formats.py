"""Files written by an older leader-eval keep working: the run directory and golden committed under
tests/data/v0_1_0 (recorded by 0.1.0, before files carried a format_version) still show, replay and
gate; a file of an unknown format is refused with one line saying what to do; new files carry
``format_version`` and ``scorer_version``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.runs.evaluate import read_run, run
from leader_eval.runs.options import RunOptions
from leader_eval.store.formats import GOLDEN_FORMAT_VERSION, RUN_FORMAT_VERSION, SCORER_VERSION

DATA = Path(__file__).parents[1] / "data" / "v0_1_0"


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A copy of the 0.1.0 files (tests must never change the committed ones)."""
    dest = tmp_path / "v0_1_0"
    shutil.copytree(DATA, dest)
    return dest


def test_the_committed_files_predate_format_versions() -> None:
    manifest = json.loads((DATA / "run" / "manifest.json").read_text())
    golden = json.loads((DATA / "golden" / "minimal" / "local-smollm2.json").read_text())
    assert "format_version" not in manifest and manifest["versions"]["leader-eval"] == "0.1.0"
    assert "format_version" not in golden and golden["format"] == 1


def test_an_old_run_still_shows_and_gates(old: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(old / "run")]) == 0
    out = capsys.readouterr().out
    assert "greets_team" in out and "states_goal" in out
    # the golden 0.1.0 wrote from this very run: read as the baseline of its name, it passes
    assert main(["gate", str(old / "run"), "--golden", str(old / "golden"), "--baseline", "local-smollm2"]) == 0
    out = capsys.readouterr().out
    assert "gate PASS (suite minimal, baseline local-smollm2, label local-smollm2)" in out
    assert "drift unknown" in out and "git mv" in out  # one note: how to rename it and re-record it


def test_an_old_run_replays_into_a_new_run_with_versions(old: Path, tmp_path: Path) -> None:
    recorded = read_run(old / "run")
    out = tmp_path / "replayed"
    result = run(old / "minimal.yaml", RunOptions(model=f"replay:{old / 'run'}", out=out, progress=False))
    assert sorted((s.case_id, s.text) for s in result.samples) == sorted((s.case_id, s.text) for s in recorded.samples)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format_version"] == RUN_FORMAT_VERSION and manifest["scorer_version"] == SCORER_VERSION
    # and a golden written today carries its format version
    assert main(["gate", str(out), "--golden", str(tmp_path / "golden"), "--update-golden"]) == 0
    golden = json.loads((tmp_path / "golden" / "minimal" / "main.json").read_text())
    assert golden["format_version"] == GOLDEN_FORMAT_VERSION and golden["scorer_version"] == SCORER_VERSION


@pytest.mark.parametrize("version", [99, 0, "one"])
def test_a_run_of_an_unknown_format_is_refused_in_one_line(
    old: Path, capsys: pytest.CaptureFixture[str], version: object
) -> None:
    mp = old / "run" / "manifest.json"
    mp.write_text(json.dumps({**json.loads(mp.read_text()), "format_version": version}))
    assert main(["show", str(old / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(mp) in err and "format" in err
    assert ("upgrade leader-eval" in err) == (version == 99)


def test_a_golden_of_a_newer_format_is_refused_in_one_line(old: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gp = old / "golden" / "minimal" / "local-smollm2.json"
    newer = GOLDEN_FORMAT_VERSION + 1
    gp.write_text(json.dumps({**json.loads(gp.read_text()), "format_version": newer}))
    assert main(["gate", str(old / "run"), "--golden", str(gp)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"golden file format {newer} is newer" in err and "upgrade leader-eval" in err
