"""The plugin is safe to install in any repo: namespaced options, opt-in collection, setup errors
that say what is wrong (usage error exit 4, or a collection error naming file and line, exit 2),
and no traceback from the plugin's own code. No test here samples a model: replays of the run
committed under tests/data and a loopback server that refuses every request stand in."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from leader_eval.pytest_plugin.config import DEFAULT_SUITES

pytest_plugins = ["pytester"]

DATA = Path(__file__).parents[1] / "data" / "v0_1_0"

#: the kind of conftest an ML repo has: options the old, unprefixed plugin collided with
ML_CONFTEST = """
import sys
def pytest_addoption(parser):
    parser.addoption("--model", default="resnet50")
    parser.addoption("--seed", default="0")
    parser.addoption("--samples", default="3")
def pytest_sessionfinish(session):
    with open("imported.json", "w") as f:
        import json
        json.dump({"llama_cpp": "llama_cpp" in sys.modules, "numpy": "numpy" in sys.modules}, f)
"""

#: YAML that looks like a suite to a content sniffer (top-level scaffold: and cases:)
LOOKALIKE = "scaffold:\n  layers: 4\ncases:\n  - lr: 0.1\n  - lr: 0.01\n"


def _no_plugin_traceback(text: str) -> None:
    assert "Traceback" not in text, text
    assert "INTERNALERROR" not in text, text
    assert "leader_eval/" not in text and "leader_eval\\" not in text, text


def _ml_repo(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(ML_CONFTEST)
    pytester.makepyfile(
        test_unit="def test_arith(request):\n    assert request.config.getoption('--model') == 'resnet50'\n"
    )
    for rel in ("configs/train.yaml", "experiments/sweep.yml", "evals_old/lookalike.yaml"):
        (pytester.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / rel).write_text(LOOKALIKE)


def test_plugin_is_inert_in_an_ml_repo_until_a_suite_is_configured(pytester: pytest.Pytester) -> None:
    _ml_repo(pytester)
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1)
    assert plain.ret == 0
    imported = json.loads((pytester.path / "imported.json").read_text())
    assert imported["llama_cpp"] is False  # nothing heavier than pytest and the standard library
    assert not (pytester.path / "runs").exists()  # nothing sampled, nothing written
    assert "leader-eval gate" not in plain.stdout.str()

    # the same repo with a suite configured: collected, sampled (a replay of a committed run), gated
    shutil.copy(DATA / "minimal.yaml", pytester.path / "configs" / "agent_suite.yaml")
    pytester.makeini("[pytest]\nleader_eval_suites =\n    configs/agent_*.yaml\n")
    gated = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--le-model=replay:{DATA / 'run'}", "--le-samples=1", "--le-allow-missing-golden"
    )
    out = gated.stdout.str()
    assert "configs/agent_suite.yaml::leader-eval-gate" in out and "gate WARN (suite minimal" in out, out
    assert "lookalike" not in out and "train.yaml" not in out
    assert gated.ret == 0
    assert len(list((pytester.path / "runs").iterdir())) == 1


def test_default_suite_glob_is_evals_and_a_yaml_on_the_command_line_is_collected(pytester: pytest.Pytester) -> None:
    assert DEFAULT_SUITES[0] == "evals/**/*.yaml"
    (pytester.path / "evals" / "nested").mkdir(parents=True)
    shutil.copy(DATA / "minimal.yaml", pytester.path / "evals" / "nested" / "a.yaml")
    (pytester.path / "elsewhere").mkdir()
    shutil.copy(DATA / "minimal.yaml", pytester.path / "elsewhere" / "b.yaml")
    listed = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert "evals/nested/a.yaml::greets_team" in listed.stdout.str()
    assert "elsewhere" not in listed.stdout.str()
    named = pytester.runpytest_subprocess("--collect-only", "-q", "elsewhere/b.yaml", "-p", "no:cacheprovider")
    assert "elsewhere/b.yaml::greets_team" in named.stdout.str()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--le-model=bogus:thing"], "--le-model 'bogus:thing': unknown model spec"),
        (["--le-model=bogus:thing", "-n", "2"], "unknown model spec"),  # checked before xdist's workers start
        (["--le-model=gguf:/nonexistent/model.gguf"], "no such GGUF file"),
        (["--le-model=openai:http://127.0.0.1:9/v1"], "name the served model"),
        # the backend's missing option is named as the plugin spells it, never as a Python keyword
        (
            ["--le-model=openai:http://127.0.0.1:9#m", "--le-api-mode=completions"],
            "give --le-chat-template FILE (a jinja2 template) or --le-template-gguf PATH",
        ),
        (["--le-model=replay:/nonexistent/run"], "/nonexistent/run"),
        (["--le-samples=0"], "--le-samples"),
        (["--le-temperature=nan"], "--le-temperature"),
        (["--le-eval-mode=lenient"], "--le-eval-mode"),
        (["--le-tolerance=score"], "expected METRIC=VALUE"),
        (["--le-tolerance=bogus_metric=0.1"], "bogus_metric"),
        (["--le-case=no_such_case"], "no_such_case"),
        (["--le-baseline=../main"], "--le-baseline"),  # a baseline is one file name, never a path
        (["--le-baseline=main json"], "--le-baseline"),
        (["--le-label=a/b"], "--le-label"),  # a label names a run directory: one safe name
    ],
)
def test_bad_options_are_usage_errors_with_the_real_message(pytester: pytest.Pytester, args, message) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    res = pytester.runpytest_subprocess("mini.yaml", *args, "-p", "no:cacheprovider")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, text
    assert message in text
    _no_plugin_traceback(text)
    assert not (pytester.path / "runs").exists()


def test_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nleader_eval_samples = many\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "leader_eval_samples" in text and "many" in text
    _no_plugin_traceback(text)


REPLAY_MODEL = f"--le-model=replay:{DATA / 'run'}"


def _repo_with_suite_and_a_test(pytester: pytest.Pytester) -> None:
    """A repo that uses the plugin: an ini file, a suite under evals/, and an ordinary test."""
    pytester.makeini("[pytest]\nleader_eval_suites =\n    evals/*.yaml\n")
    (pytester.path / "evals").mkdir()
    shutil.copy(DATA / "minimal.yaml", pytester.path / "evals" / "minimal.yaml")
    pytester.makepyfile(test_unit="def test_arith():\n    assert 1 + 1 == 2\n")


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_collect_only_lists_cases_and_runs_no_gate(pytester: pytest.Pytester, xdist: list[str]) -> None:
    _repo_with_suite_and_a_test(pytester)
    res = pytester.runpytest_subprocess("--collect-only", "-q", REPLAY_MODEL, *xdist, "-p", "no:cacheprovider")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == 0, text
    assert "evals/minimal.yaml::greets_team" in text or "2 workers" in text  # xdist lists nothing itself
    # no gate ran: before 0.3 it gated the unsampled cases and failed ("crashed worker", incomplete)
    assert "leader-eval gate" not in text and "incomplete" not in text and "crashed" not in text, text
    assert not (pytester.path / "runs").exists()
    _no_plugin_traceback(text)


def test_a_space_separated_path_option_that_moves_the_rootdir_is_a_usage_error(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _repo_with_suite_and_a_test(pytester)
    elsewhere = tmp_path_factory.mktemp("golden_elsewhere")
    # pytest reads `/abs/dir` as a test path before the plugin loads: the rootdir moved to a common
    # ancestor, the ini was not read, no suite matched, and the session printed "1 passed", exit 0
    res = pytester.runpytest_subprocess(REPLAY_MODEL, "--le-golden-dir", str(elsewhere), "-p", "no:cacheprovider")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, text
    assert f"--le-golden-dir {elsewhere}" in text and f"--le-golden-dir={elsewhere}" in text
    assert not (pytester.path / "runs").exists()
    _no_plugin_traceback(text)
    # the same directory with `=`, or a space-separated path inside the repo, keeps the rootdir
    (pytester.path / "golden").mkdir()
    for how in ([f"--le-golden-dir={elsewhere}"], ["--le-golden-dir", "golden"]):
        ok = pytester.runpytest_subprocess(REPLAY_MODEL, *how, "--le-allow-missing-golden", "-p", "no:cacheprovider")
        assert ok.ret == 0 and "evals/minimal.yaml::leader-eval-gate" in ok.stdout.str(), ok.stdout.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_le_options_in_a_session_that_collects_no_suite_are_a_usage_error(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    _repo_with_suite_and_a_test(pytester)
    # the options would be silently ignored: the session named only an ordinary test file
    res = pytester.runpytest_subprocess("test_unit.py", REPLAY_MODEL, *xdist, "-p", "no:cacheprovider")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "--le-model given but no leader-eval suite was collected" in text
    assert "evals/*.yaml" in text and str(pytester.path) in text  # the glob and the rootdir
    assert not (pytester.path / "runs").exists()
    if not xdist:  # without --le-* options on the command line the same session is nobody's business
        plain = pytester.runpytest_subprocess("test_unit.py", "-p", "no:cacheprovider")
        assert plain.ret == 0, plain.stdout.str()


def test_a_suite_glob_the_user_set_that_matches_nothing_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _repo_with_suite_and_a_test(pytester)
    pytester.makeini("[pytest]\nleader_eval_suites =\n    evals/*.yaml\n    eval/**/*.yaml\n")  # a typo
    for args in ([], [REPLAY_MODEL]):
        res = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
        text = res.stdout.str() + res.stderr.str()
        assert res.ret == pytest.ExitCode.USAGE_ERROR, text
        assert "'eval/**/*.yaml' matches no suite file" in text and str(pytester.path) in text
        _no_plugin_traceback(text)
    # the default globs need not match: a repo that does not use the plugin has no evals/
    pytester.makeini("[pytest]\n")
    (pytester.path / "evals" / "minimal.yaml").unlink()
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider").ret == 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_a_usage_error_before_anything_is_sampled(pytester: pytest.Pytester) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    dead = f"openai:http://127.0.0.1:{_free_port()}/v1#m"
    res = pytester.runpytest_subprocess(
        "mini.yaml", f"--le-model={dead}", "--le-api-mode=chat", "-p", "no:cacheprovider"
    )
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "unreachable" in text, text
    _no_plugin_traceback(text)
    assert not (pytester.path / "runs").exists()


class _Refuser(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that answers and refuses every completion (HTTP 400)."""

    def do_GET(self) -> None:
        self._send(200, {"data": [{"id": "m"}]})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.answer_about and self.server.answer_about.encode() in body:  # type: ignore[attr-defined]
            reply = '{"tool": "send_message_to_chat", "arguments": {"message": "hello"}}'
            self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                          "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 5, "completion_tokens": 5}})  # fmt: skip
            return
        self._send(400, {"error": {"message": "model m refuses"}})

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def _serve(answer_about: str | None) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuser)
    server.answer_about = answer_about  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"openai:http://127.0.0.1:{server.server_address[1]}/v1#m"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def refusing_server() -> Iterator[str]:
    yield from _serve(None)


