"""Suite files as pytest collectors, cases as items, and the ``leader_eval`` fixture.

A suite is sampled once, concurrently, in its file collector's ``setup()`` (``leader_eval.runs.evaluate.run``,
the same call as ``leader-eval run``, writing the same run directory); case items only score.

Outcomes. In ``strict`` mode a case fails when any scored sample failed or when every sample
errored. In ``soft`` mode (the default) a case with failing samples is reported as ``xfail`` with
its evidence as the reason: the session's exit status comes from the gate, so nothing reads
FAILED while the session passes. In both modes a case whose run could not be sampled at all (a
replay that does not match, a run directory that belongs to another run) fails with the
one-line reason; sampler errors fail the session through the gate's error rule.

Collection never shows a traceback: any error while loading or rendering a suite becomes a
collection error naming the file and line (exit status 2).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.inert import inert, junit_json
from leader_eval.pytest_plugin.state import RECORD_KEY, STATE, PluginState

MAX_REPR = 600


class SuiteCollectError(Exception):
    """A suite that cannot be collected; ``str`` is the one-line ``FILE:LINE: ...`` message."""


def load_and_render(path: Path) -> Any:
    """Load a suite and render every case's messages; any failure is a ``SuiteCollectError``."""
    from leader_eval.suite.load import load_suite
    from leader_eval.suite.render import render_messages

    try:
        suite = load_suite(path)
        for case in suite.cases:
            render_messages(suite, case)
    except LeaderEvalError as err:
        raise SuiteCollectError(str(err)) from None
    except RecursionError:
        raise SuiteCollectError(f"{path}:1: suite nests too deeply to load") from None
    except MemoryError:
        raise SuiteCollectError(f"{path}:1: suite is too large to load") from None
    except Exception as exc:  # a hostile file must never reach pytest as an INTERNALERROR
        text = " ".join(str(exc).split())[:300]
        raise SuiteCollectError(f"{path}:1: cannot load suite: {type(exc).__name__}: {text}") from None
    return suite


def bind_trusted_checks(suite: Any, sampling: dict[str, Any]) -> Any:
    """``suite`` with its Python checks loaded from the session's trusted definitions (conftest's
    ``register_check`` and the configured sources); an undefined check, a module that does not
    import or a missing function is a ``SuiteCollectError`` (exit 2, nothing sampled)."""
    from leader_eval.runs.options import run_options
    from leader_eval.runs.python_checks import bind_checks

    try:
        return bind_checks(suite, run_options(sampling).trusted)
    except LeaderEvalError as err:
        raise SuiteCollectError(str(err)) from None


