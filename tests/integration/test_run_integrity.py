"""No false green from a run that measured nothing, and no silent loss or adoption of run data.

Each test drives the command line (``leader_eval.cli.app.main``, in process) the way a CI job would and
asserts the exit status and the files a user relies on.
"""

from __future__ import annotations

import functools
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from leader_eval.cli.app import main
from leader_eval.decide.golden import golden_path
from leader_eval.errors import RunDirError
from tests.support.runs import make_run, make_suite, write_run_dir


def _one_error(err: str) -> str:
    """The one ``error:`` line a refused command printed (llama.cpp may log its own lines too)."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error")]
    assert len(lines) == 1, err
    return lines[0]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released: connecting is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real OpenAI-compatible backend, with its retry back-off shortened so a refused
    connection fails in well under a second instead of ~10 s."""
    import leader_eval.sampling.backends.openai_compat as oc

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
    from leader_eval.decide.golden import build_golden

    path = golden_path(tmp_path / "golden", run.manifest["identity"]["suite"], "main")
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
        "missing_case",
        "missing_case_consistent",  # what main wrote from a replay of an interrupted run (1 of 2 cases)
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
    elif corrupt == "missing_case_consistent":
        golden["cases"].pop(sorted(golden["cases"])[-1])
        for m in golden["metrics"].values():
            m["n_cases"] = len(golden["cases"])
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
    # no golden to gate against fails, and the partial run is not written as one
    assert main(["gate", str(part), "--golden", str(golden_dir), "--update-golden"]) == 1
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


# ---------------------------------------------------------------------------------------------
# --out: never adopt, never share