@pytest.fixture
def half_refusing_server() -> Iterator[str]:
    """Answers the case that asks to say hello, refuses the other."""
    yield from _serve("Say hello")


@pytest.mark.parametrize("mode", ["strict", "soft"])
def test_an_all_error_run_fails_in_both_modes(pytester: pytest.Pytester, refusing_server: str, mode: str) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    args = ["mini.yaml", f"--le-model={refusing_server}", "--le-api-mode=chat", "--le-samples=1", "--le-no-cache"]
    res = pytester.runpytest_subprocess(*args, f"--le-eval-mode={mode}", "-p", "no:cacheprovider", "-rfEx")
    out = res.stdout.str()
    assert res.ret == 1, out
    assert "none of 2 samples was measured (2 errored)" in out and "model m refuses" in out
    res.stdout.fnmatch_lines(["*FAILED mini.yaml::leader-eval-gate*"])
    if mode == "strict":  # every case whose samples all errored fails
        res.stdout.fnmatch_lines(["*FAILED mini.yaml::greets_team*all 1 samples*", "*FAILED mini.yaml::states_goal*"])
    else:  # soft: the cases are xfail with the reason; the gate item fails the session
        res.stdout.fnmatch_lines(["*XFAIL mini.yaml::greets_team*all 1 samples*"])
    _no_plugin_traceback(out)


