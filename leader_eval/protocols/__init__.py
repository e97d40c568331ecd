"""Tool-call protocols: one module per protocol, one registry, one entry point.

Each protocol module exports one ``ToolCallProtocol`` (``_base.py``): its name, strict parser,
lenient extractor, how an attempt at it opens, its closing and inner markup (which the leak
filter treats as part of a failed attempt), and the chat-template markers and renderer names
that select it. ``REGISTRY`` lists them; adding a protocol is one module and one line here.
``detect`` is the only place a backend learns its default protocol.

Strict mode is the headline: the whole output must be exactly the protocol (surrounding
whitespace, trailing end-of-turn tokens and a declared reasoning block aside). Lenient mode
extracts calls anywhere in the text; it is a diagnostic that explains what a model did, never a
score. docs/protocols.md says what each protocol accepts.

Every parser survives any input: no exception escapes ``parse_output``, and the work done is
linear in the input (JSON decoding goes through the C scanner at given offsets, lenient scanning
runs under a budget of characters, and Python's parser is only handed bracketed candidates).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leader_eval.bounded.literals import LiteralSet
from leader_eval.errors import LeaderEvalError
from leader_eval.protocols import (
    anthropic_xml,
    apertus,
    apriel,
    command_r,
    deepseek,
    deepseek_v4,
    deepseek_v32,
    functionary,
    functiongemma,
    gemma4,
    gigachat3,
    gigachat3_1,
    glm,
    granite3,
    harmony,
    hermes,
    hunyuan,
    json_call,
    kimi_k2,
    kimi_k3,
    lfm2,
    llama3_json,
    minicpm5,
    minimax_m1,
    minimax_m2,
    minimax_m3,
    mistral,
    muse_glimmer,
    nemotron_v2,
    openai,
    pythonic,
    qwen3_coder,
    seed_oss,
    solar_open,
)
from leader_eval.protocols._base import ToolCallProtocol
from leader_eval.protocols._scan import (
    MAX_CALLS,
    NO_CALL_ERROR,
    NOT_ALONE_ERROR,
    TOO_MANY_CALLS_ERROR,
    Fail,
    Memo,
    Scan,
    skip_ws,
)
from leader_eval.protocols._values import LiteralBudget, TextValue, type_arguments
from leader_eval.protocols.openai import api_calls
from leader_eval.types import ToolCall

__all__ = [
    "MAX_CALLS",
    "NOT_ALONE_ERROR",
    "NO_CALL_ERROR",
    "PROTOCOLS",
    "REGISTRY",
    "TOO_MANY_CALLS_ERROR",
    "ParseResult",
    "TextValue",
    "ToolCallProtocol",
    "detect",
    "get",
    "parse_output",
]

#: every protocol, in the order ``detect`` tries their template markers
REGISTRY: dict[str, ToolCallProtocol] = {
    p.name: p
    for p in (
        json_call.PROTOCOL,
        # issue 22, group d: templates that also hold <tool_call> or <|python_tag|> (Apriel's
        # prompt, Gemma 4's <|tool_call>, Functionary's Llama 3.1 tokens) must match first
        gemma4.PROTOCOL,
        functiongemma.PROTOCOL,
        functionary.PROTOCOL,
        granite3.PROTOCOL,
        apertus.PROTOCOL,
        apriel.PROTOCOL,
        gigachat3_1.PROTOCOL,
        gigachat3.PROTOCOL,
        lfm2.PROTOCOL,
        nemotron_v2.PROTOCOL,
        # GLM arg_key/arg_value, Hunyuan, Kimi K3, DeepSeek DSML (before hermes: GLM's calls
        # open with <tool_call> too; V3.2 before V4: every DSML template has V4's marker)
        glm.PROTOCOL,
        hunyuan.PROTOCOL,
        kimi_k3.PROTOCOL,
        deepseek_v32.PROTOCOL,
        deepseek_v4.PROTOCOL,
        # issue 22 group A: XML-style and MiniMax formats (before hermes: several of these
        # templates also hold <tool_call>)
        seed_oss.PROTOCOL,
        qwen3_coder.PROTOCOL,
        minimax_m1.PROTOCOL,
        minimax_m2.PROTOCOL,
        minimax_m3.PROTOCOL,
        minicpm5.PROTOCOL,
        muse_glimmer.PROTOCOL,
        # group c (issue 22): DeepSeek, Mistral, harmony, Solar Open, Command R; each before
        # hermes, and each variant before the more general marker of its family
        deepseek.V3,
        deepseek.V31,
        mistral.V11,
        mistral.LIST,
        harmony.PROTOCOL,
        solar_open.PROTOCOL,
        command_r.PROTOCOL,
        hermes.PROTOCOL,
        kimi_k2.PROTOCOL,
        llama3_json.PROTOCOL,
        pythonic.PROTOCOL,
        anthropic_xml.PROTOCOL,
        openai.PROTOCOL,
    )
}
PROTOCOLS: tuple[str, ...] = tuple(REGISTRY)


@dataclass(frozen=True)
class _Prefilter:
    """Which protocols' lenient scans can find anything in a text, decided once per text: a
    failed strict parse runs the lenient scans of all ~35 protocols, and on most text most of
    them have nothing to find. Every protocol's needles are looked for together
    (``bounded.literals``: one pass per anchor character, not one search per needle); a
    protocol is a candidate when one of its needles is there."""

    needles: LiteralSet
    #: every needle (what the answers for a text cover)
    every: frozenset[str]
    #: protocols whose lenient scan runs whatever the text (no needles: ``openai``'s)
    always: frozenset[str]
    owners: dict[str, tuple[str, ...]]

    def candidates(self, scan: Scan) -> frozenset[str]:
        found = self.needles.present(scan.text, scan.start)
        scan.know(self.every, found)
        if not found:
            return self.always
        names = set(self.always)
        for n in found:
            names.update(self.owners[n])
        return frozenset(names)


def _prefilter() -> _Prefilter:
    owners: dict[str, list[str]] = {}
    for p in REGISTRY.values():
        for n in p.lenient_needs:
            if n:
                owners.setdefault(n, []).append(p.name)
    return _Prefilter(
        needles=LiteralSet(owners),
        every=frozenset(owners),
        always=frozenset(p.name for p in REGISTRY.values() if p.lenient is None or not p.lenient_needs),
        owners={n: tuple(v) for n, v in owners.items()},
    )


_PREFILTER = _prefilter()

#: a template that takes tools but shows no protocol's marker: Hermes/Qwen's convention, the
#: most common one among open-weight chat templates
_TOOLS_DEFAULT = "hermes"


def check_protocol(protocol: str | None, *, where: str) -> None:
    """Refuse a protocol the parser does not know before anything is sampled."""
    if protocol is not None and protocol not in PROTOCOLS:
        raise LeaderEvalError(f"{where}: unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")


def get(name: str) -> ToolCallProtocol:
    """The protocol called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None


