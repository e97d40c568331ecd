"""Load and validate suites. Every error names the file and line it comes from."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from leader_eval.bounded.limits import MAX_TEMPLATE_BYTES
from leader_eval.bounded.validity import Predicate, compile_validity
from leader_eval.errors import SuiteError, SuiteErrors
from leader_eval.suite.data_cases import DataCase, Where, load_data_cases
from leader_eval.suite.episode_spec import with_episodes
from leader_eval.suite.expectations import unsatisfiable
from leader_eval.suite.files import read_text, recording_reads, resolve_in_root, suite_root
from leader_eval.suite.filler_file import load_filler
from leader_eval.suite.gate_spec import gate_problem
from leader_eval.suite.judge_spec import judges_from
from leader_eval.suite.records import Case, ScaffoldMessage, Suite, Tool, check_suite_regex, suite_schema
from leader_eval.suite.render import check_templates
from leader_eval.suite.tool_schema import LoadedSchemas, load_tool_schemas
from leader_eval.suite.yaml_source import JsonPath, line_of, load_yaml

if TYPE_CHECKING:
    from jsonschema.validators import Draft202012Validator

# the records (records.py) stay importable from here, where the layers above have always found them
__all__ = [
    "Case",
    "ScaffoldMessage",
    "Suite",
    "Tool",
    "load_suite",
    "load_suite_source",
    "suite_schema",
]

DEFAULT_SAMPLING: dict[str, Any] = {
    "temperature": 0.7,
    "max_tokens": 256,
    "top_p": 1.0,
    "samples": 1,
    "seed": None,
    "stop": [],
}
DEFAULT_HARD_FAIL = ["empty", "leak_tool_markup", "leak_special_token", "leak_placeholder"]


def load_suite(path: str | Path, *, root: str | Path | None = None) -> Suite:
    """Parse, validate and return a suite; raise ``SuiteError`` naming file and line.

    ``root`` bounds every file the suite references (default: ``files.suite_root``).
    """
    path = Path(path)
    with recording_reads() as reads:
        source = read_text(path, what="suite")
        data, lines = load_yaml(path, source)
        if not isinstance(data, dict):
            raise SuiteError(path, 1, "a suite must be a YAML mapping with name, scaffold, tools, cases")
        errors = _Errors()
        # every error of the file is collected (lint prints them all); a schema error outside a case
        # leaves nothing sound to build on, one inside a case only takes that case out of the checks
        skip = _validate_schema(path, data, lines, errors)
        if skip is None:
            errors.raise_any()
        with errors.collect():
            _validate_gate(path, data, lines)
        if "cases" not in data and "cases_from" not in data:
            raise SuiteError(path, 1, "a suite needs cases: or cases_from: (or both)")
        base = Path(root).resolve() if root is not None else suite_root(path)
        if not base.is_dir():
            raise SuiteError(path, None, f"suite root {base} is not a folder")
        extra = _data_cases(path, base, data, lines, errors)
        suite = _build(path, source, data, lines, base, errors, skip or set(), extra)
        errors.raise_any()
    return replace(suite, content_hash=_with_files(suite.content_hash, base, reads))


_STRING_NAME = "<string>"


def load_suite_source(source: str | Path | Mapping[str, Any] | Suite, *, root: str | Path | None = None) -> Suite:
    """A suite from a path, YAML text or a dict (a ``Suite`` is returned as is): the public
    ``leader_eval.load_suite`` (docs/api.md).

    A string is a path when it names a file and holds no newline; otherwise it is YAML text.
    ``root`` bounds the files a suite file references (as in ``load_suite``). Text and dicts must
    be self-contained: a ``file:`` scaffold reference has no folder to be resolved against.
    Errors are ``SuiteError`` naming ``<string>`` and the line.
    """
    if isinstance(source, Suite):
        return source
    if isinstance(source, Path):
        return load_suite(source, root=root)
    if isinstance(source, Mapping):
        text = yaml.safe_dump(dict(source), sort_keys=False, allow_unicode=True)
    elif isinstance(source, str):
        if "\n" not in source and source.strip() and Path(source).is_file():
            return load_suite(source, root=root)
        text = source
    else:
        raise TypeError(f"load_suite: a path, YAML text or a dict, not {type(source).__name__}")
    with tempfile.TemporaryDirectory(prefix="leader-eval-suite-") as tmp:
        path = Path(tmp) / "suite.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            suite = load_suite(path)
        except SuiteError as exc:
            raise SuiteError(_STRING_NAME, exc.line, exc.message.replace(str(path), _STRING_NAME)) from None
    return suite


def _data_cases(
    path: Path, base: Path, data: dict[str, Any], lines: dict[JsonPath, int], errors: _Errors
) -> list[DataCase]:
    """The schema-valid cases of the suite's ``cases_from`` files; each bad record is an error
    at its own ``FILE:LINE`` (or ``FILE:row N``) and is left out."""
    if "cases_from" not in data:
        return []
    found, problems = load_data_cases(path, base, data["cases_from"], lines)
    errors.found.extend(problems)
    fast = _case_validity()
    valid = []
    for dc in found:
        if fast is None or not fast(dc.record):
            problem = _case_problem(dc.record)
            if problem is not None:
                errors.found.append(SuiteError(*dc.where.at(), problem))
                continue
        valid.append(dc)
    return valid


@functools.cache
def _case_validator() -> Draft202012Validator:
    """The suite schema's validator for one case (a case from a data file is checked alone)."""
    from jsonschema.validators import Draft202012Validator

    schema = suite_schema()
    return Draft202012Validator({**schema["$defs"]["case"], "$defs": schema["$defs"]})