def test_a_shard_with_sampler_errors_fails_the_error_rule(pytester: pytest.Pytester, refusing_server: str) -> None:
    """A shard is not gated against the golden, but its sampler errors still fail it: never a pass."""
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    args = ["mini.yaml", f"--le-model={refusing_server}", "--le-api-mode=chat", "--le-samples=1", "--le-no-cache"]
    res = pytester.runpytest_subprocess(*args, "--le-seed=3", "--le-shard=1/2", "-p", "no:cacheprovider", "-rfEx")
    out = res.stdout.str()
    assert res.ret == 1, out
    assert "shard 1/2: not gated" in out and "shard FAIL: error rule: none of 1 samples was measured (1 errored)" in out
    res.stdout.fnmatch_lines(["*FAILED mini.yaml::leader-eval-gate*"])
    _no_plugin_traceback(out)


@pytest.mark.parametrize(("rate", "status"), [("0.5", 0), ("0", 1)])
def test_an_allowed_error_rate_lets_the_error_rule_pass(
    pytester: pytest.Pytester, half_refusing_server: str, rate: str, status: int
) -> None:
    shutil.copy(DATA / "minimal.yaml", pytester.path / "mini.yaml")
    args = ["mini.yaml", f"--le-model={half_refusing_server}", "--le-api-mode=chat", "--le-samples=1", "--le-no-cache"]
    res = pytester.runpytest_subprocess(
        *args, f"--le-max-error-rate={rate}", "--le-allow-missing-golden", "-p", "no:cacheprovider"
    )
    out = res.stdout.str()
    assert res.ret == status, out
    assert ("1 of 2 samples errored" in out) == (status == 1), out


