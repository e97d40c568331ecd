"""Score one sample: parse its tool calls, run every check, name the primary reason it failed.

Semantics (docs/scoring.md): a sample passes only if no check fails. The verdict never depends
on where in the text a problem sits or in which order parallel calls come: the primary reason is
the first failing check in ``CHECK_ORDER``, and a check that found several problems is named by
its reason of highest precedence (``LEAK_PRECEDENCE`` for leaks); the sample is a hard fail when
*any* failed check, finding or argument failure has a reason the case lists in ``hard_fail``.
Samples that were never scored by the model (sampler errors, context overflow) carry their
outcome and are counted apart, never as model failures.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any

from leader_eval.bounded.regex import RegexTimeout, compile_suite_regex
from leader_eval.checks.degeneration import (
    DegenerationConfig,
    check_degeneration,
    check_repetition,
    is_empty,
    repetition_passes,
)
from leader_eval.checks.leakage import CompiledLeakConfig, LeakConfig, compile_leak_config, find_leaks
from leader_eval.checks.toolcall import match_calls
from leader_eval.protocols import REGISTRY, ParseResult, parse_output
from leader_eval.scoring.python_check import PREFIX, checks_for, message_of, run_check
from leader_eval.suite.load import Case, Suite
from leader_eval.suite.render import template_variables, tools_json
from leader_eval.types import CheckContext, CheckResult, Finding, ModelInfo, Reason, Sample, ToolCall

#: checks in the order that decides a failing sample's primary reason
CHECK_ORDER = (
    "empty",
    "truncated",
    "repetition",
    "format",
    "tool_choice",
    "arguments_schema",
    "arguments",
    "leakage",
    "require",
    "restates_prompt",
)

#: which leak class names the leakage check when it found several (the most severe first: a
#: chat special token breaks the room's framing; tool markup is a failed action shown as chat)
LEAK_PRECEDENCE = (
    Reason.LEAK_SPECIAL_TOKEN,
    Reason.LEAK_TOOL_MARKUP,
    Reason.LEAK_REASONING,
    Reason.LEAK_PLACEHOLDER,
    Reason.LEAK_SCAFFOLD,
    Reason.LEAK_MARKER,
    Reason.FORBIDDEN_PATTERN,
)
_LEAK_RANK = {str(r): i for i, r in enumerate(LEAK_PRECEDENCE)}
_IN_CHECK_ORDER = frozenset(CHECK_ORDER)


def _leak_rank(reason: Reason | str) -> int:
    return _LEAK_RANK.get(str(reason), len(_LEAK_RANK))


#: reasoning blocks a chat template may declare (kept as a channel, not scored as a leak)
REASONING_TAGS = {"<think>": ("<think>", "</think>")}


@dataclass
class SampleScore:
    case_id: str
    index: int
    outcome: str
    passed: bool
    hard_fail: bool
    reason: str | None
    strict_format: bool
    lenient_format: bool
    tool_correct: bool
    leaked: bool
    partial_credit: float
    calls: list[dict[str, Any]] = field(default_factory=list)
    lenient_calls: list[dict[str, Any]] = field(default_factory=list)
    other_protocols: list[str] = field(default_factory=list)
    reasoning: str | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def scored(self) -> bool:
        return self.outcome == "ok"

    @property
    def failed_checks(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["passed"]]

    @property
    def failed_reasons(self) -> list[str]:
        """Every failed check's reason, in ``CHECK_ORDER`` (the first is ``reason``)."""
        return [str(c["reason"] or c["check"]) for c in self.checks if not c["passed"]]

    @property
    def leaks(self) -> list[dict[str, Any]]:
        """Every leak finding: reason, start, end, text, context, where (``text`` or a path into
        a call's arguments), in text order."""
        return [dict(f) for c in self.checks if c["check"] == "leakage" for f in c.get("findings", ())]

    @property
    def leak_classes(self) -> list[str]:
        """The distinct leak reasons found, in ``LEAK_PRECEDENCE`` order."""
        return sorted({f["reason"] for f in self.leaks}, key=_leak_rank)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)  # a shallow copy, in field order

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SampleScore:
        return cls(**d)


