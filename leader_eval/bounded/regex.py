"""Regular expressions a suite supplies, run with bounded time and Python's own verdicts.

A suite's patterns (``leakage.forbid``, ``render.placeholder_patterns``, argument ``regex``
constraints, a case's ``expect.require``/``expect.forbid``, JSON Schema ``pattern`` and
``patternProperties`` in tool contracts: the suite JSON Schema marks each with
``"format": "regex"``) are written by someone other than the person running the evaluation, and
they run on text a model wrote. Python's ``re`` backtracks: ``\\w*\\w*\\w*\\w*z`` took 11 s on 200
letters. So every suite pattern runs here, in one of two engines:

- **RE2** (``google-re2``), linear in the text, for every pattern it can express exactly. The
  pattern is not handed to RE2 as written: it is parsed with Python's own parser and re-emitted,
  each character class (``\\w``, ``\\d``, ``\\s``, ``.``, sets, case-insensitive letters) as the
  exact set of code points Python's ``re`` matches for it (computed once by Python's matcher over
  every code point), so RE2 answers as ``re`` does: RE2's own ``\\w`` is ASCII, its case folding
  differs from Python's for ``ı``/``İ``/``ſ``/``K``. Python's Unicode ``\\b`` equals RE2's ASCII
  ``\\b`` on ASCII text, so such patterns run in RE2 whenever the text is ASCII.
- **the regex module with a time limit** (``MAX_REGEX_SECONDS`` per call) for the rest
  (lookaround, back-references, atomic groups, possessive repeats, a ``$`` before the end of a
  pattern, patterns that can match the empty string, ``\\b`` on non-ASCII text, text holding lone
  surrogates). It gets the same re-emitted pattern (exact classes, ``\\b`` as lookarounds over the
  exact word class), so its verdicts are Python's too. Before it runs, a relaxation of the pattern
  (lookarounds and ``\\b`` dropped, back-references replaced by their group) is searched with
  RE2: a text the relaxation cannot match cannot match the pattern, and is answered in linear time.
  A pattern that runs out of time raises ``RegexTimeout``: every caller counts it as a failure
  (a forbidden pattern found, a required one missing, an argument that does not match), never a
  pass.

At load time (``regex_problem``, called by the linter with the key's FILE:LINE) a pattern is
refused when it is invalid, longer than ``MAX_REGEX_CHARS``, would compile to a program over
``MAX_REGEX_PROGRAM`` (``_program_size``: both engines write counted repeats out, so
``(?:a{1000}){1000}`` is 10**6 copies and ``\\w{1000}`` a thousand 700-range classes), or shaped to backtrack
catastrophically: a repeated group holding another repeat, a repeated alternation whose branches
can start with the same character, or two unbounded repeats over overlapping characters with
nothing mandatory between them (``\\w*\\w*z``, ``\\d+\\.?\\d*``). Those need no runtime bound to be
refused, and the rule is the same whichever engine would run the pattern.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from leader_eval.bounded import limits

_sre_c: Any = importlib.import_module("re._constants")
_sre_parse: Any = importlib.import_module("re._parser")
_sre_compile: Any = importlib.import_module("re._compiler")

_MAXREPEAT = _sre_c.MAXREPEAT
_REPEATS = (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT, _sre_c.POSSESSIVE_REPEAT)
_SINGLE = (_sre_c.LITERAL, _sre_c.NOT_LITERAL, _sre_c.IN, _sre_c.ANY)
_RE2_MAX_COUNT = 1000  # RE2 refuses {n,m} counts above this
_LOOP_MIN = 64  # a bounded repeat allowing more than this many iterations counts as a loop in lint
_SURROGATES = (0xD800, 0xDFFF)


class RegexTimeout(Exception):
    """A suite pattern ran out of time on a text; every caller counts this as a failure."""


@dataclass(frozen=True)
class Found:
    """One match: the same ``start()``/``end()``/``group()``/``span()`` as ``re.Match``."""

    begin: int
    finish: int
    text: str

    def start(self, group: int = 0) -> int:
        return self.begin

    def end(self, group: int = 0) -> int:
        return self.finish

    def span(self, group: int = 0) -> tuple[int, int]:
        return (self.begin, self.finish)

    def group(self, group: int = 0) -> str:
        return self.text


# --------------------------------------------------------------------------- exact classes


@lru_cache(maxsize=1)
def _every_char() -> str:
    """Every code point once, lone surrogates included, decoded in C from its UTF-32 bytes (~10 ms;
    ~30 ms where those bytes were built from a Python range, once per run that compiles a class)."""
    n = 0x110000
    utf32 = bytearray(4 * n)  # little-endian: byte k of code point c is (c >> 8k) & 0xFF
    utf32[0::4] = bytes(range(256)) * (n // 256)
    utf32[1::4] = b"".join(bytes((b,)) * 256 for b in range(256)) * (n // 65536)
    utf32[2::4] = b"".join(bytes((b,)) * 65536 for b in range(n // 65536))
    return utf32.decode("utf-32-le", "surrogatepass")


_class_lock = threading.Lock()


_CLASSES: dict[tuple[str, int], tuple[tuple[int, int], ...]] = {}


def _char_ranges(node: Any, flags: int) -> tuple[tuple[int, int], ...]:
    """The code points one single-character node matches under ``flags``, as inclusive ranges,
    found by Python's own matcher over every code point (so exact by construction; ~20 ms, once
    per distinct class and flags in a process)."""
    key = (repr(node), flags)
    found = _CLASSES.get(key)
    if found is None:
        state = _sre_parse.State()
        body = _sre_parse.SubPattern(state, [node])
        runs = _sre_parse.SubPattern(state, [(_sre_c.MAX_REPEAT, (1, _MAXREPEAT, body))])
        with _class_lock:
            compiled = _sre_compile.compile(runs, flags)
            found = tuple((m.start(), m.end() - 1) for m in compiled.finditer(_every_char()))
            if len(_CLASSES) > 4096:
                _CLASSES.clear()
            _CLASSES[key] = found
    return found


def _ranges_of(node: Any, flags: int) -> tuple[tuple[int, int], ...]:
    op, av = node
    if not flags & re.IGNORECASE:  # the common shapes need no scan
        if op is _sre_c.LITERAL:
            return ((av, av),)
        if op is _sre_c.NOT_LITERAL:
            return _complement((((av, av)),))
        if op is _sre_c.ANY:
            return ((0, 0x10FFFF),) if flags & re.DOTALL else ((0, 9), (11, 0x10FFFF))
        if op is _sre_c.IN and all(o in (_sre_c.LITERAL, _sre_c.RANGE, _sre_c.NEGATE, _sre_c.CATEGORY) for o, _ in av):
            # a category (\s, \w, \d) scanned alone: one scan serves every class that holds it
            pieces: list[tuple[tuple[int, int], ...]] = [
                ((a, a),)
                if o is _sre_c.LITERAL
                else _char_ranges((_sre_c.IN, [(o, a)]), flags)
                if o is _sre_c.CATEGORY
                else ((a[0], a[1]),)
                for o, a in av
                if o is not _sre_c.NEGATE
            ]
            ranges = _union(pieces)
            return _complement(ranges) if av and av[0][0] is _sre_c.NEGATE else ranges
    return _char_ranges(node, flags)


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out, nxt = [], 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= 0x10FFFF:
        out.append((nxt, 0x10FFFF))
    return tuple(out)


def _overlap(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


def _union(sets: list[tuple[tuple[int, int], ...]]) -> tuple[tuple[int, int], ...]:
    merged: list[list[int]] = []
    for lo, hi in sorted(r for s in sets for r in s):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def _class_source(ranges: tuple[tuple[int, int], ...], dialect: str) -> str:
    """A character class for ``ranges`` in RE2 (no surrogates: RE2 reads UTF-8) or regex syntax."""
    if dialect == "re2":
        cut: list[tuple[int, int]] = []
        for lo, hi in ranges:
            if hi < _SURROGATES[0] or lo > _SURROGATES[1]:
                cut.append((lo, hi))
                continue
            if lo < _SURROGATES[0]:
                cut.append((lo, _SURROGATES[0] - 1))
            if hi > _SURROGATES[1]:
                cut.append((_SURROGATES[1] + 1, hi))
        ranges = tuple(cut)
        if not ranges:
            return r"[^\x00-\x{10ffff}]"

        def esc(c: int) -> str:
            return f"\\x{{{c:x}}}"
    else:
        if not ranges:
            return r"(?!)"

        def esc(c: int) -> str:
            return f"\\U{c:08x}"

    return "[" + "".join(esc(lo) if lo == hi else f"{esc(lo)}-{esc(hi)}" for lo, hi in ranges) + "]"


@lru_cache(maxsize=2)
def _word_ranges(flags: int) -> tuple[tuple[int, int], ...]:
    return _ranges_of((_sre_c.IN, [(_sre_c.CATEGORY, _sre_c.CATEGORY_WORD)]), flags)


# --------------------------------------------------------------------------- re-emission


class _NotRE2(Exception):
    """The pattern holds a construct RE2 cannot run with Python's meaning."""