def detect(*, chat_template: str | None = None, renderer: str | None = None) -> str:
    """The tool-call protocol a model speaks natively, from its renderer name (tinker-cookbook)
    or its chat template; ``json`` when the template takes no tools (or there is none).

    A renderer name wins when a protocol claims its prefix. A template selects the first
    protocol (registry order) whose marker it contains, whether or not it takes ``tools``: some
    templates render the calls of the conversation without reading a tool list (DeepSeek
    R1-Distill, V3.1). A template without any marker that takes tools gets ``hermes``.
    """
    if renderer:
        name = renderer.lower()
        for p in REGISTRY.values():
            if any(name.startswith(prefix) for prefix in p.renderers):
                return p.name
    if not chat_template:
        return "json"
    # a comment is no rendering: "{# unlike Mistral's [TOOL_CALLS] #}" selects nothing
    body = _without_comments(chat_template)
    for p in REGISTRY.values():
        if any(marker in body for marker in p.template_markers):
            return p.name
    return _TOOLS_DEFAULT if _takes_tools(chat_template) else "json"


def _without_comments(template: str) -> str:
    """``template`` less its jinja2 comments (``{# ... #}``; an unclosed one runs to the end), in
    one forward pass."""
    if "{#" not in template:
        return template
    parts, pos = [], 0
    while (start := template.find("{#", pos)) != -1:
        parts.append(template[pos:start])
        end = template.find("#}", start + 2)
        if end == -1:
            return "".join(parts)
        pos = end + 2
    parts.append(template[pos:])
    return "".join(parts)


def _takes_tools(template: str) -> bool:
    from leader_eval.suite.chat_template import template_supports_tools  # jinja2: only when a template is read

    try:
        return template_supports_tools(template)
    except Exception:  # a template jinja2 cannot parse declares nothing
        return False


