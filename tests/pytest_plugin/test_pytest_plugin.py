"""The pytest plugin: suites as tests, the gate as the exit status, xdist-safe aggregation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, local_backend) -> tuple[Path, Path]:
    """A suite and a real recorded run of it on the embedded model (3 cases x 3 samples)."""
    from tests.conftest import MINIMAL_SUITE

    d = tmp_path_factory.mktemp("rec")
    suite = d / "mini.yaml"
    suite.write_text(
        MINIMAL_SUITE.replace("samples: 2", "samples: 3")
        + """\
  - id: third
    tags: [goal]
    vars: {current_goal: fix the roof, request: "Ask Bo to bring a ladder."}
    expect:
      calls:
        - tool: send_message_to_chat
          args:
            message: {contains: Bo}
"""
    )
    out = d / "run"
    run(suite, RunOptions(seed=9, out=out, progress=False), backend=local_backend)
    return suite, out


def _session_summary(run_root: Path) -> dict:
    found = list(run_root.glob("*/session_summary.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def _metrics(summary: dict) -> dict:
    return {
        k: (v["value"], v["low"], v["high"], v["n_samples"], v["n_cases"])
        for k, v in summary["overall"]["metrics"].items()
    }


def test_serial_and_xdist_give_identical_metrics(pytester: pytest.Pytester, recorded) -> None:
    suite, rec = recorded
    pytester.makefile(".yaml", mini=suite.read_text())
    expected = json.loads((rec / "summary.json").read_text())
    first = ["mini.yaml", f"--le-model=replay:{rec}", "--le-allow-missing-golden", "-p", "no:cacheprovider"]
    serial = pytester.runpytest_subprocess(*first, "--le-run-dir=serial")
    parallel = pytester.runpytest_subprocess(*first, "--le-run-dir=par", "-n", "2")
    for result in (serial, parallel):
        result.stdout.fnmatch_lines(["*leader-eval gate*"])
        assert result.ret == 0  # soft mode, a first run allowed without a golden: a warning
    s_serial = _session_summary(pytester.path / "serial")
    s_par = _session_summary(pytester.path / "par")
    assert _metrics(s_serial) == _metrics(s_par) == _metrics(expected)


def test_each_case_is_sampled_exactly_once_under_xdist(pytester: pytest.Pytester, recorded) -> None:
    suite, rec = recorded
    pytester.makefile(".yaml", mini=suite.read_text())
    result = pytester.runpytest_subprocess(
        "mini.yaml", f"--le-model=replay:{rec}", "--le-run-dir=par", "-n", "2", "--le-allow-missing-golden"
    )
    assert result.ret == 0
    (run_dir,) = list((pytester.path / "par").iterdir())
    slots = [json.loads(x)["slot"] for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert sorted(slots) == sorted(f"{c}#{i}" for c in ("hello", "goal", "third") for i in range(3))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    stats = manifest["sampling_stats"]
    # one pass, not one per worker; a replay's slots count as replayed, never as sampled
    assert (stats["replayed"], stats["sampled"]) == (9, 0)


def test_failing_case_shows_checks_and_raw_repr(pytester: pytest.Pytester, recorded) -> None:
    suite, rec = recorded
    # demand a tool the model never calls: every sample fails with a named reason
    text = suite.read_text().replace("message: {contains: Bo}", "message: {contains: zzzz-never}")
    pytester.makefile(".yaml", mini=text)
    replay = rec.parent / "run"
    result = pytester.runpytest_subprocess(
        "mini.yaml", f"--le-model=replay:{replay}", "--le-run-dir=r", "--le-eval-mode=strict"
    )
    # the edited suite has another content hash but the same prompts: replay still serves them
    result.stdout.fnmatch_lines(["*_ third _*", "*raw: '*", "*FAILED mini.yaml::third*"])
    assert result.ret == 1
    soft = pytester.runpytest_subprocess(
        "mini.yaml", f"--le-model=replay:{replay}", "--le-run-dir=r2", "-rx", "--le-allow-missing-golden"
    )
    # soft mode: the failing case is an xfail with its evidence, never FAILED while the session passes
    soft.stdout.fnmatch_lines(["*mini.yaml::leader-eval-gate*", "*XFAIL*mini.yaml::third*samples failed*soft mode*"])
    assert "FAILED" not in soft.stdout.str()
    assert soft.ret == 0


def test_gate_against_golden(pytester: pytest.Pytester, recorded) -> None:
    suite, rec = recorded
    pytester.makefile(".yaml", mini=suite.read_text())
    args = ["mini.yaml", f"--le-model=replay:{rec}", "--le-golden-dir=golden"]
    made = pytester.runpytest_subprocess(*args, "--le-run-dir=a", "--le-update-golden")
    assert made.ret == 0
    (golden,) = list((pytester.path / "golden").rglob("*.json"))
    data = json.loads(golden.read_text())
    assert list(data) == sorted(data)
    same = pytester.runpytest_subprocess(*args, "--le-run-dir=b")
    assert same.ret == 0
    # a tiny change within noise does not fail
    data["metrics"]["score"]["value"] = min(1.0, data["metrics"]["score"]["value"] + 0.01)
    golden.write_text(json.dumps(data, indent=2, sort_keys=True))
    assert pytester.runpytest_subprocess(*args, "--le-run-dir=c").ret == 0
    # a golden demanding a clearly higher score fails with the table and exit status 1
    data["metrics"]["score"]["value"] = 1.0
    data["metrics"]["score"]["tolerance"] = 0.0
    golden.write_text(json.dumps(data, indent=2, sort_keys=True))
    if json.loads((rec / "summary.json").read_text())["overall"]["metrics"]["score"]["high"] >= 1.0:
        pytest.skip("the recorded run's score interval reaches 1.0")  # pragma: no cover
    bad = pytester.runpytest_subprocess(*args, "--le-run-dir=d")
    bad.stdout.fnmatch_lines(["*metric*golden*now*", "*score*fail*"])
    assert bad.ret == 1


def test_update_golden_after_sigint_leaves_golden_byte_identical(tmp_path: Path, recorded) -> None:
    suite, _ = recorded
    golden_dir = tmp_path / "golden"
    (golden_dir / "mini").mkdir(parents=True)
    golden = golden_dir / "mini" / "main.json"
    golden.write_text('{"metrics": {}, "suite": "mini", "marker": "untouched"}\n')
    before = golden.read_bytes()
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(suite),
        "--le-model=local:smollm2",
        "--le-samples=30",
        "--le-seed=3",
        f"--le-golden-dir={golden_dir}",
        f"--le-run-dir={tmp_path / 'runs'}",
        "--le-update-golden",
        "-p",
        "no:cacheprovider",
    ]
    # An xdist worker ignores SIGINT and a child inherits an ignored signal across exec, in which
    # case Python never installs its KeyboardInterrupt handler: give the child the default back.
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if any(p.stat().st_size > 0 for p in (tmp_path / "runs").rglob("samples.jsonl")):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, out.decode()
    # the interrupt landed mid-sampling, so this run really was incomplete
    (samples,) = list((tmp_path / "runs").rglob("samples.jsonl"))
    assert 0 < len(samples.read_bytes().splitlines()) < 90
    assert golden.read_bytes() == before


def test_python_written_case_feeds_the_same_gate(pytester: pytest.Pytester, recorded) -> None:
    suite, rec = recorded
    pytester.makefile(".yaml", mini=suite.read_text())
    pytester.makepyfile(
        test_py_cases=f"""
        def test_goal_case(leader_eval, request):
            record = leader_eval.evaluate(request, {str(pytester.path / "mini.yaml")!r}, "goal")
            assert record["case_id"] == "goal" and record["n_scored"] == 3
        """
    )
    result = pytester.runpytest_subprocess(
        "test_py_cases.py",
        f"--le-model=replay:{rec}",
        "--le-run-dir=py",
        "--le-allow-missing-golden",
        "-p",
        "no:cacheprovider",
    )
    result.stdout.fnmatch_lines(["*leader-eval gate*", "*suite mini*"])
    assert result.ret == 0
    summary = _session_summary(pytester.path / "py")
    assert summary["overall"]["n_cases"] == 1 and summary["overall"]["n_scored"] == 3


def test_a_crashed_worker_makes_the_run_incomplete_never_a_pass(pytester: pytest.Pytester, recorded) -> None:
    suite, rec = recorded
    pytester.makefile(".yaml", mini=suite.read_text())
    # a worker dies while scoring one case (as an out-of-memory kill would end it)
    pytester.makeconftest(
        """
        import os
        def pytest_runtest_call(item):
            if item.name == "goal":
                os._exit(1)
        """
    )
    result = pytester.runpytest_subprocess("mini.yaml", f"--le-model=replay:{rec}", "--le-run-dir=r", "-n", "2")
    result.stdout.fnmatch_lines(["*crashed*", "*run incomplete*goal*"])
    assert result.ret != 0


def _gate_table(out: str) -> list[str]:
    """The gate's table rows and headline (run paths differ between sessions; the numbers must not)."""
    return [line for line in out.splitlines() if line.startswith(("gate ", "score ^", "strict_format_rate ^"))]


