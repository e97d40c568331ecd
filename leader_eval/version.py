"""The package version: stamped in every run manifest and report, printed by `leader-eval --version`.
Its own module so that a low layer can read it without importing the package root (which names
every layer)."""

__version__ = "0.2.0"  # pyproject.toml's version; a release changes both
