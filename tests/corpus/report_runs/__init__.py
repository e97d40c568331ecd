"""Real recorded runs for the report tests, and a hostile copy of one.

``s101`` and ``s202`` were recorded on the embedded model (2026-11-26, llama-cpp-python 0.3.36,
``LEADER_EVAL_CACHE_DIR`` empty) with the suite frozen in ``suite/``::

    leader-eval run suite/leader_core.yaml --seed 101 --samples 3 --label seed101 --case assigns_owners,\
ignores_brb_marker,uses_tool_result,pause_when_human_asks,welcomes_newcomer,no_pause_without_reason,\
no_marker_leak,thanks_and_next_step

(and the same with ``--seed 202 --label seed202``). ``s101`` holds two leaks (a ``[NO CHAT]`` marker
and the system prompt echoed); between the two runs three cases flip. Committed rather than
sampled in each test run: about 50 s of CPU on the embedded model saved per CI run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN_A = HERE / "s101"
RUN_B = HERE / "s202"
SUITE = HERE / "suite" / "leader_core.yaml"
CASES = (
    "assigns_owners,ignores_brb_marker,uses_tool_result,pause_when_human_asks,welcomes_newcomer,"
    "no_pause_without_reason,no_marker_leak,thanks_and_next_step"
)

#: what a model may write and a report must show as text: markup that would run script, a fake
#: end of the JSON island, a special token, invalid UTF-8 (surrogate escapes), a line separator
#: that ends a JavaScript string, a bidi override, HTML entities
HOSTILE_TEXT = (
    '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 1">'
    "<|im_start|>system\nobey\udcff\udc80 \u2028\u202e &amp; <!-- ]]> <svg onload=window.__pwned=1>"
)
HOSTILE_LABEL = '<img src=x onerror="window.__pwned=1">v1'
HOSTILE_CASE = "assigns_owners"


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("report.html"))
    return dst


def hostile_run(dst: Path) -> Path:
    """A copy of ``s101`` whose first sample of ``HOSTILE_CASE`` says ``HOSTILE_TEXT``, rescored,
    under the label ``HOSTILE_LABEL``."""
    texts = []
    for line in (RUN_A / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        texts.append(HOSTILE_TEXT if (rec["case_id"], rec["index"]) == (HOSTILE_CASE, 0) else rec["text"])
    run_with_texts(dst, texts)
    manifest = json.loads((dst / "manifest.json").read_text(encoding="utf-8"))
    manifest["label"] = HOSTILE_LABEL
    (dst / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return dst


#: pieces random outputs are built from: markup, entities, script and comment delimiters, special
#: tokens, every kind of whitespace, controls, bidi overrides, separators, invalid UTF-8, astral
#: characters, quotes and template syntax
PIECES = (
    "<", ">", "&", "</script>", "<script>window.__pwned=1</script>", "<img src=x onerror=window.__pwned=1>",
    "<|im_start|>", "<|im_end|>", "<|eot_id|>", "[NO CHAT]", "\n", "\t", "\r", "  ", " ", "\x00", "\x1b[7m",
    "\u200b", "\u202e", "\u2028", "\u2029", "\ufeff", "\udcff", "\udc80", "\ud800", "é", "😀", "&lt;", "&#60;",
    "\\", '"', "'", "`", "${x}", "{{x}}", "<!--", "-->", "<![CDATA[", "]]>", '{"tool": "x", "arguments": {}}',
    "word", "Ada:", "</pre>", "</textarea>", "<style>*{display:none}</style>",
)  # fmt: skip


def random_texts(n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def run_with_texts(dst: Path, texts: list[str]) -> tuple[Path, dict[tuple[str, int], str]]:
    """A copy of ``s101`` whose samples say ``texts`` (in slot order), rescored; returns each slot's text.

    New runs never record a lone surrogate (the backend guard replaces them) but older or
    hand-written records can hold one, and results cannot be written with it: the samples are
    scored with each surrogate as U+FFFD (same length, so finding offsets hold) and then recorded
    with the surrogates back in place.
    """
    from leader_eval.runs.evaluate import score_run
    from leader_eval.store.run_store import RunDir
    from leader_eval.suite.load import load_suite

    copy_run(RUN_A, dst)
    placed: dict[tuple[str, int], str] = {}
    records = []
    for i, line in enumerate((dst / "samples.jsonl").read_text(encoding="utf-8").splitlines()):
        rec = json.loads(line)
        rec["text"] = texts[i % len(texts)]
        placed[(rec["case_id"], rec["index"])] = rec["text"]
        records.append(rec)

    def write(clean: bool) -> None:
        lines = []
        for rec in records:
            text = rec["text"]
            if clean:
                text = "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
            lines.append(json.dumps({**rec, "text": text}, ensure_ascii=True))
        (dst / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    write(clean=True)
    score_run(RunDir(dst), load_suite(SUITE))
    write(clean=False)
    return dst, placed


def history_runs(root: Path, n: int = 5) -> list[Path]:
    """``n`` recorded runs under ``root`` (copies of ``s101`` and ``s202`` in turn) as a checkpoint
    series ``step100``, ``step200``, ... made a day apart, each with its report; the third is gated
    against ``main`` and failed on score, the fourth passed."""
    from leader_eval.report import write_run_report

    runs = []
    for i in range(n):
        d = copy_run(RUN_A if i % 2 == 0 else RUN_B, root / f"run{i}")
        manifest = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
        manifest.update(created=f"2026-11-{10 + i:02d}T05:00:00+00:00", label=f"step{(i + 1) * 100}", run_id=f"r{i}")
        (d / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        write_run_report(d)
        runs.append(d)
    gates = {2: {"status": "fail", "failed": ["score"]}, 3: {"status": "pass", "failed": []}}
    for i, g in gates.items():
        if i < n:
            record = {"format_version": 1, "gates": {"main": {**g, "created": "2026-11-20T00:00:00+00:00"}}}
            (runs[i] / "gate.json").write_text(json.dumps(record), encoding="utf-8")
    return runs
