"""The rules of docs/architecture.md, checked on the source by every test run (so by `.ci/run`).

import-linter's contracts (pyproject.toml ``[tool.importlinter]``; `lint-imports` prints the same
report by hand) hold the layers and the scoring/sampling independence. The other tests hold what
a contract cannot express: no import cycle among modules
(every import statement counts: function-level and TYPE_CHECKING ones too, so no cycle hides in
a lazy import), no private name crosses a package, the pure packages do no I/O, and the top level
keeps only the modules the house plan lists. That only ``store/`` names a run file is
tests/store/test_run_store.py's test (it also reads string fragments, not only whole names).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "leader_eval"

# What may sit at the top of the package (docs/architecture.md, "The tree"); everything else lives
# in the subpackage of its layer. _deprecated holds the 0.2 paths for one release (CHANGELOG.md).
TOP_LEVEL = {
    "__init__.py",
    "__main__.py",
    "_deprecated.py",
    "errors.py",
    "inert.py",
    "py.typed",
    "secrets.py",
    "types.py",
    "version.py",
}
PURE = ("checks", "protocols", "scoring", "stats")  # no I/O: a verdict is a function of its inputs
# Calls that read or write files, processes or sockets; what a pure package must never call.
IO_CALLS = {
    "open",
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "mkdir",
    "unlink",
    "rename",
    "replace_file",
    "rmtree",
    "iterdir",
    "glob",
    "rglob",
    "urlopen",
    "system",
    "popen",
    "Popen",
    "run_subprocess",
}
IO_MODULES = {"subprocess", "socket", "shutil", "urllib.request", "http.client", "httpx", "requests"}


def test_the_import_linter_contracts_hold(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from importlinter.cli import lint_imports

    monkeypatch.chdir(ROOT)  # the contracts are read from ./pyproject.toml
    status = lint_imports(no_cache=True, no_logo=True)
    assert status == 0, capsys.readouterr().out


def _modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _package_of(module: str) -> str:
    """The subpackage of a module (``leader_eval.decide.golden`` -> ``leader_eval.decide``); a
    top-level module is its own package."""
    parts = module.split(".")
    if len(parts) < 2 or not (PACKAGE / parts[1]).is_dir():
        return "leader_eval"  # the top level's own modules
    return ".".join(parts[:2])


def test_the_import_graph_has_no_cycle() -> None:
    graph = grimp.build_graph("leader_eval", include_external_packages=False, exclude_type_checking_imports=False)
    edges: dict[str, set[str]] = {}
    for m in graph.modules:
        for d in graph.find_modules_directly_imported_by(m):
            # a package's __init__ re-exporting its own submodules is how a package shows its API
            if d.startswith(m + ".") and graph.find_children(m):
                continue
            edges.setdefault(m, set()).add(d)
    cycles = []
    for m in sorted(graph.modules):
        for d in sorted(edges.get(m, ())):
            if d == m:
                continue
            if graph.find_shortest_chain(importer=d, imported=m) is not None and m in _reachable(edges, d):
                cycles.append(f"{m} -> {d} -> ... -> {m}")
    assert not cycles, "\n".join(cycles)


def _reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for d in edges.get(todo.pop(), ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def test_no_private_name_crosses_a_package() -> None:
    crossings = []
    for module, path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("leader_eval"):
                source = node.module
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    private_module = any(p.startswith("_") and not p.startswith("__") for p in source.split(".")[1:])
                    if (private or private_module) and _package_of(target) != _package_of(module):
                        crossings.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target}")
    assert not crossings, "\n".join(crossings)


def test_the_top_level_keeps_only_the_listed_modules() -> None:
    found = {p.name for p in PACKAGE.iterdir() if p.is_file() and p.suffix in (".py", ".typed")}
    assert found <= TOP_LEVEL, sorted(found - TOP_LEVEL)


@pytest.mark.parametrize("package", PURE)
def test_the_pure_packages_do_no_io(package: str) -> None:
    calls = []
    for module, path, tree in _modules():
        if not module.startswith(f"leader_eval.{package}"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in IO_CALLS:
                    calls.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}()")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                calls += [f"{path.relative_to(ROOT)}:{node.lineno}: import {m}" for m in mods if m in IO_MODULES]
    assert not calls, "\n".join(calls)


def test_numpy_is_imported_only_through_bounded_numeric() -> None:
    """The first numpy import in a process sets how long OpenBLAS's idle threads spin
    (``bounded/numeric.py``): a module importing numpy itself would make that depend on which
    path came first. A type-only import does not load numpy and is allowed."""
    direct = []
    for module, path, tree in _modules():
        if module == "leader_eval.bounded.numeric":
            continue
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for stmt in node.body
            for n in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            direct += [
                f"{path.relative_to(ROOT)}:{node.lineno}: import {m}" for m in mods if m.split(".")[0] == "numpy"
            ]
    assert not direct, "\n".join(direct)
