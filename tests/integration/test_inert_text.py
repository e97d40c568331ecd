"""Untrusted text is inert wherever leader-eval prints or renders it.

A model's output, a server's error text, a suite's tag and a golden's quarantine reason reach a
terminal, a CI log, a step summary and a JUnit file. The checks below model what those consumers
act on, independently of ``leader_eval.inert``:

- a terminal acts on C0/C1 controls (ESC, CSI, OSC, BEL, DEL...) and reorders text at bidi controls;
- the GitHub runner reads each line (split at CR, LF or CRLF) as a workflow command when it starts
  with ``::`` after ``TrimStart()`` (.NET whitespace), and as a legacy command when it holds ``##[``
  anywhere; Azure Pipelines when it holds ``##vso[`` anywhere;
- a Markdown viewer (the step summary) acts on HTML, emphasis, code, links, tables and autolinks.

Per class of attack the payloads are generated (every control character, escape sequences of each
kind, every command prefix after every kind of leading whitespace and line break) and pushed
through each surface: ``show``, ``run``'s tag table, the gate's table and Markdown with a golden's
quarantine reason, the pytest plugin's failure text, annotations, step summary and JUnit XML, and
the CLI's error line.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import xml.etree.ElementTree as ET
from datetime import date, timedelta
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "v0_1_0"

# ---------------------------------------------------------------------------------------------
# what a terminal and a CI runner act on

C0 = [chr(c) for c in range(0x20)] + ["\x7f"]
C1 = [chr(c) for c in range(0x80, 0xA0)]
BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)]
#: invisible characters a reader cannot see or that break lines elsewhere
INVISIBLE = ["\u2028", "\u2029", "\u200b", "\ufeff", "\u00a0", "\u3000", "\u00ad", "\U000e0041"]
ACTIVE = frozenset(C0 + C1 + BIDI + INVISIBLE)

ESCAPE_SEQUENCES = [
    "\x1b[2J\x1b[H",  # CSI: clear the screen, cursor home
    "\x1b[1A\x1b[2K",  # CSI: up one line and erase it (hides the line before)
    "\x1b[32mPASS\x1b[0m",  # SGR: a green fake verdict
    "\x1b]0;pwned\x07",  # OSC: window title
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b]52;c;cGF5bG9hZA==\x07",  # OSC 52: write the clipboard
    "\x1bP+q544e\x1b\\",  # DCS: a terminfo query the terminal answers on stdin
    "\x1b_apc\x1b\\",  # APC
    "\x1bc",  # RIS: full reset
    "\x9b2J",  # 8-bit CSI
    "\x9d0;pwned\x9c",  # 8-bit OSC, 8-bit ST
    "\x90q\x9c",  # 8-bit DCS
]
COMMANDS = [
    "::error file=src/app.py,line=1,title=PASS::fake annotation",
    "::warning::w",
    "::notice title=PASS::all good",
    "::add-mask::x",
    "::stop-commands::t0k3n",
    "::set-output name=verdict::pass",
    "::save-state name=a::b",
    "::group::g",
    "::debug::d",
    "::echo::on",
    "##[error]fake",
    "##[group]g",
    "##[add-path]/tmp/evil",
    "##[set-env name=LD_PRELOAD;]/tmp/x.so",
    "##vso[task.setvariable variable=A]b",
    "##VSO[task.complete result=Succeeded;]done",
    "##vso[task.logissue type=error]x",
]
#: what can come before a command: .NET whitespace, every line break, characters older runtimes trimmed
LEADS = [
    "", " ", "   ", "\t", " \t ", "\r", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x85",
    "\u00a0", "\u1680", "\u2003", "\u202f", "\u3000", "\u2028", "\u2029", "\ufeff", "\u200b", "\u180e",
]  # fmt: skip
#: characters the runner's ``TrimStart()`` removes (Char.IsWhiteSpace), and what older runtimes did
RUNNER_TRIM = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\u180e\u200b\ufeff"
)


def runner_lines(text: str) -> list[str]:
    """Every line a CI runner may see: .NET's ReadLine (CR, LF, CRLF) and Python's splitlines."""
    return list(dict.fromkeys(re.split(r"\r\n|[\r\n]", text) + text.splitlines()))


def command_lines(text: str) -> list[str]:
    """Lines a GitHub or Azure runner would act on."""
    out = []
    for line in runner_lines(text):
        if line.lstrip(RUNNER_TRIM).startswith("::") or "##[" in line or "##vso[" in line.lower():
            out.append(line)
    return out


def terminal_active(text: str, *, newlines: bool = True) -> list[str]:
    """Characters in ``text`` a terminal would act on (``\\n`` allowed when ``newlines``)."""
    return sorted({c for c in text if c in ACTIVE and not (newlines and c == "\n")})


def assert_inert(text: str, *, own_commands: tuple[str, ...] = ()) -> None:
    """No character a terminal acts on, and no line a runner acts on but the library's own."""
    assert terminal_active(text) == [], text
    rogue = [line for line in command_lines(text) if not line.startswith(own_commands or ("\0",))]
    assert rogue == [], rogue


