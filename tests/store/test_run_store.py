"""The one registry of run files (``store.RUN_FILES``) and the rule that run files are plain files.

A run directory, the sample cache and a golden directory may hold only regular files where the
library reads or writes: an entry that is a symlink (to ``/proc/self/environ``, to a file outside
the directory) or a special file (a FIFO would hang a reader, a device would never end) is refused
with its path on one line, exit 2, before anything is read or written; symlinked ancestors (a
symlinked ``runs/``) stay allowed.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from leader_eval.errors import RunDirError
from leader_eval.store import run_store as store
from leader_eval.store.run_store import RUN_FILES
from tests.conftest import MINIMAL_SUITE
from tests.support.scripted import ScriptedBackend, call

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "leader_eval"


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def test_no_module_names_a_run_file_outside_the_registry() -> None:
    """Every string in the package's code that names a run file is in store/run_store.py: the rest imports
    the names (docstrings and comments may mention them)."""
    names = sorted(RUN_FILES, key=len, reverse=True)
    pattern = re.compile("|".join(rf"(?<![\w.-]){re.escape(n)}(?![\w-])" for n in names))
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "store" / "run_store.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                m = pattern.search(node.value)
                if m:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {m.group(0)}")
    assert not found, "run files named outside leader_eval/store/run_store.py:\n" + "\n".join(found)


def test_the_registry_lists_every_file_a_run_directory_holds() -> None:
    assert set(RUN_FILES) == {
        "manifest.json", "prompts.jsonl", "samples.jsonl", "steps.jsonl", "results.jsonl", "cases.json",
        "summary.json", "session_summary.json", "report.html", "stress.json", "stress.png", "stress.txt",
        "adaptive_compare.json", ".leader-eval.lock", "turns.jsonl",
        "gate.json",
        "judgements.jsonl",
    }  # fmt: skip
    for f in RUN_FILES.values():
        assert f.cap > 0 and f.merge in {"rebuilt", "union", "rederived", "remade", "never"}
    # the record files are the ones merge unions, each validated record by record
    assert {f.name for f in RUN_FILES.values() if f.merge == "union"} == {
        store.SAMPLES, store.STEPS, store.TURNS, store.PROMPTS, store.JUDGEMENTS,
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# a recorded run, its two shards and its golden, sampled by a scripted backend (no model)


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A FIFO that a reader opens blocks forever: fail the test instead of hanging the suite."""

    def stop(*_: Any) -> None:
        raise TimeoutError("a run file blocked (a FIFO opened for reading?)")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(30)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Recorded:
    suite: Path
    run: Path
    shards: list[Path]
    golden: Path


