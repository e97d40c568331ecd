"""What the XML-style formats share (private): parameters read one by one, the invoke shape.

A JSON protocol's arguments are decoded in C; an XML-style format's parameters are read one by
one in Python (a few microseconds each), so a 1 MB output of 40,000 tiny parameters would cost
most of a second. No tool takes that many: more than ``MAX_PARAMETERS`` parameters in one output
fail the strict parse, and a lenient scan stops there (as ``MAX_CALLS`` does for calls).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from leader_eval.protocols._base import LenientExtractor
from leader_eval.protocols._scan import Budget, Fail, Scan, block_calls, skip_ws
from leader_eval.protocols._values import TextValue
from leader_eval.types import ToolCall

MAX_PARAMETERS = 4096
TOO_MANY_PARAMETERS_ERROR = f"more than {MAX_PARAMETERS} parameters in one output"


class ParamCount:
    """Parameters read so far in one output (strict parse or one lenient scan)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def add(self) -> None:
        self.n += 1
        if self.n > MAX_PARAMETERS:
            raise Fail(TOO_MANY_PARAMETERS_ERROR)


def drop_newlines(body: str) -> str:
    """A value less one newline at each end: the templates write them around the value."""
    if body.startswith("\n"):
        body = body[1:]
    return body[:-1] if body.endswith("\n") else body


def keep(body: str) -> str:
    """A value exactly as written (the template writes nothing around it)."""
    return body


@dataclass(frozen=True)
class InvokeTags:
    """The markup of an ``<invoke name="N"><parameter name="K">V</parameter></invoke>``-shaped
    call: MiniMax M2's own tags, muse-glimmer's ``atem:`` ones, MiniCPM5's ``<function>`` and
    ``<param>``. ``cdata``: a value may be a ``<![CDATA[...]]>`` section (taken exactly)."""

    invoke: str  # the tag name: invoke, atem:invoke, function
    parameter: str
    cdata: bool = False
    trim: Callable[[str], str] = keep
    open_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    param_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        attr = r"""\s+name\s*=\s*(?:"([^"<>\n]{1,256})"|'([^'<>\n]{1,256})')\s*>"""
        object.__setattr__(self, "open_re", re.compile("<" + re.escape(self.invoke) + attr))
        object.__setattr__(self, "param_re", re.compile("<" + re.escape(self.parameter) + attr))

    @property
    def invoke_close(self) -> str:
        return f"</{self.invoke}>"

    @property
    def param_close(self) -> str:
        return f"</{self.parameter}>"

    def markup(self) -> tuple[str, ...]:
        """Regexes for the pieces (leak detection): both opening tags and both closing tags."""
        attr = r"""\s+name\s*=\s*["'][^"'<>\n]{1,256}["']\s*>"""
        return (
            "<" + re.escape(self.invoke) + attr,
            "<" + re.escape(self.parameter) + attr,
            re.escape(self.invoke_close),
            re.escape(self.param_close),
        )


_CDATA_OPEN, _CDATA_CLOSE = "<![CDATA[", "]]>"


def invoke_block(
    text: str,
    pos: int,
    hi: int,
    tags: InvokeTags,
    value: type[TextValue],
    count: ParamCount,
    budget: Budget | None = None,
) -> tuple[str, dict[str, Any], int]:
    """Parse one call at ``pos``: (name, arguments, end). Strict without a budget (a parameter
    named twice fails); a lenient scan passes one (the last of a repeated parameter wins)."""
    m = tags.open_re.match(text, pos)
    if not m:
        raise Fail(f'expected <{tags.invoke} name="..."> at offset {pos}')
    name = m.group(1) if m.group(1) is not None else m.group(2)
    if not name.strip():
        raise Fail(f"empty tool name in <{tags.invoke}> at offset {pos}")
    pos = skip_ws(text, m.end())
    args: dict[str, Any] = {}
    close = tags.param_close
    while True:
        p = tags.param_re.match(text, pos)
        if not p:
            break
        count.add()
        key = p.group(1) if p.group(1) is not None else p.group(2)
        at = p.end()
        if tags.cdata and text.startswith(_CDATA_OPEN, at):
            end = text.find(_CDATA_CLOSE, at, hi)
            scanned = (hi if end == -1 else end) - at
            if end != -1:
                raw, end = text[at + len(_CDATA_OPEN) : end], end + len(_CDATA_CLOSE)
                if not text.startswith(close, end):
                    if budget is not None:
                        budget.spend(scanned)
                    raise Fail(f"expected {close} after the CDATA section at offset {end}")
        else:
            end = text.find(close, at, hi)
            scanned = (hi if end == -1 else end) - at
            if end != -1:
                raw = tags.trim(text[at:end])
        if budget is not None and not budget.spend(scanned):
            raise Fail("lenient scan budget spent")
        if end == -1:
            raise Fail(f"<{tags.parameter} name=...> at offset {p.start()} is not closed")
        if budget is None and key in args:
            raise Fail(f"parameter {key!r} given twice")
        args[key] = value(raw)
        pos = skip_ws(text, end + len(close))
    if not text.startswith(tags.invoke_close, pos):
        raise Fail(f"expected <{tags.parameter} name=...> or {tags.invoke_close} at offset {pos}")
    return name, args, pos + len(tags.invoke_close)


def invoke_lenient(marker: str, tags: InvokeTags, value: type[TextValue], protocol: str) -> LenientExtractor:
    """The lenient extractor of an invoke-shaped format: every block opening with ``marker``
    read by ``invoke_block`` under the scan's budget and one parameter count per output."""

    def lenient(scan: Scan) -> Iterator[ToolCall]:
        count = ParamCount()
        return block_calls(
            scan,
            marker,
            lambda text, s, budget: invoke_block(text, s, len(text), tags, value, count, budget),
            protocol,
            lambda: count.n > MAX_PARAMETERS,
        )

    return lenient
