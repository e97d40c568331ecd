"""``merge`` trusts nothing a shard says: every record of every record file is checked against
the shard's manifest, episodes carry their steps, and a merged run equals the unsharded one.

Sampled by a scripted backend (``tests.support.scripted``): no model, every output a function of
the seed, so an unsharded run and its shards draw the same records."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.runs.evaluate import read_run, run
from leader_eval.runs.merge import ShardError, merge_runs, shard_options
from leader_eval.runs.options import RunOptions
from leader_eval.store.run_store import CASES, PROMPTS, RESULTS, SAMPLES, STEPS, SUMMARY
from tests.conftest import MINIMAL_SUITE
from tests.support.scripted import ScriptedBackend, call

ROOT = Path(__file__).resolve().parents[2]
FLAGSHIP = ROOT / "suites" / "leader_episodes.yaml"

#: outputs for the flagship's episodes: reads, the chat tool, the forbidden UI tool, prose, an
#: undeclared tool (the 19.4 finding: merged without steps, such an episode re-scored as a PASS)
EPISODE_OUTPUTS = [
    call("read_screen"),
    call("undeclared_tool", x=1),
    call("send_message_to_chat", message="Hi team, our goal is to repair the old bridge"),
    call("click_ui", element="start"),
    "Let me think about that first.",
    call("read_goal"),
    call("pause", minutes=5),
]
MINI_OUTPUTS = [call("send_message_to_chat", message="hello team, our goal is to build a bridge"), "not a call"]


def _record(suite: Path, root: Path, outputs: list[str], shards: int, **backend: str) -> tuple[Path, list[Path]]:
    opts = RunOptions(model="scripted:test", seed=7, out=root / "full", progress=False, cache=False)
    run(suite, opts, backend=ScriptedBackend(outputs))
    paths = []
    for i in range(1, shards + 1):
        out = root / f"shard{i}"
        sharded = shard_options(replace(opts, out=out), f"{i}/{shards}", suite)
        run(suite, sharded, backend=ScriptedBackend(outputs, **backend) if i == shards else ScriptedBackend(outputs))
        paths.append(out)
    return root / "full", paths


def _records(path: Path) -> list[str]:
    return sorted(path.read_text().splitlines()) if path.exists() else []


@pytest.fixture(scope="module")
def flagship(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """The flagship episode suite, unsharded and in 3 shards (seed 7, 2 samples per case)."""
    return _record(FLAGSHIP, tmp_path_factory.mktemp("flagship"), EPISODE_OUTPUTS, 3)


def _copies(shards: list[Path], root: Path) -> list[Path]:
    out = [root / p.name for p in shards]
    for src, dst in zip(shards, out, strict=True):
        shutil.copytree(src, dst)
    return out


def test_a_merged_episode_suite_equals_the_unsharded_run_byte_for_byte(
    flagship: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    full, shards = flagship
    assert (shards[0] / STEPS).exists() and json.loads((full / SUMMARY).read_text())["overall"]["metrics"]["goal_rate"]
    merged = merge_runs([str(p) for p in reversed(shards)], tmp_path / "merged")
    assert merged.manifest["status"] == "complete"
    full_id = json.loads((full / SUMMARY).read_text())["run_id"]
    for name in (RESULTS, CASES, SUMMARY):
        want = (full / name).read_text().replace(json.dumps(full_id), '"RUN"')
        got = (tmp_path / "merged" / name).read_text().replace(json.dumps(merged.manifest["run_id"]), '"RUN"')
        assert got == want, name
    for name in (SAMPLES, STEPS, PROMPTS):  # the same records (the order is the sampler's)
        assert _records(tmp_path / "merged" / name) == _records(full / name), name
    # and the gate takes it like the unsharded run
    golden = tmp_path / "golden"
    assert main(["gate", str(full), "--golden", str(golden), "--update-golden"]) == 0
    assert main(["gate", str(tmp_path / "merged"), "--golden", str(golden)]) == 0


def test_a_shard_without_its_episode_steps_is_refused(flagship: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """The 19.4 finding: merge dropped steps.jsonl and re-scored episodes as single turns (an
    episode whose only call went to an undeclared tool became a PASS, the episode metrics went)."""
    shards = _copies(flagship[1], tmp_path)
    (shards[1] / STEPS).unlink()
    with pytest.raises(ShardError, match=r"samples\.jsonl:\d+: episode .* does not match its recorded steps"):
        merge_runs(shards, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_an_episode_missing_its_last_step_is_refused(flagship: tuple[Path, list[Path]], tmp_path: Path) -> None:
    shards = _copies(flagship[1], tmp_path)
    steps = (shards[0] / STEPS).read_text().splitlines()
    (shards[0] / STEPS).write_text("\n".join(steps[:-1]) + "\n")  # the last recorded step is gone
    with pytest.raises(ShardError, match="does not match its recorded steps"):
        merge_runs(shards, tmp_path / "merged")


@pytest.fixture
def mini(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    suite = tmp_path / "mini.yaml"
    suite.write_text(MINIMAL_SUITE)
    full, shards = _record(suite, tmp_path / "rec", MINI_OUTPUTS, 2)
    return suite, full, shards


def test_foreign_records_cannot_override_another_shards_samples(
    mini: tuple[Path, Path, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The finding: records one shard carried for another shard's case replaced that shard's
    failing samples, and the merged run passed the gate."""
    _, _, shards = mini
    theirs = [json.loads(line) for line in (shards[1] / SAMPLES).read_text().splitlines()]
    forged = [{**r, "text": MINI_OUTPUTS[0]} for r in theirs]
    with (shards[0] / SAMPLES).open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in forged)
    assert main(["merge", str(shards[0]), str(shards[1]), "--out", str(tmp_path / "merged")]) == 2
    err = capsys.readouterr().err
    assert "foreign record for shard 2/2's case" in err and f"{shards[0] / SAMPLES}:" in err
    assert not (tmp_path / "merged").exists()