def _case_problem(record: dict[str, Any]) -> str | None:
    """The first schema error of one case mapping, as ``KEY/PATH: what`` (None: valid)."""
    from jsonschema.exceptions import best_match

    error = best_match(_case_validator().iter_errors(record))
    if error is None:
        return None
    where = "/".join(str(x) for x in error.absolute_path) or "(case)"
    msg = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    return f"{where}: {msg}"


class _Errors:
    """The errors of one suite file, collected so that lint reports all of them in one pass;
    ``raise_any`` raises them together as ``SuiteErrors`` (one line for every other caller)."""

    def __init__(self) -> None:
        self.found: list[SuiteError] = []

    @contextlib.contextmanager
    def collect(self) -> Iterator[None]:
        """Record a ``SuiteError`` raised inside the block and go on after it."""
        try:
            yield
        except SuiteErrors as exc:
            self.found.extend(exc.errors)
        except SuiteError as exc:
            self.found.append(exc)

    def raise_any(self) -> None:
        if not self.found:
            return
        unique = {(e.path, e.line, e.message): e for e in self.found}
        first_file = self.found[0].path
        # the suite file's errors by line, then those of the files it references
        ordered = sorted(unique.values(), key=lambda e: (e.path != first_file, e.path, e.line or 0))
        raise SuiteErrors(ordered)


class _Regexes:
    """The suite regexes of one load, each pattern checked once: a suite repeats the same few
    patterns across its cases, and whether a pattern is refused depends on the pattern alone."""

    def __init__(self) -> None:
        self.ok: set[str] = set()

    def check(self, path: str | Path, line: int | None, pattern: str) -> None:
        if pattern in self.ok:
            return
        check_suite_regex(path, line, pattern)
        self.ok.add(pattern)


@functools.cache
def _suite_schema_inline() -> dict[str, Any]:
    """The suite schema with each case's ``$ref`` taken in place: the same checks and errors (a
    reference adds nothing to an error's instance path), without resolving the reference once per
    case (~20% of validating a suite of many small cases)."""
    schema = dict(suite_schema())
    cases = dict(schema["properties"]["cases"])
    if cases.get("items") == {"$ref": "#/$defs/case"}:
        cases["items"] = schema["$defs"]["case"]
        schema["properties"] = {**schema["properties"], "cases": cases}
    return schema


