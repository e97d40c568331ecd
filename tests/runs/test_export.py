"""Results out: the documented columns, CSV and Parquet round trips of a recorded run, pandas,
and formula cells neutralised."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import read_run
from leader_eval.runs.export import (
    CASE_COLUMNS,
    EXPORT_FORMAT_VERSION,
    SAMPLE_COLUMNS,
    neutralise,
    write_table,
)
from tests.conftest import optional

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "corpus" / "report_runs" / "s101"  # a committed run of leader_core
DOCUMENTED = [name for name, _ in SAMPLE_COLUMNS]


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_docs_list_every_column_in_order() -> None:
    doc = (REPO / "docs" / "export.md").read_text()
    listed = re.findall(r"^\| `([^`]+)` \|", doc, re.M)
    samples, cases = DOCUMENTED, [name for name, _ in CASE_COLUMNS]
    assert listed[: len(samples)] == samples
    assert listed[len(samples) : len(samples) + 2] == ["check.NAME", "judge.NAME"]
    assert listed[len(samples) + 2 :] == cases


def test_csv_round_trip_of_a_recorded_run(tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    assert main(["export", str(RUN), "--format", "csv", "--out", str(out)]) == 0
    rows = _read_csv(out)
    run = read_run(RUN)
    assert len(rows) == len(run.samples) and rows
    header = list(rows[0])
    assert header[: len(DOCUMENTED)] == DOCUMENTED
    assert header[len(DOCUMENTED) :] == sorted(header[len(DOCUMENTED) :])
    assert all(c.startswith("check.") for c in header[len(DOCUMENTED) :]) and "check.format" in header
    score = {(s.case_id, s.index): s for s in run.scores}
    for r in rows:
        s = score[(r["case_id"], int(r["sample"]))]
        assert r["format_version"] == str(EXPORT_FORMAT_VERSION)
        assert r["passed"] == ("true" if s.passed else "false") and r["reason"] == (s.reason or "")
        assert json.loads(r["failed_reasons"]) == s.failed_reasons and json.loads(r["leaks"]) == s.leak_classes
        assert r["check.format"] == (
            "true" if next(c for c in s.checks if c["check"] == "format")["passed"] else "false"
        )
    case = next(c for c in run.cases if c["case_id"] == rows[0]["case_id"])
    assert json.loads(rows[0]["tags"]) == case["tags"] and rows[0]["run_id"] == run.manifest["run_id"]


def test_parquet_round_trip_of_a_recorded_run(tmp_path: Path) -> None:
    pq = optional("pyarrow.parquet")
    out = tmp_path / "s.parquet"
    assert main(["export", str(RUN), "--format", "parquet", "--out", str(out)]) == 0
    table = pq.read_table(out)
    assert table.column_names[: len(DOCUMENTED)] == DOCUMENTED
    assert table.schema.metadata[b"leader_eval.export.format_version"] == str(EXPORT_FORMAT_VERSION).encode()
    run = read_run(RUN)
    assert table.num_rows == len(run.samples)
    assert (
        str(table.schema.field("passed").type) == "bool" and str(table.schema.field("tags").type.value_type) == "string"
    )
    passed = {
        (c, i): p
        for c, i, p in zip(*(table.column(n).to_pylist() for n in ("case_id", "sample", "passed")), strict=True)
    }
    assert passed == {(s.case_id, s.index): s.passed for s in run.scores}


def test_per_case_export_has_a_row_per_case(tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    assert main(["export", str(RUN), "--format", "jsonl", "--per-case", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    run = read_run(RUN)
    assert [r["case_id"] for r in rows] == [c["case_id"] for c in run.cases]
    assert list(rows[0]) == [n for n, _ in CASE_COLUMNS]
    assert rows[0]["score"] == run.cases[0]["score"]


def test_to_pandas(tmp_path: Path) -> None:
    optional("pandas")
    run = read_run(RUN)
    df = run.to_pandas()
    assert list(df.columns[: len(DOCUMENTED)]) == DOCUMENTED and len(df) == len(run.samples)
    assert df.attrs["format_version"] == EXPORT_FORMAT_VERSION
    assert df["passed"].sum() == sum(s.passed for s in run.scores)
    cases = run.cases_to_pandas()
    assert list(cases["case_id"]) == [c["case_id"] for c in run.cases]


def test_formula_cells_are_neutralised(tmp_path: Path) -> None:
    hostile = ['=HYPERLINK("http://x")', "+1", "-2", "@SUM(A1)", "\tx", "\rx", "plain", "a=b", "two\rlines\n"]
    rows = [{"case_id": h, "text": h, "tags": [h]} for h in hostile]
    out = tmp_path / "h.csv"
    write_table(rows, ["case_id", "text", "tags"], "csv", out)
    back = _read_csv(out)
    for h, r in zip(hostile, back, strict=True):
        want = h if h[0].isalpha() else "'" + h
        assert r["case_id"] == want and r["text"] == want
        assert r["tags"] == json.dumps([h])  # JSON text starts with [: nothing to run
    assert neutralise("=1") == "'=1"
    jsonl = tmp_path / "h.jsonl"
    write_table(rows, ["case_id"], "jsonl", jsonl)
    assert [json.loads(x)["case_id"] for x in jsonl.read_text().splitlines()] == hostile  # values unchanged


def test_export_never_writes_into_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(RUN), "--out", str(RUN / "x.csv")]) == 2
    assert "inside a run directory" in capsys.readouterr().err
    assert not (RUN / "x.csv").exists()


def test_parquet_without_pyarrow_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(LeaderEvalError, match=r"pip install 'leader-eval\[data\]'"):
        write_table([{"a": 1}], ["a"], "parquet", tmp_path / "x.parquet")
    assert not list(tmp_path.iterdir())


def test_judge_scores_become_a_judge_column_family() -> None:
    from leader_eval.runs.export import sample_rows
    from leader_eval.scoring.scorer import SampleScore

    run = read_run(RUN)

    # as runs.judging.attach records them: one "judge" check, criterion -> verdict
    verdicts = {
        "helpful": {"value": 0.75, "raw": 4, "error": None, "judged": True},
        "concise": {"value": 1.0, "raw": "pass", "error": None, "judged": True},
        "polite": {"value": None, "raw": None, "error": "empty reply", "judged": True},
    }
    judge = {"check": "judge", "passed": True, "hard": False, "reason": None, "data": verdicts}
    scores = [SampleScore(**{**s.to_dict(), "checks": [*s.checks, judge]}) for s in run.scores]
    rows = sample_rows(run.manifest, run.samples, scores, run.cases)
    extra = list(rows[0])[len(DOCUMENTED) :]
    assert extra[-3:] == ["judge.concise", "judge.helpful", "judge.polite"]  # after check.*, sorted
    assert {r["judge.helpful"] for r in rows} == {0.75} and {r["judge.polite"] for r in rows} == {None}
    assert "check.judge" not in extra  # the verdicts' carrier is not a check of its own
    assert not any(c.startswith("judge.") for c in sample_rows(run.manifest, run.samples, run.scores, run.cases)[0])


def test_formula_cells_behind_spaces_or_in_full_width_are_neutralised() -> None:
    for cell in (" =1+2", "\u00a0=1+2", "\u3000+1", "\uff1d1+2", "\uff20SUM(A1)", "|calc!A1", "  -2"):
        assert neutralise(cell) == "'" + cell, cell
    for cell in ("a =1", "x|y", "1-2", "plain"):
        assert neutralise(cell) == cell


def test_export_never_writes_into_any_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not only the runs exported: another run's manifest or samples are its evidence."""
    other = tmp_path / "other_run"
    shutil.copytree(RUN, other)
    before = (other / "manifest.json").read_bytes()
    for target in (other / "manifest.json", other / "sub" / "x.csv"):
        assert main(["export", str(RUN), "--format", "csv", "--out", str(target)]) == 2
        assert "inside a run directory" in capsys.readouterr().err
    assert (other / "manifest.json").read_bytes() == before and not (other / "sub").exists()


def test_a_folder_with_a_manifest_json_of_its_own_is_no_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A web app's or an extension's manifest.json does not make a project folder a run: export
    writes there (a run directory holds a manifest and its samples)."""
    (tmp_path / "manifest.json").write_text('{"name": "my-extension"}')
    out = tmp_path / "reports" / "x.csv"
    out.parent.mkdir()
    assert main(["export", str(RUN), "--format", "csv", "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.is_file()
