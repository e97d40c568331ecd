"""A suite's own stress filler file (``stress: {filler: FILE}``): a suite file like any other."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from leader_eval.errors import SuiteError
from leader_eval.suite.load import load_suite

SUPPORT = Path(__file__).resolve().parents[1] / "data" / "stress_support"


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(SUPPORT, tmp_path / "suite")
    return tmp_path / "suite" / "support.yaml"


def test_the_filler_items_load_in_the_suites_own_shape_and_enter_its_hash(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    suite = load_suite(path)
    assert suite.stress_filler is not None and len(suite.stress_filler) == 60
    assert set(suite.stress_filler[0]) == {"at", "customer", "message"}
    filler = path.parent / "support_filler.yaml"
    filler.write_text(filler.read_text() + '- {at: "2026-02-28", customer: Ivo, message: "one more line"}\n')
    assert load_suite(path).content_hash != suite.content_hash  # a changed filler is a changed suite


def test_a_filler_outside_the_suite_folder_is_refused(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    shutil.move(path.parent / "support_filler.yaml", tmp_path / "support_filler.yaml")
    path.write_text(path.read_text().replace("filler: support_filler.yaml", "filler: ../support_filler.yaml"))
    with pytest.raises(
        SuiteError, match=r"support\.yaml:6: stress filler '\.\./support_filler\.yaml' resolves to .*outside"
    ):
        load_suite(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [("[]\n", "non-empty YAML list"), ("- {at: x}\n- 3\n", r"support_filler\.yaml:2: filler item 2: a mapping")],
)
def test_a_bad_filler_file_is_a_one_line_error(tmp_path: Path, content: str, message: str) -> None:
    path = _copy(tmp_path)
    (path.parent / "support_filler.yaml").write_text(content)
    with pytest.raises(SuiteError, match=message):
        load_suite(path)
