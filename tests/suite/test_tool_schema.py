"""Every JSON Schema a suite carries goes through one loader (leader_eval.suite.tool_schema).

The schema-bearing keys are not listed here: they are found by walking the suite's own JSON
Schema (every key whose value ``$ref``s ``#/$defs/json_schema``), so a key added later is
attacked here as soon as it exists. For each key and each class of hostile ``$ref`` (URLs,
``file:``, paths out of the root, relative refs to nothing, ``$id``/``$schema`` tricks, refs
hidden where the metaschema does not look), three ways in must refuse the suite before anything
is fetched, read or sampled, with one ``FILE:LINE`` line naming the ``$ref``:

- ``leader-eval lint`` (exit 2),
- pytest collection of the suite file (the plugin's collect error),
- a run (``evaluate.run`` with a counting backend: nothing sampled, no run directory).

A loopback HTTP server logs every request (none may arrive), and an audit hook logs every file
opened outside the suite root (none may be).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from leader_eval.errors import SuiteError
from leader_eval.sampling.backends.base import Completion, SampleRequest
from leader_eval.types import Prompt

ROOT = Path(__file__).resolve().parents[2]
MARKER = "#/$defs/json_schema"

# --------------------------------------------------------------------------- the keys, from the suite schema


def suite_schema() -> dict[str, Any]:
    return json.loads(resources.files("leader_eval.suite.schema").joinpath("suite.schema.json").read_text())


def _resolve(schema: dict[str, Any], ref: str) -> Any:
    node: Any = schema
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def schema_keys() -> dict[str, set[str]]:
    """Where a suite (or a fixture file) holds a JSON Schema: instance path templates ('*': any
    list index), found by walking suite.schema.json from its root and from ``$defs/fixture``
    (the items of a fixture file, world._load_file), following its ``$ref``s."""
    schema = suite_schema()
    found: dict[str, set[str]] = {"suite": set(), "fixture_file": set()}

    def walk(node: Any, path: tuple[str, ...], out: set[str], seen: frozenset[str]) -> None:
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if ref == MARKER:
            out.add("/".join(path))
            return
        if isinstance(ref, str) and ref not in seen:
            walk(_resolve(schema, ref), path, out, seen | {ref})
        for name, sub in node.get("properties", {}).items():
            walk(sub, (*path, name), out, seen)
        for kw in ("items", "additionalProperties"):
            walk(node.get(kw), (*path, "*"), out, seen)
        for kw in ("oneOf", "anyOf", "allOf"):
            for sub in node.get(kw, []):
                walk(sub, path, out, seen)

    walk(schema, (), found["suite"], frozenset())
    walk({"type": "array", "items": {"$ref": "#/$defs/fixture"}}, (), found["fixture_file"], frozenset())
    return found


def test_every_key_that_holds_a_json_schema_is_marked_for_the_loader() -> None:
    """A key described as a JSON Schema (or named like one) must carry the marker the loader's
    test walks for; otherwise a new schema key could bypass both."""
    schema = suite_schema()
    unmarked = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                if not isinstance(sub, dict) or name == "$schema":
                    continue
                looks = "schema" in name.lower() or "json schema" in sub.get("description", "").lower()
                if looks and sub.get("$ref") != MARKER:
                    unmarked.append(f"{where}/properties/{name}")
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}/{i}")

    walk(schema, "#")
    assert unmarked == []
    keys = schema_keys()
    # today's keys, so that a walk that finds nothing cannot pass; a new key only adds to these
    assert {"tools/*/parameters", "tools/*/returns", "fixtures/*/match_schema"} <= keys["suite"]
    assert "cases/*/episode/fixtures/*/match_schema" in keys["suite"]
    assert keys["fixture_file"] == {"*/match_schema"}


# --------------------------------------------------------------------------- a suite holding every key


def base_suite() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An episode suite and its fixture file with a benign schema at every schema-bearing key."""
    suite = {
        "name": "schemas",
        "protocol": "json",
        "sampling": {"temperature": 0.0, "max_tokens": 16, "samples": 1},
        "scaffold": {
            "messages": [
                {"role": "system", "content": "Reply with one JSON tool call. Tools: {{ tools_json }}"},
                {"role": "user", "content": "Goal: {{ goal }}"},
            ]
        },
        "tools": [
            {
                "name": "lookup",
                "parameters": {"type": "object", "properties": {"topic": {"type": "string"}}},
                "returns": {"type": "object", "properties": {"answer": {"type": "string"}}},
            },
            {
                "name": "send",
                "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
                "returns": {"type": "object"},
            },
        ],
        "fixtures": [
            {"tool": "lookup", "match_schema": {"type": "object"}, "result": {"answer": "suite"}},
            {"file": "fixtures.yaml"},
        ],
        "episode": {"max_steps": 2},
        "cases": [
            {
                "id": "c",
                "vars": {"goal": "say hi"},
                "episode": {
                    "goal": {"tool": "send"},
                    "fixtures": [{"tool": "lookup", "match_schema": {"type": "object"}, "result": {"answer": "case"}}],
                },
            }
        ],
    }
    fixture_file = [{"tool": "lookup", "match_schema": {"type": "object"}, "result": {"answer": "file"}}]
    return suite, fixture_file


