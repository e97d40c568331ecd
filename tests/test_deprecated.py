"""The 0.2 module paths the 0.2 docs named still import for one release (leader_eval/_deprecated.py)."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

from leader_eval import _deprecated


@pytest.mark.parametrize("old", sorted(_deprecated.MOVED))
def test_a_moved_module_is_the_new_module_itself_with_a_warning(old: str) -> None:
    new = importlib.import_module(_deprecated.MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {_deprecated.MOVED[old]}"):
        module = importlib.import_module(old)
    # the same object: isinstance checks and monkeypatching through either name agree
    assert module is new


def test_a_moved_package_submodule_is_not_loaded_twice() -> None:
    from leader_eval.sampling.backends.tinker import TinkerBackend

    for old in ("leader_eval.backends", "leader_eval.backends.tinker"):
        sys.modules.pop(old, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from leader_eval.backends.tinker import TinkerBackend as Old
    assert Old is TinkerBackend


def test_a_bfcl_name_from_either_half_imports_from_the_old_path() -> None:
    from leader_eval.scoring.bfcl import to_expect
    from leader_eval.studies.bfcl import load_entries

    sys.modules.pop("leader_eval.bfcl", None)
    with pytest.warns(DeprecationWarning, match="leader_eval.bfcl was split into"):
        bfcl_02 = importlib.import_module("leader_eval.bfcl")
    assert bfcl_02.to_expect is to_expect and bfcl_02.load_entries is load_entries


def test_the_0_2_module_paths_still_import_the_gate_and_its_tables() -> None:
    """0.2's ``leader_eval.golden`` and ``leader_eval.compare`` were split into decide/ and report/
    (issue 21); the names their docs showed import from the old paths for one release, with a
    warning."""
    import importlib
    import sys

    from leader_eval.decide.compare import compare_runs
    from leader_eval.decide.gate import gate_run_dir
    from leader_eval.decide.golden import build_golden
    from leader_eval.report.compare import format_compare
    from leader_eval.report.gate import format_gate_table
    from leader_eval.stats.core import holm_alphas

    for old in ("leader_eval.golden", "leader_eval.compare"):
        sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match="leader_eval.golden was split into"):
        golden_02 = importlib.import_module("leader_eval.golden")
    assert golden_02.gate_run_dir is gate_run_dir and golden_02.format_gate_table is format_gate_table
    assert golden_02.build_golden is build_golden and golden_02.holm_alphas is holm_alphas
    with pytest.warns(DeprecationWarning, match="leader_eval.compare was split into"):
        compare_02 = importlib.import_module("leader_eval.compare")
    assert compare_02.compare_runs is compare_runs and compare_02.format_compare is format_compare
    with pytest.raises(AttributeError):
        golden_02.no_such_name  # noqa: B018
