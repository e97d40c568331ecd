"""Every JSON Schema a suite carries, loaded one way: ``$ref`` resolved at lint, never fetched.

A suite carries JSON Schemas under the keys that ``leader_eval/suite/schema/suite.schema.json`` marks
with ``$ref: "#/$defs/json_schema"``: a tool's ``parameters`` and ``returns``, and a fixture's
``match_schema`` (in the suite or in a fixture file). Each is loaded here, by ``load_schemas``,
and by nothing else (tests/suite/test_tool_schema.py walks the suite schema so that a key added
later cannot skip this loader). One set of rules for all of them:

- A schema is Draft 2020-12 (``$schema``, where given, must say so) and must pass the
  metaschema.
- ``$ref`` may name a pointer or anchor inside the same document (``#/$defs/place``,
  ``#/definitions/x``, ``#anchor``), or a JSON or YAML file inside the suite root
  (``common.json#/$defs/place``), named relative to the file that holds the ``$ref`` and
  confined like every file a suite reads (``files.resolve_in_root``). Such files are read
  once, here, with the same bounded YAML reader as suites (at most ``MAX_REF_FILES``).
- Anything else is a ``SuiteError`` naming the file and line of the ``$ref``: a URL or any
  scheme (``https:``, ``file:``, ``urn:``), ``//host``, a query, an absolute path, a file
  outside the root or missing, a pointer to nothing or to something that is not a schema, and a
  chain of references that consumes no input and either loops (``a -> b -> a`` through ``$ref``,
  ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``, ``dependentSchemas``) or
  nests deeper than ``MAX_SCHEMA_DEPTH`` (validation would end in a RecursionError). Also
  refused: ``$id``, ``$dynamicRef``/``$dynamicAnchor``, ``$recursiveRef``/``$recursiveAnchor``,
  which would move the base URI or resolve at validation time.
- Every ``pattern`` and ``patternProperties`` key in a loaded document (the schema, every file
  its references reach, anything a pointer reaches) is linted like every suite regex: a pattern
  shaped to backtrack catastrophically is a ``SuiteError`` at its own line. Validators match
  them in bounded time (``bounded.json_schema.bounded_validator_class``; a timeout never matches).

Every reference is followed at load time exactly as validation will follow it, including
pointers into places the metaschema does not check (``#/default/x``, an unknown keyword):
what such a pointer reaches is checked like any schema. So validation never meets a reference
it cannot resolve, and never retrieves one: each validator (``LoadedSchemas.validator``) runs
over a ``referencing.Registry`` holding exactly the loaded documents, whose retrieve function
refuses every URI. Nothing is fetched from the network or read from disk after load, whatever a
schema says. The validators themselves are built in ``leader_eval.bounded.json_schema``
(``compile_validator``, which gives the same empty registry for a schema no suite loaded, and
``validator_for``, which the checks call with a tool's ``parameters``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urldefrag, urljoin, urlsplit

from leader_eval.bounded.json_schema import bind, compile_validator, empty_registry, schema_patterns
from leader_eval.bounded.limits import MAX_REF_FILES
from leader_eval.bounded.regex import regex_problem
from leader_eval.errors import SuiteError
from leader_eval.suite.files import read_text, resolve_in_root
from leader_eval.suite.yaml_source import JsonPath, line_of, load_yaml

if TYPE_CHECKING:
    from jsonschema.validators import Draft202012Validator
    from referencing import Registry

# jsonschema and referencing are heavy (~35 ms of CPU to import): imported where a schema is
# checked or loaded, so a suite without tool schemas never loads them

#: Schemas applied to one value, one inside the other, through $ref and the in-place keywords.
#: jsonschema 4.26 validates a chain of 200 ``allOf`` + ``$ref`` links (400 schemas) and ends in a
#: RecursionError at 300; real schemas stay under ten. Deeper is refused at lint, not mid-run.
MAX_SCHEMA_DEPTH = 64

#: Base of every URI the registry knows. ``.invalid`` never resolves, and nothing is fetched anyway.
BASE_URI = "https://leader-eval.invalid/"

_FORBIDDEN = ("$id", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor")
_DIALECTS = frozenset({"https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#"})
#: values that are data, never schemas (a ``$ref`` inside ``enum`` is a string to compare with)
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "dependentRequired"})
#: keywords whose value maps names to schemas: the names are never keywords (a property "enum")
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
#: the keywords the metaschema checks and ``referencing`` crawls (its DRAFT202012 specification)
_ONE_SCHEMA = frozenset(
    {
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
#: the paths (URIs) by which a suite's schemas may name their files, all files together
_MAX_ALIASES = 4 * MAX_REF_FILES
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
#: keywords applied to the same instance: a reference loop through them never consumes input
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")


@dataclass(frozen=True)
class SchemaSite:
    """One JSON Schema a suite carries, and where it is written."""

    name: str  # the key ``LoadedSchemas.validator`` knows it by (a tool name, a fixture's place)
    what: str  # how errors name it: "tool 'lookup' returns", "match_schema"
    schema: Any
    file: Path  # the file that holds it: relative refs resolve from its folder, errors name it
    lines: Mapping[JsonPath, int]  # that file's line table
    at: JsonPath = ()  # where the schema sits inside ``file``


@dataclass(frozen=True)
class LoadedSchemas:
    """Schemas and every file they reference, resolved and checked; validators never retrieve."""

    registry: Registry[Any] | None  # None: no schema was loaded (a validator gets an empty one)
    uris: Mapping[str, str]  # site name -> URI of its document
    schemas: Mapping[str, Mapping[str, Any]]
    files: tuple[Path, ...] = ()  # the ``$ref`` target files read

    def validator(self, name: str) -> Draft202012Validator:
        """A retrieval-free validator for one site's schema (build once and reuse)."""
        return compile_validator(self.schemas[name], registry=self.registry, base_uri=self.uris[name])


