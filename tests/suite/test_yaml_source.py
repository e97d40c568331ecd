"""The bounded YAML reader (``suite/yaml_source.py``): JSON-shaped values with their lines; the
same text reads the same way wherever it repeats (plain scalars' tags are remembered by text)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

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


# JSON-shaped documents, dumped by PyYAML in block, flow and mixed styles: what ``load_yaml``
# reads must be what PyYAML's own loader reads, and each node's line the one its composer marks
# (a mapping value's line is its key's)
_KEYS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=8)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["7", "true", "null", "1.5", "yes", "~", "0x1F", "-", "a: b", "#c", "'q'", "[x]", "x\ny"])
)
_DOCS = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=30,
)


def _composed_lines(node: yaml.Node, path: tuple[str | int, ...], line: int, out: dict) -> None:
    out[path] = line
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _composed_lines(value, (*path, key.value), key.start_mark.line + 1, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _composed_lines(item, (*path, i), item.start_mark.line + 1, out)


@settings(max_examples=400, deadline=None)
@given(_DOCS, st.sampled_from([False, True, None]), st.integers(1, 4))
def test_what_it_reads_is_what_pyyaml_reads_with_each_nodes_line(doc, flow, indent) -> None:
    source = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True, indent=indent + 1, width=40)
    data, lines = load_yaml("x.yaml", source)
    assert data == yaml.load(source, Loader=yaml.CSafeLoader)
    node = yaml.compose(source, Loader=yaml.CSafeLoader)
    expected: dict = {}
    _composed_lines(node, (), node.start_mark.line + 1, expected)
    assert lines == expected
