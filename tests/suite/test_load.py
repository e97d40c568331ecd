"""Every kind of broken suite: one line naming file and line, exit 2, nothing sampled or written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leader_eval.cli.app import main
from leader_eval.errors import SuiteError
from leader_eval.suite.load import load_suite
from leader_eval.suite.records import suite_schema
from tests.conftest import MINIMAL_SUITE, SUITES


def _replace(old: str, new: str, count: int = 1, nth: int = 1):
    def f(text: str) -> str:
        assert old in text, old
        if nth == 1:
            return text.replace(old, new, count)
        parts = text.split(old)
        return old.join(parts[:nth]) + new + old.join(parts[nth:])

    return f


# (id, mutation, expected line, words the message must contain)
BROKEN = [
    ("bad_yaml", _replace("protocol: json", "protocol: [json"), 4, ["invalid YAML"]),
    ("wrong_type", _replace("samples: 2}", "samples: two}"), 4, ["sampling/samples", "'two'"]),
    (
        "unknown_tool",
        _replace("- tool: send_message_to_chat", "- tool: send_mesage", nth=2),
        36,
        ["unknown tool", "send_mesage"],
    ),
    (
        "invalid_tool_schema",
        _replace(
            "      type: object\n      properties:\n        message",
            "      type: objekt\n      properties:\n        message",
        ),
        18,
        ["not a valid JSON Schema"],
    ),
    ("duplicate_case_id", _replace("- id: goal", "- id: hello"), 31, ["duplicate case id", "hello"]),
    ("template_syntax", _replace('"{{ request }}"', '"{{ request }"'), 13, ["template syntax error"]),
    (
        "missing_variable",
        _replace("current_goal: plant a garden, ", ""),
        31,
        ["missing template variable", "current_goal"],
    ),
    ("unknown_key", _replace("protocol: json", "protocl: json"), 3, ["protocl"]),
    (
        "invalid_regex",
        _replace(
            "    expect:\n      calls:\n        - tool: send_message_to_chat\n  - id: goal",
            "    expect:\n      forbid: ['(unclosed']\n      calls:\n        - tool: send_message_to_chat\n  - id: goal",
        ),
        29,
        ["invalid regular expression"],
    ),
    ("template_file_missing", _replace('content: "{{ request }}"', "file: nope.j2"), 13, ["template file", "nope.j2"]),
    (
        "duplicate_yaml_key",
        _replace("protocol: json\n", "protocol: json\nprotocol: hermes\n"),
        4,
        ["duplicate key", "protocol"],
    ),
    ("empty_variable", _replace('request: "Say hello to the team."', 'request: ""'), 26, ["request", "empty"]),
    (
        "placeholder_left",
        _replace('request: "Say hello to the team."', 'request: "[INSERT greeting here]"'),
        26,
        ["placeholder", "[INSERT greeting here]"],
    ),
    (
        "unknown_argument",
        _replace("message: {mentions_goal: true}", "messge: {mentions_goal: true}"),
        38,
        ["no argument", "messge"],
    ),
    ("bad_protocol", _replace("protocol: json", "protocol: xml"), 3, ["protocol", "'xml'"]),
]


@pytest.mark.parametrize(("name", "mutate", "line", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_lint_reports_file_line_and_exits_2(tmp_path: Path, capsys, name, mutate, line, words) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(mutate(MINIMAL_SUITE))
    status = main(["lint", "--no-tokens", str(path)])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1, err
    m = re.match(rf"error: {re.escape(str(path))}:(\d+): (.*)", err)
    assert m, err
    assert int(m.group(1)) == line, err
    for w in words:
        assert w in m.group(2), err


@pytest.mark.model
@pytest.mark.parametrize(("name", "mutate", "line", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_run_on_broken_suite_samples_nothing(tmp_path: Path, capsys, name, mutate, line, words) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(mutate(MINIMAL_SUITE))
    out = tmp_path / "run"
    status = main(["run", str(path), "--out", str(out), "--seed", "1", "-q"])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert f"{path}:{line}:" in err
    assert not out.exists()


def test_missing_goal_names_template_location(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(_replace("current_goal: plant a garden, ", "")(MINIMAL_SUITE))
    assert main(["lint", "--no-tokens", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'current_goal'" in err and "(used at " in err and ":9)" in err


def test_flagship_and_example_suites_are_valid() -> None:
    for p in [SUITES / "leader_core.yaml", *sorted((SUITES / "examples").glob("*.yaml"))]:
        suite = load_suite(p)
        assert suite.cases


def test_flagship_suite_covers_failure_modes() -> None:
    suite = load_suite(SUITES / "leader_core.yaml")
    assert len(suite.cases) >= 20
    tags = {t for c in suite.cases for t in c.tags}
    assert {"action_channel", "leakage", "goal", "pause", "planning"} <= tags
    # every case must supply the goal: the scaffold shows it and a blank would fake a failure
    assert all(c.vars.get("current_goal") for c in suite.cases)


def test_content_hash_changes_with_template_file(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    tpl = tmp_path / "templates" / "sys.j2"
    tpl.write_text("You are {{ agent_name }}. Goal: {{ current_goal }}.")
    path = tmp_path / "s.yaml"
    path.write_text(
        MINIMAL_SUITE.replace(
            "      content: |\n        You are {{ agent_name }}. Current goal: {{ current_goal }}.\n",
            "      file: sys.j2\n      # was inline\n",
        ).replace(
            '        Tools: {{ tools_json }}\n        Reply with one JSON object like {"tool": "send_message_to_chat", "arguments": {"message": "hi"}}.\n',
            "",
        )
    )
    h1 = load_suite(path).content_hash
    tpl.write_text("You are {{ agent_name }}. The goal: {{ current_goal }}.")
    assert load_suite(path).content_hash != h1


def test_schema_is_published_and_is_draft_2020_12() -> None:
    schema = suite_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    assert {"name", "scaffold", "tools"} <= set(schema["required"])
    # cases: or cases_from: (or both): the loader says so, the schema lists both
    assert {"cases", "cases_from"} <= set(schema["properties"])


def test_suite_error_is_one_line() -> None:
    err = SuiteError("a.yaml", 3, "bad\nthing")
    assert str(err) == "a.yaml:3: bad thing"


# --- files a suite references stay inside the suite root (issue 9 item 1) --------------------

SYSTEM_LINE = "      content: |\n        You are {{ agent_name }}. Current goal: {{ current_goal }}.\n"
TOOLS_LINES = (
    '        Tools: {{ tools_json }}\n        Reply with one JSON object like {"tool": "send_message_to_chat", '
    '"arguments": {"message": "hi"}}.\n'
)


def _with_system_file(ref: str) -> str:
    return MINIMAL_SUITE.replace(SYSTEM_LINE, f"      file: {ref}\n").replace(TOOLS_LINES, "")


def _lint(capsys, *argv: str) -> tuple[int, str]:
    status = main(["lint", "--no-tokens", *argv])
    return status, capsys.readouterr().err.strip()


def test_proc_self_environ_is_refused_at_lint(tmp_path: Path, capsys) -> None:
    """Regression: ``file: /proc/self/environ`` put the environment (API keys) into the prompt."""
    path = tmp_path / "s.yaml"
    path.write_text(_with_system_file("/proc/self/environ"))
    status, err = _lint(capsys, str(path))
    assert status == 2
    assert err.startswith(f"error: {path}:8: ") and "absolute path" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("ref", ["../../../../../../../../proc/self/environ", "../outside.j2", "sub/../../outside.j2"])
def test_relative_paths_out_of_the_root_are_refused(tmp_path: Path, capsys, ref: str) -> None:
    (tmp_path / "outside.j2").write_text("You are {{ agent_name }}.")
    suite_dir = tmp_path / "project"
    suite_dir.mkdir()
    (suite_dir / "sub").mkdir()
    path = suite_dir / "s.yaml"
    path.write_text(_with_system_file(ref))
    status, err = _lint(capsys, str(path))
    assert status == 2 and "outside the suite root" in err, err


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path, capsys) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("API_KEY=sk-canary")
    project = tmp_path / "project"
    (project / "templates").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "templates" / "sys.j2").symlink_to(secret)
    path = project / "s.yaml"
    path.write_text(_with_system_file("templates/sys.j2"))
    status, err = _lint(capsys, str(path))
    assert status == 2 and "outside the suite root" in err and "sk-canary" not in err


def test_flagship_variant_reads_templates_from_the_project(capsys) -> None:
    """suites/variants/*.yaml reads ../templates/...: inside the project root (pyproject.toml)."""
    suite = load_suite(SUITES / "variants" / "leader_core_v4_nogoal.yaml")
    assert suite.root == SUITES.parent.resolve()
    assert suite.scaffold[0].path.endswith("suites/templates/leader_system.j2")
    status, _ = _lint(capsys, str(SUITES / "variants" / "leader_core_v4_nogoal.yaml"))
    assert status == 0


def test_a_top_level_fixtures_folder_is_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "sys.j2").write_text("You are {{ agent_name }}. Goal: {{ current_goal }}.")
    (tmp_path / "fixtures" / "common.json").write_text('{"$defs": {"msg": {"type": "string", "minLength": 1}}}')
    (tmp_path / "suites").mkdir()
    path = tmp_path / "suites" / "s.yaml"
    path.write_text(
        _with_system_file("../fixtures/sys.j2").replace(
            "message: {type: string, minLength: 1}", "message: {$ref: '../fixtures/common.json#/$defs/msg'}"
        )
    )
    suite = load_suite(path)
    assert suite.root == tmp_path.resolve()
    assert suite.scaffold[0].template.startswith("You are")
    validator = suite.tool_schemas.validator("send_message_to_chat")
    assert validator.is_valid({"message": "hi"})
    assert not validator.is_valid({"message": ""})


def test_suite_root_option_widens_and_narrows(tmp_path: Path, capsys) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "sys.j2").write_text("You are {{ agent_name }}. Goal: {{ current_goal }}.")
    (tmp_path / "suites").mkdir()
    path = tmp_path / "suites" / "s.yaml"
    path.write_text(_with_system_file("../shared/sys.j2"))
    status, err = _lint(capsys, str(path))  # no pyproject/.git: the root is the suite's folder
    assert status == 2 and "outside the suite root" in err and "--suite-root" in err
    assert _lint(capsys, "--suite-root", str(tmp_path), str(path))[0] == 0
    assert load_suite(path, root=tmp_path).scaffold[0].template.startswith("You are")


def test_resolve_in_root_is_the_one_rule_for_every_reference(tmp_path: Path) -> None:
    from leader_eval.suite.files import resolve_in_root

    (tmp_path / "pyproject.toml").write_text("")
    suite = tmp_path / "suites" / "s.yaml"
    suite.parent.mkdir()
    assert resolve_in_root(suite, "../fixtures/episode.jsonl", 3) == tmp_path.resolve() / "fixtures" / "episode.jsonl"
    for bad in ("/etc/passwd", "../../etc/passwd", "~/x", ""):
        with pytest.raises(SuiteError) as err:
            resolve_in_root(suite, bad, 3, what="episode fixture")
        assert err.value.line == 3 and "episode fixture" in str(err.value)


# --- tool-contract $ref (issue 9 item 3, item 13) ---------------------------------------------

MESSAGE = "message: {type: string, minLength: 1}"


def _with_message_schema(schema: str) -> str:
    return MINIMAL_SUITE.replace(MESSAGE, schema)


REF_ERRORS = [
    ("https", "message: {$ref: 'https://example.com/s.json'}", 20, "remote or absolute"),
    ("http_userinfo", "message: {$ref: 'http://user:pw@127.0.0.1:1/s.json'}", 20, "remote or absolute"),
    ("file_url", "message: {$ref: 'file:///etc/passwd'}", 20, "remote or absolute"),
    ("urn", "message: {$ref: 'urn:example:x'}", 20, "remote or absolute"),
    ("protocol_relative", "message: {$ref: '//example.com/s.json'}", 20, "remote or absolute"),
    ("absolute_path", "message: {$ref: '/etc/passwd'}", 20, "absolute path"),
    ("traversal", "message: {$ref: '../../../../../../../etc/passwd#/x'}", 20, "outside the suite root"),
    ("missing_file", "message: {$ref: 'nope.json'}", 20, "not found"),
    ("missing_pointer", "message: {$ref: '#/$defs/nope'}", 20, "points to nothing"),
    ("missing_anchor", "message: {$ref: '#nope'}", 20, "points to nothing"),
    ("id_escape", "message: {$ref: 'x.json'}\n      $id: 'https://example.com/'", 21, "$id is not supported"),
    ("dynamic_ref", "message: {$dynamicRef: '#meta'}", 20, "$dynamicRef is not supported"),
    (
        "cycle",
        "message: {$ref: '#/$defs/a'}\n      $defs:\n        a: {$ref: '#/$defs/b'}\n        b: {$ref: '#/$defs/a'}",
        (22, 23),
        "reference cycle",
    ),
    ("cycle_through_allof", "message: {allOf: [{$ref: '#/properties/message'}]}", 20, "reference cycle"),
]


@pytest.mark.parametrize(("name", "schema", "line", "words"), REF_ERRORS, ids=[r[0] for r in REF_ERRORS])
def test_tool_schema_ref_errors_are_lint_errors(tmp_path: Path, capsys, name, schema, line, words) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(_with_message_schema(schema))
    status, err = _lint(capsys, str(path))
    assert status == 2
    m = re.match(rf"error: {re.escape(str(path))}:(\d+): ", err)
    assert m and int(m.group(1)) in ((line,) if isinstance(line, int) else line), err
    assert words in err and len(err.splitlines()) == 1, err


def test_refs_in_a_referenced_file_name_that_file_and_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "common.yaml").write_text(
        "$defs:\n  msg:\n    type: string\n  bad:\n    $ref: 'https://evil.example/x'\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(_with_message_schema("message: {$ref: 'common.yaml#/$defs/msg'}"))
    status, err = _lint(capsys, str(path))
    assert status == 2 and err.startswith(f"error: {tmp_path / 'common.yaml'}:5: ") and "remote" in err, err


def test_recursive_schema_that_consumes_input_is_fine(tmp_path: Path) -> None:
    schema = (
        "message: {$ref: '#/$defs/node'}\n      $defs:\n        node:\n          type: object\n"
        "          properties:\n            children: {type: array, items: {$ref: '#/$defs/node'}}"
    )
    path = tmp_path / "s.yaml"
    path.write_text(_with_message_schema(schema).replace("message: {mentions_goal: true}", "message: {present: true}"))
    suite = load_suite(path)
    v = suite.tool_schemas.validator("send_message_to_chat")
    assert v.is_valid({"message": {"children": [{"children": []}]}})
    assert not v.is_valid({"message": {"children": [1]}})


def test_scoring_validates_against_the_files_lint_loaded(tmp_path: Path) -> None:
    """A file $ref resolves at scoring to what lint loaded (no retrieval: before, 'common.json' was fetched)."""
    from leader_eval.scoring.api import score_output

    (tmp_path / "common.json").write_text('{"$defs": {"msg": {"type": "string", "minLength": 3}}}')
    path = tmp_path / "s.yaml"
    path.write_text(_with_message_schema("message: {$ref: 'common.json#/$defs/msg'}"))
    ok = score_output(path, '{"tool": "send_message_to_chat", "arguments": {"message": "hello"}}', case="hello")
    short = score_output(path, '{"tool": "send_message_to_chat", "arguments": {"message": "hi"}}', case="hello")
    checks_ok = {c["check"]: c for c in ok.checks}
    checks_short = {c["check"]: c for c in short.checks}
    assert checks_ok["arguments_schema"]["passed"] is True
    assert checks_short["arguments_schema"]["passed"] is False
    assert checks_short["arguments_schema"]["reason"] == "schema_violation"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("name: minimal", 'name: "minimal\\n"'),  # names run directories and golden folders
        ("  - id: greets_team", '  - id: "greets_team\\n"'),  # names fixture runs, lines of the CI log
        ("  - name: send_message_to_chat", '  - name: "send_message_to_chat\\n"'),
    ],
)
def test_an_identifier_ending_in_a_line_break_is_refused(tmp_path: Path, capsys, old: str, new: str) -> None:
    """Python's `$` also matches before a final line break, so `^[A-Za-z0-9_.-]+$` let a suite
    name, case id or tool name end in one (a run directory named across two lines); the schema's
    identifier patterns end at the end of the text."""
    text = (SUITES / "examples" / "minimal.yaml").read_text()
    assert old in text
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(old, new, 1))
    assert main(["lint", str(path), "--no-tokens"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:" in err and "does not match" in err, err


_MANY_CASES = (
    MINIMAL_SUITE.split("cases:")[0]
    + "cases:\n"
    + "".join(
        f"  - {{id: c{i}, vars: {{current_goal: g, request: r}}, expect: {{no_call: true, require: [hi]}}}}\n"
        for i in range(6)
    )
)


@pytest.mark.parametrize(
    "bad",
    [
        "{id: 'bad id', expect: {no_call: true}}",
        "{id: c9, split: test}",
        "{id: c9, surprise: 1}",
        "{id: c9, weight: 0}",
        "{id: c9, tags: [1]}",
        "{id: c9, expect: {require: [1]}}",
        "{id: c9, vars: 2001-01-01}",
        "{id: c9, sampling: {samples: 0}}",
        "{id: c9, hard_fail: [empty, empty]}",
        "{id: 7}",
    ],
)
def test_cases_shown_valid_without_jsonschema_report_the_same_errors(tmp_path: Path, monkeypatch, bad: str) -> None:
    # most cases are shown valid by a predicate (bounded.validity) so jsonschema walks only the
    # rest; a case it cannot show valid sends the whole suite to jsonschema: the same errors
    import leader_eval.suite.load as load_mod

    p = tmp_path / "s.yaml"
    p.write_text(_MANY_CASES + f"  - {bad}\n" + _MANY_CASES.split("cases:\n")[1], encoding="utf-8")

    def errors() -> str:
        with pytest.raises(SuiteError) as exc:
            load_suite(p)
        return str(exc.value)

    fast = errors()
    monkeypatch.setattr(load_mod, "_case_validity", lambda: None)
    assert fast == errors()


def test_valid_cases_are_shown_valid_without_jsonschema(tmp_path: Path) -> None:
    import leader_eval.suite.load as load_mod

    pred = load_mod._case_validity()
    assert pred is not None and pred({"id": "c1", "vars": {"i": 1}, "expect": {"no_call": True, "require": ["hi"]}})
    assert not pred({"id": "c1", "split": "test"}) and not pred({"id": "bad id"})
    p = tmp_path / "s.yaml"
    p.write_text(_MANY_CASES, encoding="utf-8")
    assert [c.id for c in load_suite(p).cases] == [f"c{i}" for i in range(6)]


def test_a_valid_suite_without_tool_schemas_loads_without_jsonschema(tmp_path: Path) -> None:
    # jsonschema is a heavy import (~35 ms of CPU): a suite the predicates show valid, with no
    # tool schema to check, loads and renders in a process that never imports it
    import subprocess
    import sys

    p = tmp_path / "s.yaml"
    p.write_text(
        "name: plain\nprotocol: openai\nsampling: {temperature: 0.0, max_tokens: 16, samples: 1}\n"
        'scaffold:\n  messages:\n    - {role: user, content: "Say hi. ({{ i }})"}\ntools: []\ncases:\n'
        + "".join(f"  - {{id: c{i}, vars: {{i: {i}}}, expect: {{no_call: true, require: [hi]}}}}\n" for i in range(6)),
        encoding="utf-8",
    )
    code = (
        "import sys\n"
        "from leader_eval.suite.load import load_suite\n"
        f"suite = load_suite({str(p)!r})\n"
        "assert len(suite.cases) == 6\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jsonschema', 'referencing')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
