"""Throughput and worst case of scoring one sample end to end, this tree beside a baseline
(a script, not a test).

    python bench/bench_scoring.py [--n 10000] [--seed 11] [--baseline main] [--rounds 2]

Scores seeded, realistic ~2 KB outputs with ``CaseScorer.score`` (the full per-sample scorer:
parse in the case's protocol plus the lenient diagnostics of every other protocol, schema
validation, argument constraints, every leak detector on the text and on each argument string,
degeneration, the verdict and its record) for the first case of suites/leader_core.yaml, the way
``score_samples`` does: one process, one core. Then times each adversarial output on its own
(best of 3). Targets (issue 10): >= 5,000 outputs/s, and no single output over 100 ms.

The same samples are scored by this tree and by ``--baseline`` (a git ref, extracted with
``git archive`` into a temporary folder; ``--baseline none`` skips it), each in its own worker
process, alternating ``--rounds`` times, so both are measured side by side under the same load.
CPU time (``time.process_time``) is the figure compared: wall time on a shared machine measures
the neighbours.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SPECIAL_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")
EOT_TOKENS = ("<|im_end|>", "<|endoftext|>")
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
    # the rules of the red-team passes (tool calls as text, empty, bracketed slots and labels)
    "1 MB prose then 1,000 tool calls as text": lambda rng: "hello " + "a" * 1_000_000 + " assign_task(agent=1)" * 1000,
    '"\\u200b" * 1000000': lambda rng: "\u200b" * 1_000_000,
    '"[Team Name] Scout\\n" * 55000': lambda rng: "[Team Name] Scout\n" * 55_000,
    '"[   " * 250000': lambda rng: "[   " * 250_000,
    # the leak scanner's per-bracket cost (fourth pass): each opener alone, a letter after it, form
    # labels past the slot budget, HTML tags, placeholders inside code spans
    '"[" * 1000000': lambda rng: "[" * 1_000_000,
    '"[A" * 500000': lambda rng: "[A" * 500_000,
    '"[x] " * 250000': lambda rng: "[x] " * 250_000,
    '"<b>" * 333333': lambda rng: "<b>" * 333_333,
    '"`[GOAL]` " * 111111': lambda rng: "`[GOAL]` " * 111_111,
    '"```\\n[GOAL]\\n```\\n" * 62500': lambda rng: "```\n[GOAL]\n```\n" * 62_500,
    '"[X] y\\n" * 166666': lambda rng: "[X] y\n" * 166_666,
    '"[A-B] " * 166666': lambda rng: "[A-B] " * 166_666,
    # slots in every language (issue 22): each new opener alone and flooded with slots, labels,
    # quotes, fillers and format slots; runs without a closer; the slot budget in other scripts
    '"\uff3b" * 1000000': lambda rng: "\uff3b" * 1_000_000,
    '"\u3010\u4f1a\u793e\u540d\u3011" * 200000': lambda rng: "\u3010\u4f1a\u793e\u540d\u3011" * 200_000,
    '"\u3010\u65e5\u6642\u301111\u6708\n" * 100000': lambda rng: "\u3010\u65e5\u6642\u301111\u6708\n" * 100_000,
    '"\u300c\u6c0f\u540d\u300d\u69d8 " * 166666': lambda rng: "\u300c\u6c0f\u540d\u300d\u69d8 " * 166_666,
    '"\u300c" * 1000000': lambda rng: "\u300c" * 1_000_000,
    '"\u300c\u306f\u3044" * 333333': lambda rng: "\u300c\u306f\u3044" * 333_333,
    '"\u3007" * 1000000': lambda rng: "\u3007" * 1_000_000,
    '"\u3007\u3007\u3055\u3093 " * 200000': lambda rng: "\u3007\u3007\u3055\u3093 " * 200_000,
    '"\u25cb\u25cf" * 500000': lambda rng: "\u25cb\u25cf" * 500_000,
    '"\u00d7" * 1000000': lambda rng: "\u00d7" * 1_000_000,
    '"$GOAL " * 166666': lambda rng: "$GOAL " * 166_666,
    '"$A_" * 333333': lambda rng: "$A_" * 333_333,
    '"%s " * 333333': lambda rng: "%s " * 333_333,
    '"%(" * 500000': lambda rng: "%(" * 500_000,
    '"{0} " * 250000': lambda rng: "{0} " * 250_000,
    '"{0} x " * 166666 (one field, no greeting)': lambda rng: "The set {0} x " * 71_428,
    '"(Your Name) " * 83333': lambda rng: "(Your Name) " * 83_333,
    '"(Your " * 166666': lambda rng: "(Your " * 166_666,
    '"(" * 1000000': lambda rng: "(" * 1_000_000,
    '"[\u0418\u043c\u044f \u043f\u043e\u043b\u0443\u0447\u0430\u0442\u0435\u043b\u044f] " * 55555': lambda rng: (
        "[\u0418\u043c\u044f \u043f\u043e\u043b\u0443\u0447\u0430\u0442\u0435\u043b\u044f] " * 55_555
    ),
    '"Assigned to [OWNER] " * 50000': lambda rng: "Assigned to [OWNER] " * 50_000,
    '"[Namen hier einf\u00fcgen " * 50000': lambda rng: "[Namen hier einf\u00fcgen " * 50_000,
    '"[\u0430" * 500000': lambda rng: "[\u0430" * 500_000,
    # slots in every language, second round: any-script braces and angles, labels mid-line, in
    # headings, tables and bold, kaomoji, combining marks, article and "your" in parentheses
    '"{a" * 500000': lambda rng: "{a" * 500_000,
    '"{x} " * 250000': lambda rng: "{x} " * 250_000,
    '"{ab} " * 200000': lambda rng: "{ab} " * 200_000,
    '"{datum} " * 125000': lambda rng: "{datum} " * 125_000,
    '"<\u0418" * 500000': lambda rng: "<\u0418" * 500_000,
    '"<\u0418\u043c\u044f> " * 166666': lambda rng: "<\u0418\u043c\u044f> " * 166_666,
    '"Zeit: 10 Uhr, [Ort]: M\u00fchle\\n" * 40000': lambda rng: "Zeit: 10 Uhr, [Ort]: M\u00fchle\n" * 40_000,
    '"| [Ort] | M\u00fchle |\\n" * 55000': lambda rng: "| [Ort] | M\u00fchle |\n" * 55_000,
    '"### [Datum] 12.03.\\n" * 55000': lambda rng: "### [Datum] 12.03.\n" * 55_000,
    '"m(\uff3f\uff3f)m " * 125000': lambda rng: "m(\uff3f\uff3f)m " * 125_000,
    '"(" + "\u00d7" * 1000000': lambda rng: "(" + "\u00d7" * 1_000_000,
    '"[\u0928\u093e\u092e" * 250000': lambda rng: "[\u0928\u093e\u092e" * 250_000,
    '"(Il tuo " * 125000': lambda rng: "(Il tuo " * 125_000,
    '"%nombre% " * 111111': lambda rng: "%nombre% " * 111_111,
    '"%a" * 500000': lambda rng: "%a" * 500_000,
    '"X" * 1000000': lambda rng: "X" * 1_000_000,
    '"XXX " * 250000': lambda rng: "XXX " * 250_000,
    '"Dear XXX, " * 100000': lambda rng: "Dear XXX, " * 100_000,
    '"OOO\ub2d8 " * 200000': lambda rng: "OOO\ub2d8 " * 200_000,
    "1 MB Japanese prose with quotes and headings": lambda rng: (
        (
            "\u3010\u304a\u77e5\u3089\u305b\u3011\u300c\u306f\u3044\u300d\u3068\u8a00\u3063\u305f\u3002"
            "\u4e8c\u3007\u4e8c\u3007\u5e74\u306e\u6a4b\u3002\n"
        )
        * 50_000
    ),
    # the suite's own regexes (leakage.forbid, expect.forbid: "\\bclick(ed|ing)?\\b.{0,40}\\b(button|...)")
    # on text built to make a backtracking engine work: ASCII runs in RE2, non-ASCII in the timed
    # engine behind an RE2 prefilter (suite_regex.py)
    '"click " * 166666': lambda rng: "click " * 166_666,
    '"clicked " + " " * 1000000': lambda rng: "clicked " + " " * 1_000_000,
    '"clicking the icon " * 55555': lambda rng: "clicking the icon " * 55_555,
    '"clické button " * 71428': lambda rng: "clické button " * 71_428,
    '"Click" + "\u0130" * 1000000': lambda rng: "Click" + "\u0130" * 1_000_000,
    # every family's tokens (issue 22): the catalogue's literal alternation, the family shapes
    # (asymmetric, namespaced, DSML, MiniMax brackets) and the literal-led tier (harmony recipient,
    # MiniMax, the registry's markup), each flooded or left open
    '"<|turn>" * 140000': lambda rng: "<|turn>" * 140_000,
    '"<turn|" * 166666': lambda rng: "<turn|" * 166_666,
    '"<seed:" * 166666': lambda rng: "<seed:" * 166_666,
    '"<seed:x " + "a" * 1000000': lambda rng: "<seed:x " + "a" * 1_000_000,
    '"<\uff5cDSML\uff5cinvoke " * 66666': lambda rng: "<\uff5cDSML\uff5cinvoke " * 66_666,
    '"<arg_key" * 125000': lambda rng: "<arg_key" * 125_000,
    '"<tool_call:opensource>" * 45000': lambda rng: "<tool_call:opensource>" * 45_000,
    '"]~" * 500000': lambda rng: "]~" * 500_000,
    '"]<]" * 333333': lambda rng: "]<]" * 333_333,
    '"]<]" + "a" * 1000000': lambda rng: "]<]" + "a" * 1_000_000,
    '"to=functions." * 76923': lambda rng: "to=functions." * 76_923,
    '"to=functions.a" + "b" * 1000000': lambda rng: "to=functions.a" + "b" * 1_000_000,
    '"[e~" * 333333': lambda rng: "[e~" * 333_333,
    '"<|tool_call" * 90000': lambda rng: "<|tool_call" * 90_000,
    # the native formats of issue 22 (glm, hunyuan, kimi_k3, deepseek DSML): unclosed values make a
    # value search run to the end of the text, per opening (the lenient scans' budget bounds it)
    '"<tool_call>f<arg_key>k</arg_key><arg_value>" * 30000': lambda rng: (
        "<tool_call>f<arg_key>k</arg_key><arg_value>" * 30_000
    ),
    "1 MB glm calls": lambda rng: "\n".join(
        ["<tool_call>send_message_to_chat<arg_key>message</arg_key><arg_value>Ada, go.</arg_value></tool_call>"]
        * 10_000
    ),
    "Hy3 calls with 40,000 token suffixes": lambda rng: "".join(
        f"<tool_call:s{i}>f<tool_sep:s{i}>" for i in range(40_000)
    ),
    "Kimi K3 unclosed arguments * 12000": lambda rng: (
        '<|open|>call tool="f" index="1"<|sep|><|open|>argument key="k" type="string"<|sep|>' * 12_000
    ),
    "DSML unclosed parameters * 15000": lambda rng: (
        '<\uff5cDSML\uff5cinvoke name="f"><\uff5cDSML\uff5cparameter name="k" string="true">' * 15_000
    ),
    # issue 22 (group c): the native formats' markers, repeated and unclosed, and their parsers' longest runs
    "1 MB deepseek_v3 calls": lambda rng: (
        "<\uff5ctool\u2581calls\u2581begin\uff5c>"
        + (
            "<\uff5ctool\u2581call\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>pause\n```json\n"
            '{"minutes": 5}\n```<\uff5ctool\u2581call\u2581end\uff5c>'
        )
        * 13_000
    ),
    '"[TOOL_CALLS]" * 80000': lambda rng: "[TOOL_CALLS]" * 80_000,
    '"[TOOL_CALLS]f[ARGS]{}" * 50000': lambda rng: "[TOOL_CALLS]f[ARGS]{}" * 50_000,
    '"to=functions." * 70000': lambda rng: "to=functions." * 70_000,
    '"to=functions.f<|channel|>commentary" + " " * 1000000': lambda rng: (
        "to=functions.f<|channel|>commentary" + " " * 1_000_000
    ),
    '"<|tool_call:begin|>" * 50000': lambda rng: "<|tool_call:begin|>" * 50_000,
    '"<|START_ACTION|>[" * 50000': lambda rng: "<|START_ACTION|>[" * 50_000,
    "a 1,000-letter word": lambda rng: "a" * 1000,
    "1 MB letters": lambda rng: "a" * 1_000_000 + "!",
    # issue 22's native formats (group d): their worst cases, in their own protocol and under json
    # (every failed output runs every lenient scan)
    "1 MB Gemma 4 call of tiny values": lambda rng: (
        "<|tool_call>call:a{" + ",".join(f"k{i}:1" for i in range(100_000)) + "}<tool_call|>"
    ),
    '"<|tool_call>call:a{s:<|"|>" * 40000': lambda rng: '<|tool_call>call:a{s:<|"|>' * 40_000,
    '"<|tool_call>call:a{k:{" * 50000': lambda rng: "<|tool_call>call:a{" + "k:{" * 50_000,
    '"<function=a>{"s": "" * 50000': lambda rng: '<function=a>{"s": "' * 50_000,
    '"<|tool_call_start|>[a(" * 60000': lambda rng: "<|tool_call_start|>[a(" * 60_000,
    '"<tool_calls>[" * 80000': lambda rng: "<tool_calls>[" * 80_000,
    '"function call<|role_sep|>{" * 40000': lambda rng: "function call<|role_sep|>{" * 40_000,
    # the XML-style and MiniMax formats (issue 22): parameters read one by one in Python, bounded
    # per output (protocols/_xml.py), Python literals bounded per output (protocols/_values.py)
    '"<function=f><parameter=a>x" * 38000': lambda rng: "<function=f><parameter=a>x" * 38_000,
    "4,096 XML parameters in one call (the most one output may hold)": lambda rng: (
        "<tool_call>\n<function=f>\n"
        + "".join(f"<parameter=k{i}>\nv\n</parameter>\n" for i in range(4096))
        + "</function>\n</tool_call>"
    ),
    "256 Seed-OSS calls of 4 KB Python-literal objects": lambda rng: (
        (
            "<seed:tool_call>\n<function=send_message_to_chat>\n<parameter=message>"
            + str({f"k{i}": ["a b", i, None] for i in range(150)})
            + "</parameter>\n</function>\n</seed:tool_call>\n"
        )
        * 256
    ),
    '"<minimax:tool_call><invoke name=a><parameter name=b>" * 17800': lambda rng: (
        '<minimax:tool_call><invoke name="a"><parameter name="b">' * 17_800
    ),
    '"]<]minimax[>[<b>" * 62000 in an invoke': lambda rng: (
        ']<]minimax[>[<tool_call>]<]minimax[>[<invoke name="a">' + "]<]minimax[>[<b>" * 62_000
    ),
    '"<function name=a><param name=b><![CDATA[" * 22700': lambda rng: (
        '<function name="a"><param name="b"><![CDATA[' * 22_700
    ),
    '"to=a<|message|><atem:function_calls>" * 27700': lambda rng: "to=a<|message|><atem:function_calls>" * 27_700,
    '"<tool_calls>{\\"name\\": " * 50000': lambda rng: '<tool_calls>{"name": ' * 50_000,
    # call tags in every spelling and the tokens that are also writing (red team, issue 22 point 3)
    '"<call>" * 166666': lambda rng: "<call>" * 166_666,
    '"<call>a" * 140000': lambda rng: "<call>a" * 140_000,
    '"}</call>" * 125000': lambda rng: "}</call>" * 125_000,
    '"<tools> [ {" * 90000': lambda rng: "<tools> [ {" * 90_000,
    '"List<ToolCall" * 70000': lambda rng: "List<ToolCall" * 70_000,
    '"<tool-call " + 199 x, * 5000': lambda rng: ("<tool-call " + "x" * 199) * 5_000,
    '"<s>x</s>" * 125000': lambda rng: "<s>x</s>" * 125_000,
    '"<s>" + 190 letters + "</s>", * 5000': lambda rng: ("<s>" + "a" * 190 + "</s>") * 5_000,
    '"[IMG] a\\n" * 125000': lambda rng: "[IMG] a\n" * 125_000,
    '"x <sep> y " * 100000': lambda rng: "x <sep> y " * 100_000,
}
# inputs also scored under the protocol whose parser they stress (the case's own is json); a
# protocol the tree does not know (a baseline before it) is timed on the new tree only
OWN_PROTOCOL = {
    "1 MB pythonic list of calls": "pythonic",
    "1 MB hermes calls": "hermes",
    "1 MB Gemma 4 call of tiny values": "gemma4",
    '"<|tool_call>call:a{s:<|"|>" * 40000': "gemma4",
    '"<|tool_call>call:a{k:{" * 50000': "gemma4",
    '"<function=a>{"s": "" * 50000': "functionary",
    '"<|tool_call_start|>[a(" * 60000': "lfm2",
    '"<tool_calls>[" * 80000': "apriel",
    '"function call<|role_sep|>{" * 40000': "gigachat3",
    '"<tool_call>f<arg_key>k</arg_key><arg_value>" * 30000': "glm",
    "1 MB glm calls": "glm",
    "Hy3 calls with 40,000 token suffixes": "hunyuan",
    "Kimi K3 unclosed arguments * 12000": "kimi_k3",
    "DSML unclosed parameters * 15000": "deepseek_v4",
    '"<function=f><parameter=a>x" * 38000': "qwen3_coder",
    "4,096 XML parameters in one call (the most one output may hold)": "qwen3_coder",
    "256 Seed-OSS calls of 4 KB Python-literal objects": "seed_oss",
    '"<minimax:tool_call><invoke name=a><parameter name=b>" * 17800': "minimax_m2",
    '"]<]minimax[>[<b>" * 62000 in an invoke': "minimax_m3",
    '"<function name=a><param name=b><![CDATA[" * 22700': "minicpm5",
    '"to=a<|message|><atem:function_calls>" * 27700': "muse_glimmer",
    '"<tool_calls>{\\"name\\": " * 50000': "minimax_m1",
    "1 MB deepseek_v3 calls": "deepseek_v3",
    '"[TOOL_CALLS]" * 80000': "mistral",
    '"[TOOL_CALLS]f[ARGS]{}" * 50000': "mistral_v11",
    '"to=functions." * 70000': "harmony",
    '"to=functions.f<|channel|>commentary" + " " * 1000000': "harmony",
    '"<|tool_call:begin|>" * 50000': "solar_open",
    '"<|START_ACTION|>[" * 50000': "command_r",
}


def _known_protocols() -> tuple[str, ...]:
    """The protocols of whichever leader_eval is first on sys.path."""
    return tuple(importlib.import_module("leader_eval.protocols").PROTOCOLS)


def build_scorer(suite_path: Path, protocol: str | None = None) -> Any:
    """The case scorer of whichever leader_eval is first on sys.path (this tree or a baseline, of the
    0.3 layout or the flat one before it)."""
    import leader_eval

    # the 0.3 layout (issue 21) or the flat one before it, told by the tree itself: the venv's
    # editable install would otherwise answer a name the tree lacks from this repository
    layout_03 = (Path(leader_eval.__file__).parent / "scoring").is_dir()
    scorer_module = importlib.import_module("leader_eval.scoring.scorer" if layout_03 else "leader_eval.score")
    ModelInfo, case_scorer = scorer_module.ModelInfo, scorer_module.case_scorer
    load_suite = importlib.import_module("leader_eval.suite.load" if layout_03 else "leader_eval.suite").load_suite
    render_messages = importlib.import_module(
        "leader_eval.suite.render" if layout_03 else "leader_eval.render"
    ).render_messages

    suite = load_suite(suite_path)
    case = suite.cases[0]
    messages = render_messages(suite, case)
    prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    prompt += "<|im_start|>assistant\n"
    model = ModelInfo(special_tokens=SPECIAL_TOKENS, eot_tokens=EOT_TOKENS)
    return case_scorer(suite, case, protocol or suite.protocol or "json", model, messages, prompt)


def _sample(i: int, text: str, stop: str, case_id: str) -> Any:
    from leader_eval.types import Sample

    return Sample(case_id, i, i, f"k{i}", "ok", text=text, stop_reason=stop)  # type: ignore[arg-type]


def throughput(scorer: Any, samples: list[Any]) -> tuple[float, float, Counter[str]]:
    for s in samples[:100]:  # warm caches (compiled validators, prompt n-grams, power tables)
        scorer.score(s)
    reasons: Counter[str] = Counter()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for s in samples:
        reasons[scorer.score(s).reason or "pass"] += 1
    wall = time.perf_counter() - t0
    return wall, time.process_time() - cpu0, reasons


def per_kind(scorer: Any, samples: list[Any], kinds: list[str]) -> dict[str, tuple[int, float, float]]:
    """Per kind of output: count, mean and max microseconds."""
    times: dict[str, list[float]] = {}
    for s, kind in zip(samples, kinds, strict=True):
        t0 = time.perf_counter()
        scorer.score(s)
        times.setdefault(kind, []).append(time.perf_counter() - t0)
    return {k: (len(v), statistics.mean(v) * 1e6, max(v) * 1e6) for k, v in sorted(times.items())}


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """Measure the leader_eval first on sys.path; return the figures (printed as JSON)."""
    rng = random.Random(args.seed)
    scorer = build_scorer(args.suite)
    generated = [realistic(rng) for _ in range(args.n)]
    kinds = [k for k, _, _ in generated]
    samples = [_sample(i, t, stop, scorer.case.id) for i, (_, t, stop) in enumerate(generated)]
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        throughput(scorer, samples)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    wall, cpu, reasons = throughput(scorer, samples)
    from leader_eval.checks import degeneration

    out: dict[str, Any] = {
        "ngram_counter": "compiled" if getattr(degeneration, "_compiled", None) is not None else "python",
        "n": len(samples),
        "mean_chars": statistics.mean(len(s.text) for s in samples),
        "cpu_per_output_us": cpu / len(samples) * 1e6,
        "wall_per_output_us": wall / len(samples) * 1e6,
        "reasons": dict(reasons.most_common()),
        "per_kind": per_kind(scorer, samples, kinds),
        "adversarial": {},
    }
    if not args.skip_adversarial:
        known = _known_protocols()
        for name, make in ADVERSARIAL.items():
            text = make(rng)
            for protocol in dict.fromkeys([scorer.protocol, OWN_PROTOCOL.get(name, scorer.protocol)]):
                if protocol not in known:
                    continue
                sc = scorer if protocol == scorer.protocol else build_scorer(args.suite, protocol)
                sample = _sample(0, text, "stop", sc.case.id)
                best = float("inf")
                for _ in range(3):
                    t0 = time.perf_counter()
                    sc.score(sample)
                    best = min(best, time.perf_counter() - t0)
                out["adversarial"][f"{name} [{protocol}]"] = (len(text), best * 1e3)
    return out


def _known_protocols() -> tuple[str, ...]:
    """The protocols of whichever leader_eval is first on sys.path."""
    return tuple(getattr(importlib.import_module("leader_eval.protocols"), "PROTOCOLS", ()))


def _extract(ref: str, into: Path) -> Path:
    """``git archive REF`` of this repository, unpacked into ``into``, its compiled module (if it
    has one) built in place as the install builds it: a baseline is measured as users run it."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    tar_path = into / "tree.tar"
    tar_path.write_bytes(data)
    tree = into / "tree"
    with tarfile.open(tar_path) as tar:
        tar.extractall(tree, filter="data")
    # the compiled counter's home: leader_eval/checks/ since 0.3, the package's top before
    homes = (tree / "leader_eval" / "checks" / "_ngrams.pyx", tree / "leader_eval" / "_ngrams.pyx")
    pyx = next((p for p in homes if p.exists()), homes[0])
    if pyx.exists():  # built apart from the tree: Cython's command would read its pyproject.toml
        build = into / "ngrams-build"
        build.mkdir()
        shutil.copy(pyx, build)
        cmd = [sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", "-3", "_ngrams.pyx"]
        got = subprocess.run(cmd, cwd=build, capture_output=True, text=True)
        if got.returncode != 0:  # measured anyway, and it says "n-grams: python" beside its figure
            print(f"warning: {ref}'s n-gram counter not built (pip install cython?): {got.stderr.strip()[-200:]}")
        for so in build.glob("_ngrams.*.so"):
            shutil.copy(so, pyx.parent)
    return tree


def _run_worker(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--n", str(args.n), "--seed", str(args.seed)]
    # each tree scores its own copy of a suite of this repository: a newer suite may carry keys an
    # older tree's schema refuses (gate: underpowered), none of which change what scoring does
    suite = Path(args.suite).resolve()
    if suite.is_relative_to(ROOT) and (tree / suite.relative_to(ROOT)).is_file():
        suite = tree / suite.relative_to(ROOT)
    cmd += ["--suite", str(suite)] + (["--skip-adversarial"] if args.skip_adversarial else [])
    cmd += ["--profile"] if args.profile else []
    env = {**os.environ, "PYTHONPATH": str(tree)}
    got = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if got.returncode != 0:  # the worker's own traceback, not only "exit status 1"
        raise SystemExit(f"worker for {tree} failed (exit {got.returncode}):\n{got.stderr.strip()[-3000:]}")
    if got.stderr.strip():
        print(got.stderr, file=sys.stderr)
    result: dict[str, Any] = json.loads(got.stdout)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--suite", type=Path, default=ROOT / "suites" / "leader_core.yaml")
    ap.add_argument("--baseline", default="main", help="git ref to measure beside this tree; 'none' to skip")
    ap.add_argument("--rounds", type=int, default=2, help="alternating runs per tree; the best is reported")
    ap.add_argument("--profile", action="store_true", help="cProfile the throughput run (top 25 by own time)")
    ap.add_argument("--skip-adversarial", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return 0

    pyx = ROOT / "leader_eval" / "checks" / "_ngrams.pyx"
    built = list(pyx.parent.glob("_ngrams.*.so"))
    if pyx.exists() and (not built or max(b.stat().st_mtime for b in built) < pyx.stat().st_mtime):
        print("warning: leader_eval/checks/_ngrams is not built or older than its .pyx: pip install -e . first")
    load = os.getloadavg()
    print(
        f"python {sys.version.split()[0]}, one process per tree; {args.n} outputs (seed {args.seed}); "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-scoring-") as tmp:
        trees = {"this tree": ROOT}
        if args.baseline != "none":
            trees[args.baseline] = _extract(args.baseline, Path(tmp))
        best: dict[str, dict[str, Any]] = {}
        for _ in range(max(1, args.rounds)):
            for label, tree in trees.items():
                r = _run_worker(tree, args)
                if label not in best or r["cpu_per_output_us"] < best[label]["cpu_per_output_us"]:
                    best[label] = r
                # the worst case is a property of the input: keep each input's best of all rounds
                for k, v in r["adversarial"].items():
                    best[label]["adversarial"][k] = min(best[label]["adversarial"].get(k, v), v, key=lambda x: x[1])

    labels = list(trees)
    print("\n== throughput: CaseScorer.score, one core (best round, CPU time)")
    for label in labels:
        r = best[label]
        print(
            f"{label:<12} {1e6 / r['cpu_per_output_us']:>8,.0f} outputs/s  ({r['cpu_per_output_us']:.1f} us CPU, "
            f"{r['wall_per_output_us']:.1f} us wall per output; ~{r['mean_chars']:.0f} chars; "
            f"n-grams: {r.get('ngram_counter', 'python')})"
        )
    if len(labels) == 2:
        a, b = (best[x]["cpu_per_output_us"] for x in labels)
        print(f"speed-up over {labels[1]}: {b / a:.2f}x")
    print("primary reasons (this tree): " + ", ".join(f"{k} {v}" for k, v in best[labels[0]]["reasons"].items()))
    print("\n== per kind of output: max us" + "".join(f"  {x:>12}" for x in labels))
    for kind in best[labels[0]]["per_kind"]:
        print(f"{kind:<32}" + "".join(f"  {best[x]['per_kind'].get(kind, (0, 0, 0))[2]:>12.1f}" for x in labels))
    worst = {x: max((v[1] for v in best[x]["adversarial"].values()), default=0.0) for x in labels}
    if not args.skip_adversarial:
        print("\n== adversarial outputs, each scored alone (ms, best of 3)" + "".join(f"  {x:>10}" for x in labels))
        for name, (chars, _) in best[labels[0]]["adversarial"].items():
            row = "".join(f"  {best[x]['adversarial'].get(name, (0, float('nan')))[1]:>10.1f}" for x in labels)
            print(f"{name:<64} {chars:>10,}{row}")
        print("slowest single output: " + ", ".join(f"{x} {worst[x]:.1f} ms" for x in labels))
    rate = 1e6 / best[labels[0]]["cpu_per_output_us"]
    ok = rate >= 5000 and worst[labels[0]] <= 100
    print(f"\nverdict: {'OK' if ok else 'CHECK'} ({rate:,.0f}/s vs 5,000/s; worst {worst[labels[0]]:.1f} ms vs 100 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
