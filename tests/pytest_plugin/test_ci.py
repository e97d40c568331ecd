"""CI conventions: the GitHub step summary and annotations, JUnit properties as JSON, and the
workflow example in docs/examples/leader-eval.yml, run as written. Models are replays of the run
committed under tests/data (recorded by leader-eval 0.1.0: both cases fail, one sample each)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

# numpy can load only once per process: import what in-process runs need before pytester's
# sys.modules snapshot, which would drop it after the first test that imported it
import leader_eval.runs.evaluate  # noqa: F401

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "v0_1_0"
REPLAY = f"replay:{DATA / 'run'}"


def _suite(pytester: pytest.Pytester, rel: str = "evals/minimal.yaml") -> Path:
    """The recorded suite, asking for the one sample per case the committed run holds."""
    path = pytester.path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((DATA / "minimal.yaml").read_text().replace("samples: 2 ", "samples: 1 "))
    return path


def _line_of_case(text: str, case_id: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.strip() == f"- id: {case_id}")


def _parse_annotations(stdout: list[str]) -> list[tuple[str, dict[str, str], str]]:
    out = []
    for line in stdout:
        if line.startswith("::error ") or line.startswith("::warning "):
            head, _, message = line[2:].partition("::")
            level, _, props = head.partition(" ")
            fields = dict(p.split("=", 1) for p in props.split(","))
            out.append((level, fields, message))
    return out


@pytest.mark.parametrize("mode", ["strict", "soft"])
def test_github_run_writes_step_summary_and_annotations_at_case_lines(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    suite = _suite(pytester)
    summary = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    for key, value in {
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_RUN_ID": "42",
    }.items():
        monkeypatch.setenv(key, value)
    res = pytester.runpytest_subprocess(
        f"--le-model={REPLAY}", f"--le-eval-mode={mode}", "--le-allow-missing-golden", "-p", "no:cacheprovider"
    )
    assert res.ret == (1 if mode == "strict" else 0), res.stdout.str()
    md = summary.read_text()
    assert md.startswith("### ") and "suite minimal" in md and "no golden baseline" in md
    # read on GitHub: the report is named inside the uploaded artifact, never by a runner-local path
    (run_dir,) = (pytester.path / "runs").iterdir()
    assert str(pytester.path) not in md and "](/" not in md and "file:" not in md
    from leader_eval.inert import markdown

    where = markdown(f"runs/{run_dir.name}/report.html")
    assert f"Report: {where} in the uploaded artifact {markdown('leader-eval-runs')}" in md
    assert "([artifacts of this workflow run](https://github.com/o/r/actions/runs/42#artifacts))" in md
    found = _parse_annotations(res.stdout.lines)
    text = suite.read_text()
    assert sorted(f["title"].rsplit("%3A%3A", 1)[-1] for _, f, _ in found) == ["greets_team", "states_goal"]
    for level, fields, message in found:
        case_id = fields["title"].rsplit("%3A%3A", 1)[-1]
        assert fields["file"] == "evals/minimal.yaml"
        assert int(fields["line"]) == _line_of_case(text, case_id)
        assert "1 of 1 samples failed" in message
        # strict: the case fails the job; soft: the gate decides, the case is a warning
        assert level == ("error" if mode == "strict" else "warning")


def test_without_github_actions_nothing_is_annotated(pytester: pytest.Pytester, monkeypatch) -> None:
    _suite(pytester)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    res = pytester.runpytest_subprocess(f"--le-model={REPLAY}", "--le-eval-mode=strict", "-p", "no:cacheprovider")
    assert res.ret == 1 and not _parse_annotations(res.stdout.lines)


def test_junit_properties_are_json(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    res = pytester.runpytest_subprocess(
        f"--le-model={REPLAY}", "--junitxml=out.xml", "--le-allow-missing-golden", "-p", "no:cacheprovider"
    )
    assert res.ret == 0, res.stdout.str()
    tree = ET.parse(pytester.path / "out.xml")
    names = [tc.get("name") for tc in tree.iter("testcase")]
    assert sorted(names) == ["greets_team", "leader-eval-gate", "states_goal"]
    props = [(p.get("name"), p.get("value")) for p in tree.iter("property")]
    cases = [json.loads(v) for k, v in props if k == "leader_eval_case"]
    assert sorted(c["case_id"] for c in cases) == ["greets_team", "states_goal"]
    assert all(c["n_samples"] == 1 and c["suite"] == "minimal" and c["score"] == 0.0 for c in cases)
    (gate,) = [json.loads(v) for k, v in props if k == "leader_eval_gate"]
    assert gate == {"suite": "minimal", "status": "missing"}


def _workflow_gate_step() -> dict:
    workflow = yaml.safe_load((ROOT / "docs" / "examples" / "leader-eval.yml").read_text())
    (step,) = [s for s in workflow["jobs"]["gate"]["steps"] if s.get("id") == "gate"]
    return step


#: a small support-agent suite for the workflow test: 2 cases x 2 samples of 12 tokens, a fixed seed
SUPPORT_SUITE = """\
name: support
protocol: json
sampling: {temperature: 0.7, max_tokens: 12, samples: 2, seed: 11}
scaffold:
  messages:
    - role: system
      content: |
        You are a support agent. Tools: {{ tools_json }}
        Reply with one JSON object like {"tool": "reply", "arguments": {"text": "hi"}}.
    - role: user
      content: "{{ request }}"