def hostile(kind: str) -> str:
    """One payload per class, every member of the class in it."""
    if kind == "controls":
        return "ctl" + "".join(C0 + C1 + BIDI + INVISIBLE) + "end"
    if kind == "escapes":
        return "esc " + " ".join(ESCAPE_SEQUENCES)
    if kind == "commands":
        return "cmd" + "".join(lead + cmd for cmd in COMMANDS for lead in LEADS)
    raise ValueError(kind)


KINDS = ["controls", "escapes", "commands"]


# ---------------------------------------------------------------------------------------------
# the rule itself


@pytest.mark.parametrize("ch", C0 + C1 + BIDI + INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_and_invisible_character_is_shown_escaped_as_repr_writes_it(ch: str) -> None:
    from leader_eval.inert import inert

    out = inert(f"a{ch}b")
    assert ch not in out and out == "a" + repr(ch)[1:-1] + "b"
    kept = inert(f"a{ch}b", multiline=True)
    assert kept == ("a\nb" if ch == "\n" else out)  # only LF survives, and only when asked


@pytest.mark.parametrize("seq", ESCAPE_SEQUENCES, ids=range(len(ESCAPE_SEQUENCES)))
def test_escape_sequences_reach_no_terminal(seq: str) -> None:
    from leader_eval.inert import inert

    for multiline in (False, True):
        out = inert(f"before {seq} after", multiline=multiline)
        assert terminal_active(out, newlines=False) == [] and out.isprintable()


@pytest.mark.parametrize("cmd", COMMANDS)
def test_no_line_of_untrusted_text_starts_a_workflow_command(cmd: str) -> None:
    from leader_eval.inert import inert

    for lead in LEADS:
        for text in (lead + cmd, f"ok{lead}{cmd}", f"{cmd}\n{lead}{cmd}", f"x\r\n{lead}{cmd}\n"):
            for multiline in (False, True):
                out = inert(text, multiline=multiline)
                assert command_lines(out) == [], (lead, text, out)
                assert terminal_active(out, newlines=multiline) == []


def test_ordinary_text_reads_unchanged() -> None:
    from leader_eval.inert import inert

    for text in ("café naïve 日本語 🎉", 'it\'s "quoted" and back\\slash', "a::b x ## y #[z] c:d", "tag: v1.2-rc"):
        assert inert(text) == text


def test_the_library_own_escape_codes_stay_in_composed_output() -> None:
    from leader_eval.inert import inert, inert_lines

    shown = "raw: '\x1b[7mleak\x1b[0m'\n" + inert("\n::error::x") + "\n::warning::y\r##[group]z"
    out = inert_lines(shown)
    assert out.startswith("raw: '\x1b[7mleak\x1b[0m'") and command_lines(out) == []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from([*C0, *C1, *BIDI, *INVISIBLE, ":", "#", "[", "v", "s", "o", " ", "a", "\\"])))
