"""The configuration file from the CLI: ``leader-eval config`` shows each value and its source
(never a secret), a file's setting applies where the command line left it unset, a bad file is
``FILE:LINE key: ...`` with exit 2 before anything runs, and the trusted names' sources rank
file < command line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from leader_eval.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ROOT / "suites" / "examples" / "minimal.yaml"

PYPROJECT = """\
[project]
name = "x"

[tool.leader-eval]
concurrency = 8
baseline = "v7"
api-key-env = "MY_TEAM_KEY"

[tool.leader-eval.model-roles]
grader = "local:smollm2 --temperature 0"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    shutil.copy(MINIMAL, tmp_path / "mini.yaml")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # found upward from the working directory
    return tmp_path


def _rows(out: str) -> dict[str, list[str]]:
    """The settings table's rows by setting (the trusted names' table after it is left out)."""
    settings = out.split("\nkind ")[0]
    return {line.split()[0]: line.split() for line in settings.splitlines() if line.strip()}


def test_config_shows_every_value_and_where_it_came_from(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_TEAM_KEY", "sk-live-SECRETSECRET")
    argv = ["config", "--baseline", "v8", "--check-function", "polite=mychecks:polite"]
    argv += ["--model-role", "k=openai:http://127.0.0.1:9/v1?api_key=qs-SECRETSECRET#m"]  # a query-string key
    assert main([*argv, "--model-role", "j=openai:http://me:pw-SECRETSECRET@127.0.0.1:9/v1#m --api-mode chat"]) == 0
    out = capsys.readouterr().out
    assert "SECRETSECRET" not in out and "openai:http://***@127.0.0.1:9/v1#m --api-mode chat" in out
    file = str((project / "pyproject.toml").resolve())  # outside the working directory: absolute
    assert f"configuration file: {file}" in out
    rows = _rows(out)
    assert rows["concurrency"][1:] == ["8", f"{file}:5"]
    assert rows["baseline"][1:] == ["v8", "command", "line"]  # the command line beats the file
    assert rows["api-key-env"][1:] == ["MY_TEAM_KEY", f"{file}:7"]
    assert "$MY_TEAM_KEY (set)" in out  # a key is shown by its variable's name only
    assert rows["temperature"][1:] == ["-", "default", "(the", "suite's)"]
    assert rows["model"][1:] == ["local:smollm2", "default"]
    assert re.search(rf"grader +local:smollm2 --temperature 0.0 +{re.escape(file)}:10", out), out
    assert "polite  mychecks:polite" in out and "--check-function" in out


def test_a_file_setting_applies_to_run_where_the_command_line_is_silent(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the file's model is a replay of a run that does not exist: run reads the file (exit 2 naming it)
    (project / "pyproject.toml").write_text(PYPROJECT.replace("concurrency = 8", 'model = "replay:nowhere"'))
    assert main(["run", "../mini.yaml", "-q"]) == 2
    assert "nowhere" in capsys.readouterr().err
    assert not (project / "sub" / "runs").exists()


def test_a_bad_file_is_file_line_key_and_exit_2_for_every_command_that_reads_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text(PYPROJECT.replace("concurrency = 8", "temperature = 0.9"))
    for argv in (["run", "../mini.yaml", "-q"], ["lint", "--no-tokens", "../mini.yaml"], ["config"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        file = (project / "pyproject.toml").resolve()
        assert len(err) == 1 and err[0].startswith(f"error: {file}:5 temperature: not allowed"), err
    assert not (project / "sub" / "runs").exists()
    # commands that do not read it are not stopped by it
    assert main(["schema", "--path"]) == 0


def test_a_bad_model_role_or_check_function_on_the_command_line_is_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = {
        "--model-role=grader": "--model-role: 'grader' is not NAME=VALUE",
        "--model-role=grader=local:smollm2 --temperatur 0": "unrecognized arguments: --temperatur",
        "--check-function=polite=mychecks": "'mychecks' is not MODULE:FUNCTION",
    }
    for flag, expected in cases.items():
        for command in (["run", "../mini.yaml", "-q"], ["lint", "--no-tokens", "../mini.yaml"]):
            assert main([*command, flag]) == 2
            err = capsys.readouterr().err
            assert expected in err, (command, err)
    assert not (project / "sub" / "runs").exists()
