"""No false green from a run that measured nothing, and no silent loss or adoption of run data.

Each test drives the command line (``leader_eval.cli.main``, in process) the way a CI job would and
asserts the exit status and the files a user relies on.
"""

from __future__ import annotations

import functools
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from leader_eval.cli import main
from leader_eval.golden import golden_path
from tests.test_golden import make_run, make_suite, write_run_dir


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released: connecting is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real OpenAI-compatible backend, with its retry back-off shortened so a refused
    connection fails in well under a second instead of ~10 s."""
    import leader_eval.backends.openai_compat as oc

    monkeypatch.setattr(oc, "backend_from_spec", functools.partial(oc.backend_from_spec, retry_base_s=0.001))


def _server_down_run(suite: Path, out: Path) -> int:
    model = f"openai:http://127.0.0.1:{_closed_port()}/v1#m"
    return main(["run", str(suite), "--model", model, "--api-mode", "chat", "--out", str(out), "--seed", "1", "-q"])


def test_server_down_run_fails_and_cannot_become_the_golden(
    fast_retries: None, mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, golden_dir = tmp_path / "run", tmp_path / "golden"
    assert _server_down_run(mini_suite, out) == 1
    err = capsys.readouterr().err
    assert "error rule" in err and "4 errored" in err

    # the gate fails the same run, and --update-golden refuses it: nothing is written
    assert main(["gate", str(out), "--golden", str(golden_dir), "--update-golden"]) == 1
    printed = capsys.readouterr().out
    assert "golden not updated" in printed and "errored" in printed
    assert not golden_dir.exists() or not any(golden_dir.rglob("*.json"))
    # a missing golden is only a warning, but errors are not
    assert main(["gate", str(out), "--golden", str(golden_dir)]) == 1


def test_error_rate_within_max_error_rate_is_allowed(
    fast_retries: None, mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    # every sample errored: even --max-error-rate 1 cannot make a run that measured nothing pass
    model = f"openai:http://127.0.0.1:{_closed_port()}/v1#m"
    argv = ["run", str(mini_suite), "--model", model, "--api-mode", "chat", "--out", str(out), "--seed", "1", "-q"]
    assert main([*argv, "--max-error-rate", "1"]) == 1
    assert "none of 4 samples was measured" in capsys.readouterr().err


def _good_run_dir(tmp_path: Path) -> tuple[Path, Any]:
    suite = make_suite(tmp_path, 6)
    run = make_run(suite, 0.6, seed=3)
    return write_run_dir(run, tmp_path / "good"), run


def _golden_of(tmp_path: Path, run: Any) -> tuple[Path, dict[str, Any]]:
    from leader_eval.golden import build_golden

    path = golden_path(tmp_path / "golden", run.manifest["identity"]["suite"], "v1")
    return path, build_golden(run)


def _write_raw(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "corrupt",
    [
        "nan_value",  # what main wrote from a server-down run
        "null_value",
        "empty_cases",
        "missing_case",  # what main wrote from a replay of an interrupted run
        "nan_case_rate",
        "inf_tolerance",
        "string_value",
        "no_metrics",
    ],
)
def test_gate_refuses_a_golden_that_could_pass_anything(
    corrupt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, run = _good_run_dir(tmp_path)
    path, golden = _golden_of(tmp_path, run)
    if corrupt == "nan_value":
        golden["metrics"]["score"]["value"] = float("nan")
    elif corrupt == "null_value":
        golden["metrics"]["tool_accuracy"]["value"] = None
    elif corrupt == "empty_cases":
        golden["cases"] = {}
    elif corrupt == "missing_case":
        golden["cases"].pop(sorted(golden["cases"])[-1])
    elif corrupt == "nan_case_rate":
        next(iter(golden["cases"].values()))["pass_rate"] = float("nan")
    elif corrupt == "inf_tolerance":
        golden["metrics"]["score"]["tolerance"] = float("inf")
    elif corrupt == "string_value":
        golden["metrics"]["score"]["value"] = "0.5"
    elif corrupt == "no_metrics":
        golden["metrics"] = {}
    _write_raw(path, json.dumps(golden, indent=2, sort_keys=True))  # json writes NaN/Infinity as tokens
    assert main(["gate", str(run_dir), "--golden", str(tmp_path / "golden")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "refused golden file" in err
    # and the honest golden of the same run passes it
    _write_raw(path, json.dumps(_golden_of(tmp_path, run)[1], indent=2, sort_keys=True))
    assert main(["gate", str(run_dir), "--golden", str(tmp_path / "golden")]) == 0


@pytest.mark.parametrize("content", [b"\xff\xfe{\x00}\x00", b"[1, 2]", b'{"metrics": []}', b"{"])
def test_unreadable_or_wrong_shape_golden_is_one_line_exit_2(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, run = _good_run_dir(tmp_path)
    path, _ = _golden_of(tmp_path, run)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert main(["gate", str(run_dir), "--golden", str(tmp_path / "golden")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err


@pytest.mark.model
def test_replay_of_an_interrupted_run_cannot_become_the_golden(
    mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, golden_dir = tmp_path / "run", tmp_path / "golden"
    common = ["--samples", "1", "--max-tokens", "8", "--seed", "2", "-q"]
    assert main(["run", str(mini_suite), "--out", str(out), *common]) == 0
    # interrupt it after the first case: keep only that case's samples, status running
    lines = (out / "samples.jsonl").read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if json.loads(ln)["case_id"] == "hello"]
    assert 0 < len(kept) < len(lines)
    (out / "samples.jsonl").write_text("".join(kept))
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))

    replay = tmp_path / "replay"
    rc = main(["run", str(mini_suite), "--model", f"replay:{out}", "--out", str(replay), "-q"])
    assert rc != 0
    capsys.readouterr()
    if replay.exists():
        assert main(["gate", str(replay), "--golden", str(golden_dir), "--update-golden"]) != 0
    # replaying only what was recorded is a partial run: never a golden either
    part = tmp_path / "replay_part"
    assert main(["run", str(mini_suite), "--model", f"replay:{out}", "--case", "hello", "--out", str(part), "-q"]) == 0
    assert main(["gate", str(part), "--golden", str(golden_dir), "--update-golden"]) == 0  # missing golden: warning
    assert "covers 1 of 2 cases" in capsys.readouterr().out
    assert not golden_dir.exists() or not any(golden_dir.rglob("*.json"))


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One real run of the minimal suite on the embedded model (2 samples per case, temperature 0.7)."""
    from tests.conftest import MINIMAL_SUITE

    root = tmp_path_factory.mktemp("recorded")
    suite = root / "mini.yaml"
    suite.write_text(MINIMAL_SUITE)
    out = root / "run"
    assert main(["run", str(suite), "--out", str(out), "--max-tokens", "8", "--seed", "5", "--no-cache", "-q"]) == 0
    return suite, out