OUTPUTS = [call("send_message_to_chat", message="hello team, our goal is to build a bridge"), "not a call"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    from leader_eval.cli.app import main
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.merge import shard_options
    from leader_eval.runs.options import RunOptions

    root = tmp_path_factory.mktemp("recorded")
    suite = root / "mini.yaml"
    suite.write_text(MINIMAL_SUITE)
    opts = RunOptions(model="scripted:test", seed=3, out=root / "run", progress=False, cache=False)
    run(suite, opts, backend=ScriptedBackend(OUTPUTS))
    shards = []
    for i in (1, 2):
        sharded = shard_options(replace(opts, out=root / f"shard{i}"), f"{i}/2", suite)
        run(suite, sharded, backend=ScriptedBackend(OUTPUTS))
        shards.append(root / f"shard{i}")
    golden = root / "golden"
    assert main(["gate", str(root / "run"), "--golden", str(golden), "--update-golden"]) == 0
    return Recorded(suite, root / "run", shards, golden)


def _tree(path: Path) -> dict[str, bytes | str]:
    """Every entry under ``path``: a file's bytes, else what it is (for "nothing changed")."""
    out: dict[str, bytes | str] = {}
    for p in sorted(path.rglob("*")):
        rel = str(p.relative_to(path))
        if p.is_symlink():
            out[rel] = f"-> {os.readlink(p)}"
        elif p.is_fifo():
            out[rel] = "fifo"
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = p.read_bytes()
    return out


def _plant(path: Path, kind: str, outside: Path) -> None:
    """Put a symlink to ``outside``, a hard link to it, a FIFO or a directory where run file
    ``path`` belongs."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if kind == "symlink":
        path.symlink_to(outside)
    elif kind == "hardlink":  # a regular file with a second name outside: appending changes both
        os.link(outside, path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


def _one_error(err: str, path: Path) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert str(path) in lines[0] and "refused" in lines[0], lines[0]
    return lines[0]


def _command(name: str, rec: Recorded, work: Path) -> tuple[list[str], Path]:
    """(argv, the run directory the command reads or writes) for one command of the CLI."""
    run_dir = work / "run"
    if name == "merge":
        shutil.copytree(rec.shards[0], work / "s1")
        shutil.copytree(rec.shards[1], work / "s2")
        return ["merge", str(work / "s1"), str(work / "s2"), "--out", str(work / "merged")], work / "s1"
    shutil.copytree(rec.run, run_dir)
    if name == "resume":  # the same run again, served by replay: it resumes into its directory
        return ["run", str(rec.suite), "--model", f"replay:{rec.run}", "--out", str(run_dir), "-q"], run_dir
    if name == "show":
        return ["show", str(run_dir)], run_dir
    if name == "gate":
        return ["gate", str(run_dir), "--golden", str(rec.golden)], run_dir
    if name == "report":
        return ["report", str(run_dir), "-o", str(work / "out.html")], run_dir
    assert name == "update-golden"
    shutil.copytree(rec.golden, work / "golden")
    return ["gate", str(run_dir), "--golden", str(work / "golden"), "--update-golden"], run_dir


COMMANDS = ("resume", "merge", "show", "gate", "report", "update-golden")
KINDS = ("symlink", "hardlink", "fifo", "directory")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(RUN_FILES))
@pytest.mark.parametrize("command", COMMANDS)
def test_a_run_file_that_is_not_a_regular_file_is_refused_before_anything_is_read_or_written(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, name: str, kind: str
) -> None:
    from leader_eval.cli.app import main

    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET=do-not-copy\n")
    work = tmp_path / "work"
    work.mkdir()
    argv, run_dir = _command(command, recorded, work)
    _plant(run_dir / name, kind, outside)
    before = _tree(tmp_path)
    capsys.readouterr()
    assert main(argv) == 2
    _one_error(capsys.readouterr().err, run_dir / name)
    assert _tree(tmp_path) == before  # nothing written anywhere: not the target, not the run, no merged run
    assert outside.read_text() == "SECRET=do-not-copy\n"


@pytest.mark.parametrize("kind", ("symlink", "fifo"))
def test_any_symlink_or_special_entry_of_a_run_directory_is_refused(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """Not only the registry's names: an entry the library never reads is refused all the same."""
    from leader_eval.cli.app import main

    run_dir = tmp_path / "run"
    shutil.copytree(recorded.run, run_dir)
    _plant(run_dir / "notes.txt", kind, tmp_path / "elsewhere")
    assert main(["show", str(run_dir)]) == 2
    _one_error(capsys.readouterr().err, run_dir / "notes.txt")
    # a plain folder of another name is the user's business
    (run_dir / "notes.txt").unlink()
    (run_dir / "plots").mkdir()
    assert main(["show", str(run_dir)]) == 0


def test_merge_of_a_shard_whose_prompts_link_to_the_environment_is_refused(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The finding: merge copied /proc/self/environ (API key included) into the merged run, exit 0."""
    from leader_eval.cli.app import main

    s1, s2 = tmp_path / "s1", tmp_path / "s2"
    shutil.copytree(recorded.shards[0], s1)
    shutil.copytree(recorded.shards[1], s2)
    (s2 / "prompts.jsonl").unlink()
    (s2 / "prompts.jsonl").symlink_to("/proc/self/environ")
    assert main(["merge", str(s1), str(s2), "--out", str(tmp_path / "merged")]) == 2
    _one_error(capsys.readouterr().err, s2 / "prompts.jsonl")
    assert not (tmp_path / "merged").exists()


def test_resuming_into_a_run_whose_samples_are_a_symlink_appends_nothing_outside(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The finding: a resumed run appended its records to the file the symlink pointed at."""
    from leader_eval.cli.app import main

    run_dir = tmp_path / "run"
    shutil.copytree(recorded.run, run_dir)
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    (run_dir / "samples.jsonl").unlink()
    (run_dir / "samples.jsonl").symlink_to(outside)
    argv = ["run", str(recorded.suite), "--model", f"replay:{recorded.run}", "--out", str(run_dir), "-q"]
    assert main(argv) == 2
    _one_error(capsys.readouterr().err, run_dir / "samples.jsonl")
    assert outside.read_text() == ""


def test_record_logs_never_follow_a_symlink_or_block_on_a_fifo(tmp_path: Path) -> None:
    """The store's own opens refuse, whoever forgot to check the directory first."""
    target = tmp_path / "target.jsonl"
    target.write_text('{"slot": "a#0"}\n')
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(RunDirError, match="symbolic link"):
        store.RecordLog(link, key_field="slot")
    dangling = tmp_path / "dangling.jsonl"
    log = store.RecordLog(dangling, key_field="slot")
    dangling.symlink_to(tmp_path / "nowhere.jsonl")  # planted after the log was opened
    with pytest.raises(RunDirError, match="symbolic link"):
        log.append({"slot": "b#0"})
    assert not (tmp_path / "nowhere.jsonl").exists()
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(RunDirError, match="FIFO"):
        store.RecordLog(fifo, key_field="slot")
    with pytest.raises(RunDirError, match="symbolic link"):
        store.write_json_atomic(link, {})
    assert target.read_text() == '{"slot": "a#0"}\n'
    lock = tmp_path / store.LOCK
    lock.symlink_to(target)
    with pytest.raises(RunDirError, match="symbolic link"):
        store.run_dir_lock(tmp_path).acquire()
    assert target.read_text() == '{"slot": "a#0"}\n'  # the pid was never written through the link


def test_a_file_over_its_cap_is_refused_on_reading(tmp_path: Path) -> None:
    big = tmp_path / "manifest.json"
    with big.open("wb") as f:
        f.truncate(RUN_FILES["manifest.json"].cap + 1)  # sparse: no disk used
    with pytest.raises(RunDirError, match="over its cap of 16 MiB"):
        store.RunDir(tmp_path).read_manifest()
    log = tmp_path / "x.jsonl"
    small = store.RecordLog(log, key_field="slot", cap=100)
    small.append({"slot": "a", "text": "x" * 10})
    with pytest.raises(RunDirError, match="cap"):
        small.append({"slot": "b", "text": "x" * 100})
    small.close()
    assert len(log.read_text().splitlines()) == 1


def test_records_appended_together_read_back_as_appended_one_by_one(tmp_path: Path) -> None:
    """``RecordLog.extend`` (a run's prompts, in one write) keeps the first record of each key, as
    ``append`` and the reader do, and leaves the log as appending them one by one would."""
    records = [{"slot": "a", "v": 1}, {"slot": "b", "v": 2}, {"slot": "a", "v": 3}, {"slot": "c", "v": 4}]
    together, alone = tmp_path / "together.jsonl", tmp_path / "alone.jsonl"
    log = store.RecordLog(together, key_field="slot")
    log.append(records[3])
    log.extend(records)
    log.close()
    one = store.RecordLog(alone, key_field="slot")
    for rec in [records[3], *records]:
        one.append(rec)
    one.close()
    assert together.read_bytes() == alone.read_bytes()
    back = store.RecordLog(together, key_field="slot")
    assert [r["v"] for r in back.records()] == [4, 1, 2] and not back.duplicates
    with pytest.raises(KeyError):
        back.extend([{"slot": "d"}, {"no": "key"}])
    assert "d" not in back  # nothing of a refused batch is written


def test_symlinked_ancestors_stay_allowed(recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI machines link runs/ and the cache root elsewhere: that is the user's choice, not an attack."""
    from leader_eval.cli.app import main

    real_runs = tmp_path / "disk" / "runs"
    real_runs.mkdir(parents=True)
    shutil.copytree(recorded.run, real_runs / "run")
    (tmp_path / "runs").symlink_to(real_runs)
    real_golden = tmp_path / "disk" / "golden"
    shutil.copytree(recorded.golden, real_golden)
    (tmp_path / "golden").symlink_to(real_golden)
    assert main(["show", str(tmp_path / "runs" / "run")]) == 0
    assert main(["gate", str(tmp_path / "runs" / "run"), "--golden", str(tmp_path / "golden")]) == 0
    (tmp_path / "disk" / "cache").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "disk" / "cache")
    monkeypatch.setenv("LEADER_EVAL_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["run", str(recorded.suite), "--model", f"replay:{recorded.run}", "--out", str(tmp_path / "runs" / "again")]
    assert main([*argv, "-q"]) in (0, 1)  # the scripted outputs fail some cases: exit 1 is the verdict
    assert (real_runs / "again" / "summary.json").is_file()


CACHE_NAMES = ("ab.jsonl", ".lock", "file-sha256.json", "CACHEDIR.TAG")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", CACHE_NAMES)
def test_a_cache_file_that_is_not_a_regular_file_is_refused(
    recorded: Recorded,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    kind: str,
) -> None:
    from leader_eval.cli.app import main

    cache = tmp_path / "cache"
    cache.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    _plant(cache / name, kind, outside)
    monkeypatch.setenv("LEADER_EVAL_CACHE_DIR", str(cache))
    out = tmp_path / "new"
    argv = ["run", str(recorded.suite), "--model", f"replay:{recorded.run}", "--out", str(out), "-q"]
    assert main(argv) == 2
    _one_error(capsys.readouterr().err, cache / name)
    assert not out.exists() and outside.read_text() == "keep\n"


def test_the_cache_leaves_entries_that_are_not_its_own_alone(tmp_path: Path) -> None:
    """A mis-set LEADER_EVAL_CACHE_DIR pointing at a project folder: its links are not the cache's."""
    from leader_eval.store.cache import SampleCache

    (tmp_path / "node_modules").symlink_to(tmp_path)
    cache = SampleCache(tmp_path)
    assert cache.get("0" * 32) is None
    cache.close()


@pytest.mark.parametrize("kind", (*KINDS, "folder-symlink"))
@pytest.mark.parametrize("command", ("gate", "update-golden"))
def test_a_golden_that_is_not_a_regular_file_is_refused(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    from leader_eval.cli.app import main

    golden = tmp_path / "golden"
    shutil.copytree(recorded.golden, golden)
    (file,) = golden.glob("*/*.json")
    outside = tmp_path / "elsewhere"
    if kind == "folder-symlink":
        shutil.copytree(file.parent, outside)
        shutil.rmtree(file.parent)
        file.parent.symlink_to(outside)
        where = file.parent
    else:
        outside.write_text(file.read_text())
        _plant(file, kind, outside)
        where = file
    before = _tree(tmp_path)
    argv = ["gate", str(recorded.run), "--golden", str(golden)]
    assert main([*argv, "--update-golden"] if command == "update-golden" else argv) == 2
    _one_error(capsys.readouterr().err, where)
    assert _tree(tmp_path) == before


def test_prompts_read_again_unchanged_are_not_parsed_again_and_a_change_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's live scorer, its scoring and its report each read prompts.jsonl (shared reads): a
    file that reads as the last one parsed, byte for byte, is served from that parse; a file whose
    bytes changed, or one with an unreadable line (reported each time), is parsed again; a plain
    read always parses, so its records are its own."""
    run = tmp_path / "run"
    run.mkdir()
    prompts = run / store.PROMPTS
    lines = [f'{{"case_id": "c{i}", "text": "prompt {i}", "token_ids": null, "messages": []}}' for i in range(3)]
    prompts.write_text("\n".join(lines) + "\n")
    parses: list[Path] = []
    record_log = store.RecordLog

    def counting(path: Path, *args: Any, **kwargs: Any) -> store.RecordLog:
        parses.append(path)
        return record_log(path, *args, **kwargs)

    monkeypatch.setattr(store, "RecordLog", counting)
    monkeypatch.setattr(store, "_last_prompts", None)
    first = store.RunDir(run).read_prompts(shared=True)
    second = store.RunDir(run).read_prompts(shared=True)
    assert first == second and sorted(first) == ["c0", "c1", "c2"] and len(parses) == 1
    second["c9"] = {}  # a reader's own dict: the next reader does not see it
    assert "c9" not in store.RunDir(run).read_prompts(shared=True)
    # a plain read parses the file: records of its own, to change as it likes
    own = store.RunDir(run).read_prompts()
    assert own == first and own["c0"] is not first["c0"] and len(parses) == 2
    own["c0"]["text"] = "changed"
    assert store.RunDir(run).read_prompts(shared=True)["c0"]["text"] == "prompt 0"

    prompts.write_text("\n".join([*lines[:2], lines[2].replace("prompt 2", "prompt 2, edited")]) + "\n")
    edited = store.RunDir(run).read_prompts(shared=True)
    assert edited["c2"]["text"] == "prompt 2, edited" and len(parses) == 3

    prompts.write_text("\n".join([*lines, "{not json"]) + "\n")
    for _ in range(2):
        rd = store.RunDir(run)
        assert sorted(rd.read_prompts(shared=True)) == ["c0", "c1", "c2"]
        assert rd.unreadable[store.PROMPTS] == [4]
    assert len(parses) == 5