class SuiteFile(pytest.File):
    """A suite YAML file: collects one item per case; samples the selected cases in ``setup``."""

    def collect(self) -> Any:
        self.config.stash[STATE].suites_seen = True
        try:
            self.suite = load_and_render(self.path)
            self.suite = bind_trusted_checks(self.suite, self.config.stash[STATE].options.sampling)
        except SuiteCollectError as err:
            raise self.CollectError(str(err)) from None
        shard = self.config.stash[STATE].options.shard
        if shard is not None and not shard_cases(self.suite, shard):
            # the CLI refuses an empty shard too: merge would find this suite's shard missing
            i, n = shard
            what = f"the suite has {len(self.suite.cases)} cases, so shard {i} would be empty"
            raise self.CollectError(f"{self.path}:1: --le-shard {i}/{n}: {what}")
        labels = [""]
        if self.config.stash[STATE].options.matrix:
            try:
                labels = list(matrix_models(self.config.stash[STATE]))
            except LeaderEvalError as err:
                raise self.CollectError(f"{self.path}:1: {err}") from None
        # a matrix: one item per model and case, ``CASE[label]``, a model's cases together
        for label in labels:
            for case in self.suite.cases:
                name = f"{case.id}[{label}]" if label else case.id
                item = CaseItem.from_parent(self, name=name, case=case, label=label)
                item.add_marker(pytest.mark.leader_eval)
                if case.stress:
                    item.add_marker(pytest.mark.stress)
                for tag in case.tags:
                    if tag.isidentifier():
                        # registered, so `-m planning` selects cases and --strict-markers stays quiet
                        self.config.addinivalue_line("markers", f"{tag}: leader-eval suite tag")
                        item.add_marker(getattr(pytest.mark, tag))
                yield item
        if self.suite.gate.get("stress"):
            # the suite's stress requirements: one item, run with --le-stress (a long sweep)
            sweep = StressItem.from_parent(self, name="stress")
            sweep.add_marker(pytest.mark.leader_eval)
            sweep.add_marker(pytest.mark.stress)
            yield sweep

    def setup(self) -> None:
        self.setup_error: str | None = None
        try:
            self._sample()
        except LeaderEvalError as err:
            # reported by every case of the file as its one-line failure (no plugin traceback)
            self.setup_error = str(err)
        except OSError as err:  # the environment (disk full, permissions): one line, as the CLI says it
            self.setup_error = f"{err.filename + ': ' if err.filename else ''}{err.strerror or err}"

    def _sample(self) -> None:
        from leader_eval.runs.options import run_options

        state: PluginState = self.config.stash[STATE]
        o = state.options
        self.sampled: dict[str, Sampled] = {}
        # Only the cases this session will run (after -k/-m/deselection) are sampled.
        selected: dict[str, list[str]] = defaultdict(list)
        for i in self.session.items:
            if isinstance(i, CaseItem) and i.parent is self:
                selected[i.label].append(i.case.id)
        if not selected:
            return  # only the stress item runs: it samples its own sweep
        if not o.matrix:
            if state.backend is None:
                state.backend = resolve_backend(o.sampling)
            options = run_options(o.sampling, case_ids=selected[""], progress=False, trusted=o.trusted)
            self.sampled[""] = self._sample_one(options, state.backend, selected[""])
            return
        from dataclasses import replace

        from leader_eval.decide.matrix import paired_seed
        from leader_eval.sampling.backends.base import replayable

        models = matrix_models(state)
        # paired seeds: one run seed for every entry (as ``leader-eval run --model A --model B``)
        seed = paired_seed(self.suite, o.sampling.get("seed"), [b for _, b in models.values()])
        for label, (values, backend) in models.items():
            if label not in selected:
                continue
            options = run_options(values, case_ids=selected[label], progress=False, trusted=o.trusted)
            # a replay samples nothing: it keeps the seed it recorded
            own_seed = None if replayable(backend) is not None else seed
            options = replace(options, seed=own_seed, label=label)
            self.sampled[label] = self._sample_one(options, backend, selected[label])

    def _sample_one(self, options: Any, backend: Any, selected: list[str]) -> Sampled:
        """Sample ``selected`` cases on one model into the run directory the CLI would name."""
        from leader_eval.runs.evaluate import run, run_seed_and_label
        from leader_eval.sampling.keys import backend_model_key
        from leader_eval.store.names import default_out_dir

        o = self.config.stash[STATE].options
        options.extra_manifest = {"created_by": "pytest"}
        seed, label = run_seed_and_label(self.suite, options, backend)
        options.seed = seed
        if o.shard is not None:
            options = self._shard_options(options, selected, label)
        else:
            # a subset gets a directory of its own: its manifest names other cases than the full run's
            suffix = ""
            if set(selected) != {c.id for c in self.suite.cases}:
                suffix = "__subset-" + hashlib.sha256("\0".join(sorted(selected)).encode()).hexdigest()[:8]
            model = backend_model_key(backend)
            options.out = default_out_dir(self.suite, label, seed, model=model, root=o.run_dir, suffix=suffix)
        return Sampled(
            run(self.suite, options, backend=backend), quarantined_cases(o.golden_dir, self.suite.name, o.baseline)
        )

    def _shard_options(self, options: Any, selected: list[str], label: str) -> Any:
        """``options`` for this session's shard, recorded in the manifest as ``run --shard`` records
        it (``merge.shard_options``), so ``leader-eval merge`` takes the run like a CLI shard."""
        from leader_eval.runs.merge import shard_options
        from leader_eval.sampling.keys import backend_model_key
        from leader_eval.store.names import default_out_dir

        state: PluginState = self.config.stash[STATE]
        o = state.options
        assert o.shard is not None
        index, count = o.shard
        mine = shard_cases(self.suite, o.shard)
        if set(selected) != set(mine):
            # merge needs every case of every shard: a shard minus -k/-m/--deselect leaves a gap
            raise LeaderEvalError(
                f"{self.path}: --le-shard {index}/{count} samples the shard's {len(mine)} cases, but this session "
                f"selected {len(selected)} of them (-k/-m/--deselect): run the whole shard"
            )
        options.case_ids = []
        options.out = default_out_dir(
            self.suite,
            label,
            options.seed,
            model=backend_model_key(state.backend),
            root=o.run_dir,
            suffix=f"__shard{index}of{count}",
        )
        return shard_options(options, f"{index}/{count}", self.suite)


