"""Leak detectors against the hand-labeled corpus (tests/corpus/), plus the rules around it."""

from __future__ import annotations

from collections import Counter

import pytest

from leader_eval.checks.leakage import LeakConfig, compile_leak_config, find_leaks
from leader_eval.types import Reason
from tests.corpus import NEAR_MISS_FILES, LeakRecord, load_leak_records

RECORDS = load_leak_records()
LEAK_CLASSES = (
    Reason.LEAK_TOOL_MARKUP,
    Reason.LEAK_REASONING,
    Reason.LEAK_SPECIAL_TOKEN,
    Reason.LEAK_MARKER,
    Reason.LEAK_PLACEHOLDER,
    Reason.LEAK_SCAFFOLD,
    Reason.FORBIDDEN_PATTERN,
)


def _detect(rec: LeakRecord) -> list[tuple[str, int, int]]:
    cfg = compile_leak_config(LeakConfig(**rec.config))
    # a call argument is judged as the scorer judges it: no reasoning channel at its start (the
    # parser took the output's one channel off the raw text), so a declared block there is a leak
    in_argument = rec.where != "text"
    found = find_leaks(rec.text, cfg, where=rec.where, reasoning_seen=in_argument)
    return [(str(f.reason), f.start, f.end) for f in found]


def test_template_tags_in_code_are_content_only_up_to_the_code_budget() -> None:
    """An ERB tag in a code span is code, as ``{{ }}`` is, for the first ``_CODE_MAX_EXEMPT`` of them
    a text holds; past that budget (a flood) each is a finding, as for the scanner's shapes."""
    from leader_eval.checks import leakage

    cfg = compile_leak_config(LeakConfig(placeholder_names=("agent_name",)))
    assert find_leaks("`<%= agent_name %>` and `{{agent_name}}` in the view", cfg) == []
    n = 5000
    erb = find_leaks("`<%= agent_name %>` " * n, cfg)
    braces = find_leaks("`{{agent_name}}` " * n, cfg)
    assert len(erb) == len(braces) > 0
    assert all(f.text == "<%= agent_name %>" for f in erb)
    assert n > leakage._CODE_MAX_EXEMPT


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.id)
def test_corpus_record(rec: LeakRecord) -> None:
    got = _detect(rec)
    shown = {(r, s, e): rec.text[s:e] for r, s, e in got}
    assert got == rec.expected, f"{rec.file}:{rec.id} ({rec.note})\n text={rec.text!r}\n got={shown}"


def test_findings_carry_text_context_and_where() -> None:
    text = "Line one.\n@Ada take the map <think>hmm</think> now.\nLine three."
    (f,) = find_leaks(text, compile_leak_config(LeakConfig()), where="call[0].arguments.message")
    assert f.reason is Reason.LEAK_REASONING
    assert f.text == "<think>hmm</think>" == text[f.start : f.end]
    assert f.where == "call[0].arguments.message"
    assert "\n" not in f.context and "@Ada take the map <think>hmm</think> now." in f.context


def test_compile_is_cached_and_find_accepts_a_plain_config() -> None:
    cfg = LeakConfig(markers=("[NO CHAT]", "[brb:"))
    assert compile_leak_config(cfg) is compile_leak_config(LeakConfig(markers=("[NO CHAT]", "[brb:")))
    assert [f.text for f in find_leaks("[brb: 5] ok", cfg)] == ["[brb: 5]"]  # type: ignore[arg-type]


def test_eot_token_is_fine_only_once_and_only_at_the_end() -> None:
    cfg = compile_leak_config(LeakConfig(eot_tokens=("<|eot_id|>",)))
    assert find_leaks("@Ada go.<|eot_id|>  \n", cfg) == []
    assert [f.start for f in find_leaks("@Ada go.<|eot_id|> more", cfg)] == [8]
    # without the declaration the same token is a leak even at the end
    assert [f.reason for f in find_leaks("@Ada go.<|eot_id|>", compile_leak_config(LeakConfig()))] == [
        Reason.LEAK_SPECIAL_TOKEN
    ]


def test_declared_reasoning_block_is_a_channel_only_at_the_start() -> None:
    cfg = compile_leak_config(LeakConfig(reasoning_tags=("<think>", "</think>")))
    assert find_leaks("<think>x</think>@Ada go", cfg) == []
    assert [(f.start, f.end) for f in find_leaks("@Ada go <think>x</think>", cfg)] == [(8, 24)]
    # undeclared, the same leading block is a leak
    assert len(find_leaks("<think>x</think>@Ada go", compile_leak_config(LeakConfig()))) == 1


def test_code_exemption_needs_a_closed_fence() -> None:
    cfg = compile_leak_config(LeakConfig())
    env = '{"name": "wait", "arguments": {}}'
    assert find_leaks(f"```\n{env}\n```", cfg) == []
    assert [f.text for f in find_leaks(f"```\n{env}\n", cfg)] == [env]
    # special tokens are never content, fenced or not
    assert [f.text for f in find_leaks("```\n<|im_start|>\n```", cfg)] == ["<|im_start|>"]


def test_code_exemption_is_bounded_and_fails_safe() -> None:
    cfg = compile_leak_config(LeakConfig())
    # a few quoted placeholders: documentation of syntax, not leaks
    assert find_leaks("Write `[GOAL]` or `{{ goal }}` where the goal goes.", cfg) == []
    # a text flooded with them (past 4,096) stops getting the exemption: judged as leaking, in
    # bounded time, never passed unread
    flood = "`[GOAL]` " * 5000
    found = find_leaks(flood, cfg)
    assert found and {f.reason for f in found} == {Reason.LEAK_PLACEHOLDER}
    assert found[0].start == 4096 * 9 + 1  # the first one past the budget
    assert find_leaks("`[GOAL]` " * 4096, cfg) == []


