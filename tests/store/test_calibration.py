"""Judge calibration records: a record that is not one (wrong shape, a boolean figure) is a
one-line error naming the file, never a traceback and never a judge that gates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leader_eval.store.calibration import read_record, write_record
from leader_eval.store.run_store import RunDirError

IDENTITY = {"model_id": "test:judge", "rubric_sha256": "ab" * 32}


@pytest.mark.parametrize("agreement", [[], "0.9", {"kappa": True}, {"kappa": 2.0}, {"kappa": float("nan")}])
def test_a_malformed_record_is_a_one_line_error(tmp_path: Path, agreement: object) -> None:
    path = write_record(tmp_path, "polite", IDENTITY, {"agreement": {"kappa": 0.8}})
    data = json.loads(path.read_text())
    data["agreement"] = agreement
    path.write_text(json.dumps(data))
    with pytest.raises(RunDirError, match="not a calibration record") as err:
        read_record(tmp_path, "polite", IDENTITY)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_a_sound_record_reads_back(tmp_path: Path) -> None:
    write_record(tmp_path, "polite", IDENTITY, {"agreement": {"kappa": 0.8}})
    got = read_record(tmp_path, "polite", IDENTITY)
    assert got is not None and got["agreement"]["kappa"] == 0.8
    assert read_record(tmp_path, "polite", {**IDENTITY, "model_id": "test:other"}) is None