@pytest.mark.model
@pytest.mark.parametrize(
    "override",
    [
        ["--temperature", "0"],
        ["--max-tokens", "1"],
        ["--samples", "5"],
        ["--seed", "99"],
        ["--context-length", "100"],
    ],
    ids=lambda o: o[0],
)
def test_replay_refuses_overrides_that_change_what_was_sampled(
    override: list[str], recorded_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, recorded = recorded_run
    out = tmp_path / "replay"
    rc = main(["run", str(suite), "--model", f"replay:{recorded}", "--out", str(out), "-q", *override])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and override[0] in err and "replay" in err
    assert not out.exists()


@pytest.mark.model
def test_replay_takes_the_recorded_sampling_and_allows_a_subset(
    recorded_run: tuple[Path, Path], tmp_path: Path
) -> None:
    suite, recorded = recorded_run
    out = tmp_path / "replay"
    # the recorded values restated, and fewer samples than recorded, change nothing that was sampled
    argv = ["--temperature", "0.7", "--max-tokens", "8", "--seed", "5", "--samples", "1"]
    assert main(["run", str(suite), "--model", f"replay:{recorded}", "--out", str(out), "-q", *argv]) == 0
    old = json.loads((recorded / "manifest.json").read_text())["identity"]["cases"]
    new = json.loads((out / "manifest.json").read_text())["identity"]["cases"]
    assert {c: v["params"] for c, v in new.items()} == {c: v["params"] for c, v in old.items()}
    assert {c: v["samples"] for c, v in new.items()} == {c: 1 for c in old}
    recorded_text = {(json.loads(ln)["case_id"], json.loads(ln)["index"]): json.loads(ln)["text"]
                     for ln in (recorded / "samples.jsonl").read_text().splitlines()}  # fmt: skip
    for ln in (out / "samples.jsonl").read_text().splitlines():
        rec = json.loads(ln)
        assert rec["outcome"] == "ok" and rec["text"] == recorded_text[(rec["case_id"], rec["index"])]
