"""Held-out hygiene: word n-gram overlap between a suite's cases and a training set.

``overlap_report(suite, [train.jsonl])`` answers "did the training data contain this held-out
case?" for every case: the share of the case's own n-grams found in training text, the
overlapping text as readable spans, and the first training lines that hold them.

Which n-grams of a case are checked (docs/overlap.md has worked examples)
-------------------------------------------------------------------------
Training data is meant to share the scaffold and the tool contracts, so text that comes from
them must not count. A case's text is its rendered messages plus its expected answer (each
``expect.calls`` entry written as ``tool arg value ...``). Every token of a rendered message is
labelled by where it came from, by rendering the scaffold once more with a jinja2 ``finalize``
hook that brackets each ``{{ expression }}`` output:

* *static*: literal text of a scaffold template;
* *contract*: an expression that prints the tool contracts (``tools_json``, a tool's name,
  description or parameters);
* *case*: any other expression output, i.e. the case's own variables (event log, goal, ...).
  Every token of the expected answer is *case*.

An n-gram (``n`` consecutive tokens within one message) is **checked** when

1. more than half of its tokens are *case* tokens (so a 13-gram that is mostly system prompt
   around a short variable such as the agent's name is not checked), and
2. its token sequence does not occur in the scaffold's static text or the tool contracts (a case
   variable that quotes the scaffold is not the case's own text), and
3. when the suite has two or more cases, it does not occur in every case's rendered prompt
   (suite-wide defaults behave like scaffold).

A case's overlap fraction is matched checked n-grams / checked n-grams (distinct n-grams). A case
is flagged when that fraction is at least ``threshold``, or when the same fraction over its
expected answer alone is (a leaked answer is a few n-grams among hundreds of prompt n-grams). The
contamination rate is flagged cases / cases.

Speed: the checked n-grams of all cases (small) are hashed into one sorted array first; the
training file is then streamed once, tokenized, mapped to ids of that small vocabulary (other
words map to 0, which no checked n-gram holds) and every window is hashed with a vectorised
polynomial hash and looked up with ``searchsorted``. Training n-grams are never stored. Hash hits
are verified against the exact token ids, so a hash collision cannot create a match.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from leader_eval.bounded.numeric import np
from leader_eval.bounded.sandbox import run_bounded
from leader_eval.errors import LeaderEvalError
from leader_eval.inert import inert
from leader_eval.suite.load import Case, Suite
from leader_eval.suite.render import render_messages, scaffold_env

try:  # orjson ships with the tinker SDK (a dependency); it parses JSONL about 3x faster
    import orjson

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - plain json gives the same values
    _loads = json.loads

__all__ = [
    "CaseOverlap",
    "OverlapReport",
    "OverlapSpan",
    "TrainingLine",
    "format_overlap_report",
    "iter_training_texts",
    "overlap_report",
    "tokenize",
]

TOKEN_RE = re.compile(r"\w+")
MAX_TRAINING_LINES = 5  # training lines kept per case ("first few")

# token provenance labels
_STATIC, _CONTRACT, _CASE = 0, 1, 2
# private-use characters that bracket an expression's output in the provenance rendering
_OPEN_CASE, _OPEN_CONTRACT, _CLOSE = "\ue000", "\ue002", "\ue001"
_MARKED = re.compile(f"([{_OPEN_CASE}{_OPEN_CONTRACT}])(.*?){_CLOSE}", re.S)

_CHUNK_LINES = 2048  # training lines hashed per numpy batch


# --- report records ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OverlapSpan:
    """A run of case text covered by matched n-grams, in the coordinates of one message."""

    segment: str  # "messages[1] user" or "expect"
    start: int  # character offsets into that segment's text
    end: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"segment": self.segment, "start": self.start, "end": self.end, "text": self.text}


@dataclass(frozen=True)
class TrainingLine:
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class CaseOverlap:
    case_id: str
    line: int  # the case's line in the suite file
    ngrams: int  # distinct checked n-grams
    matched: int  # distinct checked n-grams found in training text
    ignored: int  # distinct n-grams left out as scaffold / contract / shared
    answer_ngrams: int  # of ``ngrams``, those of the expected answer
    answer_matched: int
    flagged: bool  # fraction >= threshold, or answer_fraction >= threshold
    spans: list[OverlapSpan] = field(default_factory=list)
    training_lines: list[TrainingLine] = field(default_factory=list)  # the first few, in file order
    training_line_count: int = 0  # every training line that shares a checked n-gram
    n: int = 13  # the n-gram length this case was checked at (``N_LADDER`` when no --n was given)

    @property
    def fraction(self) -> float:
        return self.matched / self.ngrams if self.ngrams else 0.0

    @property
    def answer_fraction(self) -> float:
        return self.answer_matched / self.answer_ngrams if self.answer_ngrams else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "line": self.line,
            "n": self.n,
            "fraction": self.fraction,
            "flagged": self.flagged,
            "ngrams": self.ngrams,
            "matched": self.matched,
            "ignored": self.ignored,
            "answer_fraction": self.answer_fraction,
            "answer_ngrams": self.answer_ngrams,
            "answer_matched": self.answer_matched,
            "spans": [s.to_dict() for s in self.spans],
            "training_lines": [{"path": t.path, "line": t.line} for t in self.training_lines],
            "training_line_count": self.training_line_count,
        }


@dataclass
class OverlapReport:
    suite: str
    suite_path: str
    train_paths: list[str]
    n: int | None  # None: each case at its own length from ``ladder``
    threshold: float
    training_examples: int
    cases: list[CaseOverlap]
    provenance: str  # "template": tokens labelled by the finalize hook; "content": fallback
    ladder: list[int] = field(default_factory=lambda: [13])  # the lengths tried, longest first

    @property
    def flagged(self) -> list[CaseOverlap]:
        return [c for c in self.cases if c.flagged]

    @property
    def contamination_rate(self) -> float:
        return len(self.flagged) / len(self.cases) if self.cases else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "suite_path": self.suite_path,
            "train_paths": list(self.train_paths),
            "n": self.n if self.n is not None else "auto",
            "ladder": list(self.ladder),
            "threshold": self.threshold,
            "training_examples": self.training_examples,
            "cases_total": len(self.cases),
            "cases_flagged": len(self.flagged),
            "contamination_rate": self.contamination_rate,
            "provenance": self.provenance,
            "cases": [c.to_dict() for c in self.cases],
        }


# --- tokens -----------------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens (``\\w+``); punctuation and whitespace only separate words."""
    return TOKEN_RE.findall(text.lower())