class SuiteScoring:
    """What every case of one suite shares, for one protocol and model: derived once, on first
    use, and read by each ``CaseScorer`` (a 2,000-case run built these 2,000 times). A part that
    fails to build is not cached: each case that reads it raises as it would alone."""

    def __init__(self, suite: Suite, protocol: str, model: ModelInfo) -> None:
        self.suite, self.protocol, self.model = suite, protocol, model
        self.eot_tokens = model.end_of_turn
        #: (the case's own forbid patterns, its scaffold texts) -> its leak config for the text
        self._leak_cfgs: dict[tuple[Any, ...], CompiledLeakConfig] = {}
        #: id of a text leak config -> (it, its config for call arguments)
        self._arg_leak_cfgs: dict[int, tuple[CompiledLeakConfig, CompiledLeakConfig]] = {}

    @cached_property
    def tools_json(self) -> str:
        return tools_json(self.suite)

    @cached_property
    def _leak_base(self) -> LeakConfig:
        """The suite's leak rules without a case's forbid patterns and scaffold texts."""
        leakage, render = self.suite.leakage, self.suite.render
        return LeakConfig(
            special_tokens=self.model.special_tokens,
            eot_tokens=self.eot_tokens,
            reasoning_tags=self.model.reasoning_tags,
            markers=tuple(leakage.get("markers", ("[NO CHAT]",))),
            allowed_markers=tuple(leakage.get("allowed_markers", ())),
            placeholder_patterns=tuple(render.get("placeholder_patterns", ())),
            placeholder_names=_variable_names(self.suite),
            allowed_placeholders=tuple(render.get("allowed_placeholders", ())),
            forbid=tuple(leakage.get("forbid", ())),
            tool_names=tuple(t.name for t in self.suite.tools),
            call_markup=registry_call_markup(),
            own_call_markup=_own_call_markup(self.protocol),
        )

    def leak_config(self, case: Case, scaffold_texts: tuple[str, ...]) -> CompiledLeakConfig:
        """The case's leak config for its visible text."""
        case_forbid = tuple(case.expect.get("forbid", ()))
        key = (case_forbid, scaffold_texts)
        hit = self._leak_cfgs.get(key)
        if hit is None:
            base = self._leak_base
            hit = self._leak_cfgs[key] = compile_leak_config(
                replace(base, forbid=(*base.forbid, *case_forbid), scaffold_texts=scaffold_texts)
            )
        return hit

    def arg_leak_config(self, leak_cfg: CompiledLeakConfig) -> CompiledLeakConfig:
        """``leak_cfg`` for its calls' arguments, where the end-of-turn token is never "at the end
        of the output". Compiled the first time a call's arguments are scanned: most outputs hold
        no call, and compiling the scanner costs ~30 ms (a run of plain-text outputs never pays)."""
        hit = self._arg_leak_cfgs.get(id(leak_cfg))
        if hit is None:
            # the declared reasoning pair stays: a block in an argument is a leak, as in the text
            # (``_leaks`` says the channel was already taken off)
            arg_cfg = compile_leak_config(replace(leak_cfg.config, eot_tokens=()))
            # keyed by identity (no hashing of the whole config per call): the value holds
            # leak_cfg, so its id is not reused while the entry lives
            hit = self._arg_leak_cfgs[id(leak_cfg)] = (leak_cfg, arg_cfg)
        return hit[1]

    @cached_property
    def degen_cfg(self) -> DegenerationConfig:
        rep = self.suite.checks.get("repetition", {})
        restate = self.suite.checks.get("restate", {})
        return DegenerationConfig(
            **{k: v for k, v in rep.items() if k in DegenerationConfig.__dataclass_fields__ and k != "eot_tokens"},
            **({"max_prompt_overlap": restate["max_prompt_overlap"]} if "max_prompt_overlap" in restate else {}),
            eot_tokens=self.eot_tokens,
        )

    @cached_property
    def tools(self) -> dict[str, Any]:
        return {t.name: t.parameters for t in self.suite.tools}

    @cached_property
    def message_args(self) -> frozenset[tuple[str, str]]:
        """(tool, argument) pairs that carry the output's message (``message_arguments``)."""
        return message_arguments(self.suite.cases, self.tools)

    @cached_property
    def validators(self) -> dict[str, Any] | None:
        # the suite's validators hold the $ref targets loaded with it, and never fetch
        schemas = getattr(self.suite, "tool_schemas", None)
        return {name: schemas.validator(name) for name in self.tools} if schemas is not None else None

    def case_scorer(self, case: Case, messages: Sequence[Mapping[str, Any]], prompt_text: str) -> CaseScorer:
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        scaffold = _scaffold_texts_cached(system, self.tools_json)
        return CaseScorer(self.suite, case, self.protocol, self.model, prompt_text, scaffold, self)