@functools.cache
def _suite_validator() -> Draft202012Validator:
    """The suite schema's validator, without a format checker (``format`` only annotates, as
    ``_FORMATS_ANNOTATE`` says). jsonschema, a heavy import, is loaded only for a suite that the
    predicates below cannot show valid."""
    from jsonschema.validators import Draft202012Validator

    return Draft202012Validator(_suite_schema_inline())


#: what ``_suite_validator`` does with ``format``: a validator without a format checker only annotates
_FORMATS_ANNOTATE = True


@functools.cache
def _case_validity() -> Predicate | None:
    """True only for a case that the suite schema's ``cases`` items find no error in, decided
    without jsonschema (``bounded.validity``) for the cases written with what it handles (most
    are); False: jsonschema decides. None where the ``cases`` array itself has a keyword beyond
    its type, ``items`` and ``minItems`` of at most 1 (then one valid case stands for many only
    if that keyword said so; jsonschema checks them all)."""
    schema = _suite_schema_inline()
    spec = schema["properties"]["cases"]
    if set(spec) - {"type", "items", "minItems"} or spec.get("type") != "array" or spec.get("minItems", 0) > 1:
        return None
    return compile_validity(_handled_only(spec["items"], schema, _FORMATS_ANNOTATE), trusted=True)


@functools.cache
def _suite_validity() -> Predicate | None:
    """True only for a suite document that the suite schema finds no error in, decided without
    jsonschema as ``_case_validity`` decides a case (False: jsonschema decides). ``$id``,
    ``$schema`` and ``$defs`` at the root name the schema and hold what ``_handled_only`` takes in
    place of a ``$ref``: none of them is a check on the document."""
    schema = _suite_schema_inline()
    root = {k: v for k, v in schema.items() if k not in ("$id", "$schema", "$defs")}
    return compile_validity(_handled_only(root, schema, _FORMATS_ANNOTATE), trusted=True)


def _handled_only(schema: Any, root: Mapping[str, Any], formats_annotate: bool, depth: int = 0) -> Any:
    """``schema`` with local ``$ref``s taken in place, ``format`` dropped where it only annotates
    (a validator without a format checker), and every subschema ``bounded.validity`` does not
    handle replaced by ``False``: the predicate then never shows a value valid that reaches one
    (stricter, never looser, than the schema)."""
    if isinstance(schema, bool) or depth > 16:
        return schema if isinstance(schema, bool) else False
    if not isinstance(schema, Mapping):
        return False
    if set(schema) == {"$ref"}:
        ref = schema["$ref"]
        name = ref[len("#/$defs/") :] if isinstance(ref, str) and ref.startswith("#/$defs/") else None
        target = root.get("$defs", {}).get(name) if name is not None and "/" not in name else None
        return False if target is None else _handled_only(target, root, formats_annotate, depth + 1)
    out = {k: v for k, v in schema.items() if not (k == "format" and formats_annotate)}
    if "properties" in out and isinstance(out["properties"], Mapping):
        out["properties"] = {
            k: _handled_only(v, root, formats_annotate, depth + 1) for k, v in out["properties"].items()
        }
    for key in ("items", "additionalProperties"):
        if key in out:
            out[key] = _handled_only(out[key], root, formats_annotate, depth + 1)
    return out if compile_validity(out, trusted=True) is not None else False