def _places(data: Any, template: str) -> list[tuple[Any, ...]]:
    """Concrete paths in ``data`` that match ``template``."""
    out: list[tuple[Any, ...]] = [()]
    for part in template.split("/"):
        nxt = []
        for p in out:
            node = _get(data, p)
            if part == "*" and isinstance(node, list):
                nxt.extend((*p, i) for i, v in enumerate(node) if isinstance(v, dict))
            elif isinstance(node, dict) and part in node:
                nxt.append((*p, part))
        out = nxt
    return out


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        data = data[p]
    return data


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(data, path[:-1])[path[-1]] = value


def locations() -> list[tuple[str, str, tuple[Any, ...]]]:
    """(file, template, first concrete path) for every schema-bearing key; the base suite must hold each."""
    suite, fixture_file = base_suite()
    keys = schema_keys()
    out = []
    for file, data in (("suite", suite), ("fixture_file", fixture_file)):
        for template in sorted(keys[file]):
            places = _places(data, template)
            assert places, f"base_suite() holds no {template} in the {file}: add one so the loader is tested there"
            out.append((file, template, places[0]))
    return out


def test_the_base_suite_loads_and_holds_every_key(tmp_path: Path) -> None:
    from leader_eval.suite.load import load_suite

    assert len(locations()) >= 5
    suite = load_suite(Layout.write(tmp_path / "ok", None, None).suite)
    assert [c.id for c in suite.cases] == ["c"]


# --------------------------------------------------------------------------- the hostile references


@dataclass(frozen=True)
class Env:
    port: int
    outside: Path  # a folder outside every suite root, holding secret.json


@dataclass(frozen=True)
class Attack:
    """A hostile schema and the text on the line the error must name (in the suite, or in ``in_file``)."""

    schema: dict[str, Any]
    marker: str
    in_file: str | None = None  # a file inside the root the schema references, where the error points
    files: dict[str, Any] | None = None  # files to write inside the suite root


def _wrap(inner: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": inner}}


def _attacks(env: Env) -> dict[str, Attack]:
    url = f"http://127.0.0.1:{env.port}"
    secret = env.outside / "secret.json"
    return {
        "url": Attack(_wrap({"$ref": f"{url}/url.json"}), f"{url}/url.json"),
        "url_upper_scheme": Attack(_wrap({"$ref": f"HTTP://127.0.0.1:{env.port}/upper.json"}), "/upper.json"),
        "url_with_pointer": Attack(_wrap({"$ref": f"{url}/p.json#/$defs/a"}), "/p.json#"),
        "protocol_relative": Attack(_wrap({"$ref": f"//127.0.0.1:{env.port}/pr.json"}), "/pr.json"),
        "file_url": Attack(_wrap({"$ref": f"file://{secret}"}), f"file://{secret}"),
        "file_url_localhost": Attack(_wrap({"$ref": f"file://localhost{secret}"}), "file://localhost"),
        "urn": Attack(_wrap({"$ref": "urn:leader-eval:x"}), "urn:leader-eval:x"),
        "absolute_path": Attack(_wrap({"$ref": f"{secret}#/x"}), f"{secret}#/x"),
        "traversal": Attack(_wrap({"$ref": "../outside/secret.json"}), "../outside/secret.json"),
        "encoded_traversal": Attack(_wrap({"$ref": "%2e%2e/outside/secret.json"}), "%2e%2e/outside"),
        "relative_missing_file": Attack(_wrap({"$ref": "missing.json#/$defs/a"}), "missing.json#"),
        "relative_missing_pointer": Attack(_wrap({"$ref": "#/$defs/missing"}), "#/$defs/missing"),
        "relative_query": Attack(_wrap({"$ref": "?tool=send"}), "?tool=send"),
        "id_moves_the_base": Attack({"$id": f"{url}/base/", "properties": {"x": {"$ref": "rel.json"}}}, f"{url}/base/"),
        "other_dialect": Attack(
            {"$schema": "http://json-schema.org/draft-04/schema#", "id": f"{url}/d4/"},
            "draft-04",
        ),
        "property_named_like_data": Attack(
            {"properties": {"enum": {"$ref": f"{url}/named.json"}}}, f"{url}/named.json"
        ),
        "unused_def": Attack({"$defs": {"u": {"$ref": f"{url}/unused.json"}}}, f"{url}/unused.json"),
        "pointer_into_data": Attack(
            {"$ref": "#/default/x", "default": {"x": {"$ref": f"{url}/data.json"}}}, f"{url}/data.json"
        ),
        "pointer_to_a_non_schema": Attack({"$ref": "#/default", "default": 5}, "#/default"),
        "file_in_root_refs_a_url": Attack(
            _wrap({"$ref": "inner.json#/$defs/a"}),
            f"{url}/inner.json",
            in_file="inner.json",
            files={"inner.json": {"$defs": {"a": {"$ref": f"{url}/inner.json"}}}},
        ),
        "cycle": Attack({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}}, "#/$defs/a"),
    }


