"""Every field that results.jsonl and the report keep is bounded, the cut marked; the raw output
stays whole in samples.jsonl. (The finding: 40 samples of a 5.5 MB output made 1.1 GB of
results and a 220 MB report.) And a golden that holds no gating metric is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.decide.golden import GoldenError, load_golden
from leader_eval.runs.evaluate import read_run, run
from leader_eval.runs.options import RunOptions
from leader_eval.stats.metrics import ALL_METRICS
from leader_eval.store.run_store import FIELD_CAP, RESULTS, SAMPLES, cap_fields, cut_text
from tests.conftest import MINIMAL_SUITE
from tests.support.scripted import ScriptedBackend, call


def test_cap_fields_cuts_strings_lists_and_nested_values_and_marks_each_cut() -> None:
    assert cut_text("abcdef", 4) == "abcd…[cut 2 chars]"
    small = {"a": "x" * 10, "b": [1, 2], "c": {"d": "y"}}
    assert cap_fields(small, 100) == small
    rec = {
        "text": "x" * 500,
        "calls": [{"name": f"t{i}", "arguments": {"m": "z" * 30}} for i in range(100)],
        "deep": {"k": "w" * 500, "n": 7},
        "passed": True,
    }
    out = cap_fields(rec, 200)
    assert out["text"] == "x" * 200 + "…[cut 300 chars]"
    assert 0 < len(out["calls"]) < 100 and all(set(c) == {"name", "arguments"} for c in out["calls"])
    assert out["cut"]["calls"] == f"…[cut {100 - len(out['calls'])} of 100 items]"
    assert out["deep"]["n"] == 7 and out["deep"]["k"].endswith("…[cut 300 chars]") and out["passed"] is True
    for key in ("calls", "deep"):
        assert len(json.dumps(out[key])) < 2 * 200 + 100  # about the cap, whatever the shape


def test_a_huge_output_is_whole_in_samples_and_bounded_in_results_and_the_report(tmp_path: Path) -> None:
    suite = tmp_path / "mini.yaml"
    suite.write_text(MINIMAL_SUITE)
    huge = call("send_message_to_chat", message="goal " * 200_000)  # a 1 MB argument
    out = tmp_path / "run"
    options = RunOptions(model="scripted:test", seed=1, samples=2, out=out, progress=False, cache=False)
    run(suite, options, backend=ScriptedBackend([huge]))
    for line in (out / SAMPLES).read_text().splitlines():
        assert json.loads(line)["text"] == huge  # the raw output, whole
    for line in (out / RESULTS).read_text().splitlines():
        assert len(line) < 8 * FIELD_CAP, "each field about FIELD_CAP at most"
        rec = json.loads(line)
        message = rec["calls"][0]["arguments"]["message"]
        assert message.startswith("goal goal") and "…[cut " in message
    assert all(s.calls for s in read_run(out).scores)  # read back like any results
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "[cut " in page and len(page) < 1_500_000  # not the 4+ MB of every copy of the output


def _golden(tmp_path: Path) -> tuple[Path, Path]:
    suite = tmp_path / "mini.yaml"
    suite.write_text(MINIMAL_SUITE)
    out = tmp_path / "run"
    options = RunOptions(model="scripted:test", seed=1, samples=2, out=out, progress=False, cache=False)
    run(suite, options, backend=ScriptedBackend([call("send_message_to_chat", message="our goal: build a bridge")]))
    golden = tmp_path / "golden"
    assert main(["gate", str(out), "--golden", str(golden), "--update-golden"]) == 0
    (path,) = golden.glob("*/*.json")
    return out, path


@pytest.mark.parametrize("kept", ["lenient_format_rate", "pass@2", "not_a_metric"])
def test_a_golden_without_a_gating_metric_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kept: str
) -> None:
    """The finding: a golden holding only lenient_format_rate let a 0.000 run pass against 1.000."""
    run_dir, path = _golden(tmp_path)
    data = json.loads(path.read_text())
    data["metrics"] = {kept: {**next(iter(data["metrics"].values())), "value": 1.0}}
    path.write_text(json.dumps(data, indent=2))
    with pytest.raises(GoldenError, match="no gating metric") as err:
        load_golden(path)
    line = 1 + path.read_text().splitlines().index('  "metrics": {')
    assert str(err.value).startswith(f"{path}:{line}: ")
    capsys.readouterr()
    assert main(["gate", str(run_dir), "--golden", str(path)]) == 2
    assert "no gating metric" in capsys.readouterr().err
    # the list of gating metrics is the metric table's, not a copy
    gating = [n for n, m in ALL_METRICS.items() if m.gating]
    data["metrics"] = {gating[-1]: data["metrics"][kept]}
    path.write_text(json.dumps(data, indent=2))
    assert load_golden(path) is not None