def load_tool_schemas(
    suite_path: Path,
    root: Path,
    tools: list[tuple[str, Mapping[str, Any], JsonPath]],
    lines: Mapping[JsonPath, int],
) -> LoadedSchemas:
    """Every tool's ``parameters``, checked; ``tools`` holds (name, parameters, path in the suite)."""
    sites = [
        SchemaSite(name, f"tool {name!r} parameters", params, suite_path, lines, where) for name, params, where in tools
    ]
    result = load_schemas(root, sites)
    # the checks validate a tool's arguments against exactly these files (validator_for)
    bind((params, result.registry, result.uris[name]) for name, params, _ in tools)
    return result


def load_schema(root: Path | None, site: SchemaSite) -> Draft202012Validator:
    """One schema, checked like every other, as a retrieval-free validator."""
    return load_schemas(root, [site]).validator(site.name)


def standalone_validator(schema: Any, what: str) -> Draft202012Validator:
    """A schema built in Python rather than read from a suite: the same checks, no files
    (``<what>`` stands in for the file in errors)."""
    return load_schema(None, SchemaSite(what, what, schema, Path(f"<{what}>"), {}, ()))


# --------------------------------------------------------------------------- the loader


@dataclass
class _Doc:
    uri: str
    contents: Any
    file: Path  # the file that holds it (for relative refs and errors)
    lines: Mapping[JsonPath, int]
    prefix: JsonPath  # where the document sits inside ``file``


def _line(doc: _Doc, path: JsonPath) -> int:
    return line_of(doc.lines, (*doc.prefix, *path))


def _uri_of(path: Path, root: Path | None) -> str:
    if root is None:
        return BASE_URI + "inline/" + quote(path.name)
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        rel = "outside-root/" + path.name
    return BASE_URI + quote(Path(rel).as_posix())