def _tokens_with_offsets(text: str) -> list[tuple[str, int, int]]:
    """Tokens of ``text`` as ``tokenize`` sees them, with offsets into the original ``text``."""
    low = text.lower()
    if len(low) == len(text):
        return [(m.group(), m.start(), m.end()) for m in TOKEN_RE.finditer(low)]
    # A few characters lowercase to two (e.g. "İ"): map each lowered character back.
    pieces = [c.lower() for c in text]
    back = [i for i, p in enumerate(pieces) for _ in p]
    back.append(len(text))
    low = "".join(pieces)
    return [(m.group(), back[m.start()], back[m.end() - 1] + 1) for m in TOKEN_RE.finditer(low)]


def _ngrams(tokens: Sequence[str], n: int) -> Iterator[tuple[str, ...]]:
    for i in range(len(tokens) - n + 1):
        yield tuple(tokens[i : i + n])


# --- text of a tool call and of a training record ---------------------------------------------


def _flatten(value: Any, out: list[str]) -> None:
    """Text of a JSON value: mapping keys and values in order, list items, scalars."""
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(str(k))
            _flatten(v, out)
    elif isinstance(value, list):
        for v in value:
            _flatten(v, out)
    elif value is not None:
        out.append(str(value))


def _arguments_text(arguments: Any, out: list[str]) -> None:
    # OpenAI sends arguments as a JSON string; decode it so "\n" escapes do not glue words.
    if isinstance(arguments, str):
        s = arguments.strip()
        if s and s[0] in "{[":
            with contextlib.suppress(ValueError):  # not JSON after all: keep the raw string
                arguments = json.loads(s)
    _flatten(arguments, out)


