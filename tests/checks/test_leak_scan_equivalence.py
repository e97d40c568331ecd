"""The leak detector's fast scans find exactly what a plain regex scan finds.

``find_leaks`` runs its combined scanner and its tool-call-as-text pattern only where a match can
start (a candidate first character; a tool name before "("), to avoid a regex pass over every
position. A candidate missed there would be a leak missed: these compare both with
``finditer`` on generated text full of markup fragments, bounds included.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.checks import leakage
from leader_eval.checks.leakage import LeakConfig, _scan, _tool_call_matches, compile_leak_config, find_leaks

_ATOMS = [
    *("<", "[", "{", "\u25c1", "}", "]", ">", "|", "(", ")", "=", "==", ".", " ", "\t", "\n", "`", "a", "x_y"),
    *("<|im_end|>", "<think>", "</think>", "[NO CHAT]", "{{ goal }}", "<GOAL>", "[INSERT X]", "[TODO: y]"),
    *('{"name": "pause", "arguments": {}}', "[send_message_to_chat(message=", "<tool_call>", "```\n", "{%"),
    *("pause", "assign_task", "send_message_to_chat", "pause (", "pause(x=1)", "a.pause(", "\u00e9", "NOCHAT"),
    *("pause   ()", "x_y \t\t(k=", "ab  (", "pause    (", "  ", "assign_task \t (agent="),
    # slots in other scripts and brackets, fillers, format slots (issue 22)
    *("\uff3b", "\uff3d", "\u3010", "\u3011", "\u300c", "\u300d", "\u3007", "\u25cb", "\u00d7", "\uff3f", "$", "%"),
    *("< goal >", "<  current_goal>", "{ room }", "[\tgoal ]", "< y", "<\t\tx", "go", "cu"),
    *("\u4f1a\u793e\u540d", "\u0418\u043c\u044f", "Your", "(Your Name)", "{0}", "%(x)s", "$GOAL", "${a}", "\u69d8"),
]
_CONFIGS = [
    compile_leak_config(LeakConfig(tool_names=("pause", "assign_task", "send_message_to_chat"))),
    compile_leak_config(
        LeakConfig(
            special_tokens=("<pad>", "\u2581x", "NOCHAT"),
            markers=("ZZ", "[brb:"),
            reasoning_tags=("<r>", "</r>"),
            tool_names=("a", "ab", "x_y"),
        )
    ),
    # a suite's variable names: padded slots (< goal >), whose guards test the blanks and a letter
    compile_leak_config(LeakConfig(placeholder_names=("goal", "current_goal", "room"))),
]

_texts = st.lists(st.sampled_from(_ATOMS), max_size=60).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=_texts, cut=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_fast_scans_find_what_finditer_finds(text: str, cut: tuple[float, float]) -> None:
    lo, hi = sorted(int(c * len(text)) for c in cut)
    for lo_, hi_ in ((0, len(text)), (lo, hi)):
        for cfg in _CONFIGS:
            want = [(m.start(), m.end(), m.lastgroup) for m in cfg.scanner.finditer(text, lo_, hi_)]
            assert [(m.start(), m.end(), m.lastgroup) for m in _scan(cfg, text, lo_, hi_)] == want
            if cfg.tool_call_text is not None:
                want = [(m.start(), m.end()) for m in cfg.tool_call_text.finditer(text, lo_, hi_)]
                assert [(m.start(), m.end()) for m in _tool_call_matches(cfg, text, lo_, hi_)] == want


# --- the guarded scanner (leads) and the scan on after a spent budget ----------------------------

_BRACKET_ATOMS = [
    *("[", "]", "<", ">", "{", "}", "(", ")", " ", "  ", "\t", "\n", "/", "|", "_", "-", "'", ":", "=", "1", "`"),
    *("A", "x", "X_Y", "a_b", "GOAL", "Team Name", "Your Name", "THINK", "INST", "gMASK", "TOOL_CALLS", "CALL_ID"),
    *("\u017f", "\u212a", "\u0131", "\uff5c", "\u25c1", "\u00e9", "AGENT-NAME", "UP-TO", "agent_name", "agentName"),
    *("current goal", "TODO:", "INSERT ", "FILL IN", "FILL\nIN", "YOUR NAME", "<<SYS>>", "SYS>>", "think", "Think"),
    *("tool_call", "function=", "invoke name=", "parameter=", "|im_end|", "{{", "}}", "%", "#", '"name":', "'tool':"),
    *("f(x=", "pause(", "send_message_to_chat(message=", "eos", "/s", "placeholder", "events", "team", "Name of the"),
    *("\u00a0", "NO CHAT", "brb:", "SYSTEM", "insert goal here", "describe", "id", "scratchpad", "seed:think"),
    *("A" * 40, "_" + "B" * 40, "-" + "C" * 40, "cratchpad", "x" * 100, " \t ", "\n\n"),
    *("[a_b]", "[X]", "[x]", "[ A ]", "[AB-NAME]", "[ GOAL ]", "[Your Name]", "[x](y)", "[team]", "{goal}", "<Name>"),
    # issue 22: other brackets and scripts, fillers, format slots
    *("\uff3b", "\uff3d", "\u3010", "\u3011", "\u3014", "\u3015", "\u300c", "\u300d", "\u3000", "\u2019", "$", "%"),
    *("\u3007", "\u25cb", "\u25cf", "\u00d7", "\uff3f", "\u4e8c", "\u540d\u524d", "\u0418\u043c\u044f", "\uc774\ub984"),
    *(
        "Your",
        "Ihr",
        "(Your Name)",
        "(Ihr Name)",
        "{0}",
        "{12}",
        "%s",
        "%(x)s",
        "%1$s",
        "$GOAL",
        "${a}",
        "$A_B",
        "OWNER",
    ),
    # the suite names' shapes in every case and spelling, and kebab slot nouns (the narrow leads)
    *("AGENT_NAME", "Agent Name", "CURRENT-GOAL", "CurrentGoal", "agentname", "\u212aIT", "KIT", "Kit", "ROOM"),
    *("sigma_s", "SIGMA_S", "\u017figma_s", "Sigma-S", "A-B", "GOAL-HERE", "NAME-HERE", "START-DATE", "X-NAME-HERE"),
    *("[A-B]", "[NAME-HERE]", "[X-NAME-HERE]", "[TODO: x]", "[YOUR NAME]", "[INSERT-NAME]", "[FILL IN]", "[A_B]"),
]
_GUARD_CONFIGS = [
    *_CONFIGS,
    compile_leak_config(
        LeakConfig(
            special_tokens=("<|im_end|>", "<|endoftext|>", "<|im_start|>", "<0x0A>", "[EOS]", "{{eos}}"),
            eot_tokens=("<|im_end|>",),
            markers=("[NO CHAT]", "[brb:", "[SYSTEM]", "<<done>>", "{!}"),
            placeholder_names=("current_goal", "agent_name", "team", "events", "room", "_x_y"),
            reasoning_tags=("<think>", "</think>"),
            tool_names=("pause", "send_message_to_chat"),
        )
    ),
    # names that all open with two ASCII letters: their shapes get the two-letter narrow lead
    compile_leak_config(
        LeakConfig(
            special_tokens=("<|im_end|>", "<|im_start|>"),
            placeholder_names=("current_goal", "agent_name", "team", "events", "room", "kit", "Sigma_s"),
        )
    ),
]
_bracket_texts = st.lists(st.sampled_from(_BRACKET_ATOMS), max_size=40).map("".join)


def _reference_scanner(
    entries: tuple[tuple[str, str, str], ...], drop: frozenset[str] = frozenset()
) -> re.Pattern[str]:
    """The entries (but those of the ``drop`` kinds) as one plain alternation, one named group each:
    no grouping by first character, no guards."""
    return re.compile(
        "|".join(
            f"(?P<{kind}_{i}>{re.escape(first)}(?:{rest}))"
            for i, (kind, first, rest) in enumerate(entries)
            if kind not in drop
        )
    )


_DROPS = [frozenset({"slot"}), frozenset({"json"}), frozenset({"slot", "json"})]


@settings(max_examples=1500, deadline=None)
@given(text=_bracket_texts, cut=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_guarded_scanner_finds_what_a_plain_alternation_finds(text: str, cut: tuple[float, float]) -> None:
    lo, hi = sorted(int(c * len(text)) for c in cut)
    for cfg in _GUARD_CONFIGS:
        plain = _reference_scanner(cfg.entries)
        for lo_, hi_ in ((0, len(text)), (lo, hi)):
            want = [(m.start(), m.end(), m.lastgroup) for m in plain.finditer(text, lo_, hi_)]
            assert [(m.start(), m.end(), m.lastgroup) for m in cfg.scanner.finditer(text, lo_, hi_)] == want
            assert [(m.start(), m.end(), m.lastgroup) for m in _scan(cfg, text, lo_, hi_)] == want
        for drop in _DROPS:  # the scanners without slots or JSON keys (narrow leads after "[")
            variant = leakage._without(cfg, drop)
            if variant is not None:
                want = [(m.start(), m.end(), m.lastgroup) for m in _reference_scanner(cfg.entries, drop).finditer(text)]
                assert [(m.start(), m.end(), m.lastgroup) for m in variant[0].finditer(text)] == want


@settings(max_examples=1500, deadline=None)
@given(text=_bracket_texts)
def test_every_entry_match_satisfies_its_lead(text: str) -> None:
    """A lead is a necessary condition: wherever an entry matches, its lead matches after the first
    character (a lead that refused a real match would hide a leak)."""
    cfg = _GUARD_CONFIGS[-1]
    for (kind, first, rest), *leads in zip(cfg.entries, cfg.leads, cfg.narrow_leads, strict=True):
        entry = re.compile(re.escape(first) + f"(?:{rest})")
        for lead in filter(None, leads):
            guard = re.compile(lead)
            for start in range(len(text)):
                m = entry.match(text, start)
                if m is not None:
                    assert guard.match(text, start + 1) is not None, (kind, rest, lead, text[start:])


_LONGEST = "A" + "B" * 40 + ("_" + "C" * 40) * 8  # upper snake case at its bounds: 369 characters
_EDGES = [
    "<\u017fcratchpad>",  # case-insensitive tags: "\u017f" is "s" to the regex engine
    "</\u017feed:think >",
    f"[{_LONGEST}]",
    f"[ \t {_LONGEST} \t ]",
    f"<{_LONGEST}>",
    "-".join(["[A" + "B" * 40] * 8 + ["NAME]"]),
    "[FILL\nIN the blanks]",
    "[TODO: " + "x" * 199 + "]",
    "[INSERT " + "y" * 199 + "]",
    "<INSERT " + "y" * 199 + ">",
    "<tool_call " + "z" * 200 + ">",
    "<function=" + "f" * 200 + ">",
    "<parameter  name=" + "p" * 200 + ">",
    "<invoke   name=" + "i" * 200,
    "[" + " \n\t  " + "send_message_to_chat" * 5 + "( \t message =",
    "{" + " " * 20 + '"arguments" :',
    "{{" + "g" * 200 + "}}",
    "{%" + "g" * 200 + "%}",
    "<|" + "t" * 64 + "|>",
    "<\uff5c" + "t" * 64 + "\uff5c>",
    "[/TOOL_CALLS][INST][/INST][gMASK][THINK][/THINK][CALL_ID](x)",
    "<<SYS>> <</SYS>> <<done>> {!} [EOS] <0x0A> {{eos}}",
    "[   Current-Goal   ] [AGENT NAME] {_x_y} [_x_y] <agentName> {Agent Name} <insert goal here>",
    "[a_b] [x_y_z] [AB-CD-NAME] [ GOAL ] [\tAGENT_NAME ] [agent_name] [events] [team]",
    "{%{ goal }%} {#{#} {{{x}}} <<<SYS>> [[NO CHAT]] {'name': 1} { \"tool\" :",  # the opener second
    # issue 22: each new shape at its longest
    "\uff3b" + "\u540d" * 60 + "\uff3d \u3010   " + "\u540d" * 60 + "\u3011",
    "\u300c" + "\u540d" * 40 + "\u300d \u300e" + "a" * 40 + "\u300f",
    "(Your" + " x" * 28 + ") (   YOUR" + "-y" * 28 + ")",
    "\u3007" * 40 + " " + "\u25cb" * 40 + " " + "\u00d7" * 40 + " " + "\uff3f" * 40,
    "${" + "a" * 41 + "} $" + _LONGEST + " %(" + "b" * 41 + ")s %9$d {99}",
]


@pytest.mark.parametrize("text", _EDGES)
def test_guarded_scanner_at_the_bounds_of_each_shape(text: str) -> None:
    """Shapes at their longest, padded most, case-folded, spread over lines: the guards (bounded
    reach, first characters) must let every one through."""
    for cfg in _GUARD_CONFIGS:
        want = [(m.start(), m.end(), m.lastgroup) for m in _reference_scanner(cfg.entries).finditer(text)]
        assert want or cfg is not _GUARD_CONFIGS[-1]
        assert [(m.start(), m.end(), m.lastgroup) for m in cfg.scanner.finditer(text)] == want
        for drop in _DROPS:
            variant = leakage._without(cfg, drop)
            if variant is not None:
                want = [(m.start(), m.end(), m.lastgroup) for m in _reference_scanner(cfg.entries, drop).finditer(text)]
                assert [(m.start(), m.end(), m.lastgroup) for m in variant[0].finditer(text)] == want


@pytest.mark.parametrize("text", _EDGES)
def test_every_entry_match_at_the_bounds_satisfies_its_lead(text: str) -> None:
    test_every_entry_match_satisfies_its_lead.hypothesis.inner_test(text)  # type: ignore[attr-defined]


def test_every_built_in_bracketed_entry_has_a_lead() -> None:
    """The guard only works when every entry of a first character has a lead; a new built-in
    shape without one would silently make its group unguarded (slow, not wrong)."""
    cfg = _GUARD_CONFIGS[-1]
    assert all(lead is not None for (_, first, _), lead in zip(cfg.entries, cfg.leads, strict=True) if first in "[<{")
    assert "(?=" in cfg.scanner.pattern.split("(?:(?:")[0]


_SPENT = [
    "[X] y\n" * 5000 + "[GOAL] <think> x\n" + "[Team Name] Scout\n" * 10 + "{{ goal }} [Your Name]",
    '{"name": ' * 200 + ' {"tool": "a", "arguments": {}} [AGENT_NAME] ' + "[Ab]" * 5000 + "<|im_end|> [Name]",
    "`[GOAL]` [x] " * 3000 + "[Your Name]" + "<Team Name> {Agent Name}" * 3 + "[x]" * 2000 + "<GOAL>",
]


@pytest.mark.parametrize("text", _SPENT)
def test_the_scan_after_a_spent_budget_finds_what_the_full_scan_finds(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the slot and JSON budgets the scan goes on with a scanner without those kinds; the
    findings are those of the full scanner, whose later matches of those kinds were skipped."""
    for cfg in _GUARD_CONFIGS:
        got = find_leaks(text, cfg)
        switched = [kinds for kinds, variant in cfg.variants.items() if variant is not None]
        with monkeypatch.context() as m:
            m.setattr(leakage, "_without", lambda cfg, kinds: None)
            want = find_leaks(text, cfg)
        assert got == want
        # a suite token that starts with a letter ("NOCHAT") may start inside a slot: no switch there
        assert bool(switched) == (cfg is not _GUARD_CONFIGS[1])


