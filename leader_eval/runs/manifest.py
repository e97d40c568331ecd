"""A run's manifest: what identifies the run (suite, model, protocol, seed, each case's sampling),
what it ran on and with, and where its suite file can be found again from the run directory."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from leader_eval.runs.options import RunOptions
from leader_eval.sampling.backends.base import Backend
from leader_eval.sampling.plan import PlannedCase, resolve_context_length
from leader_eval.store.formats import RUN_FORMAT_VERSION, SCORER_VERSION
from leader_eval.store.names import default_label
from leader_eval.suite.load import Suite
from leader_eval.version import __version__


def _versions() -> dict[str, str]:
    out = {"leader-eval": __version__, "python": sys.version.split()[0]}
    for pkg in ("llama-cpp-python", "jinja2", "jsonschema", "numpy", "tinker", "aiohttp"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = _version(pkg)
    return out


_HEADER_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]+")  # what an e-mail header's name may hold


def _version(package: str) -> str:
    """``metadata.version(package)``, read from the metadata's header block: ``version`` parses
    the whole file as an e-mail message (numpy's long description: ~2.5 ms, ~9 ms for the six
    packages of every manifest). Only a plain ``Version: X`` among well-formed headers is read
    here; anything else (a folded or padded value, a malformed header before it, no header block)
    is ``dist.version``'s to read, so the answer is the stdlib's in every case."""
    dist = metadata.distribution(package)
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    end = text.find("\n\n")
    lines = (text[:end] if end >= 0 else text).split("\n")
    for i, line in enumerate(lines):
        if not line or (i == 0 and line[0] in " \t"):
            break
        if line[0] in " \t":
            continue  # the previous header's folded value
        name, colon, value = line.partition(":")
        if not colon or not _HEADER_NAME.fullmatch(name):
            break
        if name.lower() == "version":
            plain = value[1:]
            folded = i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t")
            if value[:1] == " " and plain and plain == plain.strip() and not folded:
                return plain
            break
    return dist.version


def build_manifest(
    suite: Suite, backend: Backend, planned: Sequence[PlannedCase], run_seed: int, protocol: str, options: RunOptions
) -> dict[str, Any]:
    return {
        "identity": {
            "suite": suite.name,
            "suite_hash": suite.content_hash,
            "model_id": backend.model_id,
            "protocol": protocol,
            "run_seed": run_seed,
            "cases": {
                p.case.id: {"samples": p.n_samples, "params": p.params.to_dict()}
                for p in sorted(planned, key=lambda p: p.case.id)
            },
        },
        "run_id": f"{suite.name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{run_seed:08x}",
        "label": options.label or default_label(backend.model_id),
        "suite": {"name": suite.name, "path": str(suite.path), "content_hash": suite.content_hash},
        "model": {
            **backend.describe(),
            "model_id": backend.model_id,
            "default_protocol": backend.default_protocol,
            "context_length": resolve_context_length(options.context_length, suite, backend),
            "special_tokens": list(backend.special_tokens),
        },
        "format_version": RUN_FORMAT_VERSION,
        "scorer_version": SCORER_VERSION,
        "versions": _versions(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "status": "running",
        **options.extra_manifest,
    }


def suite_from_run_dir(suite_path: Path, out: Path) -> str | None:
    """The suite file's path relative to the run directory (``../../suites/x.yaml``): recorded in
    the manifest so that a later ``gate --update-golden`` finds the suite from any working
    directory, without a machine-specific absolute path in the manifest."""
    try:
        return Path(os.path.relpath(Path(suite_path).resolve(), Path(out).resolve())).as_posix()
    except ValueError:  # another drive (Windows): the recorded path and the search still work
        return None


#: how many folders above a run directory a relative suite path is looked up in (runs/<name>: 2)
_SUITE_SEARCH_DEPTH = 6


def recorded_suite_paths(manifest: dict[str, Any], run_dir: Path) -> list[Path]:
    """Where a run's suite file may be, most specific first: as recorded relative to the run
    directory, as recorded relative to the working directory, then that relative path under each
    folder above the run directory (the working directory of the run, for ``runs/<name>``).
    Callers load each in turn and keep the first whose content hash is the run's; only YAML
    files are candidates."""
    recorded = manifest.get("suite")
    rec: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    found: list[Path] = []
    rel = rec.get("from_run_dir")
    if isinstance(rel, str) and rel:
        found.append(Path(run_dir) / rel)
    path = rec.get("path")
    if isinstance(path, str) and path:
        found.append(Path(path))
        if not Path(path).is_absolute():
            found.extend(parent / path for parent in list(Path(run_dir).resolve().parents)[:_SUITE_SEARCH_DEPTH])
    unique = list(dict.fromkeys(found))
    return [p for p in unique if p.suffix in (".yaml", ".yml") and p.is_file()]