@dataclass
class CaseScorer:
    """Everything compiled once per case (regexes, leak tables, schemas), reused for its samples;
    what the whole suite shares comes from ``shared`` (built here when not given)."""

    suite: Suite
    case: Case
    protocol: str
    model: ModelInfo
    prompt_text: str
    scaffold_texts: tuple[str, ...]
    shared: SuiteScoring | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        shared = self.shared
        if shared is None or shared.suite is not self.suite or _other_model(shared.model, self.model):
            shared = self.shared = SuiteScoring(self.suite, self.protocol, self.model)
        self.eot_tokens = shared.eot_tokens
        self.leak_cfg = shared.leak_config(self.case, self.scaffold_texts)
        self.degen_cfg = shared.degen_cfg
        self.tools = shared.tools
        self.message_args = shared.message_args
        self.validators = shared.validators
        self.require = [compile_suite_regex(p) for p in self.case.expect.get("require", ())]
        self.goal = _goal_of(self.case)
        self.hard = set(self.case.hard_fail)
        expects_calls = bool(self.case.expect.get("calls") or self.case.expect.get("no_call"))
        #: the user's Python checks that run on this case (``scoring.python_check``), after the
        #: built-in ones: their records come after ``CHECK_ORDER``'s
        self.python_checks = checks_for(self.suite, self.case)
        # the case's checks, in the order each may read what the ones before it found
        self.checks: tuple[Check, ...] = (
            check_output_shape,
            check_format,
            *((check_calls,) if expects_calls else ()),
            check_leakage,
            *((check_require,) if self.require else ()),
            *((check_python,) if self.python_checks else ()),
        )

    def score(self, sample: Sample) -> SampleScore:
        if sample.outcome != "ok":
            return SampleScore(
                sample.case_id,
                sample.index,
                sample.outcome,
                False,
                False,
                str(Reason.CONTEXT_OVERFLOW if sample.outcome == "context_overflow" else Reason.SAMPLER_ERROR),
                False,
                False,
                False,
                False,
                0.0,
                checks=[CheckResult(sample.outcome, False, None, sample.error or "").to_dict()],
            )
        parsed = parse_output(
            sample.text,
            self.protocol,
            eot_tokens=self.eot_tokens,
            reasoning_tags=self.model.reasoning_tags,
            api_tool_calls=sample.api_tool_calls,
            tool_schemas=self.tools,
        )
        scoring = Scoring(sample, parsed)
        for check in self.checks:
            check(self, scoring)
        checks, findings = scoring.checks, scoring.findings
        ordered = [checks[name] for name in CHECK_ORDER if name in checks]
        if len(ordered) < len(checks):
            ordered += [c for name, c in checks.items() if name not in _IN_CHECK_ORDER]
        # each check's record, a failed one's ``hard`` decided by every reason it holds (the
        # record is what a CheckResult rebuilt with that ``hard`` would give, built directly)
        records = []
        failed: CheckResult | None = None
        hard = False
        for c in ordered:
            d = c.to_dict()
            if not c.passed:
                if failed is None:
                    failed = c
                # a user check's own hardness (hard: true, CheckVerdict.hard) stands; a built-in's
                # is the case's hard_fail list's
                d["hard"] = is_hard = (c.hard and c.check.startswith(PREFIX)) or _is_hard(c, self.hard)
                hard = hard or is_hard
            records.append(d)
        arg_check = checks.get("arguments")
        partial = float(arg_check.data.get("partial_credit", 1.0 if arg_check.passed else 0.0)) if arg_check else 0.0
        tool_check = checks.get("tool_choice")
        format_ok = checks["format"].passed
        return SampleScore(
            sample.case_id,
            sample.index,
            "ok",
            failed is None,
            hard,
            (str(failed.reason) if failed.reason else failed.check) if failed is not None else None,
            format_ok,
            bool(parsed.strict_ok or parsed.lenient_calls),
            bool(tool_check.passed) if tool_check else format_ok,
            bool(findings),
            partial,
            [_call_dict(c) for c in parsed.calls],
            [_call_dict(c) for c in parsed.lenient_calls],
            list(parsed.other_protocols),
            parsed.reasoning or sample.reasoning,
            records,
        )

    @cached_property
    def arg_leak_cfg(self) -> CompiledLeakConfig:
        assert self.shared is not None  # set by __post_init__
        return self.shared.arg_leak_config(self.leak_cfg)

    def _leaks(self, parsed: ParseResult) -> list[Finding]:
        found = find_leaks(
            parsed.visible_text, self.leak_cfg, where="text", reasoning_seen=parsed.reasoning is not None
        )
        for i, call in enumerate(parsed.calls):
            for path, text in _string_leaves(call.arguments, f"call[{i}].arguments"):
                found += find_leaks(text, self.arg_leak_cfg, where=path, reasoning_seen=True)
        return found


