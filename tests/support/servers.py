"""Loopback servers for tests and benchmarks: a real llama.cpp server, a mock, a fault proxy.

Every server runs in its own subprocess (so its CPU never shares the GIL with the client being
measured), listens on 127.0.0.1 only, and is stopped by the handle's context manager (terminate,
then kill) or, as a last resort, at interpreter exit.

Ports. Other processes on a shared machine hold common ports, and a foreign server can answer
``/v1/models`` on a port we thought was ours. The mock and the proxy therefore bind port 0
themselves and report the port they got; the llama.cpp server takes a port found by binding
port 0, and readiness is only declared once ``/proc`` shows *our* process listening on it.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import hashlib
import json
import os
import random
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_LIVE: weakref.WeakSet[ServerHandle] = weakref.WeakSet()


@dataclass(eq=False)
class ServerHandle:
    """A running server subprocess. ``base_url`` ends in ``/v1``; ``url`` is the root."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path | None = None
    kind: str = "server"
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def base_url_for(self, behaviour: str) -> str:
        """The hostile server's base URL for one behaviour (``tests/support/hostile.py``)."""
        return f"{self.url}/{behaviour}/v1"

    def get_json(self, path: str, timeout: float = 5.0) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as resp:
            return json.loads(resp.read())

    def post_json(self, path: str, payload: Any = None, timeout: float = 5.0) -> Any:
        req = urllib.request.Request(
            self.url + path,
            data=json.dumps(payload or {}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict[str, Any]:
        """Counters of the mock (``/stats``) or the proxy (``/proxy-stats``)."""
        return dict(self.get_json("/proxy-stats" if self.kind == "proxy" else "/stats"))

    def reset(self) -> None:
        self.post_json("/proxy-reset" if self.kind == "proxy" else "/reset")

    def log_tail(self, n: int = 4000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-n:]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float = 5.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(grace_s)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self.log_path is not None:  # read log_tail() before stopping if it matters
            self.log_path.unlink(missing_ok=True)
        _LIVE.discard(self)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_leftovers() -> None:
    for handle in list(_LIVE):
        with contextlib.suppress(Exception):
            handle.stop(grace_s=2.0)


def free_port() -> int:
    """A port the kernel had free a moment ago (bind to port 0 on loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pid_listens_on(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds a listening TCP socket on ``port``; None without Linux /proc."""
    inodes: set[str] = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(FileNotFoundError), open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    local, state, inode = cols[1], cols[3], cols[9]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        inodes.add(inode)
        fd_dir = Path(f"/proc/{pid}/fd")
        if not fd_dir.is_dir():
            return None
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return True
    except OSError:
        return None
    return False


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # the child must import this very checkout of leader_eval, installed or not
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# --- the real llama.cpp server ---------------------------------------------------------------

# A llama-cpp-python wheel built with -march=native on an AMX-capable host crashed on every
# multi-token decode inside this project's VMs (general protection fault in libggml-cpu's extra
# buffer types: AMX / repacked weights). Turning the extra buffer types off fixed it; the server
# has no flag for that, so a tiny bootstrap sets the model parameter before running the server.
_LLAMA_BOOTSTRAP = """
import runpy, sys
import llama_cpp.llama_cpp as _b
_orig = _b.llama_model_default_params
def _params():
    p = _orig()
    p.use_extra_bufts = False
    return p
_b.llama_model_default_params = _params
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def start_llama_server(
    gguf_path: str | os.PathLike[str],
    *,
    n_ctx: int = 8192,
    alias: str = "smollm2",
    ready_timeout_s: float = 120.0,
    safe_cpu: bool = True,
    extra_args: tuple[str, ...] = (),
) -> ServerHandle:
    """Start ``python -m llama_cpp.server`` on a free loopback port and wait until it serves.

    Needs ``pip install "llama-cpp-python[server]"``. ``safe_cpu`` disables llama.cpp's extra CPU
    buffer types (see ``_LLAMA_BOOTSTRAP``); set it False on hosts where they work, for speed.
    """
    gguf = Path(gguf_path)
    if not gguf.is_file():
        raise FileNotFoundError(f"no such GGUF: {gguf}")
    last_error = ""
    for _attempt in range(3):  # a lost race for the port is retried on another one
        port = free_port()
        log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        args = [
            "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
            "--model_alias", alias, "--interrupt_requests", "False", *extra_args,
        ]  # fmt: skip
        cmd = [sys.executable, "-c", _LLAMA_BOOTSTRAP, *args] if safe_cpu else [
            sys.executable, "-m", "llama_cpp.server", *args,
        ]  # fmt: skip
        with open(log, "wb") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        handle = ServerHandle(proc, port, log, kind="llama")
        _LIVE.add(handle)
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                last_error = f"llama server exited with status {proc.returncode}: {handle.log_tail(1500)}"
                break
            if _llama_ready(handle, alias):
                return handle
            time.sleep(0.2)
        else:
            last_error = f"llama server not ready after {ready_timeout_s:.0f} s: {handle.log_tail(1500)}"
        handle.stop()
        if "address already in use" not in last_error.lower():
            break
    raise RuntimeError(last_error)


def _llama_ready(handle: ServerHandle, alias: str) -> bool:
    owns = pid_listens_on(handle.proc.pid, handle.port)
    if owns is False:
        return False  # nothing of ours listens yet: whatever answers there is a foreign server
    try:
        models = handle.get_json("/v1/models", timeout=2.0)
    except (OSError, ValueError):
        return False
    ids = {m.get("id") for m in models.get("data", [])}
    return alias in ids and handle.alive()


# --- subprocess servers of this module (mock, proxy) -----------------------------------------


def _spawn(role: str, args: list[str], ready_timeout_s: float = 30.0) -> ServerHandle:
    log = Path(tempfile.mkstemp(prefix=f"leader-eval-{role}-", suffix=".log")[1])
    # run this file by path: the child needs no import path for the test helpers
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), role, *args],
            stdout=subprocess.PIPE,
            stderr=logf,
            stdin=subprocess.DEVNULL,
            env=_child_env(),
        )
    handle = ServerHandle(proc, 0, log, kind=role)
    _LIVE.add(handle)
    assert proc.stdout is not None
    # the child binds port 0 itself and prints "LISTENING <port>": no race for the port
    ready, _, _ = select.select([proc.stdout], [], [], ready_timeout_s)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("LISTENING "):
        message = f"{role} server did not start: {line!r} {handle.log_tail(1500)}"
        handle.stop()
        raise RuntimeError(message)
    handle.port = int(line.split()[1])
    return handle


def start_mock_server(
    latency_ms: float = 200,
    content: str = "hi",
    tool_call: bool = False,
    *,
    context_length: int | None = None,
) -> ServerHandle:
    """A fixed-latency OpenAI-compatible server (aiohttp) in a subprocess.

    ``content`` may contain ``{seed}``, replaced by the request's seed (to check seed order).
    Per request, header ``X-Mock-Latency-Ms`` overrides the latency and ``X-Mock-Status: <code>``
    makes it answer that status with an error body that echoes the request's Authorization
    header (a misbehaving server, for secret-redaction tests). ``/stats``: requests, inflight,
    max_inflight, span_s, cpu_s, authorized (requests that carried an Authorization header).
    """
    args = ["--latency-ms", str(latency_ms), "--content", content]
    if tool_call:
        args.append("--tool-call")
    if context_length:
        args += ["--context-length", str(context_length)]
    return _spawn("mock", args)


def start_hostile_server(*, bomb_mb: int = 9) -> ServerHandle:
    """The hostile OpenAI-compatible server of ``tests/support/hostile.py`` (echoes, bombs, stalls,
    wrong types), one behaviour per path prefix: ``handle.base_url_for("gzip_bomb")``."""
    return _spawn("hostile", ["--bomb-mb", str(bomb_mb)])


DEFAULT_FAULTS: tuple[str, ...] = ("500", "429", "timeout", "drop", "truncate")
ALL_FAULTS: tuple[str, ...] = (*DEFAULT_FAULTS, "short_read")


def start_fault_proxy(
    upstream_url: str,
    *,
    rate: float = 0.2,
    seed: int = 0,
    kinds: tuple[str, ...] | list[str] = DEFAULT_FAULTS,
    retry_after_s: float = 1.0,
    hang_s: float = 30.0,
) -> ServerHandle:
    """A reverse proxy that injects faults into a fraction ``rate`` of requests.

    Kinds: ``500``; ``429`` with ``Retry-After: retry_after_s``; ``timeout`` (hangs ``hang_s``,
    longer than the client's timeout, then answers 504); ``drop`` (closes the connection
    without answering); ``truncate`` (the upstream's body cut in half, framed correctly, so the
    client gets invalid JSON); ``short_read`` (declares the full length, sends half, closes).
    ``/proxy-stats``: requests, forwarded, injected per kind, and ``retry_after_gaps``: for every
    request that got a 429, seconds until the same request body arrived again (the client's
    measured wait). ``upstream_url`` may be a root or a ``.../v1`` base URL.
    """
    bad = set(kinds) - set(ALL_FAULTS)
    if bad:
        raise ValueError(f"unknown fault kinds {sorted(bad)}; known: {ALL_FAULTS}")
    root = upstream_url.rstrip("/")
    root = root.removesuffix("/v1")
    args = [
        "--upstream", root, "--rate", str(rate), "--seed", str(seed), "--kinds", ",".join(kinds),
        "--retry-after", str(retry_after_s), "--hang-s", str(hang_s),
    ]  # fmt: skip
    return _spawn("proxy", args)


# --- child side ------------------------------------------------------------------------------


def _child_main() -> None:
    parser = argparse.ArgumentParser(prog="tests/support/servers.py")
    sub = parser.add_subparsers(dest="role", required=True)
    m = sub.add_parser("mock")
    m.add_argument("--latency-ms", type=float, default=200.0)
    m.add_argument("--content", default="hi")
    m.add_argument("--tool-call", action="store_true")
    m.add_argument("--context-length", type=int, default=None)
    p = sub.add_parser("proxy")
    p.add_argument("--upstream", required=True)
    p.add_argument("--rate", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kinds", default=",".join(DEFAULT_FAULTS))
    p.add_argument("--retry-after", type=float, default=1.0)
    p.add_argument("--hang-s", type=float, default=30.0)
    h = sub.add_parser("hostile")
    h.add_argument("--bomb-mb", type=int, default=9)
    ns = parser.parse_args()
    if ns.role == "hostile":
        from hostile import hostile_app  # this file runs as a script: its folder is sys.path[0]

        app = hostile_app(ns)
    else:
        app = _mock_app(ns) if ns.role == "mock" else _proxy_app(ns)
    asyncio.run(_serve(app))


async def _serve(app: Any) -> None:
    from aiohttp import web

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    # a stop must not wait for injected hangs to finish
    site = web.SockSite(runner, sock, backlog=1024, shutdown_timeout=0.5)
    await site.start()
    sys.stdout.write(f"LISTENING {sock.getsockname()[1]}\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def _mock_app(ns: argparse.Namespace) -> Any:
    from aiohttp import web

    latency = ns.latency_ms / 1000.0
    content: str = ns.content
    st: dict[str, Any] = {}

    def reset() -> None:
        st.update(requests=0, inflight=0, max_inflight=0, first_start=None, last_end=None, authorized=0)

    reset()

    def usage() -> dict[str, int]:
        return {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}

    async def handle(request: web.Request, chat: bool) -> web.Response:
        body = await request.json()
        if st["first_start"] is None:
            st["first_start"] = time.time()
        st["requests"] += 1
        st["inflight"] += 1
        st["max_inflight"] = max(st["max_inflight"], st["inflight"])
        if "Authorization" in request.headers:
            st["authorized"] += 1
        try:
            hdr = request.headers.get("X-Mock-Latency-Ms")
            delay = float(hdr) / 1000.0 if hdr is not None else latency
            if delay > 0:
                await asyncio.sleep(delay)
            status = request.headers.get("X-Mock-Status")
            if status:
                echoed = request.headers.get("Authorization", "")
                err = {"error": {"message": f"mock failure; you sent Authorization: {echoed}"}}
                return web.json_response(err, status=int(status))
            text = content.replace("{seed}", str(body.get("seed")))
            rid = st["requests"]
            if not chat:
                choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}
                return web.json_response(
                    {"id": f"cmpl-{rid}", "object": "text_completion", "created": int(time.time()),
                     "model": body.get("model", "mock"), "choices": [choice], "usage": usage()}
                )  # fmt: skip
            message: dict[str, Any] = {"role": "assistant", "content": text}
            finish = "stop"
            if ns.tool_call:
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{
                        "id": f"call_{rid}", "type": "function",
                        "function": {"name": "send_message_to_chat", "arguments": json.dumps({"message": text})},
                    }],
                }  # fmt: skip
                finish = "tool_calls"
            return web.json_response(
                {"id": f"chatcmpl-{rid}", "object": "chat.completion", "created": int(time.time()),
                 "model": body.get("model", "mock"),
                 "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                 "usage": usage()}
            )  # fmt: skip
        finally:
            st["inflight"] -= 1
            st["last_end"] = time.time()

    async def completions(request: web.Request) -> web.Response:
        return await handle(request, chat=False)

    async def chat(request: web.Request) -> web.Response:
        return await handle(request, chat=True)

    async def models(request: web.Request) -> web.Response:
        item: dict[str, Any] = {"id": "mock", "object": "model", "owned_by": "leader-eval"}
        if ns.context_length:
            item["max_model_len"] = ns.context_length  # the vLLM field
        return web.json_response({"object": "list", "data": [item]})

    async def stats(request: web.Request) -> web.Response:
        out = dict(st)
        span = None
        if st["first_start"] is not None and st["last_end"] is not None:
            span = round(st["last_end"] - st["first_start"], 4)
        t = os.times()
        out.update(span_s=span, cpu_s=round(t.user + t.system, 3))
        return web.json_response(out)

    async def do_reset(request: web.Request) -> web.Response:
        reset()
        return web.json_response({"ok": True})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", do_reset)
    return app


_HOP_BY_HOP = frozenset(
    h.lower()
    for h in ("Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE", "Trailers",
              "Transfer-Encoding", "Upgrade", "Host", "Content-Length")
)  # fmt: skip


def _proxy_app(ns: argparse.Namespace) -> Any:
    import aiohttp
    from aiohttp import web

    kinds = [k for k in ns.kinds.split(",") if k]
    rng = random.Random(ns.seed)
    st: dict[str, Any] = {}
    pending_429: dict[str, float] = {}  # body digest -> when the 429 went out
    session: list[aiohttp.ClientSession] = []

    def reset() -> None:
        st.update(requests=0, forwarded=0, injected=dict.fromkeys(kinds, 0), retry_after_gaps=[])
        pending_429.clear()

    reset()

    async def forward(request: web.Request, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if not session:
            session.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with session[0].request(
            request.method, ns.upstream + request.rel_url.path_qs, data=body, headers=headers
        ) as resp:
            data = await resp.read()
            st["forwarded"] += 1
            out_headers = {"Content-Type": resp.headers.get("Content-Type", "application/json")}
            return resp.status, out_headers, data

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        now = time.time()
        st["requests"] += 1
        digest = hashlib.blake2b(request.rel_url.path_qs.encode() + body, digest_size=16).hexdigest()
        sent_429 = pending_429.pop(digest, None)
        if sent_429 is not None:
            st["retry_after_gaps"].append(round(now - sent_429, 4))
        kind = rng.choice(kinds) if kinds and rng.random() < ns.rate else None
        if kind is not None:
            st["injected"][kind] += 1
        if kind == "500":
            return web.json_response({"error": {"message": "injected fault"}}, status=500)
        if kind == "429":
            pending_429[digest] = time.time()
            return web.json_response(
                {"error": {"message": "injected rate limit"}},
                status=429,
                headers={"Retry-After": f"{ns.retry_after:g}"},
            )
        if kind == "timeout":
            await asyncio.sleep(ns.hang_s)
            return web.json_response({"error": {"message": "injected hang"}}, status=504)
        if kind == "drop":
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # aiohttp treats it as a closed connection: nothing is sent
        status, headers, data = await forward(request, body)
        if kind == "truncate":
            return web.Response(status=status, body=data[: len(data) // 2], headers=headers)
        if kind == "short_read":
            resp = web.StreamResponse(status=status, headers={**headers, "Content-Length": str(len(data))})
            await resp.prepare(request)
            await resp.write(data[: len(data) // 2])
            if request.transport is not None:
                request.transport.abort()
            return resp
        return web.Response(status=status, body=data, headers=headers)

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(st)

    async def do_reset(request: web.Request) -> web.Response:
        reset()
        return web.json_response({"ok": True})

    async def on_cleanup(app: web.Application) -> None:
        for s in session:
            await s.close()

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/proxy-stats", stats)
    app.router.add_post("/proxy-reset", do_reset)
    app.router.add_route("*", "/{tail:.*}", handle)
    app.on_cleanup.append(on_cleanup)
    return app


if __name__ == "__main__":
    _child_main()
