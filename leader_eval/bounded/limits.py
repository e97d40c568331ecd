"""Resource bounds for untrusted input: suite files, scaffold templates, chat templates, regexes.

A suite file, a scaffold template, a GGUF's chat template and a server's template are all written
by someone other than the person running the evaluation. None of them may hang the process, grow
its memory without bound, or reach a file outside the suite root. Every bound here ends in a
``LimitExceeded`` with a one-line message; callers add the file and line.

This module holds the numbers and the exception only; the code that enforces them lives beside
its engine (regex.py, sandbox.py) or its reader (suite/files.py, suite/yaml_source.py, ...) and
imports them from here.

Bounds and their defaults (docs/security.md lists them too):

- Rendering (scaffold and chat templates; sandbox.py says how each holds by construction):
  ``MAX_RENDER_SECONDS`` wall-clock per render, ``MAX_RENDER_OUTPUT`` characters of output (also
  any captured block or macro result), ``MAX_RENDER_VALUE`` characters in the text of any one value
  an operation reads or builds, integer arguments and widths up to ``MAX_RENDER_VALUE``, integers
  up to ``MAX_INT_BITS`` bits, ``range`` up to jinja2's 100,000 items, Python's recursion limit
  for macros, ``MAX_RENDER_WORK_FACTOR * MAX_RENDER_VALUE`` characters measured in all, and
  ``MAX_RENDER_MEMORY_GROWTH`` bytes of resident memory growth while a render runs.
- Data files a suite takes cases from (suite/data_cases.py): ``MAX_DATA_CASES`` cases in all,
  ``MAX_DATA_FILE_BYTES`` per file, ``MAX_DATA_DECODED_BYTES`` declared decoded columnar data,
  ``MAX_DATA_RECORD_CHARS`` per record and ``MAX_DATA_FIELD_CHARS`` per text value, nesting
  up to ``MAX_YAML_DEPTH``.
- Regular expressions a suite supplies (regex.py): at most ``MAX_REGEX_CHARS`` characters;
  patterns shaped to backtrack catastrophically are refused at load time; the rest run in RE2
  (linear time) or, where RE2 cannot give Python's answer, with ``MAX_REGEX_SECONDS`` per search.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- the numbers

MAX_SUITE_BYTES = 8 * 2**20
#: the longest prompt a stress sweep fits filler to, in the model's tokens (fitting renders and
#: tokenizes prompts of that size; a million-token context is past every model in the fixtures)
MAX_STRESS_TOKENS = 262_144
MAX_TEMPLATE_BYTES = 2**20
MAX_YAML_NODES = 200_000  # after alias expansion
MAX_YAML_ALIASES = 1_000
MAX_YAML_DEPTH = 64
MAX_YAML_EXPANDED_CHARS = 32 * 2**20
MAX_REF_FILES = 64

#: cases a suite takes from data files (``cases_from:``), all its files together
MAX_DATA_CASES = 100_000
#: one data file (a JSONL, CSV or Parquet file, one Arrow file of a saved dataset), read in full
MAX_DATA_FILE_BYTES = 64 * 2**20
#: what a Parquet file or a saved dataset's Arrow files declare they decode to, all together
MAX_DATA_DECODED_BYTES = 256 * 2**20
#: one record (a JSONL line, a CSV record, a row of a columnar file as JSON), in characters
MAX_DATA_RECORD_CHARS = 2**20
#: one text value of a record (Python's csv module refuses a longer field by default too)
MAX_DATA_FIELD_CHARS = 131_072

MAX_RENDER_SECONDS = 4.0
MAX_RENDER_OUTPUT = 8_000_000
MAX_RENDER_VALUE = 4_000_000
MAX_RENDER_MEMORY_GROWTH = 512 * 2**20
MAX_INT_BITS = 64 * 1024
MAX_JSON_INDENT = 64
MAX_RENDER_WORK_FACTOR = 64  # a render may measure 64 times MAX_RENDER_VALUE characters in all

MAX_REGEX_CHARS = 2_000
MAX_REGEX_SECONDS = 0.05  # per search of a pattern RE2 cannot run (regex.py); over it: a failing verdict
#: what compiling one suite pattern may cost: character-class ranges times the counts of the repeats
#: around them (RE2 writes ``x{n,m}`` out m times, the regex module ``x{n}`` n times, each class as
#: its ranges): ``\w{1000}`` (1.1 s and 64 MB in RE2) and ``a{10000000}`` (7 s, 2.7 GB in regex) are over it
MAX_REGEX_PROGRAM = 200_000

#: samples per case (the suite format's own maximum, and --samples / RunOptions.samples)
MAX_SAMPLES_PER_CASE = 100_000
#: samples one run plans, cases x samples per case (a shard is a run: --shard splits a bigger one)
MAX_RUN_SAMPLES = 1_000_000


class LimitExceeded(Exception):
    """An input went past one of the bounds above; the message is one line."""
