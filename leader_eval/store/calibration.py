"""Judge calibration records: how well a judge agreed with people, keyed by the judge's identity
and the rubric it graded (``leader-eval judge-check`` writes them; a run reads them to decide
whether a judge metric may gate; docs/judges.md).

One JSON file per judge and criterion: ``<criterion>__<key16>.json`` in the calibration folder
(default ``judge-calibration/`` beside the suite; ``LEADER_EVAL_CALIBRATION_DIR`` overrides), where
``key`` is the SHA-256 of the judge identity (model, weights, decoding, prompt template hash,
rubric hash). A record is a file the gate reads, never a number typed into a suite.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leader_eval.errors import RunDirError
from leader_eval.store.run_store import read_json_file, write_json_atomic

ENV = "LEADER_EVAL_CALIBRATION_DIR"
FOLDER = "judge-calibration"
FORMAT_VERSION = 1


def calibration_dir(suite_path: str | Path) -> Path:
    """Where a suite's judges' calibration records live."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    return Path(suite_path).resolve().parent / FOLDER


def identity_key(identity: Mapping[str, Any]) -> str:
    body = json.dumps(dict(identity), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


def record_path(folder: Path, criterion: str, identity: Mapping[str, Any]) -> Path:
    return folder / f"{criterion}__{identity_key(identity)[:16]}.json"


def write_record(folder: Path, criterion: str, identity: Mapping[str, Any], figures: Mapping[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = record_path(folder, criterion, identity)
    record = {
        "format_version": FORMAT_VERSION,
        "criterion": criterion,
        "judge": dict(identity),
        "judge_key": identity_key(identity),
        **dict(figures),
    }
    write_json_atomic(path, record)
    return path


def read_record(folder: Path, criterion: str, identity: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record of this judge on this criterion, or None when there is none; a record that is
    not one (wrong shape, another judge's) is a one-line error naming the file."""
    path = record_path(folder, criterion, identity)
    if not path.exists():
        return None
    data = read_json_file(path, "judge calibration record")
    agreement = data.get("agreement", {}) if isinstance(data, dict) else None
    kappa = agreement.get("kappa") if isinstance(agreement, dict) else None
    if (
        not isinstance(data, dict)
        or not isinstance(agreement, dict)
        or isinstance(kappa, bool)  # JSON true is no agreement figure
        or data.get("format_version") != FORMAT_VERSION
        or data.get("judge_key") != identity_key(identity)
        or data.get("judge") != dict(identity)
        or not (kappa is None or (isinstance(kappa, int | float) and math.isfinite(kappa) and -1 <= kappa <= 1))
    ):
        raise RunDirError(f"{path}:1: not a calibration record of this judge (re-run leader-eval judge-check)")
    return data