def _schemas(node: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, Mapping[str, Any]]]:
    """Every mapping in a schema that validation might treat as a schema.

    Literal data (``enum``, ``const``, ``default``, ``examples``) is skipped and the names under
    ``properties`` and the like are names, not keywords; unknown keywords are walked, so a
    ``$ref`` hidden under one is checked too (a pointer may reach it).
    """
    stack: list[tuple[JsonPath, Any]] = [(path, node)]
    while stack:
        p, n = stack.pop()
        if isinstance(n, list):
            stack.extend(((*p, i), v) for i, v in enumerate(n))
            continue
        if not isinstance(n, Mapping):
            continue
        yield p, n
        for k, v in n.items():
            if k in _DATA_KEYWORDS:
                continue
            if k in _NAMED_SCHEMAS and isinstance(v, Mapping):
                stack.extend(((*p, k, name), sub) for name, sub in v.items())
            else:
                stack.append(((*p, k), v))


def _metaschema_positions(node: Any, out: set[int]) -> None:
    """Ids of the mappings ``check_schema`` validated as schemas within ``node``."""
    stack = [node]
    while stack:
        n = stack.pop()
        if not isinstance(n, Mapping) or id(n) in out:
            continue
        out.add(id(n))
        for k, v in n.items():
            if k in _ONE_SCHEMA:
                stack.append(v)
            elif k in _SCHEMA_LISTS and isinstance(v, list):
                stack.extend(v)
            elif k in _NAMED_SCHEMAS and isinstance(v, Mapping):
                stack.extend(v.values())


def _index(doc: _Doc, out: dict[int, tuple[_Doc, JsonPath]]) -> None:
    """Where every mapping of ``doc`` sits (for the line of anything a pointer reaches)."""
    stack: list[tuple[JsonPath, Any]] = [((), doc.contents)]
    while stack:
        p, n = stack.pop()
        if isinstance(n, Mapping):
            out.setdefault(id(n), (doc, p))
            stack.extend(((*p, k), v) for k, v in n.items())
        elif isinstance(n, list):
            stack.extend(((*p, i), v) for i, v in enumerate(n))


def _check_metaschema(doc: _Doc, what: str) -> None:
    if not isinstance(doc.contents, Mapping):
        raise SuiteError(
            doc.file, _line(doc, ()), f"{what} must be a JSON Schema object, got {type(doc.contents).__name__}"
        )
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import Draft202012Validator

    try:
        Draft202012Validator.check_schema(doc.contents)
    except SchemaError as exc:
        line = _line(doc, tuple(exc.absolute_path))
        raise SuiteError(doc.file, line, f"{what} is not a valid JSON Schema: {exc.message[:200]}") from exc
    except RecursionError:
        raise SuiteError(doc.file, _line(doc, ()), f"{what} nests too deeply") from None


def _check_patterns(doc: _Doc) -> None:
    """Every ``pattern`` and ``patternProperties`` key of ``doc``, linted like every suite regex
    (they run on model output): one shaped to backtrack catastrophically is refused here, at the
    line that holds it, and the rest match in bounded time (``compile_validator``'s class)."""
    for at, pattern in schema_patterns(doc.contents):
        why = regex_problem(pattern)
        if why:
            raise SuiteError(doc.file, _line(doc, at), why)


def _check_keywords(doc: _Doc, p: JsonPath, schema: Mapping[str, Any]) -> None:
    for key in _FORBIDDEN:
        if key in schema:
            raise SuiteError(doc.file, _line(doc, (*p, key)), f"{key} is not supported in a suite's JSON Schemas")
    dialect = schema.get("$schema")
    if dialect is not None and dialect not in _DIALECTS:
        raise SuiteError(
            doc.file,
            _line(doc, (*p, "$schema")),
            f"$schema {dialect!r}: a suite's JSON Schemas are Draft 2020-12 ({min(_DIALECTS)}), no other dialect",
        )


def _ref_path(doc: _Doc, p: JsonPath, ref: Any) -> str:
    """The file part of a legal ``$ref`` (empty: inside its own document), or a ``SuiteError``."""
    line = _line(doc, (*p, "$ref"))
    if not isinstance(ref, str):
        raise SuiteError(doc.file, line, f"$ref must be a string, got {ref!r}"[:300])
    parts = urlsplit(ref)
    if parts.scheme or parts.netloc or ref.startswith("//"):
        raise SuiteError(
            doc.file,
            line,
            f"$ref {ref!r} is remote or absolute; a suite's JSON Schemas may only reference their own "
            "$defs or files inside the suite root (nothing is fetched)",
        )
    if parts.query:
        raise SuiteError(doc.file, line, f"$ref {ref!r} has a query; name a file and a #/pointer only")
    return parts.path