ATTACK_NAMES = sorted(_attacks(Env(1, Path("/nonexistent"))))


@dataclass(frozen=True)
class Layout:
    suite: Path
    expected: str  # "FILE:LINE" the error must start with ("" for the benign suite)

    @staticmethod
    def write(folder: Path, where: tuple[str, str, tuple[Any, ...]] | None, attack: Attack | None) -> Layout:
        """A suite root at ``folder`` (pyproject.toml marks it) with ``attack`` at ``where``."""
        folder.mkdir(parents=True)
        (folder / "pyproject.toml").write_text("[project]\nname = 'x'\n")
        suite, fixture_file = base_suite()
        if where is not None and attack is not None:
            file, _template, path = where
            _set(suite if file == "suite" else fixture_file, path, attack.schema)
            for name, data in (attack.files or {}).items():
                (folder / name).write_text(json.dumps(data, indent=1))
        suite_path = folder / "suite.yaml"
        suite_path.write_text(yaml.safe_dump(suite, sort_keys=False, width=1000))
        (folder / "fixtures.yaml").write_text(yaml.safe_dump(fixture_file, sort_keys=False, width=1000))
        if attack is None or where is None:
            return Layout(suite_path, "")
        holder = folder / (attack.in_file or ("suite.yaml" if where[0] == "suite" else "fixtures.yaml"))
        lines = [i for i, text in enumerate(holder.read_text().splitlines(), 1) if attack.marker in text]
        assert len(lines) == 1, (holder, attack.marker)
        return Layout(suite_path, f"{holder}:{lines[0]}")


def hostile_suites(base: Path, env: Env) -> Iterator[tuple[str, Layout]]:
    attacks = _attacks(env)
    for where in locations():
        for name in ATTACK_NAMES:
            label = f"{where[1].replace('/', '.').replace('*', '0')}-{name}"
            if where[0] == "fixture_file":
                label = "fixture_file." + label
            yield label, Layout.write(base / label, where, attacks[name])


# --------------------------------------------------------------------------- witnesses: the network and the disk


class _LogServer(ThreadingHTTPServer):
    requests: list[str]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # a valid schema, so that a fetch would make the suite pass
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        body = b'{"type": "object", "$defs": {"a": {"type": "object"}}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def log_server() -> Iterator[_LogServer]:
    server = _LogServer(("127.0.0.1", 0), _Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


_OPENED: list[str] = []
_WATCH: list[str] = []  # folders whose files must never be opened (set while a test watches)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _WATCH:
        return
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        name = os.fsdecode(args[0])
        if any(name.startswith(w) for w in _WATCH):
            _OPENED.append(name)
    elif event in ("socket.connect", "urllib.Request"):
        _OPENED.append(f"{event} {args[1] if len(args) > 1 else args}")


sys.addaudithook(_audit)  # cannot be removed; it does nothing unless a test sets _WATCH


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory, log_server: _LogServer) -> tuple[Env, list[tuple[str, Layout]]]:
    base = tmp_path_factory.mktemp("schemas")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text('{"type": "object", "description": "SECRET-OUTSIDE-THE-ROOT"}')
    env = Env(log_server.server_address[1], outside)
    return env, list(hostile_suites(base, env))


@pytest.fixture
def watched(hostile: tuple[Env, list[tuple[str, Layout]]], log_server: _LogServer) -> Iterator[None]:
    env, _ = hostile
    log_server.requests.clear()
    _OPENED.clear()
    _WATCH[:] = [str(env.outside), os.path.realpath(env.outside)]
    yield
    _WATCH.clear()
    assert log_server.requests == [], "a schema reference was fetched"
    assert _OPENED == [], "a file outside the suite root was opened, or a socket connected"


def _check_line(text: str, layout: Layout, label: str) -> None:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, (label, text)
    assert lines[0].startswith(f"error: {layout.expected}: "), (label, lines[0], layout.expected)
    assert "Traceback" not in text


# --------------------------------------------------------------------------- the three ways in


