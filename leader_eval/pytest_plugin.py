"""pytest plugin: suites as test files, one item per case, gated against golden baselines.

Hooks follow pytest's reference (https://docs.pytest.org/en/stable/reference/reference.html#hooks).
State lives in one dataclass in ``config.stash`` (syrupy's pattern).

How sampling meets xdist. A suite is sampled once, concurrently, in its file collector's
``setup()`` (``leader_eval.evaluate.run``, the same call as ``leader-eval run``, writing the same
run directory); case items only score. Under xdist's default ``load`` mode the cases of one file
would land on several workers and each would sample the suite again, so when the user asks for
``-n N`` without naming a mode the plugin picks ``loadfile``: a suite's cases go to one worker and
every case is sampled exactly once. Per-case records travel to the controller in
``user_properties`` (builtin types only), where ``pytest_sessionfinish`` aggregates them with the
same functions as the CLI and sets the exit status from the gate.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import LeaderEvalError

RECORD_KEY = "leader_eval_case"


@dataclass
class PluginState:
    options: dict[str, Any]
    records: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: defaultdict(dict))
    suite_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    collected: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    other_failures: int = 0
    eval_failures: int = 0
    gate_lines: list[str] = field(default_factory=list)


STATE = pytest.StashKey[PluginState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leader-eval", "leader-eval: evaluate checkpoints on suites")

    def add(name: str, help: str, *, default: Any = None, type: Any = "string", **kw: Any) -> None:
        dest = "leader_eval_" + name.lstrip("-").replace("-", "_")
        group.addoption(name, dest=dest, default=None, help=help, **kw)
        parser.addini(dest, help=help, type=type, default=default)

    add(
        "--model",
        "model spec (local:smollm2, gguf:PATH, openai:URL#MODEL, tinker://..., replay:RUN_DIR)",
        default="local:smollm2",
    )
    add("--label", "label of the golden baseline (default: derived from --model)")
    add("--samples", "samples per case (default: the suite's)")
    add("--seed", "run seed (default: the suite's, else fresh)")
    add("--concurrency", "requests in flight", default="64")
    add("--golden-dir", "directory of golden baselines", default="golden")
    add("--tolerance", "per-metric tolerance, e.g. score=0.05 (repeatable)", type="linelist", action="append")
    add("--eval-mode", "soft: exit status from the gate only; strict: any failing case fails", default="soft")
    add("--run-dir", "directory for run directories", default="runs")
    group.addoption(
        "--update-golden",
        dest="leader_eval_update_golden",
        action="store_true",
        help="rewrite golden files of suites whose full case set ran and completed",
    )
    group.addoption(
        "--golden-strict",
        dest="leader_eval_golden_strict",
        action="store_true",
        help="fail when a suite has no golden baseline yet (default: warn)",
    )


def _opt(config: pytest.Config, name: str) -> Any:
    dest = "leader_eval_" + name
    v = config.getoption(dest, default=None)
    if v is None:
        try:
            v = config.getini(dest)
        except ValueError:
            v = None
    return v if v not in ("", []) else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "leader_eval: a leader-eval suite case")
    config.addinivalue_line("markers", "stress: a long-context stress case")
    tolerances: dict[str, float] = {}
    for item in _opt(config, "tolerance") or []:
        for part in item if isinstance(item, list) else [item]:
            name, _, value = str(part).partition("=")
            if not value:
                raise pytest.UsageError(f"--tolerance {part!r}: expected METRIC=VALUE")
            tolerances[name.strip()] = float(value)
    mode = _opt(config, "eval_mode") or "soft"
    if mode not in ("soft", "strict"):
        raise pytest.UsageError(f"--eval-mode {mode!r}: expected soft or strict")
    options = {
        "model": _opt(config, "model") or "local:smollm2",
        "label": _opt(config, "label"),
        "samples": int(_opt(config, "samples")) if _opt(config, "samples") else None,
        "seed": int(_opt(config, "seed")) if _opt(config, "seed") else None,
        "concurrency": int(_opt(config, "concurrency") or 64),
        "golden_dir": Path(_opt(config, "golden_dir") or "golden"),
        "tolerances": tolerances,
        "mode": mode,
        "run_dir": Path(_opt(config, "run_dir") or "runs"),
        "update_golden": bool(config.getoption("leader_eval_update_golden", default=False)),
        "golden_strict": bool(config.getoption("leader_eval_golden_strict", default=False)),
    }
    config.stash[STATE] = PluginState(options)
    config.pluginmanager.register(EvalSession(config), "leader_eval_session")
    # xdist: one worker per suite file, so each case is sampled exactly once (see module doc).
    numprocesses = getattr(config.option, "numprocesses", None)
    if numprocesses and getattr(config.option, "dist", "no") in ("no", "load"):
        config.option.dist = "loadfile"


def _looks_like_suite(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    lines = {line.split(":", 1)[0] for line in head.splitlines() if line and not line[0].isspace()}
    return {"scaffold", "cases"} <= lines


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix in (".yaml", ".yml") and _looks_like_suite(file_path):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


class SuiteFile(pytest.File):
    """A suite YAML file: collects one item per case; samples the selected cases in ``setup``."""

    def collect(self) -> Any:
        from leader_eval.suite import load_suite

        try:
            self.suite = load_suite(self.path)
        except LeaderEvalError as err:
            raise self.CollectError(str(err)) from err
        for case in self.suite.cases:
            item = CaseItem.from_parent(self, name=case.id, case=case)
            item.add_marker(pytest.mark.leader_eval)
            if case.stress:
                item.add_marker(pytest.mark.stress)
            for tag in case.tags:
                if tag.isidentifier():
                    # registered, so `-m planning` selects cases and --strict-markers stays quiet
                    self.config.addinivalue_line("markers", f"{tag}: leader-eval suite tag")
                    item.add_marker(getattr(pytest.mark, tag))
            yield item

    def setup(self) -> None:
        from leader_eval.evaluate import run
        from leader_eval.runner import RunOptions, default_label, default_out_dir

        state: PluginState = self.config.stash[STATE]
        o = state.options
        # Only the cases this session will run (after -k/-m/deselection) are sampled.
        selected = [i.name for i in self.session.items if isinstance(i, CaseItem) and i.parent is self]
        options = RunOptions(
            model=o["model"],
            samples=o["samples"],
            seed=o["seed"],
            case_ids=selected,
            concurrency=o["concurrency"],
            label=o["label"],
            progress=False,
        )
        from leader_eval.backends import resolve_backend

        backend = resolve_backend(o["model"])
        label = o["label"] or default_label(backend.model_id)
        if o["seed"] is not None:
            options.seed = o["seed"]
        elif self.suite.sampling.get("seed") is not None:
            options.seed = int(self.suite.sampling["seed"])
        else:
            from leader_eval.runner import new_run_seed

            options.seed = new_run_seed()
        options.out = default_out_dir(self.suite, label, options.seed, root=o["run_dir"], suffix="__pytest")
        self.run_result = run(self.suite, options, backend=backend)
        self.scores_by_case: dict[str, list[Any]] = defaultdict(list)
        for s in self.run_result.scores:
            self.scores_by_case[s.case_id].append(s)
        self.samples_by_key = {(s.case_id, s.index): s for s in self.run_result.samples}
        self.case_records = {c["case_id"]: c for c in self.run_result.cases}


class CaseFailed(Exception):
    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


MAX_REPR = 600


class CaseItem(pytest.Item):
    def __init__(self, *, case: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case

    def runtest(self) -> None:
        parent: SuiteFile = self.parent  # type: ignore[assignment]
        scores = parent.scores_by_case.get(self.case.id, [])
        record = dict(parent.case_records.get(self.case.id, {}))
        record["suite"] = parent.suite.name
        record["suite_path"] = str(parent.path)
        record["run_dir"] = str(parent.run_result.path)
        record["manifest_status"] = parent.run_result.manifest.get("status")
        record["samples"] = [
            {
                "index": s.index,
                "passed": bool(s.passed),
                "outcome": s.outcome,
                "reason": s.reason,
                "hard_fail": bool(s.hard_fail),
            }
            for s in scores
        ]
        self.user_properties.append((RECORD_KEY, json.loads(json.dumps(record))))  # builtin types only
        failed = [s for s in scores if s.outcome == "ok" and not s.passed]
        if not scores:
            raise CaseFailed(f"case {self.case.id}: no samples recorded")
        if failed:
            raise CaseFailed(self._explain(failed, record, parent))

    def _explain(self, failed: list[Any], record: dict[str, Any], parent: SuiteFile) -> str:
        n_ok = record.get("n_scored", 0)
        lines = [f"{len(failed)} of {n_ok} samples failed (case score {record.get('score')})"]
        for s in failed[:3]:
            sample = parent.samples_by_key.get((s.case_id, s.index))
            raw = sample.text if sample else ""
            shown = repr(raw[:MAX_REPR]) + (f" ... (+{len(raw) - MAX_REPR} chars)" if len(raw) > MAX_REPR else "")
            lines.append(f"-- sample {s.index}: {s.reason}{' [hard fail]' if s.hard_fail else ''}")
            for c in s.checks:
                if not c["passed"]:
                    lines.append(f"   x {c['check']}: {c['reason']} {c['detail']}".rstrip())
            lines.append(f"   raw: {shown}")
        lines.append(f"full outputs: leader-eval show {parent.run_result.path} --case {self.case.id}")
        return "\n".join(lines)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return excinfo.value.text
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"{self.path.name}::{self.case.id}"


class LeaderEvalFixture:
    """Session fixture for cases written in Python; results feed the same aggregation."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def evaluate(self, request: pytest.FixtureRequest, suite: str | Path, case_id: str) -> dict[str, Any]:
        """Sample and score one case of a suite; returns its case record (also sent to the gate)."""
        from leader_eval.evaluate import run
        from leader_eval.runner import RunOptions, new_run_seed

        o = self.config.stash[STATE].options
        seed = o["seed"] if o["seed"] is not None else new_run_seed()
        out = o["run_dir"] / f"fixture__{Path(suite).stem}__{case_id}__seed{seed}"
        result = run(
            suite,
            RunOptions(model=o["model"], samples=o["samples"], seed=seed, case_ids=[case_id], out=out, progress=False),
        )
        record = dict(result.cases[0])
        record.update(
            suite=result.summary["suite"],
            suite_path=str(suite),
            run_dir=str(result.path),
            manifest_status=result.manifest.get("status"),
            partial=True,
        )
        request.node.user_properties.append((RECORD_KEY, json.loads(json.dumps(record))))
        return record


