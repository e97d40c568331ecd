"""Tool-call correctness: the right tools, schema-valid arguments, the expected argument values.

``match_calls`` returns three checks, each passed or failed with one primary ``Reason``:

- ``tool_choice``: the right tools were called, no call missing, no call extra (count rule).
- ``arguments_schema``: every call's arguments validate against its tool's JSON Schema
  (Draft 2020-12, format checking on).
- ``arguments``: every expected argument meets its case constraint; ``data["partial_credit"]``
  is the fraction of expected arguments met under the optimal pairing of calls.

Expected and actual calls are paired by an exact maximum-weight assignment (not greedily), so the
order of parallel calls never matters and a call is never "used up" by a worse partner.
docs/protocols.md documents the constraint semantics and the reasons.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from leader_eval.bounded.json_schema import is_bound, validator_for
from leader_eval.bounded.regex import RegexTimeout, SuiteRegex, compile_suite_regex
from leader_eval.bounded.validity import Predicate, compile_validity
from leader_eval.types import CheckResult, Reason, ToolCall

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

# jsonschema (a heavy import) is imported where arguments meet a schema: a suite whose outputs
# carry no call to a tool with a schema never loads it

_VALIDATORS: dict[Any, Draft202012Validator] = {}
_FAST: dict[int, tuple[Draft202012Validator, Predicate | None]] = {}
_REGEXES: dict[str, SuiteRegex | None] = {}
_GOAL_WORDS: dict[str, tuple[re.Pattern[str], ...]] = {}

# --------------------------------------------------------------------------- caches


@functools.cache
def _jsonschema_api() -> tuple[Callable[..., Any], type[Exception]]:
    """(``best_match``, ``Unresolvable``), imported once, where arguments first meet a schema."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    return best_match, Unresolvable


