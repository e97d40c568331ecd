"""The command line follows the conventions users expect: ``python -m leader_eval``, ``--version``,
help on every option, ``lint`` over directories and globs, ``schema``; and the sampling options of
``leader-eval run`` and the pytest plugin are one table, so they cannot drift."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from leader_eval import __version__
from leader_eval.cli.app import build_parser, main
from leader_eval.runs.options import SAMPLING_OPTIONS, TRUSTED_OPTIONS

ROOT = Path(__file__).resolve().parents[2]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_python_dash_m_and_version() -> None:
    res = subprocess.run([sys.executable, "-m", "leader_eval", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == f"leader-eval {__version__}"
    res = subprocess.run([sys.executable, "-m", "leader_eval", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0 and "lint" in res.stdout and "schema" in res.stdout


def test_every_option_of_every_command_has_help() -> None:
    parser = build_parser()
    missing = []
    for name, sub in [("", parser), *_subparsers(parser).items()]:
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


#: every command that samples or builds a model's backend takes exactly run's option table
SAMPLING_COMMANDS = ("run", "stress", "lint", "compare-adaptive")


@pytest.mark.parametrize("command", SAMPLING_COMMANDS)
def test_every_sampling_command_takes_runs_option_table(command: str) -> None:
    sub = _subparsers(build_parser())[command]
    by_flag = {s: a for a in sub._actions for s in a.option_strings}
    for opt in (*SAMPLING_OPTIONS, *TRUSTED_OPTIONS):
        action = by_flag[f"--{opt.name}"]
        expected = opt.argparse_kwargs()
        assert action.help == expected["help"]
        assert action.default == expected.get("default", False if opt.flag else None)
        assert action.type == expected.get("type"), opt.name
        assert list(action.choices or []) == list(expected.get("choices") or [])


def test_a_backend_option_error_names_the_cli_flags(capsys: pytest.CaptureFixture[str]) -> None:
    suite = str(ROOT / "suites" / "leader_core.yaml")
    for argv in (["stress", suite], ["run", suite], ["lint", suite]):
        status = main([*argv, "--model", "openai:http://127.0.0.1:9#m", "--api-mode", "completions"])
        err = capsys.readouterr().err
        assert status == 2, argv
        assert "--chat-template FILE" in err and "--template-gguf PATH" in err and "--api-mode chat" in err
        assert "gguf_path" not in err and "chat_template=" not in err and "mode=" not in err


def test_run_and_the_pytest_plugin_share_the_sampling_table() -> None:

    class Recorder:
        def __init__(self) -> None:
            self.options: dict[str, dict] = {}
            self.ini: dict[str, str] = {}

        def getgroup(self, *args: object) -> Recorder:
            return self

        def addoption(self, name: str, **kw: object) -> None:
            self.options[name] = kw

        def addini(self, name: str, help: str, **kw: object) -> None:
            self.ini[name] = help

    from leader_eval.pytest_plugin.config import add_options

    rec = Recorder()
    add_options(rec)  # type: ignore[arg-type]
    for opt in SAMPLING_OPTIONS:
        kw = rec.options[f"--le-{opt.name}"]
        assert kw["help"] == opt.help and kw.get("type") == opt.argparse_kwargs().get("type")
        assert kw.get("action") == opt.argparse_kwargs().get("action"), opt.name  # --model repeats in both
        assert f"leader_eval_{opt.dest}" in rec.ini
    for opt in TRUSTED_OPTIONS:  # repeatable on both sides; the ini's linelist is plural
        kw = rec.options[f"--le-{opt.name}"]
        assert kw["help"] == opt.help and kw["action"] == "append"
        assert f"leader_eval_{opt.dest}s" in rec.ini
    # every plugin option is namespaced, and has help
    assert all(name.startswith("--le-") and kw.get("help") for name, kw in rec.options.items())
    assert all(name.startswith("leader_eval_") and h for name, h in rec.ini.items())


def test_lint_takes_directories_and_globs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = (ROOT / "suites" / "examples" / "minimal.yaml").read_text()
    (tmp_path / "evals" / "deep").mkdir(parents=True)
    (tmp_path / "evals" / "a.yaml").write_text(src)
    (tmp_path / "evals" / "deep" / "b.yml").write_text(src.replace("name: minimal", "name: minimal_b"))
    (tmp_path / "evals" / "notes.txt").write_text("not a suite")
    assert main(["lint", "--no-tokens", str(tmp_path / "evals")]) == 0
    out = capsys.readouterr().out
    assert out.count(": ok, 2 cases") == 2 and "notes.txt" not in out
    assert main(["lint", "--no-tokens", str(tmp_path / "**" / "*.yml")]) == 0
    out = capsys.readouterr().out
    assert "b.yml: ok" in out and "a.yaml" not in out
    assert main(["lint", "--no-tokens", str(tmp_path / "nothing" / "*.yaml")]) == 2
    assert "no suite file" in capsys.readouterr().err


def test_schema_command_prints_the_schema_or_its_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--path"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.name == "suite.schema.json" and path.is_file()
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(path.read_text())


def test_a_top_level_schema_key_and_the_editor_comment_are_accepted(tmp_path: Path) -> None:
    from leader_eval.suite.load import load_suite

    src = (ROOT / "suites" / "examples" / "minimal.yaml").read_text()
    keyed = tmp_path / "keyed.yaml"
    keyed.write_text("$schema: ../leader_eval/suite/schema/suite.schema.json\n" + src)
    commented = tmp_path / "commented.yaml"
    commented.write_text("# yaml-language-server: $schema=../leader_eval/suite/schema/suite.schema.json\n" + src)
    assert [c.id for c in load_suite(keyed).cases] == [c.id for c in load_suite(commented).cases]


def test_a_command_run_in_process_leaves_the_collector_as_it_found_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``main`` tunes the garbage collector for one command (a larger young generation, the
    run's records frozen); a script or test that calls it in-process gets its collector back."""
    import gc

    before = (gc.get_threshold(), gc.get_freeze_count())
    assert main(["lint", str(ROOT / "suites" / "leader_core.yaml"), "--no-tokens"]) == 0
    assert main(["lint", str(ROOT / "suites" / "no_such.yaml"), "--no-tokens"]) == 2
    capsys.readouterr()
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