_RARE_ATOMS = [
    *("<call>", "<CALL>", "<Call>", "<tools>", "<TOOLS>", "<tool\u017f>", "</call>", "</tools>", "</Tool\u017f>"),
    *("<", ">", "/", "]", "}", "{", '{"a"', "[", " ", "\n", "x", "l", "s", "L", "S", "\u017f", "call", "tools"),
    *("to=functions.", "f", "]~", "]~!a[", "]<]", "a[>[", "<|x|>", "|>", "<turn|>", ":opensource>", "<a:opensource>"),
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_RARE_ATOMS), max_size=30))
def test_every_rare_match_holds_one_of_its_literals(pieces: list[str]) -> None:
    # the rare pass runs an entry only where one of its literals occurs: a match without one
    # would be a leak the pass never looks for
    text = "".join(pieces)
    for cfg in _CONFIGS:
        for lits, _, pattern, _ in cfg.rare:
            for m in pattern.finditer(text):
                assert any(lit in m.group() for lit in lits), (m.group(), lits)


def test_the_bare_call_literals_cover_every_spelling_a_case_insensitive_match_takes() -> None:
    # "<call>" and "<tools>" in any case: the last letter of the name is one of these characters
    # ("\u017f", LONG S, is an "s" to Python's case-insensitive matching)
    ends = {c for c in map(chr, range(0x110000)) if re.fullmatch("(?i:l|s)", c)}
    assert {f"{c}>" for c in ends} == set(leakage._BARE_CALL_ENDS)
