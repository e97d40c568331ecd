"""`leader-eval stress`: filler, exact prompt lengths, fact depth, overflow without sampling, outputs.

Uses the embedded model's real tokenizer and chat template (vocabulary only: no weights are run).
Sampling goes through a scripted backend that counts requests, so the test stays fast and can
prove that an overflowing prompt is never sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.studies.stress import (
    FillerStream,
    build_variants,
    filler_violations,
    first_failure,
    format_stress_table,
    protected_words,
    read_stress,
    stress,
)
from leader_eval.suite.load import load_suite
from leader_eval.suite.render import render_messages

ROOT = Path(__file__).resolve().parents[2]
RECALL = ROOT / "suites" / "stress_recall.yaml"
CORE = ROOT / "suites" / "leader_core.yaml"


class ScriptedBackend:
    """The embedded model's tokenizer and template, with a canned answer instead of sampling."""

    max_concurrency = 4
    default_protocol = "json"

    def __init__(self, inner: Any, answer: str):
        self.inner = inner
        self.answer = answer
        self.model_id = "scripted:smollm2-tokenizer"
        self.context_length = inner.context_length
        self.special_tokens = inner.special_tokens
        self.requests: list[int] = []  # prompt length of every request sent

    def tokenize(self, text: str) -> list[int]:
        return self.inner.tokenize(text)

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        return self.inner.apply_chat_template(messages, tools)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        n = request.prompt.n_tokens or 0
        self.requests.append(n)
        return [Completion(self.answer, [1], "stop", prompt_tokens=n, completion_tokens=1) for _ in request.seeds]

    def describe(self) -> dict[str, Any]:
        return {"backend": "scripted"}

    async def aclose(self) -> None:
        pass


def test_filler_is_seeded_and_never_bears_on_the_decision() -> None:
    a = FillerStream(7, "case").take(300)
    assert a == FillerStream(7, "case").take(300)
    assert a != FillerStream(8, "case").take(300)
    assert len({e["text"] for e in a}) > 100  # varied traffic, not one line repeated
    assert not any("lorem" in e["text"].lower() for e in a)
    # the check itself catches what filler must never say
    for bad in ("Our goal is the bridge.", "Mira, please pause.", "Who does what?", "[NO CHAT] hi", "assign Bo"):
        assert filler_violations(bad), bad
    for path in (CORE, RECALL):
        suite = load_suite(path)
        for case in suite.cases:
            fact_var = case.stress.get("fact_var")
            protected = protected_words(case, "events", fact_var)
            names = {n.lower() for n in [case.vars["agent_name"], *case.vars["team"]]}
            assert names <= protected
            for e in FillerStream(0, case.id, protected).take(400):
                line = f"{e['from']}: {e['text']}"
                assert filler_violations(line, protected) == [], (case.id, line)


