"""``steps.jsonl``: read like ``samples.jsonl`` (a bad line is ``FILE:LINE``, skipped, counted),
each step's prompt stored once by hash in ``prompts.jsonl``, and ``max_steps`` bounded.

Episodes sampled by a scripted backend (``tests.support.scripted``): no model."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.errors import SuiteError
from leader_eval.runs.evaluate import read_run, run, score_run
from leader_eval.runs.options import RunOptions
from leader_eval.store.run_store import PROMPTS, STEPS, RunDir, prompt_sha256
from leader_eval.suite.load import load_suite
from tests.support.episodes import EPISODE_SUITE, write_repo
from tests.support.scripted import ScriptedBackend, call

OUTPUTS = [
    call("lookup", topic="weather"),
    call("lookup", topic="goal"),
    call("send_message_to_chat", message="our goal is to build a bridge"),
    "thinking it over",
]


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("episodes")
    suite = write_repo(root)
    out = root / "run"
    options = RunOptions(model="scripted:test", seed=3, samples=3, out=out, progress=False, cache=False)
    run(suite, options, backend=ScriptedBackend(OUTPUTS))
    return suite, out


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_step_names_its_prompt_by_hash_and_the_prompt_is_stored_once(episodes: tuple[Path, Path]) -> None:
    _, out = episodes
    steps = _lines(out / STEPS)
    assert len(steps) > 6 and all("prompt" not in s and isinstance(s["prompt_sha256"], str) for s in steps)
    stored = [r for r in _lines(out / PROMPTS) if "prompt_sha256" in r]
    hashes = [r["prompt_sha256"] for r in stored]
    assert len(hashes) == len(set(hashes)), "each prompt once"
    assert {s["prompt_sha256"] for s in steps} == set(hashes)
    # the first step of every sample of a case sees the same prompt: one record for all of them
    first = {s["prompt_sha256"] for s in steps if s["step"] == 0 and s["case_id"] == "announce"}
    assert len(first) == 1 and sum(1 for s in steps if s["step"] == 0 and s["case_id"] == "announce") == 3
    for r in stored:
        assert r["prompt_sha256"] == prompt_sha256(r["text"], r["messages"])  # type: ignore[arg-type]
    # readers get the prompt back with each step
    for recs in RunDir(out).read_steps().values():
        for r in recs:
            assert (
                r["prompt"]["text"]
                and prompt_sha256(r["prompt"]["text"], r["prompt"]["messages"]) == r["prompt_sha256"]
            )


BAD_LINES = [
    "{not json",
    '{"slot": "announce#0#1", "case_id": "announce", "index": 0, "step": 1}',  # no seed: was KeyError: 'seed'
    '{"slot": "announce#0#1", "case_id": "announce", "index": 0, "seed": 1, "key": "k", "step": 1, '
    '"outcome": "ok", "text": "x", "calls": [], "results": [], "end": null, "prompt_sha256": "00"}',  # no such prompt
]


@pytest.mark.parametrize("bad", BAD_LINES, ids=["not-json", "no-seed", "unknown-prompt"])
def test_a_bad_steps_line_is_reported_skipped_and_counted_in_scoring_and_replay(
    episodes: tuple[Path, Path],
    tmp_path: Path,
    bad: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    suite, out = episodes
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    lines = (copy / STEPS).read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if json.loads(line)["slot"] == "announce#0#1")
    lines[at] = bad
    (copy / STEPS).write_text("\n".join(lines) + "\n")
    where = f"{copy / STEPS}:{at + 1}:"
    with caplog.at_level(logging.WARNING, logger="leader_eval"):
        scored = score_run(RunDir(copy), load_suite(suite))
    assert any(where in r.getMessage() for r in caplog.records)
    assert scored.unreadable[STEPS] == [at + 1]
    # the episode with a hole is not scored (never judged on a part of its steps): its case is
    # short of its planned samples, and the gate refuses the run
    assert not any(s.case_id == "announce" and s.index == 0 for s in scored.scores)
    assert read_run(copy).unreadable[STEPS] == [at + 1]
    capsys.readouterr()
    assert main(["show", str(copy)]) in (0, 1)
    assert f"1 line(s) of {copy / STEPS}" in capsys.readouterr().out
    golden = tmp_path / "golden"
    assert main(["gate", str(out), "--golden", str(golden), "--update-golden"]) == 0
    assert main(["gate", str(copy), "--golden", str(golden)]) == 1
    assert "announce: 2 of 3" in capsys.readouterr().out
    # replay serves the readable steps and records the missing one as a sampler error, no traceback
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="leader_eval"):
        rc = main(["run", str(suite), "--model", f"replay:{copy}", "--out", str(tmp_path / "again"), "-q"])
    assert rc in (0, 1) and any(where in r.getMessage() for r in caplog.records)


def test_max_steps_has_a_ceiling_at_load(tmp_path: Path) -> None:
    """A model that keeps calling a tool made steps.jsonl 596 MB: max_steps is at most 64."""
    suite = write_repo(tmp_path, EPISODE_SUITE.replace("max_steps: 3", "max_steps: 65"))
    with pytest.raises(SuiteError) as err:
        load_suite(suite)
    line = 1 + EPISODE_SUITE.splitlines().index("  max_steps: 3")
    assert str(err.value).startswith(f"{suite}:{line}:") and "64" in str(err.value)
    write_repo(tmp_path, EPISODE_SUITE.replace("max_steps: 3", "max_steps: 64"))
    assert load_suite(suite).cases[0].episode is not None
