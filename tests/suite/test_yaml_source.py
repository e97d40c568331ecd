"""The bounded YAML reader (``suite/yaml_source.py``): JSON-shaped values with their lines; the
same text reads the same way wherever it repeats (plain scalars' tags are remembered by text)."""

from __future__ import annotations

import pytest

from leader_eval.errors import SuiteError
from leader_eval.suite.yaml_source import load_yaml


def test_a_repeated_plain_scalar_reads_as_its_type_and_a_quoted_one_as_text() -> None:
    source = "\n".join(f"- {{n: 7, q: '7', b: true, qb: \"true\", z: null, f: 1.5, s: hi, i: {i}}}" for i in range(3))
    data, lines = load_yaml("x.yaml", source + "\n")
    assert data == [
        {"n": 7, "q": "7", "b": True, "qb": "true", "z": None, "f": 1.5, "s": "hi", "i": i} for i in range(3)
    ]
    assert lines[(2, "f")] == 3


def test_a_value_json_cannot_hold_is_refused_each_time_it_repeats() -> None:
    with pytest.raises(SuiteError, match=r"x\.yaml:2: .*date/time"):
        load_yaml("x.yaml", "- {a: '2024-01-01'}\n- {a: 2024-01-01}\n")
    with pytest.raises(SuiteError, match=r"x\.yaml:3: .*date/time"):
        load_yaml("x.yaml", "- a\n- b\n- 2024-01-01\n")


def test_a_second_document_and_a_duplicate_key_are_one_line_errors() -> None:
    with pytest.raises(SuiteError, match=r"x\.yaml:2: .*one YAML document"):
        load_yaml("x.yaml", "a: 1\n---\nb: 2\n")
    with pytest.raises(SuiteError, match=r"x\.yaml:2: duplicate key 'a'"):
        load_yaml("x.yaml", "a: 1\na: 2\n")


def test_without_libyaml_an_unprintable_character_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python reader (where libyaml is not built) refuses it as the parser is made."""
    import yaml

    from leader_eval.suite import yaml_source

    monkeypatch.setattr(yaml_source, "_PARSER", yaml.SafeLoader)
    with pytest.raises(SuiteError, match=r"x\.yaml: invalid YAML: unacceptable character"):
        load_yaml("x.yaml", "a: \x00\n")
    assert load_yaml("x.yaml", "a: [1, '2']\n")[0] == {"a": [1, "2"]}