tools:
  - name: reply
    description: Answer the customer.
    parameters:
      type: object
      properties:
        text: {type: string, minLength: 1}
      required: [text]
      additionalProperties: false
cases:
  - id: greet
    vars: {request: "Hello?"}
    expect:
      calls:
        - tool: reply
  - id: refund
    tags: [billing]
    vars: {request: "I want my money back."}
    expect:
      calls:
        - tool: reply
gate:
  underpowered: "a 2-case smoke suite: it cannot catch a 0.10 drop; the full suite gates"
"""


def _run_step(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.model
def test_the_documented_workflow_gates_a_new_checkpoint_against_the_baseline(pytester: pytest.Pytester) -> None:
    """The workflow's gate step, run as written, on a new checkpoint (a copy of the embedded GGUF at
    the path the workflow names): without a baseline it fails naming the file and the command; with
    the baseline made from a trusted run (the embedded model) it gates the checkpoint and passes."""
    from leader_eval.cli.app import main
    from leader_eval.sampling.backends.local import embedded_model_path

    suite = pytester.path / "evals" / "support.yaml"
    suite.parent.mkdir()
    suite.write_text(SUPPORT_SUITE)
    step = _workflow_gate_step()
    assert "pytest evals/" in step["run"] and "--le-update-golden" not in step["run"]
    model = step["env"]["LE_MODEL"]
    assert model.startswith("gguf:")
    checkpoint = pytester.path / model.removeprefix("gguf:")
    checkpoint.parent.mkdir(parents=True)
    shutil.copy(embedded_model_path(), checkpoint)
    env = {**os.environ, **step["env"]}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(pytester.path / "summary.md"))
    env["GITHUB_WORKSPACE"] = str(pytester.path)
    command = step["run"].replace("python -m pytest", f"{shlex.quote(sys.executable)} -m pytest", 1)

    # no baseline yet: the new checkpoint is compared with nothing, so the job fails (0.2 passed it)
    missing = _run_step(command, pytester.path, env)
    out = missing.stdout + missing.stderr
    assert missing.returncode == 1, out
    (line,) = {x for x in out.splitlines() if x.startswith("gate FAIL (suite support")}  # item and summary
    assert "no golden baseline 'main' at golden/support/main.json" in line
    assert "--le-update-golden --le-golden-dir golden --le-baseline main" in line
    assert not (pytester.path / "golden").exists()

    # the baseline, from a run of the trusted model, with the CLI command the docs show
    trusted = pytester.path / "trusted"
    assert main(["run", str(suite), "--model", "local:smollm2", "--out", str(trusted), "-q"]) == 0
    assert main(["update-golden", str(trusted), "--golden", str(pytester.path / "golden")]) == 0
    golden = json.loads((pytester.path / "golden" / "support" / "main.json").read_text())
    assert golden["baseline"] == "main" and golden["model_id"] == "local:smollm2"

    gated = _run_step(command, pytester.path, env)
    assert gated.returncode == 0, gated.stdout + gated.stderr
    assert "gate PASS (suite support, baseline main, label gguf-candidate.gguf)" in gated.stdout
    summary = (pytester.path / "summary.md").read_text()
    assert "gate PASS" in summary and (pytester.path / "leader-eval.xml").exists()
    # the checkpoint's run directory is named by its identity as well as its label and seed
    (run_dir,) = (pytester.path / "runs").iterdir()
    assert run_dir.name.startswith("support__gguf-candidate.gguf__") and "__seed11__" in run_dir.name
    # the session's run gets its report.html, named in the terminal summary and linked from the summary
    (shown,) = re.findall(r"support: report (\S+report\.html)", gated.stdout)
    report = Path(shown) if Path(shown).is_absolute() else pytester.path / shown
    assert report.is_file() and "<html" in report.read_text(encoding="utf-8")[:2000].lower()
    assert "in the uploaded artifact leader" in summary and str(pytester.path) not in summary
    assert json.loads((run_dir / "gate.json").read_text())["gates"]["main"]["status"] == "pass"


#: issue 19's scenario: a 5-case support-agent suite of 3 tools, 2 samples per case (the golden's seed 11)
COLLAPSE_SUITE = """\
name: support
protocol: json
sampling: {temperature: 0.2, max_tokens: 64, samples: 2, seed: 11}
scaffold:
  messages:
    - role: system
      content: |
        You are a support agent. You act only by calling a tool. Reply with exactly one JSON object:
        {"tool": "<tool name>", "arguments": {...}}
        Tools: {{ tools_json }}
    - role: user
      content: "Can you help me?"
    - role: assistant
      content: '{"tool": "reply", "arguments": {"text": "Of course! What can I do for you?"}}'
    - role: user
      content: "{{ request }}"
