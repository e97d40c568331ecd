"""A sweep of hostile suite files through ``leader-eval lint`` in a child process.

Each file is written by someone who wants to hang, crash or read from the machine running the
evaluation. Every one must end the same way: exit status 2 within 10 s, under 1 GB of address
space, one line on stderr naming the file (and line), no traceback, nothing on stdout.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import MINIMAL_SUITE, ROOT

M = MINIMAL_SUITE
REQUEST = 'content: "{{ request }}"'
MESSAGE = "message: {type: string, minLength: 1}"
MEMORY_LIMIT = 2**30
FIXTURE = "fixtures:\n  - {{tool: send_message_to_chat, match_schema: {{$ref: '{ref}'}}, result: ok}}\n"


def _lol(levels: int = 9) -> str:
    """The billion laughs: nine levels of nine aliases each."""
    out = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for i in range(1, levels):
        prev, cur = chr(96 + i), chr(97 + i)
        out += f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
    return out


def _scaffold(template: str) -> str:
    return M.replace(REQUEST, "content: " + repr(template).replace("\\\\", "\\"))


def _with_template_file(data: bytes | None, link_to: str | None = None) -> Callable[[Path], None]:
    """A suite whose system message is ``file: t.j2``, with that file's bytes or a symlink."""

    def write(path: Path) -> None:
        target = path.parent / "t.j2"
        if link_to is not None:
            target.symlink_to(link_to)
        elif data is not None:
            target.write_bytes(data)
        path.write_text(M.replace(REQUEST, "file: t.j2"))

    return write