def test_lint_refuses_every_hostile_schema_at_every_key(hostile, watched, capsys) -> None:
    from leader_eval.cli.app import main

    _, suites = hostile
    for label, layout in suites:
        status = main(["lint", "--no-tokens", str(layout.suite)])
        out, err = capsys.readouterr()
        assert status == 2, (label, out, err)
        assert out == "", label
        _check_line(err, layout, label)


class CountingBackend:
    """A backend that samples a goal call for anything, and counts what it was asked."""

    model_id = "counting"
    default_protocol = "json"
    context_length = 4096
    special_tokens: tuple[str, ...] = ()
    max_concurrency = 4
    cache_identity = None

    def __init__(self) -> None:
        self.sampled = 0

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: Any) -> Prompt:
        return Prompt(text="\n".join(str(m.get("content")) for m in messages), token_ids=None, messages=messages)

    async def sample(self, request: SampleRequest) -> list[Completion]:
        self.sampled += len(request.seeds)
        text = json.dumps({"tool": "send", "arguments": {"message": "hi"}})
        return [Completion(text=text, token_ids=[], stop_reason="stop") for _ in request.seeds]

    def describe(self) -> dict[str, Any]:
        return {"model_id": self.model_id}

    async def aclose(self) -> None:
        pass


def _run(suite: Path, out: Path) -> CountingBackend:
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import RunOptions

    backend = CountingBackend()
    run(suite, RunOptions(out=out, progress=False, cache=False, seed=1), backend=backend)  # type: ignore[arg-type]
    return backend


def test_the_counting_backend_does_sample_a_benign_suite(tmp_path: Path) -> None:
    """The control for the run test: the same suite, benign, is sampled and answered by the fixtures."""
    backend = _run(Layout.write(tmp_path / "ok", None, None).suite, tmp_path / "run")
    assert backend.sampled >= 1 and (tmp_path / "run" / "manifest.json").exists()


def test_a_run_refuses_every_hostile_schema_before_sampling(hostile, watched, tmp_path: Path) -> None:
    _, suites = hostile
    for label, layout in suites:
        backend = CountingBackend()
        out = tmp_path / label
        from leader_eval.runs.evaluate import run
        from leader_eval.runs.options import RunOptions

        with pytest.raises(SuiteError) as err:
            run(layout.suite, RunOptions(out=out, progress=False, cache=False, seed=1), backend=backend)  # type: ignore[arg-type]
        _check_line(f"error: {err.value}", layout, label)
        assert backend.sampled == 0 and not out.exists(), label


def test_pytest_collection_refuses_every_hostile_schema(hostile, log_server: _LogServer, tmp_path: Path) -> None:
    """One pytest process collects every hostile suite; each is a one-line collect error, and the
    child neither fetches (the log server) nor opens a file outside the root (its audit hook)."""
    env, suites = hostile
    log_server.requests.clear()
    opened = tmp_path / "opened.log"
    (tmp_path / "audit_outside.py").write_text(  # loaded with -p before collection
        "import os, sys\n"
        f"_W = ({str(env.outside)!r}, {os.path.realpath(env.outside)!r})\n"
        "def _hook(event, args):\n"
        "    if event == 'open' and args and isinstance(args[0], (str, bytes, os.PathLike)):\n"
        "        if os.fsdecode(args[0]).startswith(_W):\n"
        f"            with open({str(opened)!r}, 'a') as f:\n"
        "                f.write(os.fsdecode(args[0]) + '\\n')\n"
        "sys.addaudithook(_hook)\n"
        "open(os.path.join(_W[0], 'canary'), 'w').close()  # proves the hook logs in this process\n"
    )
    path = [str(ROOT), str(tmp_path), os.environ.get("PYTHONPATH", "")]
    env_vars = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "audit_outside",
         "--rootdir", str(tmp_path), "-c", os.devnull, *(str(layout.suite) for _, layout in suites)],
        cwd=tmp_path, env=env_vars, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-2000:]
    for label, layout in suites:
        # pytest prints the collect error's message as is, once in the error section
        assert re.search(re.escape(layout.expected) + r": \S", output), (label, layout.expected, output[-3000:])
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-3000:]
    assert log_server.requests == [], "a schema reference was fetched at collection"
    assert opened.read_text().splitlines() == [str(env.outside / "canary")]


# --------------------------------------------------------------------------- what a suite may do