def test_out_naming_a_file_is_refused(mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("keep me\n")
    assert main(["run", str(mini_suite), "--out", str(target), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names a file" in err
    assert target.read_text() == "keep me\n"


def test_out_into_a_foreign_non_empty_directory_is_refused(
    mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "other"
    out.mkdir()
    (out / "summary.json").write_text('{"mine": true}\n')
    (out / "samples.jsonl").write_text('{"slot": "hello#0", "text": "not from this run"}\n')
    assert main(["run", str(mini_suite), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "without a manifest.json" in err
    assert sorted(p.name for p in out.iterdir()) == ["samples.jsonl", "summary.json"]
    assert (out / "summary.json").read_text() == '{"mine": true}\n'


_HOLDER = """
import sys, time
from pathlib import Path
from leader_eval.store.run_store import run_dir_lock
with run_dir_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.mark.model
def test_second_run_into_a_locked_directory_exits_2_naming_the_holder(
    mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess
    import sys

    from leader_eval.store.run_store import LOCK, lock_holder

    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert lock_holder(out / LOCK) == holder.pid
        argv = ["run", str(mini_suite), "--out", str(out), "--samples", "1", "--max-tokens", "4", "--seed", "1", "-q"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"pid {holder.pid}" in err  # refused before the model loads
        assert not (out / "samples.jsonl").exists() and not (out / "manifest.json").exists()
    finally:
        holder.communicate("", timeout=30)
    # the holder is gone (the kernel dropped its lock): the same command now runs
    assert lock_holder(out / LOCK) is None
    assert main(argv) == 0
    assert len((out / "samples.jsonl").read_text().splitlines()) == 2


# ---------------------------------------------------------------------------------------------
# a full disk, a read-only directory, broken run files: one line, nothing half-written


@pytest.mark.model
def test_disk_full_while_appending_samples_is_one_line_and_marks_the_run(
    mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import leader_eval.store.run_store as store
    from leader_eval.runs.evaluate import read_run

    out = tmp_path / "run"
    argv = ["run", str(mini_suite), "--out", str(out), "--samples", "1", "--max-tokens", "4", "--seed", "1", "-q"]
    assert main([*argv, "--max-samples", "0"]) == 1  # creates the run, samples nothing
    capsys.readouterr()
    # every append goes to /dev/full: each write fails with ENOSPC, from the kernel
    monkeypatch.setattr(store, "_open_append", lambda path: open("/dev/full", "ab"))  # noqa: SIM115
    assert main(argv) == 2
    err = _one_error(capsys.readouterr().err)
    assert "samples.jsonl" in err and "No space left" in err
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"
    assert not list(out.glob("*.tmp")) and not list(out.glob(".*.tmp"))
    monkeypatch.undo()
    assert main(argv) == 0  # room again: the same command finishes the run
    assert read_run(out).manifest["status"] == "complete"


@pytest.mark.model
def test_disk_full_while_writing_results_leaves_no_tmp_and_no_running_status(
    mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno
    import os

    import leader_eval.store.run_store as store
    from leader_eval.runs.evaluate import read_run

    real_fsync = os.fsync

    def full_for_new_files(fd: int) -> None:
        # the disk fills after the last sample: writing results.jsonl (atomically, via a temp file) fails
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name.startswith(".results.jsonl."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    out = tmp_path / "run"
    argv = ["run", str(mini_suite), "--out", str(out), "--samples", "1", "--max-tokens", "4", "--seed", "1", "-q"]
    assert main([*argv, "--max-samples", "0"]) == 1  # the manifest exists before the disk fills
    capsys.readouterr()
    monkeypatch.setattr(store.os, "fsync", full_for_new_files)
    assert main(argv) == 2
    assert "No space left" in _one_error(capsys.readouterr().err)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert len((out / "samples.jsonl").read_text().splitlines()) == 2  # no finished sample lost
    assert json.loads((out / "manifest.json").read_text())["status"] == "failed"
    assert read_run(out).manifest["status"] == "failed"
    monkeypatch.setattr(store.os, "fsync", real_fsync)
    assert main(argv) == 0


def test_read_only_run_or_golden_directory_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno
    import os

    import leader_eval.store.run_store as store

    run_dir, _ = _good_run_dir(tmp_path)
    golden_dir = tmp_path / "golden"
    real_mkstemp, real_open = store.tempfile.mkstemp, store.os.open

    def read_only(*args: Any, **kw: Any) -> Any:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(store.tempfile, "mkstemp", read_only)
    assert main(["gate", str(run_dir), "--golden", str(golden_dir), "--update-golden"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Read-only file system" in err
    monkeypatch.setattr(store.tempfile, "mkstemp", real_mkstemp)

    def no_create(path: Any, flags: int, *a: Any) -> int:
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, flags, *a)

    monkeypatch.setattr(store.os, "open", no_create)
    lock = store.run_dir_lock(run_dir)
    with pytest.raises(RunDirError, match=r"cannot lock run directory .*Read-only file system"):
        lock.acquire()


@pytest.mark.parametrize(
    ("name", "content", "expect"),
    [
        ("manifest.json", b"\xff\xfe\x00", "not UTF-8"),
        ("manifest.json", b"[]", "not an object"),
        ("manifest.json", b'{"identity": {"suite": "s"}}', "identity.suite_hash"),
        ("manifest.json", b'{"identity": 3}', "no 'identity' object"),
        ("manifest.json", b'{\n  "identity": {,\n}', "manifest.json:2:"),
        ("summary.json", b"[1]", "expected a JSON object"),
        ("cases.json", b"{bad", "unreadable JSON"),
    ],
)
def test_unreadable_or_wrong_shape_run_files_are_one_line_exit_2(
    name: str, content: bytes, expect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = _good_run_dir(tmp_path)
    (run_dir / name).write_bytes(content)
    for argv in (["show", str(run_dir)], ["gate", str(run_dir), "--golden", str(tmp_path / "g")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expect in err and "Traceback" not in err


def test_a_non_gguf_file_as_gguf_model_is_one_line(
    mini_suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 this is a zip, not a GGUF")
    assert main(["run", str(mini_suite), "--model", f"gguf:{fake}", "--out", str(tmp_path / "run"), "-q"]) == 2
    assert "not a GGUF file" in _one_error(capsys.readouterr().err)
    assert not (tmp_path / "run").exists()


def test_a_running_status_without_a_live_holder_reads_as_interrupted(tmp_path: Path) -> None:
    from leader_eval.runs.evaluate import read_run
    from leader_eval.store.run_store import run_dir_lock

    run_dir, run = _good_run_dir(tmp_path)
    manifest = {**run.manifest, "status": "running"}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert read_run(run_dir).manifest["status"] == "interrupted"  # its process died without a word
    with run_dir_lock(run_dir):  # a live run holds its directory: it is running
        assert read_run(run_dir).manifest["status"] == "running"


# ---------------------------------------------------------------------------------------------
# the rule as a library function (the pytest plugin's verdicts use it)


def test_error_verdict_and_case_verdict_never_pass_an_error() -> None:
    from leader_eval.scoring.error_rule import case_verdict, error_verdict

    def overall(n: int, scored: int, errors: int, overflow: int = 0) -> dict[str, Any]:
        return {"overall": {"n_samples": n, "n_scored": scored, "n_errors": errors, "n_context_overflow": overflow}}

    assert not error_verdict(overall(10, 10, 0)).failed
    assert error_verdict(overall(10, 9, 1)).failed  # default: any error fails
    assert not error_verdict(overall(10, 9, 1), 0.1).failed  # allowed
    assert error_verdict(overall(10, 8, 2), 0.1).failed
    assert error_verdict(overall(4, 0, 4), 1.0).failed  # nothing measured: never green
    assert error_verdict(overall(0, 0, 0), 1.0).failed
    assert error_verdict(overall(10, 8, 0, overflow=2)).failed  # an overflow is an error in a run ...
    assert not error_verdict(overall(10, 8, 0, overflow=2), overflow_is_error=False).failed  # ... not in a sweep
    with pytest.raises(ValueError):
        error_verdict(overall(1, 1, 0), float("nan"))

    def case(scored: int, passed: int, errors: int, overflow: int = 0) -> dict[str, Any]:
        return {"n_scored": scored, "n_passed": passed, "n_errors": errors, "n_context_overflow": overflow}

    assert case_verdict(case(2, 2, 0)) == "pass"
    assert case_verdict(case(0, 0, 2)) == "error"  # only errored samples: never a pass
    assert case_verdict(case(1, 1, 1)) == "error"
    assert case_verdict(case(2, 1, 1)) == "fail"
    assert case_verdict(case(0, 0, 0, overflow=2)) == "error"


def test_unknown_protocol_is_refused_before_any_request(
    mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import leader_eval.sampling.backends as backends
    from leader_eval.errors import LeaderEvalError
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import RunOptions

    def no_backend(*a: Any, **k: Any) -> Any:
        raise AssertionError("a backend was built before the protocol was checked")

    monkeypatch.setattr(backends, "resolve_backend", no_backend)
    monkeypatch.setattr("leader_eval.runs.evaluate.resolve_backend", no_backend)
    with pytest.raises(LeaderEvalError, match="unknown protocol 'bogus'"):
        run(mini_suite, RunOptions(model="openai:http://127.0.0.1:9/v1#m", protocol="bogus", out=tmp_path / "r"))
    bad_suite = tmp_path / "bogus.yaml"
    bad_suite.write_text(mini_suite.read_text().replace("protocol: json", "protocol: bogus"))
    with pytest.raises(LeaderEvalError, match="bogus"):
        run(bad_suite, RunOptions(model="openai:http://127.0.0.1:9/v1#m", out=tmp_path / "r"))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "bad",
    [{"steps": ["abc"]}, {"steps": [4000, -1]}, {"steps": [1.5]}, {"tokens": 0}, {"samples": 0},
     {"temperature": float("nan")}, {"max_tokens": 0}, {"context_length": -1}],
    ids=lambda b: ",".join(f"{k}={v}" for k, v in b.items()),
)  # fmt: skip
def test_stress_library_checks_values_before_a_model_loads(
    bad: dict[str, Any], mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leader_eval.errors import LeaderEvalError
    from leader_eval.studies.stress import stress

    def no_backend(*a: Any, **k: Any) -> Any:
        raise AssertionError("a model was loaded before the values were checked")

    monkeypatch.setattr("leader_eval.sampling.backends.resolve_backend", no_backend)
    with pytest.raises(LeaderEvalError):
        stress(mini_suite, **bad)


def test_a_run_directory_is_not_resumed_with_other_weights_of_the_same_file_name(tmp_path: Path) -> None:
    from leader_eval.store.out_dir import open_run_dir

    manifest = {
        "identity": {
            "suite": "s",
            "suite_hash": "sha256:0",
            "model_id": "gguf:model.gguf",
            "protocol": "json",
            "run_seed": 1,
            "cases": {},
        },
        "model": {"cache_identity": "gguf-sha256:aaaa"},
        "status": "running",
    }
    out = tmp_path / "run"
    open_run_dir(out, manifest)
    open_run_dir(out, manifest)  # the same weights resume
    other = {**manifest, "model": {"cache_identity": "gguf-sha256:bbbb"}}
    with pytest.raises(RunDirError, match="other model weights"):
        open_run_dir(out, other)