def test_a_complete_shard_without_samples_is_refused(
    mini: tuple[Path, Path, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The finding: a shard with no samples.jsonl merged as complete, and the merged run passed the gate."""
    _, _, shards = mini
    (shards[1] / SAMPLES).unlink()
    assert main(["merge", str(shards[0]), str(shards[1]), "--out", str(tmp_path / "merged")]) == 2
    assert "status complete but no samples.jsonl" in capsys.readouterr().err
    # one record short is refused the same way
    rec = mini[2][0] / SAMPLES
    rec.write_text("\n".join(rec.read_text().splitlines()[1:]) + "\n")
    with pytest.raises(ShardError, match="1 planned sample"):
        merge_runs([shards[0], shards[1]], tmp_path / "merged")


def test_shards_of_other_weights_at_one_path_are_refused(tmp_path: Path) -> None:
    """The finding: two GGUF files at one path merged, though each shard recorded its file's sha256."""
    suite = tmp_path / "mini.yaml"
    suite.write_text(MINIMAL_SUITE)
    _, shards = _record(suite, tmp_path / "rec", MINI_OUTPUTS, 2, cache_identity="gguf-sha256:other")
    with pytest.raises(ShardError, match=r"model weights .*cache_identity"):
        merge_runs(shards, tmp_path / "merged")


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda r: {**r, "seed": r["seed"] + 1}, id="another-seed"),
        pytest.param(lambda r: {**r, "index": 9, "slot": f"{r['case_id']}#9"}, id="unplanned-index"),
        pytest.param(lambda r: {**r, "case_id": "nope", "slot": "nope#0"}, id="case-not-in-suite"),
    ],
)
def test_every_shard_record_must_be_a_slot_of_that_shard(
    mini: tuple[Path, Path, list[Path]], tmp_path: Path, forge: object
) -> None:
    _, _, shards = mini
    lines = (shards[0] / SAMPLES).read_text().splitlines()
    lines[0] = json.dumps(forge(json.loads(lines[0])))  # type: ignore[operator]
    (shards[0] / SAMPLES).write_text("\n".join(lines) + "\n")
    with pytest.raises(ShardError, match=rf"{shards[0] / SAMPLES}:1: "):
        merge_runs(shards, tmp_path / "merged")