HOSTILE: dict[str, str | bytes | Callable[[Path], None]] = {
    # item 5 / 16: YAML
    "billion_laughs": _lol() + M,
    "billion_laughs_in_vars": M.replace(
        "defaults:\n  vars: {agent_name: Mira}",
        "defaults:\n  vars:\n    agent_name: Mira\n    " + _lol().replace("\n", "\n    "),
    ),
    "recursive_anchor": "loop: &a [*a]\n" + M,
    "recursive_anchor_mapping": "loop: &a {self: *a}\n" + M,
    "undefined_alias": "x: *nowhere\n" + M,
    "merge_key": M.replace(
        "defaults:\n  vars: {agent_name: Mira}", "base: &b {agent_name: Mira}\ndefaults:\n  vars:\n    <<: *b"
    ),
    "date_in_tool_schema": M.replace("required: [message]", "required: [message]\n      default: 2024-01-01"),
    "timestamp_in_vars": M.replace(
        "vars: {agent_name: Mira}", "vars: {agent_name: Mira, when: 2001-12-14t21:59:43.10-05:00}"
    ),
    "binary_value": M.replace("vars: {agent_name: Mira}", "vars: {agent_name: !!binary aGVsbG8=}"),
    "python_tag": M.replace("vars: {agent_name: Mira}", "vars: {agent_name: !!python/object:os.system [ls]}"),
    "set_tag": M.replace("vars: {agent_name: Mira}", "vars: !!set {agent_name}"),
    "utf16_with_bom": M.encode("utf-16"),
    "utf16_without_bom": M.encode("utf-16-le"),
    "utf32": M.encode("utf-32"),
    "latin1": M.replace("Post to the room.", "Post to the r\u00f6om.").encode("latin-1"),
    "null_byte": M.replace("name: mini", "name: mi\0ni"),
    "tab_indent": M.replace("  messages:", "\tmessages:"),
    "duplicate_key": M.replace("protocol: json\n", "protocol: json\nprotocol: hermes\n"),
    "two_documents": M + "---\n" + M,
    "empty_file": "",
    "only_comments": "# nothing here\n",
    "top_level_list": "- 1\n- 2\n",
    "deep_flow_nesting": "x: " + "[" * 100_000 + "]" * 100_000 + "\n" + M,
    "deep_block_nesting": "x:\n" + "".join(" " * (i + 1) + "- \n" for i in range(2000)) + M,
    "huge_string": M.replace("description: a minimal suite for tests", "description: " + "x" * (9 * 2**20)),
    "million_cases": M + "".join(f"  - id: c{i}\n" for i in range(1_000_000)),
    "huge_integer": M.replace("samples: 2", "samples: " + "9" * 5000),
    "complex_key": M.replace("protocol: json", "? [a, b]\n: json"),
    "directory": lambda p: p.mkdir(),
    "unreadable": lambda p: (p.write_text(M), p.chmod(0)),
    # item 14: values that change the measurement
    "nan_temperature": M.replace("temperature: 0.7", "temperature: .nan"),
    "inf_temperature": M.replace("temperature: 0.7", "temperature: .inf"),
    "nan_top_p": M.replace("temperature: 0.7", "temperature: 0.7, top_p: .NaN"),
    "nan_weight": M.replace("  - id: hello\n", "  - id: hello\n    weight: .nan\n"),
    "negative_samples": M.replace("samples: 2", "samples: -1"),
    "zero_max_tokens": M.replace("max_tokens: 48", "max_tokens: 0"),
    # item 1: files outside the suite root
    "proc_self_environ": M.replace(REQUEST, "file: /proc/self/environ"),
    "relative_traversal": M.replace(REQUEST, "file: " + "../" * 30 + "proc/self/environ"),
    "home_path": M.replace(REQUEST, "file: ~/.bashrc"),
    "nul_in_path": M.replace(REQUEST, 'file: "a\\0b.j2"'),
    "template_symlink_out": _with_template_file(None, link_to="/etc/hostname"),
    "template_file_utf16": _with_template_file("{{ request }}".encode("utf-16")),
    "template_file_latin1": _with_template_file("{{ request }} caf\u00e9".encode("latin-1")),
    "template_file_huge": _with_template_file(b"x" * (2**20 + 10)),
    "template_file_is_dir": lambda p: ((p.parent / "t.j2").mkdir(), p.write_text(M.replace(REQUEST, "file: t.j2"))),
    # item 3: tool-contract $ref
    "ref_https": M.replace(MESSAGE, "message: {$ref: 'https://example.com/schema.json'}"),
    "ref_file_url": M.replace(MESSAGE, "message: {$ref: 'file:///etc/passwd'}"),
    "ref_absolute_path": M.replace(MESSAGE, "message: {$ref: '/etc/passwd'}"),
    "ref_traversal": M.replace(MESSAGE, "message: {$ref: '" + "../" * 30 + "etc/passwd'}"),
    "ref_via_id": M.replace(MESSAGE, "message: {$ref: 'x.json'}\n      $id: 'https://example.com/'"),
    "ref_dynamic": M.replace(MESSAGE, "message: {$dynamicRef: '#meta'}"),
    "ref_missing_pointer": M.replace(MESSAGE, "message: {$ref: '#/$defs/nope'}"),
    "ref_cycle": M.replace(
        MESSAGE,
        "message: {$ref: '#/$defs/a'}\n      $defs:\n        a: {$ref: '#/$defs/b'}\n        b: {allOf: [{$ref: '#/$defs/a'}]}",
    ),
    "ref_self": M.replace(MESSAGE, "message: {$ref: '#/properties/message'}"),
    # issue 20: every schema a suite carries goes through the same loader (tests/suite/test_tool_schema.py)
    "returns_ref_https": M.replace(
        "additionalProperties: false", "additionalProperties: false\n    returns: {$ref: 'https://example.com/r.json'}"
    ),
    "match_schema_ref_file_url": M.replace("defaults:", FIXTURE.format(ref="file:///etc/passwd") + "defaults:"),
    "match_schema_ref_proc_environ": M.replace("defaults:", FIXTURE.format(ref="/proc/self/environ") + "defaults:"),
    "match_schema_ref_relative": M.replace("defaults:", FIXTURE.format(ref="other.json#/x") + "defaults:"),
    # item 15: templates and patterns without limits
    "template_range": _scaffold("{% for i in range(10**9) %}x{% endfor %}"),
    "template_nested_loops": _scaffold(
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    ),
    "template_str_times": _scaffold("{{ 'x' * 10**10 }}"),
    "template_center": _scaffold("{{ 'x'.center(10**10) }}"),
    "template_center_filter": _scaffold("{{ 'x' | center(9999999999) }}"),
    "template_indent": _scaffold("{{ ('a\\n' * 100000) | indent(1000) }}"),
    "template_tojson_indent": _scaffold("{{ tools | tojson(indent=10**8) }}"),
    "template_recursive_macro": _scaffold("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
    "template_doubling": _scaffold(
        "{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x }}"
    ),
    "template_block_doubling": _scaffold(
        "{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set y %}{{ ns.x }}{{ ns.x }}{% endset %}{% set ns.x = y %}{% endfor %}"
    ),
    "template_huge_output": _scaffold(
        "{% for i in range(99999) %}{% for j in range(999) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}"
    ),
    "template_bigint": _scaffold(
        "{% set ns = namespace(x=10) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}{{ ns.x }}"
    ),
    "template_power": _scaffold("{{ 9 ** 9999999999 }}"),
    "template_format_width": _scaffold("{{ '{:>9999999999}'.format('x') }}"),
    "template_percent_width": _scaffold("{{ '%9999999999s' % 'x' }}"),
    "template_replace_growth": _scaffold(
        "{% set ns = namespace(x='aa') %}{% for i in range(40) %}{% set ns.x = ns.x.replace('a', 'aaaa') %}{% endfor %}"
    ),
    "template_deep_parens": _scaffold("{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}"),
    "template_sandbox_escape": _scaffold("{{ ''.__class__.__mro__[1].__subclasses__() }}"),
    "redos_nested_quantifier": M.replace("defaults:", "render:\n  placeholder_patterns: ['(a+)+$']\ndefaults:"),
    "redos_alternation": M.replace("defaults:", "leakage:\n  forbid: ['(a|aa)*c']\ndefaults:"),
    "redos_in_expect": M.replace("message: {mentions_goal: true}", "message: {regex: '^(\\w+\\s?)*$'}"),
    "regex_too_long": M.replace("defaults:", "render:\n  placeholder_patterns: ['" + "a" * 5000 + "']\ndefaults:"),
}


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_suite_exits_2_with_one_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.yaml"
    content = HOSTILE[name]
    if callable(content):
        content(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LEADER_EVAL_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "leader_eval", "lint", "--no-tokens", str(path)],
        capture_output=True,
        text=True,
        timeout=10,
        preexec_fn=_limit_memory,
        env=env,
        cwd=tmp_path,
    )
    if name == "unreadable" and os.geteuid() == 0:
        path.chmod(0o600)  # root reads anything: then it is just a valid suite
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    # names the suite, or the referenced file that is wrong (a template beside it)
    assert lines[0].startswith((f"error: {path}", f"error: {path.parent}/t.j2")), lines[0]
    assert len(lines[0]) < 600, lines[0]


def test_the_sweep_covers_every_item() -> None:
    """The kinds the issue names are all in the sweep (guards against a shrinking list)."""
    for kind in (
        "billion_laughs",
        "recursive_anchor",
        "merge_key",
        "date_in_tool_schema",
        "utf16_with_bom",
        "proc_self_environ",
        "ref_https",
        "ref_file_url",
        "ref_via_id",
        "ref_dynamic",
        "ref_missing_pointer",
        "ref_cycle",
        "template_range",
        "template_nested_loops",
        "template_str_times",
        "template_center",
        "template_indent",
        "template_tojson_indent",
        "template_recursive_macro",
        "redos_nested_quantifier",
        "nan_temperature",
        "nan_top_p",
        "nan_weight",
        "negative_samples",
        "million_cases",
        "directory",
    ):
        assert kind in HOSTILE