def _validate_schema(path: Path, data: dict[str, Any], lines: dict[JsonPath, int], errors: _Errors) -> set[int] | None:
    """Record every schema error (one per place); return the indices of the cases they lie in,
    or None when one lies outside the cases (then nothing else can be checked)."""
    fast = _case_validity()
    cases_in = data.get("cases") if isinstance(data, dict) else None
    if fast is not None and type(cases_in) is list and cases_in and all(map(fast, cases_in)):
        # every case is shown valid: jsonschema need only walk the rest, and one case stands for
        # the array's own keywords (type, minItems <= 1: what _case_validity allows)
        data = {**data, "cases": cases_in[:1]}
        whole = _suite_validity()
        if whole is not None and whole(data):  # and the rest too: jsonschema would find nothing
            return set()
    from jsonschema.exceptions import best_match

    validator = _suite_validator()
    seen: set[JsonPath] = set()
    cases: set[int] | None = set()
    for error in validator.iter_errors(data):
        # within one error (a oneOf, an anyOf) the deepest is the most specific
        best = best_match([error]) or error
        p: JsonPath = tuple(best.absolute_path)
        if best.validator == "additionalProperties" and isinstance(best.instance, dict):
            # point at the unexpected key itself, not at the mapping that holds it
            allowed = set(best.schema.get("properties", {}))
            extra = [k for k in best.instance if k not in allowed]
            if extra:
                p = (*p, extra[0])
        if p in seen:
            continue
        seen.add(p)
        where = "/".join(str(x) for x in p) or "(top level)"
        msg = best.message
        if len(msg) > 200:
            msg = msg[:200] + "..."
        errors.found.append(SuiteError(path, line_of(lines, p), f"{where}: {msg}"))
        if cases is not None and len(p) >= 2 and p[0] == "cases" and isinstance(p[1], int):
            cases.add(p[1])
        else:
            cases = None
    return cases