class _Emitter:
    """Emit a parsed pattern for RE2 (``exact``: Python's meaning or ``_NotRE2``; ``relaxed``: a
    pattern matching wherever the original can) or for the regex module (``regex``: exact)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.dialect = "regex" if mode == "regex" else "re2"
        self.ascii_only = False
        self.groups: dict[int, list[Any]] = {}

    def seq(self, items: list[Any], flags: int, top: bool = False) -> str:
        out: list[str] = []
        for i, item in enumerate(items):
            last = top and i == len(items) - 1 and self.dialect == "re2"
            if last and item == (_sre_c.AT, _sre_c.AT_END) and not flags & re.MULTILINE:
                return "".join(out)  # the caller appends "\n?\z" after the match group
            out.append(self.item(item, flags))
        return "".join(out)

    def item(self, node: Any, flags: int) -> str:
        op, av = node
        if op in _SINGLE:
            if op is _sre_c.LITERAL and not flags & re.IGNORECASE:
                return _class_source(((av, av),), self.dialect)
            return _class_source(_ranges_of(node, _class_flags(flags)), self.dialect)
        if op is _sre_c.SUBPATTERN:
            group, add, remove, body = av
            inner = (flags | add) & ~remove
            text = self.seq(list(body), inner)
            if group is not None:
                self.groups[group] = list(body)
                if self.dialect == "regex":
                    return f"({text})"
            return f"(?:{text})"
        if op is _sre_c.BRANCH:
            return "(?:" + "|".join(self.seq(list(alt), flags) for alt in av[1]) + ")"
        if op in _REPEATS:
            lo, hi, body = av
            if op is _sre_c.POSSESSIVE_REPEAT and self.mode == "exact":
                raise _NotRE2("possessive repeat")
            if self.dialect == "re2" and (lo > _RE2_MAX_COUNT or (hi != _MAXREPEAT and hi > _RE2_MAX_COUNT)):
                if self.mode == "exact":
                    raise _NotRE2("repeat count over 1000")
                lo, hi = min(lo, _RE2_MAX_COUNT), _MAXREPEAT
            count = f"{{{lo},}}" if hi == _MAXREPEAT else f"{{{lo},{hi}}}"
            possessive = op is _sre_c.POSSESSIVE_REPEAT and self.dialect == "regex"
            suffix = "?" if op is _sre_c.MIN_REPEAT else "+" if possessive else ""
            return f"(?:{self.seq(list(body), flags)}){count}{suffix}"
        if op is _sre_c.ATOMIC_GROUP:
            if self.mode == "exact":
                raise _NotRE2("atomic group")
            text = self.seq(list(av), flags)
            return f"(?>{text})" if self.dialect == "regex" else f"(?:{text})"
        if op is _sre_c.AT:
            return self.at(av, flags)
        if op in (_sre_c.ASSERT, _sre_c.ASSERT_NOT):
            if self.mode == "exact":
                raise _NotRE2("lookaround")
            if self.mode == "relaxed":
                return ""
            direction, body = av
            kind = ("=" if op is _sre_c.ASSERT else "!") if direction == 1 else ("<=" if op is _sre_c.ASSERT else "<!")
            return f"(?{kind}{self.seq(list(body), flags)})"
        if op is _sre_c.GROUPREF:
            if self.mode == "exact":
                raise _NotRE2("back-reference")
            if self.mode == "relaxed":
                body = self.groups.get(av)
                return "" if body is None else f"(?:{self.seq(body, flags)})?"
            return f"(?i:\\{av})" if flags & re.IGNORECASE else f"(?:\\{av})"
        if op is _sre_c.GROUPREF_EXISTS:
            if self.mode == "exact":
                raise _NotRE2("conditional group")
            group, yes, no = av
            yes_text = self.seq(list(yes), flags)
            no_text = self.seq(list(no), flags) if no else ""
            if self.mode == "relaxed":
                return f"(?:{yes_text}|{no_text})"
            return f"(?({group}){yes_text}|{no_text})"
        raise _NotRE2(f"unsupported construct {op}")  # pragma: no cover - the parser makes no other

    def at(self, code: Any, flags: int) -> str:
        multiline = bool(flags & re.MULTILINE)
        if code is _sre_c.AT_BEGINNING_STRING or (code is _sre_c.AT_BEGINNING and not multiline):
            return r"\A"
        if code is _sre_c.AT_BEGINNING:
            return "(?m:^)"
        if code is _sre_c.AT_END_STRING:
            return r"\z" if self.dialect == "re2" else r"\Z"
        if code is _sre_c.AT_END:
            if multiline:
                return "(?m:$)"
            if self.mode == "exact":
                raise _NotRE2("'$' before the end of the pattern")
            return "" if self.mode == "relaxed" else r"(?=\n?\Z)"
        if code in (_sre_c.AT_BOUNDARY, _sre_c.AT_NON_BOUNDARY):
            boundary = code is _sre_c.AT_BOUNDARY
            if flags & re.ASCII:
                if self.dialect == "re2":
                    return r"\b" if boundary else r"\B"
            elif self.mode == "exact":
                self.ascii_only = True
                return r"\b" if boundary else r"\B"
            if self.mode == "relaxed":
                return ""
            w = _class_source(_word_ranges(_class_flags(flags & re.ASCII)), "regex")
            if boundary:
                return f"(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"
            # Python's \B never matches in an empty string
            return f"(?:(?<={w})(?={w})|(?<!{w})(?!{w})(?:(?<=[\\s\\S])|(?=[\\s\\S])))"
        raise _NotRE2(f"unsupported anchor {code}")  # pragma: no cover


def _class_flags(flags: int) -> int:
    """The flags that decide what a single character matches (str patterns are Unicode unless ASCII)."""
    keep = flags & (re.IGNORECASE | re.DOTALL | re.ASCII)
    return keep if keep & re.ASCII else keep | re.UNICODE


# --------------------------------------------------------------------------- the compiled pattern


def _re2_compile(source: str) -> Any:
    try:
        import re2
    except ImportError as exc:  # without it every pattern runs in the timed engine
        raise _NotRE2("google-re2 is not installed") from exc
    options = re2.Options()
    options.max_mem = 64 << 20  # exact Unicode classes make larger programs than RE2's \w
    options.log_errors = False  # a pattern RE2 refuses goes to the timed engine, not to stderr
    return re2.compile(source, options)


#: held while a pattern builds its engines (rare, once per pattern and process; one lock for all
#: keeps a SuiteRegex picklable and copyable)
_engine_lock = threading.Lock()


class SuiteRegex:
    """A suite pattern compiled for bounded matching (see the module docstring).

    ``search``, ``match`` and ``finditer`` take ``re``'s ``pos``/``endpos`` and give ``re``'s
    answers, or raise ``RegexTimeout``.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        compiled = re.compile(pattern)  # raises re.error for the caller
        self.flags = compiled.flags
        # the engines are built at the first match: a run compiles the protocols' markup
        # patterns for the leak scan, and most are never looked for (their literal never
        # appears), while building one can scan every code point for its classes (~15 ms)
        self._built = False

    def _build(self) -> None:
        """Build the engines once; a thread that finds them building waits (a pattern is shared
        across threads through ``compile_suite_regex``'s cache). ``_built`` is set last, so a
        reader that sees it sees every engine."""
        with _engine_lock:
            if not self._built:
                self._build_engines()

    def _build_engines(self) -> None:
        pattern = self.pattern
        parsed = _sre_parse.parse(pattern)
        items = list(parsed)
        flags = parsed.state.flags
        # a pattern of literal characters alone (a case's ``require: [hi]``) is found by
        # ``str.find``: the same leftmost, non-overlapping matches, in no engine at all
        self._literal: str | None = None
        if items and not flags & re.IGNORECASE and all(op is _sre_c.LITERAL for op, _ in items):
            self._literal = "".join(chr(av) for _, av in items)
        self.min_width = int(parsed.getwidth()[0])
        self._exact: Any = None
        self._ascii_only = False
        self._trailing_end = False
        self._relaxed: Any = None
        if self.min_width > 0:  # an empty match makes finditer's next step differ from re's
            try:
                em = _Emitter("exact")
                body = em.seq(items, flags, top=True)
                self._trailing_end = (
                    len(items) > 0 and items[-1] == (_sre_c.AT, _sre_c.AT_END) and not (flags & re.MULTILINE)
                )
                self._exact = _re2_compile(f"({body})" + (r"\n?\z" if self._trailing_end else ""))
                self._ascii_only = em.ascii_only
            except (_NotRE2, Exception):
                self._exact = None
        if self._exact is None or self._ascii_only:
            try:
                self._relaxed = _re2_compile(_Emitter("relaxed").seq(items, flags))
            except Exception:
                self._relaxed = None
        self._fallback_source = _Emitter("regex").seq(items, flags)
        self._fallback: Any = None
        self._built = True

    @property
    def linear(self) -> bool:
        """Does every text run in RE2 (linear time)?"""
        if not self._built:
            self._build()
        return self._exact is not None and not self._ascii_only

    def linear_for(self, text: str) -> bool:
        """Does ``text`` run in RE2 (one linear pass)?"""
        if not self._built:
            self._build()
        return self._exact is not None and (not self._ascii_only or text.isascii())

    def _regex(self) -> Any:
        if self._fallback is None:
            import regex

            self._fallback = regex.compile(self._fallback_source, regex.VERSION0)
        return self._fallback

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Iterator[Found]:
        if not self._built:
            self._build()
        end = len(text) if endpos is None else max(0, min(endpos, len(text)))
        pos = max(0, min(pos, end))
        if self._literal is not None:
            return _literal_iter(self._literal, text, pos, end)
        view = text if end == len(text) else text[:end]
        if self._exact is not None and (not self._ascii_only or view.isascii()):
            try:
                return self._re2_iter(view, pos)
            except UnicodeEncodeError:  # lone surrogates: RE2 reads UTF-8
                pass
        if self._relaxed is not None:
            try:
                if self._relaxed.search(view, pos) is None:
                    return iter(())
            except UnicodeEncodeError:
                pass
        return self._regex_iter(view, pos)

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> Found | None:
        return next(self.finditer(text, pos, endpos), None)

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> Found | None:
        """The match that starts at ``pos``, as ``re.Pattern.match``."""
        if not self._built:
            self._build()
        end = len(text) if endpos is None else max(0, min(endpos, len(text)))
        pos = max(0, min(pos, end))
        if self._literal is not None:
            lit = self._literal
            return Found(pos, pos + len(lit), lit) if text.startswith(lit, pos, end) else None
        view = text if end == len(text) else text[:end]
        if self._exact is not None and (not self._ascii_only or view.isascii()):
            try:
                m = self._exact.match(view, pos)
                if m is None:
                    return None
                s, e = m.span(1)
                return Found(s, e, view[s:e])
            except UnicodeEncodeError:
                pass
        if self._relaxed is not None:
            try:
                if self._relaxed.match(view, pos) is None:
                    return None
            except UnicodeEncodeError:
                pass
        m = _call_with_timeout(self.pattern, self._regex().match, view, pos)
        return None if m is None else Found(m.start(), m.end(), m.group())

    def _re2_iter(self, view: str, pos: int) -> Iterator[Found]:
        view.encode("utf-8")  # a lone surrogate raises here, before any match is yielded
        matches = self._exact.finditer(view, pos)

        def gen() -> Iterator[Found]:
            for m in matches:
                s, e = m.span(1)
                yield Found(s, e, view[s:e])

        return gen()

    def _regex_iter(self, view: str, pos: int) -> Iterator[Found]:
        rx = self._regex()

        def gen() -> Iterator[Found]:
            it = rx.finditer(view, pos, timeout=limits.MAX_REGEX_SECONDS)
            while True:
                try:
                    m = next(it)
                except StopIteration:
                    return
                except TimeoutError as exc:
                    raise RegexTimeout(
                        f"regular expression {_short(self.pattern)} took over {limits.MAX_REGEX_SECONDS:g} s"
                    ) from exc
                yield Found(m.start(), m.end(), m.group())

        return gen()


