"""Which of a fixed set of literals occur in a text: one ``str.find`` (memchr) pass per anchor
character, in linear time, instead of one substring search per literal.

A search for a literal that is absent reads the whole text; most literals a scorer looks for
(every family's call markup, the protocols' markers) are absent from most outputs, so a search
per literal read each output some twenty times over. Here each literal is found through one
character of it, its anchor (the rarest by ``RARITY``): the text's occurrences of each anchor
are visited once, and at each only the literals whose character after the anchor (before it,
for a literal the anchor ends) is the text's there are compared. The answer is exact: a literal
occurs in ``text[lo:hi]`` exactly when it starts, at or after ``lo`` and ending by ``hi``,
``offset`` characters before an occurrence of its anchor. Past ``MAX_VISITS`` occurrences of one
anchor the literals still pending are searched for from there on (one ``str.find`` each), so a
text flooded with an anchor costs no more than the searches it replaces.
"""

from __future__ import annotations

from collections.abc import Iterable

#: ASCII characters by how rarely prose holds them (rarest first); a literal's anchor is its
#: rarest character: one that is not Latin-1 if it has one (a Latin-1 text cannot hold it, and
#: ``str.find`` answers that without reading the text), else the first ranked here, else its first
RARITY = "~|=]>[}{<:"

#: occurrences of one anchor visited per text before the pending literals are searched for
MAX_VISITS = 32


def anchor_of(literal: str) -> tuple[str, int]:
    """(anchor, its offset in ``literal``): see the module's docstring."""
    best, rank = 0, len(RARITY) + 1
    for i, c in enumerate(literal):
        r = -1 if ord(c) > 0xFF else (RARITY.find(c) % (len(RARITY) + 1))
        if r < rank:
            best, rank = i, r
    return literal[best], best


_Keyed = dict[str, tuple[tuple[str, int], ...]]  # a character -> (literal, its anchor's offset)


class LiteralSet:
    """A fixed set of non-empty literals, grouped by anchor, built once and asked per text."""

    __slots__ = ("_ascii_groups", "_groups", "literals")

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals: tuple[str, ...] = tuple(dict.fromkeys(lit for lit in literals if lit))
        # anchor -> (by the character after it, by the character before it, the anchor alone):
        # a literal is keyed by its character after the anchor, or before it when the anchor ends
        # it, so that a visit compares only the literals that agree with the text there
        groups: dict[str, tuple[dict[str, list[tuple[str, int]]], ...]] = {}
        for lit in self.literals:
            anchor, offset = anchor_of(lit)
            by_next, by_prev, alone = groups.setdefault(anchor, ({}, {}, {}))
            if offset + 1 < len(lit):
                by_next.setdefault(lit[offset + 1], []).append((lit, offset))
            elif offset > 0:
                by_prev.setdefault(lit[offset - 1], []).append((lit, offset))
            else:
                alone.setdefault("", []).append((lit, offset))
        self._groups: tuple[tuple[str, _Keyed, _Keyed, tuple[tuple[str, int], ...], int], ...] = tuple(
            (
                anchor,
                {k: tuple(v) for k, v in by_next.items()},
                {k: tuple(v) for k, v in by_prev.items()},
                tuple(alone.get("", ())),
                sum(len(v) for d in (by_next, by_prev, alone) for v in d.values()),
            )
            for anchor, (by_next, by_prev, alone) in groups.items()
        )
        # an ASCII text holds no literal anchored on another character (str.isascii() is a flag)
        self._ascii_groups = tuple(g for g in self._groups if g[0].isascii())

    def present(self, text: str, lo: int = 0, hi: int | None = None) -> set[str]:
        """The literals that occur whole in ``text[lo:hi]``."""
        if hi is None:
            hi = len(text)
        found: set[str] = set()
        for anchor, by_next, by_prev, alone, count in self._ascii_groups if text.isascii() else self._groups:
            k = text.find(anchor, lo, hi)
            if k == -1:
                continue
            if alone:  # the anchor is the literal
                found.add(anchor)
                if count == 1:
                    continue
            pending = count - len(alone)
            visits = 0
            while True:
                # most visits compare nothing: the text's next (previous) character starts no group
                if by_next and (group := by_next.get(text[k + 1 : k + 2])) is not None:
                    pending -= _compare(group, text, k, lo, hi, found)
                if by_prev and (group := by_prev.get(text[k - 1 : k])) is not None:
                    pending -= _compare(group, text, k, lo, hi, found)
                if pending == 0:
                    break
                visits += 1
                if visits == MAX_VISITS:  # a flood of the anchor: search for the rest from here on
                    for keyed in (by_next, by_prev):
                        for group in keyed.values():
                            for lit, offset in group:
                                if lit not in found and text.find(lit, max(lo, k + 1 - offset), hi) != -1:
                                    found.add(lit)
                    break
                k = text.find(anchor, k + 1, hi)
                if k == -1:
                    break
        return found


def _compare(group: tuple[tuple[str, int], ...], text: str, k: int, lo: int, hi: int, found: set[str]) -> int:
    """Add to ``found`` the literals of ``group`` whose anchor is the text's at ``k``; how many."""
    added = 0
    for lit, offset in group:
        s = k - offset
        if s >= lo and lit not in found and text.startswith(lit, s, hi):
            found.add(lit)
            added += 1
    return added
