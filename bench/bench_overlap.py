"""Benchmark ``overlap_report`` on a synthetic 100,000-example chat training set.

    /work/venv/bin/python bench/bench_overlap.py [--examples 100000] [--cases 60] [--n 13]

Writes a seeded training JSONL into a temporary folder: every example is an OpenAI-format chat
that renders the same scaffold as the suite (system prompt + tool contracts, with its own goal
and event log), then an assistant tool call, ~1-2 KB per line. A few examples get a planted
excerpt of a case's event log or its expected answer. Prints the time and peak RSS of
``overlap_report`` and checks that exactly the planted cases are flagged.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from leader_eval.studies.overlap import format_overlap_report, overlap_report
from leader_eval.suite.load import Case, load_suite
from leader_eval.suite.render import render_messages

SYSTEM = """\
You are {{ agent_name }}, the leader agent of a shared chat room where several agents coordinate their work.
You act only through the tools below. Never describe clicks or interface elements; call a tool instead.
When nothing needs saying, call no tool at all.
Current village goal: {{ goal }}
Tools:
{{ tools_json }}
"""
USER = """\
Event log (oldest first):
{% for e in events %}
[{{ e.time }}] {{ e.author }}: {{ e.text }}
{% endfor %}
Decide your next action.
"""
TOOLS = [
    {
        "name": "send_message_to_chat",
        "description": "Post a message to the shared chat room; every agent in the room reads it.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The message, as the room will see it."}},
            "required": ["text"],
        },
    },
    {
        "name": "assign_task",
        "description": "Give one agent a task with a deadline.",
        "parameters": {
            "type": "object",
            "properties": {
                "agent": {"type": "string"},
                "task": {"type": "string"},
                "deadline": {"type": "string", "description": "HH:MM"},
            },
            "required": ["agent", "task"],
        },
    },
]

_NAMES_TEXT = (
    "alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert sybil trent victor"
)
_WORDS_TEXT = """
the a to of and in we need more wood stone grain water rope tools bridge well granary mill forge market field river
hill forest road gate wall roof storm frost harvest wheat barley timber plank nail hammer cart horse goat sheep bread
fish salt oil lamp before after tomorrow tonight morning noon evening today quickly carefully north south east west
broken ready finished started waiting blocked need help can will should must could please thanks sure okay maybe not
yet already again still almost two three four five dozen several few many some all none who what where when why how
which i you he she they it this that those these my your our their is are was were has have had do does did go bring
carry fix build dig plant gather sell buy trade check count send ask tell
"""
NAMES = tuple(_NAMES_TEXT.split())
WORDS = tuple(_WORDS_TEXT.split())


def sentence(rng: random.Random, lo: int = 8, hi: int = 22) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def events(rng: random.Random, k: int) -> list[dict[str, str]]:
    return [
        {
            "time": f"{rng.randint(6, 21):02d}:{rng.randint(0, 59):02d}",
            "author": rng.choice(NAMES),
            "text": sentence(rng),
        }
        for _ in range(k)
    ]


def write_suite(folder: Path, n_cases: int, rng: random.Random) -> Path:
    cases = []
    for i in range(n_cases):
        cases.append(
            {
                "id": f"case-{i:03d}",
                "vars": {"goal": sentence(rng, 8, 14), "events": events(rng, rng.randint(8, 20))},
                "expect": {"calls": [{"tool": "send_message_to_chat", "args": {"text": sentence(rng, 14, 24)}}]},
            }
        )
    suite = {
        "name": "bench-overlap",
        "scaffold": {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]},
        "tools": TOOLS,
        "defaults": {"vars": {"agent_name": "Leader"}},
        "cases": cases,
    }
    path = folder / "suite.yaml"
    path.write_text(json.dumps(suite, indent=1))  # JSON is YAML
    return path


def write_training(path: Path, suite_path: Path, examples: int, rng: random.Random, non_ascii: bool) -> set[str]:
    """Write the training set; return the ids of the cases planted into it."""
    suite = load_suite(suite_path)
    # Render the scaffold once around markers, then fill it per example (jinja per line is slow).
    probe = Case(
        id="probe",
        line=1,
        vars={"agent_name": "Leader", "goal": "GOALMARK", "events": [{"time": "T", "author": "A", "text": "EVMARK"}]},
        expect={},
    )
    system, user = (m["content"] for m in render_messages(suite, probe))
    sys_head, sys_tail = system.split("GOALMARK")
    user_head, user_tail = user.split("[T] A: EVMARK\n")

    def log_lines(evs: list[dict[str, str]]) -> str:
        return "".join(f"[{e['time']}] {e['author']}: {e['text']}\n" for e in evs)

    planted: dict[int, tuple[str, str]] = {}  # example index -> (case id, planted text)
    for case in rng.sample(list(suite.cases), 4):
        evs = case.vars["events"]
        planted[rng.randrange(examples)] = (case.id, log_lines(evs[: len(evs) // 2 + 1]))  # over half its log
    answer_case = rng.choice([c for c in suite.cases if c.id not in {v[0] for v in planted.values()}])
    answer_at = rng.randrange(examples)
    planted[answer_at] = (answer_case.id, "")
    with path.open("w") as fh:
        for i in range(examples):
            log = log_lines(events(rng, rng.randint(3, 6)))
            if non_ascii:  # one typographic apostrophe sends the whole example down the slower str path
                log = log.replace(" it ", " it’s ", 1)
            if i in planted:
                log += planted[i][1]
            if i == answer_at:
                args = {"text": answer_case.expect["calls"][0]["args"]["text"]}
            else:
                args = {"text": sentence(rng)}
            record = {
                "messages": [
                    {"role": "system", "content": sys_head + sentence(rng, 8, 14) + sys_tail},
                    {"role": "user", "content": user_head + log + user_tail},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{i}",
                                "type": "function",
                                "function": {"name": "send_message_to_chat", "arguments": json.dumps(args)},
                            }
                        ],
                    },
                ]
            }
            fh.write(json.dumps(record) + "\n")
    return {v[0] for v in planted.values()}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=100_000)
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--n", type=int, default=13)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--non-ascii", action="store_true", help="put a non-ASCII character in most examples")
    ap.add_argument("--keep", type=Path, help="also copy the suite and training file into this folder")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        suite_path = write_suite(folder, args.cases, rng)
        train = folder / "train.jsonl"
        t0 = time.perf_counter()
        # generate in a child process so that the peak RSS below is the scan's own
        with multiprocessing.get_context("fork").Pool(1) as pool:
            planted = pool.apply(write_training, (train, suite_path, args.examples, rng, args.non_ascii))
        gen_s = time.perf_counter() - t0
        size = train.stat().st_size
        rss_before = peak_rss_mb()
        suite = load_suite(suite_path)

        t0, c0 = time.perf_counter(), time.process_time()
        report = overlap_report(suite, [train], n=args.n)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0

        print(format_overlap_report(report))
        print(
            f"training file: {args.examples:,} examples, {size / 1e6:.1f} MB ({size / args.examples:,.0f} B/line), "
            f"generated in {gen_s:.1f} s"
        )
        print(
            f"overlap_report: {elapsed:.2f} s ({args.examples / elapsed:,.0f} examples/s, "
            f"{size / 1e6 / elapsed:.1f} MB/s); CPU {cpu:.2f} s; load average {os.getloadavg()[0]:.1f} "
            f"on {os.cpu_count()} cores"
        )
        print(f"peak RSS: {peak_rss_mb():.0f} MB (before the scan, after generating: {rss_before:.0f} MB)")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(suite_path, args.keep / "suite.yaml")
            shutil.copy(train, args.keep / "train.jsonl")
        flagged = {c.case_id for c in report.flagged}
        print(
            f"planted: {sorted(planted)}; flagged: {sorted(flagged)}; "
            f"contamination rate {report.contamination_rate:.1%}"
        )
        ok = flagged == planted
        print("OK: exactly the planted cases are flagged" if ok else "MISMATCH between planted and flagged cases")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
