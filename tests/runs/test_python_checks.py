"""Python checks from trusted configuration in a run: refused before sampling when undefined or
missing, recorded with their version, re-run on replay, and a check error fails the run loudly."""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.report.terminal import format_summary
from leader_eval.runs import trusted as trusted_mod
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.runs.trusted import NamedCheck, Trusted, TrustedError
from leader_eval.types import CheckContext, CheckVerdict
from tests.conftest import MINIMAL_SUITE
from tests.support.scripted import ScriptedBackend, call

POLITE = call("send_message_to_chat", message="Hi team, please plant a garden with me.")


def _suite(tmp_path: Path, checks: str = "    polite: {}\n") -> Path:
    path = tmp_path / "mini.yaml"
    path.write_text(MINIMAL_SUITE + "checks:\n  python:\n" + checks)
    return path


def _line_of(path: Path, needle: str) -> int:
    text = path.read_text()
    return text[: text.index(needle)].count("\n") + 1


def _polite(ctx: CheckContext) -> CheckVerdict:
    return CheckVerdict("please" in ctx.message.lower(), "impolite", ctx.message)


def _trusted(**fns: object) -> Trusted:
    return Trusted(checks={n: NamedCheck(n, f, "test") for n, f in fns.items()})  # type: ignore[arg-type]


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return path


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("nosuchmodule_le:polite", "cannot import nosuchmodule_le: ModuleNotFoundError"),
        ("le_tone_checks:nothere", "le_tone_checks has no function nothere"),
        (None, "check function 'polite' is not defined"),
    ],
)
def test_a_missing_check_is_one_line_naming_the_suite_line_and_module_before_sampling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str | None, says: str
) -> None:
    _module(tmp_path, monkeypatch, "le_tone_checks", "def polite(ctx):\n    return True\n")
    suite = _suite(tmp_path)
    trusted = Trusted(checks={"polite": NamedCheck("polite", target, "--check-function")} if target else {})
    backend = ScriptedBackend([POLITE])
    with pytest.raises(TrustedError) as info:
        run(suite, RunOptions(out=tmp_path / "run", progress=False, trusted=trusted), backend=backend)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{suite}:{_line_of(suite, 'polite: {}')}:") and says in msg, msg
    if target:
        assert target.partition(":")[0] in msg and "polite" in msg
    assert backend.requests == 0 and not (tmp_path / "run").exists()  # nothing sampled, nothing written