def load_schemas(root: Path | None, sites: Sequence[SchemaSite]) -> LoadedSchemas:
    """Check every site's schema and every file its references reach; see the module docstring.

    ``root`` is the suite root (``None``: no files may be referenced).
    """
    if not sites:
        return LoadedSchemas(None, {}, {})
    root = root.resolve() if root is not None else None
    docs: list[_Doc] = []
    uris: dict[str, str] = {}
    for site in sites:
        where = quote("/".join(str(x) for x in site.at), safe="/")
        doc = _Doc(f"{_uri_of(site.file, root)}?schema={where}", site.schema, site.file, site.lines, site.at)
        _check_metaschema(doc, site.what)
        _check_patterns(doc)
        uris[site.name] = doc.uri
        docs.append(doc)
    files: dict[Path, _Doc] = {}
    # Each document under every URI a $ref names it by: validation resolves a file's own relative
    # refs against that URI (a folder reached through a symlink keeps its name there).
    by_uri: dict[str, _Doc] = {d.uri: d for d in docs}
    queue = [(d, d.uri) for d in docs]
    while queue:
        doc, base = queue.pop()
        for p, schema in _schemas(doc.contents):
            _check_keywords(doc, p, schema)
            if "$ref" not in schema:
                continue
            rel = _ref_path(doc, p, schema["$ref"])
            if not rel:
                continue
            line = _line(doc, (*p, "$ref"))
            if root is None:
                raise SuiteError(doc.file, line, f"$ref {rel!r} names a file, and this schema has no suite folder")
            target = resolve_in_root(doc.file, unquote(rel), line, root=root, what="$ref target")
            if not target.is_file():
                raise SuiteError(doc.file, line, f"$ref target {rel!r} not found ({target})")
            if target not in files:
                if len(files) >= MAX_REF_FILES:
                    raise SuiteError(
                        doc.file, line, f"a suite's JSON Schemas reference more than {MAX_REF_FILES} files"
                    )
                contents, file_lines = load_yaml(target, read_text(target, what="$ref target"))
                files[target] = _Doc(_uri_of(target, root), contents, target, file_lines, ())
                _check_metaschema(files[target], f"$ref target {target.name}")
                _check_patterns(files[target])
            alias = urljoin(base, rel)
            known = by_uri.get(alias)
            if known is None:
                if len(by_uri) >= len(docs) + _MAX_ALIASES:  # a symlink loop names one file endlessly
                    raise SuiteError(doc.file, line, f"$ref {rel!r}: more than {_MAX_ALIASES} paths to schema files")
                by_uri[alias] = files[target]
                queue.append((files[target], alias))
            elif known is not files[target]:
                raise SuiteError(
                    doc.file, line, f"$ref {rel!r} names {target}, and another $ref names another file by that path"
                )
    from referencing import Resource
    from referencing.jsonschema import DRAFT202012

    named = list(by_uri.items())
    every = [*docs, *files.values()]
    registry = (
        empty_registry()
        .with_resources((uri, Resource.from_contents(d.contents, DRAFT202012)) for uri, d in named)
        .crawl()
    )
    index: dict[int, tuple[_Doc, JsonPath]] = {}
    checked: set[int] = set()
    for d in every:
        _index(d, index)
        _metaschema_positions(d.contents, checked)
    _follow_refs(named, registry, index, checked)
    _check_depth(named, registry, index)
    return LoadedSchemas(registry, uris, {s.name: s.schema for s in sites}, tuple(files))


def _target_base(base: str, ref: str) -> str:
    """The base URI of what ``ref`` reaches from ``base``: its document's (no ``$id`` moves it)."""
    return urldefrag(urljoin(base, ref)).url


