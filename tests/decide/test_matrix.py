"""``leader-eval run --model A --model B --model C``: one command samples every model with one
seed, writes one run directory per model and one comparison (with the checkpoint recommendation
for ordered checkpoints); the CI step summary carries the comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leader_eval.cli.app import main
from leader_eval.decide.matrix import matrix_labels
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import run
from leader_eval.runs.model_spec import model_entries
from leader_eval.runs.options import RunOptions
from tests.support.scripted import Canned

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ROOT / "suites" / "examples" / "minimal.yaml"
GOOD = '{"tool": "send_message_to_chat", "arguments": {"message": "Hi team, we build a treehouse!"}}'


def _record(tmp_path: Path) -> dict[str, Path]:
    """Three recorded checkpoints: two that pass every sample and one that answers in prose."""
    out = {}
    for name, text in (("step-100", GOOD), ("step-200", GOOD), ("step-300", "Hello there!")):
        path = tmp_path / "recorded" / name
        run(MINIMAL, RunOptions(seed=11, samples=3, out=path, progress=False, cache=False), backend=Canned(name, text))
        out[name] = path
    return out


def test_a_three_model_matrix_writes_three_runs_and_one_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = _record(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = tmp_path / "matrix"
    argv = ["run", str(MINIMAL), "--out", str(out), "-q"]
    for name, path in recorded.items():
        argv += ["--model", f"replay:{path} --label {name}"]
    status = main(argv)
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["step-100", "step-200", "step-300"]
    manifests = [json.loads((out / n / "manifest.json").read_text()) for n in ("step-100", "step-200", "step-300")]
    assert {m["identity"]["run_seed"] for m in manifests} == {11}  # paired: one seed for every model
    assert [m["label"] for m in manifests] == ["step-100", "step-200", "step-300"]
    assert "== matrix: 3 models, run seed 11" in printed
    assert "B step-200 vs A step-100" in printed and "B step-300 vs A step-100" in printed
    assert "credibly REGRESSES" in printed, printed
    assert "recommended checkpoint: step-100" in printed
    assert status == 1  # step-300 credibly regresses on the first model
    text = summary.read_text()
    assert "step-300" in text and "step-200" in text


def test_entries_of_one_model_get_labels_from_their_settings() -> None:
    entries = model_entries(
        {"model": ["gguf:m.gguf --temperature 0.2", "gguf:m.gguf --temperature 1", "gguf:m.gguf --label base"]}
    )
    assert matrix_labels(entries, ["m", "m", "m"]) == ["m-temperature0.2", "m-temperature1.0", "base"]
    same = model_entries({"model": ["gguf:m.gguf", "gguf:m.gguf"]})
    with pytest.raises(LeaderEvalError, match="two entries would write runs labelled 'm'"):
        matrix_labels(same, ["m", "m"])


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--model", "replay:x --seed 3", "--model", "replay:y"], "give --seed once for all"),
        (["--model", "replay:x --max-error-rate 0", "--model", "replay:y"], "give --max-error-rate once for all"),
        (["--model", "replay:x", "--model", "replay:y", "--adaptive", "--budget", "3"], "--adaptive samples one model"),
        (["--model", "replay:x", "--model", "replay:y --temperature -1"], "argument --temperature"),
    ],
)
def test_a_bad_matrix_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    out = tmp_path / "matrix"
    assert main(["run", str(MINIMAL), "--out", str(out), "-q", *extra]) == 2
    assert expected in capsys.readouterr().err
    assert not out.exists()


def test_only_run_takes_a_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["stress", str(MINIMAL)], ["lint", str(MINIMAL)]):
        assert main([*command, "--model", "local:smollm2", "--model", "local:smollm2 --temperature 1"]) == 2
        assert "--model given 2 times" in capsys.readouterr().err


def test_runs_of_two_models_that_share_a_run_id_are_both_compared(tmp_path: Path) -> None:
    """A run id is the suite, the start second and the seed: a matrix's runs often share one, and
    compare used to keep only the first of them as "the same run twice"."""
    from leader_eval.decide.compare import compare_runs

    recorded = _record(tmp_path)
    first = json.loads((recorded["step-100"] / "manifest.json").read_text())["run_id"]
    manifest_path = recorded["step-300"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["run_id"] = first
    manifest_path.write_text(json.dumps(manifest))
    comparison = compare_runs([recorded["step-100"], recorded["step-300"]])
    assert len(comparison.groups) == 2 and comparison.groups[0].name != comparison.groups[1].name
    assert len(comparison.pairs) == 1
    # the same directory given twice is still one run
    with pytest.raises(LeaderEvalError, match="at least two different runs"):
        compare_runs([recorded["step-100"], recorded["step-100"]])


def _gate(label: str, p: float | None, *, failed: bool, floor_broken: bool = False) -> Any:
    """A gate decided alone at alpha 0.05: one tested metric with one-sided p ``p``."""
    from leader_eval.decide.gate import GateResult, MetricRow

    def row(metric: str, kind: str, verdict: str, p_value: float | None) -> MetricRow:
        return MetricRow(metric, "higher", 0.05, 0.9, 0.7, 0.6, 0.8, -0.2, -0.3, -0.1, p_value, True, verdict, "", kind)

    rows = [row("score", "test", "fail" if failed else "pass", p)]
    if floor_broken:
        rows.append(row("score", "floor", "fail", None))
    status = "fail" if failed or floor_broken else "pass"
    return GateResult("s", label, None, None, status, rows=rows)


def test_a_matrix_holds_its_false_alarms_by_holm_across_the_models_not_n_times_alpha() -> None:
    from leader_eval.decide.matrix import gate_family

    # alone at alpha 0.05 model a fails (p 0.04): two gates at 0.05 each would raise a false
    # alarm in up to 10% of unchanged matrices; Holm across the two gives a 0.025 first
    results = {"a": _gate("a", 0.04, failed=True), "b": _gate("b", 0.6, failed=False)}
    decided = gate_family(results, alpha=0.05)
    assert decided["a"].level == pytest.approx(0.025) and not decided["a"].regressed
    assert results["a"].status == "pass" and results["a"].rows[0].verdict == "pass"
    assert decided["a"].withdrawn == ("score",)
    assert "not credible across the 2-model matrix" in results["a"].rows[0].explanation
    # step-down, not Bonferroni: once a is rejected, b is tested at the whole alpha (0.03 < 0.05)
    results = {"a": _gate("a", 0.01, failed=True), "b": _gate("b", 0.03, failed=True)}
    decided = gate_family(results, alpha=0.05)
    assert [decided[x].regressed for x in "ab"] == [True, True]
    assert decided["b"].level == pytest.approx(0.05)
    assert [results[x].status for x in "ab"] == ["fail", "fail"]


def test_a_matrix_never_withdraws_a_contract_or_an_unadjustable_failure() -> None:
    from leader_eval.decide.matrix import gate_family

    results = {
        "floor": _gate("floor", 0.04, failed=True, floor_broken=True),  # the suite's floor is a contract
        "unpaired": _gate("unpaired", None, failed=True),  # no p-value: nothing shows it is noise
        "ok": _gate("ok", 0.9, failed=False),
    }
    decided = gate_family(results, alpha=0.05)
    assert results["floor"].status == "fail" and decided["floor"].withdrawn == ("score",)
    assert results["unpaired"].status == "fail" and decided["unpaired"].regressed
    assert results["ok"].status == "pass"


def test_a_judge_error_failure_is_never_withdrawn_by_the_family() -> None:
    """Holm across a matrix's gates withdraws a weak row; a gate failed by judge errors over the
    limit (no row carries it) stays failed (review finding)."""
    from leader_eval.decide.gate import GateResult, MetricRow
    from leader_eval.decide.matrix import gate_family

    def row(p: float) -> MetricRow:
        return MetricRow("score", "higher", 0.0, 0.8, 0.7, 0.6, 0.8, -0.1, -0.2, 0.0, p, True, "fail", "x", min_p=0.0)

    judged = GateResult("s", "A", None, None, "fail", rows=[row(0.03)], judge_errors_over=["polite"])
    plain = GateResult("s", "B", None, None, "fail", rows=[row(0.04)])
    gate_family({"A": judged, "B": plain}, alpha=0.05)
    assert plain.status == "pass"  # the weak row is withdrawn: the family's error control
    assert judged.status == "fail"  # the judge errors are not a row to withdraw