def test_inert_is_total_and_idempotent(text: str) -> None:
    from leader_eval.inert import inert

    for multiline in (False, True):
        out = inert(text, multiline=multiline)
        assert terminal_active(out, newlines=multiline) == [] and command_lines(out) == []
        assert inert(out, multiline=multiline) == out


# --- Markdown and HTML


HOSTILE_MARKDOWN = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "<!-- hidden --> shown",
    "<details><summary>PASS</summary>",
    "**PASS**",
    "__PASS__",
    "_PASS_ *PASS*",
    "~~FAIL~~ PASS",
    "`PASS`",
    "``x``",
    "| PASS | PASS |",
    "[PASS](https://evil.example/)",
    "![x](https://evil.example/x.png)",
    "[PASS][1]",
    "[^1]",
    "<https://evil.example/>",
    "https://evil.example/path",
    "www.evil.example",
    "attacker@evil.example",
    "# PASS",
    "  ### PASS",
    "- [x] PASS",
    "+ PASS",
    "1. PASS",
    "1) PASS",
    "> [!NOTE] PASS",
    "---",
    "***",
    "===",
    "    indented code",
    "&lt;img src=x&gt; &amp; &#60;b&#62;",
    "$\\color{green}{PASS}$",
    "trailing backslash \\",
    "x\n| fake | row |\n\n### PASS",
    "x\r\n<img src=x>",
    "\x1b[32mPASS\x1b[0m",
]


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def render_markdown(source: str) -> _Html:
    """The HTML a CommonMark viewer with GitHub's tables and strikethrough makes of ``source``."""
    from markdown_it import MarkdownIt

    parsed = _Html()
    parsed.feed(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(source))
    return parsed


@pytest.mark.parametrize("payload", HOSTILE_MARKDOWN, ids=range(len(HOSTILE_MARKDOWN)))
@pytest.mark.parametrize(
    ("context", "tags"),
    [
        ("| {} | b |\n|---|---|\n| {} | b |\n", {"table", "thead", "tbody", "tr", "th", "td"}),
        ("- {}\n- {}\n", {"ul", "li"}),
        ("### {}\n\n{}\n", {"h3", "p"}),
    ],
    ids=["table-cell", "list-item", "heading-and-paragraph"],
)
def test_markdown_renders_exactly_the_text(payload: str, context: str, tags: set[str]) -> None:
    from leader_eval.inert import inert, markdown

    md = markdown(payload)
    assert "\n" not in md and "\r" not in md
    html = render_markdown(context.format(md, md))
    assert set(html.tags) <= tags, html.tags
    shown = [t.strip() for t in "".join(html.text).split("\n") if t.strip() and t.strip() != "b"]
    assert shown == [inert(payload).strip()] * 2
    # GitHub also links bare URLs, www. and e-mail addresses: their openings are escaped
    assert not re.search(r"(?<!\\):(?=//)|(?i:www)(?!\\)\.|(?<!\\)@", md)
    assert not re.search(r"(?<!\\)\$", md)  # GitHub's math


def test_junit_json_round_trips_and_holds_nothing_a_viewer_acts_on() -> None:
    from leader_eval.inert import junit_json

    record = {"case_id": "c_1", "first_error": " ".join(HOSTILE_MARKDOWN) + hostile("controls"), "n": [1, 2]}
    text = junit_json(record)
    assert json.loads(text) == record and text.isascii() and text.isprintable()
    strings = "".join(re.findall(r'"(?:[^"\\]|\\.)*"', text))
    assert not set(strings) & set("<>&'`*~|$[]()!#:@"), strings
    assert '"case_id"' in text  # a key stays readable
    html = render_markdown(text)
    assert html.tags == ["p"] and "".join(html.text).strip() == text


# --- the library's own workflow commands