def _follow_refs(
    named: Iterable[tuple[str, _Doc]],
    registry: Registry[Any],
    index: Mapping[int, tuple[_Doc, JsonPath]],
    checked: set[int],
) -> None:
    """Resolve every ``$ref`` from every document as validation will, and check what it reaches."""
    from referencing.exceptions import Unresolvable

    seen: set[tuple[int, str]] = set()
    stack: list[tuple[Any, str, _Doc, JsonPath]] = [(d.contents, uri, d, ()) for uri, d in named]
    while stack:
        node, base, doc, at = stack.pop()
        if not isinstance(node, Mapping) or (id(node), base) in seen:
            continue
        seen.add((id(node), base))
        resolver = registry.resolver(base_uri=base)
        for p, schema in _schemas(node, at):
            _check_keywords(doc, p, schema)
            if "$ref" not in schema:
                continue
            ref = schema["$ref"]
            _ref_path(doc, p, ref)
            line = _line(doc, (*p, "$ref"))
            try:
                target = resolver.lookup(ref).contents
            except Unresolvable as exc:
                raise SuiteError(doc.file, line, f"$ref {ref!r} points to nothing ({type(exc).__name__})") from None
            if isinstance(target, bool):
                continue
            if not isinstance(target, Mapping):
                raise SuiteError(doc.file, line, f"$ref {ref!r} points to a {type(target).__name__}, not a schema")
            tdoc, tat = index.get(id(target), (doc, (*p, "$ref")))
            if id(target) not in checked:
                # a pointer into data or an unknown keyword: the metaschema never saw it
                there = _Doc(tdoc.uri, target, tdoc.file, tdoc.lines, (*tdoc.prefix, *tat))
                _check_metaschema(there, f"$ref {ref!r} target")
                _check_patterns(there)
                _metaschema_positions(target, checked)
            stack.append((target, _target_base(base, ref), tdoc, tat))


def _check_depth(
    named: Iterable[tuple[str, _Doc]], registry: Registry[Any], index: Mapping[int, tuple[_Doc, JsonPath]]
) -> None:
    """Refuse references that validate the same instance again and again without consuming any of it:
    a loop (validation never ends) or a chain deeper than ``MAX_SCHEMA_DEPTH`` (a RecursionError)."""
    height: dict[tuple[int, str], int] = {}
    named = list(named)
    first = named[0][1]

    def ref_line(schema: Mapping[str, Any]) -> tuple[Path, int | None]:
        if id(schema) not in index:
            return first.file, None
        doc, at = index[id(schema)]
        return doc.file, _line(doc, (*at, "$ref") if "$ref" in schema else at)

    def in_place(schema: Mapping[str, Any], base: str) -> Iterator[tuple[Any, str]]:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield registry.resolver(base_uri=base).lookup(ref).contents, _target_base(base, ref)
        for kw in _IN_PLACE_LISTS:
            subs = schema.get(kw)
            for sub in subs if isinstance(subs, list) else ():
                yield sub, base
        for kw in _IN_PLACE_ONE:
            yield schema.get(kw), base
        deps = schema.get("dependentSchemas")
        if isinstance(deps, Mapping):
            for sub in deps.values():
                yield sub, base

    def visit(schema: Any, base: str, on_path: list[Mapping[str, Any]]) -> int:
        if not isinstance(schema, Mapping):
            return 0
        key = (id(schema), base)
        if key in height:
            return height[key]
        if any(s is schema for s in on_path):
            closing = schema if "$ref" in schema else on_path[-1]
            file, line = ref_line(closing)
            raise SuiteError(
                file, line, f"$ref {closing.get('$ref', '?')!r} is part of a reference cycle that never consumes input"
            )
        if len(on_path) >= MAX_SCHEMA_DEPTH:
            file, line = ref_line(on_path[-1])
            raise SuiteError(
                file,
                line,
                f"schemas applied to one value nest more than {MAX_SCHEMA_DEPTH} deep through $ref, allOf, "
                "anyOf, oneOf, not, if/then/else",
            )
        on_path.append(schema)
        h = 1 + max((visit(sub, b, on_path) for sub, b in in_place(schema, base)), default=0)
        on_path.pop()
        height[key] = h
        return h

    for uri, doc in named:
        for _p, schema in _schemas(doc.contents):
            visit(schema, uri, [])