@dataclass
class Scoring:
    """One sample's scoring in progress: what the checks before a check found."""

    sample: Sample
    parsed: ParseResult
    checks: dict[str, CheckResult] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


#: One step of a case's scoring (``CaseScorer.checks``): it reads the sample, its parse and the
#: results of the checks before it, and records its own ``CheckResult``s in ``Scoring.checks``.
Check = Callable[[CaseScorer, Scoring], None]


def check_output_shape(scorer: CaseScorer, s: Scoring) -> None:
    """Empty, truncated, repetition, restates_prompt (checks.degeneration), judged on the raw text
    and then on what the parse shows: a reasoning block with nothing after it is empty; a call's
    repeated argument text is repetition."""
    sample, parsed, checks = s.sample, s.parsed, s.checks
    for c in check_degeneration(
        sample.text, stop_reason=sample.stop_reason, prompt_text=scorer.prompt_text, cfg=scorer.degen_cfg
    ):
        if c.check == "empty" and not c.passed and sample.api_tool_calls:
            # the usual chat-API answer: tool_calls with no content text is not an empty output
            c = CheckResult("empty", True, detail="no content text; the API returned tool_calls")
        checks[c.check] = c
    if (
        parsed.reasoning is not None
        and checks["empty"].passed
        and not parsed.calls
        and not sample.api_tool_calls
        and is_empty(parsed.visible_text, scorer.degen_cfg)
    ):
        # a declared reasoning block and nothing after it: the room sees nothing
        checks["empty"] = CheckResult("empty", False, Reason.EMPTY, "only a reasoning block", hard=True)
        for name in ("repetition", "restates_prompt"):
            checks[name] = CheckResult(name, True, detail="empty: not judged")
    if checks["empty"].passed and parsed.calls and scorer.message_args:
        # a call whose message is blank posts nothing: the room sees an empty output
        blank = _blank_message(parsed.calls, scorer.message_args)
        if blank is not None:
            checks["empty"] = CheckResult("empty", False, Reason.EMPTY, f"{blank} is empty", hard=True)
    if checks["repetition"].passed and checks["empty"].passed:
        checks["repetition"] = _argument_repetition(parsed, scorer.degen_cfg) or checks["repetition"]


def check_format(scorer: CaseScorer, s: Scoring) -> None:
    s.checks["format"] = _format_check(s.parsed, bool(scorer.case.expect.get("no_call")))


