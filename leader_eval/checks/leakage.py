"""Leak detection: what the room sees that it never should.

One combined regex finds every markup-shaped candidate in a single scan; a few small
post-passes decide the cases a regex cannot (pairing reasoning tags, parsing a JSON
envelope, code spans, scaffold echoes). The rules of judgement are in docs/leakage.md.

Every pattern here is linear-time: no nested quantifiers, and every quantifier that
could run into the next candidate is bounded and stops at the characters that start one
(``<``, ``[``, ``{``, newline). bench/bench_checks.py checks this structurally and on
adversarial inputs.

Bounds on the combined scanner (docs/performance.md, "Fourth pass"): each first character's
branches sit behind a lookahead of what they need next (``_lead``: the closer before the next
opener, within 400 characters, after a letter), so a bracket that starts nothing costs one or
two set tests, not a try of every branch; the lookahead never scans past the next opener, so it
adds at most one pass over the text. Past the slot budget and the JSON budget (whose later
matches are all skipped) the scan goes on with a scanner without those kinds (``_without``):
1 MB of "[x] " or form labels no longer yields 250,000 matches to skip one by one in Python.
Both keep every finding: the guarded scanner finds what the plain alternation finds
(tests/checks/test_leak_scan_equivalence.py).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

try:
    from re import _parser as sre_parse  # type: ignore[attr-defined]  # Python 3.11+
except ImportError:  # pragma: no cover
    import sre_parse

from leader_eval.bounded.literals import LiteralSet
from leader_eval.bounded.monotone import last_true
from leader_eval.bounded.regex import Found, RegexTimeout, SuiteRegex, compile_suite_regex
from leader_eval.checks import han_kana
from leader_eval.checks._regex_guards import blanks_then, cheap_sets, first_class, merged, precheck
from leader_eval.checks.placeholders import (
    KEBAB_SLOT_NOUNS,
    PLACEHOLDER_SHAPES,
    SLOT_CANDIDATES,
    SLOT_VERBS,
    TEMPLATE_TAG_LITERAL,
    TEMPLATE_TAG_PATTERN,
    is_slot_at,
    name_shapes,
)
from leader_eval.checks.special_tokens_catalogue import TAG_HEADS, TOKENS
from leader_eval.types import Finding, Reason

_compiled: ModuleType | None
try:  # the scaffold-echo prefilter, compiled with the n-gram counter (see _ngrams.pyx)
    from leader_eval.checks import _ngrams as _compiled
except ImportError:  # not built: the same answers from _candidate_keys, in Python
    _compiled = None

if TYPE_CHECKING:
    from leader_eval.checks._ngrams import EchoGrams as _EchoGrams

# --- candidate patterns ------------------------------------------------------------------
# Each entry is (kind, first character, rest of the pattern). The combined regex groups them
# by first character: a top-level alternation whose branches all start with a literal lets
# the regex engine skip non-candidate positions in C (measured: 6 us vs 224 us per 2 KB).

# tool-call markup tags of common protocols (Anthropic-style XML, Hermes/Qwen, ...) in every
# spelling: any tag whose name is tool/function + use/call/code/result/response is call markup,
# snake case or not (tool_call, tool-call, toolcall, ToolCall, FUNCTION-CALL, tool-result). A
# CamelCase opener right after a word character is a generic type in prose (List<ToolCall>); a
# closer, or <TOOLCALL> glued to text (a template's token), never is.
_TOOL_TAG_SPELLINGS = r"(?:tool|function)[-_]?(?:use|calls?|code|results?|responses?)"
_CAMEL_GUARD = r"(?:(?<![\w.]<[TF])|(?![a-z]))"  # after the first letter: not "List<To..."
_TOOL_TAG = (
    rf"(?:/(?i:{_TOOL_TAG_SPELLINGS})"
    r"|(?:[tT]" + _CAMEL_GUARD + r"(?i:ool)|[fF]" + _CAMEL_GUARD + r"(?i:unction))"
    r"[-_]?(?i:use|calls?|code|results?|responses?))(?:\s[^<>\n]{0,200})?>"
)
# bare <call> and <tools> are call markup only around a call: before a JSON object (or a list of
# them), or as <call>NAME</call>; their closers only right after a JSON object or list ends.
# "<call> me maybe", "bring the <tools>" and "<call>the plumber</call>" stay prose. In _RARE (a
# regex scan of its own, in C): as scanner branches, "<call>" * 166,666 took 175 ms.
_JSON_AHEAD = r"(?=\s{0,5}(?:\[\s{0,5})?\{\s{0,5}[\"'])"
_BARE_CALL = (
    rf"<(?:(?i:call)>(?:{_JSON_AHEAD}|\s{{0,5}}[A-Za-z_][\w.-]{{0,100}}+\s{{0,5}}</(?i:call)>)|(?i:tools)>{_JSON_AHEAD}"
    r"|/(?:(?<=[\]}]</)|(?<=[\]}]\s</))(?i:call|tools)>)"
)
# every match ends its tag name, "call" or "tools" in any case, and ">": it holds one of these (the
# literals it is looked for by, in _RARE; "\u017f" is an "s" to a case-insensitive match)
_BARE_CALL_ENDS = ("l>", "L>", "s>", "S>", "\u017f>")
_TOOL_NAMED = r"(?i:tool)\s{1,5}name=[^<>\n]{0,200}>"  # <tool name="pause"/>; "the <tool> shed" is prose
_INVOKE = r"invoke\s{1,5}name=[^<>\n]{0,200}>?"
_FUNCTION_EQ = r"function=[^<>\n]{1,200}>"
_CLOSING_PARTS = r"/(?:function|invoke|parameter)>"
_PARAMETER = r"parameter(?:=|\s{1,5}name=)[^<>\n]{1,200}>"
_NAMED_SPECIAL = r"(?:start_of_turn|end_of_turn|eos|bos|pad|unk|mask|/s|sop|eop|start_of_image|end_of_image)>"
_PYTHONIC_CALL = r"(?=[\sA-Za-z_])\s{0,5}[A-Za-z_][\w.]{0,100}+\(\s{0,5}[A-Za-z_]\w{0,60}+\s{0,5}=(?!=)"
_LLAMA2_SYS = r"</?SYS>>"
_MISTRAL_WORDS = r"/?(?:TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|CALL_ID)\]"
_THINK_WORDS = r"/?THINK\]"
_INST_WORDS = r"/?(?:INST|SYSTEM_PROMPT)\]|gMASK\]"
_JSON_KEY = (
    r"\s{0,20}[\"'](?:name|tool|tool_name|tool_call_id|function|type|id|arguments|parameters|action)[\"']\s{0,20}:"
)
# every family's tokens beyond the <|x|> and <｜x｜> shapes (issue 22): Gemma 4's asymmetric <|x>
# and <x|>; DeepSeek DSML's bar-namespaced tags (<｜DSML｜invoke name="...">); the namespaced
# tags of the families whose templates write them (<seed:eos>, <minimax:tool_call>, and Hy3's
# suffixed <tool_call:opensource>), namespaces read off the catalogue, not XML namespaces at large
_ASYMMETRIC_OPEN = r"\|[A-Za-z_][\w:.-]{0,40}>"
_ASYMMETRIC_CLOSE = r"</?[A-Za-z_][\w:.-]{0,40}+\|>"  # in _RARE: a letter after "<" is too common
_ATTRS = r"(?:\s[^<>\n]{0,200})?>"
_BAR_NAMESPACED = "/?\uff5c[A-Za-z]{1,16}\uff5c[A-Za-z_]\\w{0,40}" + _ATTRS
_NS_TAG = re.compile(r"</?([a-z_]{1,40}):([A-Za-z_][\w.]{0,40})(?:>|$)")


def _namespaces() -> tuple[str, str]:
    """The catalogue's namespaces (``seed`` of <seed:eos>) and suffixes (``opensource`` of Hy3's
    <tool_call:opensource>, a tail three or more names share), each as an alternation."""
    pairs = [m.groups() for t in (*TOKENS, *TAG_HEADS) if (m := _NS_TAG.match(t))]
    heads: dict[str, set[str]] = {}
    for head, tail in pairs:
        heads.setdefault(tail, set()).add(head)
    suffixes = {tail for tail, names in heads.items() if len(names) >= 3}
    spaces = {head for head, tail in pairs if tail not in suffixes}
    return "|".join(sorted(spaces)), "|".join(sorted(suffixes))


_NAMESPACES, _SUFFIXES = _namespaces()
_NAMESPACED = rf"/?(?:{_NAMESPACES}):[A-Za-z_][\w.]{{0,40}}{_ATTRS}"
_SUFFIXED = rf"</?[A-Za-z_]\w{{0,40}}+:(?:{_SUFFIXES})>"  # in _RARE, as _ASYMMETRIC_CLOSE
_MINIMAX_EOS = r"[a-z]~\["  # MiniMax M3's [e~[ (its other bracket tokens open with "]": _RARE)
_REASON_NAMES = (
    rf"(?:(?:{_NAMESPACES}):)?(?:think|thinking|reasoning|thought|reflection|scratchpad)(?::(?:{_SUFFIXES}))?"
)
_REASON_TAG = rf"/?(?i:{_REASON_NAMES})\s{{0,3}}>"
# the answer half of a reasoning format (R1-style "<think>...</think><answer>...</answer>",
# Hunyuan's): each tag is a finding of its own; the block is the reply, not hidden reasoning
_ANSWER_TAG = r"/?(?i:(?:final_)?answer)(?:\s{1,3}|\s{1,3}[A-Za-z_][\w:.-]{0,40}=[^<>\n]{0,200})?>"

_BUILTIN: tuple[tuple[str, str, str], ...] = (
    # tool-call markup tags in every spelling, and Qwen3-coder's XML parts
    ("tool", "<", _TOOL_TAG),
    ("tool", "<", _TOOL_NAMED),
    ("tool", "<", _FUNCTION_EQ),
    ("tool", "<", _CLOSING_PARTS),
    ("tool", "<", _INVOKE),
    ("tool", "<", _PARAMETER),
    # a pythonic call list shown as text: [send_message_to_chat(message=...
    ("tool", "[", _PYTHONIC_CALL),
    # Mistral control words
    ("tool", "[", _MISTRAL_WORDS),
    # reasoning tags (paired later), padded too: <think >, <think\n>
    # (a family's namespace or suffix too: <mm:think>, <seed:think>, <think:opensource>)
    ("reason", "<", _REASON_TAG),
    ("answer", "<", _ANSWER_TAG),
    ("reason", "[", _THINK_WORDS),  # Mistral Magistral: [THINK] ... [/THINK]
    ("reason", "\u25c1", r"/?think\u25b7"),  # Kimi k1.5: ◁think▷ ... ◁/think▷
    # chat special tokens: the <|...|> and DeepSeek <｜...｜> families, then named ones
    ("special", "<", r"\|[^|<>\s]{1,64}\|>"),
    ("special", "<", "\uff5c[^\uff5c<>\\s]{1,64}\uff5c>"),
    ("special", "<", _NAMED_SPECIAL),
    ("special", "<", _LLAMA2_SYS),
    ("special", "<", _ASYMMETRIC_OPEN),
    ("special", "<", _BAR_NAMESPACED),
    ("special", "<", _NAMESPACED),
    ("special", "[", _INST_WORDS),
    ("special", "[", _MINIMAX_EOS),
    # unrendered template syntax and placeholders: checks/placeholders.py, the one definition
    *(("ph", first, rest) for first, rest in PLACEHOLDER_SHAPES),
    # the start of a JSON (or Python-dict) object whose first key names a tool call's parts
    ("json", "{", _JSON_KEY),
)

# a fence's info string that names a tool call (Gemma 3's ```tool_code, ```tool_outputs): the block
# is tool markup, not code (the _RARE entry finds its opener)
_TOOL_FENCE_INFO = r"[ \t]{0,3}(?:tool_code|tool_calls?|function_calls?|tool_outputs?)(?![\w-])"
_TOOL_FENCE = re.compile(_TOOL_FENCE_INFO)

# Tokens and markup that open with a character no scanner entry opens with ("]", a word), or with
# "<" and a letter (in the scanner, "<b>" would enter the group at every tag): each is looked for
# only where its literal occurs (``str.find``, in C), then matched from there on. Harmony's
# recipient ``to=functions.NAME``, MiniMax M3's ]~b], ]~!b[ and ]<]minimax[>[, Gemma 4's closing
# half <turn|>, Hy3's suffixed tags, Qwen-Agent's ✿FUNCTION✿ markers, Gemma 3's ```tool_code fence
# and DeepSeek's tokens without their bars. A "special" match is tool markup when its name says so.
# (Not ReAct's text "Action Input:" line: its literal's anchor, a newline or ":", is in every
# output, and looking for it cost 2% of the scorer's throughput; its JSON form is found.)
# (An entry with several literals is looked for where any of them occurs.)
_RARE: tuple[tuple[str | tuple[str, ...], str, str], ...] = (
    ("to=functions.", "tool", r"(?<![\w.])to=functions\.[A-Za-z_][\w.-]{0,100}"),
    (_BARE_CALL_ENDS, "tool", _BARE_CALL),
    ("]~", "special", r"\]~!?[a-z][\[\]]"),
    ("]<]", "special", r"\]<\][a-z_]{1,40}\[>\["),
    ("|>", "special", _ASYMMETRIC_CLOSE),
    *((f":{suffix}>", "special", _SUFFIXED) for suffix in _SUFFIXES.split("|") if suffix),
    # Qwen-Agent's function-calling markers: ✿FUNCTION✿: name, ✿ARGS✿: {...}
    ("\u273f", "tool", "\u273f(?:FUNCTION|ARGS|RESULT|RETURN)\u273f"),
    # a DeepSeek token written without its bars: <tool▁call▁begin>, <end▁of▁sentence>
    # (U+2581, SentencePiece's blank, joins a token's words; prose has none)
    ("\u2581", "special", "<[A-Za-z]{1,20}(?:\u2581[A-Za-z]{1,20}){1,6}>"),
    # a fence that opens a tool call (Gemma 3's ```tool_code): its info string is the markup
    (("```tool", "```function", "``` tool", "``` function"), "tool", "(?<!`)```" + _TOOL_FENCE_INFO),
    # an ERB or EJS tag: template syntax (placeholders.TEMPLATE_TAG_PATTERN)
    (TEMPLATE_TAG_LITERAL, "ph", TEMPLATE_TAG_PATTERN),
)


@functools.cache
def _catalogue_entries() -> tuple[tuple[str, str, str], ...]:
    """The catalogue's tokens that no built-in token or markup shape finds, one literal
    alternation per first character (longest first); a tag head takes attributes. Compared with
    the shapes once, when a leak configuration is first compiled (a run does it while its first
    requests are in flight): a new template's token either has a family's shape or is here."""
    shapes = [
        re.compile(re.escape(f) + f"(?:{r})")
        for kind, f, r in _BUILTIN
        if kind in ("tool", "reason", "answer", "special")
    ]
    shapes += [re.compile(r) for _, _, r in _RARE]
    heads = {t: re.escape(t[1:]) + _ATTRS for t in TAG_HEADS if not any(p.match(t + ">") for p in shapes)}
    closed = {t: re.escape(t[1:]) for t in TOKENS if not any(p.fullmatch(t) for p in shapes)}
    by_first: dict[str, list[str]] = {}
    for tok, rest in sorted({**closed, **heads}.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        by_first.setdefault(tok[0], []).append(rest)
    return tuple(("cat", first, "|".join(rests)) for first, rests in sorted(by_first.items()))


_JSON_NAME_KEYS = ("name", "tool", "tool_name", "function", "action")  # action: LangChain's agent format
_JSON_ARG_KEYS = ("arguments", "parameters", "args", "input", "action_input")
# fallback for malformed objects (truncated, single-quoted, trailing commas)
_LOOSE_NAME = re.compile(r"[\"'](?:name|tool|tool_name|action)[\"']\s{0,20}:\s{0,20}[\"']")
_LOOSE_ARGS = re.compile(r"[\"'](?:arguments|parameters|args|input|action_input)[\"']\s{0,20}:")
_JSON_MAX_CHARS = 20_000  # an object longer than this is data, not a call envelope
_JSON_MAX_CANDIDATES = 64  # per text: bounds the work on adversarial input
# bracketed phrases judged per text (each costs a few microseconds of Python): a real message has a
# handful; 55,000 "[Team Name] Scout" lines took 270 ms (4,096 judged: 81 ms; 1,024: 70 ms). Past
# the budget, phrases are not judged.
_SLOT_MAX_CANDIDATES = 1024
# candidates set aside per text because they sit in code (each a regex match and a Python step):
# 111,111 "`[GOAL]` " took 158 ms. Past the budget, code no longer exempts them: a text flooded
# with quoted placeholders is judged as leaking (the safe side), and MAX_FINDINGS ends the scan.
_CODE_MAX_EXEMPT = 4096
_LOOSE_WINDOW = 1_000

# names inside a token that mark tool-call framing rather than chat framing, in any case and any
# family's spelling: <|tool_call>, [TOOL_CALLS], [ARGS], [CALL_ID], <arg_key>, <|call|> (harmony),
# <|START_ACTION|> (Command R), <｜DSML｜invoke name=...>, <atem:parameter ...>
_TOOLISH = re.compile(
    r"(?i:tool|function|python_tag|invoke|parameter|arg_key|arg_value"
    r"|(?<![a-z])(?:call|calls|call_id|action|args)(?![a-z]))"
)

_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)", re.MULTILINE)
_INLINE_CODE = re.compile(r"`[^`\n]{1,500}`")
_MAX_FENCES = 2048  # fence lines read per text (see _CodeSpans)

_KIND_REASON = {
    "tool": Reason.LEAK_TOOL_MARKUP,
    "reason": Reason.LEAK_REASONING,
    "answer": Reason.LEAK_REASONING,
    "declared": Reason.LEAK_REASONING,
    "special": Reason.LEAK_SPECIAL_TOKEN,
    "tok": Reason.LEAK_SPECIAL_TOKEN,
    "cat": Reason.LEAK_SPECIAL_TOKEN,
    "marker": Reason.LEAK_MARKER,
    "ph": Reason.LEAK_PLACEHOLDER,
    "json": Reason.LEAK_TOOL_MARKUP,
}
# kinds that are judged as code content inside a closed fence or inline code span
_CODE_EXEMPT = frozenset({"tool", "reason", "answer", "declared", "ph", "json"})

_CONTEXT_CHARS = 60
_BAR_TOKEN = re.compile("<\\|[^|<>\\s]{1,64}\\|>|<\uff5c[^\uff5c<>\\s]{1,64}\uff5c>")  # <|x|>, <｜x｜>
W = TypeVar("W", str, bytes)  # a word: str, or bytes for an ASCII text (see _ascii_words)
# --- tokens that are also ordinary writing ---------------------------------------------------
# A few built-in or mined tokens have a reading in prose that their family's framing never has.
# Each reading is a narrow shape; outside it the token is a leak. They apply to the built-in and
# mined tokens only: a token the model declares (LeakConfig.special_tokens, eot_tokens) is its own
# token wherever it stands. docs/leakage.md, "Tokens that are also writing".
_STRIKE_REACH = 200  # characters back from a </s> to the <s> it would close
_NOT_STRUCK = re.compile(r"[\n<>\[\]|\uff5c]")  # a struck text is words on one line, no markup
# [IMG] as a label: at a line's start (after blanks and a list marker), then a blank and a word
_LABEL_BEFORE = re.compile(r"\n[ \t]{0,8}(?:[-*+\u2022>][ \t]{1,4}|\d{1,3}[.)][ \t]{1,4})?\Z")
_LABEL_AFTER = re.compile(r"[ \t]{1,4}\w")
_SPACED_AFTER = re.compile(r"[ \t]{1,4}[^\s<\[]")
# exemptions granted per text (each a bounded look around in Python): past it, the safe side
_PROSE_READINGS_MAX = 256


def _closes_strikethrough(text: str, start: int, end: int, lo: int, vis: tuple[int, int]) -> bool:
    """``</s>`` at ``start`` closes an HTML ``<s>`` on its line around plain text (``<s>old</s>``):
    Llama 2's and Mistral's eos never follows its bos around bare words, their framing puts
    [INST] or another token between. A whole output wrapped in ``<s> ... </s>`` (``vis``: where
    the visible text starts and ends) is that framing too."""
    a = text.rfind("<s>", max(lo, start - _STRIKE_REACH), start)
    if a == -1 or _NOT_STRUCK.search(text, a + 3, start) is not None or text[a + 3 : start].isspace():
        return False
    return not (a <= vis[0] and end >= vis[1])


def _labels_a_line(text: str, start: int, end: int, lo: int, vis: tuple[int, int]) -> bool:
    """``[IMG]`` as a label that opens a line and is followed by words (``[IMG] Foto vom Dach``,
    ``- [IMG] dach.jpg``): Mistral's image token stands for pixels, before [IMG_BREAK]/[IMG_END]
    or other image tokens, never before a caption on its line. Mid-prose it is the token."""
    a = max(lo, start - 24)  # longer than any blanks and list marker _LABEL_BEFORE takes
    before = ("\n" if a == lo else "") + text[a:start]  # the visible text's start opens a line
    return _LABEL_BEFORE.search(before) is not None and _LABEL_AFTER.match(text, end) is not None


def _spaced_word(text: str, start: int, end: int, lo: int, vis: tuple[int, int]) -> bool:
    """Reka's ``<sep>`` between blanks in a line of prose (``Trenner <sep> hier``): the template
    writes it glued, after a turn's text or a blank line and before a role word (``<sep>human:``)."""
    return start > lo and text[start - 1] in " \t" and _SPACED_AFTER.match(text, end) is not None


