"""The HTML report without a browser: content read from the stored records, inert islands, size bounds,
segments that never drop a character, and the CLI entry points (the checkpoint recommendation:
tests/decide/test_checkpoints.py).
(The browser behaviour is in test_report_browser.py.)"""

from __future__ import annotations

import html as htmllib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leader_eval.inert import markdown
from leader_eval.report import format_show, format_summary, render_report, table, write_report, write_run_report
from leader_eval.report import html as report_html
from leader_eval.report.html import artifact_path
from leader_eval.report.text import leak_spans, segments
from leader_eval.runs.evaluate import read_run
from leader_eval.runs.evaluate import run as evaluate_run
from leader_eval.runs.options import RunOptions
from leader_eval.stats.metrics import METRICS
from leader_eval.store.run_store import FIELD_CAP
from tests.conftest import MINIMAL_SUITE
from tests.corpus.report_runs import HOSTILE_CASE, HOSTILE_TEXT, RUN_A, RUN_B, SUITE, copy_run, hostile_run
from tests.support.scripted import ScriptedBackend, call

ISLAND = re.compile(r'<script type="application/json" id="data-run-(\d+)">(.*?)</script>', re.S)


def islands(page: str) -> dict[int, dict]:
    return {int(i): json.loads(body) for i, body in ISLAND.findall(page)}


def flatten(segs: list) -> str:
    """Undo the display markers: what the segments say the raw text was."""
    out = []
    for s in segs:
        if isinstance(s, str):
            out.append(s)
        elif s[0] == "leak":
            out.append(flatten(s[2]))
        elif s[0] == "tok":
            out.append(s[1])
        elif s[0] == "ws":
            out.append({"↵": "", "→\t": "\t", "␍": "\r"}.get(s[1], " " * len(s[1])))
        elif s[0] == "ctl":
            out.append(chr(int(s[1][3:-1], 16)))
        elif s[0] == "bad":
            inner = s[1][1:-1]
            out.append(chr(0xDC00 + int(inner[2:], 16)) if inner.startswith("\\x") else chr(int(inner[2:], 16)))
    return "".join(out)


def test_terminal_names_still_import_from_the_package():
    run = read_run(RUN_A)
    assert "score" in format_summary(run)
    assert "== assigns_owners #0" in format_show(run, case_id="assigns_owners")
    assert table(["a"], [["1"]]).splitlines()[-1].strip() == "1"


def test_one_run_shows_every_metric_with_n_and_ci_per_tag_and_reasons():
    run = read_run(RUN_A)
    page = render_report([RUN_A])
    o = run.summary["overall"]
    for name in METRICS:
        m = o["metrics"][name]
        row = re.search(rf"<tr><td><span[^>]*>{name} .</span></td>(.*?)</tr>", page)
        assert row, name
        cells = re.findall(r"<td>(.*?)</td>", row.group(1))
        assert cells[0] == f"<b>{m['value']:.3f}</b>"
        assert cells[1] == f"[{m['low']:.3f}, {m['high']:.3f}]"
        assert cells[2] == str(m["n_samples"])
    for reason, count in o["reasons"].items():
        assert f'<span class="reason">{reason}</span></td><td>{count}</td>' in page
    for tag, block in run.summary["by_tag"].items():
        assert f"<td>{tag}</td><td><b>{block['metrics']['score']['value']:.3f}</b>" in page
    for case in run.cases:
        assert f'data-id="{case["case_id"]}"' in page


def test_page_is_self_contained_and_allows_no_network():
    page = render_report([RUN_A, RUN_B])
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "img-src data:" in csp and "unsafe-inline" not in csp.split("script-src")[1]
    assert not re.search(r"<link\b", page)
    for attr in re.findall(r'\b(?:src|href|action)="([^"]*)"', page):
        assert attr.startswith("data:"), attr
    assert not re.search(r"url\((?!data:)", page)


