"""A hostile OpenAI-compatible server costs one error sample, never memory, time or the run.

Every behaviour of ``tests/support/hostile.py`` is served on loopback: gzip bombs, endless and
trickling bodies, stalls, and replies of the wrong type. Memory is measured in a subprocess (its
peak RSS before and after the request) under an address-space limit, so a regression fails the
test instead of exhausting the machine.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from leader_eval.cli.app import main
from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Completion, SampleRequest, SamplingParams, guard
from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend
from leader_eval.store.run_store import RunDir
from tests.support import start_hostile_server
from tests.support.hostile import RAW_BODIES, WRONG_SHAPES

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
MESSAGES = [{"role": "user", "content": "Say hi."}]


@pytest.fixture(scope="module")
def hostile():
    with start_hostile_server(bomb_mb=9) as srv:
        yield srv


def sample(url: str, mode: str = "chat", **options: Any) -> Completion:
    options.setdefault("retry_base_s", 0.01)
    backend = guard(
        OpenAICompatBackend(url, "hostile", mode=mode, chat_template=TEMPLATE, context_length=4096, **options)  # type: ignore[arg-type]
    )
    prompt = backend.apply_chat_template(MESSAGES, None)

    async def go() -> list[Completion]:
        try:
            return await backend.sample(SampleRequest(prompt, SamplingParams(max_tokens=8), [7]))
        finally:
            await backend.aclose()

    [c] = asyncio.run(go())
    return c


# --- wrong types ----------------------------------------------------------------------------------

#: the reason each malformed reply must be reported with
REASONS = {
    "content_int": "content is a number, not a string",
    "content_dict": "content is an object, not a string",
    "text_list": "is a list, not a string",
    "null_choices": "response without choices",
    "choices_string": "choices is a string, not a list",
    "choices_empty": "response without choices",
    "choice_not_object": "choices[0] is a number, not an object",
    "message_string": "message is a string, not an object",
    "tool_calls_string": "tool_calls is a string, not a list",
    "tool_call_arguments_int": "function.name is a number, not a string",
    "reasoning_list": "reasoning_content is a list, not a string",
    "finish_reason_int": "finish_reason is a number, not a string",
    "usage_huge": "usage.prompt_tokens is 1e+30, not a token count",
    "usage_negative": "usage.prompt_tokens is -5, not a token count",
    "usage_string": "usage is a string, not an object",
    "top_level_list": "the body is a list, not an object",
    "logprobs_garbage": "choices[0].logprobs",
    "number_overflow": "invalid JSON body",
    "invalid_utf8": "not valid UTF-8 (byte ",
    "lone_surrogate": "invalid JSON body",
    "not_json": "invalid JSON body",
    "deep_nesting": "invalid JSON body",
}


def test_every_wrong_shape_has_a_reason() -> None:
    assert set(REASONS) == set(WRONG_SHAPES) | set(RAW_BODIES)


@pytest.mark.parametrize("behaviour", sorted(REASONS))
def test_a_reply_of_the_wrong_type_is_a_one_line_sample_error(hostile, behaviour: str) -> None:
    c = sample(hostile.base_url_for(behaviour), max_retries=1, logprobs=True)
    assert c.error is not None and REASONS[behaviour] in c.error, c.error
    assert "\n" not in c.error and len(c.error) <= 500
    assert (c.text, c.api_tool_calls, c.reasoning, c.stop_reason) == ("", None, None, None)


@pytest.mark.parametrize("behaviour", ["content_int", "text_list", "choices_string", "usage_huge", "invalid_utf8"])
def test_completions_mode_rejects_the_same_shapes(hostile, behaviour: str) -> None:
    c = sample(hostile.base_url_for(behaviour), mode="completions", max_retries=0)
    assert c.error is not None and c.text == "", c.error


def test_a_run_against_a_wrong_type_server_resumes_shows_and_replays(hostile, mini_suite: Path, tmp_path: Path) -> None:
    spec = f"openai:{hostile.base_url_for('content_int')}#hostile"
    opts = {"mode": "chat", "max_retries": 0}
    out = tmp_path / "run"
    first = run(mini_suite, RunOptions(model=spec, seed=5, out=out, progress=False, backend_options=opts))
    assert [s.outcome for s in first.samples] == ["error"] * 4
    assert all("content is a number" in (s.error or "") for s in first.samples)
    assert all(isinstance(s.text, str) for s in RunDir(out).read_samples())
    # resume (the same command into the same directory) and replay read those records back
    again = run(mini_suite, RunOptions(model=spec, seed=5, out=out, progress=False, backend_options=opts))
    assert again.stats is not None and again.stats.reused == 4 and again.stats.sampled == 0
    replayed = run(mini_suite, RunOptions(model=f"replay:{out}", out=tmp_path / "replay", progress=False))
    assert [s.outcome for s in replayed.samples] == ["error"] * 4
    assert main(["show", str(out)]) == 0


def test_a_poisoned_record_of_an_older_version_is_reported_not_a_crash(
    hostile, mini_suite: Path, tmp_path: Path, capsys, caplog
) -> None:
    """Before the boundary guard, a server's ``content: 42`` was recorded as ``"text": 42``; a
    replay of such a run names the record or replays it as an error, never an AttributeError."""
    spec = f"openai:{hostile.base_url_for('echo')}#hostile"
    out = tmp_path / "run"
    run(mini_suite, RunOptions(model=spec, seed=6, out=out, progress=False, backend_options={"mode": "chat"}))
    poisoned = tmp_path / "poisoned"
    poisoned.mkdir()
    for f in out.iterdir():
        if f.is_file():
            (poisoned / f.name).write_bytes(f.read_bytes())
    recs = [json.loads(line) for line in (poisoned / "samples.jsonl").read_text().splitlines()]
    recs[0]["text"] = 42
    (poisoned / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    status = main(["run", str(mini_suite), "--model", f"replay:{poisoned}", "--out", str(tmp_path / "replay"), "-q"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "AttributeError" not in err, err
    if status == 2:  # the store refused the record: it is named, file and line
        assert "samples.jsonl:1" in err + caplog.text
    else:  # the record was served: the guard made it that sample's error, and the error rule fails the run
        assert status == 1 and "1 of 4 samples errored" in err, err
        bad = [s for s in RunDir(tmp_path / "replay").read_samples() if s.outcome == "error"]
        assert len(bad) == 1 and "text is a int, not a string" in (bad[0].error or "")


# --- memory and time --------------------------------------------------------------------------------

#: sample once in a fresh interpreter under a 2 GiB address-space limit; report peak RSS around it
PROBE = r"""
import asyncio, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from leader_eval.sampling.backends.base import SampleRequest, SamplingParams, guard
from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend

async def go():
    b = guard(OpenAICompatBackend(sys.argv[1], "hostile", mode="chat", context_length=4096, retry_base_s=0.01,
                                  **json.loads(sys.argv[2])))
    p = b.apply_chat_template([{"role": "user", "content": "hi"}], None)
    try:
        return await b.sample(SampleRequest(p, SamplingParams(max_tokens=8), [1]))
    finally:
        await b.aclose()

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    error = asyncio.run(go())[0].error
except MemoryError:
    error = "MemoryError"
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"error": error, "growth_kb": after - before}))
"""


def probe(url: str, **options: Any) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, url, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("behaviour", ["gzip_bomb", "endless"])
def test_an_oversized_body_is_an_error_and_memory_stays_bounded(hostile, behaviour: str) -> None:
    result = probe(hostile.base_url_for(behaviour))  # the default cap: 8 MiB
    assert result["error"] == "response body over 8388608 bytes (max_response_bytes)", result
    assert result["growth_kb"] < 64 * 1024, result  # a few copies of the 8 MiB cap, not gigabytes


def test_a_redirect_is_an_error_and_is_not_followed(hostile) -> None:
    before = hostile.stats()["requests"].get("echo", 0)
    c = sample(hostile.base_url_for("redirect"), max_retries=2)
    assert c.error is not None and c.error.startswith("HTTP 307"), c.error
    assert hostile.stats()["requests"].get("echo", 0) == before  # the key was never sent to the target


def test_the_body_cap_is_configurable(hostile) -> None:
    c = sample(hostile.base_url_for("echo"), max_response_bytes=100)
    assert c.error == "response body over 100 bytes (max_response_bytes)"


@pytest.mark.parametrize("behaviour", ["slowloris", "stall"])
def test_a_trickling_or_stalled_server_is_cut_by_the_sample_deadline(hostile, behaviour: str) -> None:
    before = hostile.stats()["requests"].get(behaviour, 0)
    result = probe(hostile.base_url_for(behaviour), timeout_s=1.0)  # default retries: 5
    assert result["error"].startswith("timeout after "), result
    assert "sample deadline of 3 s reached" in result["error"], result
    # three attempts fit the 3 s deadline; without it there were max_retries + 1 = 6
    assert hostile.stats()["requests"].get(behaviour, 0) - before <= 3


def test_cli_flags_reach_the_backend_and_bad_values_exit_2(hostile, mini_suite: Path, tmp_path: Path, capsys) -> None:
    model = f"openai:{hostile.base_url_for('echo')}#hostile"
    out = tmp_path / "run"
    argv = ["run", str(mini_suite), "--model", model, "--api-mode", "chat", "--out", str(out), "--seed", "1", "-q"]
    main([*argv, "--request-timeout", "7.5", "--max-response-bytes", "100"])
    manifest = RunDir(out).read_manifest()
    assert (manifest["model"]["timeout_s"], manifest["model"]["max_response_bytes"]) == (7.5, 100)
    assert manifest["model"]["deadline_s"] == 22.5
    assert all("over 100 bytes" in (s.error or "") for s in RunDir(out).read_samples())
    for flag, value in (("--request-timeout", "0"), ("--request-timeout", "nan"), ("--max-response-bytes", "-1")):
        with pytest.raises(SystemExit) as info:
            main([*argv, flag, value])
        assert info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