def _build(
    path: Path,
    source: str,
    data: dict[str, Any],
    lines: dict[JsonPath, int],
    root: Path,
    errors: _Errors,
    skip: set[int],
    extra: list[DataCase],
) -> Suite:
    """The suite from schema-valid ``data`` and the cases of its data files (``extra``, after
    the inline ones; cases in ``skip`` failed the schema and are left out); each error is recorded
    in ``errors`` and checking goes on past it."""
    regexes = _Regexes()
    tools: list[Tool] = []
    tool_names: set[str] = set()
    for i, t in enumerate(data["tools"]):
        with errors.collect():
            if t["name"] in tool_names:
                raise SuiteError(path, line_of(lines, ("tools", i, "name")), f"duplicate tool {t['name']!r}")
            tool_names.add(t["name"])  # known even when its schema is broken: cases may name it
            tools.append(Tool(t["name"], t.get("description", ""), t["parameters"]))
    schemas: LoadedSchemas | None = None
    with errors.collect():
        schemas = load_tool_schemas(
            path, root, [(t.name, t.parameters, ("tools", i, "parameters")) for i, t in enumerate(tools)], lines
        )

    scaffold: list[ScaffoldMessage] = []
    for i, m in enumerate(data["scaffold"]["messages"]):
        with errors.collect():
            scaffold.append(_scaffold_message(path, root, lines, i, m))

    defaults = data.get("defaults", {})
    default_vars = defaults.get("vars", {})
    default_tags = defaults.get("tags", [])
    hard_default = data.get("hard_fail", DEFAULT_HARD_FAIL)
    by_name = {t.name: t for t in tools}
    cases: list[Case] = []
    raw_index: list[int] = []  # where each built case sits in data["cases"] (episodes read it there)
    seen: dict[str, tuple[str | Path, int | None]] = {}
    inline = data.get("cases", [])
    all_cases = [*inline, *(dc.record for dc in extra)]
    for i, c in enumerate(all_cases):
        if i in skip:
            continue
        origin = extra[i - len(inline)].where if i >= len(inline) else None
        at = _locator(path, lines, i, origin)
        line = origin.n if origin else line_of(lines, ("cases", i))
        if c["id"] in seen:
            first = seen[c["id"]]
            here = at("id")
            shown = f"line {first[1]}" if first[0] == here[0] and first[1] else _shown_at(*first)
            errors.found.append(SuiteError(*here, f"duplicate case id {c['id']!r} (first at {shown})"))
            continue
        seen[c["id"]] = at()
        expect = c.get("expect", {})
        for j, call in enumerate(expect.get("calls", [])):
            _check_expected_call(at, errors, regexes, j, c["id"], call, by_name, tool_names, schemas)
        if expect.get("no_call") and expect.get("calls"):
            errors.found.append(SuiteError(*at("expect"), f"case {c['id']!r}: no_call and calls both set"))
        for key in ("forbid", "require"):
            for j, pattern in enumerate(expect.get(key, [])):
                with errors.collect():
                    regexes.check(*at("expect", key, j), pattern)
        raw_index.append(i)
        cases.append(
            Case(
                id=c["id"],
                line=line,
                source=origin.source if origin else None,
                row=origin.row if origin else False,
                vars={**default_vars, **c.get("vars", {})},
                expect=expect,
                tags=tuple(dict.fromkeys([*default_tags, *c.get("tags", [])])),
                weight=float(c.get("weight", 1.0)),
                split=c.get("split"),
                description=c.get("description", ""),
                sampling=c.get("sampling", {}),
                hard_fail=tuple(c.get("hard_fail", hard_default)),
                stress=c.get("stress", {}),
            )
        )
    leakage = data.get("leakage", {})
    for j, pattern in enumerate(leakage.get("forbid", [])):
        with errors.collect():
            regexes.check(path, line_of(lines, ("leakage", "forbid", j)), pattern)
    render = data.get("render", {})
    for j, pattern in enumerate(render.get("placeholder_patterns", [])):
        with errors.collect():
            regexes.check(path, line_of(lines, ("render", "placeholder_patterns", j)), pattern)

    suite = Suite(
        name=data["name"],
        path=path,
        description=data.get("description", ""),
        protocol=data.get("protocol"),
        sampling={**DEFAULT_SAMPLING, **data.get("sampling", {})},
        scaffold=tuple(scaffold),
        tools=tuple(tools),
        cases=tuple(cases),
        leakage=leakage,
        checks=data.get("checks", {}),
        render=render,
        context_length=data.get("context_length"),
        content_hash=_content_hash(_without_gate(path, source, data, lines), tuple(scaffold)),
        lines=lines,
        root=root,
        tool_schemas=schemas,
        gate=dict(data.get("gate", {})),
        pass_k=tuple(data.get("pass_k", ())),
        prices=dict(data.get("prices", {})),
    )
    with errors.collect():
        suite = replace(suite, stress_filler=load_filler(path, data, lines, root))
        suite = replace(suite, judges=judges_from(path, root, data, lines, by_name))
    # Template syntax errors are suite errors too: parse every template now, not at sampling time.
    n_before = len(errors.found)
    for msg in suite.scaffold:
        with errors.collect():
            check_templates(replace(suite, scaffold=(msg,)))
    if len(errors.found) > n_before or len(scaffold) < len(data["scaffold"]["messages"]):
        return suite  # episodes render the scaffold: a broken one would only repeat its errors
    with errors.collect():
        suite = with_episodes(suite, {**data, "cases": all_cases}, indices=raw_index)
    return suite


#: where an error about a case (or a key path inside it) points: ``SuiteError``'s path and line
Locator = Callable[..., tuple[str | Path, int | None]]


def _locator(path: Path, lines: dict[JsonPath, int], i: int, origin: Where | None) -> Locator:
    """A case's ``FILE:LINE`` for a key path inside it: its line in the suite file, or for a case
    from a data file its record's line or row there (one record, one place)."""

    def at(*sub: str | int) -> tuple[str | Path, int | None]:
        return origin.at() if origin is not None else (path, line_of(lines, ("cases", i, *sub)))

    return at


def _shown_at(where: str | Path, line: int | None) -> str:
    return f"{where}:{line}" if line else str(where)


