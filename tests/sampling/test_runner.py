"""The run as a record: every slot exactly once, resumable after SIGKILL, reproducible by seed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leader_eval.runs.evaluate import read_run, run
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.store.run_store import RecordLog
from tests.support.scripted import ScriptedBackend

pytestmark = pytest.mark.model


def test_record_log_cuts_a_torn_tail(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    log = RecordLog(p, key_field="k")
    log.append({"k": "a", "v": 1})
    log.append({"k": "b", "v": 2})
    log.close()
    good = p.read_bytes()
    with p.open("ab") as f:
        f.write(b'{"k": "c", "v"')  # a crash mid-write
    log = RecordLog(p, key_field="k")
    assert len(log) == 2 and "c" not in log
    assert p.read_bytes() == good
    log.append({"k": "c", "v": 3})
    log.append({"k": "a", "v": 99})  # a slot is written once, never twice
    log.close()
    lines = p.read_bytes().splitlines()
    assert [json.loads(x)["k"] for x in lines] == ["a", "b", "c"]


def test_run_records_samples_metrics_and_manifest(local_backend, mini_suite: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run(mini_suite, RunOptions(seed=3, out=out, progress=False), backend=local_backend)
    slots = sorted((s.case_id, s.index) for s in result.samples)
    assert slots == [("goal", 0), ("goal", 1), ("hello", 0), ("hello", 1)]
    for s in result.samples:
        assert s.outcome == "ok"
        assert s.token_ids and s.stop_reason in ("stop", "length")
        assert s.prompt_tokens > 0 and s.completion_tokens == len(s.token_ids)
        # the raw text keeps special tokens: a model that stops says so with its end-of-turn token
        if s.stop_reason == "stop":
            assert s.text.endswith("<|im_end|>")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["identity"]["run_seed"] == 3
    assert manifest["suite"]["content_hash"].startswith("sha256:")
    assert "llama-cpp-python" in manifest["versions"]
    summary = json.loads((out / "summary.json").read_text())
    for name, m in summary["overall"]["metrics"].items():
        assert m["n_samples"] == 4 and m["n_cases"] == 2, name
        assert m["low"] <= m["value"] <= m["high"], name
    assert "goal" in summary["by_tag"]
    again = read_run(out)
    assert [s.text for s in again.samples] == [s.text for s in result.samples]
    assert len(again.scores) == 4


def test_same_seed_same_text_whatever_order_or_subset(local_backend, mini_suite: Path, tmp_path: Path) -> None:
    both = run(mini_suite, RunOptions(seed=11, out=tmp_path / "a", progress=False), backend=local_backend)
    alone = run(
        mini_suite, RunOptions(seed=11, out=tmp_path / "b", case_ids=["goal"], progress=False), backend=local_backend
    )
    texts_both = {(s.case_id, s.index): s.text for s in both.samples if s.case_id == "goal"}
    texts_alone = {(s.case_id, s.index): s.text for s in alone.samples}
    assert texts_both == texts_alone
    other = run(
        mini_suite, RunOptions(seed=12, out=tmp_path / "c", case_ids=["goal"], progress=False), backend=local_backend
    )
    assert [s.seed for s in other.samples] != [s.seed for s in alone.samples]


def test_out_dir_of_another_run_exits_2(local_backend, mini_suite: Path, tmp_path: Path) -> None:
    from leader_eval.cli.app import main

    out = tmp_path / "run"
    run(mini_suite, RunOptions(seed=3, out=out, case_ids=["hello"], samples=1, progress=False), backend=local_backend)
    before = (out / "samples.jsonl").read_bytes()
    status = main(["run", str(mini_suite), "--seed", "4", "--case", "hello", "--samples", "1", "--out", str(out), "-q"])
    assert status == 2
    assert (out / "samples.jsonl").read_bytes() == before


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "leader_eval", *args]


def test_sigkill_mid_run_then_same_command_finishes(mini_suite: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = _cli("run", str(mini_suite), "--seed", "21", "--samples", "5", "--out", str(out), "-q")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples = out / "samples.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if samples.exists() and samples.read_bytes().count(b"\n") >= 3:
            break
        if proc.poll() is not None:
            pytest.fail(f"run ended before it could be killed: {proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = samples.read_bytes()
    complete = before[: before.rfind(b"\n") + 1]
    n_before = complete.count(b"\n")
    assert 3 <= n_before < 10
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    after = samples.read_bytes()
    assert after.startswith(complete)  # finished samples byte-identical to before the kill
    slots = [json.loads(line)["slot"] for line in after.splitlines()]
    assert sorted(slots) == sorted(f"{c}#{i}" for c in ("goal", "hello") for i in range(5))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["sampling_stats"]["reused"] == n_before
    assert manifest["sampling_stats"]["sampled"] == 10 - n_before  # none sampled twice

    # the resumed run equals an uninterrupted one with the same seed
    ref = subprocess.run(
        _cli("run", str(mini_suite), "--seed", "21", "--samples", "5", "--out", str(tmp_path / "ref"), "-q"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ref.returncode == 0, ref.stderr
    texts = {json.loads(x)["slot"]: json.loads(x)["text"] for x in after.splitlines()}
    ref_texts = {
        json.loads(x)["slot"]: json.loads(x)["text"]
        for x in (tmp_path / "ref" / "samples.jsonl").read_bytes().splitlines()
    }
    assert texts == ref_texts


def test_replay_rescores_without_the_model(local_backend, mini_suite: Path, tmp_path: Path, monkeypatch) -> None:
    recorded = run(mini_suite, RunOptions(seed=5, out=tmp_path / "rec", progress=False), backend=local_backend)
    assert all(s.outcome == "ok" for s in recorded.samples)
    # a stricter check: every non-trivial reply now counts as a repetition loop
    strict = tmp_path / "strict.yaml"
    strict.write_text(
        mini_suite.read_text().replace(
            "protocol: json\n",
            "protocol: json\nchecks:\n  repetition: {ngram: 1, max_ngram_repeat_fraction: 0.0, min_chars: 1}\n",
        )
    )
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # importing llama_cpp now raises ImportError
    with pytest.raises(ImportError):
        import llama_cpp  # noqa: F401
    replayed = run(strict, RunOptions(model=f"replay:{tmp_path / 'rec'}", out=tmp_path / "re", progress=False))
    assert [s.text for s in sorted(replayed.samples, key=lambda s: (s.case_id, s.index))] == [
        s.text for s in sorted(recorded.samples, key=lambda s: (s.case_id, s.index))
    ]
    # served from the record, not the model: counted and said as replayed, nothing sampled
    assert replayed.stats is not None and (replayed.stats.replayed, replayed.stats.sampled) == (4, 0)
    from leader_eval.report import format_summary

    assert "replayed 4 from the recorded run, sampled 0 new" in format_summary(replayed)

    def repetition(score) -> bool:
        return next(c["passed"] for c in score.checks if c["check"] == "repetition")

    rep = {(s.case_id, s.index): s for s in replayed.scores}
    orig = {(s.case_id, s.index): s for s in recorded.scores}
    flipped = [k for k in rep if repetition(orig[k]) and not repetition(rep[k])]
    assert flipped, "the stricter repetition threshold changed no check result"
    for k in flipped:
        assert not rep[k].passed  # a failing check fails the sample
    assert replayed.summary["overall"]["reasons"] != recorded.summary["overall"]["reasons"] or all(
        not s.passed for s in recorded.scores
    )
    # the same replay with the original suite reproduces the recorded scores exactly
    same = run(mini_suite, RunOptions(model=f"replay:{tmp_path / 'rec'}", out=tmp_path / "same", progress=False))
    assert [x.to_dict() for x in same.scores] == [x.to_dict() for x in recorded.scores]


def test_record_log_skips_a_bad_middle_line_and_keeps_what_follows(tmp_path: Path, caplog) -> None:
    p = tmp_path / "log.jsonl"
    log = RecordLog(p, key_field="k")
    for i in range(5):
        log.append({"k": f"r{i}", "v": i})
    log.close()
    lines = p.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"k": "r1", "v": \xff garbage}\n'  # bit rot / a foreign write in the middle
    lines[3] = b"[1, 2, 3]\n"  # valid JSON, not a record
    p.write_bytes(b"".join(lines) + b'{"k": "torn')
    with caplog.at_level("WARNING", logger="leader_eval"):
        log = RecordLog(p, key_field="k")
    assert sorted(log._index) == ["r0", "r2", "r4"]  # every readable record after the bad ones is kept
    assert log.bad_lines == [2, 4]
    assert f"{p}:2:" in caplog.text and f"{p}:4:" in caplog.text
    # only the torn tail was cut; the bad lines stay on disk for a human to inspect
    assert p.read_bytes() == b"".join(lines)
    log.append({"k": "r5", "v": 5})
    log.close()
    assert sorted(RecordLog(p, key_field="k", readonly=True)._index) == ["r0", "r2", "r4", "r5"]


def test_cache_shard_with_a_bad_middle_line_keeps_later_records(tmp_path: Path) -> None:
    from leader_eval.store.cache import SampleCache

    cache = SampleCache(tmp_path / "cache")
    keys = ["00" + f"{i:02x}" + "0" * 28 for i in range(4)]  # one shard, four records
    for k in keys:
        cache.put({"key": k, "text": k, "outcome": "ok"})
    cache.close()
    (shard,) = sorted((tmp_path / "cache").rglob("*.jsonl"))
    lines = shard.read_bytes().splitlines(keepends=True)
    shard.write_bytes(lines[0] + b"not json at all\n" + b"".join(lines[1:]))
    cache = SampleCache(tmp_path / "cache")
    assert all(cache.get(k) is not None for k in keys)
    cache.close()
    after = shard.read_bytes().splitlines()
    assert after[1] == b"not json at all" and len(after) == 5  # nothing was truncated


def test_show_reports_unreadable_lines_and_keeps_later_samples(
    local_backend, mini_suite: Path, tmp_path: Path, capsys
) -> None:
    from leader_eval.cli.app import main

    out = tmp_path / "run"
    run(mini_suite, RunOptions(seed=4, out=out, progress=False, max_tokens=8), backend=local_backend)
    p = out / "samples.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    assert len(lines) == 4
    lines[1] = "{oops\n"
    p.write_text("".join(lines))
    result = read_run(out)
    assert len(result.samples) == 3 and result.unreadable == {"samples.jsonl": [2]}
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    assert f"unreadable: 1 line(s) of {p} could not be read" in capsys.readouterr().out
    # a resume re-samples only the lost slot: the samples after the bad line are not re-drawn
    before = {json.loads(x)["slot"]: json.loads(x)["text"] for i, x in enumerate(lines) if i != 1}
    run(mini_suite, RunOptions(seed=4, out=out, progress=False, max_tokens=8), backend=local_backend)
    after = [json.loads(x) for i, x in enumerate(p.read_text().splitlines()) if i != 1]
    assert {r["slot"]: r["text"] for r in after if r["slot"] in before} == before


def test_a_wrong_type_sample_record_is_skipped_and_its_slot_sampled_again(
    local_backend, mini_suite: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    opts = RunOptions(seed=6, out=out, progress=False, max_tokens=8)
    run(mini_suite, opts, backend=local_backend)
    p = out / "samples.jsonl"
    recs = [json.loads(x) for x in p.read_text().splitlines()]
    recs[0]["text"] = {"not": "a string"}  # what an unchecked server reply once stored
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    # reading never crashes: the record is reported and skipped ...
    assert len(read_run(out).samples) == 3 and read_run(out).unreadable == {"samples.jsonl": [1]}
    # ... and resuming samples that slot again instead of keeping a record it cannot use
    again = run(mini_suite, opts, backend=local_backend)
    assert sorted((s.case_id, s.index) for s in again.samples) == [("goal", 0), ("goal", 1), ("hello", 0), ("hello", 1)]
    assert all(isinstance(s.text, str) for s in again.samples)


class _Lanes(ScriptedBackend):
    """A scripted backend that records, per request, its order, how many were in flight and how
    many tasks the event loop held."""

    def __init__(self) -> None:
        super().__init__(["hi"])
        self.order: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.max_tasks = 0

    async def sample(self, request: SampleRequest) -> list[Completion]:
        self.order.append(request.prompt.text)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.max_tasks = max(self.max_tasks, len(asyncio.all_tasks()))
        try:
            await asyncio.sleep(0.001)
            return await super().sample(request)
        finally:
            self.in_flight -= 1


def _lanes_suite(tmp_path: Path, cases: int) -> Path:
    lines = [
        "name: lanes",
        "protocol: json",
        "sampling: {temperature: 0.0, max_tokens: 8, samples: 1}",
        "scaffold:",
        "  messages:",
        '    - {role: user, content: "case {{ i }}"}',
        "tools: []",
        "cases:",
        *(f"  - {{id: c{i:03d}, vars: {{i: {i}}}, expect: {{no_call: true}}}}" for i in range(cases)),
    ]
    suite = tmp_path / "lanes.yaml"
    suite.write_text("\n".join(lines) + "\n")
    return suite


def test_a_large_run_holds_a_task_per_lane_and_sends_in_plan_order(tmp_path: Path) -> None:
    cases = 300
    suite = _lanes_suite(tmp_path, cases)
    backend = _Lanes()
    result = run(suite, RunOptions(seed=1, out=tmp_path / "run", concurrency=4, progress=False), backend=backend)
    assert len(result.samples) == cases and all(s.outcome == "ok" for s in result.samples)
    # requests go out in the plan's order, four at a time
    assert backend.order == [f"<user>case {i}\n" for i in range(cases)]
    assert backend.max_in_flight == 4
    # per lane its task and the guard's task around the request, beside the run's own two (the
    # run, the live scorer): not one task per case waiting on the semaphore (306 here before)
    assert backend.max_tasks <= 2 * 4 + 2


@pytest.mark.parametrize("stop", ["cancelled", "a sibling failed"])
def test_a_stopped_run_keeps_its_requests_in_flight_and_sends_no_more(tmp_path: Path, stop: str) -> None:
    """Ctrl-C cancels the run, a failing sample callback its other lanes: each lane records what its
    request in flight brings back within the grace period, then stops; no lane takes another case."""
    suite = _lanes_suite(tmp_path, 300)
    backend = _Lanes()
    seen: list[object] = []

    def on_sample(sample: object) -> None:
        seen.append(sample)
        if len(seen) == 10:
            if stop == "a sibling failed":
                raise OSError(28, "No space left on device")
            # what asyncio.Runner does on Ctrl-C: cancel the run's main task
            main = next(t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "_sample_and_close")
            main.cancel()

    out = tmp_path / "run"
    with pytest.raises(asyncio.CancelledError if stop == "cancelled" else OSError):
        run(suite, RunOptions(seed=1, out=out, concurrency=4, progress=False), backend=backend, on_sample=on_sample)
    recorded = (out / "samples.jsonl").read_text().splitlines()
    # the ten, then what the four lanes had in flight or started before the cancel reached them
    assert len(backend.order) <= 10 + 2 * 4
    assert len(recorded) == len(backend.order)  # every request in flight kept
    assert json.loads((out / "manifest.json").read_text())["status"] in ("interrupted", "failed")
