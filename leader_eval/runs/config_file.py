"""One configuration for the CLI and the pytest plugin: ``[tool.leader-eval]`` in ``pyproject.toml``
or a ``leader-eval.toml`` (docs/configuration.md, docs/design-0.3.md section 15).

Lookup: from a start folder (the CLI: the working directory; pytest: its rootdir) upward, the
first folder holding a ``leader-eval.toml`` or a ``pyproject.toml`` with a ``[tool.leader-eval]``
table, never above the repository's root (a folder with ``.git``); in one folder
``leader-eval.toml`` wins. A ``leader-eval.toml`` holds the keys at its top
level. Keys are the options' CLI names without dashes (``api-mode``, ``golden-dir``), read from
the same table as ``leader-eval run`` and ``--le-*`` (``options.SAMPLING_OPTIONS`` and
``options.PROJECT_OPTIONS``), each value through the same converter.

What a file may not set: a suite's own measurement (``samples``, ``seed``, ``temperature``,
``max-tokens``, ``protocol``: on the command line each beats the suite's, so a file would
silently change every suite's sampling), ``label`` (one run's name) and ``cache-id`` (a promise about
one server's weights that a file would keep making after they change). Those are errors naming
the flag to use instead. Ranking, a later source winning: default < file < pytest ini
(``leader_eval_*``, pytest only) < command line. Model roles and check functions
(``[tool.leader-eval.model-roles]``, ``[tool.leader-eval.check-functions]``) are the lowest rank
of ``trusted.assemble``.

tomllib reports no line numbers, so an error's ``FILE:LINE`` is found by scanning the text for
the key under its table header (``key_line``; one regex per line, linear).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from leader_eval.errors import LeaderEvalError
from leader_eval.runs.model_spec import convert_value, entry_from_table, parse_entry, suggestion
from leader_eval.runs.options import PROJECT_OPTIONS, SAMPLING_OPTIONS, Option
from leader_eval.runs.trusted import NamedCheck, NamedModel, Trusted, TrustedError, check_name, check_target

CONFIG_NAME = "leader-eval.toml"
PYPROJECT = "pyproject.toml"
TOOL_TABLE = ("tool", "leader-eval")
MAX_CONFIG_BYTES = 1 << 20

#: options a file may not set, and why (the error names the flag to use instead)
REFUSED: dict[str, str] = {
    **{
        name: "a suite's own sampling setting: a file would silently beat every suite's; "
        f"set it in the suite or pass --{name} (--le-{name})"
        for name in ("samples", "seed", "temperature", "max-tokens", "protocol")
    },
    "label": "names one run: a file would give every model's runs one name; pass --label (--le-label)",
    "cache-id": "vouches that a remote model's weights never change: a file would keep serving old "
    "samples after the weights behind the URL change; pass --cache-id (--le-cache-id) per run",
}

#: every option a file may set, by its key
FILE_OPTIONS: dict[str, Option] = {
    o.name: o for o in (*SAMPLING_OPTIONS, *PROJECT_OPTIONS) if o.name not in REFUSED and not o.repeat
}
FILE_OPTIONS["model"] = next(o for o in SAMPLING_OPTIONS if o.name == "model")
#: the other keys: suite globs (pytest's ``leader_eval_suites``) and the trusted-name tables
SUITES_KEY = "suites"
ROLES_KEY = "model-roles"
CHECKS_KEY = "check-functions"
OTHER_KEYS = (SUITES_KEY, ROLES_KEY, CHECKS_KEY)


class ConfigError(LeaderEvalError):
    """A bad configuration file: ``FILE:LINE key: what is wrong`` (exit 2)."""


@dataclass
class ConfigFile:
    """A configuration file's settings, converted; ``lines`` give each key's line for messages."""

    path: Path
    values: dict[str, Any] = field(default_factory=dict)  # option values by dest
    lines: dict[str, int] = field(default_factory=dict)  # by key path ("model", "model-roles.grader")
    suites: list[str] | None = None
    trusted: Trusted = field(default_factory=Trusted)

    @property
    def display(self) -> str:
        return display_path(self.path)

    def where(self, key: str) -> str:
        """``pyproject.toml:12``: where ``key`` is set."""
        return f"{self.display}:{self.lines.get(key, 1)}"

    def source(self, dest: str) -> str | None:
        """Where the option ``dest`` was set, or None when the file does not set it."""
        if dest not in self.values:
            return None
        return self.where(dest.replace("_", "-"))


def display_path(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return rel if not rel.startswith("..") else str(path)


def find_config(start: Path) -> Path | None:
    """The configuration file for ``start``: the first folder upward with a ``leader-eval.toml``
    or a ``pyproject.toml`` holding ``[tool.leader-eval]``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        own = folder / CONFIG_NAME
        if own.is_file():
            return own
        pyproject = folder / PYPROJECT
        if pyproject.is_file() and _has_tool_table(pyproject):
            return pyproject
        if (folder / ".git").exists():
            # the repository's root ends the search: a file in a folder above a clone (someone's
            # home, a CI workspace) would silently change this project's gate
            return None
    return None


