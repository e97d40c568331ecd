"""Compiled JSON Schema validators never retrieve a reference. (That their patterns match in
bounded time at every schema-bearing key of a suite: tests/suite/test_tool_schema.py.)"""

from __future__ import annotations

import urllib.request

import pytest
from referencing.exceptions import Unresolvable

from leader_eval.bounded.json_schema import compile_validator


def test_validators_never_retrieve(monkeypatch) -> None:
    """The registry refuses every URI it was not given: no network, no file, at scoring time."""

    def no_network(*a, **k):
        raise AssertionError("a schema reference was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    for ref in ("https://example.com/s.json", "file:///etc/passwd", "other.json"):
        v = compile_validator({"properties": {"x": {"$ref": ref}}})
        with pytest.raises(Unresolvable):
            v.is_valid({"x": 1})