def check_calls(scorer: CaseScorer, s: Scoring) -> None:
    """tool_choice, arguments_schema, arguments (checks.toolcall), for a case that expects calls or none."""
    for c in match_calls(
        s.parsed.calls, scorer.case.expect, scorer.tools, goal=scorer.goal, validators=scorer.validators
    ):
        s.checks[c.check] = c


def check_leakage(scorer: CaseScorer, s: Scoring) -> None:
    """Leaks in the visible text and in every call argument (checks.leakage); a failed call attempt
    behind a leak is unparseable, not prose, and its own markup is not counted twice."""
    parsed, checks = s.parsed, s.checks
    findings = scorer._leaks(parsed)
    if checks["format"].reason == Reason.NO_CALL and _attempt_after_leaks(parsed, findings):
        # "<think>...</think>{'tool': ..." is a failed attempt behind a leak, not prose
        checks["format"] = CheckResult("format", False, Reason.UNPARSEABLE, parsed.error or "")
    if checks["format"].reason == Reason.UNPARSEABLE:
        findings = _without_failed_attempt(findings, parsed)
    checks["leakage"] = CheckResult(
        "leakage",
        not findings,
        min((f.reason for f in findings), key=_leak_rank) if findings else None,
        "; ".join(f"{f.reason}: {f.text!r} at {f.where}[{f.start}:{f.end}]" for f in findings[:5]),
        findings=tuple(findings),
    )
    s.findings = findings


def check_require(scorer: CaseScorer, s: Scoring) -> None:
    """The case's ``require`` patterns, over the visible text and the calls' string arguments."""
    parsed = s.parsed
    visible = parsed.visible_text + "\n" + "\n".join(_strings_of_calls(parsed.calls))
    missing: list[str] = []
    timed_out = ""
    for p in scorer.require:
        try:
            if not p.search(visible):
                missing.append(p.pattern)
        except RegexTimeout as exc:  # never a pass: counted as not matched
            missing.append(p.pattern)
            timed_out = timed_out or f" ({exc}: counted as not matched)"
    s.checks["require"] = CheckResult(
        "require",
        not missing,
        Reason.WRONG_VALUE if missing else None,
        f"visible text does not match {missing[0]!r}{timed_out}" if missing else "",
    )


def check_python(scorer: CaseScorer, s: Scoring) -> None:
    """The user's Python checks (``scoring.python_check``), each on the same context: the case,
    the strict parse's calls, the raw and visible text and the message the room reads."""
    parsed = s.parsed
    calls = tuple(parsed.calls)
    message = message_of(parsed.visible_text, calls, scorer.message_args, MESSAGE_NAMES)
    for bound in scorer.python_checks:
        ctx = CheckContext(
            scorer.case,
            scorer.case.id,
            s.sample.index,
            s.sample.text,
            parsed.visible_text,
            message,
            calls,
            parsed.protocol,
            bound.options,
        )
        result = run_check(bound, ctx)
        s.checks[result.check] = result


def _call_dict(call: ToolCall) -> dict[str, Any]:
    """``call.to_dict()`` without ``dataclasses.asdict``, whose generic deep copy (a deepcopy
    call per string) cost more than the rest of the glue put together."""
    return {
        "name": call.name,
        "arguments": _copy_json(call.arguments),
        "protocol": call.protocol,
        "span": list(call.span) if call.span else None,
        "raw": call.raw,
    }


def _is_hard(check: CheckResult, hard: set[str]) -> bool:
    """Is any reason a failed check holds (its own, its findings', its argument failures') one
    the case lists in ``hard_fail``? The first one found decides (no set of them is built)."""
    if not hard:
        return False
    if check.reason and str(check.reason) in hard:
        return True
    for f in check.findings:
        if str(f.reason) in hard:
            return True
    for f in check.data.get("failures", ()) if isinstance(check.data, dict) else ():
        if isinstance(f, dict) and f.get("reason") and str(f["reason"]) in hard:
            return True
    return False


_IMMUTABLE = (str, int, float, bool, type(None))