@pytest.mark.parametrize("kind", KINDS)
def test_an_annotation_is_one_command_whose_untrusted_parts_cannot_escape_it(kind: str) -> None:
    from leader_eval.inert import inert
    from leader_eval.pytest_plugin.ci import annotation

    payload = hostile(kind) + "%0A::error::x, a:b"
    line = annotation("error", f"evals/{payload}.yaml", 7, f"leader-eval {payload}", payload)
    assert runner_lines(line) == [line] and command_lines(line) == [line]
    head, _, data = line[2:].partition("::")  # GitHub splits at the first "::" after the name
    level, _, props = head.partition(" ")
    fields = dict(p.split("=", 1) for p in props.split(","))  # no raw "," or ":" in a property
    assert level == "error" and sorted(fields) == ["file", "line", "title"] and fields["line"] == "7"

    def unescape(s: str) -> str:  # the runner's order: CR, LF, ":", ",", then "%"
        for token, code in (("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25")):
            s = s.replace(code, token)
        return s

    assert unescape(fields["title"]) == inert(f"leader-eval {payload}")
    assert unescape(data) == inert(payload, multiline=True)
    assert_inert(unescape(data))


# ---------------------------------------------------------------------------------------------
# the surfaces


def _hostile_replay(tmp_path: Path, payload: str, channel: str = "argkey") -> Path:
    """The committed v0.1.0 run with the model's outputs replaced: ``greets_team`` errored with
    ``payload`` as the server's error text; ``states_goal`` called a tool named ``payload``
    (``channel="tool"``) or the right tool with an argument key ``payload`` (``"argkey"``)."""
    run = tmp_path / "replayed"
    shutil.copytree(DATA / "run", run)
    records = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    for r in records:
        if r["case_id"] == "greets_team":
            r.update(outcome="error", error=payload, text="")
        elif channel == "tool":
            r["text"] = json.dumps({"tool": payload, "arguments": {"message": "hi"}})
        else:
            r["text"] = json.dumps({"tool": "send_message_to_chat", "arguments": {"message": "hi", payload: 1}})
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def _yaml_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar, every non-printable character as a YAML escape."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isascii() and ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _suite(directory: Path, tag: str = "social") -> Path:
    text = (DATA / "minimal.yaml").read_text().replace("samples: 2 ", "samples: 1 ")
    path = directory / "minimal.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace("tags: [social]", f"tags: [{_yaml_quoted(tag)}]"))
    return path


@pytest.mark.parametrize("channel", ["tool", "argkey"])
@pytest.mark.parametrize("kind", KINDS)
def test_run_tag_table_and_show_print_model_and_suite_text_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, channel: str
) -> None:
    from leader_eval.cli.app import main

    payload = hostile(kind)
    suite = _suite(tmp_path, tag=f"tag {payload}")
    out = tmp_path / "run"
    replay = _hostile_replay(tmp_path, payload, channel)
    main(["run", str(suite), "--model", f"replay:{replay}", "--out", str(out), "-q"])
    printed = capsys.readouterr()
    assert f"tag {payload[:3]}" in printed.out  # the tag table holds the hostile tag's row
    assert_inert(printed.out + printed.err)
    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    # the server's error text, the parsed call and the check that quotes the tool name or key
    assert f"error: {payload[:3]}" in shown and "call: " in shown
    assert ("x tool_choice" if channel == "tool" else "x arguments_schema") in shown
    assert "unreadable" not in shown  # a record holding U+2028 or U+0085 reads back
    assert_inert(shown)


@pytest.mark.parametrize("kind", KINDS)
def test_gate_table_and_markdown_show_a_golden_quarantine_reason_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    from leader_eval.cli.app import main
    from leader_eval.decide.golden import build_golden, golden_path, write_golden
    from tests.support.runs import difficulties, make_run, make_suite, write_run_dir

    payload = hostile(kind) + " " + " ".join(HOSTILE_MARKDOWN)
    suite = make_suite(tmp_path, 6)
    run = write_run_dir(make_run(suite, difficulties(6), n=3, seed=1), tmp_path / "run")
    golden = build_golden(make_run(suite, difficulties(6), n=3, seed=2))
    today = date.today()
    golden["quarantine"] = [
        {"case": "c00", "reason": payload, "date": today.isoformat(), "expires": (today + timedelta(30)).isoformat()}
    ]
    write_golden(golden_path(tmp_path / "golden", suite.name, "v1"), golden)
    summary = tmp_path / "summary.md"
    main(["gate", str(run), "--golden", str(tmp_path / "golden"), "--baseline", "v1", "--markdown", str(summary)])
    printed = capsys.readouterr()
    assert "quarantined: c00" in printed.out
    assert_inert(printed.out + printed.err)
    md = summary.read_text()
    assert f"quarantined: c00 ({payload[:3]}" in md
    golden["quarantine"][0]["reason"] = "flaky at v7"
    write_golden(golden_path(tmp_path / "golden", suite.name, "v1"), golden)
    benign = tmp_path / "benign.md"
    main(["gate", str(run), "--golden", str(tmp_path / "golden"), "--baseline", "v1", "--markdown", str(benign)])
    _assert_markdown_inert(md, benign.read_text())


