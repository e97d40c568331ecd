"""Throughput and worst case of scoring one sample end to end (a script, not a test).

    python bench/bench_scoring.py [--n 10000] [--seed 11] [--profile]

Scores seeded, realistic ~2 KB outputs with ``CaseScorer.score`` (parse in the case's protocol
plus the lenient diagnostics of every other protocol, schema validation, argument constraints,
every leak detector on the text and on each argument string, degeneration) for the first case of
suites/leader_core.yaml, the way ``score_samples`` does: one process, one core. Then times each
adversarial output on its own (best of 3). Targets (the issue): >= 5,000 outputs/s, and no
single output over 100 ms.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leader_eval.checks.degeneration import check_degeneration  # noqa: E402
from leader_eval.checks.leakage import find_leaks  # noqa: E402
from leader_eval.protocols import parse_output  # noqa: E402
from leader_eval.render import render_messages  # noqa: E402
from leader_eval.score import CaseScorer, ModelInfo, case_scorer  # noqa: E402
from leader_eval.suite import load_suite  # noqa: E402
from leader_eval.types import Sample  # noqa: E402

SMOLLM2 = ModelInfo(
    special_tokens=("<|im_end|>", "<|endoftext|>", "<|im_start|>"),
    eot_tokens=("<|im_end|>", "<|endoftext|>"),
)
EOT = "<|im_end|>"

AGENTS = ["Ada", "Bo", "Cyd"]
TASKS = [
    "cut the planks for the windmill sails",
    "carry the stones down to the river bank",
    "measure the river flow at the north bend",
    "ask the miller which millstone we can borrow",
    "sketch the tower and the sails",
    "dig the foundation by the river",
]
SENTENCES = [
    "Our goal today is to build a windmill by the river, so wood and stone come first.",
    "Bo asked first for the foundation, so the foundation is his.",
    "If you finish early, tell me and I will find the next step.",
    "Please keep messages short so everyone can follow.",
    "The weather looks good until the afternoon; rain is likely after four.",
    "We have 12 planks, 40 stones and about 30 sacks of lime.",
    "Remember that x < y here: the east road is shorter than the west one.",
    'Inventory so far: {"wood": 12, "stone": 40}.',
    "Mail the plan to <ada@example.com> when it is ready.",
    "Let's meet at the river bend at noon to check progress on the windmill.",
    "Use the `north` path, it is dry today.",
]
# one of each kind the leak detectors know, placed in text or inside a message argument
LEAKS = [
    "<tool_use><name>send_message_to_chat</name></tool_use>",
    "<think>Bo asked first.</think>",
    "</think>",
    "<|im_start|>assistant",
    "<|endoftext|>",
    "[NO CHAT]",
    "[brb: 10m]",
    "{{ current_goal }}",
    "<GOAL>",
    "[INSERT TEAM NAME]",
    '{"name": "send_message_to_chat", "arguments": {"message": "hi"}}',
    "I clicked the Send button",
    "You never do the work yourself: you read the room, decide who does what, and act only",
]


def _prose(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < size:
        r = rng.random()
        if r < 0.4:
            parts.append(f"@{rng.choice(AGENTS)} please {rng.choice(TASKS)}.")
        elif r < 0.9:
            parts.append(rng.choice(SENTENCES))
        else:
            parts.append("\n- " + "\n- ".join(f"{a}: {rng.choice(TASKS)}" for a in rng.sample(AGENTS, 3)) + "\n")
    return " ".join(parts)[:size]


def _with_leak(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + " " + rng.choice(LEAKS) + " " + text[at:]


def _json_call(message: str, *, name: str = "send_message_to_chat") -> str:
    return json.dumps({"name": name, "arguments": {"message": message}}, ensure_ascii=False)


def realistic(rng: random.Random, size: int = 2048) -> tuple[str, str, str]:
    """(kind, text, stop_reason) for one output of about ``size`` characters."""
    r = rng.random()
    msg = _prose(rng, size - 70)
    stop = "stop"
    if r < 0.40:
        kind, text = "json call", _json_call(msg)
    elif r < 0.48:
        kind, text = "json call, leak in message", _json_call(_with_leak(rng, msg))
    elif r < 0.55:
        kind, text = "prose only", _prose(rng, size)
    elif r < 0.60:
        kind, text = "prose with a leak", _with_leak(rng, _prose(rng, size))
    elif r < 0.67:
        half = _prose(rng, size // 3)
        kind, text = "call embedded in prose", f"Sure! Here is the call:\n{_json_call(msg[: size // 2])}\n{half}"
    elif r < 0.72:
        unit = f"@{rng.choice(AGENTS)} please {rng.choice(TASKS)}. "
        kind, text = "repetition loop", _json_call(msg[: size // 4] + unit * (size // len(unit)))[:size]
        stop = "length"
    elif r < 0.78:
        kind, text = "hermes call", f"<tool_call>\n{_json_call(msg)}\n</tool_call>"
    elif r < 0.83:
        kind, text = "pythonic call", f"[send_message_to_chat(message={msg!r})]"
    elif r < 0.90:
        full = _json_call(msg)
        kind, text = "truncated json", full[: rng.randrange(len(full) // 2, len(full) - 2)]
        stop = "length"
    elif r < 0.94:
        kind = "json array of calls"
        text = json.dumps(
            [
                {"name": "send_message_to_chat", "arguments": {"message": msg[: size // 2]}},
                {"name": "assign_task", "arguments": {"agent": "Bo", "task": "dig the foundation"}},
            ]
        )
    elif r < 0.97:
        kind, text = "schema violation", json.dumps({"name": "pause", "arguments": {"minutes": "ten", "why": msg}})
    else:
        kind, text = "reasoning then call", f"<think>{msg[: size // 3]}</think>\n{_json_call(msg[: size // 2])}"
    if rng.random() < 0.6:
        text += EOT
    return kind, text, stop


def _nested(depth: int) -> str:
    return '{"name": "send_message_to_chat", "arguments": {"message": "x", "deep": ' + "[" * depth + "]" * depth + "}}"


_ONE_CALL = json.dumps({"name": "send_message_to_chat", "arguments": {"message": "Ada, please take the map."}})


def _big_array(n_bytes: int) -> str:
    return "[" + ", ".join([_ONE_CALL] * (n_bytes // (len(_ONE_CALL) + 2))) + "]"


def _big_pythonic(n_bytes: int) -> str:
    unit = "send_message_to_chat(message='Ada, please take the map of the river.')"
    return "[" + ", ".join([unit] * (n_bytes // (len(unit) + 2))) + "]"


ADVERSARIAL: dict[str, Callable[[random.Random], str]] = {
    "1 MB realistic text": lambda rng: "".join(realistic(rng)[1] for _ in range(512)),
    "1 MB message in one JSON call": lambda rng: _json_call(_prose(rng, 1_000_000)),
    "1 MB one repeated char": lambda rng: "a" * 1_000_000,
    "1 MB random unicode": lambda rng: "".join(chr(rng.randrange(32, 0x3000)) for _ in range(1_000_000)),
    "10,000-deep nested JSON (closed)": lambda rng: _nested(10_000),
    "10,000-deep nested JSON (unclosed)": lambda rng: "[" * 10_000,
    '"{\\"a\\":" * 10000': lambda rng: '{"a":' * 10_000,
    '"<" * 100000': lambda rng: "<" * 100_000,
    '"{{" * 50000': lambda rng: "{{" * 50_000,
    '"[INSERT " * 50000': lambda rng: "[INSERT " * 50_000,
    '"<tool_call>" * 50000': lambda rng: "<tool_call>" * 50_000,
    '"{\\"name\\": " * 30000': lambda rng: '{"name": ' * 30_000,
    '"[f(" * 30000': lambda rng: "[f(" * 30_000,
    '"<think>" * 50000': lambda rng: "<think>" * 50_000,
    "1 MB valid JSON array of calls": lambda rng: _big_array(1_000_000),
    "1 MB JSON array of 30,000 tiny calls": lambda rng: (
        "[" + ", ".join(['{"name":"pause","arguments":{"minutes":5}}'] * 30_000) + "]"
    ),
    "1 MB pythonic list of calls": lambda rng: _big_pythonic(1_000_000),
    "1 MB hermes calls": lambda rng: "\n".join(
        [f"<tool_call>{_json_call('Ada, please take the map.')}</tool_call>"] * 11_000
    ),
    "256 JSON calls (the most one output may hold)": lambda rng: "[" + ", ".join([_ONE_CALL] * 256) + "]",
}
# inputs also scored under the protocol whose parser they stress (the case's own is json)
OWN_PROTOCOL = {"1 MB pythonic list of calls": "pythonic", "1 MB hermes calls": "hermes"}


def build_scorer(suite_path: Path, protocol: str | None = None) -> CaseScorer:
    suite = load_suite(suite_path)
    case = suite.cases[0]
    messages = render_messages(suite, case)
    prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    prompt += "<|im_start|>assistant\n"
    return case_scorer(suite, case, protocol or suite.protocol or "json", SMOLLM2, messages, prompt)


def _sample(i: int, text: str, stop: str, case_id: str) -> Sample:
    return Sample(case_id, i, i, f"k{i}", "ok", text=text, stop_reason=stop)  # type: ignore[arg-type]


def checks_only(scorer: CaseScorer, samples: list[Sample]) -> float:
    """CPU seconds for exactly what the target names: parse + schema validation + every leak
    detector (on the text and on each argument string), plus degeneration; no argument
    constraints, no check records, no SampleScore."""
    from jsonschema import Draft202012Validator

    validators = {t.name: Draft202012Validator(t.parameters) for t in scorer.suite.tools}

    def one(s: Sample) -> None:
        p = parse_output(s.text, scorer.protocol, eot_tokens=scorer.model.eot_tokens)
        for c in p.calls:
            v = validators.get(c.name)
            if v is not None:
                v.is_valid(c.arguments)
        find_leaks(p.visible_text, scorer.leak_cfg)
        for c in p.calls:
            for a in c.arguments.values():
                if isinstance(a, str):
                    find_leaks(a, scorer.arg_leak_cfg)
        check_degeneration(s.text, stop_reason=s.stop_reason, prompt_text=scorer.prompt_text, cfg=scorer.degen_cfg)

    for s in samples[:100]:
        one(s)
    cpu0 = time.process_time()
    for s in samples:
        one(s)
    return time.process_time() - cpu0


def throughput(scorer: CaseScorer, samples: list[Sample]) -> tuple[float, float, Counter[str]]:
    for s in samples[:100]:  # warm caches (compiled validators, prompt n-grams, power tables)
        scorer.score(s)
    reasons: Counter[str] = Counter()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for s in samples:
        reasons[scorer.score(s).reason or "pass"] += 1
    wall = time.perf_counter() - t0
    return wall, time.process_time() - cpu0, reasons


def per_kind(scorer: CaseScorer, samples: list[Sample], kinds: list[str]) -> dict[str, tuple[int, float, float]]:
    """Per kind of output: count, mean and max microseconds."""
    times: dict[str, list[float]] = {}
    for s, kind in zip(samples, kinds, strict=True):
        t0 = time.perf_counter()
        scorer.score(s)
        times.setdefault(kind, []).append(time.perf_counter() - t0)
    return {k: (len(v), statistics.mean(v) * 1e6, max(v) * 1e6) for k, v in sorted(times.items())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--suite", type=Path, default=ROOT / "suites" / "leader_core.yaml")
    ap.add_argument("--profile", action="store_true", help="cProfile the throughput run (top 25 by own time)")
    ap.add_argument("--skip-adversarial", action="store_true")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    scorer = build_scorer(args.suite)
    generated = [realistic(rng) for _ in range(args.n)]
    kinds = [k for k, _, _ in generated]
    samples = [_sample(i, t, stop, scorer.case.id) for i, (_, t, stop) in enumerate(generated)]
    mean_len = statistics.mean(len(s.text) for s in samples)
    load = os.getloadavg()
    print(
        f"python {sys.version.split()[0]}, one process; {args.n} outputs of ~{mean_len:.0f} chars (seed {args.seed}); "
        f"case {scorer.case.id!r}, protocol {scorer.protocol}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )

    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        throughput(scorer, samples)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)

    wall, cpu, reasons = throughput(scorer, samples)
    n = len(samples)
    print("\n== throughput: CaseScorer.score, one core")
    print(f"{n / wall:,.0f} outputs/s  ({wall / n * 1e6:.1f} us wall, {cpu / n * 1e6:.1f} us CPU per output)")
    print("primary reasons: " + ", ".join(f"{r} {c}" for r, c in reasons.most_common()))
    parts = checks_only(scorer, samples)
    print(
        f"parse + schema validation + leak detectors + degeneration alone: {n / parts:,.0f} outputs/s "
        f"({parts / n * 1e6:.1f} us CPU per output)"
    )
    print("\n== per kind of output              count   mean us    max us")
    for kind, (count, mean_us, max_us) in per_kind(scorer, samples, kinds).items():
        print(f"{kind:<32} {count:>6} {mean_us:>9.1f} {max_us:>9.1f}")

    worst = 0.0
    if not args.skip_adversarial:
        print("\n== adversarial outputs, each scored alone (best of 3)          protocol      chars        ms")
        for name, make in ADVERSARIAL.items():
            text = make(rng)
            for protocol in dict.fromkeys([scorer.protocol, OWN_PROTOCOL.get(name, scorer.protocol)]):
                sc = scorer if protocol == scorer.protocol else build_scorer(args.suite, protocol)
                sample = _sample(0, text, "stop", sc.case.id)
                best = float("inf")
                for _ in range(3):
                    t0 = time.perf_counter()
                    sc.score(sample)
                    best = min(best, time.perf_counter() - t0)
                ms = best * 1e3
                worst = max(worst, ms)
                flag = "  <-- over 100 ms" if ms > 100 else ""
                print(f"{name:<52} {protocol:<9} {len(text):>10,} {ms:>9.1f}{flag}")
        print(f"slowest single output: {worst:.1f} ms")
    rate = n / wall
    ok = n / parts >= 5000 and worst <= 100
    print(
        f"\nverdict: {'OK' if ok else 'CHECK'} (checks {n / parts:,.0f}/s, full CaseScorer {rate:,.0f}/s "
        f"vs 5,000/s target; worst {worst:.1f} ms vs 100 ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
