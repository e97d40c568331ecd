"""The controller-side half of the plugin: setup checks, case records, the gate, reports.

Setup errors surface before anything is sampled: once the session's cases are selected, the
model spec is resolved (a bad spec or an unreachable server is a usage error, exit 4, with the
backend's own message) and tolerance names are checked.

The gate of each suite is reported as an item of its own, ``SUITE::leader-eval-gate`` (in a model
matrix one per model, ``SUITE::leader-eval-gate[label]``), after the cases (passed or failed, with
the gate table as its report), so the terminal, ``-rA`` and JUnit XML all show it; the exit status
is the worst of pytest's own and the gates'.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from leader_eval.errors import LeaderEvalError, spelled
from leader_eval.inert import inert, junit_json
from leader_eval.pytest_plugin import ci
from leader_eval.pytest_plugin.items import CaseItem, SuiteFile, resolve_backend
from leader_eval.pytest_plugin.state import RECORD_KEY, STATE, PluginState

GATE_ITEM = "leader-eval-gate"
GATE_KEY = "leader_eval_gate"
PREFLIGHT_TIMEOUT_S = 5.0


def preflight(backend: Any) -> str | None:
    """Why the backend's server cannot be reached (a TCP connect), or None."""
    base = getattr(backend, "base_url", None)
    if not base:
        return None
    parts = urlsplit(str(base))
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=PREFLIGHT_TIMEOUT_S):
            return None
    except OSError as exc:
        return f"server {base} unreachable: {exc.strerror or type(exc).__name__}"


