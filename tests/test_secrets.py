"""An API key never reaches a run directory, the sample cache, a golden file, a report, a log or an error.

The canary tests drive the real CLI against the hostile server, which echoes the request's
Authorization header (raw, base64 of the token, base64 of the whole header, URL-encoded) into
content, reasoning, nested tool-call arguments and error bodies; then every byte the run left
behind is searched for every encoding of the secret.
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from leader_eval import secrets
from leader_eval.backends.base import Completion, SampleRequest, SamplingParams, guard
from leader_eval.backends.openai_compat import backend_from_spec
from leader_eval.evaluate import run
from leader_eval.golden import update_golden
from leader_eval.runner import RunOptions
from leader_eval.types import Prompt
from tests.support import start_hostile_server
from tests.support.servers import start_mock_server

ROOT = Path(__file__).resolve().parents[1]
CANARY = "sk-canary-7f3a9c1e5d"
#: a variable name no credential pattern matches: only the backend's registration makes it a secret
KEY_ENV = "LEADER_EVAL_CANARY_VALUE"


@pytest.fixture(scope="module")
def hostile():
    with start_hostile_server(bomb_mb=1) as srv:
        yield srv


@pytest.fixture(scope="module")
def mock_server():
    with start_mock_server(
        latency_ms=5, content='{"tool": "send_message_to_chat", "arguments": {"message": "hi"}}'
    ) as srv:
        yield srv


def leak_forms(secret: str) -> list[bytes]:
    """What a leak of ``secret`` looks like in a file: raw, base64 at any alignment, URL-encoded."""
    forms = {secret, quote(secret, safe="")}
    for prefix in ("", "a", "ab", "Bearer ", "Authorization: Bearer "):
        blob = base64.b64encode((prefix + secret).encode()).decode()
        forms.add(blob[len(prefix) * 4 // 3 + 2 : len(blob) - 4])  # the part that only the secret decides
    return sorted(f.encode() for f in forms)


def files_leaking(roots: list[Path], secret: str) -> list[str]:
    forms = leak_forms(secret)
    found = []
    for root in roots:
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for p in paths:
            data = p.read_bytes()
            found += [f"{p}: {f.decode()}" for f in forms if f in data]
    return found


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leader_eval.cli", *args], capture_output=True, text=True, env=env, timeout=180, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("behaviour", "auth"),
    [("echo", "env"), ("echo_error", "env"), ("echo", "userinfo")],
    ids=["content-reasoning-toolargs", "error-body", "url-userinfo"],
)
def test_canary_key_appears_in_no_byte_the_run_leaves(
    hostile, mini_suite: Path, tmp_path: Path, behaviour: str, auth: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not secrets._CREDENTIAL_ENV.search(k)}
    env.update(PYTHONPATH=str(ROOT), LEADER_EVAL_CACHE_DIR=str(tmp_path / "cache"), GITHUB_STEP_SUMMARY="")
    url = hostile.base_url_for(behaviour)
    if auth == "env":
        env[KEY_ENV] = CANARY
        model = f"openai:{url}#hostile"
    else:
        model = f"openai:{url.replace('://', f'://alice:{CANARY}@')}#hostile"
    out, golden, report, html = tmp_path / "run", tmp_path / "golden", tmp_path / "report.md", tmp_path / "report.html"
    # a named cache identity, so the remote samples reach the cache (and its bytes are searched too)
    common = ["--model", model, "--api-mode", "chat", "--api-key-env", KEY_ENV, "--seed", "1", "-q", "--cache-id", "v1"]
    runs = [
        cli("run", str(mini_suite), *common, "--out", str(out), env=env),
        cli("run", str(mini_suite), *common, "--out", str(tmp_path / "again"), env=env),  # from the cache
        cli("show", str(out), env=env),
        cli("gate", str(out), "--golden", str(golden), "--update-golden", "--markdown", str(report), env=env),
        cli("gate", str(out), "--golden", str(golden), "--markdown", str(report), env=env),
        cli("report", str(out), "-o", str(html), env=env),
    ]
    assert "Traceback" not in runs[0].stderr, runs[0].stderr
    assert (out / "samples.jsonl").is_file()
    assert hostile.stats()["requests"].get(behaviour, 0) > 0  # the server saw (and echoed) the key
    samples = (out / "samples.jsonl").read_text()
    assert "[redacted]" in samples  # the echo was there and was scrubbed, not dropped
    if behaviour == "echo":
        assert any((tmp_path / "cache").glob("??.jsonl"))  # the cache was written
        assert golden.exists() and any(golden.rglob("*.json"))  # a golden was written from the run
    assert html.is_file(), runs[-1].stderr
    assert files_leaking([out, tmp_path / "again", tmp_path / "cache", golden, report, html], CANARY) == []
    for p in runs:
        printed = (p.stdout + p.stderr).encode()
        assert [f for f in leak_forms(CANARY) if f in printed] == []
    if auth == "userinfo":  # the Basic token is base64("alice:CANARY"): not there either
        token = base64.b64encode(f"alice:{CANARY}".encode()).decode()
        assert files_leaking([out, tmp_path / "cache"], token) == []


@pytest.mark.parametrize("failing", [False, True], ids=["ok", "server-echoes-key-in-errors"])
def test_canary_key_appears_nowhere_in_library_runs(
    mock_server, mini_suite: Path, tmp_path: Path, monkeypatch, caplog, capsys, failing: bool
) -> None:
    monkeypatch.setenv("LEADER_EVAL_TEST_KEY", CANARY)
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("LEADER_EVAL_CACHE_DIR", str(cache_dir))
    caplog.set_level(logging.DEBUG)
    headers = {"X-Mock-Status": "500"} if failing else {}
    backend = backend_from_spec(
        f"openai:{mock_server.base_url}#mock",
        mode="chat",
        api_key_env="LEADER_EVAL_TEST_KEY",
        max_retries=1,
        retry_base_s=0.01,
        extra_headers=headers,
    )
    out = tmp_path / "run"
    result = run(mini_suite, RunOptions(seed=1, out=out, progress=False), backend=backend)
    assert len(result.samples) == 4
    if failing:
        assert all(s.outcome == "error" for s in result.samples)
        assert all("HTTP 500" in (s.error or "") for s in result.samples)
    else:
        assert all(s.outcome == "ok" for s in result.samples)
        golden_dir = tmp_path / "golden"
        upd = update_golden(result, golden_dir, baseline="mock")
        assert upd.written, upd.reason
        assert files_leaking([golden_dir], CANARY) == []
    assert files_leaking([out, cache_dir] if cache_dir.exists() else [out], CANARY) == []
    captured = capsys.readouterr()
    assert CANARY not in captured.out + captured.err
    assert CANARY not in caplog.text
    assert mock_server.stats()["authorized"] > 0  # the key was really sent


# --- the scrubber itself -------------------------------------------------------------------------


def test_every_common_encoding_of_a_secret_is_redacted() -> None:
    scrub = secrets.Scrubber([CANARY])
    cases = [
        f"Bearer {CANARY}",
        base64.b64encode(CANARY.encode()).decode(),
        base64.urlsafe_b64encode(b"\xfb\xff" + CANARY.encode()).decode(),
        quote(f"Bearer {CANARY}", safe=""),
        CANARY.encode().hex(),
    ]
    # a secret at each byte offset inside a longer base64 blob
    cases += [base64.b64encode(f"{pre}{CANARY} trailing".encode()).decode() for pre in ("", "x", "xy", "Auth: ")]
    for text in cases:
        assert all(f not in scrub.text(text).encode() for f in leak_forms(CANARY)), text
        assert "[redacted]" in scrub.text(text)


def test_nested_values_are_scrubbed_and_stay_json() -> None:
    scrub = secrets.Scrubber([CANARY])
    value = {"arguments": f'{{"m": "{CANARY}"}}', "deep": [[{CANARY: (CANARY,)}]], "n": 3}
    assert scrub.value(value) == {
        "arguments": '{"m": "[redacted]"}',
        "deep": [[{"[redacted]": ("[redacted]",)}]],
        "n": 3,
    }


def test_which_environment_variables_count_as_secrets(monkeypatch) -> None:
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "TINKER_API_KEY"):
        monkeypatch.setenv(name, f"value-of-{name.lower()}")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-but-long-enough")
    monkeypatch.setenv("LEADER_EVAL_TOKENIZER", "/some/tokenizer/path")
    monkeypatch.setenv("SOME_API_KEY", "short")  # too short to be redacted usefully
    found = secrets.current_secrets()
    assert {f"value-of-{n.lower()}" for n in ("OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY")} <= found
    assert {"value-of-db_password", "value-of-tinker_api_key"} <= found
    assert not {"false-but-long-enough", "/some/tokenizer/path", "short"} & found


def test_the_guard_scrubs_and_types_every_backend_completion(monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", CANARY)

    class Echo:
        model_id, default_protocol, context_length, special_tokens, max_concurrency = "echo", "json", None, (), 1

        async def sample(self, request: SampleRequest) -> list[Completion]:
            calls = [{"function": {"name": "f", "arguments": f'{{"k": "{CANARY}"}}'}, "x": {"y": [CANARY]}}]
            good = Completion(text=f"Bearer {CANARY}", token_ids=[1], stop_reason="stop", reasoning=CANARY)
            good.api_tool_calls = calls
            bad = Completion(text=42, token_ids=[], stop_reason=None)  # type: ignore[arg-type]
            return [good, bad]

        def describe(self) -> dict[str, str]:
            return {"url": f"http://x/?k={CANARY}"}

    import asyncio

    b = guard(Echo())  # type: ignore[arg-type]
    assert guard(b) is b
    req = SampleRequest(Prompt(text="p", token_ids=None, messages=[]), SamplingParams(), [1, 2])
    good, bad = asyncio.run(b.sample(req))
    assert CANARY not in repr(good) and CANARY not in repr(b.describe())
    assert good.api_tool_calls[0]["function"]["arguments"] == '{"k": "[redacted]"}'
    assert bad.error is not None and "text is a int, not a string" in bad.error and bad.text == ""