def _literal_iter(lit: str, text: str, pos: int, end: int) -> Iterator[Found]:
    at = text.find(lit, pos, end)
    while at != -1:
        yield Found(at, at + len(lit), lit)
        at = text.find(lit, at + len(lit), end)


def _call_with_timeout(pattern: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args, timeout=limits.MAX_REGEX_SECONDS)
    except TimeoutError as exc:
        raise RegexTimeout(f"regular expression {_short(pattern)} took over {limits.MAX_REGEX_SECONDS:g} s") from exc


def _short(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 80 else pattern[:77] + "...")


_compiled_lock = threading.Lock()
_COMPILED: dict[str, SuiteRegex] = {}


def compile_suite_regex(pattern: str) -> SuiteRegex:
    """The bounded form of a suite pattern (cached; ``re.error`` for an invalid one)."""
    found = _COMPILED.get(pattern)
    if found is None:
        found = SuiteRegex(pattern)
        with _compiled_lock:
            if len(_COMPILED) > 4096:
                _COMPILED.clear()
            _COMPILED[pattern] = found
    return found


def finditer_bounded(pattern: str, text: str) -> list[Found]:
    """Every match of a suite pattern in ``text`` (``limits.LimitExceeded`` when it runs out of time)."""
    try:
        return list(compile_suite_regex(pattern).finditer(text))
    except RegexTimeout as exc:
        raise limits.LimitExceeded(str(exc)) from exc