def _expected_answer(case: Case) -> str:
    """``expect.calls`` as text: tool name, then each argument's name and literal value(s)."""
    out: list[str] = []
    for call in case.expect.get("calls", []):
        out.append(call["tool"])
        for arg, constraint in call.get("args", {}).items():
            out.append(arg)
            if not isinstance(constraint, dict):
                _flatten(constraint, out)
                continue
            # literal values only: a regex or a bound is not text the model would write
            for key in ("equals", "one_of", "contains", "contains_any"):
                if key in constraint:
                    _flatten(constraint[key], out)
    return " ".join(out)


def _content_text(content: Any, out: list[str]) -> None:
    """Message content: a string, or a list of parts (text, tool_use input, tool_result)."""
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    out.append(part["text"])
                if "input" in part:  # a tool_use block
                    if isinstance(part.get("name"), str):
                        out.append(part["name"])
                    _arguments_text(part["input"], out)
                if "content" in part:  # a tool_result block
                    _content_text(part["content"], out)


def _message_text(msg: Any, where: str, out: list[str]) -> None:
    if not isinstance(msg, dict):
        raise LeaderEvalError(f"{where}: each message must be a JSON object, got {type(msg).__name__}")
    content = msg.get("content", msg.get("value"))  # "value": ShareGPT
    if type(content) is str:  # the common case, kept cheap: this runs for every training message
        out.append(content)
    elif content is not None:
        _content_text(content, out)
    for key in ("reasoning_content", "thinking"):
        if isinstance(msg.get(key), str):
            out.append(msg[key])
    calls = msg.get("tool_calls") or []
    if not isinstance(calls, list):
        raise LeaderEvalError(f"{where}: 'tool_calls' must be a list")
    if isinstance(msg.get("function_call"), dict):  # legacy OpenAI
        calls = [*calls, {"function": msg["function_call"]}]
    for call in calls:
        if not isinstance(call, dict):
            raise LeaderEvalError(f"{where}: each tool call must be a JSON object")
        fn = call.get("function", call)
        if not isinstance(fn, dict):
            raise LeaderEvalError(f"{where}: a tool call's 'function' must be a JSON object")
        if isinstance(fn.get("name"), str):
            out.append(fn["name"])
        _arguments_text(fn.get("arguments", fn.get("input")), out)


def _messages_text(messages: Any, key: str, where: str, out: list[str]) -> None:
    if not isinstance(messages, list):
        raise LeaderEvalError(f"{where}: {key!r} must be a list of messages")
    for msg in messages:
        _message_text(msg, where, out)


def _record_text(record: Any, where: str) -> str:
    """All text of one training record, in one of the common chat JSONL formats."""
    if not isinstance(record, dict):
        raise LeaderEvalError(f"{where}: a training line must be a JSON object, got {type(record).__name__}")
    out: list[str] = []
    if "messages" in record:  # OpenAI chat fine-tuning
        _messages_text(record["messages"], "messages", where, out)
    elif "conversations" in record:  # ShareGPT
        _messages_text(record["conversations"], "conversations", where, out)
    elif "prompt" in record or "completion" in record:
        for key in ("prompt", "completion"):
            value = record.get(key)
            if isinstance(value, list):  # TRL's conversational prompt-completion
                _messages_text(value, key, where, out)
            elif isinstance(value, str):
                out.append(value)
            elif value is not None:
                raise LeaderEvalError(f"{where}: {key!r} must be a string or a list of messages")
    elif "text" in record:
        if not isinstance(record["text"], str):
            raise LeaderEvalError(f"{where}: 'text' must be a string")
        out.append(record["text"])
    else:
        keys = ", ".join(sorted(record)) or "none"
        raise LeaderEvalError(
            f"{where}: unknown training record (keys: {keys}); expected 'messages', 'conversations', "
            "'prompt'/'completion' or 'text'"
        )
    return "\n".join(out)