#: hostile suite files: (name, bytes); each must be a collection error naming the file and a line
HOSTILE: list[tuple[str, bytes]] = [
    ("laughs.yaml", b'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
     + b"".join(f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n".encode()
                for p, c in zip("abcdefgh", "bcdefghi", strict=True))
     + b"scaffold: *i\ncases: []\n"),
    ("latin1.yaml", "name: caf\xe9\nscaffold: {}\ncases: []\n".encode("latin-1")),
    ("utf16.yaml", "name: x\nscaffold: {}\ncases: []\n".encode("utf-16")),
    ("binary.yaml", bytes(range(256)) * 4),
    ("empty.yaml", b""),
    ("list.yaml", b"- scaffold\n- cases\n"),
    ("deep.yaml", b"name: x\nscaffold: " + b"[" * 5000 + b"]" * 5000 + b"\ncases: []\n"),
    ("syntax.yaml", b"name: x\nscaffold:\n  messages: [\n cases: {\n"),
    ("dupkey.yaml", b"name: x\nname: y\nscaffold: {}\ncases: []\n"),
    ("wrongtype.yaml", b"name: x\nscaffold: {messages: 3}\ncases: nope\n"),
    ("recursive.yaml", b"name: &n x\nscaffold: &s {m: *s}\ncases: []\n"),
    ("merge.yaml", b"base: &b {role: system}\nname: x\nscaffold:\n  messages:\n    - <<: *b\n      content: hi\ncases: []\n"),
    ("date.yaml", b"name: x\nscaffold: {messages: [{role: user, content: hi}]}\ntools:\n  - name: t\n    description: d\n"
     b"    parameters: {type: object, default: 2024-01-01}\ncases:\n  - id: a\n"),
    ("undefined_var.yaml", (DATA / "minimal.yaml").read_bytes().replace(b"{{ agent_name }}", b"{{ no_such_var }}")),
    ("absolute_include.yaml", b"name: x\nscaffold:\n  messages:\n    - role: system\n      file: /etc/passwd\n"
     b"cases:\n  - id: a\n"),
]  # fmt: skip


def test_hostile_suites_are_collection_errors_naming_file_and_line(pytester: pytest.Pytester) -> None:
    for name, data in HOSTILE:
        (pytester.path / name).write_bytes(data)
    (pytester.path / "good.yaml").write_bytes((DATA / "minimal.yaml").read_bytes())
    ret, text, max_rss_kib = _pytest_measured(pytester, *[n for n, _ in HOSTILE], "good.yaml", "-p", "no:cacheprovider")
    assert ret == pytest.ExitCode.INTERRUPTED, text  # collection errors: nothing runs, exit 2
    for name, _ in HOSTILE:
        assert f"ERROR collecting {name}" in text, (name, text)
    import re

    for name, _ in HOSTILE:
        assert re.search(rf"{re.escape(name)}:\d+: ", text), (name, text)
    _no_plugin_traceback(text)
    assert not (pytester.path / "runs").exists()  # the good suite beside them was not sampled either
    # a hang fails through the helper's timeout; memory stays bounded (the issue asks under 1 GB)
    assert 0 < max_rss_kib < 1024 * 1024


def _pytest_measured(pytester: pytest.Pytester, *args: str, timeout: float = 60) -> tuple[int, str, int]:
    """``pytester.runpytest_subprocess`` with that process's own peak RSS (KiB) from ``wait4``:
    ``RUSAGE_CHILDREN`` is the peak of every child this worker ever reaped (an embedded model's
    run in an earlier test passed 1 GB), which says nothing of this one."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", f"--basetemp={pytester.path / 'basetemp'}", *args],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read().decode("utf-8", "replace")
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    assert proc.returncode != -signal.SIGKILL, f"still running after {timeout} s: {out[-2000:]}"
    return proc.returncode, out, usage.ru_maxrss
