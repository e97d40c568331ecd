"""A fleet: one ``openai:`` model served by several servers (``openai:URL,URL#MODEL``).

Requests are spread by in-flight count, and a request whose server fails is retried on another,
so a server killed mid-run loses no sample.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from leader_eval.errors import LeaderEvalError
from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend, backend_from_spec
from tests.support import start_llama_server


def test_fleet_spec_names_the_model_not_a_server() -> None:
    one = backend_from_spec("openai:http://127.0.0.1:1/v1#m", mode="chat")
    fleet = backend_from_spec("openai:http://127.0.0.1:1/v1,http://u:pw@127.0.0.1:2/v1#m", mode="chat")
    assert one.model_id == "openai:http://127.0.0.1:1/v1/m"  # a single server keeps its old identity
    assert fleet.model_id == "openai:fleet/m"
    assert fleet.describe()["base_urls"] == ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    assert "pw" not in repr(fleet.describe())
    for bad in ("http://a:1/v1,http://a:1/v1", "http://a:1/v1,ftp://b/v1", "http://a:1/v1,"):
        with pytest.raises(LeaderEvalError):
            OpenAICompatBackend(bad, "m", mode="chat")
    # userinfo is percent-encoded: each server of a fleet gets its own Basic auth, decoded
    import base64

    b = OpenAICompatBackend("http://127.0.0.1:1/v1,http://user:se%2Ccret@127.0.0.1:2/v1", "m", mode="chat")
    assert "Authorization" not in b._headers(0) or not b._headers(0)["Authorization"].startswith("Basic")
    assert b._headers(1)["Authorization"] == "Basic " + base64.b64encode(b"user:se,cret").decode()
    # a comma inside a password splits the URL: the error never quotes a piece of it
    with pytest.raises(LeaderEvalError, match="write a comma inside a URL as %2C") as err:
        OpenAICompatBackend("http://a:1/v1,http://user:se,cret@b:2/v1", "m", mode="chat")
    assert "cret" not in str(err.value) and "user" not in str(err.value)


def test_the_least_loaded_healthy_server_gets_the_next_request() -> None:
    b = OpenAICompatBackend("http://127.0.0.1:1/v1,http://127.0.0.1:2/v1,http://127.0.0.1:3/v1", "m", mode="chat")
    b._inflight[:] = [2, 0, 1]
    assert b._pick(set()) == 1
    assert b._pick({1}) == 2  # the server that just failed this request is avoided
    b._down_until[2] = float("inf")  # failed recently: avoided while another is up
    assert b._pick({1}) == 0
    assert b._pick({0, 1, 2}) in (0, 1, 2)  # every server failed: still somewhere to go


@pytest.mark.server
def test_two_llama_servers_serve_one_run_and_killing_one_loses_no_sample(mini_suite: Path, tmp_path: Path) -> None:
    pytest.importorskip("uvicorn", reason="needs llama-cpp-python[server]")
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import RunOptions
    from leader_eval.sampling.backends.local import embedded_model_path

    gguf = embedded_model_path()
    with start_llama_server(gguf, n_ctx=2048) as a, start_llama_server(gguf, n_ctx=2048) as b:
        backend = backend_from_spec(
            f"openai:{a.base_url},{b.base_url}#smollm2", mode="completions", gguf_path=str(gguf), retry_base_s=0.05
        )
        done: list[str] = []

        def kill_a_mid_run(sample: object) -> None:
            done.append("x")
            if len(done) == 4:
                a.proc.kill()  # SIGKILL: requests in flight on it die with the connection

        options = RunOptions(
            model="x",
            seed=3,
            samples=8,
            max_tokens=16,
            concurrency=4,
            out=tmp_path / "run",
            progress=False,
            cache=False,
        )
        result = run(mini_suite, options, backend=backend, on_sample=kill_a_mid_run)
        assert not a.alive() and b.alive()
    assert len(result.samples) == 2 * 8
    assert [s.error for s in result.samples if s.error] == []  # nothing lost to the killed server
    assert result.manifest["status"] == "complete"
    assert backend.served[0] >= 1 and backend.served[1] >= 1  # both served the run
    assert sum(backend.served) == 16
