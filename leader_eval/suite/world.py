"""The scripted world of an episode: tool results from fixtures, never from a real tool.

A fixture answers calls to one tool. It may constrain the call's arguments with ``match``
(argument -> constraint, the same language as ``expect.calls[].args``: a bare value means
equals, a mapping holds ``regex``, ``contains``, ``min`` ...; extra arguments are allowed) and
with ``match_schema`` (a JSON Schema the whole arguments object must satisfy). It returns
``result`` (any JSON value), ``error`` (a message the model reads as the tool's error), or a
``sequence`` of ``{result: ...}`` / ``{error: ...}`` items returned in order, one per matching call,
the last one repeating.

Answering a call: the case's fixtures are tried before the suite's, each in file order; the first
whose constraints hold answers. A tool with no fixture at all acknowledges every call with
``{"ok": true}``; a tool that has fixtures answers a call none of them matches with an error
result, and a call to an undeclared tool gets an error result too. The world is a pure function
of the calls made so far, so a resumed or replayed episode sees exactly the same results.

Fixtures live inline (``fixtures:`` at the top of a suite or in a case's ``episode:``) or in
YAML/JSON files (``- file: ../fixtures/tools/x.yaml``), which resolve relative to the suite's
folder and must stay inside the suite root after symlinks (``files.resolve_in_root``). Every problem (an
unknown tool, a result that breaks the tool's ``returns`` schema, a file that does not parse or
lies outside the root) is a ``SuiteError`` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leader_eval.checks.toolcall import match_calls
from leader_eval.errors import SuiteError
from leader_eval.suite.files import read_text, resolve_in_root
from leader_eval.suite.records import check_suite_regex, suite_schema
from leader_eval.suite.tool_schema import SchemaSite, load_schema, standalone_validator
from leader_eval.suite.yaml_source import JsonPath, line_of, load_yaml
from leader_eval.types import ToolCall

if TYPE_CHECKING:
    from jsonschema.validators import Draft202012Validator

# jsonschema (a heavy import) is imported where a fixture file is checked: a suite without
# fixtures never loads it

ACK: dict[str, Any] = {"ok": True}
#: a file a suite may read as fixtures: bounded, so a hostile path cannot fill memory
MAX_FIXTURE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Outcome:
    """One scripted answer: a result, or an error message."""

    ok: bool
    value: Any


@dataclass(frozen=True)
class Fixture:
    tool: str
    match: Mapping[str, Any] | None
    match_schema: Mapping[str, Any] | None
    outcomes: tuple[Outcome, ...]
    origin: str  # "file:line" of the fixture, the file relative to the suite root (for reports)
    source: Path | None = None  # the fixture file read, None when inline in the suite
    #: ``match_schema`` as ``tool_schema`` loaded it: its refs resolved at lint, never fetched
    match_validator: Draft202012Validator | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.match_schema is not None and self.match_validator is None:
            # built in Python rather than loaded from a suite: the same checks, here, before any step
            object.__setattr__(self, "match_validator", standalone_validator(self.match_schema, "match_schema"))

    def accepts(self, name: str, args: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
        if name != self.tool:
            return False
        if self.match_validator is not None:
            try:
                if not self.match_validator.is_valid(dict(args)):
                    return False
            except RecursionError:  # arguments nested deeper than validation can follow: no match
                return False
        if self.match:
            return _args_satisfy(name, args, self.match, params)
        return True

    def errors_before_success(self) -> float:
        """How many calls this fixture answers with an error before its first result (inf: never)."""
        for i, o in enumerate(self.outcomes):
            if o.ok:
                return i
        return float("inf")


@dataclass(frozen=True)
class ToolResult:
    tool: str
    arguments: dict[str, Any]
    ok: bool
    value: Any  # the result, or the error message
    fixture: str | None  # origin of the fixture that answered, None for an ack or an unmatched call

    @property
    def text(self) -> str:
        """What the model reads back: a string result as is, JSON otherwise, errors prefixed."""
        if not self.ok:
            return f"error: {self.value}"
        return self.value if isinstance(self.value, str) else json.dumps(self.value, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "arguments": self.arguments,
            "ok": self.ok,
            "result" if self.ok else "error": self.value,
            "text": self.text,
            "fixture": self.fixture,
        }


@dataclass(frozen=True)
class World:
    """The suite's tools and fixtures; ``answer`` replays a whole call history."""

    params: Mapping[str, Mapping[str, Any]]  # tool name -> parameters schema
    fixtures: tuple[Fixture, ...]
    returns: Mapping[str, Draft202012Validator]  # tool name -> its results schema, loaded (tools with one)

    def with_fixtures(self, first: Sequence[Fixture]) -> World:
        """This world with ``first`` (a case's own fixtures) tried before the suite's."""
        return World(self.params, (*first, *self.fixtures), self.returns)

    def errors_before_success(self, tool: str) -> float:
        mine = [f for f in self.fixtures if f.tool == tool]
        if not mine:
            return 0  # acknowledged
        return min(f.errors_before_success() for f in mine)

    def answer(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
        """Results for every call of the history, in order (sequences advance per matching call)."""
        used: dict[int, int] = {}
        out = []
        for name, args in calls:
            out.append(self._answer_one(name, dict(args) if isinstance(args, Mapping) else {}, used))
        return out

    def _answer_one(self, name: str, args: dict[str, Any], used: dict[int, int]) -> ToolResult:
        if name not in self.params:
            known = ", ".join(sorted(self.params))
            return ToolResult(name, args, False, f"unknown tool {name!r} (tools: {known})", None)
        mine = [f for f in self.fixtures if f.tool == name]
        if not mine:
            return ToolResult(name, args, True, ACK, None)
        for i, f in enumerate(self.fixtures):
            if f.accepts(name, args, self.params[name]):
                n = used.get(i, 0)
                used[i] = n + 1
                o = f.outcomes[min(n, len(f.outcomes) - 1)]
                return ToolResult(name, args, o.ok, o.value, f.origin)
        shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        return ToolResult(name, args, False, f"no result for {name} with arguments {shown}", None)


def _args_satisfy(name: str, args: Mapping[str, Any], match: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    call = ToolCall(name, dict(args), "world")
    checks = match_calls(
        [call], {"calls": [{"tool": name, "args": dict(match), "allow_extra_args": True}]}, {name: params}
    )
    return all(c.passed for c in checks if c.check in ("tool_choice", "arguments"))


# --------------------------------------------------------------------------- loading and lint


def load_fixtures(
    suite_path: Path,
    root: Path,
    entries: Sequence[Any],
    lines: dict[JsonPath, int],
    at: JsonPath,
    tools: Mapping[str, Mapping[str, Any]],
    returns: Mapping[str, Draft202012Validator],
) -> list[Fixture]:
    """Fixtures of one ``fixtures:`` list (inline items and ``file:`` references), linted."""
    out: list[Fixture] = []
    for i, entry in enumerate(entries):
        if isinstance(entry, Mapping) and set(entry) == {"file"}:
            line = line_of(lines, (*at, i, "file"))
            path = fixture_file(suite_path, root, str(entry["file"]), line)
            out.extend(_load_file(path, root, tools, returns, named_in=suite_path, line=line))
        else:
            out.append(_fixture(suite_path, root, entry, lines, (*at, i), tools, returns))
    return out


def fixture_file(suite_path: Path, root: Path, ref: str, line: int) -> Path:
    """The fixture file ``ref`` names (relative to the suite), inside the suite root, existing."""
    path = resolve_in_root(suite_path, ref, line, root=root, what="fixture file")
    if not path.is_file():
        raise SuiteError(suite_path, line, f"fixture file {ref!r} not found ({path})")
    return path


def _load_file(
    path: Path,
    root: Path,
    tools: Mapping[str, Mapping[str, Any]],
    returns: Mapping[str, Draft202012Validator],
    *,
    named_in: Path,
    line: int,
) -> list[Fixture]:
    # bounded UTF-8, bounded YAML (YAML is a superset of JSON: one reader for both)
    source = read_text(path, limit=MAX_FIXTURE_BYTES, what="fixture", named_in=str(named_in), line=line)
    data, lines = load_yaml(path, source)
    at: JsonPath = ()
    if isinstance(data, Mapping) and "fixtures" in data:
        data, at = data["fixtures"], ("fixtures",)
    if not isinstance(data, list):
        raise SuiteError(path, 1, "a fixture file holds a list of fixtures (or a mapping with a 'fixtures' list)")
    from jsonschema.exceptions import best_match
    from jsonschema.validators import Draft202012Validator

    schema = {"$defs": suite_schema()["$defs"], "type": "array", "items": {"$ref": "#/$defs/fixture"}}
    errors = list(Draft202012Validator(schema).iter_errors(data))
    if errors:
        best = best_match(errors)
        p: JsonPath = (*at, *best.absolute_path)
        where = "/".join(str(x) for x in best.absolute_path) or "(top level)"
        msg = best.message[:200]
        if best.validator == "oneOf" and isinstance(best.instance, Mapping):
            msg = "a fixture holds exactly one of result, error, sequence (and no unknown keys)"
        raise SuiteError(path, line_of(lines, p), f"{where}: {msg}")
    shown = path.relative_to(root)  # never a machine-specific absolute path in a record
    return [
        replace(
            _fixture(path, root, item, lines, (*at, i), tools, returns),
            origin=f"{shown}:{line_of(lines, (*at, i))}",
            source=path,
        )
        for i, item in enumerate(data)
    ]


def _fixture(
    path: Path,
    root: Path,
    item: Mapping[str, Any],
    lines: dict[JsonPath, int],
    at: JsonPath,
    tools: Mapping[str, Mapping[str, Any]],
    returns: Mapping[str, Draft202012Validator],
) -> Fixture:
    tool = item["tool"]
    if tool not in tools:
        raise SuiteError(
            path,
            line_of(lines, (*at, "tool")),
            f"fixture for unknown tool {tool!r} (tools: {', '.join(sorted(tools)) or 'none'})",
        )
    check_constraints(path, item.get("match") or {}, lines, (*at, "match"))
    match_validator = None
    if "match_schema" in item:
        spot: JsonPath = (*at, "match_schema")
        site = SchemaSite("/".join(map(str, spot)), "match_schema", item["match_schema"], path, lines, spot)
        match_validator = load_schema(root, site)
    for arg in item.get("match") or {}:
        props = tools[tool].get("properties", {})
        if props and arg not in props:
            raise SuiteError(
                path, line_of(lines, (*at, "match", arg)), f"fixture for {tool!r} matches unknown argument {arg!r}"
            )
    if "sequence" in item:
        outcomes = tuple(_outcome(s) for s in item["sequence"])
        paths = [(*at, "sequence", j, "result") for j in range(len(outcomes))]
    else:
        outcomes = (_outcome(item),)
        paths = [(*at, "result")]
    validator = returns.get(tool)
    if validator is not None:
        from jsonschema.exceptions import best_match

        for o, p in zip(outcomes, paths, strict=True):
            if not o.ok:
                continue
            try:
                err = best_match(validator.iter_errors(o.value))
            except RecursionError:
                raise SuiteError(path, line_of(lines, p), f"fixture result for {tool!r} nests too deeply") from None
            if err is not None:
                where = "/".join(str(x) for x in err.absolute_path)
                raise SuiteError(
                    path,
                    line_of(lines, (*p, *err.absolute_path)),
                    f"fixture result for {tool!r} does not match its returns schema"
                    f"{' at ' + where if where else ''}: {err.message[:200]}",
                )
    return Fixture(
        tool=tool,
        match=item.get("match"),
        match_schema=item.get("match_schema"),
        outcomes=outcomes,
        origin=f"{path}:{line_of(lines, at)}",
        match_validator=match_validator,
    )


def check_constraints(path: Path, constraints: Mapping[str, Any], lines: dict[JsonPath, int], at: JsonPath) -> None:
    """Every ``regex`` in argument constraints compiles (a bad one would silently never match)."""
    for arg, c in constraints.items():
        if isinstance(c, Mapping) and isinstance(c.get("regex"), str):
            check_suite_regex(path, line_of(lines, (*at, arg, "regex")), c["regex"])


def _outcome(item: Mapping[str, Any]) -> Outcome:
    if "error" in item:
        return Outcome(False, str(item["error"]))
    return Outcome(True, item["result"])