def test_the_cli_refuses_an_undefined_check_with_exit_2_and_lint_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trusted_mod, "REGISTERED", Trusted())
    suite = _suite(tmp_path)
    assert main(["lint", str(suite), "--no-tokens"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, naming the suite's line and the check
    assert err[0].startswith(f"error: {suite}:{_line_of(suite, 'polite: {}')}: check function 'polite' is not defined")
    assert main(["run", str(suite), "--out", str(tmp_path / "r"), "--quiet"]) == 2
    assert "check function 'polite' is not defined" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    # defined in code (conftest.py's register_check): lint passes
    trusted_mod.register_check("polite", _polite)
    assert main(["lint", str(suite), "--no-tokens"]) == 0, capsys.readouterr().err


def test_a_check_error_fails_the_run_naming_the_check_module_and_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(tmp_path, monkeypatch, "le_broken_checks", "def tone(ctx):\n    return ctx.options['missing']\n")
    recorded = tmp_path / "rec"
    # record a plain run, then replay it through the CLI with a check that raises
    plain = tmp_path / "plain.yaml"
    plain.write_text(MINIMAL_SUITE)
    run(plain, RunOptions(out=recorded, progress=False, seed=3), backend=ScriptedBackend([POLITE]))
    suite = _suite(tmp_path, "    tone: {}\n")
    registered = Trusted(checks={"tone": NamedCheck("tone", "le_broken_checks:tone", "pyproject.toml")})
    monkeypatch.setattr(trusted_mod, "REGISTERED", registered)
    out = tmp_path / "replayed"
    status = main(["run", str(suite), "--model", f"replay:{recorded}", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert status == 1, err
    assert "4 of 4 samples errored (100.0%, 4 of them Python check errors" in err
    line = next(x for x in err.splitlines() if x.startswith("first Python check error"))
    assert "python:tone, le_broken_checks:tone, case hello, sample 0): raised KeyError: 'missing'" in line
    # show prints the stack down to the user's line
    assert main(["show", str(out), "--case", "hello"]) == 0
    shown = capsys.readouterr().out
    assert "x python:tone: check_error" in shown and 'le_broken_checks.py", line 2, in tone' in shown


def test_replay_reruns_the_checks_and_the_manifest_says_which_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = "def polite(ctx):\n    return 'please' in ctx.message\n"
    module = _module(tmp_path, monkeypatch, "le_polite_checks", source)
    suite = _suite(tmp_path)
    trusted = Trusted(checks={"polite": NamedCheck("polite", "le_polite_checks:polite", "pyproject.toml")})
    first = run(
        suite,
        RunOptions(out=tmp_path / "a", progress=False, seed=5, trusted=trusted),
        backend=ScriptedBackend([POLITE]),
    )
    assert first.summary["overall"]["metrics"]["score"]["value"] == 1.0
    want = "module-sha256:" + hashlib.sha256(module.read_bytes()).hexdigest()
    assert first.manifest["python_checks"] == {"polite": {"target": "le_polite_checks:polite", "version": want}}
    # the check changes; a replay of the same samples scores with the check of today
    _module(tmp_path, monkeypatch, "le_polite_checks", source.replace("'please'", "'sorry'"))
    again = run(suite, RunOptions(model=f"replay:{tmp_path / 'a'}", progress=False, trusted=trusted))
    assert again.summary["overall"]["metrics"]["score"]["value"] == 0.0
    assert again.summary["overall"]["reasons"] == {"python:polite": 4}
    manifest = json.loads((again.path / "manifest.json").read_text())
    recorded = manifest["python_checks"]["polite"]["version"]
    assert recorded.startswith("module-sha256:") and recorded != want
    assert manifest["python_checks_changed"] == {"polite": [want, recorded]}
    assert f"python check polite changed since the recorded run ({want} -> {recorded}): re-scored" in format_summary(
        again
    )


def test_a_check_registered_in_code_is_versioned_by_its_qualified_name_and_source(tmp_path: Path) -> None:
    result = run(
        _suite(tmp_path),
        RunOptions(out=tmp_path / "r", progress=False, seed=1, trusted=_trusted(polite=_polite)),
        backend=ScriptedBackend([POLITE]),
    )
    rec = result.manifest["python_checks"]["polite"]
    assert rec["target"] == f"test:{__name__}._polite"
    assert rec["version"] == "source-sha256:" + hashlib.sha256(inspect.getsource(_polite).encode()).hexdigest()


def test_merge_rescores_with_the_checks_in_force_and_refuses_a_missing_one_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leader_eval.runs.merge import merge_runs, shard_options

    monkeypatch.setattr(trusted_mod, "REGISTERED", _trusted(polite=_polite))
    suite = _suite(tmp_path)
    shards = []
    for spec in ("1/2", "2/2"):
        options = shard_options(RunOptions(progress=False, seed=4, out=tmp_path / spec.replace("/", "of")), spec, suite)
        shards.append(run(suite, options, backend=ScriptedBackend([POLITE])).path)
    merged = merge_runs(shards, tmp_path / "merged", suite=suite)
    assert merged.summary["overall"]["metrics"]["score"]["value"] == 1.0
    assert merged.manifest["python_checks"]["polite"]["target"] == f"test:{__name__}._polite"
    assert all(any(c["check"] == "python:polite" for c in s.checks) for s in merged.scores)
    # the check is gone from trusted configuration: refused before the merged directory is made
    monkeypatch.setattr(trusted_mod, "REGISTERED", Trusted())
    with pytest.raises(TrustedError, match="check function 'polite' is not defined"):
        merge_runs(shards, tmp_path / "merged2", suite=suite)
    assert not (tmp_path / "merged2").exists()