# --------------------------------------------------------------------------- the lint


def regex_problem(pattern: str) -> str | None:
    """Why a suite pattern is refused (invalid, too long, or shaped to backtrack catastrophically),
    or None."""
    if len(pattern) > limits.MAX_REGEX_CHARS:
        return f"regular expression is longer than {limits.MAX_REGEX_CHARS} characters"
    try:
        re.compile(pattern)
        parsed = _sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"invalid regular expression {pattern!r}: {exc}"
    except Exception as exc:  # ValueError and the like from odd escapes
        return f"invalid regular expression {pattern!r}: {exc}"
    try:
        why = _nested_repeat(list(parsed), inside=False, flags=parsed.state.flags)
        if not why:
            why = _Adjacency(parsed.state.flags).problem(list(parsed))
    except RecursionError:
        return f"regular expression {pattern!r} nests too deeply"
    if not why and _program_size(list(parsed), parsed.state.flags) > limits.MAX_REGEX_PROGRAM:
        return (
            f"regular expression {pattern!r} is too large once its counted repeats are written out "
            f"(over {limits.MAX_REGEX_PROGRAM:,} character-class ranges); use a smaller count"
        )
    if why:
        return f"regular expression {pattern!r} can backtrack catastrophically ({why}); rewrite it"
    try:
        compile_suite_regex(pattern)._build()  # the engines now, not at the first match
    except Exception as exc:
        return f"regular expression {pattern!r} cannot be run with a time bound: {exc}"
    return None