def test_prompt_is_exact_to_the_token_and_the_case_is_unchanged(local_backend: Any) -> None:
    suite = load_suite(RECALL)
    case = suite.cases[0]
    variants = build_variants(suite, [case], local_backend, [900, 2500, 6000], depths=("start", "middle", "end"))
    assert [v.variant_id for v in variants[:3]] == [
        "recalls_key_location@900:start",
        "recalls_key_location@900:middle",
        "recalls_key_location@900:end",
    ]
    tools = [t.to_openai() for t in suite.tools]
    original = render_messages(suite, case)
    fact = case.vars["fact"]
    for v in variants:
        assert v.status == "ok" and v.case is not None and v.prompt is not None
        # exact: the recorded count is what the model's tokenizer gives for the text the model sees
        again = local_backend.apply_chat_template(render_messages(suite, v.case), tools)
        assert v.prompt_tokens == len(again.token_ids) == len(local_backend.tokenize(again.text))
        assert again.text == v.prompt.text
        assert v.target - 4 <= v.prompt_tokens <= v.target, (v.variant_id, v.prompt_tokens)
        events = v.case.vars["events"]
        # system prompt fixed; the triggering event last; the fact where asked, once
        messages = render_messages(suite, v.case)
        assert messages[0] == original[0]
        assert events[-1] == case.vars["events"][-1]
        fact_at = [i for i, e in enumerate(events) if e["text"] == fact["text"]]
        assert fact_at == [v.fact_index]
        n_filler = len(events) - 2
        assert v.fact_index == {"start": 0, "middle": n_filler // 2, "end": n_filler}[v.depth]
        times = [e["time"] for e in events]
        assert times == sorted(times)  # HH:MM, chronological
    # nested: at each depth a shorter variant's filler (time stamps included) is the longer one's
    # beginning, up to its last line (lengthened to land the last tokens), so the local backend
    # prefills the shared prefix once
    for depth in ("start", "end"):
        short, mid, long = (v for v in variants if v.depth == depth)
        for a, b in ((short, mid), (mid, long)):
            assert a.case is not None and b.case is not None
            k = a.n_filler - 1 + (depth == "start")  # the fact leads at the start
            assert a.case.vars["events"][:k] == b.case.vars["events"][:k]
            assert a.prompt is not None and b.prompt is not None
            x, y = a.prompt.token_ids or [], b.prompt.token_ids or []
            shared = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), len(x))
            assert shared > 0.8 * len(x)


def test_overflow_is_recorded_without_sampling_and_outputs_are_written(local_backend: Any, tmp_path: Path) -> None:
    answer = '{"tool": "send_message_to_chat", "arguments": {"message": "Ada, the key is under the blue pot."}}'
    backend = ScriptedBackend(local_backend, answer)
    result = stress(
        RECALL,
        model="scripted",
        tokens=4000,
        steps=[900, 1000, 2000],
        case_ids=["recalls_key_location"],
        samples=2,
        seed=3,
        out=tmp_path / "run",
        depths=["start", "end"],
        context_length=1100,  # 1000 + 64 fits; 2000 and 4000 overflow
        backend=backend,
        progress=False,
        cache=False,
    )
    assert result.steps == [900, 1000, 2000, 4000]
    # only the fitting prompts were ever sent, each once per case with both seeds
    assert sorted(backend.requests) == sorted(v.prompt_tokens for v in result.variants if v.target <= 1000)
    assert all(n <= 1100 - 64 for n in backend.requests)
    over = [v for v in result.variants if v.target >= 2000]
    assert over and all(v.status == "overflow" and v.score is None and v.n_context_overflow == 2 for v in over)
    by_id = {c["case_id"]: c for c in result.run.cases}
    for v in over:  # its own outcome, never a tool-call failure
        assert by_id[v.variant_id]["n_scored"] == 0 and by_id[v.variant_id]["reasons"] == {}
    outcomes = {(s.case_id, s.outcome) for s in result.run.samples}
    assert ("recalls_key_location@4000:end", "context_overflow") in outcomes
    assert all(v.score == 1.0 for v in result.variants if v.target <= 1000)
    assert result.first_failure["recalls_key_location:start"] is None
    assert result.first_overflow["recalls_key_location:end"] == 2000
    assert result.first_overflow["overall"] == 2000

    table = format_stress_table(result)
    assert "recalls_key_location:start" in table and "overflow" in table and "first failure" in table
    png = result.out / "stress.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = read_stress(result.out)  # the recorded result renders the same table
    assert format_stress_table(again) == table
    data = json.loads((result.out / "stress.json").read_text())
    assert data["first_overflow"]["overall"] == 2000
    assert {v["variant_id"] for v in data["variants"]} == {v.variant_id for v in result.variants}
    # the sample store holds each prompt once, not once per sample
    prompts = [json.loads(x) for x in (result.out / "prompts.jsonl").read_text().splitlines()]
    assert len(prompts) == len(result.variants)
    assert prompts[0]["text"][:200] not in (result.out / "samples.jsonl").read_text()


