"""Golden baselines (the file: build, update, load, sampling identity and drift), end to end on
synthetic runs with real result shapes; the gate that reads them: test_gate.py.

Runs are built the way ``evaluate.score_run`` builds them: per-sample ``SampleScore`` records ->
``aggregate.case_results`` -> ``aggregate.summarize`` over a real suite loaded from YAML, so a
change in those shapes breaks these tests rather than drifting past them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leader_eval.decide.gate import gate, gate_run_dir
from leader_eval.decide.golden import (
    GoldenError,
    build_golden,
    golden_path,
    load_golden,
    parse_tolerances,
    portable_model_id,
    update_golden,
    write_golden,
)
from leader_eval.errors import LeaderEvalError
from leader_eval.report.gate import format_gate_table
from leader_eval.runs.evaluate import Run
from leader_eval.scoring.aggregate import case_results
from leader_eval.stats.metrics import ALL_METRICS
from leader_eval.store.formats import SCORER_VERSION
from tests.support.runs import (
    difficulties,
    make_run,
    make_suite,
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
    assert score["tolerance"] == ALL_METRICS["score"].tolerance
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
    assert new["metrics"]["leak_rate"]["tolerance"] == ALL_METRICS["leak_rate"].tolerance


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