def check_regex(pattern: str) -> None:
    """Raise ``limits.LimitExceeded`` when a suite-supplied regex is invalid, too long or catastrophic."""
    why = regex_problem(pattern)
    if why:
        raise limits.LimitExceeded(why)


def _program_size(items: list[Any], flags: int, cap: int | None = None) -> int:
    """What compiling ``items`` costs, in character-class ranges: each single-character node counts
    its ranges (as emitted for RE2 and regex), and a repeat its body times its largest finite count
    (RE2 writes ``x{n,m}`` out m times) or times its minimum plus one when unbounded (both engines
    write the ``n`` of ``x{n,}`` out). Stops counting past ``cap``."""
    cap = limits.MAX_REGEX_PROGRAM if cap is None else cap
    total = 0
    for op, av in items:
        if op in _SINGLE:
            total += max(1, len(_ranges_of((op, av), flags)))
        elif op in _REPEATS:
            lo, hi, body = av
            times = hi if hi != _MAXREPEAT else lo + 1
            if times:
                total += times * _program_size(list(body), flags, cap // times + 1)
        elif op is _sre_c.SUBPATTERN:
            _group, add, remove, body = av
            total += _program_size(list(body), (flags | add) & ~remove, cap - total)
        elif op is _sre_c.BRANCH:
            total += sum(_program_size(list(b), flags, cap - total) for b in av[1])
        elif op in (_sre_c.ASSERT, _sre_c.ASSERT_NOT):
            total += _program_size(list(av[1]), flags, cap - total)
        elif op is _sre_c.ATOMIC_GROUP:
            total += _program_size(list(av), flags, cap - total)
        elif op is _sre_c.GROUPREF_EXISTS:
            total += sum(_program_size(list(b), flags, cap - total) for b in av[1:] if b is not None)
        else:
            total += 1
        if total > cap:
            return total
    return total


def _is_loop(node: Any) -> bool:
    op, av = node
    return op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT) and (av[1] == _MAXREPEAT or av[1] > _LOOP_MIN)