def test_a_tag_subset_is_gated_paired_against_the_same_golden_cases(pytester: pytest.Pytester, recorded) -> None:
    suite, rec = recorded
    pytester.makefile(".yaml", mini=suite.read_text())
    args = ["mini.yaml", f"--le-model=replay:{rec}", "--le-golden-dir=golden"]
    assert pytester.runpytest_subprocess(*args, "--le-run-dir=a", "--le-update-golden").ret == 0
    golden_before = next((pytester.path / "golden").rglob("*.json")).read_bytes()
    # two of three cases carry the tag `goal`: the gate pairs them with the golden's same two cases
    sub = pytester.runpytest_subprocess(*args, "--le-run-dir=b", "-m", "goal", "--le-update-golden")
    out = sub.stdout.str()
    assert "subset: 2 of 3 cases" in out, out
    assert "gate PASS" in out and "run covers" not in out
    score_row = next(line for line in out.splitlines() if line.startswith("score ^"))
    assert "unpaired" not in score_row  # a p-value: the subset is paired case by case with the golden
    assert "golden not updated: not every case of the suite ran" in out
    assert sub.ret == 0
    assert next((pytester.path / "golden").rglob("*.json")).read_bytes() == golden_before
    # --le-case selects a subset the same way
    one = pytester.runpytest_subprocess(*args, "--le-run-dir=c", "--le-case=hello,goal")
    assert "subset: 2 of 3 cases" in one.stdout.str() and one.ret == 0
    # under xdist every way of selecting gates exactly as the serial session does: paired, same numbers
    # (it failed "run covers 2 of the golden's 3 cases: gate the full suite": the controller learned
    # the suite's case list only after a worker's record had made the suite's entry)
    serial = _gate_table(out)
    for i, select in enumerate((["-m", "goal"], ["-k", "goal or third"], ["--le-case=goal,third"])):
        par = pytester.runpytest_subprocess(*args, f"--le-run-dir=x{i}", "-n", "2", *select)
        text = par.stdout.str()
        assert par.ret == 0 and "subset: 2 of 3 cases" in text and "run covers" not in text, text
        assert _gate_table(text) == serial, select