def _validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A compiled validator per schema. Keyed by identity first (suites hand the same dict every
    time), falling back to the canonical JSON text for schemas rebuilt per call."""
    v = _VALIDATORS.get(id(schema))
    if v is not None and v.schema is schema:
        return v
    if is_bound(schema):
        # a suite's schema: its file refs are that suite's files, so never share it by its text
        if len(_VALIDATORS) > 4096:
            _VALIDATORS.clear()
        v = _VALIDATORS[id(schema)] = validator_for(schema)
        return v
    try:
        key: Any = json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError):
        key = id(schema)
    v = _VALIDATORS.get(key)
    if v is None:
        v = validator_for(schema)  # never fetches a $ref; a suite's file refs resolve to what lint loaded
        if len(_VALIDATORS) > 4096:  # a long-lived process scoring many suites
            _VALIDATORS.clear()
        _VALIDATORS[key] = v
    _VALIDATORS[id(schema)] = v
    return v


def _fast_valid(validator: Draft202012Validator, arguments: Any) -> bool:
    """True only if ``validator`` finds no error in ``arguments``, decided without jsonschema
    for the schemas ``fast_validity`` handles (~1 us instead of ~10 us); False: ask jsonschema."""
    known = _FAST.get(id(validator))
    if known is None or known[0] is not validator:
        from jsonschema import Draft202012Validator

        pred: Predicate | None = None
        if validator.TYPE_CHECKER is Draft202012Validator.TYPE_CHECKER:  # the types it copies
            try:
                pred = compile_validity(validator.schema)
            except RecursionError:  # a self-referencing schema object: jsonschema decides
                pred = None
        if len(_FAST) > 4096:
            _FAST.clear()
        known = _FAST[id(validator)] = (validator, pred)
    try:
        return known[1] is not None and known[1](arguments)
    except RecursionError:
        return False


def _regex(pattern: str) -> SuiteRegex | None:
    if pattern not in _REGEXES:
        try:
            _REGEXES[pattern] = compile_suite_regex(pattern)
        except re.error:
            _REGEXES[pattern] = None
    return _REGEXES[pattern]


# --------------------------------------------------------------------------- value comparison

_WS_RUN = re.compile(r"\s+")
# BFCL's standardize_string (bfcl_eval/eval_checker/ast_eval/ast_checker.py): drop the space
# character and , . / - _ * ^, lower-case, and write single quotes as double quotes
_BFCL_DROP = re.compile(r"[ ,./\-_*^]")

#: ``normalize`` values: False (exact), True (fold case and whitespace), "bfcl" (BFCL's rule)
Normalize = bool | str


def _norm(s: str, mode: Normalize = True) -> str:
    if mode == "bfcl":
        return _BFCL_DROP.sub("", s).lower().replace("'", '"')
    return _WS_RUN.sub(" ", s).strip().casefold()


def _integer_only(schema: Any) -> bool:
    """Does the schema ask for an integer (and not any number)?"""
    if not isinstance(schema, Mapping):
        return False
    t = schema.get("type")
    if t == "integer":
        return True
    return isinstance(t, list) and "integer" in t and "number" not in t


def _sub_schema(schema: Any, key: str | int) -> Any:
    # ``type(x) is dict or``: the usual case without the ABC check (~0.1 us each, per argument)
    if not (type(schema) is dict or isinstance(schema, Mapping)):
        return None
    if isinstance(key, int):
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and key < len(prefix):
            return prefix[key]
        return schema.get("items")
    props = schema.get("properties")
    return props.get(key) if type(props) is dict or isinstance(props, Mapping) else None


# A mismatch: (kind "type"|"value", path suffix, expected, got).
_Mismatch = tuple[str, str, Any, Any]


def _compare(expected: Any, got: Any, schema: Any, normalize: Normalize, path: str = "") -> _Mismatch | None:
    """Structural equality with BFCL's coercions: an int is accepted where a float is expected
    (1 == 1.0); a float is a wrong type where the tool's schema asks for an integer (even 2.0);
    a bool is never a number; tuples are lists; strings compare case- and
    whitespace-insensitively when ``normalize`` is true, after BFCL's string standardisation
    when it is "bfcl" (at any depth)."""
    if isinstance(expected, bool) or expected is None:
        if type(got) is not type(expected):
            return ("type", path, expected, got)
        return None if got is expected else ("value", path, expected, got)
    if isinstance(expected, int | float):
        if isinstance(got, bool) or not isinstance(got, int | float):
            return ("type", path, expected, got)
        if isinstance(got, float) and _integer_only(schema):
            return ("type", path, expected, got)
        return None if got == expected else ("value", path, expected, got)
    if isinstance(expected, str):
        if not isinstance(got, str):
            return ("type", path, expected, got)
        if got == expected or (normalize and _norm(got, normalize) == _norm(expected, normalize)):
            return None
        return ("value", path, expected, got)
    if isinstance(expected, list | tuple):
        if not isinstance(got, list | tuple):
            return ("type", path, expected, got)
        if len(got) != len(expected):
            return ("value", path, expected, got)
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            m = _compare(e, g, _sub_schema(schema, i), normalize, f"{path}[{i}]")
            if m:
                return m
        return None
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return ("type", path, expected, got)
        if set(got) != set(expected):
            return ("value", path, expected, got)
        for k, e in expected.items():
            m = _compare(e, got[k], _sub_schema(schema, k), normalize, f"{path}.{k}")
            if m:
                return m
        return None
    return None if got == expected else ("value", path, expected, got)


# --------------------------------------------------------------------------- goal mentions

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    (  # noqa: SIM905 (a word list reads better as text)
        "a an the and or but if then else of to in on at by for with from into onto over under about as "
        "is are was were be been being this that these those it its our your their my his her we you "
        "they he she i me us them not no do does did done have has had will would can could should "
        "shall may might must all any some each every so than too very just also up down out off "
        "new current goal"
    ).split()
)


# A plural/-ed/-ing ending at the end of a word of at least three more characters.
_SUFFIX = re.compile(r"(?<=[^\W_]{3})(?:ing|ed|es|s)\b")


def _stems(text: str) -> list[str]:
    """Lower-cased words with their suffix stripped, in one regex pass (hot path)."""
    return _WORD.findall(_SUFFIX.sub("", text.casefold()))


def _goal_words(goal: str) -> tuple[re.Pattern[str], ...]:
    """One finder per distinct content stem of the goal (see ``_stem_finder``)."""
    finders = _GOAL_WORDS.get(goal)
    if finders is None:
        all_words = [w.casefold() for w in _WORD.findall(goal)]
        content = " ".join(w for w in all_words if len(w) >= 3 and w not in _STOPWORDS) or " ".join(all_words)
        finders = tuple(_stem_finder(w) for w in dict.fromkeys(_stems(content)))
        if len(_GOAL_WORDS) > 4096:
            _GOAL_WORDS.clear()
        _GOAL_WORDS[goal] = finders
    return finders


def _stem_finder(stem: str) -> re.Pattern[str]:
    r"""A regex that finds, in casefolded text, a word whose stem (``_stems``) is ``stem``.

    Stemming the whole text cost ~200 us per 2 KB (a regex pass with a lookbehind at every
    position, then a word split); this searches for the stem's literal text instead, which the
    regex engine does in C. The match rules are those of ``_stems``: a word is a maximal run of
    ``[^\W_]``; its suffix is stripped only when the run ends where ``\b`` holds (the next
    character is not ``\w``: a run followed by ``_`` keeps its suffix). So a word stems to
    ``stem`` if it is ``stem`` followed by ``_``, or ``stem + x`` (x one of "", ing, ed, es, s)
    followed by a non-word character or the end, where stripping ``stem + x`` gives ``stem``
    (decided here once with the same suffix regex). tests/checks/test_toolcall.py compares this
    with stemming the whole text."""
    tails = [x for x in ("ing", "ed", "es", "s", "") if _SUFFIX.sub("", stem + x) == stem]
    s = re.escape(stem)
    ends = f"(?:{'|'.join(re.escape(x) for x in tails)})(?!\\w)|(?=_)" if tails else "(?=_)"
    # the literal first lets the engine skip to candidates; the lookbehind then asks that the
    # run starts there
    return re.compile(rf"{s}(?<![^\W_]{s})(?:{ends})")


def mentions_goal(text: str, goal: str) -> bool:
    """At least 60% (rounded up) of the goal's distinct content words appear in ``text``,
    compared case-insensitively after stripping a plural/-ed/-ing suffix. Content words are
    words of three or more letters outside a short stop list."""
    finders = _goal_words(goal)
    if not finders:
        return False
    need = math.ceil(0.6 * len(finders))
    folded = text.casefold()
    hits = 0
    for i, finder in enumerate(finders):
        if finder.search(folded):
            hits += 1
            if hits >= need:
                return True
        elif hits + len(finders) - i - 1 < need:
            return False
    return False


# --------------------------------------------------------------------------- constraints


class ArgFailure:
    """Why one expected argument failed: the reason, where, what was expected, what was got."""

    __slots__ = ("expected", "got", "path", "reason")

    def __init__(self, reason: Reason, path: str, expected: Any, got: Any) -> None:
        self.reason = reason
        self.path = path
        self.expected = expected
        self.got = got

    def to_dict(self) -> dict[str, Any]:
        return {"reason": str(self.reason), "path": self.path, "expected": self.expected, "got": self.got}


_MISSING = object()


def check_arg(constraint: Any, value: Any, schema: Any, path: str, goal: str | None) -> ArgFailure | None:
    """Why one expected argument fails its case constraint, or None when it holds; ``value`` is
    ``_MISSING`` when the call omitted it. The scorer's one rule for a constraint (the suite's
    load-time check of unsatisfiable expectations judges with it too)."""
    if not (type(constraint) is dict or isinstance(constraint, Mapping)):
        constraint = {"equals": constraint}
    if value is _MISSING:
        if constraint.get("optional") or constraint.get("present") is False:
            return None
        return ArgFailure(Reason.MISSING_ARG, path, _describe(constraint), None)
    if constraint.get("present") is False:
        return ArgFailure(Reason.UNEXPECTED_ARG, path, "absent", value)
    normalize: Normalize = (
        constraint.get("normalize") if constraint.get("normalize") == "bfcl" else bool(constraint.get("normalize"))
    )
    if "equals" in constraint:
        m = _compare(constraint["equals"], value, schema, normalize, path)
        if m:
            kind, p, e, g = m
            return ArgFailure(Reason.WRONG_TYPE if kind == "type" else Reason.WRONG_VALUE, p, e, g)
    if "one_of" in constraint:
        options = constraint["one_of"] or []
        results = [_compare(o, value, schema, normalize, path) for o in options]
        if all(results):
            # A type error only if the value has the type of no option (at the top level).
            kind = "type" if all(r is not None and r[0] == "type" and r[1] == path for r in results) else "value"
            return ArgFailure(
                Reason.WRONG_TYPE if kind == "type" else Reason.WRONG_VALUE, path, {"one_of": options}, value
            )
    for key, op in (("min", "min"), ("max", "max")):
        if key in constraint:
            bound = constraint[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                return ArgFailure(Reason.WRONG_TYPE, path, {key: bound}, value)
            if (op == "min" and value < bound) or (op == "max" and value > bound):
                return ArgFailure(Reason.WRONG_VALUE, path, {key: bound}, value)
    if "regex" in constraint:
        if not isinstance(value, str):
            return ArgFailure(Reason.WRONG_TYPE, path, {"regex": constraint["regex"]}, value)
        rx = _regex(constraint["regex"])
        try:
            found = rx is not None and rx.search(value) is not None
        except RegexTimeout:  # never a pass: a pattern that ran out of time did not match
            return ArgFailure(Reason.WRONG_VALUE, path, {"regex": constraint["regex"], "timed_out": True}, value)
        if not found:
            return ArgFailure(Reason.WRONG_VALUE, path, {"regex": constraint["regex"]}, value)
    if "contains" in constraint:
        needles = constraint["contains"]
        needles = [needles] if isinstance(needles, str) else list(needles)
        f = _contains(needles, value, path, all, "contains", constraint["contains"], normalize)
        if f:
            return f
    if "contains_any" in constraint:
        f = _contains(list(constraint["contains_any"]), value, path, any, "contains_any", None, normalize)
        if f:
            return f
    if "mentions_goal" in constraint:
        want = bool(constraint["mentions_goal"])
        if not isinstance(value, str):
            return ArgFailure(Reason.WRONG_TYPE, path, {"mentions_goal": want}, value)
        if goal is None or not goal.strip():
            return ArgFailure(Reason.WRONG_VALUE, path, {"mentions_goal": want, "goal": None}, value)
        if mentions_goal(value, goal) != want:
            return ArgFailure(Reason.WRONG_VALUE, path, {"mentions_goal": want, "goal": goal}, value)
    return None


def _contains(
    needles: list[str], value: Any, path: str, quantifier: Any, key: str, shown: Any, normalize: Normalize
) -> ArgFailure | None:
    """Strings: case-insensitive substring. Arrays: a needle must equal an element
    (case-insensitively)."""
    expected = {key: shown if shown is not None else needles}
    if isinstance(value, str):
        hay = _norm(value, normalize) if normalize else value.casefold()
        ok = quantifier((_norm(n, normalize) if normalize else n.casefold()) in hay for n in needles)
    elif isinstance(value, list | tuple):
        items = {(_norm(v, normalize) if normalize else v.casefold()) for v in value if isinstance(v, str)}
        ok = quantifier((_norm(n, normalize) if normalize else n.casefold()) in items for n in needles)
    else:
        return ArgFailure(Reason.WRONG_TYPE, path, expected, value)
    return None if ok else ArgFailure(Reason.WRONG_VALUE, path, expected, value)


def _describe(constraint: Mapping[str, Any]) -> Any:
    if set(constraint) == {"equals"}:
        return constraint["equals"]
    return dict(constraint)


# --------------------------------------------------------------------------- one pair

#: which argument failure names a check when there are several: missing, then type, then
#: value, then unexpected (the order a reader fixes them in), then other schema violations.
#: Chosen by reason, never by the position of a call, so parallel calls may come in any order.
ARG_PRECEDENCE = (
    Reason.MISSING_ARG,
    Reason.WRONG_TYPE,
    Reason.WRONG_VALUE,
    Reason.UNEXPECTED_ARG,
    Reason.SCHEMA_VIOLATION,
)
_ARG_RANK = {r: i for i, r in enumerate(ARG_PRECEDENCE)}


def _rank(f: ArgFailure) -> int:
    return _ARG_RANK.get(f.reason, len(_ARG_RANK))


class _Pair:
    """An expected call scored against an actual call."""

    __slots__ = ("failures", "matched", "name_ok", "units")

    def __init__(self, name_ok: bool, matched: int, units: int, failures: list[ArgFailure]) -> None:
        self.name_ok = name_ok
        self.matched = matched  # expected-argument units met
        self.units = units
        self.failures = failures

    @property
    def full(self) -> bool:
        return self.name_ok and not self.failures


def _score_pair(
    exp: Mapping[str, Any],
    call: ToolCall,
    call_index: int,
    tools: Mapping[str, Mapping[str, Any]],
    goal: str | None,
) -> _Pair:
    constraints: Mapping[str, Any] = exp.get("args") or {}
    units = max(len(constraints), 1)
    if call.name != exp.get("tool"):
        return _Pair(False, 0, units, [])
    schema = tools.get(call.name)
    args = call.arguments if type(call.arguments) is dict or isinstance(call.arguments, Mapping) else {}
    base = f"calls[{call_index}].arguments"
    failures: list[ArgFailure] = []
    matched = 0
    for arg, constraint in constraints.items():
        f = check_arg(constraint, args.get(arg, _MISSING), _sub_schema(schema, arg), f"{base}.{arg}", goal)
        if f is None:
            matched += 1
        else:
            failures.append(f)
    # An expected call without `args` constrains only the tool: any schema-valid arguments pass.
    # With `args`, unlisted arguments are unexpected unless allowed (BFCL's strictness).
    if not exp.get("allow_extra_args", "args" not in exp):
        for arg in args:
            if arg not in constraints:
                failures.append(ArgFailure(Reason.UNEXPECTED_ARG, f"{base}.{arg}", "absent", args[arg]))
    if not constraints:
        matched = 1 if not failures else 0
    failures.sort(key=_rank)
    return _Pair(True, matched, units, failures)


# --------------------------------------------------------------------------- assignment


def _assign(weights: list[list[float]]) -> list[tuple[int, int]]:
    """Maximum-weight assignment of rows to distinct columns (weights >= 0; every row is paired
    when there are at least as many columns). Exact.

    Up to 8 on the smaller side: enumerate permutations (8! = 40,320 at worst, but real cases
    have 1-3 calls, where this is a handful of sums and keeps ties in a predictable order).
    Beyond that: the Hungarian algorithm, O(n^3). scipy is not a dependency for one function.
    """
    n_rows = len(weights)
    n_cols = len(weights[0]) if n_rows else 0
    if n_rows == 0 or n_cols == 0:
        return []
    if n_rows == 1 and n_cols == 1:  # the usual case: the one permutation (weights are >= 0)
        return [(0, 0)]
    transposed = n_rows > n_cols
    w = [list(col) for col in zip(*weights, strict=True)] if transposed else weights
    r, c = len(w), len(w[0])
    if r <= 8 and math.perm(c, r) <= 40_320:
        best: tuple[int, ...] = ()
        best_score = -1.0
        for cols in itertools.permutations(range(c), r):
            score = sum(w[i][j] for i, j in enumerate(cols))
            if score > best_score + 1e-9:
                best_score, best = score, cols
        pairs = list(enumerate(best))
    else:
        pairs = _hungarian(w)
    return [(j, i) for i, j in pairs] if transposed else pairs


def _hungarian(w: list[list[float]]) -> list[tuple[int, int]]:
    """Rows <= columns. Maximise by minimising the negated weights (potentials method)."""
    r, c = len(w), len(w[0])
    inf = float("inf")
    u = [0.0] * (r + 1)
    v = [0.0] * (c + 1)
    p = [0] * (c + 1)  # p[j]: row matched to column j (1-based), 0 = none
    way = [0] * (c + 1)
    for i in range(1, r + 1):
        p[0] = i
        j0 = 0
        minv = [inf] * (c + 1)
        used = [False] * (c + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = p[j0], inf, 0
            for j in range(1, c + 1):
                if not used[j]:
                    cur = -w[i0 - 1][j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(c + 1):
                if used[j]:
                    u[p[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    return sorted((p[j] - 1, j - 1) for j in range(1, c + 1) if p[j])


# --------------------------------------------------------------------------- the checks


def _result(check: str, failure: ArgFailure | None, detail: str, data: dict[str, Any]) -> CheckResult:
    if failure is None:
        return CheckResult(check, True, None, detail, data=data)
    data = {"path": failure.path, "expected": failure.expected, "got": failure.got, **data}
    return CheckResult(check, False, failure.reason, detail, data=data)


def _schema_check(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Mapping[str, Any]],
    validators: Mapping[str, Draft202012Validator] | None = None,
) -> CheckResult:
    failures: list[ArgFailure] = []
    for i, call in enumerate(calls):
        schema = tools.get(call.name)
        if schema is None:
            continue  # an unknown tool is tool_choice's finding
        best_match, unresolvable = _jsonschema_api()
        validator = validators[call.name] if validators and call.name in validators else _validator(schema)
        try:
            if _fast_valid(validator, call.arguments):
                continue
            # no error: best_match gives None (so no separate is_valid walk before it)
            err = best_match(validator.iter_errors(call.arguments))
        except RecursionError:
            failures.append(
                ArgFailure(Reason.SCHEMA_VIOLATION, f"calls[{i}].arguments", "shallower arguments", "too deep")
            )
            continue
        except unresolvable as exc:  # only a schema handed in directly: a suite's refs are checked at load
            why = f"the tool schema's $ref {getattr(exc, 'ref', '')!r} is not resolvable (nothing is fetched)"
            failures.append(
                ArgFailure(Reason.SCHEMA_VIOLATION, f"calls[{i}].arguments", {"schema": "$ref", "message": why}, None)
            )
            continue
        if err is None:
            continue
        path = f"calls[{i}].arguments" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        reason = Reason.SCHEMA_VIOLATION
        got: Any = err.instance
        if err.validator == "required":
            reason = Reason.MISSING_ARG
            missing = next((r for r in err.validator_value if r not in err.instance), None)
            if missing is not None:
                path, got = f"{path}.{missing}", None
        elif err.validator in ("additionalProperties", "unevaluatedProperties"):
            reason = Reason.UNEXPECTED_ARG
        elif err.validator == "type":
            reason = Reason.WRONG_TYPE
        expected = {"schema": {err.validator: _short(err.validator_value)}, "message": err.message[:300]}
        failures.append(ArgFailure(reason, path, expected, _short(got)))
    if not failures:
        return CheckResult("arguments_schema", True, None, f"{len(calls)} call(s) valid", data={})
    first = min(failures, key=_rank)
    return _result(
        "arguments_schema",
        first,
        f"{first.path}: {first.expected['message'] if isinstance(first.expected, dict) else first.expected}",
        {"failures": [f.to_dict() for f in failures]},
    )


def _short(value: Any) -> Any:
    """Keep reports small: long strings and big containers are cut."""
    if isinstance(value, str) and len(value) > 300:
        return value[:300] + "..."
    if isinstance(value, list | dict):
        try:
            text = json.dumps(value, default=str)
        except (TypeError, ValueError, RecursionError):
            return repr(value)[:300]
        if len(text) > 300:
            return text[:300] + "..."
    return value


def match_calls(
    calls: Sequence[ToolCall],
    expect: Mapping[str, Any],
    tools: Mapping[str, Mapping[str, Any]],
    *,
    goal: str | None = None,
    validators: Mapping[str, Draft202012Validator] | None = None,
) -> list[CheckResult]:
    """Score ``calls`` against a case's ``expect``; ``tools`` maps tool name -> its parameters
    JSON Schema. Returns the checks tool_choice, arguments_schema, arguments (in that order).

    ``validators`` (tool name -> validator) are used where given: a suite's, whose ``$ref``
    targets were loaded with the suite. Otherwise each schema is compiled once with a registry
    that refuses every reference it does not hold: nothing is ever fetched."""
    calls = list(calls)
    expected: list[Mapping[str, Any]] = list(expect.get("calls") or [])
    count_rule = expect.get("count", "exact")
    schema_result = _schema_check(calls, tools, validators)

    if not expect.get("no_call") and not expected:
        # The case says nothing about calls (it may only check the text): nothing to fail here.
        return [
            CheckResult("tool_choice", True, None, "the case sets no call expectation", data={}),
            schema_result,
            CheckResult("arguments", True, None, "no arguments expected", data={"partial_credit": 1.0}),
        ]
    if expect.get("no_call"):
        if not calls:
            return [
                CheckResult("tool_choice", True, None, "no call, as expected", data={}),
                schema_result,
                CheckResult("arguments", True, None, "no arguments expected", data={"partial_credit": 1.0}),
            ]
        first = ArgFailure(Reason.EXTRA_CALL, "calls[0]", "no call", calls[0].name)
        return [
            _result("tool_choice", first, f"expected no tool call, got {len(calls)}: {calls[0].name}", {}),
            schema_result,
            CheckResult("arguments", True, None, "no arguments expected", data={"partial_credit": 0.0}),
        ]

    if not calls:
        names = [e.get("tool") for e in expected]
        f = ArgFailure(Reason.NO_CALL, "calls", names, [])
        return [
            _result("tool_choice", f, f"expected {', '.join(map(str, names))}, got no tool call", {}),
            schema_result,
            _result("arguments", f, "no call to check", {"partial_credit": 0.0}),
        ]

    pairs = [[_score_pair(e, c, j, tools, goal) for j, c in enumerate(calls)] for e in expected]
    n_expected, n_calls = len(expected), len(calls)
    # Lexicographic objective in one number: fully correct pairs first, then right tool names,
    # then the fraction of arguments met. k+1 and k*(k+2)+1 keep the tiers from overlapping.
    k = min(n_expected, n_calls)
    tier_name = k + 1
    tier_full = k * tier_name + k + 1
    weights = [
        [
            (tier_full if p.full else 0) + (tier_name if p.name_ok else 0) + (p.matched / p.units if p.name_ok else 0.0)
            for p in row
        ]
        for row in pairs
    ]
    assignment = _assign(weights)
    by_expected = dict(assignment)
    # (expected, call, its pair) for each assigned pair, in assignment order
    assigned = [(i, j, pairs[i][j]) for i, j in assignment]

    # tool_choice: a wrong tool, else a missing call, else an extra call (the first of each)
    choice_fail: ArgFailure | None = None
    wrong = [(i, j) for i, j, pair in assigned if not pair.name_ok]
    unmatched = len(by_expected) < n_expected
    if wrong:
        i, j = wrong[0]
        choice_fail = ArgFailure(Reason.WRONG_TOOL, f"calls[{j}].name", expected[i].get("tool"), calls[j].name)
    elif unmatched:
        i = next(i for i in range(n_expected) if i not in by_expected)
        choice_fail = ArgFailure(Reason.MISSING_CALL, f"expect.calls[{i}]", expected[i].get("tool"), None)
    elif len(assignment) < n_calls and count_rule == "exact":
        used = set(by_expected.values())
        j = next(j for j in range(n_calls) if j not in used)
        choice_fail = ArgFailure(Reason.EXTRA_CALL, f"calls[{j}]", None, calls[j].name)
    pairing = [{"expected": i, "call": j} for i, j in assignment]
    if choice_fail is None:
        detail = f"{n_calls} call(s), {n_expected} expected"
    else:
        detail = f"{choice_fail.reason}: expected {choice_fail.expected!r}, got {choice_fail.got!r}"
    choice = _result("tool_choice", choice_fail, detail, {"pairing": pairing})

    # arguments: the failures of each expected call paired with a call of its tool, in the
    # order of the expected calls
    units = sum(max(len(e.get("args") or {}), 1) for e in expected)
    named = [(i, pair) for i, _, pair in assigned if pair.name_ok]
    if len(named) > 1:
        named.sort(key=lambda item: item[0])
    matched = sum(pair.matched for _, pair in named)
    credit = matched / units if units else 1.0
    arg_failures: list[ArgFailure] = [f for _, pair in named for f in pair.failures]
    first_arg: ArgFailure | None = min(arg_failures, key=_rank) if arg_failures else None
    if first_arg is None and (wrong or unmatched):
        first_arg = choice_fail  # the expected arguments were never given
    data: dict[str, Any] = {"partial_credit": credit}
    if arg_failures:
        data["failures"] = [f.to_dict() for f in arg_failures]
    if first_arg is None:
        detail = f"{matched}/{units} expected argument(s) met"
    else:
        shown = (_short(first_arg.expected), _short(first_arg.got))
        detail = f"{first_arg.reason} at {first_arg.path}: expected {shown[0]!r}, got {shown[1]!r}"
    return [choice, schema_result, _result("arguments", first_arg, detail, data)]
