"""The command line refuses values that would silently change the measurement: one line, exit 2, nothing run."""

from __future__ import annotations

from pathlib import Path

import pytest

from leader_eval.cli.app import main

BAD_VALUES = [
    ["run", "{suite}", "--limit", "-1"],
    ["run", "{suite}", "--limit", "0"],
    ["run", "{suite}", "--temperature", "nan"],
    ["run", "{suite}", "--temperature", "inf"],
    ["run", "{suite}", "--temperature", "-0.5"],
    ["run", "{suite}", "--samples", "-1"],
    ["run", "{suite}", "--samples", "0"],
    ["run", "{suite}", "--samples", "1.5"],
    ["run", "{suite}", "--max-samples", "-1"],
    ["run", "{suite}", "--context-length", "-1"],
    ["run", "{suite}", "--max-tokens", "0"],
    ["run", "{suite}", "--concurrency", "0"],
    ["run", "{suite}", "--protocol", "bogus"],
    ["run", "{suite}", "--max-error-rate", "1.5"],
    ["run", "{suite}", "--max-error-rate", "nan"],
    ["gate", "{out}", "--max-error-rate", "-0.1"],
    ["compare", "{out}", "--alpha", "2"],
    ["compare", "{out}", "--alpha", "0"],
    ["compare", "{out}", "--alpha", "nan"],
    ["stress", "{suite}", "--steps", "abc"],
    ["stress", "{suite}", "--steps", "4000,-1"],
    ["stress", "{suite}", "--tokens", "0"],
    ["show", "{out}", "--limit", "-3"],
    ["cache", "prune", "--older-than-days", "-1"],
    ["overlap", "{suite}", "--train", "x.jsonl", "--threshold", "2"],
]


@pytest.mark.parametrize("argv", BAD_VALUES, ids=lambda a: " ".join(a[2:]))
def test_bad_value_is_one_line_exit_2_before_anything_runs(
    argv: list[str], mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = [a.format(suite=mini_suite, out=out) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert f"argument {argv[-2]}" in err
    assert not out.exists()  # nothing was created, let alone sampled


def test_library_logs_flag_lets_third_party_log_lines_through(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``leader-eval --library-logs CMD`` turns on what is kept out by default (llama.cpp's and
    transformers' own lines: tests/sampling/backends/test_local.py, tests/suite/test_chat_template.py)."""
    import os

    from leader_eval.suite.chat_template import LIBRARY_LOGS_ENV, library_logs_enabled

    monkeypatch.delenv(LIBRARY_LOGS_ENV, raising=False)
    assert not library_logs_enabled()
    monkeypatch.setitem(os.environ, LIBRARY_LOGS_ENV, "0")  # undone after the test
    assert main(["--library-logs", "schema", "--path"]) == 0
    capsys.readouterr()
    assert library_logs_enabled()