class _Adjacency:
    """Two unbounded repeats with only optional items between them, each able to take the same
    string at the seam (their bodies share a first and a last character): ``\\w*\\w*z`` splits a
    word between them in every way, one degree of polynomial backtracking per repeat.
    ``[a-z]+(?: [A-Z][a-z]+)*`` is fine: the second body opens with a space the first never takes.
    Possessive repeats and atomic groups never give back, so they are not counted."""

    def __init__(self, flags: int) -> None:
        self.flags = flags

    def problem(self, items: list[Any]) -> str | None:
        try:
            self.seq(items, self.flags)
        except _Found as hit:
            return str(hit)
        return None

    def edge(self, items: list[Any], flags: int, last: bool) -> tuple[tuple[int, int], ...]:
        """The code points a match of ``items`` can start (or end) with (a superset)."""
        out: list[tuple[tuple[int, int], ...]] = []
        for op, av in reversed(items) if last else items:
            nullable = True
            if op in _SINGLE:
                out.append(_ranges_of((op, av), _class_flags(flags)))
                nullable = False
            elif op is _sre_c.SUBPATTERN:
                inner = (flags | av[1]) & ~av[2]
                out.append(self.edge(list(av[3]), inner, last))
                nullable = _min_width(list(av[3])) == 0
            elif op is _sre_c.BRANCH:
                out.extend(self.edge(list(alt), flags, last) for alt in av[1])
                nullable = any(_min_width(list(alt)) == 0 for alt in av[1])
            elif op in _REPEATS:
                out.append(self.edge(list(av[2]), flags, last))
                nullable = av[0] == 0 or _min_width(list(av[2])) == 0
            elif op is _sre_c.ATOMIC_GROUP:
                out.append(self.edge(list(av), flags, last))
                nullable = _min_width(list(av)) == 0
            elif op is _sre_c.GROUPREF_EXISTS:
                out.append(self.edge(list(av[1]), flags, last))
                if av[2]:
                    out.append(self.edge(list(av[2]), flags, last))
            elif op is _sre_c.GROUPREF:
                out.append(((0, 0x10FFFF),))  # whatever its group took
            if not nullable:
                break
        return _union(out)

    def seq(self, items: list[Any], flags: int) -> tuple[list[_Loop], list[_Loop], bool]:
        """(leading loops, trailing loops, nullable) of a sequence; raises ``_Found`` on a seam."""
        lead: list[_Loop] = []
        pending: list[_Loop] = []  # loops still reachable with only optional items after them
        leading = True
        for node in items:
            n_lead, n_trail, nullable = self.node(node, flags)
            for p in pending:
                for q in n_lead:
                    if _overlap(p[0], q[0]) and _overlap(p[1], q[1]):
                        raise _Found(
                            "two unbounded repeats that can take the same text, with nothing mandatory between them"
                        )
            if leading:
                lead.extend(n_lead)
            if nullable:
                pending.extend(n_trail)
            else:
                leading = False
                pending = list(n_trail)
        return lead, pending, leading

    def node(self, node: Any, flags: int) -> tuple[list[_Loop], list[_Loop], bool]:
        op, av = node
        if op in _SINGLE:
            return [], [], False
        if op is _sre_c.SUBPATTERN:
            return self.seq(list(av[3]), (flags | av[1]) & ~av[2])
        if op is _sre_c.BRANCH:
            results = [self.seq(list(alt), flags) for alt in av[1]]
            return (
                [loop for r in results for loop in r[0]],
                [loop for r in results for loop in r[1]],
                any(r[2] for r in results),
            )
        if op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT):
            lo, _hi, body = av
            b_lead, b_trail, b_null = self.seq(list(body), flags)
            if _is_loop(node):
                loop = (self.edge(list(body), flags, False), self.edge(list(body), flags, True))
                return [loop], [loop], lo == 0 or b_null
            return b_lead, b_trail, lo == 0 or b_null
        if op in (_sre_c.POSSESSIVE_REPEAT, _sre_c.ATOMIC_GROUP):
            body = av[2] if op is _sre_c.POSSESSIVE_REPEAT else av
            inner = self.seq(list(body), flags)  # inside may still be ambiguous
            return [], [], inner[2] or (op is _sre_c.POSSESSIVE_REPEAT and av[0] == 0)
        if op in (_sre_c.ASSERT, _sre_c.ASSERT_NOT):
            self.seq(list(av[1]), flags)
            return [], [], True
        if op is _sre_c.GROUPREF_EXISTS:
            yes = self.seq(list(av[1]), flags)
            no = self.seq(list(av[2]), flags) if av[2] else ([], [], True)
            return yes[0] + no[0], yes[1] + no[1], yes[2] or no[2]
        return [], [], True  # anchors and back-references: zero width or opaque