def test_leak_findings_are_marked_in_place_and_named():
    run = read_run(RUN_A)
    data = islands(render_report([RUN_A]))[0]["cases"]
    leaks = 0
    for sc in run.scores:
        findings = [f for c in sc.checks for f in c["findings"] if f["where"] == "text"]
        if not findings:
            continue
        view = next(s for s in data[sc.case_id]["s"] if s["i"] == sc.index)
        marked = [s for s in view["seg"] if isinstance(s, list) and s[0] == "leak"]
        for f in findings:
            assert any(f["reason"] in m[1] and f["text"] in flatten(m[2]) for m in marked), f
            leaks += 1
    assert leaks >= 2  # the recorded run has a [NO CHAT] marker and an echoed system prompt


def test_a_finding_inside_call_arguments_is_located_in_the_raw_json():
    text = '{"tool": "send", "arguments": {"message": "say \\"[NO CHAT]\\" now"}}'
    calls = [{"span": [0, len(text)]}]
    checks = [{"reason": "leak_marker", "findings": [
        {"reason": "leak_marker", "where": "call[0].arguments.message", "start": 5, "end": 14, "text": '"[NO CHAT]"'}]}]  # fmt: skip
    ((start, end, reason),) = leak_spans(text, checks, calls)
    assert text[start:end] == '\\"[NO CHAT]\\"' and reason == "leak_marker"


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("ab <|>\n\t\r\x00\u200b\u2028\u202e\udcff\ud800é")) | st.characters(), max_size=60
    ),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=4),
)
def test_segments_never_drop_or_alter_a_character(text, raw_spans):
    spans = [(min(a, b), max(a, b), "leak_marker") for a, b in raw_spans]
    segs = segments(text, ("<|im_end|>",), spans)
    assert flatten(segs) == text
    # what is shown can always be encoded (a lone surrogate is written as an escape)
    json.dumps(segs, ensure_ascii=False).encode("utf-8")


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab .xy<|>")), max_size=20)
    | st.text(alphabet=st.sampled_from(list("ab .<|>x\n\t\x7f\x00é")), max_size=30),
    st.sampled_from([(), ("<|im_end|>",), ("[EOS]", " <s>"), ("xy",)]),
)
def test_a_text_said_to_hold_nothing_to_mark_is_segmented_as_the_pattern_would(text, tokens):
    """The shortcut for text with nothing to mark gives the pattern's own segments."""
    from leader_eval.report import text as report_text

    fast = report_text._plain_segments(text, tokens)
    original = report_text._nothing_to_mark
    report_text._nothing_to_mark = lambda *_: False
    try:
        assert fast == report_text._plain_segments(text, tokens)
    finally:
        report_text._nothing_to_mark = original


def test_special_tokens_whitespace_and_invisible_characters_are_shown():
    segs = segments("a  b\t<|im_end|>\u200b\udcfe\n", ("<|im_end|>",))
    kinds = [s[0] for s in segs if isinstance(s, list)]
    assert kinds == ["ws", "ws", "tok", "ctl", "bad", "ws"]
    assert ["bad", "⟨\\xfe⟩"] in segs and ["ctl", "⟨U+200B⟩"] in segs


def test_hostile_output_is_inert_text_in_the_page(tmp_path):
    run_dir = hostile_run(tmp_path / "h")
    page = render_report([run_dir])
    body = page.split("<main>", 1)[1]
    # no element from the data: the only <script> elements are the islands and the page's own
    assert len(re.findall(r"<script\b", body)) == 2 and "<img src=x" not in body and "<svg onload" not in body
    for _, island in ISLAND.findall(page):
        assert not set("<>&\u2028\u2029") & set(island)
    view = islands(page)[0]["cases"][HOSTILE_CASE]["s"][0]
    assert flatten(view["seg"]) == HOSTILE_TEXT
    assert any(isinstance(s, list) and s[0] == "leak" and "leak_special_token" in s[1] for s in view["seg"])
    # the label is escaped where it is shown
    assert htmllib.escape('<img src=x onerror="window.__pwned=1">v1', quote=True) in body


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(max_codepoint=0x10FFFF), max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES)
def test_an_island_is_the_stdlibs_json_whoever_writes_it(value):
    """The island's JSON (orjson where it can write it) parses to the stdlib's value, is ASCII
    (U+2028/9 and lone surrogates escaped), and holds no character that could end its element."""
    page_json = report_html._island(value)
    assert page_json.isascii() and not set("<>&") & set(page_json)
    assert json.loads(page_json) == json.loads(json.dumps(value, ensure_ascii=True))


