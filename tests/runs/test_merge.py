"""``run --shard I/N`` and ``merge``: N shards of one run merge into the run one job would make."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.runs.merge import ShardError, parse_shard, shard_case_ids

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "leader_core.yaml"


def test_shards_partition_the_cases_deterministically_by_id() -> None:
    ids = [f"case_{i:02d}" for i in range(22)][::-1]  # suite order does not matter
    parts = [shard_case_ids(ids, i, 3) for i in (1, 2, 3)]
    assert sorted(c for p in parts for c in p) == sorted(ids)  # no gap, no overlap
    assert [len(p) for p in parts] == [8, 7, 7]  # balanced to within one case
    assert parts == [shard_case_ids(list(reversed(ids)), i, 3) for i in (1, 2, 3)]
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "3", "a/b", "1/0", "-1/2"):
        with pytest.raises(ShardError, match="expected I/N"):
            parse_shard(bad)


def test_shard_needs_a_seed_and_the_whole_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(SUITE), "--shard", "1/3", "--out", str(tmp_path / "s")]) == 2
    assert "--shard needs an explicit --seed" in capsys.readouterr().err
    assert main(["run", str(SUITE), "--shard", "1/3", "--seed", "1", "--tags", "x", "--out", str(tmp_path / "s")]) == 2
    assert "drop --tags" in capsys.readouterr().err
    assert main(["run", str(SUITE), "--shard", "5/4", "--seed", "1"]) == 2
    assert not (tmp_path / "s").exists()


@pytest.fixture(scope="module")
def recorded_core(tmp_path_factory: pytest.TempPathFactory, local_backend) -> Path:  # type: ignore[no-untyped-def]
    """One real run of the flagship suite on the embedded model (1 short sample per case)."""
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import RunOptions

    out = tmp_path_factory.mktemp("core") / "rec"
    run(
        SUITE, RunOptions(seed=5, samples=1, max_tokens=24, out=out, progress=False, cache=False), backend=local_backend
    )
    return out


@pytest.mark.model
def test_three_shards_merge_into_the_unsharded_run(
    recorded_core: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replay = ["--model", f"replay:{recorded_core}", "-q"]
    assert main(["run", str(SUITE), *replay, "--out", str(tmp_path / "full")]) == 0
    shards = [tmp_path / f"shard{i}" for i in (1, 2, 3)]
    for i, out in enumerate(shards, start=1):
        assert main(["run", str(SUITE), *replay, "--seed", "5", "--shard", f"{i}/3", "--out", str(out)]) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["shard"]["index"] == i and len(manifest["identity"]["cases"]) in (7, 8)
    capsys.readouterr()
    merged = tmp_path / "merged"
    assert main(["merge", *map(str, reversed(shards)), "--out", str(merged)]) == 0
    assert "gate it once" in capsys.readouterr().out
    full_text = (tmp_path / "full" / "summary.json").read_text()
    merged_text = (merged / "summary.json").read_text()
    full_id = json.loads(full_text)["run_id"]
    merged_id = json.loads(merged_text)["run_id"]
    # byte for byte the same summary; only the run's name differs
    assert merged_text.replace(json.dumps(merged_id), '"RUN"') == full_text.replace(json.dumps(full_id), '"RUN"')
    usage = json.loads(merged_text)["usage"]
    assert usage["n_samples"] == 22 and usage["latency_s"]["p50"] <= usage["latency_s"]["p95"]
    # prices on the command line give the cost estimate
    assert main(["run", str(SUITE), *replay, "--prices", "0.2,0.8,EUR", "--out", str(tmp_path / "priced")]) == 0
    priced = json.loads((tmp_path / "priced" / "summary.json").read_text())["usage"]
    want = priced["prompt_tokens"]["total"] * 0.2e-6 + priced["completion_tokens"]["total"] * 0.8e-6
    assert priced["cost"]["currency"] == "EUR" and priced["cost"]["total"] == pytest.approx(want) and want > 0
    full_cases = json.loads((tmp_path / "full" / "cases.json").read_text())
    assert json.loads((merged / "cases.json").read_text()) == full_cases  # suite order
    # gate and compare take the merged run like any other
    golden = tmp_path / "golden"
    assert main(["gate", str(tmp_path / "full"), "--golden", str(golden), "--update-golden"]) == 0
    assert main(["gate", str(merged), "--golden", str(golden)]) == 0
    assert main(["compare", str(tmp_path / "full"), str(merged)]) == 0

    # a gap, an overlap and a shard of another seed exit 2 naming the shard
    capsys.readouterr()
    assert main(["merge", str(shards[0]), str(shards[1]), "--out", str(tmp_path / "gap")]) == 2
    assert "shard 3/3 missing" in capsys.readouterr().err
    assert main(["merge", *map(str, shards), str(shards[1]), "--out", str(tmp_path / "twice")]) == 2
    assert "shard 2/3 given twice" in capsys.readouterr().err
    other = tmp_path / "other_seed"
    shutil.copytree(shards[2], other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["identity"]["run_seed"] = 6
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert main(["merge", str(shards[0]), str(shards[1]), str(other), "--out", str(tmp_path / "seed")]) == 2
    err = capsys.readouterr().err
    assert "other_seed (shard 3/3)" in err and "run_seed" in err
    assert main(["merge", str(tmp_path / "full"), str(shards[0]), "--out", str(tmp_path / "x")]) == 2
    assert "not a shard" in capsys.readouterr().err
    for name in ("gap", "twice", "seed", "x"):
        assert not (tmp_path / name / "manifest.json").exists()