tools:
  - name: reply
    description: Answer the customer.
    parameters:
      type: object
      properties: {text: {type: string, minLength: 1}}
      required: [text]
      additionalProperties: false
  - name: lookup_order
    description: Find an order by its number.
    parameters:
      type: object
      properties: {order: {type: string, minLength: 1}}
      required: [order]
      additionalProperties: false
  - name: escalate
    description: Hand the conversation to a human.
    parameters:
      type: object
      properties: {reason: {type: string, minLength: 1}}
      required: [reason]
      additionalProperties: false
cases:
  - id: greet
    vars: {request: "Hello?"}
    expect: {calls: [{tool: reply}]}
  - id: refund
    vars: {request: "I want my money back."}
    expect: {calls: [{tool: reply}]}
  - id: order_status
    tags: [lookup]
    vars: {request: "Where is order 1234?"}
    expect: {calls: [{tool: lookup_order}]}
  - id: angry
    vars: {request: "This is the third time I ask. Get me a manager."}
    expect: {calls: [{tool: escalate}]}
  - id: thanks
    vars: {request: "Thanks, that is all."}
    expect: {calls: [{tool: reply}]}
"""

#: the suite's floor (judged on the interval's bound, the default) and its acknowledgement that a
#: 5 x 2 suite cannot catch a 0.10 drop in the other metrics
FLOOR = """gate:
  min: {strict_format_rate: 0.5}
  underpowered: "a 5-case example suite; the strict-format floor is its contract"