def test_an_island_writes_nan_as_null_and_what_orjson_refuses_through_the_stdlib():
    # the stdlib's NaN is no JSON: the page's JSON.parse would refuse the whole island
    assert json.loads(report_html._island({"score": float("nan")})) == {"score": None}
    for refused in ({"s": "lone \udcff"}, {"n": 2**70}, {1: "non-string key"}):
        assert json.loads(report_html._island(refused)) == json.loads(json.dumps(refused))
    assert report_html._island({"e": "\U0001f600\u2028"}) == '{"e":"\\ud83d\\ude00\\u2028"}'
    # DEL is escaped as the stdlib escapes it (orjson writes it raw)
    assert report_html._island({"e": "a\x7fb"}) == json.dumps({"e": "a\x7fb"}, separators=(",", ":"))


def test_two_runs_show_the_paired_difference_verdict_and_flips():
    from leader_eval.decide.compare import compare_runs

    c = compare_runs([RUN_A, RUN_B])
    page = render_report([RUN_A, RUN_B])
    assert htmllib.escape(c.verdict()) in page
    score = next(m for m in c.pairs[0].metrics if m.metric == "score")
    assert f"<b>{score.diff:+.3f}</b> [{score.low:+.3f}, {score.high:+.3f}]" in page
    flips = c.pairs[0].flips
    assert flips
    for f in flips:
        assert f'class="flip {f.direction}" data-case="{f.case_id}" data-a="0" data-b="1"' in page


def test_large_runs_embed_a_bounded_number_of_samples_failures_first(monkeypatch):
    monkeypatch.setattr(report_html, "MAX_SAMPLES", 8)
    run = read_run(RUN_A)
    page = render_report([run])
    data = islands(page)[0]
    kept = [s for rec in data["cases"].values() for s in rec["s"]]
    assert len(kept) <= 8 and data["left"] == len(run.samples) - len(kept)
    assert f"{data['left']} samples are not embedded" in page
    failed = {(s.case_id, s.index) for s in run.scores if not s.passed}
    for cid, rec in data["cases"].items():
        n_failed = sum((cid, i) in failed for i in range(3))
        assert sum(s["p"] is False for s in rec["s"]) == min(n_failed, len(rec["s"]))


