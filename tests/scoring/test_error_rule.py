"""The run summary names the first sampler error: which one, and printed safely."""

from __future__ import annotations

import pytest

from leader_eval.scoring.error_rule import MAX_ERROR_TEXT, first_sampler_error, format_first_error
from leader_eval.types import Sample


def _err(case_id: str, index: int, error: str) -> Sample:
    return Sample(case_id=case_id, index=index, seed=index, key="k", outcome="error", error=error)


def test_the_first_error_is_the_first_by_case_and_index_not_by_arrival() -> None:
    ok = Sample(case_id="a", index=0, seed=0, key="k", outcome="ok", text="fine")
    samples = [_err("b", 0, "late"), ok, _err("a", 3, "third"), _err("a", 1, "first")]
    assert first_sampler_error(samples) == {"case_id": "a", "index": 1, "error": "first"}
    assert first_sampler_error(list(reversed(samples))) == first_sampler_error(samples)
    assert first_sampler_error([ok]) is None


@pytest.mark.parametrize(
    "hostile",
    [
        "HTTP 500: boom\n::error file=x::fake failure",
        "\x1b]8;;http://evil\x07click\x1b]8;;\x07 \x1b[2J",
        "line\r::warning::overwritten",
        "bidi \u202eexe.txt",
        "x" * 10_000,
    ],
)
def test_the_printed_error_is_one_inert_line(hostile: str) -> None:
    line = format_first_error(first_sampler_error([_err("c", 0, hostile)]))
    assert line is not None and line.startswith("first sampler error (case c, sample 0): ")
    assert line.isprintable()  # no newline, carriage return, escape or bidi control
    assert len(line) < MAX_ERROR_TEXT + 60


def test_the_printed_error_holds_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "tml-FIRSTERROR-" + "9" * 20
    monkeypatch.setenv("TINKER_API_KEY", key)
    record = first_sampler_error([_err("c", 0, f"HTTP 401: key {key} rejected")])
    assert record is not None and key not in str(record) and "[redacted]" in record["error"]
    # a summary.json from elsewhere is scrubbed when printed too
    assert key not in str(format_first_error({"case_id": "c", "index": 0, "error": key}))