def _episode_suite(tmp_path: Path, match_schema: Any, returns: Any, files: dict[str, Any] | None = None) -> Path:
    suite, fixture_file = base_suite()
    suite["tools"][0]["returns"] = returns
    suite["fixtures"][0]["match_schema"] = match_schema
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("")
    for name, data in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(json.dumps(data))
    (tmp_path / "fixtures.yaml").write_text(yaml.safe_dump(fixture_file))
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def test_local_and_in_root_file_refs_work_in_returns_and_match_schema(tmp_path: Path) -> None:
    """Relative refs are resolved within the document or to a file inside the root, and the world
    answers with them at run time without retrieving anything (before: a traceback mid-run)."""
    from leader_eval.suite.load import load_suite

    match_schema = {
        "$defs": {"weather": {"const": "weather"}},
        "properties": {"topic": {"$ref": "#/$defs/weather"}, "day": {"$ref": "shared/common.json#/$defs/day"}},
        "required": ["topic"],
    }
    returns = {"type": "object", "properties": {"answer": {"$ref": "shared/common.json#/$defs/answer"}}}
    common = {"$defs": {"day": {"enum": ["mon", "tue"]}, "answer": {"type": "string", "minLength": 1}}}
    suite = load_suite(_episode_suite(tmp_path, match_schema, returns, {"shared/common.json": common}))
    world = suite.world.with_fixtures(suite.cases[0].episode.fixtures)
    a, b, c = world.answer([("lookup", {"topic": "weather", "day": "mon"}), ("lookup", {"topic": "rain"}),
                            ("lookup", {"topic": "weather", "day": "sun"})])  # fmt: skip
    assert a.value == {"answer": "case"}  # the case's own catch-all fixture comes first
    world = suite.world  # the suite's fixtures alone: the match_schema decides
    a, b, c = world.answer([("lookup", {"topic": "weather", "day": "mon"}), ("lookup", {"topic": "rain"}),
                            ("lookup", {"topic": "weather", "day": "sun"})])  # fmt: skip
    assert a.value == {"answer": "suite"}
    assert b.value == {"answer": "file"} and c.value == {"answer": "file"}  # the next fixture answers


def test_a_fixture_result_is_checked_against_a_returns_schema_with_refs(tmp_path: Path) -> None:
    from leader_eval.suite.load import load_suite

    returns = {
        "type": "object",
        "properties": {"answer": {"$ref": "#/$defs/short"}},
        "$defs": {"short": {"maxLength": 3}},
    }
    with pytest.raises(SuiteError, match="does not match its returns schema"):
        load_suite(_episode_suite(tmp_path, {"type": "object"}, returns))


def test_a_pointer_into_an_unknown_keyword_is_followed_and_checked(tmp_path: Path) -> None:
    """OpenAPI-style ``#/components/...`` is allowed, and what it reaches is checked like any schema."""
    from leader_eval.suite.load import load_suite

    good = {
        "components": {"topic": {"type": "string", "maxLength": 5}},
        "properties": {"topic": {"$ref": "#/components/topic"}},
    }
    suite = load_suite(_episode_suite(tmp_path / "good", good, {"type": "object"}))
    assert [r.value for r in suite.world.answer([("lookup", {"topic": "abcdefgh"})])] == [{"answer": "file"}]
    bad = {"components": {"topic": {"type": 5}}, "properties": {"topic": {"$ref": "#/components/topic"}}}
    with pytest.raises(SuiteError, match="not a valid JSON Schema") as err:
        load_suite(_episode_suite(tmp_path / "bad", bad, {"type": "object"}))
    assert err.value.line is not None and err.value.line > 1