def iter_training_texts(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for every non-blank line; a bad line raises naming ``path:line``."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; binary so orjson skips a decode
    except OSError as exc:
        raise LeaderEvalError(f"{path}: cannot read training file: {exc.strerror}") from exc
    with fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                record = _loads(raw)
            except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise LeaderEvalError(f"{path}:{lineno}: invalid JSON: {msg}") from None
            yield lineno, _record_text(record, f"{path}:{lineno}")


# --- the case side ----------------------------------------------------------------------------


@dataclass
class _Segment:
    label: str
    text: str
    tokens: list[tuple[str, int, int]]


def _contract_texts(suite: Suite) -> tuple[set[str], list[str]]:
    """Strings that count as tool contracts (exact values) and the texts their n-grams come from."""
    fns = [t.to_openai()["function"] for t in suite.tools]
    texts = [
        json.dumps(fns, indent=2, ensure_ascii=False),
        json.dumps(fns, ensure_ascii=False),
        json.dumps([t.to_openai() for t in suite.tools], ensure_ascii=False),
    ]
    exact: set[str] = set(texts)
    for fn in fns:
        for indent in (None, 2):
            exact.add(json.dumps(fn, indent=indent, ensure_ascii=False))
            exact.add(json.dumps(fn["parameters"], indent=indent, ensure_ascii=False))
        leaves: list[str] = []
        _flatten(fn, leaves)
        # only strings: a case variable that prints 1 or True is not a tool contract
        exact.update(_string_leaves(fn))
        texts.append(" ".join(leaves))
        texts.append(f"{fn['name']}: {fn['description']}")
    return {e for e in exact if e.strip()}, texts


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _string_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _string_leaves(v)
    elif isinstance(value, str):
        yield value


class _ProvenanceRenderer:
    """The scaffold rendered with each expression's output bracketed by its origin.

    ``render`` returns None when that fails; the caller also compares the text with
    ``render_messages`` and, on any difference, labels every token as the case's own and relies
    on the content rules alone.
    """

    def __init__(self, suite: Suite, exact_contract: set[str]):
        bounded = scaffold_env().finalize  # measures each written value first, as render_messages does

        def finalize(value: Any) -> str:
            text = str(bounded(value) if bounded is not None else value)
            if not text:
                return text
            opener = _OPEN_CONTRACT if text in exact_contract else _OPEN_CASE
            return f"{opener}{text}{_CLOSE}"

        self.suite = suite
        env = scaffold_env().overlay(finalize=finalize)
        fns = [t.to_openai()["function"] for t in suite.tools]
        # the same context render_messages builds
        self.base_context: dict[str, Any] = {
            "tools": fns,
            "tools_json": json.dumps(fns, indent=2, ensure_ascii=False),
        }
        try:  # compiled once per report, not once per case
            self.templates: list[Any] | None = [run_bounded(env.from_string, m.template) for m in suite.scaffold]
        except Exception:
            self.templates = None

    def render(self, case: Case) -> list[tuple[str, bytearray]] | None:
        if self.templates is None:
            return None
        context = {**self.base_context, "case_id": case.id, **case.vars}
        out: list[tuple[str, bytearray]] = []
        try:
            for template in self.templates:
                # the same bounds as render_messages: a template may take another branch here
                # (the random filter), and a report must not hang on it
                marked = run_bounded(template.render, context)
                text_parts: list[str] = []
                labels = bytearray()
                pos = 0
                for m in _MARKED.finditer(marked):
                    static = marked[pos : m.start()]
                    text_parts.append(static)
                    labels.extend(bytes([_STATIC]) * len(static))
                    label = _CONTRACT if m.group(1) == _OPEN_CONTRACT else _CASE
                    text_parts.append(m.group(2))
                    labels.extend(bytes([label]) * len(m.group(2)))
                    pos = m.end()
                text_parts.append(marked[pos:])
                labels.extend(bytes([_STATIC]) * (len(marked) - pos))
                text = "".join(text_parts)
                if text.strip():
                    out.append((text, labels))
        except Exception:  # any drift from render.py's rendering: fall back, never guess
            return None
        return out


def _static_texts(suite: Suite) -> list[str]:
    """Literal text of every scaffold template, branches not taken by any case included."""
    texts: list[str] = []
    for msg in suite.scaffold:
        for _lineno, kind, value in scaffold_env().lex(msg.template):
            if kind == "data":
                texts.append(value)
    return texts


def _case_segments(
    suite: Suite, case: Case, renderer: _ProvenanceRenderer
) -> tuple[list[_Segment], list[tuple[str, bytearray]], bool]:
    messages = render_messages(suite, case)  # raises SuiteError on a missing variable
    marked = renderer.render(case)
    exact = marked is not None and [t for t, _ in marked] == [m["content"] for m in messages]
    if not exact:
        marked = [(m["content"], bytearray([_CASE]) * len(m["content"])) for m in messages]
    assert marked is not None
    segments: list[_Segment] = []
    for i, ((text, _labels), m) in enumerate(zip(marked, messages, strict=True)):
        segments.append(_Segment(f"messages[{i}] {m['role']}", text, _tokens_with_offsets(text)))
    answer = _expected_answer(case)
    if answer:
        segments.append(_Segment("expect", answer, _tokens_with_offsets(answer)))
        marked = [*marked, (answer, bytearray([_CASE]) * len(answer))]
    return segments, marked, exact


def _token_labels(tokens: list[tuple[str, int, int]], labels: bytearray) -> list[int]:
    # a token that straddles a variable's edge ("{{ name }}s") belongs to the case
    return [max(labels[s:e]) if e > s else _STATIC for _, s, e in tokens]


# --- the scan ---------------------------------------------------------------------------------


class _Index:
    """Sorted hashes of every checked case n-gram, with their token ids for exact verification."""

    def __init__(self, grams: list[tuple[str, ...]], n: int):
        self.n = n
        self.vocab: dict[str, int] = {}
        for g in grams:
            for tok in g:
                self.vocab.setdefault(tok, len(self.vocab) + 1)  # 0 = a word no case n-gram holds
        rng = np.random.default_rng(0x1EAD)  # fixed: the hash must be the same within one run only
        self.values = rng.integers(1, 2**63, size=len(self.vocab) + 1, dtype=np.uint64)
        self.base = np.uint64(rng.integers(2**32, 2**63) | 1)
        ids = np.array([[self.vocab[t] for t in g] for g in grams], dtype=np.int64).reshape(len(grams), n)
        hashes = self._hash_rows(ids)
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        self.ids = ids[order]
        self.gram_of_sorted = order  # sorted position -> index into ``grams``

    def _hash_rows(self, ids: np.ndarray) -> np.ndarray:
        h = np.zeros(len(ids), dtype=np.uint64)
        for k in range(self.n):
            h = h * self.base + self.values[ids[:, k]]
        return h

    def hash_windows(self, ids: np.ndarray) -> np.ndarray:
        """Polynomial hash of every length-n window of ``ids`` (uint64 arithmetic wraps)."""
        count = len(ids) - self.n + 1
        v = self.values[ids]
        h = v[:count].copy()
        for k in range(1, self.n):
            h *= self.base
            h += v[k : k + count]
        return h

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Window starts in ``ids`` that hold a case n-gram, and that n-gram's sorted position."""
        if len(ids) < self.n or not len(self.hashes):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        h = self.hash_windows(ids)
        pos = np.searchsorted(self.hashes, h)
        np.minimum(pos, len(self.hashes) - 1, out=pos)
        starts = np.nonzero(self.hashes[pos] == h)[0]
        if not len(starts):
            return starts, starts
        slot = pos[starts]
        windows = ids[starts[:, None] + np.arange(self.n)]
        exact = (windows == self.ids[slot]).all(axis=1)  # a hash collision is not a match
        return starts[exact], slot[exact]


# ASCII text takes a faster path with the same tokens: bytes.translate lowercases and blanks every
# byte that is not [A-Za-z0-9_] (exactly what \w matches in ASCII), then bytes.split() cuts words.
_ASCII_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")
_ASCII_TABLE = bytes((c + 32 if 65 <= c <= 90 else c if c in _ASCII_WORD else 32) for c in range(256))


def _training_tokens(text: str) -> list[str] | list[bytes]:
    """Tokens of training text: ``tokenize(text)``, as bytes when the text is ASCII."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_TABLE).split()
    return TOKEN_RE.findall(text.lower())


def _scan(
    index: _Index,
    train_paths: Sequence[Path],
    on_hits: Any,
) -> int:
    """Stream the training files; call ``on_hits(slots, refs)`` per batch; return examples read."""
    # one dict for both token types: str and bytes keys never collide
    vocab: dict[str | bytes, int] = dict(index.vocab.items())
    vocab.update({k.encode("ascii"): v for k, v in index.vocab.items() if k.isascii()})
    vocab_get = vocab.get
    separator = b"\0"  # maps to 0 like any unknown word, so no matched window spans two examples
    examples = 0

    def flush(tokens: list[str | bytes], starts: list[int], refs: list[TrainingLine]) -> None:
        ids = np.fromiter(map(vocab_get, tokens, repeat(0)), dtype=np.int64, count=len(tokens))
        hit_starts, slots = index.lookup(ids)
        if len(hit_starts):
            example = np.searchsorted(np.array(starts), hit_starts, side="right") - 1
            on_hits(slots, [refs[e] for e in example])

    for path in train_paths:
        tokens: list[str | bytes] = []
        starts: list[int] = []
        refs: list[TrainingLine] = []
        for lineno, text in iter_training_texts(Path(path)):
            examples += 1
            starts.append(len(tokens))
            refs.append(TrainingLine(str(path), lineno))
            tokens += _training_tokens(text)
            tokens.append(separator)
            if len(refs) >= _CHUNK_LINES:
                flush(tokens, starts, refs)
                tokens, starts, refs = [], [], []
        if refs:
            flush(tokens, starts, refs)
    return examples


def _spans(seg: _Segment, n: int, matched_starts: Iterable[int]) -> list[OverlapSpan]:
    covered = [False] * len(seg.tokens)
    for i in matched_starts:
        for j in range(i, i + n):
            covered[j] = True
    spans: list[OverlapSpan] = []
    i = 0
    while i < len(covered):
        if not covered[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(covered) and covered[j + 1]:
            j += 1
        start, end = seg.tokens[i][1], seg.tokens[j][2]
        spans.append(OverlapSpan(seg.label, start, end, seg.text[start:end]))
        i = j + 1
    return spans


#: the n-gram lengths tried when no ``n`` is given, longest first: each case is checked at the
#: longest at which it has an n-gram of its own, so a short case (a few words of event log, a
#: one-line answer) copied verbatim into training is still found (docs/overlap.md: the cost)
N_LADDER = (13, 8, 5)


@dataclass
class _Checked:
    """Which n-grams of each case are checked at one ``n`` (the three rules of the module doc)."""

    n: int
    gram_id: dict[tuple[str, ...], int]
    case_grams: list[set[int]]
    answer_grams: list[set[int]]
    ignored: list[int]
    #: per case, per segment: whether the n-gram starting at each token is checked
    flags: list[list[list[bool]]]


def _checked_at(
    n: int,
    per_case: list[tuple[list[_Segment], list[list[int]]]],
    contract_static: list[str],
) -> _Checked:
    scaffold_grams: set[tuple[str, ...]] = set()
    for text in contract_static:
        scaffold_grams.update(_ngrams(tokenize(text), n))
    prompt_grams: list[set[tuple[str, ...]]] = []
    for segments, labels in per_case:
        for seg, lab in zip(segments, labels, strict=True):
            toks = [t for t, _, _ in seg.tokens]
            # static runs of the rendered prompt are scaffold too (text joined across {% %} tags)
            run: list[str] = []
            for tok, label in zip(toks, lab, strict=True):
                if label == _STATIC and seg.label != "expect":
                    run.append(tok)
                else:
                    scaffold_grams.update(_ngrams(run, n))
                    run = []
            scaffold_grams.update(_ngrams(run, n))
        prompt_grams.append(
            {g for seg in segments if seg.label != "expect" for g in _ngrams([t for t, _, _ in seg.tokens], n)}
        )
    shared: set[tuple[str, ...]] = set.intersection(*prompt_grams) if len(prompt_grams) >= 2 else set()
    out = _Checked(n, {}, [], [], [], [])
    for segments, labels in per_case:
        checked_ids: set[int] = set()
        answer_ids: set[int] = set()
        seen: set[tuple[str, ...]] = set()
        case_flags: list[list[bool]] = []
        for seg, lab in zip(segments, labels, strict=True):
            toks = [t for t, _, _ in seg.tokens]
            flags: list[bool] = []
            case_count = sum(1 for x in lab[:n] if x == _CASE)
            for i in range(len(toks) - n + 1):
                if i:
                    case_count += (lab[i + n - 1] == _CASE) - (lab[i - 1] == _CASE)
                g = tuple(toks[i : i + n])
                ok = 2 * case_count > n and g not in scaffold_grams and g not in shared
                flags.append(ok)
                seen.add(g)
                if ok:
                    gid = out.gram_id.setdefault(g, len(out.gram_id))
                    checked_ids.add(gid)
                    if seg.label == "expect":
                        answer_ids.add(gid)
            case_flags.append(flags)
        out.case_grams.append(checked_ids)
        out.answer_grams.append(answer_ids)
        out.ignored.append(len(seen) - len(checked_ids))
        out.flags.append(case_flags)
    return out


def overlap_report(
    suite: Suite,
    train_paths: Sequence[Path],
    *,
    n: int | None = None,
    threshold: float = 0.1,
) -> OverlapReport:
    """N-gram overlap of every case (rendered prompt + expected answer) with the training files.

    ``n``: one n-gram length for every case; None (the default): each case at the longest length
    of ``N_LADDER`` at which it has a checked n-gram (the training files are read once per length
    some case uses)."""
    if n is not None and n < 1:
        raise LeaderEvalError(f"--n must be at least 1, got {n}")
    if not 0.0 <= threshold <= 1.0:
        raise LeaderEvalError(f"--threshold must be between 0 and 1, got {threshold}")
    ladder = (n,) if n is not None else N_LADDER

    exact_contract, contract_texts = _contract_texts(suite)
    contract_static = [*contract_texts, *_static_texts(suite)]
    renderer = _ProvenanceRenderer(suite, exact_contract)
    per_case: list[tuple[list[_Segment], list[list[int]]]] = []
    all_exact = True
    for case in suite.cases:
        segments, marked, exact = _case_segments(suite, case, renderer)
        all_exact &= exact
        labels = [_token_labels(seg.tokens, lab) for seg, (_, lab) in zip(segments, marked, strict=True)]
        per_case.append((segments, labels))

    checked: dict[int, _Checked] = {}
    case_n: list[int] = [ladder[-1]] * len(suite.cases)
    undecided = set(range(len(suite.cases)))
    for k in ladder:
        if not undecided:
            break
        checked[k] = _checked_at(k, per_case, contract_static)
        for ci in sorted(undecided):
            if checked[k].case_grams[ci] or k == ladder[-1]:
                case_n[ci] = k
                undecided.discard(ci)

    matched: dict[int, np.ndarray] = {}
    lines_seen: list[dict[TrainingLine, None]] = [{} for _ in suite.cases]
    examples = 0
    for k in sorted(set(case_n), reverse=True):
        ck = checked[k]
        mine = [ci for ci in range(len(suite.cases)) if case_n[ci] == k]
        grams = list(ck.gram_id)
        index = _Index(grams, k)
        hit = np.zeros(len(grams), dtype=bool)
        # which of this length's cases hold each n-gram, so a hit is charged to its training line per case
        cases_of_gram: list[list[int]] = [[] for _ in grams]
        for ci in mine:
            for gid in ck.case_grams[ci]:
                cases_of_gram[gid].append(ci)

        def on_hits(slots: np.ndarray, refs: list[TrainingLine], index: _Index = index, hit: np.ndarray = hit,
                    cases_of_gram: list[list[int]] = cases_of_gram) -> None:  # fmt: skip
            gram_ids = index.gram_of_sorted[slots]
            hit[gram_ids] = True
            for g, ref in dict.fromkeys(zip(gram_ids.tolist(), refs, strict=True)):
                for ci in cases_of_gram[g]:
                    lines_seen[ci].setdefault(ref, None)

        examples = _scan(index, train_paths, on_hits)
        matched[k] = hit

    results: list[CaseOverlap] = []
    for ci, (case, (segments, _labels)) in enumerate(zip(suite.cases, per_case, strict=True)):
        k = case_n[ci]
        ck, hit = checked[k], matched[k]
        spans: list[OverlapSpan] = []
        for seg, flags in zip(segments, ck.flags[ci], strict=True):
            toks = [t for t, _, _ in seg.tokens]
            starts = [i for i, ok in enumerate(flags) if ok and hit[ck.gram_id[tuple(toks[i : i + k])]]]
            spans.extend(_spans(seg, k, starts))
        n_checked = len(ck.case_grams[ci])
        n_matched = int(sum(1 for g in ck.case_grams[ci] if hit[g]))
        n_answer = len(ck.answer_grams[ci])
        n_answer_matched = int(sum(1 for g in ck.answer_grams[ci] if hit[g]))
        lines = list(lines_seen[ci])
        fraction = n_matched / n_checked if n_checked else 0.0
        # a held-out answer seen in training counts on its own: it is a few n-grams among hundreds
        answer_fraction = n_answer_matched / n_answer if n_answer else 0.0
        results.append(
            CaseOverlap(
                case_id=case.id,
                line=case.line,
                ngrams=n_checked,
                matched=n_matched,
                ignored=ck.ignored[ci],
                answer_ngrams=n_answer,
                answer_matched=n_answer_matched,
                flagged=(n_checked > 0 and fraction >= threshold) or (n_answer > 0 and answer_fraction >= threshold),
                spans=spans,
                training_lines=lines[:MAX_TRAINING_LINES],
                training_line_count=len(lines),
                n=k,
            )
        )
    return OverlapReport(
        suite=suite.name,
        suite_path=str(suite.path),
        train_paths=[str(p) for p in train_paths],
        n=n,
        threshold=threshold,
        training_examples=examples,
        cases=results,
        provenance="template" if all_exact else "content",
        ladder=list(ladder),
    )


# --- terminal text ----------------------------------------------------------------------------


def _snippet(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    if len(flat) > limit:
        half = (limit - 5) // 2
        flat = f"{flat[:half]} ... {flat[-half:]}"
    return json.dumps(flat, ensure_ascii=False)


def _lengths(report: OverlapReport) -> str:
    if report.n is not None:
        return f"{report.n}-grams"
    used = sorted({c.n for c in report.cases}, reverse=True)
    return (
        "n-grams of "
        + "/".join(map(str, report.ladder))
        + " words (each case at the longest it has: "
        + (", ".join(f"{sum(c.n == k for c in report.cases)} at {k}" for k in used) or "none")
        + ")"
    )


def format_overlap_report(report: OverlapReport, *, max_spans: int = 3) -> str:
    """Readable summary: flagged cases first with their overlapping text, then partial overlaps;
    cases with no overlap at all are counted, not listed."""
    files = ", ".join(report.train_paths) or "(no training files)"
    lines = [
        f"overlap: suite {report.suite} ({len(report.cases)} cases) vs {files} "
        f"({report.training_examples:,} examples), {_lengths(report)}, flag at >= {report.threshold:.2f}"
    ]
    shown = [c for c in report.cases if c.flagged or c.matched or c.ngrams == 0]
    width = max((len(c.case_id) for c in shown), default=4)
    for c in sorted(shown, key=lambda c: (not c.flagged, -c.fraction, -c.answer_fraction)):
        status = "FLAG" if c.flagged else "ok  "
        head = f"  {status} {c.case_id:<{width}}  {c.fraction:6.1%}  ({c.matched}/{c.ngrams} {c.n}-grams)"
        if c.answer_matched:
            head += f"  answer {c.answer_fraction:.0%} ({c.answer_matched}/{c.answer_ngrams})"
        if c.ngrams == 0:
            head += f"  nothing to check: no {c.n}-gram of its own"
        if c.training_lines:
            more = c.training_line_count - len(c.training_lines)
            head += "  in " + ", ".join(str(t) for t in c.training_lines) + (f" (+{more} more)" if more else "")
        lines.append(head)
        for sp in c.spans[:max_spans]:
            lines.append(f"        {sp.segment}: {_snippet(sp.text)}")
        if len(c.spans) > max_spans:
            lines.append(f"        ... {len(c.spans) - max_spans} more spans")
    clean = len(report.cases) - len(shown)
    if clean:
        lines.append(f"  {clean} case{'s' if clean != 1 else ''} with no overlap")
    if report.provenance != "template":
        lines.append("  note: could not label template text by origin; only the content rules removed scaffold n-grams")
    lines.append(
        f"contamination: {len(report.flagged)}/{len(report.cases)} cases ({report.contamination_rate:.1%}) "
        f"at >= {report.threshold:.2f} overlap"
    )
    return inert("\n".join(lines), multiline=True)  # a training file's text: one line, no escapes