def test_an_unreadable_shard_line_is_refused_not_skipped(mini: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    _, _, shards = mini
    with (shards[1] / SAMPLES).open("a") as f:
        f.write("{not json\n")
    with pytest.raises(ShardError, match=r"samples\.jsonl:\d+: not a readable record"):
        merge_runs(shards, tmp_path / "merged")


def test_a_merged_run_missing_a_planned_sample_fails_the_gate(
    mini: tuple[Path, Path, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever made the hole (an old merge, a hand-edited run): the gate refuses a run in which
    a planned sample is missing; before, both merged runs of the findings passed."""
    from leader_eval.runs.evaluate import score_run
    from leader_eval.store.run_store import RunDir
    from leader_eval.suite.load import load_suite

    suite, full, _ = mini
    golden = tmp_path / "golden"
    assert main(["gate", str(full), "--golden", str(golden), "--update-golden"]) == 0
    holed = tmp_path / "holed"
    shutil.copytree(full, holed)
    lines = (holed / SAMPLES).read_text().splitlines()
    (holed / SAMPLES).write_text("\n".join(lines[1:]) + "\n")
    score_run(RunDir(holed), load_suite(suite))
    assert read_run(holed).manifest["status"] == "complete"
    capsys.readouterr()
    assert main(["gate", str(holed), "--golden", str(golden)]) == 1
    out = capsys.readouterr().out
    assert "lack planned samples" in out and "1 of 2" in out


def test_a_shard_that_plans_no_sample_of_a_case_is_refused(mini: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    """A shard cannot make its failing samples unplanned: every run samples each case at least once."""
    _, _, shards = mini
    manifest = json.loads((shards[1] / "manifest.json").read_text())
    (cid,) = manifest["identity"]["cases"]
    manifest["identity"]["cases"][cid]["samples"] = 0
    (shards[1] / "manifest.json").write_text(json.dumps(manifest))
    (shards[1] / SAMPLES).write_text("")
    with pytest.raises(ShardError, match=f"plans no sample of case '{cid}'"):
        merge_runs(shards, tmp_path / "merged")


def test_teammate_turns_merge_like_steps_and_a_shard_without_them_is_refused(tmp_path: Path) -> None:
    from leader_eval.store.run_store import TURNS
    from tests.support.teammates import scripted_customer, scripted_leader, write_desk

    suite = write_desk(tmp_path / "repo")
    opts = RunOptions(model="scripted:leader", seed=7, out=tmp_path / "full", progress=False, cache=False)
    mates = {"customer": scripted_customer()}
    run(suite, opts, backend=scripted_leader(), teammates=mates)
    shards = []
    for i in (1, 2):
        sharded = shard_options(replace(opts, out=tmp_path / f"shard{i}"), f"{i}/2", suite)
        run(suite, sharded, backend=scripted_leader(), teammates={"customer": scripted_customer()})
        shards.append(tmp_path / f"shard{i}")
    merged = merge_runs([str(p) for p in shards], tmp_path / "merged")
    assert merged.manifest["identity"]["teammates"]["customer"]["model_id"] == "scripted:customer"
    for name in (SAMPLES, STEPS, TURNS, PROMPTS):
        assert _records(tmp_path / "merged" / name) == _records(tmp_path / "full" / name), name
    assert (tmp_path / "merged" / RESULTS).read_text() == (tmp_path / "full" / RESULTS).read_text()
    (shards[1] / TURNS).unlink()
    with pytest.raises(ShardError, match="does not match its recorded steps"):
        merge_runs([str(p) for p in shards], tmp_path / "merged2")
    # a shard whose teammate was another model is not the same run
    other = shard_options(replace(opts, out=tmp_path / "other2"), "2/2", suite)
    run(suite, other, backend=scripted_leader(), teammates={"customer": scripted_customer("scripted:other")})
    with pytest.raises(ShardError, match="teammates"):
        merge_runs([str(shards[0]), str(tmp_path / "other2")], tmp_path / "merged3")
