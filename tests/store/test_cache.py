"""The content-addressed sample cache never pays twice for the same sample."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.errors import LeaderEvalError
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends import resolve_backend
from leader_eval.store.cache import SampleCache, cache_info, cache_prune, file_sha256
from tests.support import start_mock_server
from tests.support.episodes import write_repo


@pytest.mark.model
def test_same_seed_samples_nothing_new_and_one_edit_resamples_one_case(
    local_backend, mini_suite: Path, tmp_path: Path
) -> None:
    first = run(mini_suite, RunOptions(seed=2, out=tmp_path / "a", progress=False), backend=local_backend)
    assert first.stats is not None and first.stats.sampled == 4 and first.stats.cache_hits == 0
    again = run(mini_suite, RunOptions(seed=2, out=tmp_path / "b", progress=False), backend=local_backend)
    assert again.stats is not None and again.stats.sampled == 0 and again.stats.cache_hits == 4
    assert [s.text for s in again.samples] == [s.text for s in first.samples]

    edited = tmp_path / "edited.yaml"
    edited.write_text(mini_suite.read_text().replace("Say hello to the team.", "Say good morning to the team."))
    third = run(edited, RunOptions(seed=2, out=tmp_path / "c", progress=False), backend=local_backend)
    assert third.stats is not None and third.stats.sampled == 2 and third.stats.cache_hits == 2
    assert {
        s.case_id
        for s in third.samples
        if s.text != next(f.text for f in first.samples if (f.case_id, f.index) == (s.case_id, s.index))
    } <= {"hello"}

    fresh = run(mini_suite, RunOptions(out=tmp_path / "d", progress=False), backend=local_backend)  # no seed
    assert fresh.stats is not None and fresh.stats.sampled == 4


@pytest.mark.model
def test_max_samples_caps_spending_and_says_so(local_backend, mini_suite: Path, tmp_path: Path) -> None:
    capped = run(
        mini_suite, RunOptions(seed=8, out=tmp_path / "a", max_samples=1, progress=False), backend=local_backend
    )
    assert capped.stats is not None and capped.stats.sampled == 1 and capped.stats.capped == 3
    assert capped.manifest["status"] == "capped"
    assert len(capped.samples) == 1


@pytest.mark.model
def test_max_samples_reserves_an_episodes_max_steps(local_backend, tmp_path: Path) -> None:
    # two episodes of up to 3 steps each: a cap of 4 backend samples allows one, never 6 samples
    (tmp_path / "repo").mkdir()
    suite = write_repo(tmp_path / "repo")
    capped = run(suite, RunOptions(seed=8, out=tmp_path / "a", max_samples=4, progress=False), backend=local_backend)
    assert capped.stats is not None and capped.stats.capped == 1
    steps = [line for line in (capped.path / "steps.jsonl").read_text().splitlines() if line.strip()]
    assert 1 <= len(steps) <= 3  # backend samples spent: the one episode's steps
    assert capped.manifest["status"] == "capped"
    assert len(capped.samples) == 1


def test_errors_are_not_cached_and_prune_empties(tmp_path: Path) -> None:
    err_key, ok_key = "ab" + "1" * 30, "ab" + "3" * 30
    cache = SampleCache(tmp_path)
    cache.put({"key": err_key, "outcome": "error", "text": ""})
    cache.put({"key": ok_key, "outcome": "ok", "text": "hi"})
    cache.close()
    cache = SampleCache(tmp_path)
    assert cache.get(err_key) is None and cache.get(ok_key)["text"] == "hi"
    assert (cache.hits, cache.misses) == (1, 1)
    cache.close()
    assert cache_info(tmp_path)["samples"] == 1
    assert cache_prune(tmp_path, older_than_days=1)["kept"] == 1
    assert cache_prune(tmp_path)["dropped"] == 1
    assert cache_info(tmp_path)["samples"] == 0


# --- prune touches only its own shards ------------------------------------------------------------


def test_prune_in_a_mis_set_directory_touches_only_cache_shards(tmp_path: Path) -> None:
    """LEADER_EVAL_CACHE_DIR pointing at a project folder: its JSONL files survive a prune byte for byte."""
    foreign = {
        "train.jsonl": '{"prompt": "a", "completion": "b"}\n',
        "notes.jsonl": "free text\n",
        "ab.jsonl": '{"key": "ab", "text": "a shard-like name, not our records"}\n',
        "cd.jsonl": '{"key": "cd' + "0" * 30 + '", "outcome": "ok", "text": "x", "cached_at": 1}\nnot json\n',
        "results.jsonl": '{"case_id": "c", "outcome": "ok"}\n',
    }
    for name, text in foreign.items():
        (tmp_path / name).write_text(text)
    cache = SampleCache(tmp_path)
    cache.put({"key": "ef" + "0" * 30, "outcome": "ok", "text": "ours", "case_id": "c"})
    cache.close()
    report = cache_prune(tmp_path)
    assert report["dropped"] == 1 and not (tmp_path / "ef.jsonl").exists()
    assert sorted(Path(p).name for p in report["skipped"]) == ["ab.jsonl", "cd.jsonl"]
    for name, text in foreign.items():
        assert (tmp_path / name).read_text() == text, name
    assert not (tmp_path / "CACHEDIR.TAG").exists()  # backup tools must not start skipping the folder


def test_a_run_never_appends_to_a_foreign_file_named_like_a_shard(tmp_path: Path) -> None:
    (tmp_path / "ab.jsonl").write_text('{"id": 1}\n{"id": 2')  # a torn tail the log would "repair"
    cache = SampleCache(tmp_path)
    cache.put({"key": "ab" + "0" * 30, "outcome": "ok", "text": "x"})
    assert cache.get("ab" + "0" * 30) is None
    cache.close()
    assert (tmp_path / "ab.jsonl").read_text() == '{"id": 1}\n{"id": 2'


def test_prune_refuses_while_a_run_has_the_cache_open(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path)
    cache.put({"key": "ab" + "0" * 30, "outcome": "ok", "text": "x"})
    with pytest.raises(LeaderEvalError, match="in use by a running evaluation"):
        cache_prune(tmp_path)
    cache.close()
    assert cache_prune(tmp_path)["dropped"] == 1


def test_cli_cache_prune_refusal_is_one_line_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("LEADER_EVAL_CACHE_DIR", str(tmp_path))
    cache = SampleCache()
    cache.put({"key": "ab" + "0" * 30, "outcome": "ok", "text": "x"})
    try:
        assert main(["cache", "prune"]) == 2
    finally:
        cache.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "in use" in err


# --- cache identity ---------------------------------------------------------------------------------


def test_file_identity_is_the_content_and_is_memoised(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "model.gguf", tmp_path / "b" / "model.gguf"
    for p, byte in ((a, b"\x01"), (b, b"\x02")):
        p.parent.mkdir()
        p.write_bytes(b"GGUF" + bytes(1000) + byte)
    memo = tmp_path / "memo"
    assert file_sha256(a, memo) != file_sha256(b, memo)  # same name, same size, different bytes
    assert file_sha256(a, memo) == hashlib.sha256(a.read_bytes()).hexdigest()
    # the memo answers for an unchanged file (planted value proves it is read, not recomputed) ...
    data = json.loads((memo / "file-sha256.json").read_text())
    data[str(a.resolve())]["sha256"] = "planted"
    (memo / "file-sha256.json").write_text(json.dumps(data))
    assert file_sha256(a, memo) == "planted"
    # ... and not for a file rewritten in place with the same size
    st = a.stat()
    a.write_bytes(b"GGUF" + bytes(1000) + b"\x03")
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert file_sha256(a, memo) == hashlib.sha256(a.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def two_checkpoints_named_alike(tmp_path_factory) -> tuple[Path, Path]:
    """Two GGUF files named model.gguf, same size, one byte of one tensor different."""
    from leader_eval.sampling.backends.local import embedded_model_path

    src = embedded_model_path()
    root = tmp_path_factory.mktemp("ckpts")
    a, b = root / "a" / "model.gguf", root / "b" / "model.gguf"
    for p in (a, b):
        p.parent.mkdir()
        shutil.copyfile(src, p)
    with b.open("r+b") as f:  # a byte near the end: tensor data, not the header or vocabulary
        f.seek(-4096, os.SEEK_END)
        byte = f.read(1)
        f.seek(-4096, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0x01]))
    return a, b


@pytest.mark.model
def test_two_ggufs_with_one_name_never_share_cached_samples(
    two_checkpoints_named_alike: tuple[Path, Path], mini_suite: Path, tmp_path: Path
) -> None:
    a, b = two_checkpoints_named_alike
    backend_a, backend_b = resolve_backend(f"gguf:{a}"), resolve_backend(f"gguf:{b}")
    assert backend_a.model_id == backend_b.model_id == "gguf:model.gguf"
    assert backend_a.cache_identity != backend_b.cache_identity
    first = run(mini_suite, RunOptions(seed=4, out=tmp_path / "a", progress=False), backend=backend_a)
    assert first.stats is not None and first.stats.sampled == 4
    second = run(mini_suite, RunOptions(seed=4, out=tmp_path / "b", progress=False), backend=backend_b)
    assert second.stats is not None and second.stats.cache_hits == 0 and second.stats.sampled == 4
    assert {s.key for s in first.samples}.isdisjoint(s.key for s in second.samples)


@pytest.fixture(scope="module")
def mock_server():
    with start_mock_server(latency_ms=5, content="hi {seed}") as srv:
        yield srv


def test_a_remote_server_is_never_served_from_the_cache_unless_named(
    mock_server, mini_suite: Path, tmp_path: Path
) -> None:
    spec = f"openai:{mock_server.base_url}#mock"
    for out in ("a", "b"):
        again = run(
            mini_suite,
            RunOptions(model=spec, seed=3, out=tmp_path / out, progress=False, backend_options={"mode": "chat"}),
        )
        assert again.stats is not None and again.stats.sampled == 4 and again.stats.cache_hits == 0
    assert cache_info()["samples"] == 0  # nothing was even written
    named = {"mode": "chat", "cache_id": "mock-2026-11-26"}
    for out, hits in (("c", 0), ("d", 4)):
        r = run(mini_suite, RunOptions(model=spec, seed=3, out=tmp_path / out, progress=False, backend_options=named))
        assert r.stats is not None and r.stats.cache_hits == hits