_Loop = tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]  # (first chars, last chars) of a body


class _Found(Exception):
    pass


# The structural rules for exponential backtracking (a repeat inside a repeat, a repeated
# alternation with overlapping branches) read the pattern with probe characters.

_PROBE = [chr(c) for c in range(32, 127)] + ["\t", "\n", "\u00a0", "\u00e9", "\u4e2d", "\u0661"]
_BACKTRACKING = {_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT}


def _is_repeating(node: tuple[Any, Any]) -> bool:
    op, av = node
    return op in _BACKTRACKING and (av[1] == _MAXREPEAT or av[1] > 1)


def _variable(items: list[Any]) -> bool:
    """Can this sequence match strings of more than one length?"""
    lo, hi = _sre_parse.SubPattern(_sre_parse.State(), items).getwidth()
    return bool(lo != hi)


def _nested_repeat(items: list[Any], *, inside: bool, flags: int) -> str | None:
    for i, (op, av) in enumerate(items):
        if op in _BACKTRACKING:
            body = list(av[2])
            repeating = _is_repeating((op, av))
            variable = av[0] != av[1] or _variable(body)
            if inside and repeating and variable and not _guarded(items, i, body, flags):
                return "a repeated group holds another repeat"
            if repeating:
                branch_clash = _overlapping_branches(body, flags)
                if branch_clash:
                    return branch_clash
            why = _nested_repeat(body, inside=inside or repeating, flags=flags)
            if why:
                return why
        elif op is _sre_c.SUBPATTERN:
            why = _nested_repeat(list(av[3]), inside=inside, flags=flags)
            if why:
                return why
        elif op is _sre_c.BRANCH:
            for alt in av[1]:
                why = _nested_repeat(list(alt), inside=inside, flags=flags)
                if why:
                    return why
        elif op in (_sre_c.ASSERT, _sre_c.ASSERT_NOT):
            why = _nested_repeat(list(av[1]), inside=False, flags=flags)
            if why:
                return why
        # atomic groups and possessive repeats never backtrack into themselves: not inspected
    return None