def test_fenced_blocks_read_per_text_are_bounded_and_fail_safe() -> None:
    cfg = compile_leak_config(LeakConfig())
    block = "```\n[GOAL]\n```\n"
    assert find_leaks(block * 1000, cfg) == []  # 2,000 fence lines: all read, all code
    # past 2,048 fence lines a flood of blocks is not code: its placeholders are judged
    found = find_leaks(block * 1100, cfg)
    assert found and found[0].start == 1024 * len(block) + 4
    assert {f.reason for f in found} == {Reason.LEAK_PLACEHOLDER}


def _per_class_scores() -> dict[str, tuple[int, int, int]]:
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for rec in RECORDS:
        got = set(_detect(rec))
        want = set(rec.expected)
        for r, _, _ in got & want:
            tp[r] += 1
        for r, _, _ in got - want:
            fp[r] += 1
        for r, _, _ in want - got:
            fn[r] += 1
    return {str(c): (tp[str(c)], fp[str(c)], fn[str(c)]) for c in LEAK_CLASSES}


def test_precision_and_recall_per_class() -> None:
    scores = _per_class_scores()
    print("\nleak class              findings  precision  recall")
    failing = []
    for cls, (tp, fp, fn) in scores.items():
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        print(f"{cls:<22} {tp + fn:>9}  {precision:>9.3f}  {recall:>6.3f}")
        if precision < 1.0 or recall < 1.0:
            failing.append(cls)
    near = [r for r in RECORDS if r.file in NEAR_MISS_FILES]
    fired = [r.id for r in near if _detect(r)]
    print(f"near-misses: {len(near)}, fired: {len(fired)}")
    # issue 22: 1.000 per class on the labelled corpus (the held-out target is 0.98)
    assert not failing, f"precision or recall below 1.000 for {failing}"
    assert not fired


def test_corpus_covers_every_class() -> None:
    per_class = Counter(r for rec in RECORDS for r in {e[0] for e in rec.expected})
    for cls in LEAK_CLASSES:
        assert per_class[str(cls)] >= 15, f"{cls}: {per_class[str(cls)]} records"
    assert sum(1 for r in RECORDS if not r.expected) >= 60


def test_render_and_output_time_find_the_same_placeholders() -> None:
    """One rule at render and at output time: on every corpus text outside code, the renderer's
    ``find_placeholders`` finds exactly the built-in placeholders the leak detector reports (slots
    in words in every language, fillers, format slots, labels and near misses included)."""
    from leader_eval.suite.render import find_placeholders

    checked = 0
    for rec in RECORDS:
        cfg = {k: v for k, v in rec.config.items() if k in ("special_tokens", "eot_tokens", "markers", "call_markup")}
        if set(rec.config) - set(cfg) - {"scaffold_texts"} or "`" in rec.text:
            continue  # a suite's own patterns or names, or code (render does not exempt code)
        if any(r != Reason.LEAK_PLACEHOLDER for r, _, _ in rec.expected):
            continue  # another class's markup comes first in the scan (<TOOL_USE> is no <TOOL>)
        leaks = {
            (f.start, f.end)
            for f in find_leaks(rec.text, compile_leak_config(LeakConfig(**cfg)))
            if f.reason is Reason.LEAK_PLACEHOLDER
        }
        spans = {(m.start(), m.end()) for m in find_placeholders(rec.text)}
        # the outermost ones: render lists {{goal}} and the {goal} inside it
        rendered = {(a, b) for a, b in spans if not any(c <= a and b <= d and (c, d) != (a, b) for c, d in spans)}
        assert rendered == leaks, f"{rec.id}: render {rendered} vs output {leaks} in {rec.text!r}"
        checked += 1
    assert checked > 300


def test_a_token_read_as_writing_only_in_its_narrow_shape() -> None:
    cfg = compile_leak_config(LeakConfig())
    # [IMG] far along a line of blanks does not open the line: the look back is bounded, not a pass
    assert [f.text for f in find_leaks("Bild" + " " * 30 + "[IMG] vom Dach", cfg)] == ["[IMG]"]
    assert find_leaks("  2. [IMG] dach.jpg", cfg) == []
    # a strikethrough of markup is not plain words: the eos reading wins
    assert [f.text for f in find_leaks("<s><b>alt</b></s> neu", cfg)] == ["</s>"]
    # past the per-text budget of exemptions the rest are flagged (the safe side)
    found = find_leaks("<s>alt</s> neu. " * 300, cfg)
    assert len(found) == 300 - 256 and {f.text for f in found} == {"</s>"}


def test_the_scanners_first_characters_are_read_from_its_entries_as_from_its_pattern() -> None:
    # compile_leak_config reads the characters a scan can start at from its entries instead of
    # parsing the ~10,000-character pattern again: the same answer for every kind of entry
    from leader_eval.checks import leakage

    for cfg in (
        LeakConfig(),
        LeakConfig(markers=("[NO CHAT]", "[brb:"), special_tokens=("<|im_start|>", "\n<x>")),
        LeakConfig(
            eot_tokens=("<|eot_id|>",), reasoning_tags=("<think>", "</think>"), placeholder_names=("agent_name",)
        ),
    ):
        compiled = compile_leak_config(cfg)
        assert compiled.scanner_firsts == leakage._first_chars(compiled.scanner) is not None