class Sampled:
    """One model's run of a suite file, indexed for its case items."""

    def __init__(self, run_result: Any, quarantined: set[str]) -> None:
        self.run_result = run_result
        self.quarantined = quarantined
        self.scores_by_case: dict[str, list[Any]] = defaultdict(list)
        for s in run_result.scores:
            self.scores_by_case[s.case_id].append(s)
        self.samples_by_key = {(s.case_id, s.index): s for s in run_result.samples}
        self.case_records = {c["case_id"]: c for c in run_result.cases}


def matrix_models(state: PluginState) -> dict[str, tuple[dict[str, Any], Any]]:
    """A model matrix's entries by label (``decide.matrix.matrix_labels``: the entry's ``--label``,
    else its model's, with its own settings appended where two would collide), each with its
    sampling values and backend; one model at several settings is loaded once. Resolved once per
    process: the labels depend only on the entries and the models' ids, so every xdist worker
    names the items alike. ``LeaderEvalError`` when an entry cannot be built."""
    if state.models is not None:
        return state.models
    from leader_eval.decide.matrix import matrix_labels
    from leader_eval.runs.options import backend_options
    from leader_eval.store.names import default_label

    built: dict[tuple[Any, ...], Any] = {}
    backends = []
    for entry in state.options.entries:
        values = dict(entry.values)
        key = (
            entry.model,
            values.get("context_length"),
            tuple(sorted((k, repr(v)) for k, v in backend_options(values).items())),
        )
        if key not in built:
            built[key] = resolve_backend(values)
        backends.append(built[key])
    labels = matrix_labels(state.options.entries, [default_label(b.model_id) for b in backends])
    state.models = {
        label: (dict(entry.values), backend)
        for label, entry, backend in zip(labels, state.options.entries, backends, strict=True)
    }
    return state.models


def shard_cases(suite: Any, shard: tuple[int, int]) -> list[str]:
    """The case ids of ``suite`` in shard ``(I, N)``, as ``leader-eval run --shard I/N`` picks them."""
    from leader_eval.runs.merge import shard_case_ids

    return shard_case_ids([c.id for c in suite.cases], *shard)


def quarantined_cases(golden_dir: Path, suite: str, baseline: str) -> set[str]:
    """The cases the baseline golden's quarantine list exempts today (``quarantine.active_quarantine``);
    an unreadable golden exempts nothing here (the gate reports it)."""
    from leader_eval.decide.golden import golden_path, load_golden
    from leader_eval.decide.quarantine import active_quarantine

    try:
        golden = load_golden(golden_path(golden_dir, suite, baseline))
        return active_quarantine(golden)[0] if golden else set()
    except LeaderEvalError:
        return set()


def resolve_backend(sampling: dict[str, Any]) -> Any:
    """The backend ``sampling["model"]`` names; ``LeaderEvalError`` with the real message when it cannot be built."""
    from leader_eval.runs.options import backend_options
    from leader_eval.sampling.backends import resolve_backend as resolve

    return resolve(
        str(sampling.get("model") or "local:smollm2"),
        context_length=sampling.get("context_length"),
        **backend_options(sampling),
    )


class CaseFailed(Exception):
    def __init__(self, text: str):
        # a server's error text, a model's argument key: no escape sequence, no workflow command
        text = inert(text, multiline=True)
        super().__init__(text)
        self.text = text