def test_first_failure_rule() -> None:
    assert first_failure([(1000, 1.0), (2000, 1.0), (4000, 0.67)]) == 4000  # dropped by more than 0.25
    assert first_failure([(1000, 0.67), (2000, 0.67), (4000, 0.33)]) == 4000  # below 0.5
    assert first_failure([(2000, 0.33), (1000, 0.4)]) == 1000  # fails already at the shortest length
    assert first_failure([(1000, 1.0), (2000, 0.8)]) is None
    assert first_failure([]) is None


def test_a_case_longer_than_a_step_is_marked_not_padded(local_backend: Any) -> None:
    suite = load_suite(CORE)
    case = next(c for c in suite.cases if c.id == "assigns_owners")
    (v,) = build_variants(suite, [case], local_backend, [100])
    assert v.status == "shorter_than_case" and v.prompt_tokens > 100 and v.case is None


@pytest.mark.model
@pytest.mark.slow
def test_reduced_sweep_on_the_embedded_model(tmp_path: Path) -> None:
    """CI's reduced sweep: one real sampled length, one that overflows a 1,100-token context."""
    from leader_eval.sampling.backends.local import LocalBackend, embedded_model_path

    # one thread: two llama.cpp (OpenMP) threads spin-wait badly on a busy 2-core machine
    backend = LocalBackend(embedded_model_path(), "local:smollm2", n_threads=1)
    result = stress(
        RECALL,
        model="local:smollm2",
        tokens=2000,
        steps=[800],
        case_ids=["recalls_key_location"],
        samples=1,
        seed=0,
        out=tmp_path / "run",
        depths=["end"],
        context_length=1100,
        backend=backend,
        max_tokens=32,
        progress=False,
        cache=False,
    )
    fit, over = result.variants
    assert fit.status == "ok" and fit.n_scored == 1 and 796 <= fit.prompt_tokens <= 800
    assert over.status == "overflow" and over.n_scored == 0
    sampled = [s for s in result.run.samples if s.outcome == "ok"]
    assert len(sampled) == 1 and sampled[0].prompt_tokens == fit.prompt_tokens
    assert (result.out / "stress.png").is_file()


def test_a_length_past_the_largest_sweep_is_refused_before_any_model_loads() -> None:
    """Fitting filler renders and tokenizes a prompt of that length: a mistyped or hostile
    length is a one-line error at once, not hours of fitting (the model spec is never read)."""
    from leader_eval.errors import LeaderEvalError

    with pytest.raises(LeaderEvalError, match="over the largest sweep length, 262,144"):
        stress(RECALL, model="bogus:never-resolved", tokens=10**9)


SUPPORT = ROOT / "tests" / "data" / "stress_support" / "support.yaml"


def test_a_support_suite_stresses_with_its_own_history_and_filler(local_backend: Any, tmp_path: Path) -> None:
    answer = '{"tool": "refund", "arguments": {"order": "7731"}}'
    backend = ScriptedBackend(local_backend, answer)
    suite = load_suite(SUPPORT)
    pool = list(suite.stress_filler or ())
    result = stress(
        suite, model="scripted", tokens=600, steps=[300], samples=2, seed=1, out=tmp_path / "run",
        backend=backend, progress=False, cache=False, plot=False,
    )  # fmt: skip
    short, long = result.variants
    assert (short.variant_id, long.variant_id) == ("refunds_newest_order@300", "refunds_newest_order@600")
    own = suite.cases[0].vars["tickets"]
    for v in (short, long):
        assert v.status == "ok" and v.score == 1.0 and v.case is not None
        tickets = v.case.vars["tickets"]
        assert tickets[-1] == own[-1]  # the deciding ticket last, unchanged
        filler = tickets[:-1]
        # the suite's own items, in its own shape, each at most once; never the village chat
        assert filler and all(t in pool for t in filler) and len({str(t) for t in filler}) == len(filler)
        assert all(set(t) == {"at", "customer", "message"} for t in filler)
        assert v.target - 40 <= v.prompt_tokens <= v.target  # whole items: within one item of the length
    # nested: the shorter prompt's filler is the longer one's beginning (the KV cache's prefix)
    assert long.case.vars["tickets"][: short.n_filler] == short.case.vars["tickets"][:-1]
    # the curve says what was sampled: one case, two lengths, 2 samples each
    table = format_stress_table(result)
    assert "1 case(s) x 2 length(s) = 2 variant(s); 2 sample(s) per variant, 4 scored in all" in table
    (point,) = [p for c in result.curves if c.depth == "all" for p in c.points if p.length == 600]
    assert point.n_cases == 1 and point.n_samples == 2 and point.score is not None
    assert point.score.low < 1.0 == point.score.value  # Wilson over its 2 samples, not a zero-width band
    with pytest.raises(LeaderEvalError, match=r"support\.yaml: stress\.filler holds too few items .* at 4,000 tokens"):
        stress(suite, model="scripted", tokens=4000, steps=[300], backend=backend, progress=False, cache=False)


