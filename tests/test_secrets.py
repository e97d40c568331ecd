"""An API key never reaches a run directory, the sample cache, a golden file, a log or an error."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from leader_eval.backends.openai_compat import backend_from_spec
from leader_eval.evaluate import run
from leader_eval.golden import update_golden
from leader_eval.runner import RunOptions
from tests.support.servers import start_mock_server

CANARY = "sk-canary-7f3a9c1e5d"


@pytest.fixture(scope="module")
def mock_server():
    with start_mock_server(
        latency_ms=5, content='{"tool": "send_message_to_chat", "arguments": {"message": "hi"}}'
    ) as srv:
        yield srv


def _files_holding(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.parametrize("failing", [False, True], ids=["ok", "server-echoes-key-in-errors"])
def test_canary_key_appears_nowhere(
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
        upd = update_golden(result, golden_dir, label="mock")
        assert upd.written, upd.reason
        assert _files_holding(golden_dir, CANARY) == []
    assert _files_holding(out, CANARY) == []
    assert _files_holding(cache_dir, CANARY) == [] if cache_dir.exists() else True
    captured = capsys.readouterr()
    assert CANARY not in captured.out + captured.err
    assert CANARY not in caplog.text
    assert mock_server.stats()["authorized"] > 0  # the key was really sent