def _copy_json(value: Any) -> Any:
    """The copy ``asdict`` makes of a field value: containers rebuilt, anything else deep-copied."""
    if isinstance(value, _IMMUTABLE):
        return value
    if type(value) is dict:  # the usual arguments object: no generator, no call per string
        return {
            k if isinstance(k, _IMMUTABLE) else _copy_json(k): v if isinstance(v, _IMMUTABLE) else _copy_json(v)
            for k, v in value.items()
        }
    if isinstance(value, dict):
        return type(value)((_copy_json(k), _copy_json(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return type(value)(_copy_json(v) for v in value)
    return copy.deepcopy(value)


def _format_check(parsed: ParseResult, expect_no_call: bool) -> CheckResult:
    if parsed.strict_ok and (parsed.calls or expect_no_call):
        return CheckResult("format", True)
    if expect_no_call and not parsed.calls and not parsed.lenient_calls:
        return CheckResult("format", True)
    if parsed.strict_ok and not parsed.calls:
        return CheckResult("format", False, Reason.NO_CALL, "no tool call")
    if parsed.lenient_calls:
        return CheckResult(
            "format",
            False,
            Reason.UNPARSEABLE,
            f"a {parsed.protocol} call is present but the output is not exactly the protocol: {parsed.error or ''}".strip(),  # noqa: E501
        )
    if parsed.other_protocols:
        return CheckResult(
            "format",
            False,
            Reason.WRONG_PROTOCOL,
            f"expected {parsed.protocol}, found {', '.join(parsed.other_protocols)} tool-call syntax",
        )
    if parsed.error and _looks_like_attempt(parsed):
        return CheckResult("format", False, Reason.UNPARSEABLE, parsed.error)
    return CheckResult("format", False, Reason.NO_CALL, parsed.error or "no tool call")


def _looks_like_attempt(parsed: ParseResult) -> bool:
    """Did the model try to write the protocol in force (and break it), or write something else?

    ``{0:21}`` (a time stamp in braces, copied from the log's shape) is not an attempt at a JSON
    call; ``{}`` or ``{"tool": "x", "arguments": {...`` cut off is.
    """
    return REGISTRY[parsed.protocol].is_attempt(parsed.visible_text)


#: a role name after a turn header token: ``<|im_start|>assistant``, ``<start_of_turn>model``,
#: ``<|start|>assistant<|channel|>final``
_ROLE_AFTER_TOKEN = re.compile(
    r"[ \t]{0,3}(?i:assistant|model|user|system|developer|tool|ipython|final|analysis|commentary)\b"
)
_PREFIX_LEAKS = (Reason.LEAK_REASONING, Reason.LEAK_SPECIAL_TOKEN, Reason.LEAK_MARKER)
_STRAY_CLOSER = re.compile(r"(?:</|\[/|\u25c1/)\S{1,40}\Z")


def _attempt_after_leaks(parsed: ParseResult, findings: list[Finding]) -> bool:
    """Is the visible text an attempt at the protocol once its leading leaks are set aside: an
    undeclared reasoning block (or its body and stray closer, the opener having been in the
    prompt), special tokens, a marker, a role header (``<|im_start|>assistant``), with only
    whitespace between them? Those stay leaks of their own class; the call after them is
    the attempt (a format failure), not tool markup shown to the room."""
    visible, pos = parsed.visible_text, 0
    for f in findings:
        # a stray closer first (``...plan.\n</think>``): the template opened the block in the
        # prompt, so the text before it is the reasoning, not prose
        opened_in_prompt = pos == 0 and f.reason == Reason.LEAK_REASONING and _STRAY_CLOSER.match(f.text)
        if (
            f.where != "text"
            or f.reason not in _PREFIX_LEAKS
            or (visible[pos : f.start].strip() and not opened_in_prompt)
        ):
            break
        pos = f.end
        if f.reason == Reason.LEAK_SPECIAL_TOKEN and (m := _ROLE_AFTER_TOKEN.match(visible, pos)):
            pos = m.end()
    return pos > 0 and REGISTRY[parsed.protocol].is_attempt(visible[pos:])


def _without_failed_attempt(findings: list[Finding], parsed: ParseResult) -> list[Finding]:
    """Drop tool-markup "leaks" (and the format's own framing tokens) that are the failed call itself.

    When the whole output is a broken attempt at the protocol in force (cut-off JSON, extra keys,
    trailing text after the call), the failure is already named ``unparseable``; reporting the
    attempt's own markup again (its opening, closing and inner tokens, the JSON it carries) as
    ``leak_tool_markup`` would count one mistake twice, inflate the leak rate and shadow a more
    specific leak after it. Markup after leading prose (an envelope embedded in a chat message)
    or of another protocol's syntax stays a leak, and so does every other leak class.
    """
    if not (_looks_like_attempt(parsed) or _attempt_after_leaks(parsed, findings)):
        return findings
    protocol = REGISTRY[parsed.protocol]
    own_tokens = frozenset(protocol.tokens)
    return [
        f
        for f in findings
        if f.where != "text"
        or not (
            (f.reason == Reason.LEAK_TOOL_MARKUP and (protocol.owns(f.text) or f.text.lstrip().startswith(("{", "["))))
            # the format's own framing tokens, which a leak scan reads as special tokens
            or (f.reason == Reason.LEAK_SPECIAL_TOKEN and f.text.strip() in own_tokens)
        )
    ]


def _argument_repetition(parsed: ParseResult, cfg: DegenerationConfig) -> CheckResult | None:
    """The repetition check on each string argument of the calls (the strict ones, else the
    lenient ones: a loop in a failed attempt's message is still a loop): the first that loops,
    with its finding located at that argument. None when none does."""
    prefix = "call" if parsed.strict_ok else "lenient_call"
    for i, call in enumerate(parsed.lenient_calls):
        for path, text in _string_leaves(call.arguments, f"{prefix}[{i}].arguments"):
            if repetition_passes(text, cfg):  # a pass leaves no record: the verdict is enough
                continue
            c = check_repetition(text, cfg)
            if not c.passed:
                found = tuple(replace(f, where=path) for f in c.findings)
                return CheckResult(
                    "repetition", False, c.reason, f"{path}: {c.detail}", findings=found, data={**c.data, "where": path}
                )
    return None


#: the case constraints that judge an argument's content (``regex``, ``equals``, ``one_of`` judge
#: a value's form: such an argument follows its schema)
CONTENT_CONSTRAINTS = ("mentions_goal", "contains", "contains_any")


#: argument names that say they carry the message itself (beside a channel, a recipient, ...)
MESSAGE_NAMES = frozenset(("message", "msg", "content", "text", "body", "reply", "response", "answer"))


def message_arguments(cases: Sequence[Case], tools: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """The (tool, argument) pairs that carry an output's message: a required parameter of a tool
    that some case of the suite judges for content (``CONTENT_CONSTRAINTS``) and that is either
    the tool's only required parameter or named as a message (``MESSAGE_NAMES``: a
    ``send_message(channel, message)`` tool's ``message``), as ``send_message_to_chat.message``.
    A blank value there fails ``empty`` in every case of the suite, also in one that sets no
    constraint on it. Other arguments (``assign_task.task``, one of two required and named as a
    task; ``pause.reason``, optional) follow their schema."""
    out: set[tuple[str, str]] = set()
    for case in cases:
        for call in case.expect.get("calls") or ():
            if not isinstance(call, Mapping):
                continue
            schema = tools.get(str(call.get("tool")))
            required = schema.get("required") if isinstance(schema, Mapping) else None
            for arg, constraint in (call.get("args") or {}).items():
                judged = isinstance(constraint, Mapping) and any(k in constraint for k in CONTENT_CONSTRAINTS)
                if (
                    judged
                    and isinstance(required, list)
                    and arg in required
                    and (required == [arg] or str(arg).lower() in MESSAGE_NAMES)
                ):
                    out.add((str(call.get("tool")), str(arg)))
    return frozenset(out)


# an argument is not the end of the output: an end-of-turn token in it is a leak, not emptiness
_NO_END_TOKENS = DegenerationConfig(eot_tokens=())


def _blank_message(calls: Sequence[ToolCall], message_args: frozenset[tuple[str, str]]) -> str | None:
    """Where the first call's message argument is a string with nothing visible in it (empty,
    blanks, zero-width characters: the ``empty`` check's rule), or None."""
    for i, call in enumerate(calls):
        if not isinstance(call.arguments, Mapping):
            continue
        for tool, arg in message_args:
            value = call.arguments.get(arg) if tool == call.name else None
            if isinstance(value, str) and is_empty(value, _NO_END_TOKENS):
                return f"call[{i}].arguments.{arg}"
    return None


def _goal_of(case: Case) -> str | None:
    for key in ("current_goal", "goal"):
        v = case.vars.get(key)
        if isinstance(v, str) and v.strip():
            return v
    return None


def _string_leaves(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _string_leaves(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _string_leaves(v, f"{path}[{i}]")


def _strings_of_calls(calls: Sequence[ToolCall]) -> list[str]:
    return [t for c in calls for _, t in _string_leaves(c.arguments, "")]


def _other_model(a: ModelInfo, b: ModelInfo) -> bool:
    return a is not b and a != b


@lru_cache(maxsize=1)
def registry_call_markup() -> tuple[str, ...]:
    """Every registered protocol's call markup (how an attempt opens and closes): the leak
    detector finds it in any model's output, whichever protocol is in force, so a protocol added
    to the registry counts there without a list to keep. Inner pieces (``functions.x:0`` between
    Kimi's tokens, a call's argument keys) are judged as the tokens around them."""
    pieces = (piece for p in REGISTRY.values() for piece in (p.opening, *p.closing) if piece)
    return tuple(dict.fromkeys(pieces))


@lru_cache(maxsize=64)
def _own_call_markup(protocol: str) -> tuple[str, ...]:
    """The protocol in force's own markup pieces: a token the model declares that is one of them
    (Mistral's ``[TOOL_CALLS]``) stays tool markup."""
    p = REGISTRY.get(protocol)
    return tuple(piece for piece in (p.opening, *p.closing, *p.inner) if piece) if p is not None else ()


@lru_cache(maxsize=64)
def _scaffold_texts_cached(system: str, tools: str) -> tuple[str, ...]:
    return tuple(t for t in (system, tools) if t)


def _variable_names(suite: Suite) -> tuple[str, ...]:
    """The suite's template variables (a ``[current_goal]`` in an output is an unfilled slot)."""
    try:
        return tuple(sorted(template_variables(suite) - {"tools", "tools_json", "case_id"}))
    except Exception:  # a suite that does not render has no variables to report
        return ()


def case_scorer(
    suite: Suite,
    case: Case,
    protocol: str,
    model: ModelInfo,
    messages: Sequence[Mapping[str, Any]],
    prompt_text: str,
    shared: SuiteScoring | None = None,
) -> CaseScorer:
    """The case's scorer; pass one ``SuiteScoring`` of the suite to every case of a run."""
    if shared is None or shared.suite is not suite or shared.protocol != protocol or _other_model(shared.model, model):
        shared = SuiteScoring(suite, protocol, model)
    return shared.case_scorer(case, messages, prompt_text)


def score_samples(
    suite: Suite,
    samples: Sequence[Sample],
    prompts: Mapping[str, Mapping[str, Any]],
    protocol: str,
    model: ModelInfo,
) -> list[SampleScore]:
    """Score every sample of a run (the ``score`` pipeline stage)."""
    by_id = {c.id: c for c in suite.cases}
    scorers: dict[str, CaseScorer] = {}
    shared: SuiteScoring | None = None
    out = []
    for s in sorted(samples, key=lambda s: (s.case_id, s.index)):
        case = by_id.get(s.case_id)
        if case is None:
            continue
        if s.case_id not in scorers:
            p = prompts.get(s.case_id, {})
            shared = shared or SuiteScoring(suite, protocol, model)
            scorers[s.case_id] = shared.case_scorer(case, p.get("messages", []), p.get("text", ""))
        out.append(scorers[s.case_id].score(s))
    return out