"""


@pytest.mark.model
def test_a_collapsed_checkpoint_fails_the_documented_gate_by_its_floor_and_by_the_power_guard(
    pytester: pytest.Pytester,
) -> None:
    """Issue 19's scenario as a test. A golden from the embedded model; a new checkpoint (a copy
    of its GGUF at the workflow's path, another seed than the golden's, a fresh sample cache so
    nothing is replayed) gated through the workflow's own command (`pytest -n 2`, CI mode). Collapsed
    by its settings (every output cut at 2 tokens) it fails, exit 1, with the reason on the gate
    line: by the floor the suite declares, and, when the suite declares none, by the power guard.
    At the golden's settings it passes at its fixed seed."""
    from leader_eval.cli.app import main
    from leader_eval.sampling.backends.local import embedded_model_path

    suite = pytester.path / "evals" / "support.yaml"
    suite.parent.mkdir()
    step = _workflow_gate_step()
    assert "--le-golden-strict" in step["run"] and "-n 2" in step["run"]
    checkpoint = pytester.path / step["env"]["LE_MODEL"].removeprefix("gguf:")
    checkpoint.parent.mkdir(parents=True)
    shutil.copy(embedded_model_path(), checkpoint)
    env = {**os.environ, **step["env"]}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("GITHUB_ACTIONS", None)
    command = step["run"].replace("python -m pytest", f"{shlex.quote(sys.executable)} -m pytest", 1)

    # the baseline: a trusted run of the embedded model at the suite's settings (seed 11)
    suite.write_text(COLLAPSE_SUITE)
    trusted = pytester.path / "trusted"
    assert main(["run", str(suite), "--model", "local:smollm2", "--out", str(trusted), "-q", "--no-cache"]) == 0
    assert main(["update-golden", str(trusted), "--golden", str(pytester.path / "golden")]) == 0
    golden = json.loads((pytester.path / "golden" / "support" / "main.json").read_text())
    assert golden["metrics"]["strict_format_rate"]["value"] >= 0.5, golden["metrics"]  # what the floor guards

    def gate(tag: str, *extra: str) -> tuple[int, str, str]:
        """The workflow's command on the new checkpoint, seed 12, with its own cache and run folder."""
        env["LEADER_EVAL_CACHE_DIR"] = str(pytester.path / f"cache-{tag}")
        extra_args = " ".join(["--le-seed=12", f"--le-run-dir=runs-{tag}", *extra])
        done = _run_step(command.replace("--le-run-dir=runs", extra_args), pytester.path, env)
        out = done.stdout + done.stderr
        (run_dir,) = (pytester.path / f"runs-{tag}").iterdir()
        manifest = json.loads((run_dir / "manifest.json").read_text())
        stats = manifest["sampling_stats"]
        # nothing replayed: every sample of the new checkpoint was drawn from it (10 = 5 cases x 2)
        assert stats["cache_hits"] == 0 and stats["reused"] == 0 and stats["sampled"] == 10, (stats, out)
        assert manifest["identity"]["run_seed"] == 12 and manifest["identity"]["model_id"].startswith("gguf:")
        lines = [x for x in out.splitlines() if x.startswith("gate ") and "(suite support" in x]
        assert lines, out
        return done.returncode, lines[-1], out

    # collapsed, the suite declaring its floor: the floor fails it, on the gate line
    suite.write_text(COLLAPSE_SUITE + FLOOR)
    status, line, out = gate("floor", "--le-max-tokens=2")
    assert status == 1 and line.startswith("gate FAIL"), line
    assert "beyond the suite's limit: strict_format_rate (0.000 < 0.5)" in line, line
    assert "max_tokens 2 vs the golden's 64" in out, out  # the sampling drift is named too

    # collapsed, no floor: CI mode's power guard fails it (0.2 passed this: p 0.089, "pass")
    suite.write_text(COLLAPSE_SUITE)
    status, line, _ = gate("power", "--le-max-tokens=2")
    assert status == 1 and line.startswith("gate FAIL"), line
    assert "underpowered in CI mode" in line and "gate: min:/max:" in line, line

    # the same checkpoint at the golden's settings (its own fixed seed) passes, floor included
    suite.write_text(COLLAPSE_SUITE + FLOOR)
    status, line, _ = gate("settings")
    assert status == 0 and line.startswith("gate PASS"), line


def test_docs_show_the_tested_workflow_and_every_option() -> None:
    doc = (ROOT / "docs" / "pytest.md").read_text()
    workflow = (ROOT / "docs" / "examples" / "leader-eval.yml").read_text()
    assert f"```yaml\n{workflow.rstrip()}\n```" in doc
    from leader_eval.pytest_plugin.config import CMDLINE_ONLY, PLUGIN_OPTIONS
    from leader_eval.runs.options import SAMPLING_OPTIONS

    for opt in (*SAMPLING_OPTIONS, *PLUGIN_OPTIONS):
        assert f"`--le-{opt.name}`" in doc and f"`leader_eval_{opt.dest}`" in doc, opt.name
    for name in CMDLINE_ONLY:
        assert f"`--le-{name}" in doc
    from leader_eval.runs.options import TRUSTED_OPTIONS

    for opt in TRUSTED_OPTIONS:
        assert f"`--le-{opt.name} " in doc and f"`leader_eval_{opt.dest}s`" in doc, opt.name
    assert "`leader_eval_suites`" in doc


def test_strict_mode_reports_a_quarantined_failing_case_as_xfail(pytester: pytest.Pytester) -> None:
    from datetime import date, timedelta

    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")  # the suite the golden was made from
    shutil.copytree(DATA / "golden", pytester.path / "golden")
    gp = pytester.path / "golden" / "minimal" / "local-smollm2.json"
    golden = json.loads(gp.read_text())
    today = date.today()
    golden["quarantine"] = [
        {"case": "greets_team", "reason": "flaky greeting", "date": str(today), "expires": str(today + timedelta(30))}
    ]
    gp.write_text(json.dumps(golden))
    res = pytester.runpytest_subprocess(
        "mini.yaml",
        f"--le-model={REPLAY}",
        "--le-samples=1",
        "--le-eval-mode=strict",
        "--le-baseline=local-smollm2",  # the 0.1.0 golden, read as the baseline of its name
        "-rfx",
        "-p",
        "no:cacheprovider",
    )
    res.stdout.fnmatch_lines(["*FAILED mini.yaml::states_goal*", "*XFAIL mini.yaml::greets_team*quarantined*"])
    assert res.ret == 1  # the case that is not quarantined still fails strict mode
