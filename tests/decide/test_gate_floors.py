"""The suite's ``gate:`` section (issue 19): floors and ceilings, the power guard, and the rules
that keep it out of the suite's content hash and in the golden.

Defect 2 of issue 19: a total collapse (strict format 0.40 -> 0.00, 5 cases x 2 samples) passed
the gate without a word, and a suite could not state an absolute floor.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leader_eval.decide.gate import gate
from leader_eval.decide.golden import GoldenError, build_golden, load_golden, update_golden
from leader_eval.errors import SuiteError
from leader_eval.report.gate import format_gate_table, gate_markdown
from leader_eval.runs.evaluate import Run
from leader_eval.scoring.scorer import SampleScore
from leader_eval.suite.gate_spec import gate_problem
from leader_eval.suite.load import Suite, load_suite
from tests.support.runs import run_from_scores, suite_yaml

ROOT = Path(__file__).resolve().parents[2]


def _suite(tmp_path: Path, gate_block: str = "", n_cases: int = 5, name: str = "s.yaml") -> Suite:
    path = tmp_path / name
    path.write_text(suite_yaml(n_cases) + gate_block, encoding="utf-8")
    return load_suite(path)


def _sample(cid: str, j: int, *, strict: bool, passed: bool) -> SampleScore:
    reason = None if passed else ("wrong_value" if strict else "unparseable")
    return SampleScore(
        case_id=cid,
        index=j,
        outcome="ok",
        passed=passed,
        hard_fail=False,
        reason=reason,
        strict_format=strict,
        lenient_format=strict,
        tool_correct=passed,
        leaked=False,
        partial_credit=1.0 if passed else 0.0,
    )


def _golden_run(suite: Suite, seed: int = 1) -> Run:
    """5 cases x 2 samples: strict format 0.40 (4 of 10, one in each of 4 cases), score 0.20."""
    marks = {0: (True, True), 2: (True, False), 4: (True, True), 6: (True, False)}  # sample -> (strict, passed)
    scores = []
    for i, case in enumerate(suite.cases):
        for j in range(2):
            strict, passed = marks.get(2 * i + j, (False, False))
            scores.append(_sample(case.id, j, strict=strict, passed=passed))
    return run_from_scores(suite, scores, n=2, seed=seed)


def _collapsed_run(suite: Suite) -> Run:
    """Every output truncated: nothing in the protocol's format, nothing passes."""
    scores = [_sample(c.id, j, strict=False, passed=False) for c in suite.cases for j in range(2)]
    return run_from_scores(suite, scores, n=2, seed=7)


# ---------------------------------------------------------------------------------------------
# defect 2: a collapse on a small suite