def _check_expected_call(
    at: Locator,
    errors: _Errors,
    regexes: _Regexes,
    j: int,
    case_id: str,
    call: dict[str, Any],
    tools: dict[str, Tool],
    tool_names: set[str],
    schemas: LoadedSchemas | None,
) -> None:
    """Record what is wrong with one expected call: an undeclared tool, an argument the tool does
    not have, a bad regex, a value the tool's schema refuses (a case that could never pass)."""
    here = ("expect", "calls", j)
    if call["tool"] not in tool_names:
        errors.found.append(
            SuiteError(
                *at(*here, "tool"),
                f"case {case_id!r} expects unknown tool {call['tool']!r} (known: {', '.join(sorted(tool_names))})",
            )
        )
        return
    tool = tools.get(call["tool"])
    if tool is None:
        return  # its schema is broken, which is reported on its own
    props = tool.parameters.get("properties", {})
    validator = None
    if schemas is not None:
        with contextlib.suppress(Exception):  # an unusable validator leaves the values to scoring
            validator = schemas.validator(tool.name)
    for arg, constraint in call.get("args", {}).items():
        with errors.collect():
            if isinstance(constraint, dict) and isinstance(constraint.get("regex"), str):
                regexes.check(*at(*here, "args", arg, "regex"), constraint["regex"])
            if props and arg not in props and tool.parameters.get("additionalProperties") in (None, False):
                raise SuiteError(
                    *at(*here, "args", arg), f"case {case_id!r}: tool {tool.name!r} has no argument {arg!r}"
                )
            why = unsatisfiable(constraint, arg, tool.parameters, validator)
            if why:
                raise SuiteError(*at(*here, "args", arg), f"case {case_id!r} can never pass: {tool.name}: {why}")


def _scaffold_message(path: Path, root: Path, lines: dict[JsonPath, int], i: int, m: dict[str, Any]) -> ScaffoldMessage:
    if "content" in m:
        # A block scalar's text starts on the line after the key.
        line = line_of(lines, ("scaffold", "messages", i, "content"))
        return ScaffoldMessage(m["role"], m["content"], f"{path}:{line}", line, str(path))
    ref = m["file"]
    line = line_of(lines, ("scaffold", "messages", i, "file"))
    # next to the suite, else in its templates/ folder; both confined to the suite root
    candidates = [resolve_in_root(path, ref, line, root=root, what="template file")]
    if not Path(ref).is_absolute():
        # only the first place must be inside the root for the error message to name it
        with contextlib.suppress(SuiteError):
            candidates.append(
                resolve_in_root(path, str(Path("templates") / ref), line, root=root, what="template file")
            )
    for c in candidates:
        if c.is_file():
            text = read_text(c, limit=MAX_TEMPLATE_BYTES, what="template")
            return ScaffoldMessage(m["role"], text, str(c), 1, str(c))
    raise SuiteError(
        path,
        line,
        f"template file {ref!r} not found (looked in {', '.join(str(c.parent) for c in candidates)})",
    )


def _validate_gate(path: Path, data: dict[str, Any], lines: dict[JsonPath, int]) -> None:
    """The ``gate:`` section's rules beyond the schema (metric names from the metric table)."""
    if "gate" not in data:
        return
    problem = gate_problem(data["gate"])
    if problem is not None:
        key, message = problem
        raise SuiteError(path, line_of(lines, ("gate", *key)), message)


_BREAK = re.compile(r"\r\n|[\r\n\x85\u2028\u2029]")  # YAML's line breaks (libyaml's line numbers)


