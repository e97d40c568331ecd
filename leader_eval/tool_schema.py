"""Tool contracts' JSON Schemas: ``$ref`` resolved at load time, never fetched, never at scoring.

A tool's ``parameters`` may use ``$ref`` to

- a pointer or anchor inside the same schema (``#/$defs/place``, ``#/definitions/x``), or
- a JSON or YAML file next to the suite (``common.json#/$defs/place``), named relative to the
  file that holds the ``$ref`` and confined to the suite root like every file a suite reads
  (suite_files.resolve_in_root). Such files are loaded here, once, with the same bounded YAML
  reader as suites.

Anything else is a ``SuiteError`` naming the file and line of the ``$ref``: a URL or any
scheme (``https:``, ``file:``, ``urn:``), an absolute path, a file outside the root, a pointer to
nothing, and reference cycles that consume no input (``a -> b -> a`` through ``$ref``,
``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``); also ``$id``,
``$dynamicRef``/``$dynamicAnchor`` and ``$recursiveRef``/``$recursiveAnchor``, which would move
the base URI or resolve at validation time.

Validation then uses ``ToolSchemas.validator(name)``: a Draft 2020-12 validator over a
``referencing.Registry`` that holds exactly the loaded documents and whose retrieve function
refuses every URI, so scoring can never touch the network or the file system.
(``compile_validator`` gives the same for a schema with no suite.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit

import jsonschema
from jsonschema.validators import Draft202012Validator
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012

from leader_eval.errors import SuiteError
from leader_eval.limits import MAX_REF_FILES

#: Base of every URI the registry knows. ``.invalid`` never resolves, and nothing is fetched anyway.
BASE_URI = "https://leader-eval.invalid/"

_FORBIDDEN = ("$id", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor")
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")

JsonPath = tuple[str | int, ...]


def refuse_retrieval(uri: str) -> Resource[Any]:
    """The registry's retrieve function: every URI not loaded at lint time is refused."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


def empty_registry() -> Registry[Any]:
    return Registry(retrieve=refuse_retrieval)  # type: ignore[call-arg]


def compile_validator(
    schema: Mapping[str, Any], *, registry: Registry[Any] | None = None, base_uri: str | None = None
) -> Draft202012Validator:
    """A Draft 2020-12 validator (format checking on) that never retrieves a reference.

    ``validator.schema is schema`` holds, so callers may cache by identity.
    """
    registry = registry if registry is not None else empty_registry()
    checker = Draft202012Validator.FORMAT_CHECKER
    cls = _bounded_class()  # ``pattern`` & co. match in bounded time (suite_regex.py)
    if not base_uri:
        return cls(schema, registry=registry, format_checker=checker)
    try:
        # resolve relative refs against the document's URI without rewriting the schema
        return cls(schema, registry=registry, format_checker=checker, _resolver=registry.resolver(base_uri=base_uri))
    except TypeError:  # a jsonschema without the _resolver field: give the root its base URI instead
        return cls({**schema, "$id": base_uri}, registry=registry, format_checker=checker)


@lru_cache(maxsize=1)
def _bounded_class() -> Any:
    from leader_eval.suite_regex import bounded_validator_class

    return bounded_validator_class(Draft202012Validator)


_BOUND: dict[int, tuple[Mapping[str, Any], ToolSchemas, str]] = {}


def validator_for(schema: Mapping[str, Any]) -> Draft202012Validator:
    """The retrieval-free validator for ``schema``: bound to its suite's files if a suite loaded it.

    ``checks/toolcall.py`` calls this with a tool's ``parameters`` dict; a schema no suite loaded
    (the Python API, tests) gets ``compile_validator(schema)``: same rules, no files.
    """
    entry = _BOUND.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1].validator(entry[2])
    return compile_validator(schema)


@dataclass(frozen=True)
class ToolSchemas:
    """The suite's tool schemas and every file they reference, resolved and checked."""

    registry: Registry[Any]
    uris: Mapping[str, str]  # tool name -> URI of its parameters document
    schemas: Mapping[str, Mapping[str, Any]]

    def validator(self, tool_name: str) -> Draft202012Validator:
        """A retrieval-free validator for one tool's arguments (build once per tool and reuse)."""
        return compile_validator(self.schemas[tool_name], registry=self.registry, base_uri=self.uris[tool_name])


@dataclass
class _Doc:
    uri: str
    contents: Any
    file: Path  # the file that holds it (for relative refs and errors)
    lines: Mapping[JsonPath, int]
    prefix: JsonPath  # where the document sits inside ``file``


def _line(doc: _Doc, path: JsonPath) -> int:
    p = (*doc.prefix, *path)
    while p and p not in doc.lines:
        p = p[:-1]
    return doc.lines.get(p, 1)


def _uri_of(path: Path, root: Path) -> str:
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        rel = "outside-root/" + path.name
    return BASE_URI + quote(Path(rel).as_posix())


def _walk(node: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, Mapping[str, Any]]]:
    """Every mapping in a schema document, skipping literal data (enum, const, default, examples)."""
    stack: list[tuple[JsonPath, Any]] = [(path, node)]
    while stack:
        p, n = stack.pop()
        if isinstance(n, Mapping):
            yield p, n
            for k, v in n.items():
                if k not in _DATA_KEYWORDS:
                    stack.append(((*p, k), v))
        elif isinstance(n, list):
            stack.extend(((*p, i), v) for i, v in enumerate(n))