def test_a_floor_holds_the_full_suite_and_not_a_subset(pytester: pytest.Pytester, recorded) -> None:
    """Issue 19: a floor the replayed model misses fails the full suite's gate, on the gate line; a
    subset (-m) is not held to it (a floor is a contract on the whole suite's value). Adding the
    floor leaves the suite's content hash, so the golden stays valid."""
    suite, rec = recorded
    text = suite.read_text()
    (pytester.path / "mini.yaml").write_text(text)  # as written (makefile strips the final newline)
    args = ["mini.yaml", f"--le-model=replay:{rec}", "--le-golden-dir=golden"]
    assert pytester.runpytest_subprocess(*args, "--le-run-dir=a", "--le-update-golden").ret == 0
    (pytester.path / "mini.yaml").write_text(text + "gate:\n  min: {score: 1.0}\n  judge: point\n")
    full = pytester.runpytest_subprocess(*args, "--le-run-dir=b")
    out = full.stdout.str()
    assert full.ret == 1 and "stale" not in out, out
    assert "beyond the suite's limit: score (" in out and "< 1)" in out
    sub = pytester.runpytest_subprocess(*args, "--le-run-dir=c", "-m", "goal")
    out = sub.stdout.str()
    assert "floors and ceilings apply to the full suite only" in out and sub.ret == 0, out


def test_a_golden_short_of_the_runs_cases_is_refused_as_the_cli_refuses_it(pytester: pytest.Pytester, recorded) -> None:
    """Review finding (issue 19): the plugin checked only the golden's suite, not that it covers the
    run's cases (the CLI's ``check_golden_covers``); a golden trimmed of a case paired only the
    common cases, so that case could regress unseen."""
    suite, rec = recorded
    (pytester.path / "mini.yaml").write_text(suite.read_text())
    args = ["mini.yaml", f"--le-model=replay:{rec}", "--le-golden-dir=golden"]
    assert pytester.runpytest_subprocess(*args, "--le-run-dir=a", "--le-update-golden").ret == 0
    path = pytester.path / "golden" / "mini" / "main.json"
    golden = json.loads(path.read_text())
    del golden["cases"]["third"]
    for m in golden["metrics"].values():
        m.pop("n_cases", None)  # hand-trimmed: nothing else betrays the missing case
    path.write_text(json.dumps(golden, indent=2))
    gated = pytester.runpytest_subprocess(*args, "--le-run-dir=b")
    out = gated.stdout.str() + gated.stderr.str()
    assert gated.ret != 0, out
    assert "no per-case rates for 1 case(s) of this suite (third)" in out, out