class CaseItem(pytest.Item):
    def __init__(self, *, case: Any, label: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case
        self.label = label  # the model's label in a matrix, else ""

    def runtest(self) -> None:
        suite_file: SuiteFile = self.parent  # type: ignore[assignment]
        if suite_file.setup_error:
            raise CaseFailed(suite_file.setup_error)
        parent = suite_file.sampled[self.label]
        mode = self.config.stash[STATE].options.mode
        scores = parent.scores_by_case.get(self.case.id, [])
        record = self.record(suite_file, scores)
        self.user_properties.append((RECORD_KEY, junit_json(record)))
        if not scores:
            raise CaseFailed(f"case {self.case.id}: no samples recorded")
        failed = [s for s in scores if s.outcome == "ok" and not s.passed]
        all_errored = not any(s.outcome == "ok" for s in scores)
        if all_errored:
            why = inert(record.get("first_error") or "no sample was scored")
            text = f"all {len(scores)} samples of case {self.case.id} ended without a scored output: {why}"
            if mode == "strict":
                raise CaseFailed(text)
            pytest.xfail(text + " (soft mode: the gate's error rule decides)")
        if failed:
            text = self._explain(failed, record, parent)
            if mode == "strict" and self.case.id not in parent.quarantined:
                raise CaseFailed(text)
            if mode == "strict":
                self.add_report_section("call", "leader-eval evidence", text)
                pytest.xfail(f"{text.splitlines()[0]} (quarantined in the golden: cannot fail the gate)")
            self.add_report_section("call", "leader-eval evidence", text)
            where = f"leader-eval show {parent.run_result.path} --case {self.case.id}"
            pytest.xfail(f"{text.splitlines()[0]} (soft mode; evidence: {where})")

    def record(self, suite_file: SuiteFile, scores: list[Any]) -> dict[str, Any]:
        """This case's record for the controller's gate (builtin types only: it crosses xdist)."""
        parent = suite_file.sampled[self.label]
        record = dict(parent.case_records.get(self.case.id, {}))
        record["suite"] = suite_file.suite.name
        if self.label:  # a model matrix: which model's record (a one-model record is as before)
            record["label"] = self.label
        record["suite_path"] = str(suite_file.path)
        record["run_dir"] = str(parent.run_result.path)
        record["manifest_status"] = parent.run_result.manifest.get("status")
        record["line"] = self.case.line
        errors = [
            parent.samples_by_key[(s.case_id, s.index)].error
            for s in scores
            if s.outcome != "ok" and (s.case_id, s.index) in parent.samples_by_key
        ]
        record["first_error"] = next((e for e in errors if e), None)
        record["samples"] = [
            {"index": s.index, "passed": bool(s.passed), "outcome": s.outcome, "reason": s.reason} for s in scores
        ]
        return json.loads(json.dumps(record))

    def _explain(self, failed: list[Any], record: dict[str, Any], parent: Sampled) -> str:
        """The failure text: each fragment from the model or a server is one inert line."""
        from leader_eval.report.check_line import failed_check_line

        n_ok = record.get("n_scored", 0)
        lines = [f"{len(failed)} of {n_ok} samples failed (case score {record.get('score')})"]
        for s in failed[:3]:
            sample = parent.samples_by_key.get((s.case_id, s.index))
            raw = sample.text if sample else ""
            shown = repr(raw[:MAX_REPR]) + (f" ... (+{len(raw) - MAX_REPR} chars)" if len(raw) > MAX_REPR else "")
            lines.append(f"-- sample {s.index}: {inert(s.reason)}{' [hard fail]' if s.hard_fail else ''}")
            for c in s.checks:
                if not c["passed"]:
                    lines.append(failed_check_line("   x ", {**c, "hard": False}))
            lines.append(f"   raw: {shown}")
        lines.append(f"full outputs: leader-eval show {parent.run_result.path} --case {self.case.id}")
        return inert("\n".join(lines), multiline=True)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return excinfo.value.text
        return inert(str(super().repr_failure(excinfo, style=style)), multiline=True)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        if self.case.source is not None:  # a case from a data file (cases_from): its record there
            return Path(self.case.source), None if self.case.row else self.case.line - 1, self.case.id
        return self.path, self.case.line - 1, self.case.id


class StressItem(pytest.Item):
    """A suite's stress requirements (``gate: stress:``), judged on a sweep of the lengths they
    name (``studies.stress.requirement_steps``) with the session's sampling options. Without
    ``--le-stress`` it is skipped (a long sweep), never passed."""

    def runtest(self) -> None:
        from leader_eval.runs.evaluate import run_seed_and_label
        from leader_eval.runs.options import run_options
        from leader_eval.sampling.keys import backend_model_key
        from leader_eval.scoring.error_rule import error_verdict
        from leader_eval.store.names import default_out_dir
        from leader_eval.studies.stress import extend_context, requirement_steps, stress
        from leader_eval.studies.stress_gate import format_requirements
        from leader_eval.suite.gate_spec import gate_spec

        state: PluginState = self.config.stash[STATE]
        o = state.options
        if not o.stress:
            pytest.skip("the suite's stress requirements need a long sweep: run with --le-stress")
        parent: SuiteFile = self.parent  # type: ignore[assignment]
        suite = parent.suite
        try:
            if state.backend is None:
                state.backend = resolve_backend(o.sampling)
            options = run_options(o.sampling, progress=False, trusted=o.trusted)
            options.extra_manifest = {"created_by": "pytest"}
            steps = requirement_steps(gate_spec(suite.gate))
            backend = state.backend
            # as ``leader-eval stress``: an in-process GGUF is extended with YaRN for the whole
            # sweep when its longest length does not fit the training context (its own model)
            cases = [c for c in suite.cases if c.stress.get("enabled")]
            extended, extension = (
                extend_context(options, suite, cases, steps[-1]) if cases and steps else (options, None)
            )
            if extension:
                backend = resolve_backend(
                    {**o.sampling, "context_length": extended.context_length, "rope_scaling": "yarn"}
                )
                # the sweep plans with the extended context (a suite's context_length would
                # otherwise mark the extended lengths as overflows); rope_scaling stays unset in
                # the options, so the manifest says the extension was automatic
                options = dataclasses.replace(options, context_length=extended.context_length)
            seed, label = run_seed_and_label(suite, options, backend)
            options.seed = seed
            options.out = default_out_dir(
                suite, label, seed, model=backend_model_key(backend), root=o.run_dir, suffix="__stress"
            )
            result = stress(
                suite,
                options=options,
                tokens=steps[-1],
                steps=steps,
                backend=backend,
                strict=o.golden_strict,
                plot=False,
            )
        except LeaderEvalError as err:
            raise CaseFailed(str(err)) from None
        text = format_requirements(result.requirements)
        # as ``leader-eval stress``: an overflow is what a sweep measures, any other sampler error
        # fails it (a requirement is judged on scored samples only, so errors would vanish there)
        errors = error_verdict(result.run.summary, o.max_error_rate, overflow_is_error=False)
        if errors.failed:
            text = f"{errors.message()} (--le-max-error-rate)" + (f"\n{text}" if text else "")
        self.add_report_section("call", "leader-eval stress", text)
        if errors.failed or any(r.failed for r in result.requirements):
            raise CaseFailed(text)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return excinfo.value.text
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.parent.name if self.parent else ''}::stress"