@pytest.fixture(scope="session")
def leader_eval(pytestconfig: pytest.Config) -> LeaderEvalFixture:
    return LeaderEvalFixture(pytestconfig)


class EvalSession:
    """The controller-side half of the plugin: collects case records, gates, reports."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.state: PluginState = config.stash[STATE]
        self.remote_collected: set[tuple[str, str]] = set()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            if isinstance(item, CaseItem):
                suite_file: SuiteFile = item.parent  # type: ignore[assignment]
                self.state.collected[suite_file.suite.name].add(item.name)
                self.state.suite_meta.setdefault(
                    suite_file.suite.name,
                    {"path": str(suite_file.path), "all_cases": [c.id for c in suite_file.suite.cases]},
                )

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Under xdist the controller collects nothing itself: learn the selected cases from the
        # workers, so a case whose worker crashed before reporting is known to be missing.
        for nodeid in ids:
            path, _, name = nodeid.partition("::")
            if path.endswith((".yaml", ".yml")) and name and "::" not in name:
                self.remote_collected.add((path, name))

    def _resolve_remote_collected(self) -> None:
        from leader_eval.suite import load_suite

        by_path: dict[str, Any] = {}
        for path, name in sorted(self.remote_collected):
            if path not in by_path:
                try:
                    by_path[path] = load_suite(self.config.rootpath / path)
                except LeaderEvalError:
                    continue
            suite = by_path[path]
            self.state.collected[suite.name].add(name)
            self.state.suite_meta.setdefault(
                suite.name, {"path": str(self.config.rootpath / path), "all_cases": [c.id for c in suite.cases]}
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        records: list[dict[str, Any]] = [v for k, v in report.user_properties if k == RECORD_KEY]  # type: ignore[misc]
        if report.when == "call":
            for rec in records:
                self.state.records[rec["suite"]][rec["case_id"]] = rec
                meta = self.state.suite_meta.setdefault(rec["suite"], {"path": rec["suite_path"]})
                meta["run_dir"] = rec["run_dir"]
                meta["manifest_status"] = rec.get("manifest_status")
        if report.failed:
            if records or report.nodeid.split("::", 1)[0].endswith((".yaml", ".yml")):
                self.state.eval_failures += 1
            else:
                self.state.other_failures += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return  # workers only send records; the controller decides
        self._resolve_remote_collected()
        if not (self.state.records or self.state.collected):
            return
        from leader_eval.gating import gate_session

        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop)
        status, lines = gate_session(self.state, interrupted=interrupted)
        self.state.gate_lines = lines
        if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
            return
        if self.state.options["mode"] == "strict" and self.state.eval_failures:
            status = max(status, 1)
        if self.state.other_failures:
            status = max(status, 1)
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            return
        session.exitstatus = status

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if self.state.gate_lines:
            terminalreporter.section("leader-eval gate")
            for line in self.state.gate_lines:
                terminalreporter.write_line(line)