def test_a_collapse_on_a_small_suite_no_longer_passes_silently(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    golden = build_golden(_golden_run(suite))
    collapsed = _collapsed_run(suite)
    # the statistics alone cannot see it at this size; the gate now says so on its line
    soft = gate(collapsed, golden, suite_gate=suite.gate)
    assert soft.status == "pass" and soft.exit_status == 0
    assert "UNDERPOWERED" in soft.headline() and "samples/case" in soft.headline()
    assert "UNDERPOWERED" in gate_markdown(soft).splitlines()[0]  # the step summary's heading
    assert any(m.startswith("power to catch a 0.1 drop") for m in soft.messages)
    # in CI mode an underpowered gate without floors fails, saying how to fix it
    strict = gate(collapsed, golden, strict=True, suite_gate=suite.gate)
    assert strict.exit_status == 1 and strict.status == "fail"
    line = strict.headline()
    assert "underpowered in CI mode" in line and "gate: min:" in line and "gate: underpowered:" in line
    assert "\n" not in line


def test_a_declared_floor_fails_the_collapse_on_the_point_estimate_or_the_bound(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "gate:\n  min: {strict_format_rate: 0.3}\n  judge: point\n")
    golden = build_golden(_golden_run(suite))
    result = gate(_collapsed_run(suite), golden, suite_gate=suite.gate)
    assert result.exit_status == 1
    assert "beyond the suite's limit: strict_format_rate (0.000 < 0.3)" in result.headline()
    row = next(r for r in result.rows if r.kind == "floor")
    assert row.verdict == "fail" and "judge: point" in row.explanation
    # judged on the bound (the default), 0 of 10 over 5 cases is credibly below 0.5 but not below 0.3
    bound = _suite(tmp_path, "gate:\n  min: {strict_format_rate: 0.3}\n", name="b.yaml")
    assert gate(_collapsed_run(bound), golden, suite_gate=bound.gate).exit_status == 0
    bound5 = _suite(tmp_path, "gate:\n  min: {strict_format_rate: 0.5}\n", name="c.yaml")
    assert gate(_collapsed_run(bound5), golden, suite_gate=bound5.gate).exit_status == 1
    # the same checkpoint at the golden's quality passes its floor
    assert gate(_golden_run(suite, seed=5), golden, suite_gate=suite.gate).exit_status == 0
    assert "strict_format_rate" in format_gate_table(result) and ">= 0.3" in format_gate_table(result)


def test_ceilings_and_a_floor_on_a_metric_the_run_lacks(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "gate:\n  max: {leak_rate: 0.0}\n  min: {goal_rate: 0.5}\n  judge: point\n")
    golden = build_golden(_golden_run(suite))
    result = gate(_golden_run(suite), golden, suite_gate=suite.gate)
    rows = {r.metric: r for r in result.rows if r.kind in ("floor", "ceiling")}
    assert rows["leak_rate"].verdict == "pass" and rows["leak_rate"].kind == "ceiling"
    # no episode in this run: a floor that cannot be checked is not met
    assert rows["goal_rate"].verdict == "fail" and "no value of goal_rate" in rows["goal_rate"].explanation


def test_ci_mode_accepts_an_acknowledged_or_floored_gate(tmp_path: Path) -> None:
    ack = _suite(tmp_path, 'gate:\n  underpowered: "five cases: a smoke test"\n', name="a.yaml")
    golden = build_golden(_golden_run(ack))
    same = _golden_run(ack, seed=3)
    result = gate(same, golden, strict=True, suite_gate=ack.gate)
    assert result.exit_status == 0 and "acknowledged: five cases: a smoke test" in result.headline()
    floors = (
        "gate:\n  min: {score: 0.0, strict_format_rate: 0.0, tool_accuracy: 0.0}\n"
        "  max: {hard_fail_rate: 0.0, leak_rate: 0.0}\n  judge: point\n"
    )
    floored = _suite(tmp_path, floors, name="f.yaml")
    assert gate(same, golden, strict=True, suite_gate=floored.gate).exit_status == 0
    # a floor covers only its own metric: the others still need one (or the acknowledgement)
    one = _suite(tmp_path, "gate:\n  min: {score: 0.0}\n", name="o.yaml")
    refused = gate(same, golden, strict=True, suite_gate=one.gate)
    assert refused.exit_status == 1 and "score" not in refused.power_refused and refused.power_refused


def test_a_well_powered_gate_prints_its_power_and_no_warning(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "gate:\n  detect: 0.6\n", n_cases=30)
    scores = [_sample(c.id, j, strict=True, passed=j < 2) for c in suite.cases for j in range(4)]
    golden = build_golden(run_from_scores(suite, scores, n=4, seed=1))
    result = gate(run_from_scores(suite, scores, n=4, seed=2), golden, strict=True, suite_gate=suite.gate)
    assert result.exit_status == 0 and "UNDERPOWERED" not in result.headline()
    line = next(m for m in result.messages if m.startswith("power to catch a 0.6 drop"))
    assert "score 100%" in line and result.underpowered == []


# ---------------------------------------------------------------------------------------------
# the section: validated at load, out of the hash, copied into the golden, the suite's wins


@pytest.mark.parametrize(
    ("block", "line", "says"),
    [
        ("gate:\n  min: {scoer: 0.5}\n", 2, "unknown metric 'scoer'"),
        ("gate:\n  min:\n    score: 0.5\n    hard_fail_rate: 0.1\n", 4, "hard_fail_rate is lower-is-better"),
        ("gate:\n  max: {score: 0.9}\n", 2, "score is higher-is-better"),
        ("gate:\n  min: {steps_to_goal: 0.5}\n", 2, "not a proportion"),
        ("gate:\n  min: {score: 1.5}\n", 2, "1.5 is greater than the maximum of 1"),
        ("gate:\n  max: {leak_rate: -0.1}\n", 2, "less than the minimum of 0"),
        ("gate:\n  min: {score: yes}\n", 2, "is not of type 'number'"),
        ("gate:\n  judge: median\n", 2, "judge"),
        ("gate:\n  detect: 0\n", 2, "detect"),
        ("gate:\n  detect: 1\n", 2, "detect"),
        ('gate:\n  underpowered: "  "\n', 2, "underpowered"),
        ("gate:\n  min_score: 0.5\n", 2, "min_score"),
        ("gate: [score]\n", 1, "gate"),
    ],
)
def test_a_bad_gate_section_is_one_line_naming_file_and_line(tmp_path: Path, block: str, line: int, says: str) -> None:
    head_lines = suite_yaml(5).count("\n")
    with pytest.raises(SuiteError) as err:
        _suite(tmp_path, block)
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 's.yaml'}:{head_lines + line}:"), text
    assert says in text and "\n" not in text


def test_the_gate_section_is_checked_against_the_metric_table_not_a_copy() -> None:
    from leader_eval.stats.metrics import ALL_METRICS

    for name, spec in ALL_METRICS.items():
        key = "min" if spec.higher_is_better else "max"
        ok = gate_problem({key: {name: 0.5}}) is None
        assert ok == spec.proportion, name