def _has_tool_table(path: Path) -> bool:
    text = _read(path)
    if "leader-eval" not in text:  # not ours: a malformed pyproject of another tool is not our error
        return False
    data = _parse(path, text)
    tool = data.get("tool")
    return isinstance(tool, dict) and TOOL_TABLE[1] in tool


def _read(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{display_path(path)}:1: larger than {MAX_CONFIG_BYTES:,} bytes")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{display_path(path)}:1: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ConfigError(f"{display_path(path)}:1: cannot read: {exc.strerror or exc}") from None


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ConfigError(f"{display_path(path)}:1: nests too deeply to read") from None
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends "(at line N, column M)": keep it, in FILE:LINE form
        m = re.search(r"\(at line (\d+), column \d+\)$", str(exc))
        line = m.group(1) if m else "1"
        what = str(exc)[: m.start()].strip() if m else str(exc)
        raise ConfigError(f"{display_path(path)}:{line}: not valid TOML: {what}") from None


def load_config(start: Path | None = None) -> ConfigFile | None:
    """The configuration in force for ``start`` (default: the working directory), or None."""
    path = find_config(start or Path.cwd())
    return read_config(path) if path is not None else None


def read_config(path: Path) -> ConfigFile:
    """Read and check one configuration file; ``ConfigError`` (exit 2) at the first bad key."""
    text = _read(path)
    data = _parse(path, text)
    table_path: tuple[str, ...] = () if path.name == CONFIG_NAME else TOOL_TABLE
    table: Any = data
    for part in table_path:
        table = table.get(part, {}) if isinstance(table, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{display_path(path)}:{key_line(text, (), 'tool')} tool.leader-eval: not a table")
    out = ConfigFile(path)

    def fail(key: str, message: str) -> ConfigError:
        line = _line(text, table_path, key)
        out.lines[key] = line
        return ConfigError(f"{out.display}:{line} {key}: {message}")

    for key, raw in table.items():
        out.lines[key] = _line(text, table_path, key)
        if key in REFUSED:
            raise fail(key, f"not allowed in a configuration file ({REFUSED[key]})")
        opt = FILE_OPTIONS.get(key)
        if opt is not None:
            if opt.name == "model" and not isinstance(raw, str):
                raise fail(key, "one model spec (a string); a matrix is given with --model on the command line")
            if opt.name == "model" and not _bare_spec(raw):
                raise fail(key, "one model spec, without options: set each option as a key of its own")
            try:
                out.values[opt.dest] = convert_value(opt, raw, where="x")
            except TrustedError as exc:
                raise fail(key, str(exc).removeprefix("x: ")) from None
            continue
        if key == SUITES_KEY:
            if not (isinstance(raw, list) and raw and all(isinstance(g, str) and g.strip() for g in raw)):
                raise fail(key, 'a list of globs, e.g. ["evals/**/*.yaml"]')
            out.suites = [str(g) for g in raw]
        elif key == ROLES_KEY:
            out.trusted.models.update(_roles(raw, text, table_path, out, fail))
        elif key == CHECKS_KEY:
            out.trusted.checks.update(_checks(raw, text, table_path, out, fail))
        else:
            known = [*FILE_OPTIONS, *OTHER_KEYS, *REFUSED]
            raise fail(key, f"unknown key{suggestion(str(key), known)}")
    return out


def _bare_spec(text: str) -> bool:
    try:
        return parse_entry(text, where="model") == {"model": text.strip()}
    except TrustedError:
        return False


def _roles(raw: Any, text: str, table_path: tuple[str, ...], out: ConfigFile, fail: Any) -> dict[str, NamedModel]:
    if not isinstance(raw, dict):
        raise fail(ROLES_KEY, 'a table of NAME = "SPEC [--flag value ...]" or NAME = {model = "SPEC", ...}')
    roles: dict[str, NamedModel] = {}
    for name, value in raw.items():
        key = f"{ROLES_KEY}.{name}"
        line = key_line(text, (*table_path, ROLES_KEY), name) or out.lines[ROLES_KEY]
        out.lines[key] = line
        where = f"{out.display}:{line} {key}"
        try:
            check_name(name, where=where)
            if isinstance(value, str):
                values = parse_entry(value, where=where)
            elif isinstance(value, dict):
                values = entry_from_table(value, where=where)
            else:
                raise TrustedError(f'{where}: a string "SPEC [--flag value ...]" or a table {{model = "SPEC", ...}}')
        except TrustedError as exc:
            raise ConfigError(str(exc)) from None
        roles[name] = NamedModel(name, values, f"{out.display}:{line}")
    return roles


def _checks(raw: Any, text: str, table_path: tuple[str, ...], out: ConfigFile, fail: Any) -> dict[str, NamedCheck]:
    if not isinstance(raw, dict):
        raise fail(CHECKS_KEY, 'a table of NAME = "MODULE:FUNCTION"')
    checks: dict[str, NamedCheck] = {}
    for name, value in raw.items():
        key = f"{CHECKS_KEY}.{name}"
        line = key_line(text, (*table_path, CHECKS_KEY), name) or out.lines[CHECKS_KEY]
        out.lines[key] = line
        where = f"{out.display}:{line} {key}"
        try:
            check_name(name, where=where)
            checks[name] = NamedCheck(name, check_target(value, where=where), f"{out.display}:{line}")
        except TrustedError as exc:
            raise ConfigError(str(exc)) from None
    return checks


_HEADER = re.compile(r"^\s*\[\s*([^\[\]#]*?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*'))*)\s*="""
)
_PART = re.compile(r"""[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*'""")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip("\"'") for p in _PART.findall(dotted))


def key_line(text: str, table: Sequence[str], key: str) -> int:
    """The 1-based line where ``key`` of ``table`` is set (a ``[table]`` header and ``key =``, a
    dotted ``key`` under a parent table, or ``[table.key]``); 0 when not found."""
    return _key_lines(text).get((*table, key), 0)


@lru_cache(maxsize=4)
def _key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Every key path the text sets (and each path's prefixes) -> its first line: one pass, so a
    file with many keys costs one scan, not one per key."""
    out: dict[tuple[str, ...], int] = {}
    current: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            current = _parts(header.group(1))
            full = current
        else:
            m = _KEY.match(line)
            if not m:
                continue
            full = (*current, *_parts(m.group(1)))
        for end in range(1, len(full) + 1):
            out.setdefault(full[:end], number)
    return out


def _line(text: str, table: Sequence[str], key: str) -> int:
    """``key_line``, else the table's header line, else 1 (a message always names a line)."""
    return key_line(text, table, key) or (key_line(text, table[:-1], table[-1]) if table else 0) or 1
