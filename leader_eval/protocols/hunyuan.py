"""``hunyuan``: Tencent Hunyuan (Hy3) calls, one section of tagged tokens::

    <tool_calls:opensource>
    <tool_call:opensource>NAME<tool_sep:opensource>
    <arg_key:opensource>message</arg_key:opensource>
    <arg_value:opensource>Gather wood</arg_value:opensource>
    </tool_call:opensource>
    </tool_calls:opensource>

one section holding one or more calls, whitespace between the tags. Every token carries the
checkpoint's suffix (the template's ``HYTK``; ``:opensource`` in the released one, other labels in
other checkpoints, as vLLM's ``hy_v3`` parser detects): the section's opening token sets it for the
whole section. Values are text (``TextValue``: a string as it is, anything else as JSON), typed by
the tool's schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from leader_eval.protocols import _scan
from leader_eval.protocols._arg_pairs import PairTags, read_pairs
from leader_eval.protocols._base import StrictOut, ToolCallProtocol
from leader_eval.types import ToolCall

_SUFFIX = r":[A-Za-z0-9_-]{1,32}"
_SECTION_OPEN = re.compile(rf"<tool_calls({_SUFFIX})>")
_CALL_OPEN = re.compile(rf"<tool_call({_SUFFIX})>")
_NAME = re.compile(r"[^\s<>{}\[\]\"]{1,256}")


@dataclass(frozen=True)
class _Tokens:
    section_close: str
    open: str
    sep: str
    close: str
    pairs: PairTags


@lru_cache(maxsize=16)  # suffixes come from the text: keep the cache small
def _tokens(suffix: str) -> _Tokens:
    return _Tokens(
        f"</tool_calls{suffix}>",
        f"<tool_call{suffix}>",
        f"<tool_sep{suffix}>",
        f"</tool_call{suffix}>",
        PairTags(f"<arg_key{suffix}>", f"</arg_key{suffix}>", f"<arg_value{suffix}>", f"</arg_value{suffix}>"),
    )


def _call(
    text: str, pos: int, hi: int, tok: _Tokens, *, strict: bool, budget: _scan.Budget | None = None
) -> tuple[str, dict[str, Any], int]:
    """One call opening with ``tok.open`` at ``pos``: (name, arguments, end)."""
    at = pos + len(tok.open)
    m = _NAME.match(text, _scan.skip_ws(text, at))  # vLLM's parser strips the name too
    if not m:
        raise _scan.Fail(f"expected a tool name after {tok.open} at offset {at}")
    sep = _scan.skip_ws(text, m.end())
    if not text.startswith(tok.sep, sep):
        raise _scan.Fail(f"expected {tok.sep} at offset {sep}")
    args, end = read_pairs(text, sep + len(tok.sep), hi, tok.pairs, strict=strict, budget=budget)
    close = _scan.skip_ws(text, end)
    if text.startswith(tok.close, close):
        return m.group(), args, close + len(tok.close)
    if strict or not args:
        raise _scan.Fail(f"expected {tok.pairs.key_open} or {tok.close} at offset {close}")
    return m.group(), args, end


def strict(text: str, lo: int, hi: int, memo: _scan.Memo | None = None) -> StrictOut:
    section = _SECTION_OPEN.match(text, lo)
    if not section:
        raise _scan.Fail(_scan.NO_CALL_ERROR)
    tok = _tokens(section.group(1))
    calls: list[ToolCall] = []
    pos = _scan.skip_ws(text, section.end())
    while text.startswith(tok.open, pos):
        if len(calls) == _scan.MAX_CALLS:
            raise _scan.Fail(_scan.TOO_MANY_CALLS_ERROR)
        name, args, end = _call(text, pos, hi, tok, strict=True)
        calls.append(ToolCall(name, args, "hunyuan", (pos, end), text[pos:end]))
        pos = _scan.skip_ws(text, end)
    if not calls:
        raise _scan.Fail(f"expected {tok.open} at offset {pos}")
    if not text.startswith(tok.section_close, pos):
        raise _scan.Fail(f"expected {tok.open} or {tok.section_close} at offset {pos}")
    pos += len(tok.section_close)
    if pos != hi:
        raise _scan.Fail(f"text after {tok.section_close} at offset {pos}")
    return calls, [(lo, hi)]  # the section tokens are markup too


def lenient(scan: _scan.Scan) -> Iterator[ToolCall]:
    text, hi, budget = scan.text, len(scan.text), scan.budget()
    for s in _scan.find_all(text, "<tool_call:", scan.start):
        if budget.spent:
            return
        m = _CALL_OPEN.match(text, s)
        try:
            if not m:
                raise _scan.Fail("not a call token")
            name, args, e = _call(text, s, hi, _tokens(m.group(1)), strict=False, budget=budget)
        except _scan.Fail:
            budget.fail()
            continue
        yield ToolCall(name, args, "hunyuan", (s, e), text[s:e])


PROTOCOL = ToolCallProtocol(
    name="hunyuan",
    strict=strict,
    lenient=lenient,
    opening=rf"<tool_calls?{_SUFFIX}>",
    closing=(rf"</tool_calls?{_SUFFIX}>",),
    inner=(rf"<tool_sep{_SUFFIX}>", rf"</?arg_key{_SUFFIX}>", rf"</?arg_value{_SUFFIX}>"),
    # the template assembles its tokens with str.format; one that spells them out names the suffix
    template_markers=("'<tool_sep{}>'", "<tool_sep:"),
    lenient_needs=("<tool_call:",),
)