def test_a_sweep_past_the_training_context_extends_the_embedded_model_for_every_length() -> None:
    from leader_eval.runs.options import RunOptions
    from leader_eval.studies.stress import extend_context, extension_text

    suite = load_suite(CORE)
    cases = [c for c in suite.cases if c.stress.get("enabled")]
    options, ext = extend_context(RunOptions(model="local:smollm2"), suite, cases, 40000)
    assert ext == {"method": "yarn", "from": 8192, "to": 65536, "auto": True}
    assert options.context_length == 65536 and options.backend_options["rope_scaling"] == "yarn"
    assert extension_text(ext) == "context extended 8,192 -> 65,536 with YaRN"
    # within the training context (prompt + max_tokens), explicitly not, or a server: as it is
    for opts, longest in (
        (RunOptions(model="local:smollm2"), 8000),
        (RunOptions(model="local:smollm2", backend_options={"rope_scaling": "none"}), 40000),
        (RunOptions(model="openai:http://127.0.0.1:9/v1#m"), 40000),
    ):
        assert extend_context(opts, suite, cases, longest) == (opts, None)
    # a --context-length above the training context is the extension's size
    options, ext = extend_context(RunOptions(model="local:smollm2", context_length=50000), suite, cases, 40000)
    assert ext is not None and ext["to"] == 50000 == options.context_length


def test_a_sweep_with_nothing_to_label_plots_without_a_matplotlib_warning(tmp_path: Path) -> None:
    """Every length overflowed: nothing carries a label, and matplotlib's "No artists with labels
    found to put in legend" warning must not reach the user's output."""
    import warnings
    from types import SimpleNamespace

    from leader_eval.report.html import _stress_plot
    from leader_eval.studies.stress import write_plot

    over = [SimpleNamespace(column="c@start", target=s, status="overflow", prompt_tokens=s, score=None,
                            strict_format_rate=None, n_scored=0, n_passed=0) for s in (1000, 2000)]  # fmt: skip
    result = SimpleNamespace(columns=["c@start"], variants=over, overall={}, steps=[1000, 2000], context_length=None, curves=[], n_ctx_train=None, context_extension=None,
                             suite="s", model_id="m")  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_plot(result, tmp_path / "stress.png")  # type: ignore[arg-type]
        _stress_plot(result)
    assert [str(w.message) for w in caught] == []
    assert (tmp_path / "stress.png").stat().st_size > 0