def test_the_gate_section_is_left_out_of_the_content_hash(tmp_path: Path) -> None:
    plain = _suite(tmp_path, name="plain.yaml").content_hash
    for i, block in enumerate(
        (
            "gate:\n  min: {score: 0.6}\n",
            "gate:\n  min: {score: 0.7}\n  judge: point\n  detect: 0.2\n",
            "\n# the CI contract\ngate:\n  max_hard_fails: 0\n  # a ceiling later\n",
            "gate: {max_leaks: 1}  # budgets\n",
            "gate:\n  underpowered: |\n    a pilot suite\n    of five cases\n",
        )
    ):
        assert _suite(tmp_path, block, name=f"g{i}.yaml").content_hash == plain, block
    # anywhere in the file
    text = suite_yaml(5)
    at = text.index("tools:")
    (tmp_path / "mid.yaml").write_text(text[:at] + "gate:\n  min: {score: 0.1}\n" + text[at:], encoding="utf-8")
    (tmp_path / "top.yaml").write_text("gate: {detect: 0.3}\n" + text, encoding="utf-8")
    assert load_suite(tmp_path / "mid.yaml").content_hash == plain
    assert load_suite(tmp_path / "top.yaml").content_hash == plain
    # everything else still counts
    assert _suite(tmp_path, "gate:\n  min: {score: 0.6}\n", n_cases=6, name="six.yaml").content_hash != plain


def test_the_committed_goldens_keep_their_suite_hash() -> None:
    for suite in ("leader_core", "leader_episodes"):
        golden = json.loads((ROOT / "golden" / suite / "main.json").read_text(encoding="utf-8"))
        assert load_suite(ROOT / "suites" / f"{suite}.yaml").content_hash == golden["suite_hash"]


def test_an_anchor_inside_the_gate_section_used_elsewhere_is_refused(tmp_path: Path) -> None:
    """Content the hash leaves out must not reach the rest of the suite: an alias of an anchor in
    ``gate:`` would change the suite's content without changing its hash."""
    text = suite_yaml(5).replace("name: mini", "name: *n", 1)
    (tmp_path / "a.yaml").write_text("gate:\n  underpowered: &n mini\n" + text, encoding="utf-8")
    with pytest.raises(SuiteError, match=r"a\.yaml:1: gate: the section must stand alone"):
        load_suite(tmp_path / "a.yaml")
    # the other way round is fine: the anchor's text is hashed where it is defined
    (tmp_path / "b.yaml").write_text(
        suite_yaml(5).replace("name: mini", "name: &n mini", 1) + "gate:\n  underpowered: *n\n", encoding="utf-8"
    )
    assert load_suite(tmp_path / "b.yaml").gate == {"underpowered": "mini"}


def test_update_golden_copies_the_section_and_the_suites_own_wins(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "gate:\n  max_hard_fails: 0\n  min: {strict_format_rate: 0.3}\n  judge: point\n")
    res = update_golden(_golden_run(suite), tmp_path / "g", suite=suite)
    assert res.written, res.reason
    golden = load_golden(res.path)
    assert golden is not None
    assert golden["gate"] == {"max_hard_fails": 0, "min": {"strict_format_rate": 0.3}, "judge": "point"}
    assert golden["budgets"] == {"max_hard_fails": 0}
    # gated without the suite at hand, the copy applies
    assert gate(_collapsed_run(suite), golden).exit_status == 1
    # the suite's own section wins (its floor was lowered since the golden was written)
    lowered = _suite(tmp_path, "gate:\n  min: {strict_format_rate: 0.0}\n", name="low.yaml")
    assert gate(_collapsed_run(suite), golden, suite_gate=lowered.gate).exit_status == 0


def test_a_golden_whose_gate_copy_is_malformed_is_refused(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    golden = {**build_golden(_golden_run(suite)), "gate": {"min": {"score": 2}}}
    with pytest.raises(GoldenError, match=r"g\.json:1: refused golden file: its copy of the suite's gate: min"):
        gate(_golden_run(suite), golden, golden_file=Path("g.json"))


def test_the_power_guard_is_bounded_for_a_golden_claiming_huge_sample_counts(tmp_path: Path) -> None:
    """A hostile golden (a billion samples per case) costs the guard no enumeration over its counts:
    the gate still answers, with its power for the run's samples."""
    suite = _suite(tmp_path, n_cases=30)
    scores = [_sample(c.id, j, strict=True, passed=j < 2) for c in suite.cases for j in range(4)]
    golden = build_golden(run_from_scores(suite, scores, n=4, seed=1))
    for rec in golden["cases"].values():
        rec["n_samples"] = 10**9
    result = gate(run_from_scores(suite, scores, n=4, seed=2), golden)
    assert result.status == "pass" and {p.metric for p in result.power} >= {"score", "strict_format_rate"}
    assert all(0.0 <= p.power <= 1.0 for p in result.power)
