"""``LiteralSet.present`` answers exactly what one ``str.find`` per literal answers.

The leak scan runs a family's markup pattern only where its literal is present, and the parser
runs another protocol's lenient scan only where one of its needles is: a literal reported absent
while the text holds it would hide a leak or a call attempt (a false green). These tests compare
the one-pass answer with a search per literal, on generated texts over the literals' own
characters (so that near misses, overlaps and floods of one anchor past ``MAX_VISITS`` occur)
and on the real sets the scorer builds.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.bounded.literals import MAX_VISITS, LiteralSet, anchor_of
from leader_eval.checks.leakage import LeakConfig, compile_leak_config
from leader_eval.protocols import REGISTRY

_LITERALS = (
    "<tool_call>",
    "</tool_call",
    "<|tool_call",
    "<tool_call|>",
    "|>",
    "<",
    "[",
    "{",
    "to=functions.",
    "]<]minimax[>[<invoke",
    "]~",
    "<\uff5cDSML\uff5cinvoke",
    "function call<|role_sep|>",
    ":opensource>",
    "<tool_call:",
    "a",
)
_ALPHABET = sorted(set("".join(_LITERALS)) | {" ", "\n", "\u00e9", "\u4e2d"})


def _expected(literals: tuple[str, ...], text: str, lo: int, hi: int) -> set[str]:
    return {lit for lit in literals if text.find(lit, lo, hi) != -1}


@settings(max_examples=400, deadline=None)
@given(
    chosen=st.sets(st.sampled_from(_LITERALS), min_size=1),
    pieces=st.lists(st.one_of(st.sampled_from(_LITERALS), st.text(alphabet=_ALPHABET, max_size=6)), max_size=40),
    cut=st.tuples(st.integers(0, 400), st.integers(0, 400)),
)
def test_present_is_a_search_per_literal(chosen: set[str], pieces: list[str], cut: tuple[int, int]) -> None:
    literals = tuple(sorted(chosen))
    text = "".join(pieces)
    lo, hi = min(cut), max(cut)
    assert LiteralSet(literals).present(text, lo, hi) == _expected(literals, text, lo, hi)
    assert LiteralSet(literals).present(text) == _expected(literals, text, 0, len(text))


def test_a_flood_of_one_anchor_still_finds_a_literal_past_it() -> None:
    # every literal here is anchored on "|": the flood exhausts the visits before the literals
    literals = ("<|tool_call", "<tool_call|>", "function call<|role_sep|>")
    assert all(anchor_of(lit)[0] == "|" for lit in literals)
    for flood in ("|", "<|", "||>", "|t"):
        text = flood * (3 * MAX_VISITS) + "<tool_call|> and <|tool_call"
        assert LiteralSet(literals).present(text) == {"<tool_call|>", "<|tool_call"}
        # a literal that straddles the end of the range is not in it
        assert LiteralSet(literals).present(text, 0, len(text) - 1) == {"<tool_call|>"}


def test_literals_at_the_edges_of_the_range() -> None:
    text = "x<tool_call>y"
    got = LiteralSet(("<tool_call>", "x<", ">y", "<"))
    assert got.present(text, 1, 12) == {"<tool_call>", "<"}
    assert got.present(text, 2, 13) == {">y"}
    assert got.present(text, 0, 2) == {"x<", "<"}
    assert got.present("") == set()


def test_the_scorers_own_sets_agree_on_every_literal_alone_and_inside_prose() -> None:
    needles = tuple(n for p in REGISTRY.values() for n in p.lenient_needs if n)
    rare = tuple(lit for entry in compile_leak_config(LeakConfig()).rare for lit in entry[0])
    for literals in (needles, rare):
        found = LiteralSet(literals)
        for lit in literals:
            for text in (lit, f"Ada: go <b> {lit} x < y", f"{lit[:-1]} | {lit[1:]}"):
                assert found.present(text) == _expected(literals, text, 0, len(text))
