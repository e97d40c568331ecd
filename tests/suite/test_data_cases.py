"""Cases from data files (``cases_from:``): JSONL, CSV, Parquet, a saved dataset; every bad
record a one-line ``FILE:LINE`` or ``FILE:row N`` error, exit 2 before anything is sampled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leader_eval.bounded import limits
from leader_eval.cli.app import main
from leader_eval.errors import SuiteError, SuiteErrors
from leader_eval.suite import data_cases
from leader_eval.suite.load import load_suite
from tests.conftest import MINIMAL_SUITE, optional

EXPECT = {"calls": [{"tool": "send_message_to_chat"}]}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # suites named relative to it: errors name data/rows.jsonl


def _suite(folder: Path, cases_from: str, inline: bool = True) -> Path:
    (folder / "pyproject.toml").write_text("")  # the suite root
    text = MINIMAL_SUITE if inline else MINIMAL_SUITE.split("cases:")[0]
    path = folder / "s.yaml"
    path.write_text(text + cases_from)
    return path.relative_to(Path.cwd())


JSONL_MAP = """\
cases_from:
  - path: data/rows.jsonl
    tags: [from_jsonl]
    map: {id: qid, vars: {current_goal: goal, request: prompt}, expect: expect}
"""

CSV_MAP = """\
cases_from:
  - path: data/rows.csv
    expect: {calls: [{tool: send_message_to_chat}]}
    map: {id: qid, vars: {current_goal: goal, request: prompt}, tags: tags}
