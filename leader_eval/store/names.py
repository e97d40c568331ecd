"""The names of run directories and the labels and baseline names that go into file names.

A run directory is named ``<suite>__<label>__<model8>__seed<S>__<suite8>`` (docs/design-0.3.md
section 6): deterministic for (suite content, label, model identity, seed), so the same command
resumes its run and an edited suite or another model gets a directory of its own. A label or
baseline name is one safe path component (``--label ../x`` would put the run outside ``runs/``).
"""

from __future__ import annotations

import argparse
import hashlib
import re
from pathlib import Path
from typing import Protocol

#: a baseline or run label: one path component of letters, digits, ``_``, ``.`` and ``-``, not
#: starting with a dot (never ``..``, a hidden file or a separator: the name becomes a file or
#: directory name under ``golden/<suite>/`` or ``runs/``)
NAME_COMPONENT_MAX = 100


def name_component(text: str) -> str:
    """A baseline name or run label that is safe as one file or directory name (``--label ../x``
    would put the run directory outside ``runs/``); ``argparse.ArgumentTypeError`` otherwise, so
    the CLI and the pytest plugin take it as an option type."""
    value = str(text)
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", value) or len(value) > NAME_COMPONENT_MAX:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a name: use letters, digits, '_', '.' and '-' (not first), "
            f"at most {NAME_COMPONENT_MAX} characters"
        )
    return value


def default_label(model_id: str) -> str:
    """A label without machine-specific paths: ``local-smollm2``, ``gguf-model.gguf``."""
    tail = model_id.split("/")[-1] if "://" in model_id else model_id
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", tail).strip("-.").lower()[:100] or "model"


def model_key(model_id: str, weights: str | None = None) -> str:
    """8 hex digits naming a model in a run directory's name: the SHA-256 of its full model id
    and, when known, its weights' content identity (a GGUF's sha256, a ``--cache-id``). Two
    checkpoints saved under one file name, or two models given one ``--label``, get two names."""
    text = model_id if not weights else f"{model_id}\n{weights}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


class NamedSuite(Protocol):
    """What names a suite in a run directory's name (a loaded ``Suite`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def content_hash(self) -> str: ...


def default_out_dir(
    suite: NamedSuite, label: str, run_seed: int, *, model: str, root: Path = Path("runs"), suffix: str = ""
) -> Path:
    """``<root>/<suite>__<label>__<model8>__seed<S>__<suite8><suffix>`` (docs/design-0.3.md section 6).

    Deterministic for (suite content, label, model identity, seed): the same command resumes its
    run, an edited suite or another model gets a directory of its own. ``model``: ``model_key``."""
    short = suite.content_hash.split(":")[-1][:8]
    return root / f"{suite.name}__{label}__{model}__seed{run_seed}__{short}{suffix}"