def test_schema_depth_is_bounded_at_lint_not_by_a_recursion_error_mid_run(tmp_path: Path) -> None:
    from leader_eval.suite.load import load_suite
    from leader_eval.suite.tool_schema import MAX_SCHEMA_DEPTH

    def chain(n: int) -> dict[str, Any]:
        defs: dict[str, Any] = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}]} for i in range(n)}
        defs[f"d{n}"] = {"type": "object"}
        return {"$ref": "#/$defs/d0", "$defs": defs}

    deep = MAX_SCHEMA_DEPTH  # each link is two schemas (allOf's item and the $ref's target)
    with pytest.raises(SuiteError, match=f"nest more than {MAX_SCHEMA_DEPTH} deep"):
        load_suite(_episode_suite(tmp_path / "deep", chain(deep), {"type": "object"}))
    with pytest.raises(SuiteError, match=f"nest more than {MAX_SCHEMA_DEPTH} deep"):
        load_suite(_episode_suite(tmp_path / "far", chain(10 * deep), {"type": "object"}))
    ok = load_suite(_episode_suite(tmp_path / "ok", chain(deep // 2 - 2), {"type": "object"}))
    assert ok.world.answer([("lookup", {"topic": "x"})])[0].value == {"answer": "suite"}


def test_a_fixture_built_in_python_is_checked_when_built() -> None:
    from leader_eval.suite.world import Fixture, Outcome

    for bad in ({"$ref": "http://127.0.0.1:9/x.json"}, {"$ref": "file:///etc/passwd"}, {"$ref": "x.json"},
                {"$ref": "#/nope"}, {"type": 5}):  # fmt: skip
        with pytest.raises(SuiteError):
            Fixture("t", None, bad, (Outcome(True, 1),), "here:1")
    f = Fixture(
        "t",
        None,
        {"$defs": {"a": {"const": 1}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
        (Outcome(True, 1),),
        "here:1",
    )
    assert f.accepts("t", {"x": 1}, {}) and not f.accepts("t", {"x": 2}, {})


def test_deeply_nested_arguments_do_not_crash_the_world(tmp_path: Path) -> None:
    from leader_eval.suite.load import load_suite

    recursive = {"$defs": {"n": {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}
    suite = load_suite(_episode_suite(tmp_path, recursive, {"type": "object"}))
    args: dict[str, Any] = {}
    node = args
    for _ in range(sys.getrecursionlimit()):
        node["a"] = {}
        node = node["a"]
    (r,) = suite.world.answer([("lookup", args)])
    assert r.value == {"answer": "file"}  # no match for the suite's fixture: the next one answers


def test_two_suites_with_the_same_schema_text_keep_their_own_ref_files(tmp_path: Path) -> None:
    """The tool-call check caches validators; a suite's schema must never borrow another suite's files."""
    from leader_eval.checks.toolcall import match_calls
    from leader_eval.suite.load import load_suite
    from leader_eval.types import ToolCall

    def suite_with(folder: Path, max_length: int) -> Any:
        suite, _ = base_suite()
        suite["tools"][1]["parameters"] = {"type": "object", "properties": {"message": {"$ref": "c.json#/$defs/m"}}}
        folder.mkdir()
        (folder / "pyproject.toml").write_text("")
        (folder / "c.json").write_text(json.dumps({"$defs": {"m": {"type": "string", "maxLength": max_length}}}))
        (folder / "fixtures.yaml").write_text("[]")
        (folder / "s.yaml").write_text(yaml.safe_dump(suite))
        return load_suite(folder / "s.yaml")

    strict, loose = suite_with(tmp_path / "a", 3), suite_with(tmp_path / "b", 50)
    call = [ToolCall("send", {"message": "twelve chars"}, "json")]
    expect = {"calls": [{"tool": "send"}]}

    def schema_ok(suite: Any) -> bool:
        tools = {t.name: t.parameters for t in suite.tools}
        return next(c for c in match_calls(call, expect, tools) if c.check == "arguments_schema").passed

    assert not schema_ok(strict)
    assert schema_ok(loose)


def test_the_log_server_would_see_a_plain_validator_fetch(log_server: _LogServer) -> None:
    """The witness works: jsonschema's own default resolution does reach it (so silence means no fetch)."""
    import warnings

    from jsonschema.validators import Draft202012Validator

    log_server.requests.clear()
    url = f"http://127.0.0.1:{log_server.server_address[1]}/witness.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            Draft202012Validator({"$ref": url}).is_valid({})
        except Exception:  # a jsonschema without the retrieving default: then nothing to prove here
            pytest.skip("this jsonschema never retrieves by default")
    assert log_server.requests == ["/witness.json"]


def test_the_audit_hook_sees_a_file_opened_outside_the_root(hostile) -> None:
    """The witness works: with a folder watched, opening a file in it is logged."""
    env, _ = hostile
    _OPENED.clear()
    _WATCH[:] = [str(env.outside)]
    try:
        (env.outside / "secret.json").read_text()
    finally:
        _WATCH.clear()
    assert [str(env.outside / "secret.json")] == _OPENED
    _OPENED.clear()


def test_a_file_reached_through_a_symlinked_folder_resolves_its_own_refs(tmp_path: Path) -> None:
    """Validation resolves a file's relative refs against the path the $ref named it by; lint
    loads the same way (before, lint passed and validation found nothing at that path)."""
    from leader_eval.suite.tool_schema import SchemaSite, load_schemas

    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.json").write_text(json.dumps({"$defs": {"a": {"$ref": "b.json#/$defs/b"}}}))
    (tmp_path / "real" / "b.json").write_text(json.dumps({"$defs": {"b": {"type": "integer"}}}))
    (tmp_path / "link").symlink_to(tmp_path / "real")
    site = SchemaSite(
        "x", "match_schema", {"properties": {"n": {"$ref": "link/a.json#/$defs/a"}}}, tmp_path / "s.yaml", {}
    )
    v = load_schemas(tmp_path, [site]).validator("x")
    assert v.is_valid({"n": 1}) and not v.is_valid({"n": "one"})


def test_a_symlink_loop_cannot_name_one_file_endlessly(tmp_path: Path) -> None:
    from leader_eval.suite.tool_schema import SchemaSite, load_schemas

    (tmp_path / "loop").symlink_to(".")
    (tmp_path / "self.json").write_text(
        json.dumps({"$defs": {"a": {"properties": {"n": {"$ref": "loop/self.json#/$defs/a"}}}}})
    )
    site = SchemaSite("x", "match_schema", {"$ref": "self.json#/$defs/a"}, tmp_path / "s.yaml", {})
    with pytest.raises(SuiteError, match="paths to schema files") as err:
        load_schemas(tmp_path, [site])
    assert err.value.path == str(tmp_path / "self.json")


SCHEMES = ("http", "https", "HTTP", "HtTpS", "ftp", "file", "FILE", "urn", "data", "jar", "javascript", "ws", "c")


def _generated_refs(port: int, outside: Path) -> list[str]:
    """Every scheme in the forms a URL parser accepts, and paths that leave the root by other means."""
    host = f"127.0.0.1:{port}"
    refs = [f"{s}://{host}/g.json" for s in SCHEMES] + [f"{s}:g.json" for s in SCHEMES]
    refs += [f"{s}:///{outside}/secret.json" for s in ("file", "FILE")]
    refs += [f" http://{host}/lead.json", f"ht\ttp://{host}/tab.json", f"http:\n//{host}/nl.json"]
    refs += [f"//{host}/g.json", f"///{outside}/secret.json", f"\\\\{host}\\g.json", str(outside / "secret.json")]
    refs += ["../" * 12 + str(outside).lstrip("/") + "/secret.json", "~/secret.json", "x.json?q=1", "?q=1"]
    refs += [f"%2e%2e/{'%2e%2e/' * 10}{str(outside).lstrip('/')}/secret.json", "missing.json", "#/nope", "#nope"]
    return refs


def test_generated_refs_are_refused_naming_the_ref_and_nothing_is_touched(hostile, watched, tmp_path: Path) -> None:
    from leader_eval.suite.tool_schema import SchemaSite, load_schemas

    env, _ = hostile
    (tmp_path / "root").mkdir()
    suite = tmp_path / "root" / "s.yaml"
    lines = {("m",): 3, ("m", "properties", "x", "$ref"): 7}
    for ref in _generated_refs(env.port, env.outside):
        site = SchemaSite("m", "match_schema", {"properties": {"x": {"$ref": ref}}}, suite, lines, ("m",))
        with pytest.raises(SuiteError) as err:
            load_schemas(tmp_path / "root", [site])
        assert (err.value.path, err.value.line) == (str(suite), 7), (ref, str(err.value))


# --------------------------------------------------------------------------- regexes in schemas, every key

#: catastrophic shapes (no backslash: the marker must read the same in YAML and JSON text)
CATASTROPHIC = ["(a+)+$", "(a|aa)*b", "(x*)*y", "[a-z]*[a-z0-9]*!", "(b|bb)+c"]


def _pattern_attacks(bad: str) -> dict[str, Attack]:
    """Every place a JSON Schema holds a regex, inline and in a file a ``$ref`` reaches."""
    return {
        "pattern": Attack(_wrap({"type": "string", "pattern": bad}), bad),
        "pattern_properties": Attack({"type": "object", "patternProperties": {bad: {"type": "string"}}}, bad),
        "property_names": Attack({"type": "object", "propertyNames": {"pattern": bad}}, bad),
        "unused_def": Attack({"$defs": {"u": {"pattern": bad}}}, bad),
        "ref_file": Attack(
            _wrap({"$ref": "shared.json#/$defs/s"}),
            bad,
            in_file="shared.json",
            files={"shared.json": {"$defs": {"s": {"type": "string", "pattern": bad}}}},
        ),
    }


def test_a_catastrophic_schema_pattern_is_refused_at_lint_with_its_line_at_every_key(tmp_path: Path, capsys) -> None:
    """Tool parameters were linted; returns, match_schema (suite, case, fixture file) and the files
    a $ref reaches were not. Now every schema the loader loads is, at the pattern's own line."""
    from leader_eval.cli.app import main

    shapes = sorted(_pattern_attacks("x"))
    for i, (where, name) in enumerate((w, n) for w in locations() for n in shapes):
        bad = CATASTROPHIC[i % len(CATASTROPHIC)]  # each key meets several of the shapes
        layout = Layout.write(tmp_path / str(i), where, _pattern_attacks(bad)[name])
        label = f"{where[1]} {name} {bad}"
        assert main(["lint", "--no-tokens", str(layout.suite)]) == 2, label
        out, err = capsys.readouterr()
        assert out == "", label
        _check_line(err, layout, label)
        assert "backtrack catastrophically" in err, (label, err)


def test_every_schema_pattern_runs_in_the_bounded_engine_at_run_time(monkeypatch, tmp_path: Path) -> None:
    """At every schema-bearing key, the validator the run uses (tool calls' arguments, the world's
    fixtures, fixture results against returns) matches ``pattern`` and ``patternProperties`` with
    bounded.json_schema's bounded search, never ``re``: each pattern is seen by the bounded search."""
    from leader_eval.bounded import json_schema
    from leader_eval.checks.toolcall import match_calls
    from leader_eval.suite.load import load_suite
    from leader_eval.types import ToolCall

    searched: list[str] = []
    bounded = json_schema._search

    def spy(pattern: str, text: str) -> bool | None:
        searched.append(pattern)
        return bounded(pattern, text)

    monkeypatch.setattr(json_schema, "_search", spy)
    for n, where in enumerate(locations()):
        p1, p2 = f"^[a-z0-9-]+{n}?$", f"^[a-z]{n}?"
        schema = {
            "type": "object",
            "properties": {"x": {"type": "string", "pattern": p1}, "answer": {"type": "string", "pattern": p1}},
            "patternProperties": {p2: {"type": "string"}},
        }
        layout = Layout.write(tmp_path / str(n), where, Attack(schema, p2))
        searched.clear()
        suite = load_suite(layout.suite)  # fixture results are checked against returns here
        tools = {t.name: t.parameters for t in suite.tools}
        validators = {name: suite.tool_schemas.validator(name) for name in tools}
        for name in tools:
            call = [ToolCall(name, {"x": "p-1"}, "json")]
            match_calls(call, {"calls": [{"tool": name}]}, tools)  # the checks' own validator cache
            match_calls(call, {"calls": [{"tool": name}]}, tools, validators=validators)  # score.py's
            # each fixture as the world asks it (the first that accepts answers; ask them all)
            for case in suite.cases:
                for fixture in suite.world.with_fixtures(case.episode.fixtures).fixtures:
                    fixture.accepts(name, {"x": "p-1"}, tools[name])
        assert {p1, p2} <= set(searched), (where[1], sorted(set(searched)))


# --------------------------------------------------------------------------- every file read is in the content hash


def test_every_file_a_suite_reads_is_part_of_its_content_hash(tmp_path: Path) -> None:
    """A file a schema's $ref reaches (from every schema-bearing key) and a fixture file: editing
    either changes the suite's hash (before, $ref targets never did, and fixture files only did
    in a suite with episode cases)."""
    from leader_eval.suite.load import load_suite

    for n, where in enumerate(locations()):
        shared = {"$defs": {"s": {"type": "string"}}}
        attack = Attack(_wrap({"$ref": "shared.json#/$defs/s"}), "shared.json", files={"shared.json": shared})
        layout = Layout.write(tmp_path / str(n), where, attack)
        before = load_suite(layout.suite).content_hash
        (layout.suite.parent / "shared.json").write_text(json.dumps(shared, indent=1))
        assert load_suite(layout.suite).content_hash == before, where[1]  # same bytes: same hash
        (layout.suite.parent / "shared.json").write_text(json.dumps({"$defs": {"s": {"maxLength": 9}}}))
        assert load_suite(layout.suite).content_hash != before, where[1]
    layout = Layout.write(tmp_path / "fixtures", None, None)
    for episodes in (True, False):
        data = yaml.safe_load(layout.suite.read_text())
        if not episodes:  # the world is still built from the suite's fixtures and their files
            data["cases"] = [{"id": "plain", "vars": {"goal": "x"}}]
        layout.suite.write_text(yaml.safe_dump(data, sort_keys=False))
        (layout.suite.parent / "fixtures.yaml").write_text(yaml.safe_dump(base_suite()[1]))
        before = load_suite(layout.suite).content_hash
        (layout.suite.parent / "fixtures.yaml").write_text(yaml.safe_dump(base_suite()[1]).replace("file", "other"))
        assert load_suite(layout.suite).content_hash != before, episodes


def test_a_suite_that_reads_no_other_file_keeps_its_hash_formula(tmp_path: Path) -> None:
    """The hash of a suite with only its YAML and template files is what it always was, so
    goldens recorded before keep matching (suites/*.yaml reference no schema files)."""
    import hashlib

    from leader_eval.suite.load import load_suite
    from tests.conftest import MINIMAL_SUITE

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "t.j2").write_text("Hello {{ request }}")
    source = MINIMAL_SUITE.replace('content: "{{ request }}"', "file: t.j2")
    (tmp_path / "s.yaml").write_text(source)
    suite = load_suite(tmp_path / "s.yaml")
    h = hashlib.sha256(source.encode())
    for m in suite.scaffold:
        h.update(b"\0" + m.role.encode() + b"\0" + m.template.encode())
    assert suite.content_hash == "sha256:" + h.hexdigest()[:16]
