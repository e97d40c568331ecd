"""A model matrix in pytest: ``--le-model`` repeated (or the ini's lines) samples every suite once
per model with one seed, names each item ``CASE[label]`` and each gate ``leader-eval-gate[label]``
(the same on every xdist worker), gates each model against the one baseline with Holm across the
models' gates, and writes one step-summary row per model. Replays of recorded runs: no model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from leader_eval.decide.golden import update_golden
from leader_eval.runs.evaluate import read_run, run
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.suite.load import load_suite
from tests.support.scripted import Canned

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
GOOD = '{"tool": "send_message_to_chat", "arguments": {"message": "Hi team, we build a treehouse today!"}}'
N_CASES = 12


def _suite_text() -> str:
    """The example minimal suite with twelve cases that ask for a message (enough for a paired test)."""
    text = (ROOT / "suites" / "examples" / "minimal.yaml").read_text()
    head = text[: text.index("\ncases:")]
    cases = "".join(
        f"  - id: c{i:02d}\n    vars: {{current_goal: build a treehouse, request: 'Say hello {i}.'}}\n"
        "    expect:\n      calls:\n        - tool: send_message_to_chat\n"
        for i in range(N_CASES)
    )
    return head + "\ncases:\n" + cases


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two recorded models (one answers as the baseline did, one in prose) and the baseline golden."""
    d = tmp_path_factory.mktemp("matrix")
    suite_path = d / "mini.yaml"
    suite_path.write_text(_suite_text())
    out = {"suite": suite_path}
    for name, text in (("good", GOOD), ("bad", "Hello there!")):
        path = d / "recorded" / name
        run(suite_path, RunOptions(seed=5, out=path, progress=False, cache=False), backend=Canned(name, text))
        out[name] = path
    update_golden(read_run(out["good"]), d / "golden", baseline="main", suite=load_suite(suite_path))
    out["golden"] = d / "golden"
    return out


def _args(recorded: dict[str, Path], pytester: pytest.Pytester) -> list[str]:
    (pytester.path / "mini.yaml").write_text(recorded["suite"].read_text())
    return [
        "mini.yaml",
        f"--le-model=replay:{recorded['good']} --label good",
        f"--le-model=replay:{recorded['bad']} --label bad",
        f"--le-golden-dir={recorded['golden']}",
        "-p",
        "no:cacheprovider",
        "-rA",
    ]


def test_items_and_gates_are_named_per_model_alike_serially_and_under_xdist(
    pytester: pytest.Pytester, recorded: dict[str, Path]
) -> None:
    args = _args(recorded, pytester)
    listed = pytester.runpytest_subprocess(*args, "--collect-only", "-q")
    ids = [line for line in listed.stdout.lines if line.startswith("mini.yaml::")]
    assert ids == [f"mini.yaml::c{i:02d}[{m}]" for m in ("good", "bad") for i in range(N_CASES)]
    gates = {"mini.yaml::leader-eval-gate[good]", "mini.yaml::leader-eval-gate[bad]"}
    for extra in ((), ("-n", "2")):
        res = pytester.runpytest_subprocess(*args, "--le-run-dir=runs" + "".join(extra), *extra)
        out = res.stdout.str()
        # the baseline's model passes, the one that answers in prose fails: exit 1
        assert res.ret == 1, out
        assert "PASSED mini.yaml::leader-eval-gate[good]" in out
        assert "FAILED mini.yaml::leader-eval-gate[bad]" in out
        assert gates <= set(re.findall(r"mini\.yaml::leader-eval-gate\[\w+\]", out))
        assert "mini.yaml::leader-eval-gate " not in out  # no unlabelled gate in a matrix
        assert "model matrix of 2, each against the baseline, Holm across the models' gates" in out


