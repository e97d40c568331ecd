"""An API key never reaches a run directory, the sample cache, a golden file, a report, a log or an error.

The canary tests drive the real CLI against the hostile server, which echoes the request's
Authorization header (raw, base64 of the token, base64 of the whole header, URL-encoded) into
content, reasoning, nested tool-call arguments and error bodies; then every byte the run left
behind is searched for every encoding of the secret.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from leader_eval import secrets
from leader_eval.decide.golden import update_golden
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Completion, SampleRequest, SamplingParams, guard
from leader_eval.sampling.backends.openai_compat import backend_from_spec
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


#: the case forms a server may echo a key in (upper-casing a header is common)
CASE_FORMS = (str, str.upper, str.lower, str.title, str.swapcase, str.capitalize)


def leak_forms(secret: str) -> list[bytes]:
    """What a leak of ``secret`` looks like in a file: raw, base64 at any alignment, URL-encoded,
    each in every case form."""
    forms = set()
    for case in CASE_FORMS:
        cased = case(secret)
        forms |= {cased, quote(cased, safe="")}
        for prefix in ("", "a", "ab", "Bearer ", "Authorization: Bearer "):
            blob = base64.b64encode((prefix + cased).encode()).decode()
            forms.add(blob[len(prefix) * 4 // 3 + 2 : len(blob) - 4])  # the part that only the secret decides
    return sorted(f.encode() for f in forms)


def leaks_in(data: bytes, secret: str) -> list[str]:
    """The forms of ``secret`` in ``data``; the raw key also in any mix of case."""
    found = [f.decode() for f in leak_forms(secret) if f in data]
    if secret.lower().encode() in data.lower():
        found.append(f"{secret} in some case")
    return found


def files_leaking(roots: list[Path], secret: str) -> list[str]:
    found = []
    for root in roots:
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for p in paths:
            found += [f"{p}: {f}" for f in leaks_in(p.read_bytes(), secret)]
    return found


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leader_eval", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        cwd=ROOT,
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
        assert leaks_in((p.stdout + p.stderr).encode(), CANARY) == []
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


def _encoded(text: str) -> list[str]:
    """``text`` in every way a server may send it back: raw, inside a Bearer header, base64 at each
    alignment inside a longer blob (standard and URL-safe), URL-encoded (safe characters kept,
    every byte, twice), JSON-escaped and hex (both cases)."""
    raw = text.encode()
    out = [text, f"Bearer {text}", quote(text, safe=""), quote_plus(text), quote(quote(text, safe=""), safe="")]
    out += ["".join(f"%{b:02x}" for b in raw), "".join(f"%{b:02X}" for b in raw), raw.hex(), raw.hex().upper()]
    out.append(json.dumps(text, ensure_ascii=True)[1:-1])
    for prefix in (b"", b"x", b"xy", b"Authorization: Bearer "):
        out.append(base64.b64encode(prefix + raw + b" trailing").decode())
        out.append(base64.urlsafe_b64encode(b"\xfb\xff" + prefix + raw).decode())
    return out


@pytest.mark.parametrize("case", CASE_FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "secret", [CANARY, "Tok3n-Mixed_Case+/=", "clé-secrète-ÄÖü-42"], ids=["ascii", "mixed", "non-ascii"]
)
def test_every_case_form_of_a_secret_is_redacted_in_every_encoding(secret: str, case) -> None:
    scrub = secrets.Scrubber([secret])
    cased = case(secret)
    for text in _encoded(cased):
        out = scrub.text(f"server said: {text} (end)")
        assert "[redacted]" in out and leaks_in(out.encode(), secret) == [], (text, out)
        assert secrets.contains_secret(f"x {text} y".encode(), [secret]), text


def test_any_mix_of_case_of_the_raw_key_is_redacted() -> None:
    scrub = secrets.Scrubber([CANARY])
    for i in range(len(CANARY)):
        mixed = "".join(c.upper() if (j >> i) % 2 == 0 and j % 3 else c for j, c in enumerate(CANARY))
        assert scrub.text(f"k={mixed};") == "k=[redacted];"


def test_an_upper_cased_key_echoed_by_a_server_is_not_stored(monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", CANARY)

    class Shouting:
        model_id, default_protocol, context_length, special_tokens, max_concurrency = "shout", "json", None, (), 1

        async def sample(self, request: SampleRequest) -> list[Completion]:
            up = CANARY.upper()
            calls = [{"function": {"name": "f", "arguments": json.dumps({"k": up, "b": _encoded(up)[-1]})}}]
            c = Completion(text=f"AUTHORIZATION: BEARER {up}", token_ids=[1], stop_reason="stop", reasoning=up.title())
            c.api_tool_calls = calls
            failed = Completion(text="", token_ids=[], stop_reason=None, error=f"HTTP 401: bad key {quote(up)}")
            return [c, failed]

        def describe(self) -> dict[str, str]:
            return {"model": "shout"}

    import asyncio

    req = SampleRequest(Prompt(text="p", token_ids=None, messages=[]), SamplingParams(), [1, 2])
    done = asyncio.run(guard(Shouting()).sample(req))  # type: ignore[arg-type]
    assert leaks_in(repr(done).encode(), CANARY) == [] and "[redacted]" in done[0].text
    assert "[redacted]" in (done[1].error or "")


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