def _without_gate(path: Path, source: str, data: dict[str, Any], lines: dict[JsonPath, int]) -> str:
    """The suite's YAML text with its top-level ``gate:`` entry cut out (unchanged without one).

    The gate's contract (floors, budgets, detect) is not suite content: a golden stays valid when
    it changes, and copies it instead. The cut takes the ``gate:`` key's lines through the last
    line of its value (indented comments included), the comment lines directly above it, and the
    blank line that separates it (the one before it, else the one after it), so that adding a
    ``gate:`` block to a suite leaves its hash as it was. What is left must read as the very
    suite without ``gate``; otherwise (an anchor defined inside ``gate:`` and used elsewhere,
    whose value would then change suite content without changing the hash) the suite is refused.
    """
    if "gate" not in data:
        return source
    key_mark: Any = None
    next_line: int | None = None
    depth = 0
    at_key = False
    value_end = -1
    inside = -1  # nesting within the gate value once its key is seen (-1: not yet)
    for ev in yaml.parse(source, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if inside >= 0:
            if isinstance(ev, yaml.CollectionStartEvent):
                inside += 1
            elif isinstance(ev, yaml.CollectionEndEvent):
                inside -= 1
            if inside == 0 and isinstance(ev, yaml.NodeEvent | yaml.CollectionEndEvent) and ev.end_mark:
                value_end = ev.end_mark.index
                inside = -2  # done; look for the next top-level key
                depth = 1
                at_key = True
            continue
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            at_key = depth == 1 and isinstance(ev, yaml.MappingStartEvent)
            continue
        if isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1
            at_key = depth == 1
            continue
        if depth == 1 and isinstance(ev, yaml.NodeEvent):
            if at_key and inside == -2 and next_line is None and ev.start_mark:
                next_line = ev.start_mark.line
            if at_key and key_mark is None and isinstance(ev, yaml.ScalarEvent) and ev.value == "gate":
                key_mark = ev.start_mark
                inside = 0
                continue
            at_key = not at_key
    rest = source
    if key_mark is not None and value_end > key_mark.index:
        rest = source[: key_mark.index] + source[value_end:]
        parts = _BREAK.split(source)
        breaks = _BREAK.findall(source)
        text_lines = [p + (breaks[i] if i < len(breaks) else "") for i, p in enumerate(parts)]
        first = key_mark.line
        if key_mark.column == 0 and (next_line is None or next_line > first):
            last = (next_line if next_line is not None else len(text_lines)) - 1

            def blank(i: int) -> bool:
                return not text_lines[i].strip()

            def outer_comment(i: int) -> bool:  # a comment at column 0 belongs to what follows
                return text_lines[i].startswith("#")

            while last > first and (blank(last) or outer_comment(last)):
                last -= 1
            while first > 0 and text_lines[first - 1].lstrip().startswith("#"):
                first -= 1
            # one separating blank line goes with the block: the one before it, else the one after
            if first > 0 and blank(first - 1):
                first -= 1
            elif last + 1 < len(text_lines) and blank(last + 1):
                last += 1
            rest = "".join(text_lines[:first] + text_lines[last + 1 :])
    try:
        left, _ = load_yaml(path, rest)
    except SuiteError:
        left = None
    if left != {k: v for k, v in data.items() if k != "gate"}:
        raise SuiteError(
            path,
            line_of(lines, ("gate",)),
            "gate: the section must stand alone (no anchor inside it used elsewhere): it is left out of the "
            "suite's content hash",
        )
    return rest


def _content_hash(source: str, scaffold: tuple[ScaffoldMessage, ...]) -> str:
    """Hash of the suite's YAML (less its ``gate:`` section, which the caller cuts out) and its
    scaffold (template files by their text); ``_with_files`` adds every other file the suite reads."""
    h = hashlib.sha256(source.encode())
    for m in scaffold:
        h.update(b"\0" + m.role.encode() + b"\0" + m.template.encode())
    return "sha256:" + h.hexdigest()[:16]


#: files ``_content_hash`` covers already: the suite itself and its template files
_HASHED_AS_TEXT = frozenset({"suite", "template"})


def _with_files(digest: str, root: Path, reads: list[tuple[Path, str, bytes]]) -> str:
    """``digest`` extended by every other file read while the suite loaded (fixture files, the
    files a schema's ``$ref`` reaches, anything read later through ``read_text``), sorted by path
    relative to the suite root, with the bytes read: a changed file is a changed suite. A suite
    that reads no such file keeps ``digest``."""
    files = sorted({(_relative(p, root), data) for p, what, data in reads if what not in _HASHED_AS_TEXT})
    if not files:
        return digest
    h = hashlib.sha256(digest.encode())
    for name, data in files:
        h.update(b"\0" + name.encode() + b"\0" + data)
    return "sha256:" + h.hexdigest()[:16]


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:  # every file a suite reads is inside its root (resolve_in_root); never a crash
        return path.resolve().as_posix()