@dataclass(frozen=True)
class ParseResult:
    protocol: str
    strict_ok: bool
    calls: tuple[ToolCall, ...]
    lenient_calls: tuple[ToolCall, ...]
    error: str | None
    consumed: tuple[tuple[int, int], ...]
    visible_text: str
    reasoning: str | None
    other_protocols: tuple[str, ...]

    def __init__(
        self,
        protocol: str,
        strict_ok: bool,
        calls: tuple[ToolCall, ...],
        lenient_calls: tuple[ToolCall, ...],
        error: str | None,
        consumed: tuple[tuple[int, int], ...],
        visible_text: str,
        reasoning: str | None,
        other_protocols: tuple[str, ...],
    ) -> None:
        # one per output: __dict__ filled directly rather than a frozen dataclass's
        # object.__setattr__ per field (as CheckResult in leader_eval/types.py)
        self.__dict__.update(
            protocol=protocol,
            strict_ok=strict_ok,
            calls=calls,
            lenient_calls=lenient_calls,
            error=error,
            consumed=consumed,
            visible_text=visible_text,
            reasoning=reasoning,
            other_protocols=other_protocols,
        )


def _lenient(protocol: str, scan: Scan, api_tool_calls: list[dict[str, Any]] | None) -> list[ToolCall]:
    p = REGISTRY[protocol]
    extract = p.lenient
    if extract is not None and p.lenient_needs and not any(map(scan.holds, p.lenient_needs)):
        return []  # nothing this scan could find (most protocols, on most failed outputs)
    try:
        if extract is None:
            return api_calls(api_tool_calls, strict=False)
        return list(itertools.islice(extract(scan), MAX_CALLS))
    except (Fail, RecursionError, MemoryError, ValueError, TypeError):
        # A diagnostic must never take scoring down with it.
        return []


def _reasoning_bounds(text: str, tags: tuple[str, str] | None) -> tuple[int, str | None, str | None]:
    """(where the body starts, reasoning content, error). A declared block counts only at the
    start of the output; a template that opens the block in the prompt shows up as an output
    with the closing tag and no opening tag before it."""
    if not tags:
        return 0, None, None
    open_tag, close_tag = tags
    first = skip_ws(text, 0)
    if open_tag and text.startswith(open_tag, first):
        close = text.find(close_tag, first + len(open_tag))
        if close == -1:
            return 0, None, f"reasoning block {open_tag} is not closed"
        return close + len(close_tag), text[first + len(open_tag) : close], None
    close = text.find(close_tag) if close_tag else -1
    if close != -1 and (not open_tag or text.find(open_tag, 0, close) == -1):
        return close + len(close_tag), text[:close], None
    return 0, None, None


def _body_end(text: str, lo: int, eot_tokens: tuple[str, ...]) -> int:
    """Strip trailing whitespace and end-of-turn tokens (any number, any order)."""
    hi = len(text)
    while True:
        # rstrip in C over bounded windows: a Python loop over a megabyte of trailing blanks took
        # half a second, and one copy of the whole body per token would be quadratic
        while hi > lo and text[hi - 1].isspace():
            start = max(lo, hi - 4096)
            hi = start + len(text[start:hi].rstrip())
        try:
            if not text.endswith(eot_tokens, lo, hi):  # none of them ends the body (the usual case)
                return hi
        except TypeError:  # a token that is not a string (None is skipped below, as "")
            pass
        for tok in eot_tokens:
            if tok and hi - len(tok) >= lo and text.startswith(tok, hi - len(tok)):
                hi -= len(tok)
                break
        else:
            return hi


def _typed(calls: list[ToolCall], schemas: Mapping[str, Any] | None) -> list[ToolCall]:
    out, budget = [], LiteralBudget()  # Python literals a format writes: bounded per output
    for c in calls:
        args = type_arguments(c.arguments, schemas.get(c.name) if schemas else None, budget)
        out.append(c if args is c.arguments else ToolCall(c.name, args, c.protocol, c.span, c.raw))
    return out


def _contained(span: tuple[int, int] | None, starts: list[int], spans: list[tuple[int, int]]) -> bool:
    """Is ``span`` inside one of ``spans`` (sorted, disjoint; ``starts`` their starts)?"""
    if span is None:
        return False
    i = bisect.bisect_right(starts, span[0]) - 1
    return i >= 0 and spans[i][0] <= span[0] and span[1] <= spans[i][1]


