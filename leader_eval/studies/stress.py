"""``leader-eval stress``: score against prompt length, with the correct action held fixed.

For each chosen case and each target length L the case's event log is grown with seeded filler
(other agents' small talk and tool results from ``leader_eval/studies/stress_filler``) until the rendered
prompt is L tokens in the model's own tokenizer and chat template, or at most a few tokens less.
The system prompt, tool contracts and the case's own events (the final triggering event last)
are unchanged, so the correct action is the same at every length. A case whose ``stress.fact_var``
names its deciding fact gets one variant per depth: the fact is moved to the start, middle or end
of the filler. All variants go through ``leader_eval.runs.evaluate.run`` in one run, so rendering,
context-overflow detection, sampling, recording and scoring are the standard path; a variant whose
prompt + max_tokens exceeds the context is a ``context_overflow`` outcome, never sampled.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import numbers
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from leader_eval.bounded.limits import MAX_STRESS_TOKENS
from leader_eval.errors import LeaderEvalError
from leader_eval.inert import inert
from leader_eval.runs.evaluate import run as run_suite
from leader_eval.runs.options import RunOptions, check_run_options
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import Replayable, replayable
from leader_eval.sampling.plan import resolve_context_length, select_cases
from leader_eval.store.run_store import (
    STRESS_JSON,
    STRESS_PNG,
    STRESS_TXT,
    read_json_file,
    write_bytes_atomic,
    write_json_atomic,
    write_lines_atomic,
)
from leader_eval.studies.stress_curve import ALL_DEPTHS, Curve, curves
from leader_eval.studies.stress_gate import StressVerdict, judge_stress
from leader_eval.suite.gate_spec import GateSpec, gate_spec
from leader_eval.suite.load import Case, Suite, load_suite
from leader_eval.suite.render import render_messages
from leader_eval.types import Prompt

DEFAULT_STEPS = (4000, 8000, 16000, 32000)
DEPTHS = ("start", "middle", "end")
#: a column fails at a length where its score is below this ...
FAIL_BELOW = 0.5
#: ... or more than this below its score at the shortest length
DROP_MARGIN = 0.25

# --- filler ---------------------------------------------------------------------------------

#: Words and shapes filler must never contain, whatever the case: anything that states a goal,
#: asks for something, plans, pauses, or looks like a tool call, marker or template.
_BANNED = re.compile(
    r"(?i)\b(goals?|objectives?|missions?|tasks?|assign\w*|owners?|todo|to-do|deadlines?|priorit\w*|"
    r"pause\w*|break|wait\w*|stop\w*|instruct\w*|leader|please|urgent\w*|must|should|need\w*|let'?s|"
    r"plan\w*|next|help\w*|ask\w*|your turn|click\w*|button|send_message\w*|tool call)\b"
    r"|[?<>\[\]{}]"
)
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "the a an and or of to in on at by for with from is are was were be it its this that these those "
        "we you i he she they our your my me us them his her their can will do does did has have had not "
        "no yes all any some one what who which when where why how now then than there here just so as "
        "if but up out about into over after before again still also too very",
    )
)


@dataclass(frozen=True)
class FillerData:
    speakers: tuple[str, ...]
    slots: dict[str, tuple[str, ...]]
    chat: tuple[str, ...]
    tool_results: tuple[tuple[str, str], ...]
    digest: str


@cache
def filler_data() -> FillerData:
    """The committed traffic templates (package data), parsed once."""
    raw = resources.files("leader_eval.studies.stress_filler").joinpath("chat_traffic.yaml").read_text(encoding="utf-8")
    d = yaml.safe_load(raw)
    return FillerData(
        speakers=tuple(d["speakers"]),
        slots={k: tuple(str(x) for x in v) for k, v in d["slots"].items()},
        chat=tuple(d["chat"]),
        tool_results=tuple((t["source"], t["text"]) for t in d["tool_results"]),
        digest=hashlib.sha256(raw.encode()).hexdigest()[:16],
    )


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z][A-Za-z'-]*", text)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def protected_words(case: Case, events_var: str = "events", fact_var: str | None = None) -> frozenset[str]:
    """Lower-cased words filler for ``case`` must not use: names, goal, expected answers, the fact.

    Names are every speaker of the case's own events plus name-like vars (agent_name, team); the
    rest are the content words of any ``*goal*`` var, of the expectation's literal strings and of the
    deciding fact. Filler that mentioned any of them could change what the right action is.
    """
    out: set[str] = set()
    names: list[str] = []
    for key, value in case.vars.items():
        if key in (events_var, fact_var):
            continue
        if "goal" in key.lower():
            out |= {w.lower() for w in _words(" ".join(_strings(value))) if w.lower() not in _STOPWORDS}
        elif key in ("agent_name", "team", "name", "agents", "leader") or key.endswith("_name"):
            names += _strings(value)
    events = case.vars.get(events_var) or []
    if isinstance(events, list):
        names += [str(e.get("from", "")) for e in events if isinstance(e, dict)]
    if fact_var and fact_var in case.vars:
        fact_text = " ".join(_item_text(e) for e in _as_events(case.vars[fact_var], fact_var))
        out |= {w.lower() for w in _words(fact_text) if w.lower() not in _STOPWORDS}
    out |= {w.lower() for n in names for w in _words(n)}
    for call in case.expect.get("calls", []):
        for constraint in call.get("args", {}).values():
            if isinstance(constraint, dict):
                lits = [constraint.get(k) for k in ("equals", "contains", "contains_any", "one_of")]
                out |= {w.lower() for s in _strings(lits) for w in _words(s) if w.lower() not in _STOPWORDS}
            else:
                out |= {w.lower() for s in _strings(constraint) for w in _words(s) if w.lower() not in _STOPWORDS}
    return frozenset(w for w in out if len(w) >= 2)


def filler_violations(text: str, protected: frozenset[str] = frozenset()) -> list[str]:
    """What makes ``text`` unfit as filler (empty when it is fine)."""
    found = [m.group(0) for m in _BANNED.finditer(text)]
    found += [w for w in _words(text) if w.lower() in protected]
    return found


class FillerStream:
    """A deterministic stream of filler events for one case: same seed and case, same events.

    Without ``pool`` the events are generated village chat (``chat_traffic.yaml``); lines that
    would use a protected word of the case, or a banned word, are drawn again. With ``pool``
    (the suite's own ``stress.filler`` items) they are that list in a seeded order, drawn without
    replacement, less the items that use a protected word of the case; ``limit`` is then how many
    there are. Times are assigned later, by the variant's fixed schedule.
    """

    def __init__(self, seed: int, key: str, protected: frozenset[str] = frozenset(), pool: Sequence[Any] | None = None):
        self.data = filler_data()
        self.protected = protected
        self.events: list[Any] = []
        self.limit: int | None = None
        if pool is not None:
            rng = random.Random(f"leader-eval-stress-pool\0{seed}\0{key}")
            usable = [item for item in pool if not [w for w in _words(_item_text(item)) if w.lower() in protected]]
            rng.shuffle(usable)
            self.events, self.limit = usable, len(usable)
            return
        self.rng = random.Random(f"leader-eval-stress\0{seed}\0{key}\0{self.data.digest}")
        self.speakers = [s for s in self.data.speakers if s.lower() not in protected]
        if len(self.speakers) < 2:
            raise LeaderEvalError("stress filler: every filler speaker name is used by the case")

    def _one(self) -> dict[str, str]:
        rng = self.rng
        for _ in range(200):
            speaker = rng.choice(self.speakers)
            if rng.random() < 0.2:
                source, template = rng.choice(self.data.tool_results)
            else:
                source, template = speaker, rng.choice(self.data.chat)
            text = re.sub(r"\{(\w+)\}", functools.partial(self._slot, speaker=speaker), template)
            if not filler_violations(f"{source}: {text}", self.protected):
                return {"from": source, "text": text}
        raise LeaderEvalError("stress filler: could not draw a line that avoids the case's own words")

    def _slot(self, m: re.Match[str], speaker: str) -> str:
        name = m.group(1)
        if name == "peer":
            return self.rng.choice([s for s in self.speakers if s != speaker])
        return self.rng.choice(self.data.slots[name])

    def take(self, n: int) -> list[Any]:
        if self.limit is not None:
            n = min(n, self.limit)  # the caller checks the count against ``limit``
        while len(self.events) < n:
            self.events.append(self._one())
        return [dict(e) if isinstance(e, dict) else e for e in self.events[:n]]

    def words_after(self, n: int, k: int) -> list[str]:
        """The first ``k`` words of the texts of events ``n``, ``n+1``, ...: padding for the last line
        (fewer when the suite's pool has no more text after ``n``)."""
        out: list[str] = []
        i = n
        while len(out) < k and (self.limit is None or i < self.limit):
            self.take(i + 1)
            item = self.events[i]
            text = item if isinstance(item, str) else item.get("text")
            out += text.split() if isinstance(text, str) else []
            i += 1
        return out[:k]


def _item_text(item: Any) -> str:
    """The words of a history item (its string values), for the protected-word check and estimates."""
    return " ".join(_strings(item))


def _stretch(item: Any, words: list[str]) -> Any:
    """``item`` with ``words`` appended to its text (a string item, or a mapping's ``text``)."""
    if not words:
        return item
    if isinstance(item, str):
        return " ".join([item, *words])
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        return {**item, "text": " ".join([item["text"], *words])}
    return item


def _parse_minutes(t: Any) -> int | None:
    m = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*", str(t))
    return int(m.group(1)) * 60 + int(m.group(2)) if m else None


def _timed(events: list[Any], first_time: Any, capacity: int, *, generated: bool) -> list[Any]:
    """Filler times, HH:MM, before the case's first event: line ``k`` at a fixed time whatever
    the variant's length (``capacity`` lines, the sweep's longest filler, spread evenly over up
    to 10 hours), so a shorter variant's filler is the longer one's beginning, time stamps
    included, and its prompt a prefix of the longer prompt (the local backend reuses its KV).
    Generated events get a ``time``; a suite's own items keep theirs unless they have a ``time``
    and the case's first event an HH:MM one (then it is replaced, so the log stays in order)."""
    t0 = _parse_minutes(first_time)
    if t0 is None:
        return [{"time": first_time, **e} if generated else e for e in events]
    window = min(t0, 600)
    last = t0 - 1 if window else t0  # never at or after the case's first event
    out: list[Any] = []
    for k, e in enumerate(events):
        minute = min(t0 - window + (k * window) // max(capacity, 1), last)
        stamp = f"{minute // 60:02d}:{minute % 60:02d}"
        if generated:
            out.append({"time": stamp, **e})
        elif isinstance(e, dict) and "time" in e:
            out.append({**e, "time": stamp})
        else:
            out.append(e)
    return out


def _as_events(value: Any, name: str) -> list[Any]:
    events = value if isinstance(value, list) else [value]
    if not all(isinstance(e, dict | str) for e in events):
        raise LeaderEvalError(f"stress: var {name!r} must be a history item (a mapping or a string) or a list of them")
    return [dict(e) if isinstance(e, dict) else e for e in events]


# --- variants -------------------------------------------------------------------------------


@dataclass
class Variant:
    """One (case, target length, depth) prompt, fitted to the target in the model's tokens."""

    case_id: str
    variant_id: str
    target: int
    depth: str | None
    prompt_tokens: int
    n_filler: int
    fact_index: int | None = None  # where the fact sits in the variant's event log
    n_events: int = 0
    # ok | overflow | incomplete (overflows beside scored samples: not judged) | shorter_than_case
    # (the case alone is longer than the target)
    status: str = "ok"
    case: Case | None = field(default=None, repr=False)
    prompt: Prompt | None = field(default=None, repr=False)
    score: float | None = None
    n_scored: int = 0
    n_passed: int = 0
    n_context_overflow: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    #: diagnostics beside the score: share of samples whose whole output is the tool-call protocol,
    #: and share that called the right tool(s); they show decay where a small model never passes
    strict_format_rate: float | None = None
    tool_accuracy: float | None = None
    #: how the prompt was built, beside n_filler: words added to the last filler line, and the
    #: filler's time-stamp scale (its case's estimated lines at the sweep's longest length). With
    #: them a replay rebuilds the exact prompt without a tokenizer (``replay_variants``)
    extra_words: int = 0
    capacity: int = 0

    @property
    def column(self) -> str:
        return f"{self.case_id}:{self.depth}" if self.depth else self.case_id

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("case", "prompt")}
        d["column"] = self.column
        return d


class _Fitter:
    """Finds how much filler brings one case's prompt to a target length, exact to the token."""

    def __init__(
        self,
        suite: Suite,
        case: Case,
        backend: Any,
        *,
        seed: int,
        events_var: str,
        fact_var: str | None,
        longest: int,
    ):
        self.suite, self.case, self.backend = suite, case, backend
        self.longest = longest  # the sweep's longest length: it sets the filler's fixed time stamps
        self.capacity = 0
        self.events_var, self.fact_var = events_var, fact_var
        self.tools = [t.to_openai() for t in suite.tools]
        events = case.vars.get(events_var)
        if not isinstance(events, list) or not events:
            raise LeaderEvalError(
                f"{suite.path}:{case.line}: stress case {case.id!r} needs a non-empty list var {events_var!r}"
            )
        self.facts = _as_events(case.vars[fact_var], fact_var) if fact_var else []
        # the fact may also sit in the case's own log (so the unstressed case shows it): move it
        self.own = [e for e in _as_events(events, events_var) if e not in self.facts]
        if not self.own:
            raise LeaderEvalError(f"{suite.path}:{case.line}: stress case {case.id!r} has no event besides its fact")
        first = self.own[0]
        self.first_time = first.get("time", "") if isinstance(first, dict) else ""
        self.pool = suite.stress_filler
        self.stream = FillerStream(seed, case.id, protected_words(case, events_var, fact_var), pool=self.pool)
        self._est: list[float] = []
        self.chars_per_token = 3.0

    def events(self, n: int, extra_words: int, depth: str | None) -> tuple[list[Any], int | None]:
        filler = self.stream.take(n)
        if extra_words and filler:
            filler[-1] = _stretch(filler[-1], self.stream.words_after(n, extra_words))
        timed = _timed(filler, self.first_time, self.capacity, generated=self.pool is None)
        fact_index = None
        if self.facts:
            at = {"start": 0, "middle": len(timed) // 2, "end": len(timed)}[depth or "end"]
            near = timed[at - 1] if at > 0 else (timed[0] if timed else None)
            when = near.get("time") if isinstance(near, dict) else None
            placed = [{**f, "time": when} if isinstance(f, dict) and "time" in f and when else f for f in self.facts]
            timed[at:at] = placed
            fact_index = at
        return [*timed, *self.own], fact_index

    def variant_case(self, vid: str, n: int, extra_words: int, depth: str | None) -> tuple[Case, int | None]:
        events, fact_index = self.events(n, extra_words, depth)
        case = dataclasses.replace(
            self.case,
            id=vid,
            vars={**self.case.vars, self.events_var: events},
            tags=tuple(dict.fromkeys([*self.case.tags, "stress"])),
        )
        return case, fact_index

    def tokens(self, n: int, extra_words: int, depth: str | None) -> tuple[int, Prompt, Case, int | None]:
        case, fact_index = self.variant_case(self.case.id, n, extra_words, depth)
        prompt = self.backend.apply_chat_template(render_messages(self.suite, case), self.tools)
        if prompt.token_ids is None:
            raise LeaderEvalError(
                f"stress needs the model's tokenizer to fit prompts to a length; backend {self.backend.model_id} "
                "has none (give the OpenAI-compatible backend gguf_path= or tokenizer=)"
            )
        return len(prompt.token_ids), prompt, case, fact_index

    def cum_estimate(self, n: int) -> float:
        """Estimated tokens of the first ``n`` filler lines: characters at the base prompt's rate.

        Backends need not expose a bare tokenizer; the fit below rescales this estimate by every
        real count, so only the full prompt's tokenization decides.
        """
        limit = self.stream.limit
        if limit is not None and n > limit:
            return math.inf  # the suite's pool has no more items
        filler = self.stream.take(n)
        while len(self._est) < n:
            e = filler[len(self._est)]
            size = len(f"[00:00] {_item_text(e)}\n") / self.chars_per_token
            self._est.append((self._est[-1] if self._est else 0.0) + size)
        return self._est[n - 1] if n else 0.0

    def _guess(self, start: int, budget: float) -> int:
        """Largest n >= start whose estimated filler beyond line ``start`` fits in ``budget`` tokens."""
        base = self.cum_estimate(start)
        n = start
        while self.cum_estimate(n + 1) - base <= budget:
            n += 1
        return n

    def fit(self, target: int, depth: str | None, vid: str) -> Variant:
        best = self.tokens(0, 0, depth)
        t0 = best[0]
        if not self._est:
            self.chars_per_token = max(1.0, len(best[1].text) / max(1, t0))
            # estimated filler lines at the sweep's longest length: the time stamps' scale, one
            # per sweep and case (a deterministic estimate, never a fitted count)
            self.capacity = max(1, self._guess(0, max(0, self.longest - t0)))
        if t0 > target:
            return Variant(self.case.id, vid, target, depth, t0, 0, best[3], 0, "shorter_than_case")
        # 1. How many whole filler lines fit. Per-line estimates, rescaled by every real count, guess
        #    from the largest count known to fit; the full tokenization decides (BPE and the chat
        #    template join lines, so only the whole prompt's count is exact).
        scale = 1.0
        lo_n, hi_n = 0, None
        limit = self.stream.limit  # the suite's own items: no more than the file holds
        # calibrate on a short prefix first: a full-length miss would cost a long tokenization
        n = min(32, self._guess(0, target - t0))
        for _ in range(60):
            got = self.tokens(n, 0, depth)
            if n > 0:
                scale = max(0.3, (got[0] - t0) / max(1.0, self.cum_estimate(n)))
            if got[0] <= target:
                if n >= lo_n:
                    lo_n, best = n, got
            else:
                hi_n = n if hi_n is None else min(hi_n, n)
            if best[0] == target or (hi_n is not None and hi_n <= lo_n + 1) or lo_n == limit:
                break
            g = max(lo_n + 1, self._guess(lo_n, (target - best[0]) / scale))
            if limit is not None:
                g = min(g, limit)
            if hi_n is not None and g >= hi_n:
                g = max(lo_n + 1, min(hi_n - 1, (lo_n + hi_n) // 2 if g - lo_n > 8 else g))
                g = min(g, hi_n - 1)
            n = g
        # 2. The last few tokens: lengthen the last filler line word by word (words of the lines
        #    that would come next), guessing from a measured tokens-per-word rate.
        words, hi_w, per_word = 0, None, 1.3
        for _ in range(40):
            if best[0] == target or lo_n == 0 or (hi_w is not None and hi_w <= words + 1):
                break
            g = words + max(1, int((target - best[0]) / per_word))
            if hi_w is not None and g >= hi_w:
                g = (words + hi_w) // 2
            got = self.tokens(lo_n, g, depth)
            if got[0] <= target:
                per_word = max(0.5, (got[0] - best[0]) / (g - words)) if got[0] > best[0] else per_word
                words, best = g, got
            else:
                hi_w = g
        if limit is not None and lo_n == limit and best[0] < target:
            raise LeaderEvalError(
                f"{self.suite.path}: stress.filler holds too few items for case {self.case.id!r} at {target:,} "
                f"tokens: all {limit} usable items make {best[0]:,} (add items or lower --tokens)"
            )
        short = target - best[0]
        if short > max(_MAX_SHORTFALL_TOKENS, target * _MAX_SHORTFALL_SHARE):
            # a point labelled 40,000 must be near 40,000: filler items that cannot be cut (a
            # suite's own, in a shape without a text to stretch) may be too long to fill the gap
            what = "stress.filler items" if limit is not None else "filler lines"
            raise LeaderEvalError(
                f"{self.suite.path}: stress: case {self.case.id!r} cannot be filled to {target:,} tokens: the "
                f"closest prompt is {best[0]:,} tokens ({what} are too long to fill the last {short:,}; "
                "use shorter items or other lengths)"
            )
        t, prompt, case, fi = best
        return self._variant(vid, target, depth, t, lo_n, words if lo_n else 0, case, prompt, fi)

    def _variant(
        self,
        vid: str,
        target: int,
        depth: str | None,
        t: int,
        n: int,
        words: int,
        case: Case,
        prompt: Prompt,
        fi: int | None,
    ) -> Variant:
        case = dataclasses.replace(case, id=vid)
        n_events = len(case.vars[self.events_var])
        v = Variant(self.case.id, vid, target, depth, t, n, fi, n_events, "ok", case, prompt)
        v.extra_words, v.capacity = words, self.capacity
        return v

    def replayed(self, recorded: Variant) -> Variant:
        """``recorded`` (a variant of a recorded sweep) rebuilt from its filler count, extra words and
        time-stamp scale, and its prompt found in the replayed run by its messages."""
        if recorded.status == "shorter_than_case":
            return dataclasses.replace(recorded, case=None, prompt=None)
        self.capacity = recorded.capacity
        case, fi = self.variant_case(self.case.id, recorded.n_filler, recorded.extra_words, recorded.depth)
        prompt = self.backend.apply_chat_template(render_messages(self.suite, case), self.tools)
        t = len(prompt.token_ids) if prompt.token_ids is not None else recorded.prompt_tokens
        return self._variant(
            recorded.variant_id, recorded.target, recorded.depth, t, recorded.n_filler, recorded.extra_words,
            case, prompt, fi,
        )  # fmt: skip


#: how far below its length a fitted prompt may stay (whole filler items, which a suite's own
#: file may not let the fit cut): the larger of these, else the length is refused
_MAX_SHORTFALL_TOKENS = 64
_MAX_SHORTFALL_SHARE = 0.05


def build_variants(
    suite: Suite,
    cases: Sequence[Case],
    backend: Any,
    steps: Sequence[int],
    *,
    depths: Sequence[str] = DEPTHS,
    seed: int = 0,
) -> list[Variant]:
    """Every (case, length[, depth]) variant, its prompt fitted to the length in the backend's tokens."""
    bad = [d for d in depths if d not in DEPTHS]
    if bad:
        raise LeaderEvalError(f"stress: unknown depth {bad[0]!r} (use {', '.join(DEPTHS)})")
    out: list[Variant] = []
    for case in cases:
        events_var = case.stress.get("events_var", "events")
        fact_var = case.stress.get("fact_var")
        if fact_var and fact_var not in case.vars:
            raise LeaderEvalError(f"{suite.path}:{case.line}: case {case.id!r}: stress.fact_var {fact_var!r} is no var")
        fitter = _Fitter(suite, case, backend, seed=seed, events_var=events_var, fact_var=fact_var, longest=max(steps))
        for length in steps:
            for depth in depths if fact_var else (None,):
                vid = f"{case.id}@{length}" + (f":{depth}" if depth else "")
                out.append(fitter.fit(length, depth, vid))
    return out


def _recorded_sweep(replay: Replayable) -> tuple[StressResult, int]:
    """The replayed run's sweep (its stress.json) and filler seed; a one-line error for a run that
    is not a sweep."""
    where = replay.run_path
    meta = replay.recorded().get("stress")
    if not isinstance(meta, dict) or not (Path(where) / STRESS_JSON).is_file():
        raise LeaderEvalError(f"{where}: not a stress sweep (no {STRESS_JSON}): replay a run of `leader-eval stress`")
    try:
        recorded = read_stress(where)
    except (KeyError, TypeError, ValueError) as exc:
        raise LeaderEvalError(f"{where}/{STRESS_JSON}: unreadable sweep record ({type(exc).__name__}: {exc})") from None
    seed = meta.get("filler_seed")
    return recorded, seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def replay_variants(
    suite: Suite,
    cases: Sequence[Case],
    backend: Any,
    steps: Sequence[int],
    recorded: StressResult,
    *,
    depths: Sequence[str] = DEPTHS,
    seed: int = 0,
) -> list[Variant]:
    """The variants of a recorded sweep for ``cases`` x ``steps`` x ``depths``, each prompt rebuilt
    from the filler layout the sweep recorded and matched with the recorded prompt (the replay
    backend's ``apply_chat_template`` refuses one the suite no longer renders)."""
    by_id = {v.variant_id: v for v in recorded.variants}
    where = getattr(backend, "run_path", "the replayed run")
    out: list[Variant] = []
    for case in cases:
        events_var = case.stress.get("events_var", "events")
        fact_var = case.stress.get("fact_var")
        fitter = _Fitter(
            suite, case, backend, seed=seed, events_var=events_var, fact_var=fact_var, longest=max(recorded.steps)
        )
        for length in steps:
            for depth in depths if fact_var else (None,):
                vid = f"{case.id}@{length}" + (f":{depth}" if depth else "")
                rec = by_id.get(vid)
                if rec is None:
                    swept = sorted({v.column for v in recorded.variants})
                    raise LeaderEvalError(
                        f"{where}: the recorded sweep has no {vid} (it swept {', '.join(swept[:6])} at "
                        f"{', '.join(map(str, recorded.steps))} tokens): replay with the sweep's own --cases, "
                        "--depths and --steps"
                    )
                if rec.status != "shorter_than_case" and rec.capacity == 0:
                    raise LeaderEvalError(
                        f"{where}: this sweep was recorded before sweeps could be replayed (its {STRESS_JSON} has "
                        "no filler layout): sample it again"
                    )
                # the layout sizes the filler rebuilt from it: a hostile record must not ask for a
                # billion lines (each line is at least one token of a length at most the largest sweep)
                for name in ("n_filler", "extra_words", "capacity"):
                    value = getattr(rec, name)
                    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_STRESS_TOKENS:
                        raise LeaderEvalError(
                            f"{where}/{STRESS_JSON}: {vid}: {name} {value!r} is not an integer in "
                            f"0..{MAX_STRESS_TOKENS:,}"
                        )
                out.append(fitter.replayed(rec))
    return out


# --- the run --------------------------------------------------------------------------------


@dataclass
class StressResult:
    suite: str
    model_id: str
    steps: list[int]
    variants: list[Variant]
    context_length: int | None
    max_tokens: dict[str, int]
    samples: int | None
    seed: int | None
    out: Path | None = None
    overall: dict[int, float | None] = field(default_factory=dict)
    first_failure: dict[str, int | None] = field(default_factory=dict)
    first_overflow: dict[str, int | None] = field(default_factory=dict)
    png: Path | None = None
    json_path: Path | None = None
    run: Any = field(default=None, repr=False)
    #: the suite's stress requirements judged on this sweep (``gate: stress:``; studies.stress_gate)
    requirements: list[StressVerdict] = field(default_factory=list)
    #: how the context was extended for the whole sweep ({"method", "from", "to", "auto"}), or None
    context_extension: dict[str, Any] | None = None
    #: per length: prompt tokens evaluated, prefill seconds and tokens/s, peak RSS (``prefill_cost``)
    cost: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: score and failure reasons against length per depth, with intervals (``studies.stress_curve``)
    curves: list[Curve] = field(default_factory=list)
    #: the model's training context, when the backend knows it (marked beside the context length)
    n_ctx_train: int | None = None

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(v.column for v in self.variants))

    def cell(self, column: str, step: int) -> Variant | None:
        return next((v for v in self.variants if v.column == column and v.target == step), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "model_id": self.model_id,
            "steps": self.steps,
            "context_length": self.context_length,
            "max_tokens": self.max_tokens,
            "samples": self.samples,
            "seed": self.seed,
            "run_dir": str(self.out) if self.out else None,
            "overall": {str(k): v for k, v in self.overall.items()},
            "first_failure": self.first_failure,
            "first_overflow": self.first_overflow,
            "context_extension": self.context_extension,
            "cost": {str(k): v for k, v in self.cost.items()},
            "n_ctx_train": self.n_ctx_train,
            "curves": [c.to_dict() for c in self.curves],
            "rule": f"first failure: smallest scored length with score < {FAIL_BELOW} or more than "
            f"{DROP_MARGIN} below the column's score at its shortest scored length",
            "variants": [v.to_dict() for v in self.variants],
            "requirements": [
                {
                    "at": r.at,
                    "metric": r.metric,
                    "kind": r.kind,
                    "limit": r.limit,
                    "estimate": r.estimate.to_dict() if r.estimate else None,
                    "verdict": r.verdict,
                    "explanation": r.explanation,
                }
                for r in self.requirements
            ],
        }


def read_stress(run_dir: str | Path) -> StressResult:
    """A stress result as recorded in a run directory's stress.json (to re-render table or plot)."""
    path = Path(run_dir)

    d = read_json_file(path / STRESS_JSON, STRESS_JSON)
    names = {f.name for f in dataclasses.fields(Variant)}
    variants = [Variant(**{k: v for k, v in rec.items() if k in names}) for rec in d["variants"]]
    return StressResult(
        suite=d["suite"],
        model_id=d["model_id"],
        steps=list(d["steps"]),
        variants=variants,
        context_length=d["context_length"],
        max_tokens=d["max_tokens"],
        samples=d["samples"],
        seed=d["seed"],
        out=path,
        overall={int(k): v for k, v in d["overall"].items()},
        first_failure=d["first_failure"],
        first_overflow=d["first_overflow"],
        context_extension=d.get("context_extension"),
        cost={int(k): v for k, v in (d.get("cost") or {}).items()},
        n_ctx_train=d.get("n_ctx_train"),
        # a stress.json written before curves were recorded: computed from its variants (weight 1)
        curves=[Curve.from_dict(c) for c in d["curves"]] if "curves" in d else curves(d["steps"], variants, {}),
        png=path / STRESS_PNG if (path / STRESS_PNG).is_file() else None,
        json_path=path / STRESS_JSON,
    )


def resolve_steps(tokens: int, steps: Sequence[int] | None) -> list[int]:
    """``--steps`` up to ``--tokens``, with ``--tokens`` itself always the last step.

    Every value must be a positive integer (a string, float, bool or NaN is refused, never
    coerced): a step silently dropped or rounded would change what the sweep measures."""
    if not _is_count(tokens):
        raise LeaderEvalError(f"stress: --tokens {tokens!r} must be an integer >= 1")
    if tokens > MAX_STRESS_TOKENS:
        # fitting filler to a length renders and tokenizes prompts of that size: an unbounded
        # length (a typo, a hostile suite's requirement) would run for hours before any error
        raise LeaderEvalError(f"stress: --tokens {tokens:,} is over the largest sweep length, {MAX_STRESS_TOKENS:,}")
    chosen = list(steps) if steps else list(DEFAULT_STEPS)
    bad = next((s for s in chosen if not _is_count(s)), None)
    if bad is not None:
        raise LeaderEvalError(f"stress: --steps value {bad!r} must be an integer >= 1")
    out = sorted({int(s) for s in chosen if int(s) <= tokens} | {int(tokens)})
    return out


def requirement_steps(spec: GateSpec) -> list[int]:
    """The lengths a suite's stress requirements need, and no more (the pytest plugin's sweep):
    every ``at``; and where a requirement bounds a drop, a shorter length to measure it from
    (the first default step below the shortest ``at``, else half of it)."""
    ats = sorted({r.at for r in spec.stress})
    if not ats:
        return []
    if any(r.max_drops for r in spec.stress):
        base = next((s for s in DEFAULT_STEPS if s < ats[0]), max(1, ats[0] // 2))
        ats = sorted({base, *ats})
    return ats


def extend_context(
    options: RunOptions, suite: Suite, cases: Sequence[Case], longest: int
) -> tuple[RunOptions, dict[str, Any] | None]:
    """Options that extend an in-process GGUF's context with YaRN for the whole sweep, when its
    longest prompt (+ max_tokens) would not fit the training context and ``--rope-scaling`` was
    not given: every point of the curve then comes from the same model. The context becomes the
    ``--context-length`` given, else the training context doubled until it fits. Other backends
    (servers, Tinker) cannot be extended from here: their overflow is reported as it is."""
    if not options.model.startswith(("local:", "gguf:")) or "rope_scaling" in options.backend_options:
        return options, None
    from leader_eval.sampling.backends.local import training_context

    train = training_context(options.model)
    max_tokens = options.max_tokens or max(int(suite.case_sampling(c)["max_tokens"]) for c in cases)
    need = longest + max_tokens
    if not train or need <= train:
        return options, None
    target = options.context_length
    if target is None or target <= train:
        target = train
        while target < need:
            target *= 2
    extended = dataclasses.replace(
        options, context_length=target, backend_options={**options.backend_options, "rope_scaling": "yarn"}
    )
    return extended, {"method": "yarn", "from": train, "to": target, "auto": True}


def prefill_cost(variants: Sequence[Variant], samples: Sequence[Any]) -> dict[int, dict[str, Any]]:
    """What each length cost the local backend: prompt tokens evaluated (the rest came from the KV
    cache: the samples of a variant, a shorter variant's prefix), prefill seconds and tokens/s,
    wall seconds, and the process's peak RSS after its last sample. Samples served from the
    sample cache carry their first run's figures; backends that report no prefill give none."""
    target = {v.variant_id: v.target for v in variants}
    out: dict[int, dict[str, Any]] = {}
    for s in samples:
        t = s.timings or {}
        length = target.get(s.case_id)
        if length is None or "prefill_s" not in t:
            continue
        c = out.setdefault(length, {"prompt_tokens_evaluated": 0, "prefill_s": 0.0, "total_s": 0.0, "peak_rss_mb": 0.0})
        c["prompt_tokens_evaluated"] += int(t.get("prefill_tokens", 0))
        c["prefill_s"] += float(t["prefill_s"])
        c["total_s"] += float(t.get("total_s", 0.0))
        c["peak_rss_mb"] = max(c["peak_rss_mb"], float(t.get("peak_rss_mb", 0.0)))
    for c in out.values():
        c["prefill_s"], c["total_s"] = round(c["prefill_s"], 2), round(c["total_s"], 2)
        c["prompt_tokens_per_s"] = round(c["prompt_tokens_evaluated"] / c["prefill_s"], 1) if c["prefill_s"] else None
    return dict(sorted(out.items()))


def _is_count(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1


def stress(
    suite_path: str | Path | Suite,
    *,
    options: RunOptions | None = None,
    model: str = "local:smollm2",
    tokens: int = 40000,
    steps: Sequence[int] | None = None,
    case_ids: Sequence[str] | None = None,
    samples: int | None = None,
    seed: int | None = None,
    out: str | Path | None = None,
    depths: Sequence[str] | None = None,
    context_length: int | None = None,
    backend: Any = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    filler_seed: int | None = None,
    label: str | None = None,
    progress: bool = True,
    plot: bool = True,
    cache: bool = True,
    strict: bool = False,
) -> StressResult:
    """Sweep the chosen cases over prompt lengths; write stress.json and stress.png in the run dir.

    ``options`` is ``leader-eval run``'s option table (model, backend and sampling options, as
    ``runs.options.run_options`` builds it from the CLI or the plugin); without it the keyword
    arguments build one. Its case selection (``tags``, ``case_ids``, ``limit``) is the sweep's
    own: ``case_ids`` here."""

    if options is None:
        options = RunOptions(
            model=model, samples=samples, seed=seed, out=Path(out) if out else None,
            context_length=context_length, max_tokens=max_tokens, temperature=temperature,
            progress=progress, label=label, cache=cache,
        )  # fmt: skip
    # every value checked before a model loads (the same rules as ``leader-eval run``)
    check_run_options(options)
    resolve_steps(tokens, steps)
    suite = suite_path if isinstance(suite_path, Suite) else load_suite(suite_path)
    if case_ids:
        cases = select_cases(suite, case_ids=list(case_ids))
    else:
        cases = [c for c in suite.cases if c.stress.get("enabled")]
        if not cases:
            raise LeaderEvalError(
                f"{suite.path}: no case has stress: {{enabled: true}}; name cases with --cases ID,..."
            )
    step_list = resolve_steps(tokens, steps)
    extension: dict[str, Any] | None = None
    if backend is None:
        if not options.model.startswith("replay:"):
            options, extension = extend_context(options, suite, cases, max(step_list))
        backend = resolve_backend(options.model, context_length=options.context_length, **options.backend_options)
    rope = getattr(backend, "rope", None)
    if rope and extension is None:  # asked for (--rope-scaling), or a caller's extended backend
        extension = {
            "method": "yarn",
            "from": rope["orig_ctx"],
            "to": rope["n_ctx"],
            "auto": "rope_scaling" not in options.backend_options,
        }
    seed = options.seed
    fseed = filler_seed if filler_seed is not None else (seed if seed is not None else 0)
    if (replay := replayable(backend)) is not None:
        # a recorded sweep judged again offline, its variants rebuilt without a tokenizer: the
        # cases, lengths and depths a fresh sweep with these arguments would judge (what the
        # recording lacks is an error, never a narrower verdict that reads as the suite's)
        recorded, fseed = _recorded_sweep(replay)
        extension = recorded.context_extension
        variants = replay_variants(
            suite, cases, backend, step_list, recorded, depths=tuple(depths or DEPTHS), seed=fseed
        )
    else:
        variants = build_variants(suite, cases, backend, step_list, depths=tuple(depths or DEPTHS), seed=fseed)
    runnable = [v for v in variants if v.status != "shorter_than_case"]
    if not runnable:
        raise LeaderEvalError("stress: every chosen case is already longer than every step")
    # The derived suite's hash covers the filler, so resuming into a run dir never mixes prompts.
    h = hashlib.sha256(f"{suite.content_hash}\0{filler_data().digest}\0{fseed}".encode()).hexdigest()[:16]
    derived = dataclasses.replace(
        suite, name=f"{suite.name}-stress", cases=tuple(v.case for v in runnable if v.case), content_hash=f"sha256:{h}"
    )
    options = dataclasses.replace(
        options,
        tags=(),
        case_ids=(),
        limit=None,
        extra_manifest={
            **options.extra_manifest,
            "stress": {"steps": step_list, "filler_seed": fseed, "filler_digest": filler_data().digest,
                       "source_suite": suite.name, "source_hash": suite.content_hash,
                       "context_extension": extension},
        },
    )  # fmt: skip
    context_length = options.context_length
    samples = options.samples
    result_run = run_suite(derived, options, backend=backend)
    # after sampling: a service's context (Tinker's capabilities) is probed with its first request
    ctx = resolve_context_length(context_length, suite, backend)
    by_id = {c["case_id"]: c for c in result_run.cases}
    for v in variants:
        c = by_id.get(v.variant_id)
        if c is None:
            continue
        v.score, v.n_scored, v.n_passed = c["score"], c["n_scored"], c["n_passed"]
        v.n_context_overflow, v.reasons = c["n_context_overflow"], dict(c["reasons"])
        v.strict_format_rate, v.tool_accuracy = c.get("strict_format_rate"), c.get("tool_accuracy")
        if c["n_context_overflow"] and not c["n_scored"]:
            v.status = "overflow"
        elif c["n_context_overflow"]:
            # one prompt, some samples scored and some refused as too long: a server that cannot
            # say whether it fits measured nothing here (its scored samples are not judged alone)
            v.status, v.score = "incomplete", None
    manifest_cases = result_run.manifest["identity"]["cases"]
    result = StressResult(
        context_extension=extension,
        suite=suite.name,
        model_id=backend.model_id,
        steps=step_list,
        variants=variants,
        context_length=ctx,
        max_tokens={k: v["params"]["max_tokens"] for k, v in manifest_cases.items()},
        samples=max((int(v["samples"]) for v in manifest_cases.values()), default=samples),
        seed=result_run.manifest["identity"]["run_seed"],
        out=result_run.path,
        run=result_run,
    )
    result.cost = prefill_cost(variants, result_run.samples)
    result.n_ctx_train = getattr(backend, "n_ctx_train", None)
    _summarize(result, {c.id: c.weight for c in cases})
    result.curves = curves(step_list, variants, {c.id: c.weight for c in cases})
    # the suite's requirements (gate: stress:), judged like the gate; strict: CI mode
    result.requirements = judge_stress(result, gate_spec(suite.gate), {c.id: c.weight for c in cases}, strict=strict)

    result.json_path = result_run.path / STRESS_JSON
    write_json_atomic(result.json_path, result.to_dict(), indent=2, sort_keys=False)
    if plot:
        result.png = write_plot(result, result_run.path / STRESS_PNG)
    write_lines_atomic(result_run.path / STRESS_TXT, [format_stress_table(result)])
    return result


def _summarize(result: StressResult, weights: dict[str, float]) -> None:
    for step in result.steps:
        cells = [v for v in result.variants if v.target == step and v.score is not None]
        w = sum(weights.get(v.case_id, 1.0) for v in cells)
        result.overall[step] = sum(weights.get(v.case_id, 1.0) * (v.score or 0.0) for v in cells) / w if w else None
    for col in result.columns:
        series = [(v.target, v) for v in result.variants if v.column == col]
        scored = [(s, v.score) for s, v in series if v.score is not None]
        result.first_failure[col] = first_failure(scored)
        result.first_overflow[col] = next((s for s, v in series if v.status == "overflow"), None)
    overall = [(s, v) for s, v in result.overall.items() if v is not None]
    result.first_failure["overall"] = first_failure(overall)
    overflowed = [s for s in result.steps if all(v.status == "overflow" for v in result.variants if v.target == s)]
    result.first_overflow["overall"] = overflowed[0] if overflowed else None


def first_failure(
    scored: Sequence[tuple[int, float]], *, fail_below: float = FAIL_BELOW, margin: float = DROP_MARGIN
) -> int | None:
    """Smallest length whose score is below ``fail_below`` or more than ``margin`` below the score at the
    shortest scored length (so a case that fails already at the shortest length fails there)."""
    if not scored:
        return None
    ordered = sorted(scored)
    ref = ordered[0][1]
    for length, score in ordered:
        if score < fail_below or score < ref - margin - 1e-9:
            return length
    return None


# --- output ---------------------------------------------------------------------------------


def _cell_text(v: Variant | None) -> str:
    if v is None:
        return "-"
    if v.status == "overflow":
        return "overflow"
    if v.status == "incomplete":
        return f"incomplete ({v.n_context_overflow} overflow)"
    if v.status == "shorter_than_case":
        return f"n/a ({v.prompt_tokens})"
    if v.score is None:
        return "error" if v.n_scored == 0 else "-"
    return f"{v.score:.2f} ({v.n_passed}/{v.n_scored})"


def _rate_text(v: Variant | None) -> str:
    if v is None or v.status == "shorter_than_case":
        return "-"
    if v.status == "overflow":
        return "overflow"
    return "-" if v.strict_format_rate is None else f"{v.strict_format_rate:.2f}"


def format_stress_table(result: StressResult) -> str:
    """Score per prompt length (rows) and case (columns), overall, then first-failure lengths."""
    cols = result.columns
    header = ["length", *cols, "overall"]
    rows: list[list[str]] = []
    for step in result.steps:
        cells = [result.cell(c, step) for c in cols]
        ov = result.overall.get(step)
        if ov is not None:
            overall = f"{ov:.2f}"
        else:
            overall = "overflow" if all(v is None or v.status == "overflow" for v in cells) else "-"
        rows.append([str(step), *[_cell_text(v) for v in cells], overall])

    def fmt(x: int | None) -> str:
        return "never" if x is None else str(x)

    for name, marks in (("first failure", result.first_failure), ("first overflow", result.first_overflow)):
        rows.append([name, *[fmt(marks.get(c)) for c in cols], fmt(marks.get("overall"))])
    n_main = len(rows)
    for step in result.steps:
        cells = [result.cell(c, step) for c in cols]
        rates = [v.strict_format_rate for v in cells if v is not None and v.strict_format_rate is not None]
        rows.append(
            [
                f"format@{step}",
                *[_rate_text(v) for v in cells],
                f"{sum(rates) / len(rates):.2f}" if rates else "-",
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"stress: suite {result.suite}, model {result.model_id}, context {result.context_length or 'unknown'} tokens"
        + (f" ({extension_text(result.context_extension)})" if result.context_extension else "")
        + ", "
        f"max_tokens {sorted(set(result.max_tokens.values()))}, run seed {result.seed}",
        _shape_text(result),
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    for i, r in enumerate(rows):
        if i in (len(result.steps), n_main):
            lines.append("  ".join("-" * w for w in widths))
        lines.append("  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths, strict=True))))
    lines.append(
        "format@L = strict tool-call format rate at length L (diagnostic: the whole output is one call); "
        + f"score = pass rate of the variant's samples; overflow = prompt + max_tokens > context (never sampled); "
        f"first failure = smallest length with score < {FAIL_BELOW} or > {DROP_MARGIN} below the shortest length's"
    )
    lines += curve_lines(result)
    lines += _cost_lines(result)
    if result.out:
        lines.append(f"run dir: {result.out}")
    return inert("\n".join(lines), multiline=True)  # a fragment from a suite, run or golden: one line, no escapes


def extension_text(ext: dict[str, Any] | None) -> str | None:
    """``context extended 8,192 -> 65,536 with YaRN`` (None when the context was not extended)."""
    if not ext:
        return None
    how = "" if ext.get("auto") else ", as --rope-scaling asked"
    return f"context extended {ext['from']:,} -> {ext['to']:,} with YaRN{how}"


def _shape_text(result: StressResult) -> str:
    """What was sampled, in cases and samples (a variant is a case at one length and depth)."""
    cases = len({v.case_id for v in result.variants})
    depths = sorted({v.depth for v in result.variants if v.depth})
    shown = [v for v in result.variants if v.status != "shorter_than_case"]
    sampled = sum(v.n_scored for v in result.variants)
    return (
        f"{cases} case(s) x {len(result.steps)} length(s)"
        + (f" x {len(depths)} depth(s) ({', '.join(depths)})" if depths else "")
        + f" = {len(shown)} variant(s); {result.samples} sample(s) per variant, {sampled} scored in all"
    )


def _limit_text(result: StressResult) -> str:
    ctx = result.context_length
    text = f"context {ctx:,} tokens" if ctx else "context unknown"
    train = result.n_ctx_train
    if ext := extension_text(result.context_extension):
        return f"{text} ({ext})"
    if train and ctx and train != ctx:
        return f"{text} (trained {train:,})"
    return text


def curve_lines(result: StressResult) -> list[str]:
    """The curves as rows: length, depth, score with its 95% interval, cases, samples, reasons."""
    if not result.curves:
        return []
    rows = [["length", "depth", "score", "95% CI", "cases", "samples", "failure reasons (share of samples)"]]
    for curve in result.curves:
        for p in curve.points:
            if p.score is None:
                note = "overflow" if p.n_overflow else "-"
                rows.append([str(p.length), curve.depth, note, "", str(p.n_cases), str(p.n_samples), ""])
                continue
            top = sorted(p.reasons.items(), key=lambda kv: -kv[1].value)[:3]
            reasons = ", ".join(f"{k} {e.value:.2f} [{e.low:.2f}, {e.high:.2f}]" for k, e in top)
            ci = f"[{p.score.low:.2f}, {p.score.high:.2f}]"
            rows.append(
                [str(p.length), curve.depth, f"{p.score.value:.2f}", ci, str(p.n_cases), str(p.n_samples), reasons]
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = [
        f"curve (95% intervals over cases as clusters; one case: Wilson over its samples; {_limit_text(result)}):",
    ]
    for r in rows:
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    drops = []
    for c in result.curves:
        if c.drop_base is None:
            drops.append(f"{c.depth}: nothing scored")
            continue
        if c.first_drop is None:
            best = min(c.drop_p.values(), default=1.0)
            drops.append(f"{c.depth}: none from {c.drop_base} (smallest Holm p {best:.2g})")
        else:
            drops.append(f"{c.depth}: {c.first_drop} (from {c.drop_base}, Holm p {c.drop_p[c.first_drop]:.2g})")
    out.append(
        "first credible drop (more failures than at the shortest length, paired by column, 5%): " + "; ".join(drops)
    )
    return out


def _cost_lines(result: StressResult) -> list[str]:
    if not result.cost:
        return []
    out = ["prefill per length (local backend; tokens evaluated exclude what the KV cache already held):"]
    for length, c in result.cost.items():
        rate = c.get("prompt_tokens_per_s")
        out.append(
            f"  {length}: {c['prompt_tokens_evaluated']} tokens evaluated in {c['prefill_s']:.1f} s"
            f" ({'-' if rate is None else f'{rate:.0f}'} tokens/s), {c['total_s']:.1f} s with generation,"
            f" peak RSS {c['peak_rss_mb']:.0f} MB"
        )
    return out


def write_plot(result: StressResult, path: Path) -> Path:
    """Score against prompt length per column and overall (matplotlib, Agg: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for i, col in enumerate(result.columns):
        pts = [(v.prompt_tokens, v.score) for v in result.variants if v.column == col and v.score is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", linewidth=1.2, alpha=0.8, color=f"C{i}",
                    label=f"{col} (score)")  # fmt: skip
    for i, col in enumerate(result.columns):
        pts = [(v.prompt_tokens, v.strict_format_rate) for v in result.variants
               if v.column == col and v.strict_format_rate is not None]  # fmt: skip
        if pts:
            ax.plot(*zip(*pts, strict=True), linestyle="--", linewidth=1, alpha=0.6, color=f"C{i}",
                    label=f"{col} (format rate)")  # fmt: skip
    curve = next((c for c in result.curves if c.depth == ALL_DEPTHS), None)
    band = [(p.length, p.score) for p in curve.points if p.score is not None] if curve else []
    if band:  # cases as clusters (studies.stress_curve), not the variants
        xs = [x for x, _ in band]
        ax.fill_between(xs, [e.low for _, e in band], [e.high for _, e in band], color="black", alpha=0.12,
                        label="overall 95% CI (cases as clusters)")  # fmt: skip
        ax.plot(xs, [e.value for _, e in band], color="black", linewidth=2.5, marker="s", label="overall")
        if curve and curve.first_drop is not None:
            at = next(e for x, e in band if x == curve.first_drop)
            ax.plot([curve.first_drop], [at.value], marker="v", color="darkred", markersize=11, linestyle="none",
                    label=f"first credible drop ({curve.first_drop})")  # fmt: skip
    over = [s for s in result.steps if all(v.status == "overflow" for v in result.variants if v.target == s)]
    for s in over:
        ax.plot([s], [0], marker="x", color="red", markersize=10, linestyle="none")
    if result.context_length:
        ax.axvline(result.context_length, color="red", linestyle="--", linewidth=1)
        ax.axvspan(result.context_length, max(result.steps) * 1.15, color="red", alpha=0.07)
        ax.text(result.context_length, 1.28, f" context {result.context_length}", color="red", fontsize=8)
    if result.n_ctx_train and result.n_ctx_train != result.context_length:
        # the model's own limit: past it the curve is the extended (YaRN) model's
        ax.axvline(result.n_ctx_train, color="darkorange", linestyle=":", linewidth=1.2)
        ax.text(result.n_ctx_train, 1.2, f" trained {result.n_ctx_train}", color="darkorange", fontsize=8)
    if min(result.steps) > 0 and max(result.steps) / min(result.steps) >= 8:
        ax.set_xscale("log")
        ax.set_xticks(result.steps)
        ax.set_xticklabels([f"{s // 1000}K" if s % 1000 == 0 else str(s) for s in result.steps])
    ax.set_ylim(-0.05, 1.35)  # headroom for the legend
    ax.set_xlabel("prompt length (model tokens); x = context overflow, not sampled")
    ax.set_ylabel("score (solid), strict format rate (dashed)")
    ext = extension_text(result.context_extension)
    ax.set_title(f"{result.suite} on {result.model_id}" + (f"\n{ext}" if ext else ""), fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # else matplotlib warns "No artists with labels"
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())  # like every run file: never through a symlink
    return path


__all__ = [
    "DEPTHS",
    "FillerStream",
    "StressResult",
    "Variant",
    "build_variants",
    "filler_violations",
    "first_failure",
    "format_stress_table",
    "protected_words",
    "read_stress",
    "stress",
    "write_plot",
]