def _assert_markdown_inert(md: str, benign: str | None = None) -> None:
    """``md`` renders no markup from its untrusted text: no tag a payload asks for, no link to it,
    and (given the same report made from ``benign`` text) exactly the same tags."""
    html = render_markdown(md)
    assert not {"img", "script", "iframe", "input", "em", "del", "pre", "blockquote"} & set(html.tags), html.tags
    assert not any("evil" in (v or "") for _, v in html.attrs)
    if benign is not None:
        assert html.tags == render_markdown(benign).tags
    assert_inert(md)


@pytest.mark.parametrize("kind", KINDS)
def test_compare_markdown_and_table_show_run_names_and_reasons_inert(tmp_path: Path, kind: str) -> None:
    from leader_eval.decide.compare import compare_runs
    from leader_eval.report.compare import compare_markdown, format_compare
    from tests.support.runs import difficulties, make_run, make_suite

    payload = hostile(kind) + " " + " ".join(HOSTILE_MARKDOWN[:12])
    suite = make_suite(tmp_path, 8)
    a = make_run(suite, difficulties(8), n=4, seed=1, label=f"A {payload}")
    b = make_run(suite, difficulties(8, seed=5), n=4, seed=2, label=f"B {payload}")
    c = compare_runs([a, b])
    md = compare_markdown(c)
    assert f"A {payload[:3]}" in format_compare(c) and f"A {payload[:3]}" in md
    assert_inert(format_compare(c))
    a.manifest["label"], b.manifest["label"] = "A x", "B x"
    _assert_markdown_inert(md, compare_markdown(compare_runs([a, b])))