class EvalSession:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.state: PluginState = config.stash[STATE]
        self.remote_collected: set[tuple[str, str]] = set()
        self.gates: list[Any] = []
        self.worker = hasattr(config, "workerinput")

    # --- collection -----------------------------------------------------------------------------

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if self.state.options.shard is not None:
            self._deselect_other_shards(config, items)
        wanted = set(self.state.options.case_ids)
        if not wanted:
            return
        cases = [i for i in items if isinstance(i, CaseItem)]
        unknown = wanted - {i.case.id for i in cases}
        if unknown and cases:
            raise pytest.UsageError(f"--le-case {sorted(unknown)[0]!r}: no such case in the collected suites")
        keep = [i for i in items if not isinstance(i, CaseItem) or i.case.id in wanted]
        dropped = [i for i in items if isinstance(i, CaseItem) and i.case.id not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def _deselect_other_shards(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Keep the cases of this session's shard (``--le-shard``); the others are deselected, so
        pytest's summary counts them and no worker samples them."""
        from leader_eval.pytest_plugin.items import shard_cases

        shard = self.state.options.shard
        assert shard is not None
        mine: dict[Any, set[str]] = {}
        keep, dropped = [], []
        for item in items:
            if isinstance(item, CaseItem):
                suite_file = item.parent
                if suite_file not in mine:
                    mine[suite_file] = set(shard_cases(suite_file.suite, shard))  # type: ignore[union-attr]
                if item.case.id not in mine[suite_file]:
                    dropped.append(item)
                    continue
            keep.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Under xdist the controller collects nothing and a worker's usage error would only read
        # "no active workers": check the model here, before any worker starts, when suites are
        # configured (tryfirst: before xdist spawns its workers).
        from leader_eval.pytest_plugin.config import suites_configured

        xdist = bool(getattr(self.config.option, "numprocesses", None))
        if xdist and not self.worker and suites_configured(self.state.options, self.config.rootpath):
            self._check_setup()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        cases = [i for i in session.items if isinstance(i, CaseItem)]
        for item in cases:
            suite_file: SuiteFile = item.parent  # type: ignore[assignment]
            self._note_collected(suite_file.suite, str(suite_file.path), item.case.id, item.label)
        if self.worker:
            return
        if not self.state.suites_seen and self.state.options.given and not self._uses_fixture(session.items):
            from leader_eval.pytest_plugin.config import no_suite_message

            raise pytest.UsageError(no_suite_message(self.state.options, self.config.rootpath))
        if cases and not self.config.option.collectonly:
            self._check_setup()  # --collect-only samples nothing: no model to resolve

    @staticmethod
    def _uses_fixture(items: list[pytest.Item]) -> bool:
        """Whether a collected test evaluates cases written in Python (the ``leader_eval`` fixture)."""
        return any("leader_eval" in getattr(i, "fixturenames", ()) for i in items)

    def _check_setup(self) -> None:
        """Resolve the model and check tolerances once a case will run: usage errors, exit 4."""
        from leader_eval.pytest_plugin.config import PREFIX, plugin_message

        o = self.state.options
        try:
            from leader_eval.decide.golden import parse_tolerances

            parse_tolerances(o.tolerances)
            if o.matrix:
                from leader_eval.pytest_plugin.items import matrix_models

                backends = [b for _, b in matrix_models(self.state).values()]
            else:
                backends = [resolve_backend(o.sampling)]
        except LeaderEvalError as err:
            # the backends name the CLI's options; in pytest they are --le-*
            text = spelled(err, PREFIX)
            raise pytest.UsageError(plugin_message(text) if text.startswith("--model") else text) from None
        for backend in backends:
            problem = preflight(backend)
            if problem:
                raise pytest.UsageError(f"--le-model: {problem}")
        if not o.matrix:
            self.state.backend = backends[0]

    def _note_collected(self, suite: Any, path: str, case_id: str, label: str) -> None:
        self.state.collected[(suite.name, label)].add(case_id)
        meta = self.state.suite_meta.setdefault((suite.name, label), {"path": path})
        # under xdist a case record can arrive before the controller learns the suite's cases
        # (pytest_runtest_logreport made the entry): without them a subset looked like the
        # whole suite, and the gate refused it for missing the golden's other cases
        meta.setdefault("all_cases", [c.id for c in suite.cases])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Under xdist the controller collects nothing itself: learn the selected cases from the
        # workers, so a case whose worker crashed before reporting is known to be missing.
        for nodeid in ids:
            path, _, name = nodeid.partition("::")
            if path.endswith((".yaml", ".yml")) and name and "::" not in name:
                self.remote_collected.add((path, name))

    def _case_and_label(self, name: str) -> tuple[str, str]:
        """A case item's name split: ``CASE[label]`` in a matrix, else the case id and ""."""
        if self.state.options.matrix and name.endswith("]") and "[" in name:
            case_id, _, label = name[:-1].rpartition("[")
            return case_id, label
        return name, ""

    def _resolve_remote_collected(self) -> None:
        from leader_eval.suite.load import load_suite

        by_path: dict[str, Any] = {}
        for path, name in sorted(self.remote_collected):
            if path not in by_path:
                try:
                    by_path[path] = load_suite(self.config.rootpath / path)
                except LeaderEvalError:
                    continue
            self._note_collected(by_path[path], str(self.config.rootpath / path), *self._case_and_label(name))

    # --- records --------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if "leader_eval" in report.keywords:  # a suite case or a test that used the fixture ran
            self.state.suites_seen = True
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name != RECORD_KEY:
                continue
            rec = json.loads(value) if isinstance(value, str) else dict(value)  # type: ignore[call-overload]
            key = (rec["suite"], str(rec.get("label") or ""))
            self.state.records[key][rec["case_id"]] = rec
            meta = self.state.suite_meta.setdefault(key, {"path": rec["suite_path"]})
            meta["run_dir"] = rec["run_dir"]

    # --- the gate -------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # tryfirst: the gate items must reach junitxml before it writes its file
        if self.worker:
            return  # workers only send records; the controller decides
        if self.config.option.collectonly:
            return  # nothing was sampled: there is nothing to gate
        self._resolve_remote_collected()
        if not (self.state.records or self.state.collected):
            if (
                self.state.options.given
                and not self.state.suites_seen
                and exitstatus
                not in (
                    pytest.ExitCode.INTERRUPTED,
                    pytest.ExitCode.INTERNAL_ERROR,
                    pytest.ExitCode.USAGE_ERROR,
                    pytest.ExitCode.NO_TESTS_COLLECTED,
                )
            ):
                # under xdist the controller learns only now that no worker collected a suite
                from leader_eval.pytest_plugin.config import no_suite_message

                self.state.gate_lines = [f"error: {no_suite_message(self.state.options, self.config.rootpath)}"]
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if exitstatus in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
            return
        from leader_eval.pytest_plugin.gate import gate_session

        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop)
        try:
            self.gates = gate_session(self.state, interrupted=interrupted)
        except LeaderEvalError as err:  # an unreadable golden or run file: one line, exit 2
            self.state.gate_lines = [f"error: {err}"]
            session.exitstatus = max(int(session.exitstatus), int(pytest.ExitCode.INTERRUPTED))
            return
        self.state.gate_lines = [line for g in self.gates for line in g.lines]
        for g in self.gates:
            self._report_gate(g)
        if ci.github_actions():
            matrices: set[str] = set()
            for g in self.gates:
                if g.family is not None and g.suite not in matrices:
                    # a model matrix: its table (one row per model) before the models' own gates
                    matrices.add(g.suite)
                    ci.write_step_summary(ci.matrix_markdown([x for x in self.gates if x.suite == g.suite]))
                ci.write_step_summary(g.markdown)
        self._prune_runs()
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        status = max([int(exitstatus)] + [g.status for g in self.gates])
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and not any(g.status for g in self.gates):
            return
        session.exitstatus = status

    def _report_gate(self, g: Any) -> None:
        try:  # a node id is relative to the rootdir, as pytest's own are
            rel = Path(g.path).resolve().relative_to(self.config.rootpath.resolve()).as_posix()
        except ValueError:
            rel = Path(g.path).name
        nodeid = f"{rel}::{GATE_ITEM}[{g.label}]" if g.label else f"{rel}::{GATE_ITEM}"
        outcome = "passed" if g.status == 0 else "failed"
        if g.not_gated and g.status == 0:
            outcome = "skipped"  # a shard is not gated: pytest's way to say a check did not run
        verdict = (
            g.result.status
            if g.result
            else ("not_gated" if g.status == 0 else "incomplete")
            if g.not_gated
            else "error"
        )
        prop = {"suite": g.suite, "status": verdict, **({"label": g.label} if g.label else {})}
        props = [(GATE_KEY, junit_json(prop))]
        hook = self.config.hook
        tr: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        # the gate comes after the progress line: its own line, no progress percentage
        progress = getattr(tr, "_show_progress_info", None)
        terse = tr is not None and tr.verbosity <= 0
        if tr is not None and progress is not None:
            tr._show_progress_info = False
        if terse and tr is not None:
            if getattr(getattr(tr, "_tw", None), "width_of_current_line", 0):
                tr.write_line("")
            tr.write(f"{nodeid} ")
        try:
            for when in ("setup", "call", "teardown"):
                rep = pytest.TestReport(
                    nodeid=nodeid,
                    location=(rel, 0, GATE_ITEM),
                    keywords={GATE_ITEM: 1},
                    outcome=outcome if when == "call" else "passed",  # type: ignore[arg-type]
                    longrepr=_gate_longrepr(g, outcome, rel) if when == "call" else None,
                    when=when,
                    user_properties=props,
                )
                hook.pytest_runtest_logreport(report=rep)
        finally:
            if tr is not None and progress is not None:
                tr._show_progress_info = progress
            if terse and tr is not None:
                tr.write_line("")

    def _prune_runs(self) -> None:
        if self.state.options.shard is not None:
            return  # a shard's run waits for leader-eval merge: never pruned under it
        o = self.state.options
        protect = {p for g in self.gates for p in self._run_dirs((g.suite, g.label))}
        for g in self.gates:
            if g.result is None:
                continue
            ci.prune_runs(o.run_dir, g.suite, g.result.label, o.keep_runs, protect, o.golden_dir)

    def _run_dirs(self, key: tuple[str, str]) -> list[Any]:
        return [Path(r["run_dir"]) for r in self.state.records.get(key, {}).values() if r.get("run_dir")]

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if self.state.gate_lines:
            shard = self.state.options.shard
            terminalreporter.section(f"leader-eval shard {shard[0]}/{shard[1]}" if shard else "leader-eval gate")
            for line in self.state.gate_lines:
                # a golden's reason, a server's error text: no escape sequence, no workflow command
                terminalreporter.write_line(inert(line, multiline=True))
        if ci.github_actions():
            strict = self.state.options.mode == "strict"
            for g in self.gates:
                level = "error" if strict or g.status else "warning"
                for rec in g.failing_cases:
                    # the runner reads workflow commands from the step's stdout
                    terminalreporter.write_line(ci.case_annotation(level, g.path, config.rootpath, rec))


def _gate_longrepr(g: Any, outcome: str, rel: str) -> Any:
    """The gate item's report: the table when it failed, the reason when a shard was not gated."""
    if outcome == "failed":
        return inert("\n".join(g.lines), multiline=True)
    if outcome == "skipped":
        return (rel, 0, f"Skipped: {g.not_gated}")
    return None
