"""The 0.2 module paths that the 0.2 docs named, kept importable for one release (0.3).

0.3 moved every module into a subpackage (docs/architecture.md). A user's ``import
leader_eval.golden`` or ``from leader_eval.backends.tinker import TinkerBackend`` still works: a
meta-path finder answers each old name with the module that now holds it (the same module
object, so ``isinstance`` checks and monkeypatching agree) and warns with ``DeprecationWarning``
naming the new path. Nothing is imported until an old name is; the table is CHANGELOG.md's list.
A module 0.3 split (``golden``: the file, the gate, the quarantine and the gate's tables;
``compare``: the comparison and its tables) is a module of its own that answers each name from the
modules now holding it (the same objects, so ``isinstance`` agrees; monkeypatch the new module).
This module is outside the layer contracts (it names every layer on purpose) and goes in 0.4.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED = {
    "leader_eval.adaptive": "leader_eval.decide.adaptive",
    "leader_eval.adaptive_compare": "leader_eval.decide.adaptive_compare",
    "leader_eval.backends": "leader_eval.sampling.backends",
    "leader_eval.backends.base": "leader_eval.sampling.backends.base",
    "leader_eval.backends.local": "leader_eval.sampling.backends.local",
    "leader_eval.backends.openai_compat": "leader_eval.sampling.backends.openai_compat",
    "leader_eval.backends.replay": "leader_eval.sampling.backends.replay",
    "leader_eval.backends.tinker": "leader_eval.sampling.backends.tinker",
    "leader_eval.chat_template": "leader_eval.suite.chat_template",
    "leader_eval.error_rule": "leader_eval.scoring.error_rule",
    "leader_eval.evaluate": "leader_eval.runs.evaluate",
    "leader_eval.metrics": "leader_eval.stats.metrics",
    "leader_eval.overlap": "leader_eval.studies.overlap",
    "leader_eval.schema_loader": "leader_eval.suite.tool_schema",
    "leader_eval.stress": "leader_eval.studies.stress",
    "leader_eval.suite_files": "leader_eval.suite.files",
}
#: 0.2 modules that 0.3 split (issue 21: decide returns data, report formats it): the old name is a
#: module that answers each name from the first of these that has it (``golden.holm_alphas`` and
#: ``tarone_family`` were re-exported by 0.2's golden, hence ``stats.core``)
SPLIT = {
    "leader_eval.golden": (
        "leader_eval.decide.golden",
        "leader_eval.decide.gate",
        "leader_eval.decide.quarantine",
        "leader_eval.report.gate",
        "leader_eval.stats.core",
    ),
    "leader_eval.compare": ("leader_eval.decide.compare", "leader_eval.report.compare"),
    # the conversions are pure (scoring); reading BFCL's files is a study's I/O
    "leader_eval.bfcl": ("leader_eval.scoring.bfcl", "leader_eval.studies.bfcl"),
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        warnings.warn(
            f"{name} moved to {self.target} in 0.3; the old path goes in 0.4", DeprecationWarning, stacklevel=2
        )
        # The import system returns whatever sys.modules holds for the name once exec_module
        # returns, so the old name becomes the new module itself, not a copy.
        sys.modules[name] = importlib.import_module(self.target)


class _SplitAlias(importlib.abc.Loader):
    """A module split in 0.3: the old name looks each attribute up in the modules that now hold it."""

    def __init__(self, targets: Sequence[str]) -> None:
        self.targets = tuple(targets)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        name, targets = module.__name__, self.targets
        warnings.warn(
            f"{name} was split into {', '.join(targets[:-1])} and {targets[-1]} in 0.3; the old path goes in 0.4",
            DeprecationWarning,
            stacklevel=2,
        )

        def __getattr__(attr: str) -> object:
            for target in targets:
                found = getattr(importlib.import_module(target), attr, _MISSING)
                if found is not _MISSING:
                    return found
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


_MISSING = object()


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in SPLIT:
            return importlib.machinery.ModuleSpec(fullname, _SplitAlias(SPLIT[fullname]))
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        # first: the path finder would otherwise load a moved package's submodule a second time
        # under its old name (a copy whose classes are not the real ones)
        sys.meta_path.insert(0, _MovedFinder())
