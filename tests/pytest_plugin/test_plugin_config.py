"""The plugin reads the same ``[tool.leader-eval]`` as the CLI: a file's setting changes both;
the pytest ini beats the file, the command line beats both; a bad file or a bad trusted name is a
usage error naming it; ``--le-model`` twice is refused (the matrix is ``leader-eval run``'s)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from leader_eval.cli.app import main

pytest_plugins = ["pytester"]

DATA = Path(__file__).parents[1] / "data" / "v0_1_0"
FILE = f"""\
[tool.leader-eval]
model = "replay:{DATA / "run"}"
baseline = "from-file"
run-dir = "file-runs"
suites = ["evals/*.yaml"]
"""


def test_a_pyproject_setting_changes_the_plugin_and_the_cli(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "evals").mkdir()
    shutil.copy(DATA / "minimal.yaml", pytester.path / "evals" / "mini.yaml")
    (pytester.path / "pyproject.toml").write_text(FILE)
    args = ("--le-samples=1", "--le-allow-missing-golden", "-p", "no:cacheprovider")

    res = pytester.runpytest_subprocess(*args)
    out = res.stdout.str()
    assert res.ret == 0, out
    assert "leader-eval: settings from pyproject.toml" in out  # the header names the file
    assert "evals/mini.yaml::leader-eval-gate" in out  # the file's suite glob
    assert "from-file" in out, out  # the file's baseline names the golden looked for
    assert len(list((pytester.path / "file-runs").iterdir())) == 1  # the file's run-dir and replay model

    # the ini beats the file; the command line beats both
    (pytester.path / "pyproject.toml").write_text(
        FILE + '\n[tool.pytest.ini_options]\nleader_eval_baseline = "from-ini"\n'
    )
    out = pytester.runpytest_subprocess(*args).stdout.str()
    assert "from-ini" in out and "from-file" not in out, out
    out = pytester.runpytest_subprocess(*args, "--le-baseline=from-cli").stdout.str()
    assert "from-cli" in out and "from-ini" not in out, out

    # the CLI reads the same file from the same folder
    monkeypatch.chdir(pytester.path)
    assert main(["config"]) == 0
    shown = capsys.readouterr().out
    assert f"replay:{DATA / 'run'}" in shown and "pyproject.toml:2" in shown
    assert "from-file" in shown and "pyproject.toml:3" in shown


@pytest.mark.parametrize(
    ("pyproject", "args", "message"),
    [
        ("[tool.leader-eval]\nseed = 3\n", (), "pyproject.toml:2 seed: not allowed in a configuration file"),
        ("[tool.leader-eval]\nmodle = 'x'\n", (), "pyproject.toml:2 modle: unknown key (did you mean model?)"),
        ("", ("--le-model-role=grader",), "--le-model-role: 'grader' is not NAME=VALUE"),
        ("", ("--le-check-function=p=nomodule",), "--le-check-function p: 'nomodule' is not MODULE:FUNCTION"),
        (
            "[tool.pytest.ini_options]\nleader_eval_model_roles = ['g=local:smollm2 --temperature x']\n",
            (),
            "ini leader_eval_model_roles g: argument --temperature",
        ),
        (
            "",
            ("--le-model=local:smollm2", "--le-model=local:smollm2 --temperature 1", "--le-update-golden"),
            "--le-update-golden takes one --le-model; this session gives 2 (a model matrix)",
        ),
    ],
)
def test_a_bad_setting_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, pyproject: str, args: tuple[str, ...], message: str
) -> None:
    (pytester.path / "pyproject.toml").write_text(pyproject)
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    res = pytester.runpytest_subprocess("mini.yaml", *args, "-p", "no:cacheprovider")
    err = res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, err
    assert message in err, err
    assert "Traceback" not in err
