"""Arguments written as tagged key/value pairs (private), the shape GLM's ``<arg_key>K</arg_key>
<arg_value>V</arg_value>`` and Hunyuan's ``<arg_key:opensource>`` formats share.

A value is text up to the first closing value tag (a value cannot hold its own closing tag: the
format has no escape), returned as ``TextValue`` for ``parse_output`` to type by the tool's schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from leader_eval.protocols._scan import Budget, Fail, skip_ws
from leader_eval.protocols._values import TextValue

# A key is a parameter name: a bounded search keeps a scan of many unclosed keys linear.
_KEY_MAX = 256


@dataclass(frozen=True)
class PairTags:
    key_open: str
    key_close: str
    value_open: str
    value_close: str


def read_pairs(
    text: str, pos: int, hi: int, tags: PairTags, *, strict: bool, budget: Budget | None = None
) -> tuple[dict[str, TextValue], int]:
    """The pairs from ``pos`` (whitespace before each allowed) and where the last one ended (the
    caller checks what follows). A lenient scan passes a budget: the characters a value search
    reads are charged to it, so many unclosed values cannot make the scan quadratic."""
    args: dict[str, TextValue] = {}
    while True:
        at = skip_ws(text, pos)
        if not text.startswith(tags.key_open, at):
            return args, pos
        ks = at + len(tags.key_open)
        ke = text.find(tags.key_close, ks, min(hi, ks + _KEY_MAX))
        if ke == -1:
            raise Fail(f"{tags.key_open} at offset {at} is not closed")
        key = text[ks:ke].strip()  # the vendors' parsers strip it too
        if not key or "<" in key:
            raise Fail(f"bad parameter name in {tags.key_open} at offset {at}")
        vo = skip_ws(text, ke + len(tags.key_close))
        if not text.startswith(tags.value_open, vo):
            raise Fail(f"expected {tags.value_open} at offset {vo}")
        vs = vo + len(tags.value_open)
        ve = text.find(tags.value_close, vs, hi)
        if budget is not None and not budget.spend((hi if ve == -1 else ve) - vs):
            raise Fail("lenient scan budget spent")
        if ve == -1:
            raise Fail(f"{tags.value_open} at offset {vo} is not closed")
        if strict and key in args:
            raise Fail(f"parameter {key!r} given twice")
        args[key] = TextValue(text[vs:ve])
        pos = ve + len(tags.value_close)
