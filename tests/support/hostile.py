"""A hostile OpenAI-compatible server for tests: it echoes credentials and breaks every promise.

The behaviour is chosen by the first path segment, so one server serves every case of a module:
``start_hostile_server().base_url_for("gzip_bomb")`` is ``http://127.0.0.1:PORT/gzip_bomb/v1``.
Both ``/completions`` and ``/chat/completions`` answer; ``/models`` lists model ``hostile``.

Behaviours (``BEHAVIOURS``):

* ``echo``: a well-formed reply whose content, reasoning and tool-call arguments (nested) echo the
  request's ``Authorization`` header raw, its token base64-encoded, the whole header
  base64-encoded and URL-encoded, each also upper-, lower- and swap-cased (completions mode: the
  same inside a JSON tool call).
* ``echo_error``: HTTP 500 whose error message echoes the header the same ways.
* ``gzip_bomb``: ``Content-Encoding: gzip``, ``BOMB_MB`` MB on the wire, ~1000x that decompressed.
* ``endless``: a chunked body that never ends (64 KiB chunks as fast as the client reads).
* ``slowloris``: headers at once, then one byte of body every 0.5 s, forever.
* ``stall``: reads the request and never answers.
* ``redirect``: 307 to ``/echo/v1/...`` (a client that follows it sends its key there again).
* wrong shapes, each a 200 with a JSON (or not) body: ``content_int``, ``content_dict``,
  ``text_list``, ``null_choices``, ``choices_string``, ``choices_empty``, ``choice_not_object``,
  ``message_string``, ``tool_calls_string``, ``tool_call_arguments_int``, ``reasoning_list``,
  ``finish_reason_int``, ``usage_huge``, ``usage_negative``, ``usage_string``, ``number_overflow``,
  ``invalid_utf8``, ``lone_surrogate``, ``top_level_list``, ``not_json``, ``deep_nesting``,
  ``logprobs_garbage``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
import zlib
from typing import Any
from urllib.parse import quote

#: megabytes of gzip on the wire for ``gzip_bomb`` (each inflates to ~1 GB... per MB: ~1000x)
BOMB_MB = 9

WRONG_SHAPES: dict[str, Any] = {
    "content_int": {"choices": [{"message": {"role": "assistant", "content": 42}, "text": 42}]},
    "content_dict": {"choices": [{"message": {"content": {"a": 1}}, "text": {"a": 1}}]},
    "text_list": {"choices": [{"message": {"content": ["x", 1]}, "text": ["x", 1]}]},
    "null_choices": {"choices": None},
    "choices_string": {"choices": "hello"},
    "choices_empty": {"choices": []},
    "choice_not_object": {"choices": [7]},
    "message_string": {"choices": [{"message": "hi", "text": "hi", "finish_reason": "stop", "logprobs": "x"}]},
    "tool_calls_string": {"choices": [{"message": {"content": "", "tool_calls": "call it"}, "text": ""}]},
    "tool_call_arguments_int": {
        "choices": [{"message": {"content": None, "tool_calls": [{"function": {"name": 5, "arguments": 7}}]}}]
    },
    "reasoning_list": {"choices": [{"message": {"content": "ok", "reasoning_content": [1, 2]}, "text": "ok"}]},
    "finish_reason_int": {"choices": [{"message": {"content": "ok"}, "text": "ok", "finish_reason": 3}]},
    "usage_huge": {
        "choices": [{"message": {"content": "ok"}, "text": "ok"}],
        "usage": {"prompt_tokens": 10**30, "completion_tokens": 1},
    },
    "usage_negative": {
        "choices": [{"message": {"content": "ok"}, "text": "ok"}],
        "usage": {"prompt_tokens": -5, "completion_tokens": 1},
    },
    "usage_string": {"choices": [{"message": {"content": "ok"}, "text": "ok"}], "usage": "many"},
    "top_level_list": [{"choices": [{"text": "ok"}]}],
    "logprobs_garbage": {
        "choices": [{"message": {"content": "ok"}, "text": "ok", "logprobs": {"token_logprobs": ["a"], "content": 5}}]
    },
}
#: bodies that are not what ``json.dumps`` of anything writes
RAW_BODIES: dict[str, bytes] = {
    "number_overflow": b'{"choices": [{"message": {"content": "ok"}, "text": "ok"}], "usage": {"prompt_tokens": 1e999}}',
    "invalid_utf8": b'{"choices": [{"message": {"content": "ok \xff\xfe bad"}, "text": "ok \xff\xfe bad"}]}',
    "lone_surrogate": b'{"choices": [{"message": {"content": "ok \\ud800 bad"}, "text": "ok \\ud800 bad"}]}',
    "not_json": b"<html>502 Bad Gateway</html>",
    "deep_nesting": b'{"choices": [{"message": {"content": "ok"}, "text": "ok", "x": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}]}",
}
STREAMING = ("gzip_bomb", "endless", "slowloris", "stall", "redirect")
BEHAVIOURS: tuple[str, ...] = ("echo", "echo_error", *STREAMING, *WRONG_SHAPES, *RAW_BODIES)


def echoes(authorization: str) -> str:
    """Every form of the header the server sends back, also upper- and lower-cased and swapped
    (a proxy that normalises a header's case)."""
    out = []
    for header in (authorization, authorization.upper(), authorization.lower(), authorization.swapcase()):
        token = header.split(" ", 1)[-1]
        out += [
            header,
            base64.b64encode(token.encode()).decode(),
            base64.b64encode(f"Authorization: {header}".encode()).decode(),
            quote(header, safe=""),
        ]
    return " | ".join(out)


def _bomb(mb: int) -> bytes:
    """A gzip stream of ``mb`` MB that inflates ~1000-fold, built without compressing gigabytes.

    After ``Z_FULL_FLUSH`` the compressor forgets its history, so the bytes for the next MiB of
    zeros are the same every time: one unit, repeated. The trailer's CRC is not that of the
    whole (computing it would mean hashing gigabytes); a client that inflates it all finds out
    only at the end, after paying the memory.
    """
    zeros = bytes(1 << 20)
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    unit = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.flush(zlib.Z_FINISH)
    return head + unit * max(1, (mb << 20) // len(unit)) + tail


def hostile_app(ns: argparse.Namespace) -> Any:
    from aiohttp import web

    bomb = _bomb(ns.bomb_mb)
    st: dict[str, Any] = {"requests": {}}

    def reply(chat: bool, text: str, reasoning: str | None = None, args: Any = None) -> dict[str, Any]:
        if not chat:
            return {"choices": [{"index": 0, "text": text, "finish_reason": "stop"}], "usage": {}}
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if args is not None:
            message["tool_calls"] = [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "send_message_to_chat", "arguments": json.dumps(args)},
                }
            ]
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": {}}

    async def handle(request: web.Request) -> web.StreamResponse:
        behaviour = request.match_info["behaviour"]
        chat = request.match_info["endpoint"] == "chat/completions"
        await request.read()
        st["requests"][behaviour] = st["requests"].get(behaviour, 0) + 1
        auth = request.headers.get("Authorization", "")
        if behaviour == "echo":
            e = echoes(auth)
            args = {"message": f"key {e}", "nested": {"deep": [e, {"deeper": e}]}}
            text = json.dumps({"tool": "send_message_to_chat", "arguments": {"message": f"key {e}"}})
            return web.json_response(reply(chat, text if not chat else f"you sent {e}", f"thinking {e}", args))
        if behaviour == "echo_error":
            return web.json_response({"error": {"message": f"denied; you sent {echoes(auth)}"}}, status=500)
        if behaviour == "gzip_bomb":
            headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
            return web.Response(body=bomb, headers=headers)
        if behaviour in ("endless", "slowloris"):
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            await resp.write(b'{"choices": [{"text": "')
            chunk = b"a" * 65536
            while True:
                if behaviour == "endless":
                    await resp.write(chunk)
                else:
                    await asyncio.sleep(0.5)
                    await resp.write(b"a")
        if behaviour == "stall":
            await asyncio.sleep(3600)
        if behaviour == "redirect":
            target = f"/echo/v1/{request.match_info['endpoint']}"
            return web.Response(status=307, headers={"Location": target})
        if behaviour in RAW_BODIES:
            return web.Response(body=RAW_BODIES[behaviour], content_type="application/json")
        if behaviour in WRONG_SHAPES:
            return web.Response(body=json.dumps(WRONG_SHAPES[behaviour]).encode(), content_type="application/json")
        return web.json_response({"error": {"message": f"unknown behaviour {behaviour}"}}, status=404)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "hostile", "object": "model"}]})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({**st, "time": time.time()})

    app = web.Application(client_max_size=1 << 20)
    app.router.add_get("/stats", stats)
    app.router.add_get("/{behaviour}/v1/models", models)
    app.router.add_post("/{behaviour}/v1/{endpoint:(chat/)?completions}", handle)
    return app