def parse_output(
    text: str,
    protocol: str,
    *,
    eot_tokens: tuple[str, ...] = (),
    reasoning_tags: tuple[str, str] | None = None,
    api_tool_calls: list[dict[str, Any]] | None = None,
    tool_schemas: Mapping[str, Any] | None = None,
) -> ParseResult:
    """Parse one raw output under ``protocol``; never raises on any text.

    ``tool_schemas`` (tool name -> its ``parameters`` schema) types the values a format carries
    as text (``TextValue``, see ``_values.py``); without it they are JSON where the whole text is
    a JSON value, else text."""
    spec = REGISTRY.get(protocol) or get(protocol)  # an unknown protocol is the caller's error
    if type(text) is str:
        pass
    elif isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "replace")
    elif not isinstance(text, str):
        text = "" if text is None else str(text)
    body_lo, reasoning, reasoning_error = _reasoning_bounds(text, reasoning_tags)
    hi = _body_end(text, body_lo, tuple(eot_tokens))
    lo = skip_ws(text, body_lo)
    lo = min(lo, hi)

    calls: list[ToolCall] = []
    consumed: list[tuple[int, int]] = []
    memo: Memo = {}
    error: str | None = reasoning_error
    if error is None:
        try:
            parser = spec.strict
            if parser is None:  # an API protocol: the calls came beside the text
                calls = api_calls(api_tool_calls, strict=True)
                if not calls:
                    raise Fail(NO_CALL_ERROR)
            elif lo >= hi:
                raise Fail(NO_CALL_ERROR)
            else:
                # The body ends at hi: a parser must not read into the end-of-turn tokens.
                calls, consumed = parser(text[:hi] if hi < len(text) else text, lo, hi, memo)
        except Fail as exc:
            error = str(exc) or "parse error"
        except (RecursionError, MemoryError, ValueError, TypeError) as exc:  # belt and braces
            error = f"parse error: {type(exc).__name__}"
    if error is not None:
        calls, consumed = [], []

    # the strict decodes start at or after body_lo, where the lenient scans look too; built
    # only when a lenient scan runs (a strict success of a text protocol runs none)
    scan = Scan(text, body_lo, memo) if error is not None or spec.strict is None else None
    if error is None:
        calls = _typed(calls, tool_schemas)
        lenient = list(calls)
    else:
        assert scan is not None
        lenient = _typed(_lenient(protocol, scan, api_tool_calls), tool_schemas)
    if error == NO_CALL_ERROR and lenient:
        error = NOT_ALONE_ERROR

    # Other protocols explain what the model did instead. A call another parser finds inside a
    # call of the protocol in force (the JSON inside a Hermes tag) explains nothing new.
    others: list[str] = []
    # A strict success consumed the whole body: no text is left for another protocol to explain
    # (API calls are the exception: their content text sits beside them), so skip the scans.
    if scan is not None:
        own = sorted({c.span for c in lenient if c.span is not None})
        own_starts = [a for a, _ in own]
    candidates = _PREFILTER.candidates(scan) if scan is not None else frozenset()
    for other in PROTOCOLS if scan is not None else ():
        if other == protocol or other not in candidates:
            continue
        found = _lenient(other, scan, api_tool_calls)  # type: ignore[arg-type]  # not None here
        if found and any(c.span is None or not _contained(c.span, own_starts, own) for c in found):
            others.append(other)

    # What the room sees: the body without the consumed markup (a reply that is no strict call:
    # without the channel tokens its format frames every reply with).
    cut = consumed
    if not cut and reasoning_error is None and spec.frame is not None:
        cut = spec.frame(text, lo, hi)
    if cut:
        pieces, pos = [], lo
        for a, b in cut:
            pieces.append(text[pos:a])
            pos = b
        pieces.append(text[pos:hi])
        visible = "".join(pieces)
    else:
        visible = text[lo:hi] if reasoning_error is None else text[:hi]
    return ParseResult(
        protocol=protocol,
        strict_ok=error is None,
        calls=tuple(calls),
        lenient_calls=tuple(lenient),
        error=error,
        consumed=tuple(consumed),
        visible_text=visible.strip(),
        reasoning=reasoning,
        other_protocols=tuple(others),
    )
