"""``--le-shard I/N``: N pytest sessions sample the shards of one run and never gate; ``leader-eval
merge`` then ``leader-eval gate`` decide once, exactly as for one unsharded run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.runs.merge import shard_case_ids

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "leader_core.yaml"
DATA = ROOT / "tests" / "data" / "v0_1_0"
PARSE_ERROR = "expected I/N with 1 <= I <= N, e.g. 2/3"


@pytest.fixture(scope="module")
def recorded_core(tmp_path_factory: pytest.TempPathFactory, local_backend) -> Path:  # type: ignore[no-untyped-def]
    """One real run of the flagship suite on the embedded model (1 short sample per case, seed 5)."""
    from leader_eval.runs.evaluate import run
    from leader_eval.sampling.runner import RunOptions

    out = tmp_path_factory.mktemp("core") / "rec"
    options = RunOptions(seed=5, samples=1, max_tokens=24, out=out, progress=False, cache=False)
    run(SUITE, options, backend=local_backend)
    return out


def _raise_golden(path: Path) -> None:
    """Make the golden perfect on every higher-is-better metric, so the recorded run regresses."""
    golden = json.loads(path.read_text())
    higher = {k for k, m in golden["metrics"].items() if m["direction"] == "higher"}
    for m in golden["metrics"].values():
        if m["direction"] == "higher":
            m.update(value=1.0, low=1.0, high=1.0)
    for case in golden["cases"].values():
        for key in case:
            if key in higher or key == "pass_rate":
                case[key] = 1.0
    path.write_text(json.dumps(golden))


def _without(text: str, *names: str) -> str:
    for i, name in enumerate(names):
        text = text.replace(name, f"<RUN{i}>")
    return text


@pytest.mark.model
def test_three_plugin_shards_merge_and_gate_like_one_cli_run(
    pytester: pytest.Pytester, recorded_core: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evals = pytester.path / "evals"
    evals.mkdir()
    shutil.copy(SUITE, evals / SUITE.name)
    shutil.copytree(SUITE.parent / "templates", evals / "templates")
    suite = evals / SUITE.name
    replay = f"replay:{recorded_core}"
    # one unsharded CLI run, and a golden it fails against
    full = pytester.path / "full"
    assert main(["run", str(suite), "--model", replay, "-q", "--out", str(full)]) == 0
    golden = pytester.path / "golden"
    assert main(["gate", str(full), "--golden", str(golden), "--update-golden"]) == 0
    _raise_golden(golden / "leader_core" / "main.json")
    capsys.readouterr()
    assert main(["gate", str(full), "--golden", str(golden)]) == 1
    full_gate = capsys.readouterr().out
    assert "gate FAIL" in full_gate

    ids = [c["case_id"] for c in json.loads((full / "cases.json").read_text())]
    failing = {c["case_id"] for c in json.loads((full / "cases.json").read_text()) if c["n_passed"] < c["n_scored"]}
    common = [str(suite), f"--le-model={replay}", "--le-seed=5", "-p", "no:cacheprovider", "-rs"]
    # shard 1 soft, even with --le-golden-strict; shard 2 under xdist; shard 3 strict
    extras = {1: ["--le-golden-strict"], 2: ["-n", "2"], 3: ["--le-eval-mode=strict"]}
    shard_dirs = []
    for i, extra in extras.items():
        res = pytester.runpytest_subprocess(*common, f"--le-shard={i}/3", *extra)
        out = res.stdout.str()
        mine = shard_case_ids(ids, i, 3)
        (run_dir,) = (pytester.path / "runs").glob(f"*__shard{i}of3")
        shard_dirs.append(run_dir)
        assert f"leader_core: shard {i}/3: not gated; merge the shards and run `leader-eval gate`" in out, out
        assert f"this shard's run: {run_dir.relative_to(pytester.path)}" in out
        assert "gate FAIL" not in out and "FAILED evals/leader_core.yaml::leader-eval-gate" not in out
        outcomes = res.parseoutcomes()
        assert outcomes["skipped"] == 1  # the gate item: not gated
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert (manifest["shard"]["index"], manifest["shard"]["count"]) == (i, 3)
        assert sorted(manifest["identity"]["cases"]) == sorted(mine)
        if i == 1:
            assert outcomes["deselected"] == len(ids) - len(mine)
        if i == 3:  # a shard's own failing cases still fail in strict mode; only the gate is not run
            assert res.ret == 1 and outcomes.get("failed", 0) == len(failing & set(mine)) > 0, out
        else:
            assert res.ret == 0, out

    capsys.readouterr()
    merged = pytester.path / "merged"
    assert main(["merge", *map(str, shard_dirs), "--out", str(merged)]) == 0
    # the merged run is not a plugin scratch run that a later session's keep-runs may prune
    assert "created_by" not in json.loads((merged / "manifest.json").read_text())
    full_summary, merged_summary = ((d / "summary.json").read_text() for d in (full, merged))
    ids_ = [json.dumps(json.loads(t)["run_id"]) for t in (full_summary, merged_summary)]
    assert merged_summary.replace(ids_[1], '"RUN"') == full_summary.replace(ids_[0], '"RUN"')
    capsys.readouterr()
    assert main(["gate", str(merged), "--golden", str(golden)]) == 1
    merged_gate = capsys.readouterr().out
    names = [str(full), str(merged), *(json.loads(t)["run_id"] for t in (full_summary, merged_summary))]
    assert _without(merged_gate, *names) == _without(full_gate, *names)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        *(
            (["--le-seed=1", f"--le-shard={bad}"], f"--le-shard {bad!r}: {PARSE_ERROR}")
            for bad in ("0/3", "4/3", "a/b", "1/0")
        ),
        (["--le-shard=1/3"], "--le-shard needs an explicit --le-seed"),
        (["--le-shard=1/3", "--le-seed=1", "--le-update-golden"], "--le-shard cannot --le-update-golden"),
        (["--le-shard=1/3", "--le-seed=1", "--le-case=greets_team"], "--le-shard slices the whole suite"),
    ],
)
def test_bad_shard_options_are_one_line_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    res = pytester.runpytest("mini.yaml", f"--le-model=replay:{DATA / 'run'}", *args, "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in res.stderr.lines if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: " + message), res.stderr.str()
    assert not (pytester.path / "runs").exists() and not (pytester.path / "golden").exists()


def test_a_shard_with_no_case_of_a_suite_is_a_collection_error(pytester: pytest.Pytester) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")  # 2 cases: shard 3/3 is empty
    res = pytester.runpytest("mini.yaml", f"--le-model=replay:{DATA / 'run'}", "--le-seed=1", "--le-shard=3/3")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.stdout.fnmatch_lines(["*mini.yaml:1: --le-shard 3/3: the suite has 2 cases, so shard 3 would be empty*"])
    assert not (pytester.path / "runs").exists()


def test_a_shard_minus_a_selection_fails_its_cases_instead_of_leaving_a_gap(pytester: pytest.Pytester) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    args = ["mini.yaml", f"--le-model=replay:{DATA / 'run'}", "--le-samples=1", "--le-seed=1", "--le-shard=1/1"]
    res = pytester.runpytest(*args, "-k", "greets_team", "-p", "no:cacheprovider")
    assert res.ret == 1
    res.stdout.fnmatch_lines(["*mini.yaml: --le-shard 1/1 samples the shard's 2 cases, but this session selected 1*"])
    res.stdout.fnmatch_lines(["FAILED mini.yaml::greets_team*", "FAILED mini.yaml::leader-eval-gate - shard 1/1 FAIL*"])
    assert not (pytester.path / "runs").exists()


def test_python_written_cases_run_only_in_their_shard(pytester: pytest.Pytester) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")  # cases greets_team (1/2), states_goal (2/2)
    pytester.makepyfile(
        test_cases="""
        import pytest

        @pytest.mark.parametrize("case_id", ["greets_team", "states_goal"])
        def test_case(leader_eval, request, case_id):
            assert leader_eval.evaluate(request, "mini.yaml", case_id)["case_id"] == case_id
        """
    )
    args = [f"--le-model=replay:{DATA / 'run'}", "--le-samples=1", "--le-seed=1", "-p", "no:cacheprovider", "-rs"]
    res = pytester.runpytest(*args, "--le-shard=2/2")
    res.stdout.fnmatch_lines(["*case greets_team of minimal belongs to another shard than 2/2*"])
    assert res.parseoutcomes()["passed"] == 1 and res.parseoutcomes()["skipped"] == 2  # greets_team, the gate item