@pytest.mark.model
def test_the_stress_cli_sweeps_a_tinker_checkpoint_with_the_run_flags_only(
    smol_tokenizer_dir: Path,
    embedded_sampler: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Tinker checkpoint through ``leader-eval stress`` with nothing but the CLI's flags (the
    SDK's clients are the named test doubles of tests/support/tinker.py; the API cannot be reached
    from here): every length within the service's context is sampled through the SDK's types, the
    one past it is reported as an overflow, never sampled."""
    import tinker

    from leader_eval.cli.app import main
    from tests.support.tinker import (
        CHECKPOINT,
        SMOL_BASE,
        FakeRestClientDouble,
        FakeSamplingClientDouble,
        FakeServiceClientDouble,
    )

    double = FakeSamplingClientDouble(embedded_sampler)
    FakeServiceClientDouble.instances = []
    FakeServiceClientDouble.sampling_client = double
    monkeypatch.setattr(tinker, "ServiceClient", FakeServiceClientDouble)
    monkeypatch.setattr(tinker, "RestClient", lambda *a, **k: FakeRestClientDouble(SMOL_BASE, max_context=1024))
    out = tmp_path / "run"
    code = main(
        [
            "stress", str(SUPPORT), "--model", CHECKPOINT, "--tokenizer", str(smol_tokenizer_dir),
            "--base-model", SMOL_BASE, "--tokens", "1500", "--steps", "300,600", "--samples", "2",
            "--seed", "3", "--max-tokens", "16", "--out", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    # the service's context (1,024, from the RestClient double's capabilities) bounds the sweep
    sent = [c.prompt.to_ints() for c in double.calls]
    assert sent and all(len(p) <= 1024 for p in sent)
    assert {c.num_samples for c in double.calls} == {2}
    # the table and the curve: both lengths sampled, 1500 an overflow at the probed context
    assert "context 1024 tokens" in printed.out and "1 case(s) x 3 length(s)" in printed.out
    assert re.search(r"^1500 +overflow", printed.out, re.M) and "first overflow                  1500" in printed.out
    assert re.search(r"^  600 +all +\d\.\d\d .* 1 +2 ", printed.out, re.M)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_case: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_case.setdefault(r["case_id"], []).append(r)
    assert {k: len(v) for k, v in by_case.items() if k.endswith(("@300", "@600"))} == {
        "refunds_newest_order@300": 2,
        "refunds_newest_order@600": 2,
    }
    assert len(double.calls) == 2  # one request per sampled length, k=2 each; the overflow never sent


@pytest.mark.model
@pytest.mark.server
def test_the_stress_cli_sweeps_a_real_llama_cpp_server_with_the_run_flags_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checkpoint served by a real llama.cpp server on loopback (``openai:`` with
    ``--template-gguf`` for its chat template), swept with nothing but the CLI's flags."""
    pytest.importorskip("uvicorn", reason="needs llama-cpp-python[server]")
    from leader_eval.cli.app import main
    from leader_eval.sampling.backends.local import embedded_model_path
    from tests.support.servers import start_llama_server

    gguf = embedded_model_path()
    out = tmp_path / "run"
    with start_llama_server(gguf, n_ctx=1024, alias="smollm2") as server:
        code = main(
            [
                "stress", str(SUPPORT), "--model", f"openai:{server.url}/v1#smollm2", "--template-gguf", str(gguf),
                "--api-mode", "completions", "--context-length", "1024", "--tokens", "1500", "--steps", "300,600",
                "--samples", "2", "--seed", "3", "--max-tokens", "16", "--concurrency", "1", "--out", str(out),
            ]
        )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "context 1024 tokens" in printed.out and "1 case(s) x 3 length(s)" in printed.out
    assert re.search(r"^1500 +overflow", printed.out, re.M)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    sampled: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        sampled.setdefault(r["case_id"], []).append(r)
    # both lengths really sampled by the server (no sampler error), the overflow never sent
    assert {k: len(v) for k, v in sampled.items() if k.endswith(("@300", "@600"))} == {
        "refunds_newest_order@300": 2,
        "refunds_newest_order@600": 2,
    }
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    ok = [s for s in samples if s.get("outcome") == "ok"]
    assert len(ok) == 4 and all(s["prompt_tokens"] <= 600 for s in ok)


