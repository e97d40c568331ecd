"""A run's manifest records the versions it ran with (``runs/manifest.py``): each read from its
package's metadata header, exactly as ``importlib.metadata.version`` gives it."""

from __future__ import annotations

from importlib import metadata

import pytest

from leader_eval.runs.manifest import _version, _versions


def test_every_installed_distributions_version_reads_as_importlib_reads_it() -> None:
    names = {d.metadata["Name"] for d in metadata.distributions()}
    assert len(names) > 20
    for name in sorted(names):
        assert _version(name) == metadata.version(name), name


def test_the_manifest_names_the_packages_a_run_depends_on_and_skips_missing_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    versions = _versions()
    assert versions["aiohttp"] == metadata.version("aiohttp")
    assert versions["jinja2"] == metadata.version("jinja2")

    def missing(name: str) -> metadata.Distribution:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    assert set(_versions()) == {"leader-eval", "python"}