class LeaderEvalFixture:
    """Session fixture for cases written in Python; results feed the same aggregation."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def evaluate(self, request: pytest.FixtureRequest, suite: str | Path, case_id: str) -> dict[str, Any]:
        """Sample and score one case of a suite; returns its case record (also sent to the gate,
        which pairs the session's fixture cases with the golden's same cases), with ``outputs``
        (each sample's raw text, by index) and ``samples`` (index, verdict, reason, text, calls,
        checks)."""
        from leader_eval.runs.evaluate import run, run_seed_and_label
        from leader_eval.runs.options import run_options
        from leader_eval.sampling.keys import backend_model_key
        from leader_eval.suite.load import load_suite

        state: PluginState = self.config.stash[STATE]
        o = state.options
        # its report carries the marker, so the controller knows a suite was used (session.py)
        request.node.add_marker(pytest.mark.leader_eval)
        if o.matrix:  # which model's? a fixture case would be gated against no entry's run
            pytest.fail(
                "the leader_eval fixture samples one model: this session gives a model matrix "
                f"({len(o.entries)} --le-model entries); run Python-written cases with one --le-model",
                pytrace=False,
            )
        loaded = load_suite(suite)
        if o.shard is not None and case_id not in shard_cases(loaded, o.shard):
            pytest.skip(f"case {case_id} of {loaded.name} belongs to another shard than {o.shard[0]}/{o.shard[1]}")
        options = run_options(o.sampling, case_ids=[case_id], progress=False, trusted=o.trusted)
        options.extra_manifest = {"created_by": "pytest"}
        if state.backend is None:
            state.backend = resolve_backend(o.sampling)
        seed, _ = run_seed_and_label(loaded, options, state.backend)
        options.seed = seed
        model = backend_model_key(state.backend)
        options.out = o.run_dir / f"fixture__{loaded.name}__{case_id}__{model}__seed{seed}"
        try:
            result = run(loaded, options, backend=state.backend)
        except LeaderEvalError as err:  # an undefined Python check, a replay that does not match: one line
            pytest.fail(inert(str(err)), pytrace=False)
        record = dict(result.cases[0])
        record.update(
            suite=result.summary["suite"],
            suite_path=str(suite),
            run_dir=str(result.path),
            manifest_status=result.manifest.get("status"),
            partial=True,
        )
        scores = sorted((s for s in result.scores if s.case_id == case_id), key=lambda s: s.index)
        # what the gate needs crosses xdist (builtin types, no model text); the caller also gets
        # each sample's raw output and verdict, to assert on content in Python
        record["samples"] = [
            {"index": s.index, "passed": bool(s.passed), "outcome": s.outcome, "reason": s.reason} for s in scores
        ]
        request.node.user_properties.append((RECORD_KEY, junit_json(record)))
        texts = {s.index: s.text for s in result.samples if s.case_id == case_id}
        out = json.loads(json.dumps(record))
        out["samples"] = [
            {**short, "text": texts.get(s.index, ""), "calls": s.calls, "checks": s.checks, "hard_fail": s.hard_fail}
            for short, s in zip(out["samples"], scores, strict=True)
        ]
        out["outputs"] = [texts.get(s.index, "") for s in scores]
        return out