_PROSE_READINGS: dict[str, Callable[[str, int, int, int, tuple[int, int]], bool]] = {
    "</s>": _closes_strikethrough,
    "[IMG]": _labels_a_line,
    "<sep>": _spaced_word,
}

# a text with more leaks than this is hopeless anyway; the cap bounds the time on inputs
# such as "<think>" * 50000, where building 50,000 findings was the cost
MAX_FINDINGS = 1000


@dataclass(frozen=True)
class LeakConfig:
    """What counts as a leak for one suite (see docs/leakage.md)."""

    special_tokens: tuple[str, ...] = ()
    eot_tokens: tuple[str, ...] = ()
    reasoning_tags: tuple[str, str] | None = None
    markers: tuple[str, ...] = ("[NO CHAT]",)
    allowed_markers: tuple[str, ...] = ()
    placeholder_patterns: tuple[str, ...] = ()
    placeholder_names: tuple[str, ...] = ()  # the suite's template variables: [name] is a slot
    allowed_placeholders: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    scaffold_texts: tuple[str, ...] = ()
    scaffold_min_words: int = 12  # a verbatim run of this many scaffold words is an echo
    tool_names: tuple[str, ...] = ()  # the suite's tools: "assign_task(agent=" in a message is a call
    # regexes of every registered protocol's call markup (how an attempt opens and closes; the
    # scorer derives them from protocols.REGISTRY): found in any output, as tool markup, where
    # no token or other finding already covers the text
    call_markup: tuple[str, ...] = ()
    # the protocol in force's own markup pieces: a declared token that is one of them is tool markup
    own_call_markup: tuple[str, ...] = ()