class _Refusing(BaseHTTPRequestHandler):
    """A model server that refuses every request with ``payload`` as its error message."""

    payload = ""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = json.dumps({"error": {"message": self.payload}}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_error_text_is_inert_in_the_backend_log_and_the_cli_output(
    tmp_path: Path, mini_suite: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    from leader_eval.cli.app import main

    handler = type("Refusing", (_Refusing,), {"payload": hostile(kind)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    caplog.set_level(logging.WARNING)
    out = tmp_path / "run"
    try:
        url = f"openai:http://127.0.0.1:{server.server_address[1]}/v1#m"
        main(["run", str(mini_suite), "--model", url, "--api-mode", "chat", "--out", str(out), "--seed", "1", "-q"])
    finally:
        server.shutdown()
        server.server_close()
    main(["show", str(out)])
    printed = capsys.readouterr()
    logged = [r.getMessage() for r in caplog.records]
    assert any("openai backend: seed" in m and "HTTP 400" in m for m in logged)  # the server's text was logged
    assert f"error: HTTP 400: {hostile(kind)[:3]}" in printed.out  # and shown
    for text in (*logged, printed.out, printed.err):
        assert_inert(text)


def test_the_cli_error_line_is_inert(monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    from leader_eval.cli import app as cli
    from leader_eval.cli import lint as lint_command
    from leader_eval.errors import LeaderEvalError

    payload = hostile("escapes") + hostile("commands")

    def fail(_args: object) -> int:
        raise LeaderEvalError(f"suite.yaml:3: the server said {payload}")

    monkeypatch.setattr(lint_command, "run", fail)
    assert cli.main(["lint", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: suite.yaml:3: the server said")
    assert_inert(err)


def test_pytest_failure_text_annotations_step_summary_and_junit_are_inert(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strict mode in GitHub Actions: a server's error text and a model's tool name and argument key
    (every class at once) through the failure text, the annotations, the step summary and JUnit."""
    payload = " ".join([hostile("controls"), hostile("escapes"), hostile("commands"), *HOSTILE_MARKDOWN])
    _suite(pytester.path / "evals")
    replay = _hostile_replay(pytester.path, payload)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    res = pytester.runpytest_subprocess(
        f"--le-model=replay:{replay}", "--le-eval-mode=strict", "--junitxml=out.xml", "-p", "no:cacheprovider", "-rA"
    )
    assert res.ret == 1, res.stdout.str()
    stdout = res.stdout.str()
    assert "ended without a scored output" in stdout and "arguments_schema" in stdout  # the failure texts
    annotations = [line for line in command_lines(stdout) if line.startswith("::error file=evals/minimal.yaml,")]
    assert len(annotations) == 2
    assert_inert(stdout + res.stderr.str(), own_commands=("::error file=evals/minimal.yaml,line=",))
    md = summary.read_text()
    assert "first: greets_team: ctl" in "".join(render_markdown(md).text)  # the error rule quotes the server
    _assert_markdown_inert(md)
    tree = ET.parse(pytester.path / "out.xml")
    for prop in tree.iter("property"):
        value = prop.get("value") or ""
        record = json.loads(value)
        assert isinstance(record, dict) and not set(value) & set("<>&`*|$")
        assert_inert(value)
    failures = [f.get("message", "") + (f.text or "") for f in tree.iter("failure")]
    assert failures and all(command_lines(f) == [] for f in failures)


# --- every line the CLI prints, whichever print site forgot ``inert``


@pytest.mark.parametrize("kind", ["commands", "escapes"])
def test_every_line_the_cli_prints_is_guarded_even_from_a_print_site_that_forgot_inert(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    import sys as _sys

    from leader_eval.cli import app as cli
    from leader_eval.cli import lint as lint_command

    payload = hostile(kind)

    def careless(_args: object) -> int:
        print("note: a golden field (" + payload + ")")
        print(payload, "::error::second argument", sep="\n")
        print(payload, file=_sys.stderr)
        return 0

    monkeypatch.setattr(lint_command, "run", careless)
    assert cli.main(["lint", "x.yaml"]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("note: a golden field (")
    for text in (printed.out, printed.err):
        assert command_lines(text) == [], command_lines(text)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([":", "#", "[", "vso", "\n", "\r", "\u2028", "\x85", " ", "a"])).map("".join),
        max_size=8,
    )
)
@example(chunks=["", "", " ", "::"])  # a flush after a line's blank lead: the line still starts a command
def test_a_guarded_stream_starts_no_command_however_the_text_is_cut_into_writes(chunks: list[str]) -> None:
    import io

    from leader_eval.inert import GuardedStream

    sink = io.StringIO()
    stream = GuardedStream(sink)
    for k, chunk in enumerate(chunks):
        stream.write(chunk)
        if k == 2:
            stream.flush()  # a flush between writes (progress lines) cannot open a gap either
    stream.write("\n")
    assert command_lines(sink.getvalue()) == [], sink.getvalue()
    joined = "".join(chunks) + "\n"
    if "::" not in joined and "#" not in joined and ":" not in "".join(chunks[:3])[-1:]:
        assert sink.getvalue() == joined  # text with nothing to guard passes unchanged


def test_plan_shows_a_golden_suite_hash_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from leader_eval.cli.app import main

    golden = json.loads(next((DATA / "golden").rglob("*.json")).read_text())
    golden["suite_hash"] = "x " + hostile("commands") + hostile("escapes")
    folder = tmp_path / "golden" / "minimal"
    folder.mkdir(parents=True)
    (folder / "main.json").write_text(json.dumps(golden))
    assert main(["plan", str(DATA / "minimal.yaml"), "--golden", str(tmp_path / "golden")]) == 0
    out = capsys.readouterr().out
    assert "note: the golden was made from other suite content (x " in out
    assert_inert(out)
