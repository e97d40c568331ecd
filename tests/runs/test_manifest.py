"""A run's manifest records the versions it ran with (``runs/manifest.py``): each read from its
package's metadata header, exactly as ``importlib.metadata.version`` gives it."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

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


@pytest.mark.parametrize(
    "text",
    [
        "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\nVersion: 9 in the description\n",
        "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0 \n\n",  # padded: the stdlib keeps the blank
        "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n  .post1\n\n",  # folded
        "Metadata-Version: 2.1\nnot a header\nVersion: 1.0\n\n",  # the headers end before it
        "\nMetadata-Version: 2.1\nVersion: 3\n",  # no header block at all
        "Metadata-Version: 2.1\nversion: 2.0\nVersion: 1.0\n\n",  # the first, in any case
        "Metadata-Version: 2.1\nName: pkg\nVersion:1.0\n\n",
        "Metadata-Version: 2.1\nName: pkg\n\n",  # none
        "Metadata-Version: 2.1\r\nName: pkg\r\nVersion: 4.5\r\n\r\n",
    ],
)
def test_a_malformed_header_block_reads_as_importlib_reads_it(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "pkg-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(text.encode("utf-8"))
    dist = metadata.PathDistribution(info)
    monkeypatch.setattr(metadata, "distribution", lambda name: dist)
    assert _version("pkg") == dist.version