def load_tool_schemas(
    suite_path: Path,
    root: Path,
    tools: list[tuple[str, Mapping[str, Any], JsonPath]],
    lines: Mapping[JsonPath, int],
) -> ToolSchemas:
    """Check every tool's schema references; ``tools`` holds (name, parameters, path in the suite)."""
    from leader_eval.suite_files import read_text, resolve_in_root
    from leader_eval.suite_yaml import load_yaml

    suite_uri = _uri_of(suite_path.resolve(), root)
    registry = empty_registry()
    docs: list[_Doc] = []
    uris: dict[str, str] = {}
    for name, params, where in tools:
        uri = f"{suite_uri}?tool={quote(name, safe='')}"
        uris[name] = uri
        docs.append(_Doc(uri, params, suite_path, lines, where))
    files: dict[Path, _Doc] = {}
    queue = list(docs)
    while queue:
        doc = queue.pop()
        registry = registry.with_resource(doc.uri, Resource.from_contents(doc.contents, DRAFT202012))
        for p, schema in _walk(doc.contents):
            for key in _FORBIDDEN:
                if key in schema:
                    raise SuiteError(doc.file, _line(doc, (*p, key)), f"{key} is not supported in tool schemas")
            ref = schema.get("$ref")
            if ref is None:
                continue
            line = _line(doc, (*p, "$ref"))
            if not isinstance(ref, str):
                raise SuiteError(doc.file, line, f"$ref must be a string, got {ref!r}")
            parts = urlsplit(ref)
            if parts.scheme or parts.netloc or ref.startswith("//"):
                raise SuiteError(
                    doc.file,
                    line,
                    f"$ref {ref!r} is remote or absolute; tool schemas may only reference their own $defs "
                    "or files next to the suite",
                )
            if not parts.path:
                continue
            target = resolve_in_root(doc.file, unquote(parts.path), line, root=root, what="$ref target")
            if not target.is_file():
                raise SuiteError(doc.file, line, f"$ref target {parts.path!r} not found ({target})")
            alias = urljoin(doc.uri, parts.path)
            if target not in files:
                if len(files) >= MAX_REF_FILES:
                    raise SuiteError(doc.file, line, f"tool schemas reference more than {MAX_REF_FILES} files")
                contents, file_lines = load_yaml(target, read_text(target, what="$ref target"))
                _check_schema(target, contents, file_lines)
                files[target] = _Doc(_uri_of(target, root), contents, target, file_lines, ())
                queue.append(files[target])
            registry = registry.with_resource(alias, Resource.from_contents(files[target].contents, DRAFT202012))
    for f in files.values():
        registry = registry.with_resource(f.uri, Resource.from_contents(f.contents, DRAFT202012))
    registry = registry.crawl()
    for doc in [*docs, *files.values()]:
        _check_refs(doc, registry)
    _check_cycles(docs, registry, [*docs, *files.values()])
    result = ToolSchemas(registry, uris, {name: params for name, params, _ in tools})
    if len(_BOUND) > 4096:  # a long-lived process loading many suites
        _BOUND.clear()
    for name, params, _ in tools:
        _BOUND[id(params)] = (params, result, name)
    return result


def _check_schema(path: Path, contents: Any, lines: Mapping[JsonPath, int]) -> None:
    try:
        Draft202012Validator.check_schema(contents)
    except jsonschema.exceptions.SchemaError as exc:
        doc = _Doc("", contents, path, lines, ())
        raise SuiteError(path, _line(doc, tuple(exc.absolute_path)), f"not a valid JSON Schema: {exc.message}") from exc


def _check_refs(doc: _Doc, registry: Registry[Any]) -> None:
    resolver = registry.resolver(base_uri=doc.uri)
    for p, schema in _walk(doc.contents):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except Unresolvable as exc:
                raise SuiteError(
                    doc.file, _line(doc, (*p, "$ref")), f"$ref {ref!r} points to nothing ({type(exc).__name__})"
                ) from exc


def _check_cycles(roots: list[_Doc], registry: Registry[Any], all_docs: list[_Doc]) -> None:
    """A ``$ref`` loop that validates the same instance again without consuming any of it."""
    site: dict[int, tuple[Path, int, str]] = {}
    for doc in all_docs:
        for p, schema in _walk(doc.contents):
            if isinstance(schema.get("$ref"), str):
                site[id(schema)] = (doc.file, _line(doc, (*p, "$ref")), schema["$ref"])
    safe: set[int] = set()

    def visit(schema: Any, resolver: Any, on_path: list[int]) -> None:
        if not isinstance(schema, Mapping) or id(schema) in safe:
            return
        if id(schema) in on_path:
            file, line, closing = site.get(id(schema), site.get(on_path[-1], (roots[0].file, 1, "?")))
            raise SuiteError(file, line, f"$ref {closing!r} is part of a reference cycle that never consumes input")
        on_path.append(id(schema))
        ref = schema.get("$ref")
        if isinstance(ref, str):
            resolved = resolver.lookup(ref)
            visit(resolved.contents, resolved.resolver, on_path)
        for kw in _IN_PLACE_LISTS:
            for sub in schema.get(kw, []) if isinstance(schema.get(kw), list) else []:
                visit(sub, resolver, on_path)
        for kw in _IN_PLACE_ONE:
            visit(schema.get(kw), resolver, on_path)
        deps = schema.get("dependentSchemas")
        if isinstance(deps, Mapping):
            for sub in deps.values():
                visit(sub, resolver, on_path)
        on_path.pop()
        safe.add(id(schema))

    for doc in all_docs:
        resolver = registry.resolver(base_uri=doc.uri)
        for _p, schema in _walk(doc.contents):
            visit(schema, resolver, [])