def test_one_seed_one_run_per_model_and_a_step_summary_row_per_model(
    pytester: pytest.Pytester, recorded: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    res = pytester.runpytest_subprocess(*_args(recorded, pytester), "--le-run-dir=runs")
    assert res.ret == 1, res.stdout.str()
    md = summary.read_text()
    assert md.startswith("### leader-eval matrix: minimal, 2 models against baseline main")
    rows = [line for line in md.splitlines() if line.startswith("| good ") or line.startswith("| bad ")]
    assert len(rows) == 2
    cols = ["model", "verdict", "failed", "p", "level"]
    good, bad = (dict(zip(cols, r.strip(" |").split(" | "), strict=True)) for r in rows)
    assert good["verdict"].strip() == "PASS" and bad["verdict"].strip() == "FAIL"
    assert "score" in bad["failed"]
    # Holm across two gates: the smaller gate p is tested at alpha / 2
    assert float(bad["level"]) == pytest.approx(0.025)
    # then each model's own gate table
    assert md.count("label good") >= 1 and md.count("label bad") >= 1
    manifests = [json.loads(p.read_text()) for p in (pytester.path / "runs").glob("*/manifest.json")]
    assert sorted(m["label"] for m in manifests) == ["bad", "good"]
    assert {m["identity"]["run_seed"] for m in manifests} == {5}  # paired: one seed (the recorded one)


def test_ini_lines_are_a_matrix_and_one_model_changes_nothing(
    pytester: pytest.Pytester, recorded: dict[str, Path]
) -> None:
    (pytester.path / "mini.yaml").write_text(recorded["suite"].read_text())
    pytester.makeini(
        "[pytest]\nleader_eval_model =\n"
        f"    replay:{recorded['good']} --label good\n    replay:{recorded['bad']} --label bad\n"
    )
    listed = pytester.runpytest_subprocess("mini.yaml", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert "mini.yaml::c00[good]" in listed.stdout.str() and "mini.yaml::c00[bad]" in listed.stdout.str()
    one = pytester.runpytest_subprocess(
        "mini.yaml", f"--le-model=replay:{recorded['good']}", f"--le-golden-dir={recorded['golden']}", "-rA"
    )
    out = one.stdout.str()
    assert one.ret == 0, out
    assert "PASSED mini.yaml::leader-eval-gate" in out and "leader-eval-gate[" not in out
    assert "mini.yaml::c00[" not in out and "model matrix" not in out


def test_a_matrix_refuses_what_takes_one_model(pytester: pytest.Pytester, recorded: dict[str, Path]) -> None:
    args = _args(recorded, pytester)
    for extra, message in (
        (["--le-update-golden"], "--le-update-golden takes one --le-model"),
        (["--le-seed=3", "--le-shard=1/2"], "--le-shard takes one --le-model"),
    ):
        res = pytester.runpytest_subprocess(*args, *extra)
        assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stderr.str()
        assert message in res.stderr.str()
    same = pytester.runpytest_subprocess(
        "mini.yaml", f"--le-model=replay:{recorded['good']}", f"--le-model=replay:{recorded['good']}"
    )
    assert same.ret != 0 and "two entries would write runs labelled" in same.stdout.str() + same.stderr.str()


class TwoCasesShort(Canned):
    """Answers as the baseline did except on cases c00 and c01, where the message misses the goal."""

    async def sample(self, request: SampleRequest) -> list[Completion]:
        short = re.search(r"Say hello [01]\.", request.prompt.text) is not None
        text = '{"tool": "send_message_to_chat", "arguments": {"message": "Hi team!"}}' if short else GOOD
        return [Completion(text, [], "stop") for _ in request.seeds]


@pytest.fixture(scope="module")
def borderline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A suite whose cases want the goal in the message; a clean model, a model two cases short
    (score's one-sided p 0.028: below alpha 0.05, above Holm's first level for two gates 0.025)."""
    d = tmp_path_factory.mktemp("borderline")
    suite_path = d / "mini.yaml"
    call = "        - tool: send_message_to_chat\n"
    suite_path.write_text(
        _suite_text().replace(call, call + "          args:\n            message: {contains: treehouse}\n")
    )
    out = {"suite": suite_path}
    for name, backend in (("clean", Canned("clean", GOOD)), ("short", TwoCasesShort("short", ""))):
        out[name] = d / "recorded" / name
        run(suite_path, RunOptions(seed=5, out=out[name], progress=False, cache=False), backend=backend)
    update_golden(read_run(out["clean"]), d / "golden", baseline="main", suite=load_suite(suite_path))
    out["golden"] = d / "golden"
    return out


def test_a_model_that_fails_alone_at_alpha_passes_in_a_matrix_held_by_holm(
    pytester: pytest.Pytester, borderline: dict[str, Path]
) -> None:
    (pytester.path / "mini.yaml").write_text(borderline["suite"].read_text())
    common = ["mini.yaml", f"--le-golden-dir={borderline['golden']}", "-p", "no:cacheprovider", "-rA"]
    short = f"--le-model=replay:{borderline['short']} --label short"
    alone = pytester.runpytest_subprocess(*common, short, "--le-run-dir=alone")
    # alone, the gate is its own family at alpha 0.05: p 0.028 is a credible regression
    assert alone.ret == 1 and "FAILED mini.yaml::leader-eval-gate" in alone.stdout.str()
    both = pytester.runpytest_subprocess(
        *common, f"--le-model=replay:{borderline['clean']} --label clean", short, "--le-run-dir=both"
    )
    out = both.stdout.str()
    # two gates at 0.05 each would fail it (N x alpha); Holm across the models tests p 0.028 at 0.025
    assert both.ret == 0, out
    assert "PASSED mini.yaml::leader-eval-gate[short]" in out and "PASSED mini.yaml::leader-eval-gate[clean]" in out
    assert "short PASS (gate p 0.0278, level 0.025)" in out
    assert "not credible across the 2-model matrix" in out