def test_filler_items_too_long_to_reach_a_length_are_refused_not_labelled_with_it(
    local_backend: Any, tmp_path: Path
) -> None:
    """A suite's own filler items are never cut: where they are too long to fill the gap, the
    prompt labelled 1,000 tokens would hold the case alone. One line, before anything is sampled."""
    import shutil

    shutil.copytree(SUPPORT.parent, tmp_path / "s")
    words = " ".join(["alpha bravo charlie delta echo foxtrot golf hotel india juliet"] * 150)  # ~2,300 tokens
    (tmp_path / "s" / "support_filler.yaml").write_text(
        "".join(f'- {{at: "2026-02-{i + 1:02d}", customer: C{i}, message: "{words} {i}"}}\n' for i in range(20)),
        encoding="utf-8",
    )
    suite = load_suite(tmp_path / "s" / "support.yaml")
    with pytest.raises(
        LeaderEvalError,
        match=r"support\.yaml: stress: case 'refunds_newest_order' cannot be filled to 1,000 tokens: the closest "
        r"prompt is \d+ tokens \(stress\.filler items are too long",
    ):
        build_variants(suite, suite.cases, local_backend, [1000], seed=0)


def test_a_length_where_some_samples_overflowed_is_not_judged_on_the_rest(local_backend: Any, tmp_path: Path) -> None:
    """One prompt, some samples scored and some refused as too long (a server that cannot say
    whether it fits): the cell is incomplete, and a requirement there cannot be met."""
    import shutil

    from leader_eval.sampling.backends.base import overflow_error

    class HalfOverflowDouble(ScriptedBackend):  # test double: refuses all but the first sample of a long prompt
        async def sample(self, request: SampleRequest) -> list[Completion]:
            n = request.prompt.n_tokens or 0
            return [
                Completion("", [], None, error=overflow_error(n, 32, 2048))
                if n > 2000 and i > 0
                else Completion(self.answer, [1], "stop", prompt_tokens=n, completion_tokens=1)
                for i, _ in enumerate(request.seeds)
            ]

    shutil.copytree(RECALL.parent / "templates", tmp_path / "templates")
    path = tmp_path / "recall.yaml"
    path.write_text(
        RECALL.read_text(encoding="utf-8") + "\ngate:\n  stress:\n    - at: 2500\n      min: {score: 0.5}\n",
        encoding="utf-8",
    )
    answer = '{"tool": "send_message_to_chat", "arguments": {"message": "The key is under the blue pot; use the north barn."}}'
    result = stress(
        path, backend=HalfOverflowDouble(local_backend, answer), tokens=2500, steps=[1000, 2500], depths=["end"],
        samples=3, seed=0, out=tmp_path / "run", plot=False, progress=False, cache=False,
    )  # fmt: skip
    at = {v.target: v for v in result.variants if v.case_id == "recalls_key_location"}
    assert at[1000].status == "ok" and at[1000].score == 1.0
    assert at[2500].status == "incomplete" and at[2500].score is None and at[2500].n_scored == 1
    assert "incomplete (2 overflow)" in format_stress_table(result)
    (req,) = result.requirements
    assert req.failed and "cannot judge score at 2500" in req.explanation


