"""Files a suite refers to: confined to the suite root, read as bounded UTF-8 text.

The suite root is the nearest ancestor folder of the (symlink-resolved) suite file that holds
``pyproject.toml`` or ``.git``, else the suite's own folder; ``--suite-root`` / ``root=``
overrides it. Every file a suite names (scaffold ``file:``, a tool contract's ``$ref`` target, an
episode fixture) is resolved relative to the file that names it, after symlinks, and must lie
inside the root. Absolute paths are refused. So a suite can read ``../templates/x.j2`` or a
project's top-level ``fixtures/``, and never ``/proc/self/environ`` or ``~/.aws/credentials``.

Text files are read as UTF-8 (a UTF-8 byte-order mark is dropped); UTF-16/UTF-32 files and
undecodable bytes are refused with the line of the first bad byte, and files over the size bound
(``limits.MAX_SUITE_BYTES`` for suites, ``limits.MAX_TEMPLATE_BYTES`` for templates) are refused
before they are read in full. While a suite loads, every file read here is recorded with its bytes
(``recording_reads``): ``load_suite`` puts each one in the suite's content hash.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from leader_eval.bounded.limits import MAX_SUITE_BYTES
from leader_eval.errors import SuiteError

_ROOT_MARKERS = ("pyproject.toml", ".git")
_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


#: every file read while a suite loads, as (path, what, bytes read): ``recording_reads`` sets it
_READS: ContextVar[list[tuple[Path, str, bytes]] | None] = ContextVar("leader_eval_suite_reads", default=None)


@contextmanager
def recording_reads() -> Iterator[list[tuple[Path, str, bytes]]]:
    """Record every file ``read_text`` reads inside the block, with the exact bytes it parsed
    (``load_suite``: every file a suite reads is part of its content hash, whatever reads it)."""
    reads: list[tuple[Path, str, bytes]] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def suite_root(suite_path: str | Path) -> Path:
    """The folder every file a suite references must lie in (see the module docstring)."""
    folder = Path(suite_path).resolve().parent
    for candidate in (folder, *folder.parents):
        if any((candidate / m).exists() for m in _ROOT_MARKERS):
            return candidate
    return folder


def resolve_in_root(
    suite_path: str | Path, ref: str, line: int | None, *, root: str | Path | None = None, what: str = "file"
) -> Path:
    """``ref`` as named in ``suite_path`` at ``line``, resolved inside the suite root, or a ``SuiteError``.

    ``ref`` is relative to the folder of ``suite_path`` (the file that names it). The result is
    symlink-resolved; it need not exist (callers say what is missing).
    """
    base = Path(root).resolve() if root is not None else suite_root(suite_path)
    if not isinstance(ref, str) or not ref.strip():
        raise SuiteError(suite_path, line, f"{what} path must be a non-empty string")
    if "\0" in ref:
        raise SuiteError(suite_path, line, f"{what} path {ref!r} holds a NUL byte")
    if os.path.isabs(ref) or ref.startswith("~") or Path(ref).drive:
        raise SuiteError(
            suite_path, line, f"{what} {ref!r} is an absolute path; name it relative to the suite (inside {base})"
        )
    target = (Path(suite_path).resolve().parent / ref).resolve()
    if not target.is_relative_to(base):
        raise SuiteError(
            suite_path,
            line,
            f"{what} {ref!r} resolves to {target}, outside the suite root {base} (use --suite-root to widen it)",
        )
    return target


def read_text(
    path: str | Path,
    *,
    limit: int = MAX_SUITE_BYTES,
    what: str = "suite",
    named_in: str | None = None,
    line: int | None = None,
) -> str:
    """Read ``path`` as UTF-8 text with a size bound; any problem is a one-line ``SuiteError``.

    ``named_in``/``line``: where the file was referenced, for errors about a missing file.
    """
    p = Path(path)
    where, at = (named_in, line) if named_in else (p, None)
    try:
        if p.is_dir():
            raise SuiteError(where, at, f"{what} {p} is a directory, not a file")
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except SuiteError:
        raise
    except OSError as exc:
        raise SuiteError(where, at, f"cannot read {what} {p}: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise SuiteError(p, None, f"{what} file is over {limit:,} bytes")
    text = decode_utf8(p, data, what)
    reads = _READS.get()
    if reads is not None:
        reads.append((p, what, data))
    return text


def read_bytes(path: str | Path, *, limit: int, what: str, named_in: str | Path, line: int | None) -> bytes:
    """Read ``path`` (a regular file, never through a symlink) in full up to ``limit`` bytes and
    record it for the suite's content hash as ``read_text`` does; any problem is a ``SuiteError``
    at ``named_in``:``line`` (where the suite names the file)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise SuiteError(named_in, line, f"cannot read {what} {p}: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise SuiteError(named_in, line, f"{what} {p} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SuiteError(p, None, f"{what} file is over {limit:,} bytes")
    reads = _READS.get()
    if reads is not None:
        reads.append((p, what, data))
    return data


def decode_utf8(path: str | Path, data: bytes, what: str = "suite") -> str:
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise SuiteError(path, 1, f"{what} file is {name}; save it as UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        if b"\0" in data[:4096] and exc.start < 4096:
            # UTF-16 without a byte-order mark: every other byte is NUL
            raise SuiteError(path, line, f"{what} file is not UTF-8 (UTF-16?); save it as UTF-8") from exc
        raise SuiteError(
            path, line, f"{what} file is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}"
        ) from exc
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise SuiteError(path, line, f"{what} file holds a NUL byte (UTF-16 saved without a byte-order mark?)")
    return text