def _guarded(items: list[Any], i: int, body: list[Any], flags: int) -> bool:
    """Is the inner repeat ``items[i]`` fenced by a character it cannot match?

    ``(\\w+\\s)+`` and ``(?: [A-Z][a-z]+)*`` are safe: what follows the inner repeat (the next
    item, or for the last item the start of the next iteration) is mandatory and disjoint from
    it, so there is one way to split the input between iterations.
    """
    inner = _first_chars(body, flags)
    if inner is None:
        return False
    fence = items[i + 1] if i + 1 < len(items) else (items[0] if i > 0 else None)
    if fence is None or _min_width([fence]) == 0:
        return False
    after = _first_chars([fence], flags)
    return after is not None and not (inner & after)


def _min_width(items: list[Any]) -> int:
    return int(_sre_parse.SubPattern(_sre_parse.State(), items).getwidth()[0])


def _overlapping_branches(body: list[Any], flags: int) -> str | None:
    for op, av in body:
        if op is _sre_c.SUBPATTERN:
            clash = _overlapping_branches(list(av[3]), flags)
            if clash:
                return clash
        if op is _sre_c.BRANCH:
            seen: set[str] = set()
            for alt in av[1]:
                chars = _first_chars(list(alt), flags)
                if chars is None or chars & seen:
                    return "a repeated alternation whose branches can start with the same character"
                seen |= chars
    return None


def _first_chars(items: list[Any], flags: int) -> set[str] | None:
    """Probe characters that can start a match of ``items`` (None: could not tell, or empty match)."""
    if not items:
        return None
    op, av = items[0]
    probe = _PROBE
    if op is _sre_c.LITERAL:
        c = chr(av)
        return {c, c.lower(), c.upper()} if flags & re.IGNORECASE else {c}
    if op is _sre_c.NOT_LITERAL:
        return {p for p in probe if p != chr(av)}
    if op is _sre_c.ANY:
        return set(probe)
    if op is _sre_c.IN:
        ranges = _ranges_of((op, av), _class_flags(flags))
        return {p for p in probe if any(lo <= ord(p) <= hi for lo, hi in ranges)}
    if op is _sre_c.SUBPATTERN:
        return _first_chars(list(av[3]), flags)
    if op in _BACKTRACKING and av[0] > 0:
        return _first_chars(list(av[2]), flags)
    if op is _sre_c.BRANCH:
        out: set[str] = set()
        for alt in av[1]:
            chars = _first_chars(list(alt), flags)
            if chars is None:
                return None
            out |= chars
        return out
    return None