@dataclass(frozen=True)
class _ScaffoldIndex:
    words: tuple[tuple[str, ...], ...]
    grams: dict[tuple[str, ...], tuple[tuple[int, int], ...]]
    gram: int
    stride: int
    min_words: int
    ascii_only: bool = False  # every scaffold word is ASCII (see _ascii_skeleton)
    # the same words and grams as UTF-8 bytes, compared with an ASCII text's words split as bytes
    # (_ascii_words): a non-ASCII word's bytes never equal an ASCII word, as the strings never do
    bwords: tuple[tuple[bytes, ...], ...] = ()
    bgrams: dict[tuple[bytes, ...], tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # (first word, last word) of every gram, as str and as bytes: a window whose two ends are
    # no gram's ends is no gram, and checking the ends hashes a third of the words
    ends: frozenset[tuple[str, str]] = frozenset()
    bends: frozenset[tuple[bytes, bytes]] = frozenset()
    # the grams' hashes, compiled (None where the extension is not built): a text with no window
    # among them holds no echo, decided without splitting it into words (see _scaffold_echoes)
    echo: _EchoGrams | None = None
    # the scaffold's Han and kana, compared by character (see _HanKanaIndex); None without any
    han_kana: _HanKanaIndex | None = None


@dataclass(frozen=True)
class _HanKanaIndex:
    """The stream of each passage of Han and kana in the scaffold texts (``checks.han_kana``: what
    separates the characters dropped, as an echo of words drops what separates the words), and
    every ``gram``-long piece of them. Chinese and Japanese write no spaces:
    as runs of word characters a whole clause is one word, and an echo of a paragraph of a
    Chinese prompt never reached ``min_words``. Their echo is a run of ``min_chars`` characters
    (twice ``min_words``: about what that many English words say)."""

    streams: tuple[str, ...]
    grams: dict[str, tuple[tuple[int, int], ...]]
    gram: int
    stride: int
    min_chars: int


@dataclass(frozen=True)
class CompiledLeakConfig:
    config: LeakConfig
    scanner: re.Pattern[str]
    extra: tuple[tuple[Reason, SuiteRegex], ...]  # the suite's own patterns, run with a time bound
    eot_tokens: tuple[str, ...]
    reasoning_tags: tuple[str, str] | None
    allowed: frozenset[str]
    scaffold: _ScaffoldIndex | None = field(default=None)
    # per ``extra`` pattern: a literal every match contains (and whether it is compared
    # ignoring case), or None; a text without it cannot match (see ``_required_literal``)
    extra_literals: tuple[tuple[str, bool, bool] | None, ...] = ()
    # the characters every scanner match starts with (see ``_first_chars``), or None
    scanner_firsts: tuple[str, ...] | None = None
    # the ASCII ones: all an ASCII text can hold (str.isascii() is a flag, not a pass)
    ascii_firsts: tuple[str, ...] | None = None
    # a call of one of the suite's tools written as text (``_tool_call_text``), and its names
    tool_call_text: re.Pattern[str] | None = None
    # the scanner's entries and their leads, for the scanners without a kind (``_without``)
    entries: tuple[tuple[str, str, str], ...] = ()
    leads: tuple[str | None, ...] = ()
    narrow_leads: tuple[str | None, ...] = ()  # see _lead
    # the kind of each named group ("ph_25" -> "ph"), in the scanner and in every ``_without``
    group_kinds: Mapping[str | None, str] = field(default_factory=dict)
    variants: dict[frozenset[str], tuple[re.Pattern[str], tuple[str, ...]] | None] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    # (literals, reason, pattern, fill only): looked for where one of the literals occurs (see
    # ``_RARE``); a "fill only" match (a protocol's markup) counts only where no other finding is
    rare: tuple[tuple[tuple[str, ...], Reason, re.Pattern[str] | SuiteRegex, bool], ...] = ()
    own_markup: re.Pattern[str] | None = None
    # the literals of ``rare``, looked for together (``bounded.literals``: one pass per anchor
    # character, not one search per literal): an entry whose literal is absent is not run
    rare_literals: LiteralSet = field(default_factory=lambda: LiteralSet(()), compare=False, hash=False, repr=False)


def _group_by_first_char(
    entries: list[tuple[str, str, str]], leads: list[str | None] | None = None, numbers: list[int] | None = None
) -> str:
    """One alternation per first character; with ``leads`` (one per entry, see ``_lead``), a group
    whose every entry has one is guarded by a lookahead of them. Entry i's group is named
    ``{kind}_{numbers[i]}`` (``numbers``: by default, its position)."""
    branches: dict[str, list[str]] = {}
    guards: dict[str, list[str | None]] = {}
    for n, (kind, first, rest) in enumerate(entries):
        i = numbers[n] if numbers is not None else n
        # the group that names the entry comes last: an alternative that opens with a character
        # or a set is then rejected on it by the regex engine without being entered
        branches.setdefault(first, []).append(f"(?:{rest})(?P<{kind}_{i}>)")
        guards.setdefault(first, []).append(leads[n] if leads is not None else None)
    groups = []
    for first, alts in branches.items():
        group_leads = guards[first]
        guard = ""
        if len(alts) > 1 and all(lead is not None for lead in group_leads):
            lookahead = merged([lead for lead in group_leads if lead is not None])
            guard = precheck(first, lookahead) + f"(?={lookahead})"
        groups.append(f"{re.escape(first)}{guard}(?:{'|'.join(alts)})")
    return "|".join(groups)


# --- guards ---------------------------------------------------------------------------------
# At a candidate first character the regex engine tries every branch of its group in turn, each
# a few dozen instructions even when it fails on the next character: ~0.5 us per "[" ("[" * 10**6
# took 0.44 s; "[   " * 250000 0.18 s). A lookahead of what the branches need right after the
# first character rejects most positions in a step or two. Each lead is a necessary condition for
# its entry (tests/checks/test_leak_scan_equivalence.py checks every built-in entry against its lead, and
# the guarded scanner against the unguarded one). Every alternative of a lead starts with a
# character or a set: the regex engine rejects those on the first character without entering them.
# How a pattern is read to build them (its first characters, its alternatives): checks/_regex_guards.py.
_GUARD_REACH = 400  # longer than any bracketed shape (padded upper snake case: 375)
_CLOSERS = {"[": "]", "<": ">", "{": "}"}
# ASCII letters and the four other characters a case-insensitive letter matches (tags are compared
# ignoring case: "<\u017fcratchpad>" is "<scratchpad>" to the regex engine), "_", "/" (a closing
# tag) and the bars of special tokens (<|eot|>, <\uff5cend\uff5c>)
_LEAD_FIRSTS = "A-Za-z_/|\uff5c\u0130\u0131\u017f\u212a"


def _closed_tail(first: str) -> str:
    """The closer of ``first`` before any opener or closer, within ``_GUARD_REACH`` characters."""
    close = _CLOSERS[first]
    return rf"[^{re.escape(first + close)}]{{0,{_GUARD_REACH}}}+{re.escape(close)}"


def _closed_lead(first: str, rest: str = "", narrow: bool = False) -> str:
    """What a bracketed shape needs after its opener: up to three blanks, one of ``_LEAD_FIRSTS``,
    then its closer before any opener or closer, within ``_GUARD_REACH`` characters. After "[",
    also a pythonic call list shown as text (``[send_message_to_chat(``), and no "[" or "(" after
    the closer (a Markdown link's text, which no shape is). Every built-in entry of these first
    characters is one, except those in ``_SPECIFIC_LEADS``."""
    close = _CLOSERS[first]
    closed = _closed_tail(first)
    if first == "[":
        # any letter of any script after "[": [Имя получателя], [이름], [姓名]
        generic = blanks_then(rf"[{_LEAD_FIRSTS}\u0080-\U0010ffff](?:[\w.]{{0,100}}+\(|{closed}(?![\[(]))", r"\s", 5)
        if not narrow or not rest.endswith(r"\](?![\[(])"):  # its own lead: only a shape that is no link
            return generic
        closed = _SQUARE_TAIL
    else:
        generic = blanks_then(f"[{_LEAD_FIRSTS}]{closed}")
    # the entry's own first characters after its padding: "<b>", "{x}" and "x < y" pass no shape's
    # lead after "<" and "{" (after "[", only in the narrow leads)
    padded = rest.startswith(_PAD)
    own = first_class(rest[len(_PAD) :] if padded else rest) if rest else None
    if own is not None and not any(re.fullmatch(f"[{own}]", c) for c in (first, close, " ", "\t", "\n")):
        return blanks_then(f"[{own}]{closed}") if padded else f"[{own}]{closed}"
    return generic


_PAD = r"[ \t]{0,3}+"  # as placeholders.py pads a shape

_WORDS_LEAD = ("TOOL_CALLS", "TOOL_RESULTS", "AVAILABLE_TOOLS", "CALL_ID", "THINK", "INST", "SYSTEM_PROMPT")
# one alternative per word: each opens with a character, which the regex engine tests first
_CONTROL_WORDS = "|".join([f"/(?:{'|'.join(_WORDS_LEAD)})\\]", *(rf"{w}\]" for w in [*_WORDS_LEAD, "gMASK"])])
_SLOT_VERBS = sorted(SLOT_VERBS)  # each its own alternative: they open with a character
_SLOT_ANGLED = next(rest for first, rest in SLOT_CANDIDATES if first == "<")
_SLOT_BRACED = next(rest for first, rest in SLOT_CANDIDATES if first == "{")
_SLOT_PERCENT = next(rest for first, rest in SLOT_CANDIDATES if first == "%")  # %nombre%
_FORMAT_PERCENT = next(rest for first, rest in PLACEHOLDER_SHAPES if first == "%")  # %s, %(name)s, %1$s
_PERCENT_LEAD = r"(?<![\w%]%)(?:\([A-Za-z_]|[1-9]\$|s|[^\W\d_])"


def _any_case(word: str) -> str:
    """``word`` as a case-insensitive match reads it, one set per letter (with the non-ASCII
    letters such a match takes for an ASCII one: "\u017f" is "s")."""
    return "".join(
        "["
        + "".join(
            sorted({c.lower(), c.upper(), *(f for f in "\u0130\u0131\u017f\u212a" if re.fullmatch(f"(?i:{c})", f))})
        )
        + "]"
        for c in word
    )


_SPECIFIC_LEADS: dict[str, str] = {
    # the built-in entries that are not closed shapes, each with a necessary condition of its own
    _INVOKE: r"invoke\s",  # <invoke name=... (the ">" is optional)
    # the call tags' first letters (their lookarounds hide them from first_class): "<b>" passes none
    _TOOL_TAG: "|".join(
        f"{o}{_any_case(w)}[-_]?[uUcCrR]" for o in ("/", "") for w in ("tool", "function")
    ),  # "<tools>", "<b>" pass none
    _TOOL_NAMED: r"[tT][oO][oO][lL]\s",
    # words: the word itself ("<f>", "<b>" are HTML, and pass a closed lead)
    _FUNCTION_EQ: "function=",
    _PARAMETER: r"parameter[=\s]",
    _CLOSING_PARTS: _CLOSING_PARTS,
    _NAMED_SPECIAL: "|".join(f"{re.escape(w)}>" for w in _NAMED_SPECIAL[3:-2].split("|")),
    # upper case, or the one lower-case word: "<p>" is HTML
    next(rest for first, rest in PLACEHOLDER_SHAPES if first == "<"): f"[A-Z]{_closed_tail('<')}|placeholder>",
    # upper case, or an instruction verb and a blank (as the shapes' own lookahead): "<a>", "{x}"
    # (positive sets, which the group's precheck can read: a letter of another script, any case)
    _SLOT_ANGLED: "|".join(
        [f"[A-Z\\u0080-\\U0010ffff]{_closed_tail('<')}", *(f"{v}\\s{_closed_tail('<')}" for v in _SLOT_VERBS)]
    ),
    # any letter after "{": {nombre}, {datum}, {имя}
    _SLOT_BRACED: f"[A-Za-z\\u0080-\\U0010ffff]{_closed_tail('{')}",
    _LLAMA2_SYS: _LLAMA2_SYS,  # <<SYS>>: an opener inside
    # both "%" entries: their own lookbehind (not after a word or a "%"), then a letter of any script
    # (%nombre%) or what a format slot opens with: "%(" * 500000 tried both entries at every "%"
    # (97 ms in the scorer); one lead for the two, so that "%a" * 500000 tests the lookbehind once
    _SLOT_PERCENT: _PERCENT_LEAD,
    _FORMAT_PERCENT: _PERCENT_LEAD,
    _MINIMAX_EOS: _MINIMAX_EOS,  # [e~[: an opener inside
    # the family shapes' own heads (bounded): "<b>" passes none of them, as it passes no other
    # (each with its closer: "<seed:<seed:" passes none)
    _NAMESPACED: "|".join(f"{o}{ns}:{_closed_tail('<')}" for o in ("/", "") for ns in _NAMESPACES.split("|")),
    _BAR_NAMESPACED: "|".join(f"{o}\uff5c[A-Za-z]{{1,16}}+\uff5c{_closed_tail('<')}" for o in ("/", "")),
    # its names' first two letters in any case (think, thought; reasoning, reflection; scratchpad;
    # "\u017f" is an "s" to a case-insensitive match), after the "/" of a closing tag too: "<tools>",
    # "</b>" and "</call>" passed "t" or "/" and entered every branch
    _REASON_TAG: "|".join(
        f"{slash}{head}{_closed_tail('<')}"
        for slash in ("/", "")
        for head in (*map(_any_case, ("th", "re", "sc")), *(_any_case(ns) + ":" for ns in _NAMESPACES.split("|")))
    ),
    # "an" or "fi" in any case, after the "/" of a closing tag too
    _ANSWER_TAG: "|".join(
        f"{slash}{head}{_closed_tail('<')}" for slash in ("/", "") for head in map(_any_case, ("an", "fi"))
    ),
    _JSON_KEY: blanks_then(r"[\"'][a-z]", r"\s", 20),  # a JSON object's first key
    # control words, a link's text or not ([INST][/INST]): one lead for the three
    _MISTRAL_WORDS: _CONTROL_WORDS,
    _THINK_WORDS: _CONTROL_WORDS,
    _INST_WORDS: _CONTROL_WORDS,
    # template syntax: {{ }}, {% %}, {# #} (their own runs, possessive: the run cannot hold the closer)
    PLACEHOLDER_SHAPES[0][1]: r"\{[^{}\n]{0,200}+\}\}",
    PLACEHOLDER_SHAPES[1][1]: r"%[^%\n]{0,200}+%\}",
    PLACEHOLDER_SHAPES[2][1]: r"#[^#\n]{0,200}+#\}",
}


def _lead(first: str, rest: str, narrow: bool = False) -> str | None:
    """A regex that matches right after ``first`` wherever ``first + rest`` matches, or None.
    ``narrow``: after "[", each entry's own lead (``_NARROW_LEADS``, or its first characters), not
    the one lead they share; for the scanners without slots (``_without``), where "[x] " * 250000
    would pass the shared lead at every bracket."""
    if rest in _SPECIFIC_LEADS:
        return _SPECIFIC_LEADS[rest]
    if narrow and rest in _NARROW_LEADS:
        return _NARROW_LEADS[rest]
    return _closed_lead(first, rest, narrow) if first in _CLOSERS else None


# after "[": a bracket's content up to its closer, not a link's text
_SQUARE_TAIL = rf"[^\[\]]{{0,{_GUARD_REACH}}}+\](?![\[(])"
_SQUARE_SHAPES = [rest for first, rest in PLACEHOLDER_SHAPES if first == "["]  # [TODO: ...], [ AGENT_NAME ]
_SQUARE_WORDS = ("GOAL", "NAME", "DATE", "TIME", "LOCATION", "TOPIC", "PLACEHOLDER", "TODO", "TBD")
_NARROW_LEADS: dict[str, str] = {
    _PYTHONIC_CALL: blanks_then(r"[A-Za-z_][\w.]{0,100}+\(", r"\s", 5),
    # upper or lower snake case (an underscore within the first word), the shape's words and
    # word openings ("[A-B] " * 166,666 passed "any upper-case letter" at every bracket: 124 ms)
    _SQUARE_SHAPES[0]: "|".join(
        [
            f"[A-Z][A-Z0-9]{{0,40}}+_{_SQUARE_TAIL}",
            f"[a-z][a-z0-9]{{0,40}}+_{_SQUARE_TAIL}",
            "TODO:",
            "TBD:",
            r"INSERT\b",
            "FILL",
            "YOUR ",
            *(rf"{w}\]" for w in _SQUARE_WORDS),
        ]
    ),
    # padded, or upper kebab case whose last segment is a slot noun (and HERE after it, maybe)
    _SQUARE_SHAPES[1]: "|".join(
        [
            f"[ \\t][ \\t]{{0,2}}+[A-Za-z_]{_SQUARE_TAIL}",
            rf"[A-Z][A-Z0-9]{{0,40}}+-[A-Z0-9-]{{0,400}}?(?:{'|'.join(KEBAB_SLOT_NOUNS)})(?:-HERE)?\]",
            *(rf"{w}-HERE\]" for w in KEBAB_SLOT_NOUNS),
        ]
    ),
}


def _name_lead(names: tuple[str, ...]) -> str | None:
    """The narrow lead of a suite's name shapes after "[": every shape of a name (``agent_name``,
    ``AGENT-NAME``, ``agent name``, ``agentname``, padded or not) opens with the name's first two
    letters in some case, as the shapes' case-insensitive match reads them ("\u212a" is "k"). Their
    first letters alone let "[A-B] " * 166,666 through at every bracket (agent_name: 124 ms). None
    when a name does not open with two ASCII letters (the shared lead then serves)."""
    prefixes = sorted({n[:2] for n in names})
    if not prefixes or not all(re.fullmatch("[A-Za-z]{2}", p) for p in prefixes):
        return None

    def folds(letter: str) -> str:
        return "".join(sorted({letter.lower(), letter.upper(), *(c for c in _FOLDED if _same_letter(c, letter))}))

    return "|".join(blanks_then(f"[{folds(p[0])}][{folds(p[1])}]") for p in prefixes)


_FOLDED = "\u0130\u0131\u017f\u212a"  # the non-ASCII characters a case-insensitive ASCII letter matches


def _same_letter(c: str, letter: str) -> bool:
    return re.fullmatch(f"(?i:{re.escape(letter)})", c) is not None


def _marker_entry(marker: str) -> tuple[str, str]:
    # "[brb:" also matches "[brb: back in 5]": the marker's own text plus its argument
    if marker.endswith(":"):
        return marker[0], re.escape(marker[1:]) + r"(?:[^\[\]\n]{0,200}\])?"
    return marker[0], re.escape(marker[1:])


def _words(text: str) -> list[str]:
    """Casefolded runs of word characters (what an echo is compared on): ``\\w+``."""
    if text.isascii():  # same words as the regex, about 3x faster
        return text.translate(_ASCII_NONWORD).lower().split()
    words = _WORD.findall(text)
    if not words:
        return []
    # one lower() over the joined words, not one per word: the same words (no lower-case
    # mapping makes a space, and a space ends the final-sigma context as a word end does)
    return " ".join(words).lower().split(" ")


_WORD = re.compile(r"\w+")
_WORD_SPLIT = re.compile(r"(\w+)")
# every ASCII character that \w does not match (whitespace included) becomes a space
_ASCII_NONWORD = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")})
# ... and, for bytes, every ASCII word character becomes its lower case in the same pass
_ASCII_WORD_LOWER = bytes(
    ord(chr(c).lower()) if c < 128 and (chr(c).isalnum() or c == 0x5F) else 0x20 for c in range(256)
)


def _ascii_words(text: str) -> list[bytes]:
    """``_words`` of an ASCII text, as bytes: one translate (non-word characters to spaces,
    letters to lower case, as str.lower does on ASCII) and a split, skipping the str machinery
    and the separate lower(); ~6 us less per 2 KB, on every leak scan."""
    return text.encode("ascii").translate(_ASCII_WORD_LOWER).split()


def _utf8(word: str) -> bytes:
    return word.encode("utf-8", "surrogatepass")  # one-to-one, so distinct words stay distinct


def _build_scaffold(texts: tuple[str, ...], min_words: int) -> _ScaffoldIndex | None:
    if not texts or min_words < 2:
        return None
    # Any run of min_words equal words contains a gram-long window starting at a multiple of
    # stride (gram + stride - 1 <= min_words), so the output side hashes only every stride-th
    # window instead of all of them.
    gram = (min_words + 1) // 2
    stride = min_words - gram + 1
    words = tuple(tuple(_words(t)) for t in texts)
    grams: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for ti, ws in enumerate(words):
        for i in range(len(ws) - gram + 1):
            hits = grams.setdefault(ws[i : i + gram], [])
            if len(hits) < 16:
                hits.append((ti, i))
    frozen = {k: tuple(v) for k, v in grams.items()}
    ascii_only = all(w.isascii() for ws in words for w in ws)
    bwords = tuple(tuple(map(_utf8, ws)) for ws in words)
    bgrams = {tuple(map(_utf8, k)): v for k, v in frozen.items()}
    ends = frozenset((k[0], k[-1]) for k in frozen)
    bends = frozenset((k[0], k[-1]) for k in bgrams)
    echo = _compiled.EchoGrams(bgrams, gram, stride) if _compiled is not None and bgrams else None
    han_kana = None if ascii_only else _build_han_kana(texts, 2 * min_words)
    return _ScaffoldIndex(
        words, frozen, gram, stride, min_words, ascii_only, bwords, bgrams, ends, bends, echo, han_kana
    )


#: the tries at extending a window of Han and kana into an echo in one text before each window
#: gets one: a scaffold whose pieces repeat (a tools list with one description many times) hits
#: every window up to 16 times, the same piece each time
_HAN_KANA_MAX_TRIES = 4096


def _build_han_kana(texts: tuple[str, ...], min_chars: int) -> _HanKanaIndex | None:
    streams = tuple(han_kana.stream(m.group()) for t in texts for m in han_kana.passages(t))
    if all(len(st) < min_chars for st in streams):
        return None
    # as for words: any run of min_chars equal characters holds a gram-long piece starting at a
    # multiple of stride
    gram = (min_chars + 1) // 2
    stride = min_chars - gram + 1
    grams: dict[str, list[tuple[int, int]]] = {}
    for ti, st in enumerate(streams):
        for i in range(len(st) - gram + 1):
            hits = grams.setdefault(st[i : i + gram], [])
            if len(hits) < 16:
                hits.append((ti, i))
    return _HanKanaIndex(streams, {k: tuple(v) for k, v in grams.items()}, gram, stride, min_chars)


def _shared_length(a: str, a_at: int, b: str, b_at: int, step: int, limit: int) -> int:
    """How many characters (at most ``limit``) ``a`` and ``b`` share going forward (``step`` 1)
    from ``a_at`` and ``b_at``, or backward (``step`` -1) before them. Galloping: lengths 1, 2,
    4, ... until one differs, then halving, each try one slice comparison in C, so a mismatch at
    once costs one try and a long echo a few."""
    room = min(limit, len(a) - a_at, len(b) - b_at) if step > 0 else min(limit, a_at, b_at)

    def same(n: int) -> bool:
        if step > 0:
            return a[a_at : a_at + n] == b[b_at : b_at + n]
        return a[a_at - n : a_at] == b[b_at - n : b_at]

    return last_true(same, room)


def _han_kana_echoes(text: str, lo: int, hi: int, idx: _HanKanaIndex) -> list[tuple[int, int]]:
    """The echoes of the scaffold's Han and kana in ``text[lo:hi]``, as character spans of it:
    in each passage long enough to hold one, compared on its stream (``checks.han_kana``)."""
    g, grams, spans, tries = idx.gram, idx.grams, list[tuple[int, int]](), 0
    # an echo through a window goes on for min_chars - gram more characters, so on one side at
    # least half of them: a hit that shares neither half is no echo (two slice comparisons)
    half = (idx.min_chars - g + 1) // 2
    for passage in han_kana.passages(text, lo, hi):
        st = han_kana.stream(passage.group())
        if len(st) < idx.min_chars:
            continue
        runs: list[tuple[int, int]] = []
        covered = 0
        for q in range(0, len(st) - g + 1, idx.stride):
            if q < covered:
                continue
            hits = grams.get(st[q : q + g])
            if hits is None:
                continue
            best = (0, 0)
            # past the budget, one try a window: a scaffold's repeated piece is the same piece
            for ti, r in hits if tries < _HAN_KANA_MAX_TRIES else hits[:1]:
                sc = idx.streams[ti]
                if st[q + g : q + g + half] != sc[r + g : r + g + half] and (
                    q - covered < half or r < half or st[q - half : q] != sc[r - half : r]
                ):
                    continue
                back = _shared_length(st, q, sc, r, -1, q - covered)
                ahead = _shared_length(st, q + g, sc, r + g, 1, len(st))
                if g + back + ahead > best[1] - best[0]:
                    best = (q - back, q + g + ahead)
            tries += len(hits)
            if best[1] - best[0] >= idx.min_chars:
                runs.append(best)
                covered = best[1]
            if len(spans) + len(runs) >= MAX_FINDINGS:
                break
        if runs:
            at = han_kana.offsets(passage.group(), [k for a, e in runs for k in (a, e - 1)])
            base = passage.start()
            spans += [(base + at[2 * i], base + at[2 * i + 1] + 1) for i in range(len(runs))]
        if len(spans) >= MAX_FINDINGS:
            break
    return spans


def _ascii_skeleton(text: str) -> str:
    """``text`` with every non-ASCII character made a separator (KELVIN SIGN, the one non-ASCII
    character whose lower case is ASCII, first becomes "k"), all in C.

    A word of an ASCII-only scaffold can only equal a word made of ASCII characters, and the
    characters between two such words stay separators here, so every echo in ``text`` is an
    echo in the skeleton: a skeleton without an echo candidate proves there is none, without
    splitting a long non-ASCII text into words with the regex (~0.2 s per MB)."""
    return text.replace("\u212a", "k").encode("ascii", "replace").decode("ascii")


def _candidate_keys(
    ws: list[W], idx: _ScaffoldIndex, grams: Mapping[tuple[W, ...], object], ends: frozenset[tuple[W, W]]
) -> list[tuple[W, ...]] | None:
    """The gram at every stride-th word, or None when none of them is one of ``grams`` (the
    index's grams, as str or as bytes like ``ws``; ``ends`` their first and last words)."""
    # built in C: ws[k::stride] holds word q + k of each window q, and zip stops at the last
    # window that fits (the one whose last word, at k = gram - 1, exists)
    stride, last = idx.stride, idx.gram - 1
    if ends.isdisjoint(zip(ws[::stride], ws[last::stride], strict=False)):  # no gram has these two ends
        return None
    keys = list(zip(*(ws[k::stride] for k in range(idx.gram)), strict=False))
    if grams.keys().isdisjoint(keys):  # the common case, decided in C
        return None
    return keys


@functools.lru_cache(maxsize=256)
def compile_leak_config(cfg: LeakConfig) -> CompiledLeakConfig:
    """Precompile one suite's leak rules (cached: call it freely)."""
    entries: list[tuple[str, str, str]] = []
    literal_leads: dict[int, str] = {}  # a suite's literal entries: their own text is the lead
    if cfg.reasoning_tags:
        for tag in cfg.reasoning_tags:
            if tag:
                literal_leads[len(entries)] = re.escape(tag[1:])
                entries.append(("declared", tag[0], re.escape(tag[1:])))
    tokens = sorted({t for t in (*cfg.special_tokens, *cfg.eot_tokens) if t}, key=len, reverse=True)
    for tok in tokens:
        literal_leads[len(entries)] = re.escape(tok[1:])
        entries.append(("tok", tok[0], re.escape(tok[1:])))
    allowed = frozenset((*cfg.allowed_markers, *cfg.allowed_placeholders))
    # a suite's markers before the built-in shapes: "[NO_CHAT]" declared a marker is a marker
    for marker in sorted({m for m in cfg.markers if m and m not in allowed}, key=len, reverse=True):
        first, rest = _marker_entry(marker)
        literal_leads[len(entries)] = re.escape(marker[1:])
        entries.append(("marker", first, rest))
    for kind, first, rest in _catalogue_entries():
        literal_leads[len(entries)] = rest  # its alternatives, each opening with a character
        entries.append((kind, first, rest))
    entries.extend(_BUILTIN)
    names_from = len(entries)
    entries.extend(("ph", first, rest) for first, rest in name_shapes(cfg.placeholder_names))
    names_to = len(entries)
    # last among "[", "<", "{" candidates: words, a placeholder only if is_slot_phrase says so
    entries.extend(("slot", first, rest) for first, rest in SLOT_CANDIDATES)
    leads = [literal_leads[i] if i in literal_leads else _lead(f, r) for i, (_, f, r) in enumerate(entries)]
    narrow = [literal_leads[i] if i in literal_leads else _lead(f, r, True) for i, (_, f, r) in enumerate(entries)]
    name_lead = _name_lead(cfg.placeholder_names)
    for i in range(names_from, names_to):
        if name_lead is not None:
            narrow[i] = name_lead
            if entries[i][1] != "[":  # after "[" the shared lead serves the scanner with slots
                # the first two letters, not the first: "<call>" * 166,666 passed <current_goal>'s
                # lead at every tag and entered every branch (97 ms in the scorer)
                leads[i] = name_lead
    scanner = re.compile(cheap_sets(_group_by_first_char(entries, leads)))
    extra = tuple((Reason.LEAK_PLACEHOLDER, compile_suite_regex(p)) for p in cfg.placeholder_patterns) + tuple(
        (Reason.FORBIDDEN_PATTERN, compile_suite_regex(p)) for p in cfg.forbid
    )
    return CompiledLeakConfig(
        config=cfg,
        scanner=scanner,
        extra=extra,
        eot_tokens=tuple(sorted({t for t in cfg.eot_tokens if t}, key=len, reverse=True)),
        reasoning_tags=cfg.reasoning_tags if cfg.reasoning_tags and all(cfg.reasoning_tags) else None,
        allowed=allowed,
        scaffold=_build_scaffold(cfg.scaffold_texts, cfg.scaffold_min_words),
        extra_literals=tuple(_required_literal(p) for _, p in extra),
        scanner_firsts=(firsts := _entry_firsts(entries) or _first_chars(scanner)),
        ascii_firsts=None if firsts is None else _ascii_only(firsts),
        tool_call_text=_tool_call_text(cfg.tool_names),
        entries=tuple(entries),
        leads=tuple(leads),
        narrow_leads=tuple(narrow),
        group_kinds={f"{kind}_{i}": kind for i, (kind, _, _) in enumerate(entries)},
        rare=(rare := _RARE_COMPILED + _markup_entries(cfg.call_markup, scanner)),
        rare_literals=LiteralSet(lit for r in rare for lit in r[0]),
        own_markup=re.compile("|".join(f"(?:{p})" for p in cfg.own_call_markup)) if cfg.own_call_markup else None,
    )


_RARE_COMPILED = tuple(
    ((lit,) if isinstance(lit, str) else lit, _KIND_REASON[kind], re.compile(rx), True) for lit, kind, rx in _RARE
)
_MARKUP_LITERAL_MIN = 3  # a protocol's markup without a literal this long is not scanned for (JSON, [name()


def _markup_entries(
    pieces: tuple[str, ...], scanner: re.Pattern[str]
) -> tuple[tuple[tuple[str], Reason, SuiteRegex, bool], ...]:
    """The protocols' markup pieces that carry a literal to look for (``<｜DSML｜function_calls>``,
    ``<|channel|>commentary to=``); a piece without one (a JSON object's opening, a pythonic
    list's ``[name(``) is no markup in prose, and the other shapes find the rest. Compiled with
    the bounded engine (RE2 where it can: linear in the text). A piece whose literal the scanner
    finds whole (``<tool_call>``) adds nothing: every match of it holds that finding."""
    out = []
    for piece in dict.fromkeys(pieces):
        found = _required_literal(re.compile(piece))
        if found is None or found[1] or len(found[0]) < _MARKUP_LITERAL_MIN or scanner.fullmatch(found[0]):
            continue
        out.append(((found[0],), Reason.LEAK_TOOL_MARKUP, compile_suite_regex(piece), True))
    return tuple(out)


def _entry_firsts(entries: Iterable[tuple[str, str, str]]) -> tuple[str, ...] | None:
    """What ``_first_chars`` finds in the scanner ``_group_by_first_char`` builds from ``entries``
    (an alternation of groups, each opening with its escaped first character), read from the
    entries without parsing the pattern again (~6 ms for the built-in scanner); None where a
    first is not one character (``_first_chars`` then decides)."""
    firsts = {first for _, first, _ in entries}
    if not firsts or any(len(f) != 1 for f in firsts):
        return None
    return tuple(sorted(firsts))


def _first_chars(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    """The characters a match of ``pattern`` can start with, when its top level is a literal
    character or an alternation of branches that each start with one (as the combined scanner
    is built); None when that is not certain (any other shape, or case folding)."""
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # an optimisation: never a reason to fail
        return None
    if parsed.state.flags & re.IGNORECASE or not len(parsed):
        return None
    op, av = parsed[0]
    branches = av[1] if op is sre_parse.BRANCH and len(parsed) == 1 else [parsed]
    firsts: set[str] = set()
    for branch in branches:
        if not len(branch) or branch[0][0] is not sre_parse.LITERAL:
            return None
        firsts.add(chr(branch[0][1]))
    return tuple(sorted(firsts))


@functools.lru_cache(maxsize=64)
def _ascii_only(firsts: tuple[str, ...]) -> tuple[str, ...]:
    """The ASCII characters of ``firsts``: the others cannot occur in an ASCII text (on every
    2 KB ASCII output, 16 of the scanner's 24 first characters are not searched for)."""
    return tuple(c for c in firsts if c.isascii())


# At most this many characters that can start a match: try a match at each (found with
# str.find, in C); more, and one regex scan is cheaper than a Python step per candidate.
_SPARSE_MAX = 48


def _scan(
    cfg: CompiledLeakConfig,
    text: str,
    lo: int,
    hi: int,
    scanner: re.Pattern[str] | None = None,
    firsts: tuple[str, ...] | None = None,
) -> Iterable[re.Match[str]]:
    """``cfg.scanner.finditer(text, lo, hi)``, faster on text with few candidates.

    The regex engine's search tests every position against the set of first characters
    (~50 instructions per character: ~100k per 2 KB output, the largest cost of the scan).
    Every match starts with one of ``cfg.scanner_firsts``, so the same matches are found by
    trying ``match`` only where one occurs, in order, going on from each match's end as the
    search does (``match`` at a position sees the text before it, as the search does); text
    with none of them has no match at all. ``scanner`` and ``firsts``: another scanner (one of
    ``_without``) and its first characters."""
    if scanner is None:
        scanner, firsts = cfg.scanner, (cfg.ascii_firsts if text.isascii() else cfg.scanner_firsts)
    elif firsts is not None and text.isascii():
        firsts = _ascii_only(firsts)
    if firsts is None:
        return scanner.finditer(text, lo, hi)
    starts: list[int] = []
    for c in firsts:
        k = text.find(c, lo, hi)  # memchr: a fraction of an instruction per character
        while k != -1:
            if len(starts) == _SPARSE_MAX:
                return scanner.finditer(text, lo, hi)
            starts.append(k)
            k = text.find(c, k + 1, hi)
    if not starts:
        return ()
    starts.sort()
    return _matches_from(scanner, text, starts, hi)


# What a match of a kind that ``_without`` can drop holds after its first character. Dropping the
# kind is exact when no match of the other kinds can start on one of these: a match of the dropped
# kind ends where the full scanner would have gone on, and no other match starts inside it.
_INNER_CHARS: dict[str, Callable[[str], bool]] = {
    # a run of word characters but 〇, apostrophes, hyphens and blanks, and the closers
    "slot": lambda c: (
        (c.isalnum() and c != "\u3007") or c in "_'\u2019- \t\u3000]>})\uff3d\u3011\u3015\u3017\u300d\u300f"
    ),
    # \s{0,20}["'](?:name|tool|...)["']\s{0,20}:
    "json": lambda c: c.isspace() or (c.isascii() and (c.isalpha() or c in "\"':_")),
}


def _without(cfg: CompiledLeakConfig, kinds: frozenset[str]) -> tuple[re.Pattern[str], tuple[str, ...]] | None:
    """The scanner without the entries of ``kinds`` and its first characters, or None when that
    would not find the same other matches (see ``_INNER_CHARS``); compiled once per config."""
    if kinds in cfg.variants:
        return cfg.variants[kinds]
    variant: tuple[re.Pattern[str], tuple[str, ...]] | None = None
    keep = [i for i, (kind, _, _) in enumerate(cfg.entries) if kind not in kinds]
    if cfg.entries and kinds <= _INNER_CHARS.keys():
        entries, leads = [cfg.entries[i] for i in keep], [cfg.narrow_leads[i] for i in keep]
        scanner = re.compile(cheap_sets(_group_by_first_char(entries, leads, keep)))
        firsts = _first_chars(scanner)
        if firsts is not None and not any(_INNER_CHARS[k](c) for k in kinds for c in firsts):
            variant = (scanner, firsts)
    cfg.variants[kinds] = variant
    return variant


def _matches_from(pattern: re.Pattern[str], text: str, starts: list[int], hi: int) -> Iterator[re.Match[str]]:
    pos = -1
    for k in starts:
        if k < pos:
            continue
        m = pattern.match(text, k, hi)
        if m is not None:
            yield m
            pos = max(m.end(), k + 1)


# At most this many "(" in a text: find tool-call-as-text matches from them; more, one regex scan.
_PARENS_MAX = 1024


def _tool_call_matches(cfg: CompiledLeakConfig, text: str, lo: int, hi: int) -> Iterable[re.Match[str]]:
    """``cfg.tool_call_text.finditer(text, lo, hi)``, tried only where it can match.

    The pattern opens with a look-behind, which gives the regex engine nothing to skip with: it
    tried every position (~20 ms per MB, the slowest part of scoring a 1 MB output). Every match
    is a tool name followed, after at most three spaces or tabs, by "(", which is rare in text:
    so each "(" gives the places a match can start, and ``match`` is tried there in order, going
    on from each match's end as the search does (as ``_scan`` does for the scanner)."""
    pattern = cfg.tool_call_text
    assert pattern is not None
    opens: list[int] = []
    k = text.find("(", lo, hi)
    while k != -1:
        if len(opens) == _PARENS_MAX:
            return pattern.finditer(text, lo, hi)
        opens.append(k)
        k = text.find("(", k + 1, hi)
    names = [n for n in cfg.config.tool_names if n.isidentifier()]  # as _tool_call_text keeps
    starts: set[int] = set()
    for p in opens:
        e = p  # where the name would end: at "(", or before up to three spaces or tabs
        while True:
            for name in names:
                if e - len(name) >= lo and text.startswith(name, e - len(name)):
                    starts.add(e - len(name))
            if p - e == 3 or e <= lo or text[e - 1] not in " \t":
                break
            e -= 1
    return _matches_from(pattern, text, sorted(starts), hi)


_NON_SPACE = re.compile(r"\S")


def _tool_call_text(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """``name(`` then ``)`` or a keyword argument, for the suite's own tool names only: a call
    written as text ("I'll run assign_task(agent=\"Ada\")"). Any other ``word(key=`` is code or
    prose (``print(end="")``), and a tool named without a call is a mention."""
    names = tuple(sorted({n for n in names if n.isidentifier()}, key=len, reverse=True))
    if not names:
        return None
    alts = "|".join(map(re.escape, names))
    return re.compile(rf"(?<![\w.])(?:{alts})[ \t]{{0,3}}\([ \t]{{0,3}}(?:\)|[A-Za-z_]\w{{0,64}}[ \t]{{0,3}}=(?!=))")


_LITERAL_MIN = 3  # a shorter literal is in most texts: not worth the check


def _required_literal(pattern: re.Pattern[str] | SuiteRegex) -> tuple[str, bool, bool] | None:
    """The longest run of literal characters at the top level of ``pattern``: every match
    contains it, so a text without it has no match. Suite regexes such as
    ``(?i)\\bclick(ed|ing)?\\b.{0,40}...`` start with an anchor, so the regex engine cannot skip
    to candidates itself and tries every position (48 us per 2 KB for that one pattern).

    Returns (literal, ignore_case, starts_match); with ignore_case the literal is lower-cased and
    the check is only used on ASCII text (where IGNORECASE is plain ASCII case folding);
    starts_match when only zero-width anchors come before it, so every match starts where the
    literal does. None when there is no usable literal."""
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # an optimisation: never a reason to fail
        return None
    flags = parsed.state.flags
    best, starts, zero_width_so_far = "", False, True
    run: list[str] = []
    run_starts = True
    for op, av in [*parsed, (None, None)]:
        if op is sre_parse.LITERAL:
            if not run:
                run_starts = zero_width_so_far
            run.append(chr(av))
            continue
        if len(run) > len(best):
            best, starts = "".join(run), run_starts
        if run or op is not sre_parse.AT:
            zero_width_so_far = False
        run = []
    if len(best) < _LITERAL_MIN:
        return None
    icase = bool(flags & re.IGNORECASE)
    if icase:
        if not best.isascii():
            return None
        best = best.lower()
    return best, icase, starts


# --- helpers ------------------------------------------------------------------------------


def _context(text: str, start: int, end: int) -> str:
    """The line around the match, cut to about 60 characters either side (newlines in a
    multi-line match shown as \\n). Line ends are searched only as far as the context reaches:
    a whole-text search made many findings on one long line quadratic."""
    lo = max(0, start - _CONTEXT_CHARS)
    hi = min(len(text), end + _CONTEXT_CHARS)
    lo = text.rfind("\n", lo, start) + 1 or lo
    nl = text.find("\n", end, hi)
    hi = hi if nl < 0 else nl
    if end - start > 3 * _CONTEXT_CHARS:  # a long block: its head and its tail
        snippet = text[lo : start + _CONTEXT_CHARS] + " … " + text[end - _CONTEXT_CHARS : hi]
    else:
        snippet = text[lo:hi]
    snippet = snippet.replace("\r", "\\r").replace("\n", "\\n")
    head = "…" if lo > 0 and text[lo - 1] != "\n" else ""
    tail = "…" if hi < len(text) and text[hi] != "\n" else ""
    return head + snippet + tail


_SPAN = re.Match.span
_START, _END = operator.itemgetter(0), operator.itemgetter(1)


class _CodeSpans:
    """Closed fenced blocks and inline code spans, computed only when a candidate needs it."""

    def __init__(self, text: str, lo: int, hi: int) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        # a MULTILINE "^" pattern is tried at every position: skip it when no fence can match.
        # At most _MAX_FENCES fence lines: past them a flood of fenced blocks is not code (its
        # content is judged, the safe side; 62,500 blocks took 190 ms)
        has_fence = "```" in text or "~~~" in text
        fences = list(itertools.islice(_FENCE.finditer(text, lo, hi), _MAX_FENCES)) if has_fence else []
        spans: list[tuple[int, int]] = []
        i = 0
        while i + 1 < len(fences):
            open_m = fences[i]
            # the closer is the next fence line of the same kind
            j = i + 1
            while j < len(fences) and fences[j].group(1) != open_m.group(1):
                j += 1
            if j == len(fences):
                break
            close_end = text.find("\n", fences[j].end())
            if not _TOOL_FENCE.match(text, open_m.end()):  # a call in a tool_code fence is no code
                spans.append((open_m.start(), hi if close_end < 0 or close_end > hi else close_end))
            i = j + 1
        prev = lo
        found: list[tuple[int, int]] = []
        for s, e in spans:
            if text.find("`", prev, s) != -1:  # no backtick between two blocks: no inline span
                found.extend(map(_SPAN, _INLINE_CODE.finditer(text, prev, s)))
            found.append((s, e))
            prev = e
        found.extend(map(_SPAN, _INLINE_CODE.finditer(text, prev, hi)))
        self._add(found)

    def _add(self, spans: list[tuple[int, int]]) -> None:
        # in C: a text of 100,000 inline spans built its lists in 40 ms one append at a time
        self.starts.extend(map(_START, spans))
        self.ends.extend(map(_END, spans))

    def contains(self, start: int, end: int) -> bool:
        k = bisect.bisect_right(self.starts, start) - 1
        return k >= 0 and end <= self.ends[k]


def _visible_bounds(text: str, c: CompiledLeakConfig, reasoning_seen: bool = False) -> tuple[int, int]:
    """The part of raw text the room sees: minus a declared leading reasoning block (unless the
    caller already took it off: a second block is a leak) and one trailing end-of-turn token."""
    lo, hi = 0, len(text)
    if c.eot_tokens:
        stripped = len(text.rstrip())
        for tok in c.eot_tokens:
            if stripped >= len(tok) and text.startswith(tok, stripped - len(tok)):
                hi = stripped - len(tok)
                break
    if c.reasoning_tags and not reasoning_seen:
        open_tag, close_tag = c.reasoning_tags
        first = len(text) - len(text.lstrip())
        if text.startswith(open_tag, first):
            close = text.find(close_tag, first + len(open_tag), hi)
            if close >= 0:
                lo = close + len(close_tag)
    return lo, hi


def _is_envelope(obj: object, depth: int = 0) -> bool:
    if depth > 4:
        return False
    if isinstance(obj, dict):
        has_name = any(isinstance(obj.get(k), str) and obj.get(k) for k in _JSON_NAME_KEYS)
        has_args = any(k in obj and isinstance(obj[k], (dict, str, list)) for k in _JSON_ARG_KEYS)
        if has_name and has_args:
            return True
        # OpenAI style {"type": "function", "function": {"name": ..., "arguments": ...}}
        fn = obj.get("function")
        if isinstance(fn, dict) and _is_envelope(fn, depth + 1):
            return True
        return any(_is_envelope(v, depth + 1) for v in obj.values() if isinstance(v, (dict, list)))
    if isinstance(obj, list):
        return any(_is_envelope(v, depth + 1) for v in obj[:32])
    return False


_DECODER = json.JSONDecoder()


def _json_envelope(text: str, pos: int, hi: int) -> tuple[bool, int]:
    """Whether the object starting at ``pos`` is a tool-call envelope; and where it ends."""
    chunk = text[pos : min(hi, pos + _JSON_MAX_CHARS)]
    try:
        obj, end = _DECODER.raw_decode(chunk)
    except (ValueError, RecursionError):
        window = chunk[:_LOOSE_WINDOW]
        para = window.find("\n\n")
        if para >= 0:
            window = window[:para]
        ok = bool(_LOOSE_NAME.search(window) and _LOOSE_ARGS.search(window))
        return ok, pos + max(len(window), 1)
    return _is_envelope(obj), pos + end


def _reasoning_findings(tags: list[tuple[int, int, str, bool]]) -> list[tuple[int, int]]:
    """Pair opener/closer tags per family: a closed block is one finding, an unmatched tag
    is its own finding."""
    out: list[tuple[int, int]] = []
    pending: dict[str, tuple[int, int]] = {}
    extra: dict[str, list[tuple[int, int]]] = {}
    for start, end, family, is_close in tags:
        if not is_close:
            if family in pending:
                extra.setdefault(family, []).append((start, end))
            else:
                pending[family] = (start, end)
        elif family in pending:
            out.append((pending.pop(family)[0], end))
            extra.pop(family, None)  # nested openers belong to the closed block
        else:
            out.append((start, end))
    for family, span in pending.items():
        out.append(span)
        out.extend(extra.get(family, ()))
    return out


def _tag_family(tag: str) -> tuple[str, bool]:
    inner = tag[1:-1].lower().rstrip()
    opener = "" if tag[0] == "<" else tag[0]  # [THINK] pairs with [/THINK], not with </think>
    if inner.startswith("/"):
        return opener + inner[1:], True
    return opener + inner, False


def _scaffold_echoes(text: str, lo: int, hi: int, idx: _ScaffoldIndex) -> list[tuple[int, int]]:
    runs = _word_echoes(text, lo, hi, idx)
    if idx.han_kana is not None and not text.isascii():
        runs += _han_kana_echoes(text, lo, hi, idx.han_kana)
    return runs


def _word_echoes(text: str, lo: int, hi: int, idx: _ScaffoldIndex) -> list[tuple[int, int]]:
    segment = text[lo:hi]
    # the compiled prefilter reads the words _ascii_words cuts from the ASCII skeleton: exact for
    # an ASCII text, and for any text against an all-ASCII scaffold (a False proves no echo)
    if idx.echo is not None and (idx.ascii_only or segment.isascii()) and not idx.echo.candidate(segment):
        return []
    if segment.isascii():
        return _echo_runs(segment, lo, _ascii_words(segment), idx, idx.bwords, idx.bgrams, idx.bends)
    if (
        idx.echo is None
        and idx.ascii_only
        and _candidate_keys(_ascii_words(_ascii_skeleton(segment)), idx, idx.bgrams, idx.bends) is None
    ):
        return []
    return _echo_runs(segment, lo, _words(segment), idx, idx.words, idx.grams, idx.ends)


def _echo_runs(
    segment: str,
    lo: int,
    ws: list[W],
    idx: _ScaffoldIndex,
    scaffold_words: tuple[tuple[W, ...], ...],
    grams: Mapping[tuple[W, ...], tuple[tuple[int, int], ...]],
    ends: frozenset[tuple[W, W]],
) -> list[tuple[int, int]]:
    """The echoes of the scaffold in ``segment`` (at ``lo`` of its text), whose words are ``ws``:
    ``scaffold_words`` and ``grams`` are the index's, of the same type as ``ws``."""
    n = len(ws)
    if n < idx.min_words:
        return []
    g = idx.gram
    keys = _candidate_keys(ws, idx, grams, ends)
    if keys is None:
        return []
    runs: list[tuple[int, int]] = []
    covered = 0
    # only the windows that hit, picked in C (a long text with an echo has thousands of windows)
    for w in itertools.compress(range(len(keys)), map(grams.__contains__, keys)):
        q = w * idx.stride
        if q < covered:
            continue
        hits = grams[keys[w]]
        best = (0, 0)
        for ti, r in hits:
            sw = scaffold_words[ti]
            a, b = q, r
            while a > covered and b > 0 and ws[a - 1] == sw[b - 1]:
                a -= 1
                b -= 1
            e, f = q + g, r + g
            while e < n and f < len(sw) and ws[e] == sw[f]:
                e += 1
                f += 1
            if e - a > best[1] - best[0]:
                best = (a, e)
        if best[1] - best[0] >= idx.min_words:
            runs.append(best)
            covered = best[1]
    if not runs:
        return []
    # word index -> character span, only on a hit: split keeps [sep, word, sep, word, ..., sep],
    # so word k spans the running lengths of parts 0..2k and 0..2k+1
    bounds = list(itertools.accumulate(map(len, _WORD_SPLIT.split(segment))))
    if len(bounds) != 2 * n + 1:  # cannot happen (both sides are \w+ runs); be safe, not wrong
        return []
    return [(lo + bounds[2 * a], lo + bounds[2 * e - 1]) for a, e in runs]


_ANCHORED_MAX = 64  # more occurrences than this: one regex scan is cheaper than a try at each


def _matches_at(pattern: SuiteRegex, text: str, hay: str, lit: str, lo: int, hi: int) -> Iterator[Found]:
    """``pattern.finditer(text, lo, hi)`` for a pattern whose every match starts where ``lit``
    occurs in ``hay`` (``text`` or its lower-cased copy): try a match at each occurrence only.
    ``match(text, pos)`` sees the characters before ``pos``, as a search does."""
    pos = lo
    while True:
        k = hay.find(lit, pos, hi)
        if k == -1:
            return
        m = pattern.match(text, k, hi)
        if m is None:
            pos = k + 1
            continue
        yield m
        pos = m.end() if m.end() > k else k + 1


# --- the detector -------------------------------------------------------------------------


def find_leaks(
    text: str, cfg: CompiledLeakConfig, *, where: str = "text", reasoning_seen: bool = False
) -> list[Finding]:
    """Every leak in ``text`` (what the room sees), sorted by position. ``reasoning_seen``: the
    declared reasoning block was already taken off ``text`` (the parser's visible text), so a
    block at its start is a second one, shown to the room."""
    if isinstance(cfg, LeakConfig):  # be forgiving: compile (cached) on the caller's behalf
        cfg = compile_leak_config(cfg)
    lo, hi = _visible_bounds(text, cfg, reasoning_seen)
    if lo >= hi:  # nothing visible (a call's output, once parsed, is mostly empty text)
        return []
    spans: list[tuple[Reason, int, int]] = []
    code: _CodeSpans | None = None
    tags: list[tuple[int, int, str, bool]] = []
    json_until = lo
    json_budget = _JSON_MAX_CANDIDATES
    slot_budget = _SLOT_MAX_CANDIDATES
    code_budget = _CODE_MAX_EXEMPT
    prose_budget = _PROSE_READINGS_MAX
    vis: tuple[int, int] | None = None
    kinds = cfg.group_kinds
    dropped: frozenset[str] = frozenset()  # kinds whose later matches are all skipped (see _without)
    then: Iterable[re.Match[str]] | None = _scan(cfg, text, lo, hi)
    while then is not None:  # more than once only after a spent budget: on from there without that kind
        found, then = then, None
        for m in found:
            if len(spans) >= MAX_FINDINGS or len(tags) >= 2 * MAX_FINDINGS:
                break
            kind = kinds[m.lastgroup]
            start, end = m.span()
            if kind == "json" and (start < json_until or json_budget <= 0):
                if json_budget <= 0 and "json" not in dropped:
                    dropped |= {"json"}
                    if (variant := _without(cfg, dropped)) is not None:
                        then = _scan(cfg, text, end, hi, *variant)
                        break
                continue  # skipped below too, whether in code or not: decided before the code spans
            if kind in _CODE_EXEMPT:
                if code is None:
                    code = _CodeSpans(text, lo, hi)
                # code.contains, inlined: a text of placeholders in code spans has one per 9 characters
                k = bisect.bisect_right(code.starts, start) - 1
                if k >= 0 and end <= code.ends[k] and code_budget > 0:
                    code_budget -= 1
                    continue
            if kind == "json":
                if start < json_until or json_budget <= 0:
                    continue
                json_budget -= 1
                ok, json_end = _json_envelope(text, start, hi)
                if ok:
                    spans.append((Reason.LEAK_TOOL_MARKUP, start, json_end))
                    json_until = json_end
                continue
            if kind in ("reason", "declared"):
                tag = m.group()
                if kind == "declared":
                    assert cfg.reasoning_tags is not None
                    tags.append((start, end, "\x00declared", tag == cfg.reasoning_tags[1]))
                elif tag[0] == "\u25c1":
                    tags.append((start, end, "\u25c1think", tag[1] == "/"))
                else:
                    family, is_close = _tag_family(tag)
                    tags.append((start, end, family, is_close))
                continue
            if kind in ("special", "tok", "cat") and (
                _TOOLISH.search(m.group()) or (cfg.own_markup is not None and cfg.own_markup.fullmatch(m.group()))
            ):
                # a call tag is content in code as the rest of a call is; a bar token (<|tool_call|>)
                # never is, as no special token is (decoded text cannot tell it from its spelling)
                if not _BAR_TOKEN.fullmatch(m.group()):
                    if code is None:
                        code = _CodeSpans(text, lo, hi)
                    if code_budget > 0 and code.contains(start, end):
                        code_budget -= 1
                        continue
                spans.append((Reason.LEAK_TOOL_MARKUP, start, end))
                continue
            if kind == "slot":
                slot_budget -= 1
                if slot_budget < 0:  # every later one is skipped too: scan on without them
                    if "slot" not in dropped:
                        dropped |= {"slot"}
                        if (variant := _without(cfg, dropped)) is not None:
                            then = _scan(cfg, text, end, hi, *variant)
                            break
                    continue
                # a phrase in words, a role in a value's place, {0} in a format string; not a
                # filled form label ("[Team Role] Scout")
                if m.group() in cfg.allowed or not is_slot_at(text, start, end, lo):
                    continue
                if code is None:
                    code = _CodeSpans(text, lo, hi)
                if code.contains(start, end):
                    continue
                spans.append((Reason.LEAK_PLACEHOLDER, start, end))
                continue
            # (a suite that asks for <answer> tags lists them in allowed_markers)
            if kind in ("marker", "ph", "answer") and m.group() in cfg.allowed:
                continue
            if kind in ("special", "cat") and prose_budget > 0 and (reading := _PROSE_READINGS.get(m.group())):
                if vis is None:  # where the visible text starts and ends, found once
                    first = _NON_SPACE.search(text, lo, hi)
                    vis = (first.start(), lo + len(text[lo:hi].rstrip())) if first else (hi, hi)
                if reading(text, start, end, lo, vis):
                    prose_budget -= 1
                    continue
            spans.append((_KIND_REASON[kind], start, end))
    if tags:
        spans.extend((Reason.LEAK_REASONING, s, e) for s, e in _reasoning_findings(tags))
    timed_out: list[Finding] = []
    if cfg.rare:
        code = _rare_findings(text, lo, hi, cfg, spans, code, timed_out, where, code_budget)
    lowered: str | None = None
    for (reason, pattern), literal in zip(cfg.extra, cfg.extra_literals or (None,) * len(cfg.extra), strict=True):
        matches: Iterable[Found] | None = None
        if literal is not None:
            lit, icase, starts = literal
            hay: str | None = text
            if icase:
                if not text.isascii():
                    hay = None
                else:
                    if lowered is None:
                        lowered = text.lower()
                    hay = lowered
            if hay is not None:
                if lit not in hay:
                    continue
                # RE2 scans once in linear time; the timed engine is tried at the literal only
                if starts and not pattern.linear_for(text) and hay.count(lit, lo, hi) <= _ANCHORED_MAX:
                    matches = _matches_at(pattern, text, hay, lit, lo, hi)
        try:
            if matches is None:
                matches = pattern.finditer(text, lo, hi)
            for hit in itertools.islice(matches, MAX_FINDINGS):
                if hit.end() > hit.start():
                    spans.append((reason, hit.start(), hit.end()))
        except RegexTimeout as exc:  # never a pass: the pattern counts as found
            timed_out.append(Finding(reason, lo, lo, "", f"{exc}: counted as found", where))
    if cfg.tool_call_text is not None and any(n in text for n in cfg.config.tool_names):
        # where the visible text starts (found once: a strip per match made 1,000 calls after
        # 1 MB of prose take a second)
        first = _NON_SPACE.search(text, lo, hi)
        opening = first.start() if first else hi
        for m in itertools.islice(_tool_call_matches(cfg, text, lo, hi), MAX_FINDINGS):
            if where == "text" and m.start() <= opening:
                continue  # a whole output that opens with the call is a failed attempt, not a leak
            if code is None:
                code = _CodeSpans(text, lo, hi)
            if not code.contains(m.start(), m.end()):
                spans.append((Reason.LEAK_TOOL_MARKUP, m.start(), m.end()))
    if cfg.scaffold is not None:
        spans.extend((Reason.LEAK_SCAFFOLD, s, e) for s, e in _scaffold_echoes(text, lo, hi, cfg.scaffold))
    spans = _outermost(spans)[:MAX_FINDINGS]
    return [Finding(r, s, e, text[s:e], _context(text, s, e), where) for r, s, e in spans] + timed_out


def _rare_findings(
    text: str,
    lo: int,
    hi: int,
    cfg: CompiledLeakConfig,
    spans: list[tuple[Reason, int, int]],
    code: _CodeSpans | None,
    timed_out: list[Finding],
    where: str,
    code_budget: int = _CODE_MAX_EXEMPT,
) -> _CodeSpans | None:
    """Add the matches of ``cfg.rare`` to ``spans`` (tool markup and placeholders in code are
    content, as for the scanner's kinds, for the matches ``code_budget`` still allows: what the
    scanner left of ``_CODE_MAX_EXEMPT``); a "fill only" match counts only where it overlaps no
    finding so far: a protocol's opening that spans tokens already found (``<|channel|>commentary
    to=...``) adds nothing, one that no token covers is a finding. Returns the code spans, built
    when needed."""
    present = cfg.rare_literals.present(text, lo, hi)
    if not present:
        return code
    starts: list[int] | None = None
    reach: list[int] = []
    for lits, reason, pattern, fill in cfg.rare:
        if present.isdisjoint(lits):
            continue
        try:
            matches: Iterable[Found | re.Match[str]] = pattern.finditer(text, lo, hi)
            added = 0  # findings, not matches: one in code (content) or a filled one counts none
            for m in matches:
                if added >= MAX_FINDINGS:
                    break
                s, e = m.start(), m.end()
                if e <= s:
                    continue
                if fill:
                    if starts is None:  # the findings so far, by start, and the furthest end up to each
                        ordered = sorted((a, b) for _, a, b in spans)
                        starts = [a for a, _ in ordered]
                        reach = list(itertools.accumulate((b for _, b in ordered), max))
                    k = bisect.bisect_left(starts, e)
                    if k > 0 and reach[k - 1] > s:
                        continue
                if reason is Reason.LEAK_SPECIAL_TOKEN and _TOOLISH.search(text, s, e):
                    reason_here = Reason.LEAK_TOOL_MARKUP
                else:
                    reason_here = reason
                if reason_here is Reason.LEAK_PLACEHOLDER and text[s:e] in cfg.allowed:
                    continue  # a suite's allowed placeholder, as for the scanner's ("ph")
                if code_budget > 0 and (
                    reason_here is Reason.LEAK_TOOL_MARKUP or reason_here is Reason.LEAK_PLACEHOLDER
                ):
                    if code is None:
                        code = _CodeSpans(text, lo, hi)
                    if code.contains(s, e):
                        code_budget -= 1  # past the budget, markup in code is a finding, as in the scan
                        continue
                spans.append((reason_here, s, e))
                added += 1
        except RegexTimeout as exc:  # never a pass: the markup counts as found
            timed_out.append(Finding(reason, lo, lo, "", f"{exc}: counted as found", where))
    return code


def _outermost(spans: list[tuple[Reason, int, int]]) -> list[tuple[Reason, int, int]]:
    """Sorted by position, without a span inside another span of the same reason (a suite's
    ``${GOAL}`` pattern and the built-in ``{GOAL}`` shape find one placeholder, not two)."""
    if len(spans) < 2:
        return list(spans)
    out: list[tuple[Reason, int, int]] = []
    reach: dict[Reason, int] = {}
    for r, s, e in sorted(set(spans), key=lambda t: (t[1], -t[2], t[0])):
        if reach.get(r, -1) >= e:
            continue
        reach[r] = max(reach.get(r, -1), e)
        out.append((r, s, e))
    out.sort(key=lambda t: (t[1], t[2], t[0]))
    return out