"""


def _jsonl(folder: Path, rows: list[dict] | list[str]) -> Path:
    (folder / "data").mkdir(exist_ok=True)
    path = folder / "data" / "rows.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _row(i: int, **extra: object) -> dict:
    return {"qid": f"q{i}", "goal": "build a bridge", "prompt": f"Say hello {i}.", "expect": EXPECT, **extra}


def _errors(path: Path) -> list[str]:
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    exc = info.value
    return [str(e) for e in (exc.errors if isinstance(exc, SuiteErrors) else [exc])]


def test_jsonl_rows_become_cases_after_the_inline_ones(tmp_path: Path) -> None:
    _jsonl(tmp_path, [_row(1), _row(2, expect={"no_call": True})])
    suite = load_suite(_suite(tmp_path, JSONL_MAP))
    assert [c.id for c in suite.cases] == ["hello", "goal", "q1", "q2"]
    q1 = suite.cases[2]
    assert q1.vars == {"agent_name": "Mira", "current_goal": "build a bridge", "request": "Say hello 1."}
    assert q1.expect == EXPECT and q1.tags == ("from_jsonl",)
    assert suite.cases[3].expect == {"no_call": True}
    assert q1.where(suite.path) == ("data/rows.jsonl", 1)


def test_csv_cells_are_text_and_tags_are_json(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.csv").write_text(
        'qid,goal,prompt,tags\nq1,build a bridge,"Say ""hi"",\nplease",["x"]\nq2,dig a well,Say 2,\n'
    )
    suite = load_suite(_suite(tmp_path, CSV_MAP, inline=False))
    assert [c.id for c in suite.cases] == ["q1", "q2"]
    assert suite.cases[0].vars["request"] == 'Say "hi",\nplease'
    assert suite.cases[0].tags == ("x",) and suite.cases[1].tags == ()
    assert suite.cases[0].expect == EXPECT  # the entry's expect: no column maps one
    # the second record starts on line 4: the first one's quoted field spans two lines
    assert suite.cases[1].line == 4


def test_data_files_enter_the_content_hash(tmp_path: Path) -> None:
    data = _jsonl(tmp_path, [_row(1)])
    path = _suite(tmp_path, JSONL_MAP)
    h1 = load_suite(path).content_hash
    assert load_suite(path).content_hash == h1
    data.write_text(json.dumps(_row(1, prompt="Say bye.")) + "\n")
    assert load_suite(path).content_hash != h1


def test_every_bad_record_is_named_by_file_and_line(tmp_path: Path) -> None:
    _jsonl(
        tmp_path,
        [
            _row(1),
            "{not json",
            json.dumps(_row(3, qid="bad id!")),
            json.dumps(_row(4, expect={"calls": [{"tool": "nope"}]})),
            json.dumps({"qid": "q5", "goal": "g", "expect": None}),
            json.dumps(_row(1)),
            '{"qid": "q7", "qid": "q8"}',
            json.dumps(_row(8, weight=float("nan"))).replace("NaN", "NaN"),
        ],
    )
    found = "\n".join(_errors(_suite(tmp_path, JSONL_MAP)))
    assert "data/rows.jsonl:2: not a JSON object" in found
    assert "data/rows.jsonl:3: id: 'bad id!' does not match" in found
    assert "data/rows.jsonl:4: case 'q4' expects unknown tool 'nope'" in found
    assert "data/rows.jsonl:5: map: vars: request: no column 'prompt'" in found
    assert "data/rows.jsonl:6: duplicate case id 'q1' (first at line 1)" in found
    assert "data/rows.jsonl:7: not a JSON object: key 'qid' given twice" in found


def test_a_bad_row_exits_2_before_sampling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _jsonl(tmp_path, [_row(1), _row(2, qid=None)])
    path = _suite(tmp_path, JSONL_MAP)
    out = tmp_path / "runs"
    code = main(["run", str(path), "--model", "replay:none", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "data/rows.jsonl:2: map: id: column 'qid' is empty" in err
    assert not out.exists()


def test_lint_renders_and_counts_data_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _jsonl(tmp_path, [_row(i) for i in range(3)])
    path = _suite(tmp_path, JSONL_MAP)
    assert main(["lint", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ok, 5 cases (2 inline, 3 from data/rows.jsonl)" in out


def test_lint_names_a_data_case_that_fails_to_render(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _jsonl(tmp_path, [_row(1), _row(2, prompt="")])
    assert main(["lint", str(_suite(tmp_path, JSONL_MAP))]) == 2
    assert "data/rows.jsonl:2: case 'q2': template variable 'request' is empty" in capsys.readouterr().err


# --------------------------------------------------------------------------- hostile files


def test_a_path_outside_the_suite_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _jsonl(tmp_path, [_row(1)])
    path = _suite(root, JSONL_MAP.replace("data/rows.jsonl", "../data/rows.jsonl"))
    assert "outside the suite root" in _errors(path)[0]


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    secret = _jsonl(tmp_path, [_row(1)])
    os.symlink(secret, root / "data" / "rows.jsonl")
    assert "outside the suite root" in _errors(_suite(root, JSONL_MAP))[0]


def test_a_huge_row_is_refused_at_its_line(tmp_path: Path) -> None:
    _jsonl(tmp_path, [_row(1), _row(2, prompt="x" * (limits.MAX_DATA_FIELD_CHARS + 1))])
    (err,) = _errors(_suite(tmp_path, JSONL_MAP))
    assert err.startswith("data/rows.jsonl:2:") and "over the 131,072 limit" in err


def test_a_huge_csv_field_is_refused_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    big = "x" * (limits.MAX_DATA_FIELD_CHARS + 5)
    (tmp_path / "data" / "rows.csv").write_text(f"qid,goal,prompt,tags\nq1,g,p,\nq2,g,{big},\n")
    (err,) = _errors(_suite(tmp_path, CSV_MAP, inline=False))
    assert err.startswith("data/rows.csv:3:") and "field larger than field limit" in err


def test_bad_encoding_names_the_line(tmp_path: Path) -> None:
    data = _jsonl(tmp_path, [_row(1), _row(2)])
    data.write_bytes(data.read_bytes() + b'{"qid": "q3\xff"}\n')
    (err,) = _errors(_suite(tmp_path, JSONL_MAP))
    assert "data/rows.jsonl:3: cases_from JSONL file is not UTF-8: byte 0xff" in err


def test_a_file_over_the_size_bound_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _jsonl(tmp_path, [_row(i) for i in range(50)])
    monkeypatch.setattr(data_cases, "MAX_DATA_FILE_BYTES", 1000)
    assert "file is over 1,000 bytes" in _errors(_suite(tmp_path, JSONL_MAP))[0]


def test_the_case_count_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _jsonl(tmp_path, [_row(i) for i in range(5)])
    monkeypatch.setattr(data_cases, "MAX_DATA_CASES", 3)
    (err,) = _errors(_suite(tmp_path, JSONL_MAP))
    assert err.startswith("data/rows.jsonl:4:") and "more than 3 cases from data files" in err


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    _jsonl(tmp_path, [json.dumps(_row(1))[:-1] + f', "x": {deep}}}'])
    assert _errors(_suite(tmp_path, JSONL_MAP))[0].startswith("data/rows.jsonl:1: not a JSON object: nested")


def test_a_suite_needs_cases_or_cases_from(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL_SUITE.split("cases:")[0])
    assert "a suite needs cases: or cases_from:" in _errors(path)[0]


# --------------------------------------------------------------------------- columnar files


def _table(rows: list[dict]) -> object:
    pa = optional("pyarrow")
    return pa.Table.from_pylist(rows)


def test_parquet_rows_are_cases_and_errors_name_the_row(tmp_path: Path) -> None:
    pq = optional("pyarrow.parquet")
    (tmp_path / "data").mkdir()
    rows = [_row(1), _row(2, qid="bad id!")]
    pq.write_table(_table(rows), tmp_path / "data" / "rows.parquet")
    path = _suite(tmp_path, JSONL_MAP.replace("rows.jsonl", "rows.parquet"))
    (err,) = _errors(path)
    assert err.startswith("data/rows.parquet:row 1: id: 'bad id!' does not match")
    pq.write_table(_table(rows[:1]), tmp_path / "data" / "rows.parquet")
    suite = load_suite(path)
    assert suite.cases[-1].id == "q1" and suite.cases[-1].expect == EXPECT


def test_a_parquet_column_the_map_names_must_exist(tmp_path: Path) -> None:
    pq = optional("pyarrow.parquet")
    (tmp_path / "data").mkdir()
    pq.write_table(_table([{"qid": "q1", "goal": "g", "expect": EXPECT}]), tmp_path / "data" / "rows.parquet")
    err = _errors(_suite(tmp_path, JSONL_MAP.replace("rows.jsonl", "rows.parquet")))[0]
    assert err.startswith("data/rows.parquet: map: vars: request: no column 'prompt'")


def test_a_parquet_column_of_bytes_is_refused(tmp_path: Path) -> None:
    pq = optional("pyarrow.parquet")
    (tmp_path / "data").mkdir()
    pq.write_table(_table([_row(1, prompt=b"\x00")]), tmp_path / "data" / "rows.parquet")
    err = _errors(_suite(tmp_path, JSONL_MAP.replace("rows.jsonl", "rows.parquet")))[0]
    assert "column 'prompt' is of type binary" in err


def test_garbage_named_parquet_is_one_line(tmp_path: Path) -> None:
    optional("pyarrow")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.parquet").write_bytes(b"PAR1" + os.urandom(64))
    assert (
        "not a readable Parquet file" in _errors(_suite(tmp_path, JSONL_MAP.replace("rows.jsonl", "rows.parquet")))[0]
    )


def test_old_or_absent_pyarrow_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.parquet").write_bytes(b"PAR1")
    path = _suite(tmp_path, JSONL_MAP.replace("rows.jsonl", "rows.parquet"))
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert "needs pyarrow >= 14.0.1 (pip install 'leader-eval[data]')" in _errors(path)[0]

    class Old:
        __version__ = "14.0.0"

    monkeypatch.setitem(sys.modules, "pyarrow", Old)
    assert "pyarrow 14.0.0 can run code from a crafted file" in _errors(path)[0]


def test_parquet_extension_types_are_read_as_their_storage(tmp_path: Path) -> None:
    pa = optional("pyarrow")
    pq = optional("pyarrow.parquet")
    if not hasattr(pa, "json_"):
        pytest.skip("this pyarrow has no canonical JSON extension type to write")
    (tmp_path / "data").mkdir()
    table = _table([_row(1)])
    i = table.column_names.index("prompt")
    table = table.set_column(i, "prompt", pa.array(['"hi"'], type=pa.json_()))
    pq.write_table(table, tmp_path / "data" / "rows.parquet")
    # extension types are not loaded: the column reads as its storage (text), never as the
    # extension (which the type check would refuse, and which older pyarrow could unpickle)
    suite = load_suite(_suite(tmp_path, JSONL_MAP.replace("rows.jsonl", "rows.parquet")))
    assert suite.cases[-1].vars["request"] == '"hi"'


def test_a_name_of_unknown_format_needs_format(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.txt").write_text(json.dumps(_row(1)) + "\n")
    path = _suite(tmp_path, JSONL_MAP.replace("rows.jsonl", "rows.txt"))
    assert "name it with format: jsonl|csv|parquet|dataset" in _errors(path)[0]
    path.write_text(
        path.read_text().replace("  - path: data/rows.txt\n", "  - path: data/rows.txt\n    format: jsonl\n")
    )
    assert load_suite(path).cases[-1].id == "q1"


def _save_dataset(folder: Path, shards: list[list[dict]]) -> None:
    """What ``datasets.Dataset.save_to_disk`` writes: Arrow stream files and state.json."""
    pa = optional("pyarrow")
    folder.mkdir(parents=True)
    names = []
    for k, rows in enumerate(shards):
        name = f"data-{k:05d}-of-{len(shards):05d}.arrow"
        table = pa.Table.from_pylist(rows)
        with pa.ipc.new_stream(folder / name, table.schema) as writer:
            writer.write_table(table)
        names.append(name)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": n} for n in names]}))
    (folder / "dataset_info.json").write_text("{}")


def test_a_saved_dataset_is_read_from_its_arrow_files(tmp_path: Path) -> None:
    _save_dataset(tmp_path / "data" / "ds", [[_row(1), _row(2)], [_row(3, qid="bad id!")]])
    path = _suite(tmp_path, JSONL_MAP.replace("data/rows.jsonl", "data/ds"))
    (err,) = _errors(path)
    assert err.startswith("data/ds:row 2: id: 'bad id!'")  # rows count across the files, from 0


def test_a_saved_dataset_listing_a_file_outside_is_refused(tmp_path: Path) -> None:
    _save_dataset(tmp_path / "data" / "ds", [[_row(1)]])
    (tmp_path / "data" / "ds" / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../x.arrow"}]}))
    err = _errors(_suite(tmp_path, JSONL_MAP.replace("data/rows.jsonl", "data/ds")))[0]
    assert "is not a file name in the dataset folder" in err


# --------------------------------------------------------------------------- the shipped example

REPO = Path(__file__).resolve().parents[2]


def test_the_example_suite_takes_200_cases_from_csv_and_200_from_jsonl(capsys: pytest.CaptureFixture[str]) -> None:
    example = REPO / "suites" / "examples" / "data_cases.yaml"
    suite = load_suite(example)
    sources = [Path(c.source).name for c in suite.cases if c.source]
    assert sources.count("cases.csv") == 200 and sources.count("cases.jsonl") == 200 and len(suite.cases) == 400
    assert main(["lint", str(example), "--no-tokens"]) == 0
    assert "400 cases (0 inline, 200 from" in capsys.readouterr().out


def test_the_example_data_is_what_its_script_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import runpy

    script = runpy.run_path(str(REPO / "scripts" / "make_example_data.py"))
    monkeypatch.setitem(script["main"].__globals__, "OUT", tmp_path)
    script["main"]()
    for name in ("cases.csv", "cases.jsonl"):
        assert (tmp_path / name).read_bytes() == (REPO / "suites" / "examples" / "data" / name).read_bytes(), name


@pytest.mark.model
def test_the_example_suite_runs_on_the_embedded_model_with_limit(tmp_path: Path) -> None:
    example = REPO / "suites" / "examples" / "data_cases.yaml"
    out = tmp_path / "run"
    args = [
        "run",
        str(example),
        "--limit",
        "2",
        "--samples",
        "1",
        "--max-tokens",
        "16",
        "--seed",
        "1",
        "--out",
        str(out),
    ]
    assert main([*args, "-q"]) == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["case_id"] for r in results) == ["csv_000", "csv_001"]
