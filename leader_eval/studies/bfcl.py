"""BFCL's data and checker, read from disk: the I/O half of the BFCL adapter.

``leader_eval.scoring.bfcl`` converts BFCL entries into leader-eval's terms (tools, a case
``expect``, rendered outputs) and does no I/O, like all of scoring. What reads files lives here,
beside the other studies of the scorer and the suite (stress, overlap):

- ``load_entries``: BFCL's data files (``bfcl_eval/data``) -> entries with their answers.
- ``load_checker``: BFCL's ``ast_checker`` imported without its model handlers (bfcl-eval is an
  optional, test-only dependency: ``pip install --no-deps bfcl-eval``).

``tests/scoring/test_bfcl.py`` uses both to measure the agreement with BFCL (docs/protocols.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from leader_eval.scoring.bfcl import CATEGORIES, Call

__all__ = ["load_checker", "load_entries"]


def load_entries(data: Path, categories: tuple[str, ...] = CATEGORIES) -> list[dict[str, Any]]:
    """BFCL's entries with their answers: ``{"id", "category", "functions", "answer"}``."""
    entries = []
    for cat in categories:
        answers = {}
        with open(data / "possible_answer" / f"BFCL_v4_{cat}.json", encoding="utf-8") as f:
            for line in f:
                a = json.loads(line)
                answers[a["id"]] = a["ground_truth"]
        with open(data / f"BFCL_v4_{cat}.json", encoding="utf-8") as f:
            for line in f:
                e = json.loads(line)
                entries.append({"id": e["id"], "category": cat, "functions": e["function"], "answer": answers[e["id"]]})
    return entries


@contextmanager
def load_checker() -> Iterator[types.SimpleNamespace]:
    """BFCL's AST checker: ``ns.check(entry, calls) -> bool`` and ``ns.data`` (its data folder).

    ast_checker imports MODEL_CONFIG_MAPPING only to ask whether a model rewrites dots in
    function names; the real module imports every model handler and their SDKs. A stub that
    answers "no" for every model keeps the import light. BFCL creates folders under its project
    root on import: a temporary one is used. Raises ImportError without bfcl-eval.
    """
    if importlib.util.find_spec("bfcl_eval") is None:
        raise ImportError("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23")
    root = tempfile.mkdtemp(prefix="bfcl-root-")
    old_root = os.environ.get("BFCL_PROJECT_ROOT")
    os.environ["BFCL_PROJECT_ROOT"] = root
    stub = types.ModuleType("bfcl_eval.constants.model_config")

    class _Mapping(dict[str, Any]):
        def __missing__(self, key: str) -> Any:
            return types.SimpleNamespace(underscore_to_dot=False)

    stub.MODEL_CONFIG_MAPPING = _Mapping()  # type: ignore[attr-defined]
    saved = sys.modules.get(stub.__name__)
    sys.modules[stub.__name__] = stub
    try:
        checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        enums = importlib.import_module("bfcl_eval.constants.enums")
        spec = importlib.util.find_spec("bfcl_eval")
        data_dir = Path(next(iter(spec.submodule_search_locations or []))) / "data"  # type: ignore[union-attr]

        def check(entry: dict[str, Any], calls: list[Call]) -> bool:
            output = [{n: a} for n, a in calls]
            result = checker.ast_checker(
                entry["functions"], output, entry["answer"], enums.Language.PYTHON, entry["category"], "leader-eval"
            )
            return bool(result["valid"])

        standardize: Callable[[str], str] = checker.standardize_string
        yield types.SimpleNamespace(check=check, data=data_dir, standardize_string=standardize)
    finally:
        if saved is None:
            sys.modules.pop(stub.__name__, None)
        else:
            sys.modules[stub.__name__] = saved
        if old_root is None:
            os.environ.pop("BFCL_PROJECT_ROOT", None)
        else:
            os.environ["BFCL_PROJECT_ROOT"] = old_root