def test_long_outputs_and_prompts_are_clipped_and_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(report_html, "MAX_TEXT_CHARS", 20)
    monkeypatch.setattr(report_html, "MAX_PROMPT_HEAD", 10)
    monkeypatch.setattr(report_html, "MAX_PROMPT_TAIL", 10)
    run = read_run(RUN_A)
    rec = islands(render_report([run]))[0]["cases"]["assigns_owners"]
    s0 = next(s for s in run.samples if s.case_id == "assigns_owners" and s.index == 0)
    view = rec["s"][0]
    assert flatten(view["seg"]) == s0.text[:20] and view["more"] == len(s0.text) - 20
    assert rec["prompt_omitted"] > 0


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leader_eval", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_report_compare_and_gate_markdown(tmp_path):
    out = tmp_path / "r.html"
    r = cli("report", str(RUN_A), str(RUN_B), "-o", str(out))
    assert r.returncode == 0 and r.stdout.strip() == f"report: {out}" and "Comparison" in out.read_text()
    cmp_out = tmp_path / "c.html"
    cmp_md = tmp_path / "c.md"
    r = cli("compare", str(RUN_A), str(RUN_B), "--report", str(cmp_out), "--markdown", str(cmp_md))
    assert r.returncode in (0, 1) and f"report: {cmp_out}" in r.stdout and "flip" in cmp_out.read_text()
    # Markdown is read on GitHub: the report by its place in the uploaded artifact, never the runner's path
    assert f"Report: {markdown(artifact_path(cmp_out))} in the uploaded artifact" in cmp_md.read_text()
    assert str(tmp_path) not in cmp_md.read_text()
    run = copy_run(RUN_A, tmp_path / "run")
    path = write_run_report(run)
    md = tmp_path / "gate.md"
    cli("gate", str(run), "--golden", str(tmp_path / "golden"), "--markdown", str(md), cwd=tmp_path)
    assert f"Report: {markdown('run/report.html')} in the uploaded artifact" in md.read_text() and path.is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["/nonexistent-run"], "not a run directory"), ([str(RUN_A), "--order", "seed1,seed2"], "--order"),
     ([str(RUN_A), "-o", "."], "is a directory")],
)  # fmt: skip
def test_cli_report_bad_input_is_one_line_exit_2(args, message, tmp_path):
    r = cli("report", *args, *(["-o", str(tmp_path / "x.html")] if "-o" not in args else []), cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists()


def test_run_writes_report_html_into_the_run_directory_and_prints_its_path(tmp_path):
    out = tmp_path / "replayed"
    r = cli("run", str(SUITE), "--model", f"replay:{RUN_A}", "--out", str(out), "--seed", "101", "--case",
            "assigns_owners,ignores_brb_marker", "-q")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"report: {out / 'report.html'}" in r.stdout
    page = (out / "report.html").read_text()
    assert 'data-id="assigns_owners"' in page and 'data-id="uses_tool_result"' not in page


def _undated(page: str) -> str:
    return re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated", page)


class _Reasoning(ScriptedBackend):
    """A scripted model that declares its reasoning tags (the reasoning is a field of the record)."""

    def describe(self):
        return {**super().describe(), "reasoning_tags": ["<think>", "</think>"]}


@pytest.mark.parametrize("huge", ["", "text", "reasoning"])
def test_the_report_of_a_run_just_made_is_the_report_of_its_directory(tmp_path, huge):
    """``leader-eval run`` writes report.html from the records it just wrote, without reading
    them back: the page is the one the directory makes. An output whose record was cut to its
    cap (a long text; a long reasoning block, a string cut without a "cut" key) is shown as
    stored (cut), not as scored."""
    suite = tmp_path / "mini.yaml"
    suite.write_text(MINIMAL_SUITE)
    noise = "".join(f"{i:x}" for i in range(FIELD_CAP))[: FIELD_CAP + 5000]  # nothing repeats to a rule
    first = {"": "not a call", "text": "x" * (FIELD_CAP + 10), "reasoning": f"<think>{noise}</think>"}[huge]
    outputs = [first + (call("send_message_to_chat", message="hi") if huge == "reasoning" else "")]
    outputs.append(call("send_message_to_chat", message="hi"))
    options = RunOptions(model="scripted:test", seed=3, out=tmp_path / "run", progress=False, cache=False)
    result = evaluate_run(suite, options, backend=_Reasoning(outputs))
    assert result.stored is not bool(huge)
    page = write_run_report(result).read_text()
    assert _undated(page) == _undated(render_report([result.path]))


def test_report_of_an_episode_sample_renders_its_steps():
    run = read_run(RUN_A)
    s, sc = (
        run.samples[0],
        next(x for x in run.scores if (x.case_id, x.index) == (run.samples[0].case_id, run.samples[0].index)),
    )
    s.steps = [  # type: ignore[attr-defined]
        {"step": 0, "seed": 5, "outcome": "ok", "stop_reason": "stop", "completion_tokens": 4, "text": "go <|im_end|>",
         "token_ids": [1, 2], "results": [{"tool": "open", "arguments": {"door": 1}, "ok": True, "result": "opened"}]},
        {"step": 1, "seed": 6, "outcome": "ok", "stop_reason": "length", "completion_tokens": 9, "text": "again",
         "results": [{"tool": "open", "arguments": {}, "ok": False, "error": "locked"}], "world": {"door": "locked"},
         "prompt": {"text": "<|im_start|>user\nopen it<|im_end|>", "messages": []}, "end": None},
    ]  # fmt: skip
    sc.checks.append({"check": "episode", "passed": False, "reason": "no_call", "hard": False, "detail": "", "findings": [],
                      "data": {"steps": [{"step": 1, "failed_checks": [{"check": "format", "passed": False,
                               "reason": "unparseable", "detail": "cut off", "findings": []}]}]}})  # fmt: skip
    view = islands(render_report([run]))[0]["cases"][s.case_id]["s"]
    one, two = next(v for v in view if v["i"] == s.index)["steps"]
    assert one["h"] == "seed 5 · outcome ok · stop reason stop · completion tokens 4"
    assert ["tok", "<|im_end|>"] in one["seg"] and one["res"] == ["open({\"door\": 1}) -> 'opened'"]
    assert "fail" not in one and "rest" not in one  # token ids are not shown
    assert two["res"] == ["open({}) -> error: 'locked'"] and two["fail"][0]["r"] == "unparseable"
    assert '"door": "locked"' in two["rest"] and '"end"' not in two["rest"] and "prompt" not in two["rest"]
    assert ["tok", "<|im_start|>"] in two["prompt"] and two["prompt_omitted"] == 0
    assert all("steps" not in v for v in view if v["i"] != s.index)


def test_write_report_is_atomic_and_leaves_no_temp_file(tmp_path):
    out = write_report([RUN_A], tmp_path / "a" / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]


def test_a_stress_run_shows_score_against_length_with_bands_and_overflow(tmp_path):
    import base64

    run = copy_run(RUN_A, tmp_path / "stress")
    variants = []
    for step, status, score in ((1000, "ok", 1.0), (4000, "ok", 0.5), (8000, "overflow", None)):
        variants.append(
            {"case_id": "recalls", "variant_id": f"recalls@{step}:end", "depth": "end", "target": step,
             "prompt_tokens": step - 3, "n_filler": step // 20, "status": status, "score": score,
             "n_scored": 0 if score is None else 4, "n_passed": 0 if score is None else int(4 * score),
             "n_context_overflow": 4 if score is None else 0, "reasons": {}}
        )  # fmt: skip
    stress = {"suite": "stress_recall", "model_id": "local:smollm2", "steps": [1000, 4000, 8000],
              "context_length": 6000, "max_tokens": {"x": 64}, "samples": 4, "seed": 1,
              "overall": {"1000": 1.0, "4000": 0.5, "8000": None}, "first_failure": {"recalls:end": None},
              "first_overflow": {"recalls:end": 8000, "overall": 8000}, "variants": variants}  # fmt: skip
    (run / "stress.json").write_text(json.dumps(stress))
    page = render_report([run])
    section = page.split("Stress: score against prompt length", 1)[1].split("<h4>Variants (", 1)[0]
    assert "<h4>Cases (" not in page  # a stress run's rows are variants, not the suite's cases
    src = re.search(r'<img class="plot" alt="[^"]*" src="data:image/svg\+xml;base64,([^"]+)"', section)
    svg = base64.b64decode(src.group(1)).decode()
    assert "context overflow (not sampled)" in svg and "overall 95% CI" in svg and "<script" not in svg
    assert "recalls:end" in section and "overflow" in section.split("<pre", 1)[1]
