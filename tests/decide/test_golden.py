"""Golden baselines and the gate, end to end on synthetic runs with real result shapes.

Runs are built the way ``evaluate.score_run`` builds them: per-sample ``SampleScore`` records ->
``aggregate.case_results`` -> ``aggregate.summarize`` over a real suite loaded from YAML, so a
change in those shapes breaks these tests rather than drifting past them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from leader_eval.decide.golden import (
    DEFAULT_TOLERANCES,
    GoldenError,
    build_golden,
    format_gate_table,
    gate,
    gate_markdown,
    gate_run_dir,
    golden_path,
    holm_alphas,
    load_golden,
    parse_tolerances,
    portable_model_id,
    tarone_family,
    update_golden,
    write_golden,
)
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import Run, read_run
from leader_eval.scoring.aggregate import case_results
from leader_eval.stats.metrics import ALL_METRICS
from leader_eval.store.formats import SCORER_VERSION
from leader_eval.suite.load import Suite
from tests.support.runs import (  # noqa: F401
    FAIL_REASONS,
    N_SIM,
    _suite_at,
    difficulties,
    make_run,
    make_scores,
    make_suite,
    run_from_scores,
    suite_yaml,
    write_run_dir,
)

# ---------------------------------------------------------------------------------------------
# golden files


def test_golden_file_is_sorted_rounded_and_reviewable(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run = make_run(suite, difficulties(24), n=3, seed=3)
    res = update_golden(run, tmp_path / "golden")
    assert res.written, res.reason
    path = tmp_path / "golden" / suite.name / "main.json"
    assert res.path == path == golden_path(tmp_path / "golden", suite.name, "main")
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.startswith('{\n  "')
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def numbers(x: Any) -> list[float]:
        if isinstance(x, dict):
            return [v for val in x.values() for v in numbers(val)]
        return [x] if isinstance(x, float) else []

    assert all(round(v, 4) == v for v in numbers(data))
    assert data["suite_hash"] == suite.content_hash and data["scorer_version"] == SCORER_VERSION
    assert data["model_id"] == "gguf:v1.gguf"  # no machine-specific path
    score = data["metrics"]["score"]
    assert score["direction"] == "higher" and data["metrics"]["hard_fail_rate"]["direction"] == "lower"
    assert score["tolerance"] == DEFAULT_TOLERANCES["score"]
    assert score["n_samples"] == 72 and score["n_cases"] == 24
    assert score["value"] == round(run.summary["overall"]["metrics"]["score"]["value"], 4)
    assert data["cases"]["c00"]["n_samples"] == 3
    assert data["cases"]["c00"]["pass_rate"] == round(run.cases[0]["score"], 4)
    assert load_golden(path) == data


def test_update_after_interrupted_run_leaves_golden_byte_identical(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden_dir = tmp_path / "golden"
    assert update_golden(make_run(suite, 0.8, seed=1), golden_dir).written
    path = golden_path(golden_dir, suite.name, "main")
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns

    interrupted = make_run(suite, 0.2, seed=2, status="running")
    res = update_golden(interrupted, golden_dir)
    assert not res.written and "interrupted" in res.reason
    partial = make_run(suite, 0.2, seed=2, case_ids=["c00", "c01", "c02"])
    res = update_golden(partial, golden_dir)
    assert not res.written and "covers 3 of 24 cases" in res.reason
    short = make_run(suite, 0.2, seed=2)
    short.scores = [s for s in short.scores if not (s.case_id == "c03" and s.index == 4)]
    short.cases = case_results(suite.cases, short.scores)
    res = update_golden(short, golden_dir)
    assert not res.written and "samples missing" in res.reason and "c03" in res.reason

    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert [p.name for p in path.parent.iterdir()] == ["main.json"]  # no temp file left behind


def test_update_refuses_a_run_of_an_edited_suite(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run = make_run(suite, 0.8)
    Path(suite.path).write_text(suite_yaml(24).replace("request 3", "request three"), encoding="utf-8")
    res = update_golden(run, tmp_path / "golden")
    assert not res.written and "changed since the run" in res.reason
    assert not (tmp_path / "golden").exists()


def test_update_keeps_reviewed_tolerances_and_skips_identical_rewrites(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden_dir = tmp_path / "golden"
    run = make_run(suite, 0.8, seed=5)
    update_golden(run, golden_dir)
    path = golden_path(golden_dir, suite.name, "main")
    data = load_golden(path)
    assert data is not None
    data["metrics"]["score"]["tolerance"] = 0.07  # a reviewer loosened it in a pull request
    write_golden(path, data)
    again = update_golden(run, golden_dir)
    assert not again.written and "unchanged" in again.reason
    assert update_golden(make_run(suite, 0.8, seed=6), golden_dir).written
    new = load_golden(path)
    assert new is not None and new["metrics"]["score"]["tolerance"] == 0.07
    assert new["metrics"]["leak_rate"]["tolerance"] == DEFAULT_TOLERANCES["leak_rate"]


def test_parse_tolerances() -> None:
    assert parse_tolerances(["score=0.05", "hard_fail_rate=0,leak_rate=0.1"]) == {
        "score": 0.05,
        "hard_fail_rate": 0.0,
        "leak_rate": 0.1,
    }
    for bad in (["score"], ["scroe=0.1"], ["score=x"], ["score=2"]):
        with pytest.raises(LeaderEvalError):
            parse_tolerances(bad)


def test_portable_model_id() -> None:
    assert portable_model_id("gguf:/home/me/m/v7.gguf") == "gguf:v7.gguf"
    assert portable_model_id("tinker://run-1/sampler_weights/v7") == "tinker://run-1/sampler_weights/v7"
    assert portable_model_id("local:smollm2") == "local:smollm2"


# ---------------------------------------------------------------------------------------------
# the gate


def _golden_for(tmp_path: Path, suite: Suite, p: Any, seed: int = 11) -> dict[str, Any]:
    return build_golden(make_run(suite, p, seed=seed))


def test_clearly_higher_golden_fails_with_table_and_exit_1(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run_dir = write_run_dir(make_run(suite, difficulties(24), seed=21), tmp_path / "run")
    golden_dir = tmp_path / "golden"
    assert gate_run_dir(run_dir, golden_dir, update=True).update.written  # type: ignore[union-attr]
    path = golden_path(golden_dir, suite.name, "main")

    # the honest golden passes its own run
    same = gate_run_dir(run_dir, golden_dir)
    assert same.exit_status == 0 and same.status == "pass", format_gate_table(same)

    # a reviewer edits the golden to demand a clearly higher score (and per-case rates to match)
    data = load_golden(path)
    assert data is not None
    data["metrics"]["score"]["value"] = min(1.0, data["metrics"]["score"]["value"] + 0.25)
    for rec in data["cases"].values():
        rec["pass_rate"] = min(1.0, rec["pass_rate"] + 0.25)
    write_golden(path, data)
    res = gate_run_dir(run_dir, golden_dir)
    assert res.exit_status == 1 and res.status == "fail"
    assert res.failed == ["score"]
    out = format_gate_table(res)
    assert out.splitlines()[0].startswith("gate FAIL")
    header = out.splitlines()[1]
    for col in ("metric", "golden", "now", "delta", "verdict"):
        assert col in header
    score_line = next(line for line in out.splitlines() if line.startswith("score"))
    assert "FAIL" in score_line and "-0.2" in score_line  # delta shown with its sign
    md = gate_markdown(res)
    assert md.startswith("### ❌") and "| score ^ |" in md and "**FAIL**" in md


def test_golden_named_as_a_file_gates_like_its_directory_and_another_suites_file_is_refused(
    tmp_path: Path,
) -> None:
    suite = make_suite(tmp_path)
    run_dir = write_run_dir(make_run(suite, difficulties(24), seed=21), tmp_path / "run")
    golden_dir = tmp_path / "golden"
    assert gate_run_dir(run_dir, golden_dir, update=True).update.written  # type: ignore[union-attr]
    path = golden_path(golden_dir, suite.name, "main")
    by_dir, by_file = gate_run_dir(run_dir, golden_dir), gate_run_dir(run_dir, path)
    assert by_file.status == by_dir.status == "pass"
    assert format_gate_table(by_file) == format_gate_table(by_dir)

    # another suite's golden named directly would pair no case and pass: refused, exit 2
    other = load_golden(path)
    assert other is not None
    other_path = tmp_path / "other.json"
    write_golden(other_path, {**other, "suite": "another_suite"})
    with pytest.raises(GoldenError, match=r"other\.json:1: a golden file of suite 'another_suite'"):
        gate_run_dir(run_dir, other_path)


def test_golden_value_edited_without_case_rates_still_fails(tmp_path: Path) -> None:
    # the acceptance edit: only the headline number changes; per-case rates no longer pair up with
    # it, but the current run's interval alone makes the shortfall credible
    suite = make_suite(tmp_path)
    run = make_run(suite, difficulties(24), seed=21)
    golden = build_golden(run)
    golden["metrics"]["score"]["value"] = round(run.summary["overall"]["metrics"]["score"]["value"] + 0.25, 4)
    golden["cases"] = {}
    res = gate(run, golden)
    assert res.exit_status == 1 and res.failed == ["score"]


def test_change_within_noise_passes(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run = make_run(suite, difficulties(24), seed=21)
    golden = build_golden(run)
    now = run.summary["overall"]["metrics"]["score"]["value"]
    # within tolerance
    golden["metrics"]["score"]["value"] = round(now + 0.015, 4)
    assert gate(run, golden).exit_status == 0
    # beyond a zero tolerance, but well inside the run's own noise
    golden["metrics"]["score"]["value"] = round(now + 0.03, 4)
    res = gate(run, golden, tolerances={"score": 0.0})
    assert res.exit_status == 0 and res.rows[0].metric == "score"
    assert next(r for r in res.rows if r.metric == "score").verdict == "pass"


def test_improvement_passes_and_suggests_update(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(make_run(suite, 0.5, seed=1))
    res = gate(make_run(suite, 0.9, seed=2), golden)
    assert res.exit_status == 0 and "score" in res.improved
    assert "--update-golden" in format_gate_table(res).splitlines()[0]


def test_hard_fail_rate_regression_fails(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(make_run(suite, 0.7, seed=1, p_hard=0.0))
    # same pass rate, but now most failures are hard fails (e.g. leaked tool-call XML)
    res = gate(make_run(suite, 0.7, seed=2, p_hard=0.8), golden, tolerances={"score": 0.2})
    assert res.exit_status == 1 and res.failed == ["hard_fail_rate"]


def test_stale_golden_fails_and_says_which(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run = make_run(suite, 0.8)
    golden = build_golden(run)
    golden["suite_hash"] = "0123abcd"
    res = gate(run, golden)
    assert res.status == "stale" and res.exit_status == 1
    assert f"golden is stale: suite content changed (hash 0123abcd -> {suite.content_hash})" in res.messages
    # another scorer version warns and still gates (issue 11: files of older versions keep working)
    golden = build_golden(run)
    golden["scorer_version"] = "0"
    res = gate(run, golden)
    assert res.status == "pass" and res.exit_status == 0
    assert any(m.startswith("warning: scorer version changed (0 -> ") for m in res.messages)
    assert "scorer version changed" in format_gate_table(res) and "scorer version changed" in gate_markdown(res)


def test_a_missing_golden_fails_with_the_file_and_the_command_unless_allowed(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run_dir = write_run_dir(make_run(suite, 0.8), tmp_path / "run")
    for strict in (False, True):
        res = gate_run_dir(run_dir, tmp_path / "golden", strict=strict)
        assert res.status == "missing" and res.exit_status == 1
        head = res.headline()
        assert head.startswith("gate FAIL") and "\n" not in head
        assert str(tmp_path / "golden" / "mini" / "main.json") in head
        # the command makes the baseline from a trusted run, never from the candidate being gated
        assert f"leader-eval update-golden TRUSTED_RUN_DIR --golden {tmp_path / 'golden'} --baseline main" in head
        assert str(run_dir) not in head
    assert gate_markdown(res).startswith("### ❌ gate FAIL")  # the job summary says what the exit status says
    allowed = gate_run_dir(run_dir, tmp_path / "golden", allow_missing=True)
    assert allowed.exit_status == 0 and allowed.headline().startswith("gate WARN")
    assert gate_markdown(allowed).startswith("### ⚠️ gate WARN")
    assert "--allow-missing-golden" in allowed.headline()
    other = gate_run_dir(run_dir, tmp_path / "golden", baseline="rc-2")
    assert other.exit_status == 1 and str(tmp_path / "golden" / "mini" / "rc-2.json") in other.headline()
    assert not (tmp_path / "golden").exists()


def test_any_model_is_gated_against_the_baseline_and_labels_never_choose_it(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden_dir = tmp_path / "golden"
    trusted = write_run_dir(make_run(suite, difficulties(24), seed=1, label="prod"), tmp_path / "prod")
    assert gate_run_dir(trusted, golden_dir, update=True).update.written  # type: ignore[union-attr]
    assert [p.name for p in (golden_dir / "mini").iterdir()] == ["main.json"]
    assert json.loads((golden_dir / "mini" / "main.json").read_text())["baseline"] == "main"
    # a new checkpoint under another label and model is gated against main, and a drop fails it
    worse = make_run(
        suite, np.clip(difficulties(24) - 0.5, 0, 1), seed=2, label="ckpt-v2", model_id="gguf:/ckpt/v2.gguf"
    )
    res = gate_run_dir(write_run_dir(worse, tmp_path / "v2"), golden_dir)
    assert res.status == "fail" and res.exit_status == 1, format_gate_table(res)
    assert "baseline main, label ckpt-v2" in res.headline()


def test_update_golden_command_makes_a_trusted_run_the_baseline_and_gate_label_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from leader_eval.cli.app import main

    suite = make_suite(tmp_path)
    golden_dir = tmp_path / "golden"
    trusted = write_run_dir(make_run(suite, difficulties(24), seed=1, label="prod"), tmp_path / "prod")
    assert main(["update-golden", str(trusted), "--golden", str(golden_dir), "--baseline", "rc-2"]) == 0
    assert f"created {golden_dir / 'mini' / 'rc-2.json'}" in capsys.readouterr().out
    assert json.loads((golden_dir / "mini" / "rc-2.json").read_text())["baseline"] == "rc-2"
    assert main(["update-golden", str(trusted), "--golden", str(golden_dir), "--baseline", "rc-2"]) == 0
    assert "already matches" in capsys.readouterr().out
    # a run that cannot stand as a baseline: exit 1 with the reason, nothing written
    partial = make_run(suite, 0.8, seed=2, case_ids=[c.id for c in suite.cases[:3]])
    assert main(["update-golden", str(write_run_dir(partial, tmp_path / "part")), "--golden", str(golden_dir)]) == 1
    assert "golden not written" in capsys.readouterr().err and not (golden_dir / "mini" / "main.json").exists()
    # 0.2's `gate --label X` chose golden X.json: refused with the option that does that now
    assert main(["gate", str(trusted), "--golden", str(golden_dir), "--label", "rc-2"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--baseline rc-2" in err
    assert main(["gate", str(trusted), "--golden", str(golden_dir), "--baseline", "rc-2"]) == 0
    with pytest.raises(SystemExit) as usage:  # argparse's one-line usage error
        main(["gate", str(trusted), "--golden", str(golden_dir), "--baseline", "../x"])
    assert usage.value.code == 2 and "argument --baseline: '../x' is not a name" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../main", "a/b", ".hidden", "", "x" * 101, "main json", "ma\x00in"])
def test_a_baseline_name_that_is_not_one_safe_file_name_is_refused(tmp_path: Path, name: str) -> None:
    suite = make_suite(tmp_path)
    run_dir = write_run_dir(make_run(suite, 0.8), tmp_path / "run")
    with pytest.raises(GoldenError, match="--baseline"):
        gate_run_dir(run_dir, tmp_path / "golden", baseline=name)
    assert not (tmp_path / "golden").exists()


def test_a_0_2_golden_still_gates_as_its_label_baseline_with_a_rename_note(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden_dir = tmp_path / "golden"
    old = build_golden(make_run(suite, difficulties(24), seed=1))
    for key in ("format_version", "baseline", "sampling"):
        old.pop(key)
    old["format"] = 1
    legacy = golden_dir / "mini" / "local-smollm2.json"
    write_golden(legacy, old)
    run_dir = write_run_dir(make_run(suite, difficulties(24), seed=2), tmp_path / "run")
    # gated against main: missing, and the one line shows the rename that makes the old file main
    res = gate_run_dir(run_dir, golden_dir)
    assert res.exit_status == 1
    assert f"git mv {legacy} {golden_dir / 'mini' / 'main.json'}" in res.headline()
    assert "--baseline local-smollm2" in res.headline()
    # named as a baseline it gates, with one note: drift unknown, how to rename and re-create
    named = gate_run_dir(run_dir, golden_dir, baseline="local-smollm2")
    assert named.status == "pass", format_gate_table(named)
    (note,) = [m for m in named.messages if "drift unknown" in m]
    assert "0.2.0 golden" in note and f"git mv {legacy}" in note and "update-golden" in note


def _with_sampling(
    run: Run,
    *,
    temperature: float = 0.7,
    max_tokens: int = 48,
    protocol: str = "json",
    detected: str = "json",
    template: str | None = "aaaa1111bbbb2222",
) -> Run:
    """``run`` as if sampled with these settings (its manifest is what the golden records)."""
    ident = run.manifest["identity"]
    params = {"temperature": temperature, "max_tokens": max_tokens, "top_p": 1.0, "stop": []}
    ident["cases"] = {cid: {**spec, "params": params} for cid, spec in ident["cases"].items()}
    ident["protocol"] = protocol
    run.manifest["model"] = {"default_protocol": detected, "chat_template_sha256": template}
    return run


def test_the_golden_records_its_sampling_identity(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(_with_sampling(make_run(suite, 0.8, n=4), temperature=0.7, max_tokens=80))
    assert golden["format_version"] == 2 and golden["baseline"] == "main"
    assert golden["sampling"] == {
        "temperature": 0.7,
        "max_tokens": 80,
        "samples_per_case": 4,
        "protocol": "json",
        "protocol_detected": True,
        "chat_template_sha256": "aaaa1111bbbb2222",
    }
    path = tmp_path / "g.json"
    write_golden(path, golden)
    assert load_golden(path) == golden


def test_sampling_drift_is_noted_and_a_protocol_or_template_change_fails(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(_with_sampling(make_run(suite, difficulties(24), seed=1), max_tokens=80))
    same = gate(_with_sampling(make_run(suite, difficulties(24), seed=2), max_tokens=80), golden)
    assert same.status == "pass" and not [m for m in same.messages if "drift" in m]
    # the collapsed checkpoint of the report: shorter outputs, hotter sampling -> one drift note
    hot = gate(_with_sampling(make_run(suite, difficulties(24), seed=2), temperature=2.0, max_tokens=24), golden)
    (note,) = [m for m in hot.messages if "sampling drift" in m]
    assert "temperature 2.0 vs the golden's 0.7" in note and "max_tokens 24 vs the golden's 80" in note
    assert note in format_gate_table(hot)
    fewer = gate(_with_sampling(make_run(suite, difficulties(24), seed=2, n=2), max_tokens=80), golden)
    assert any("samples per case 2 vs the golden's 5" in m for m in fewer.messages)
    # another protocol or chat template: the golden does not measure this setup -> fail, re-baseline
    for changed in (
        {"protocol": "xml", "detected": "json"},
        {"protocol": "xml", "detected": "xml", "template": "cccc3333dddd4444"},
        {"template": "cccc3333dddd4444"},
    ):
        res = gate(_with_sampling(make_run(suite, difficulties(24), seed=2), max_tokens=80, **changed), golden)
        assert res.status == "stale" and res.exit_status == 1, changed
        assert not res.rows  # nothing compared: the numbers measure the harness change
        assert "update-golden" in format_gate_table(res)
    # both protocols were the backend's own detection over the same template: only this version's
    # detection changed -> a warning for this release
    moved = gate(
        _with_sampling(make_run(suite, difficulties(24), seed=2), max_tokens=80, protocol="xml", detected="xml"), golden
    )
    assert moved.status == "pass" and any(
        m.startswith("warning: protocol changed (json -> xml)") for m in moved.messages
    )
    # a template the golden's backend did not report is not a change anyone can see
    unknown = build_golden(_with_sampling(make_run(suite, difficulties(24), seed=1), max_tokens=80, template=None))
    assert gate(_with_sampling(make_run(suite, difficulties(24), seed=2), max_tokens=80), unknown).status == "pass"


@pytest.mark.parametrize(
    "sampling",
    [
        "not an object",
        {"temperature": "hot"},
        {"max_tokens": -1},
        {"max_tokens": float("nan")},
        {"samples_per_case": []},
        {"protocol": 3},
        {"protocol_detected": "yes"},
        {"seed_of_the_day": 1},
    ],
)
def test_a_golden_with_an_unreadable_sampling_record_is_refused_in_one_line(tmp_path: Path, sampling: Any) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(make_run(suite, 0.8))
    golden["sampling"] = sampling
    path = tmp_path / "g.json"
    path.write_text(json.dumps(golden, indent=2))
    with pytest.raises(GoldenError, match=r"g\.json:\d+: refused golden file: .*sampling"):
        load_golden(path)


def test_interrupted_or_partial_run_cannot_pass_the_gate(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden = build_golden(make_run(suite, 0.8, seed=1))
    res = gate(make_run(suite, 0.8, seed=2, status="running"), golden)
    assert res.status == "incomplete" and res.exit_status == 1
    res = gate(make_run(suite, 0.8, seed=2, case_ids=["c00", "c01", "c02"]), golden)
    assert res.status == "incomplete" and "covers 3 of the golden's 24 cases" in res.messages[0]


def test_gate_update_after_interrupted_run_keeps_golden(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    golden_dir = tmp_path / "golden"
    gate_run_dir(write_run_dir(make_run(suite, 0.8, seed=1), tmp_path / "a"), golden_dir, update=True)
    path = golden_path(golden_dir, suite.name, "main")
    before = path.read_bytes()
    res = gate_run_dir(
        write_run_dir(make_run(suite, 0.3, seed=2, status="running"), tmp_path / "b"), golden_dir, update=True
    )
    assert res.update is not None and not res.update.written
    assert res.exit_status == 1
    assert path.read_bytes() == before
    assert "golden not updated" in format_gate_table(res)


def test_run_dir_round_trip_matches_in_memory_gate(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    run = make_run(suite, difficulties(24), seed=4)
    back = read_run(write_run_dir(run, tmp_path / "run"))
    golden = build_golden(make_run(suite, difficulties(24), seed=5))
    a, b = gate(run, golden), gate(back, golden)
    assert [(r.metric, r.verdict, r.delta) for r in a.rows] == [(r.metric, r.verdict, r.delta) for r in b.rows]


# ---------------------------------------------------------------------------------------------
# calibration by simulation


@pytest.mark.slow
@pytest.mark.usefixtures("fast_stats")
def test_gate_false_alarm_rate_matches_alpha(tmp_path: Path) -> None:
    """No real difference: the golden and the current run are two runs of one model (24 cases of
    varied difficulty, 5 samples each, some hard fails), every tolerance 0 so that only the
    statistics decide. Over 1,000 simulated pairs (fixed seeds) the gate must fail in 2-7% at
    alpha 0.05: five gating metrics are one Holm family, so the whole gate, not each metric,
    errs at alpha (without the correction it failed 15.7% of the time)."""
    suite = make_suite(tmp_path)
    p = difficulties(24, seed=7)
    zero = dict.fromkeys(DEFAULT_TOLERANCES, 0.0)
    fails = 0
    for i in range(N_SIM):
        golden = build_golden(make_run(suite, p, seed=10_000 + i, p_hard=0.3))
        fails += gate(make_run(suite, p, seed=20_000 + i, p_hard=0.3), golden, tolerances=zero).exit_status
    # under alpha: the exact count test for hard fails is conservative (a discrete test)
    assert 0.02 <= fails / N_SIM <= 0.07, fails


@pytest.mark.usefixtures("fast_stats")
def test_gate_detects_a_real_regression_most_of_the_time(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    p = difficulties(24, seed=7)
    worse = np.clip(p - 0.2, 0, 1)  # a real drop of 0.2 in every case's pass probability
    hits = sum(
        gate(make_run(suite, worse, seed=30_000 + i), build_golden(make_run(suite, p, seed=40_000 + i))).exit_status
        for i in range(100)
    )
    assert hits >= 80, hits


def test_holm_levels_reproduce_step_down_decisions() -> None:
    levels = holm_alphas({"a": 0.001, "b": 0.02, "c": 0.3}, 0.05)
    assert levels == pytest.approx({"a": 0.05 / 3, "b": 0.05 / 2, "c": 0.05})
    # after the first non-rejection, every later hypothesis keeps that level
    levels = holm_alphas({"a": 0.001, "b": 0.03, "c": 0.04}, 0.05)
    assert levels["b"] == pytest.approx(0.025) and levels["c"] == pytest.approx(0.025)
    # a hypothesis without a p-value (unpaired interval test) gets Bonferroni's share
    levels = holm_alphas({"a": 0.001, "b": None}, 0.05)
    assert levels["b"] == pytest.approx(0.025) and levels["a"] == pytest.approx(0.025)


def test_holm_tarone_leaves_out_tests_that_cannot_reach_their_share() -> None:
    # hard_fail's test can give no p below 1/3 (one event, 6 vs 3 samples): it takes no share,
    # so the two others are tested at alpha / 2 at Holm's first step, not alpha / 3
    p = {"score": 0.03, "tool": 0.2, "hard": 1 / 3}
    levels = holm_alphas(p, 0.05, min_p={"hard": 1 / 3})
    assert levels["score"] == pytest.approx(0.025) and levels["tool"] == pytest.approx(0.025)
    assert tarone_family({"score": 0.0, "tool": 0.0, "hard": 1 / 3}, 0.05) == ["score", "tool"]
    # a test that can reach alpha / 3 keeps its share
    levels = holm_alphas(p, 0.05, min_p={"hard": 0.004})
    assert levels["score"] == pytest.approx(0.05 / 3)
    # after a rejection the family shrinks again: score rejected at 0.025, tool then gets 0.05
    levels = holm_alphas({"score": 0.001, "tool": 0.04, "hard": 1.0}, 0.05, min_p={"hard": 1.0})
    assert levels["tool"] == pytest.approx(0.05)
    # every testable hypothesis is an unpaired one: the count test that cannot reach alpha / K
    # keeps a valid (positive) level it cannot reject at
    levels = holm_alphas({"score": None, "hard": 1.0}, 0.05, min_p={"hard": 1.0})
    assert levels == pytest.approx({"score": 0.05, "hard": 0.05})


# --- the gate never passes without comparing (review findings, issue 19) -----------------------


def test_gate_as_a_function_refuses_a_golden_without_a_gating_metric(tmp_path: Path) -> None:
    """``load_golden`` refused it, but ``gate()`` is public: a golden of lenient_format_rate alone
    let a run that never passed a case gate green."""
    suite = make_suite(tmp_path, 6)
    golden = _golden_for(tmp_path, suite, 0.9)
    golden["metrics"] = {"lenient_format_rate": golden["metrics"]["lenient_format_rate"]}
    result = gate(make_run(suite, 0.0, seed=3), golden)
    assert result.status != "pass" and result.exit_status == 1
    assert "no gating metric" in result.headline()


@pytest.mark.parametrize("only", [n for n, m in ALL_METRICS.items() if m.gating and m.episode_key])
def test_a_gated_metric_the_run_does_not_have_fails_instead_of_being_skipped(tmp_path: Path, only: str) -> None:
    """A golden whose gated metric the run lacks (an episode suite whose episodes all errored) was
    'in the golden but not in the run: skipped', and the gate passed having compared nothing."""
    suite = make_suite(tmp_path, 6)
    golden = _golden_for(tmp_path, suite, 0.9)
    golden["metrics"] = {only: {**golden["metrics"]["score"], "value": 1.0}}
    result = gate(make_run(suite, 0.0, seed=3), golden)
    assert result.status == "incomplete" and result.exit_status == 1, result.headline()
    assert only in result.headline() and "cannot pass" in result.headline()


def test_a_run_with_no_measured_value_is_incomplete_not_a_regression(tmp_path: Path) -> None:
    """An all-error run has NaN metrics: the gate said 'credible regression in ...' over rows of
    n/a; it fails saying there is nothing to compare."""
    suite = make_suite(tmp_path, 6)
    golden = _golden_for(tmp_path, suite, 0.9)
    run = make_run(suite, 0.5, seed=3)
    for m in run.summary["overall"]["metrics"].values():
        m["value"] = float("nan")
    result = gate(run, golden)
    assert result.status == "incomplete" and result.exit_status == 1
    assert "nothing to compare, cannot pass" in result.headline() and "credible regression" not in result.headline()