def test_a_requirement_judged_on_a_partial_sweep_says_what_it_covered(
    local_backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--cases``/``--depths`` sweep part of the suite: a requirement met there speaks for that
    part only, and the CLI says which (the cheap end-depth sweep is not the start depth's)."""
    import shutil

    import leader_eval.studies.stress as stress_module
    from leader_eval.cli.app import main

    shutil.copytree(RECALL.parent / "templates", tmp_path / "templates")
    path = tmp_path / "recall.yaml"
    path.write_text(
        RECALL.read_text(encoding="utf-8") + "\ngate:\n  stress:\n    - at: 1500\n      min: {score: 0.5}\n",
        encoding="utf-8",
    )
    answer = '{"tool": "send_message_to_chat", "arguments": {"message": "The key is under the blue pot; use the north barn."}}'
    monkeypatch.setattr(stress_module, "resolve_backend", lambda *a, **k: ScriptedBackend(local_backend, answer))
    args = ["stress", str(path), "--model", "local:smollm2", "--rope-scaling", "none", "--tokens", "1500"]
    args += ["--steps", "1500", "--samples", "1", "--seed", "0", "--out", str(tmp_path / "run")]
    main([*args, "--cases", "recalls_key_location", "--depths", "end"])
    out = capsys.readouterr().out
    assert "judged on this sweep only: case(s) recalls_key_location; depth(s) end" in out, out


def test_a_recorded_sweep_replays_offline_to_the_same_curve(local_backend: Any, tmp_path: Path) -> None:
    """A sweep sampled once (hours at 40K) is judged again from its recording: ``replay:RUN`` rebuilds
    every variant from the filler layout stress.json records (no tokenizer), finds its recorded
    prompt and samples, and gives the same table; what the recording lacks is a one-line error."""
    import shutil

    from leader_eval.errors import RunDirError

    shutil.copytree(RECALL.parent / "templates", tmp_path / "templates")
    path = tmp_path / "recall.yaml"
    path.write_text(RECALL.read_text(encoding="utf-8"), encoding="utf-8")
    answer = '{"tool": "send_message_to_chat", "arguments": {"message": "The key is under the blue pot; use the north barn."}}'
    sampled = stress(
        path, backend=ScriptedBackend(local_backend, answer), tokens=1500, steps=[1000, 1500], depths=["start", "end"],
        samples=2, seed=5, out=tmp_path / "run", plot=False, progress=False, cache=False,
    )  # fmt: skip
    assert all(v.capacity > 0 for v in sampled.variants) and any(v.extra_words for v in sampled.variants)
    replay = f"replay:{tmp_path / 'run'}"
    replayed = stress(
        path, model=replay, tokens=1500, steps=[1000, 1500], depths=["start", "end"], out=tmp_path / "again",
        progress=False,
    )  # fmt: skip
    assert [(v.variant_id, v.prompt_tokens, v.n_scored, v.score) for v in replayed.variants] == [
        (v.variant_id, v.prompt_tokens, v.n_scored, v.score) for v in sampled.variants
    ]
    assert format_stress_table(replayed).split("run dir:")[0] == format_stress_table(sampled).split("run dir:")[0]
    # a replay judges what a fresh sweep with the same arguments would: a depth or length the
    # recording lacks (here the default depths) is an error, never a narrower verdict
    with pytest.raises(
        LeaderEvalError, match=r"the recorded sweep has no recalls_key_location@1000:middle \(it swept "
    ):
        stress(path, model=replay, tokens=1500, steps=[1000, 1500], progress=False)
    with pytest.raises(LeaderEvalError, match=r"the recorded sweep has no recalls_key_location@1200:start"):
        stress(path, model=replay, tokens=1500, steps=[1200], depths=["start"], progress=False)
    # a suite that no longer renders the recorded prompts (its scaffold changed) is refused
    path.write_text(RECALL.read_text(encoding="utf-8").replace("Mira", "Mora"), encoding="utf-8")
    with pytest.raises(RunDirError, match="no recorded prompt matches these messages"):
        stress(path, model=replay, tokens=1500, steps=[1000, 1500], depths=["start", "end"], progress=False)

    # a hostile record cannot size the rebuilt filler (a billion lines), or pass a non-integer
    record = json.loads((tmp_path / "run" / "stress.json").read_text(encoding="utf-8"))
    for bad in (10**9, -1, "12", True):
        record["variants"][0]["n_filler"] = bad
        (tmp_path / "run" / "stress.json").write_text(json.dumps(record), encoding="utf-8")
        with pytest.raises(
            LeaderEvalError, match=r"stress\.json: recalls_key_location@1000:start: n_filler .* is not an integer"
        ):
            stress(path, model=replay, tokens=1500, steps=[1000, 1500], depths=["start", "end"], progress=False)
    # a run directory that holds no sweep record is not replayed as one
    shutil.copytree(tmp_path / "run", tmp_path / "plain")
    (tmp_path / "plain" / "stress.json").unlink()
    with pytest.raises(LeaderEvalError, match=r"plain: not a stress sweep \(no stress\.json\)"):
        stress(path, model=f"replay:{tmp_path / 'plain'}", tokens=1500, progress=False)
