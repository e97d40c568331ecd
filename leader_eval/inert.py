"""Untrusted text made inert before it is printed, logged in CI or rendered as Markdown.

A model's output, a server's error text, a suite's tag or a golden's quarantine reason is data.
Printed raw it can act: an escape sequence moves the cursor, retitles the terminal or hides a line
(``\\x1b[2K``, OSC ``\\x1b]0;...\\x07``); a bidirectional override reorders what a reader sees; a
line that starts with ``::error ...`` is a GitHub Actions workflow command (``::add-mask::``,
``::stop-commands::``, a fake annotation), one holding ``##[`` a legacy runner command, one holding
``##vso[`` an Azure Pipelines command; in a step summary, ``<img src=...>``, ``**PASS**`` or
``[x](https://...)`` renders as markup.

``inert(text)`` is the one function every printed fragment of such text goes through:

- every character Python's ``repr`` would escape is written as ``repr`` writes it (C0 and C1
  controls, DEL, ESC, bidi embeddings/overrides/isolates U+202A-202E and U+2066-2069, other
  format characters, line and paragraph separators, no-break and other non-ASCII spaces,
  surrogates, private-use and unassigned code points); a backslash is left as it is, so
  ordinary text reads unchanged;
- no line can start a workflow command after the whitespace a runner strips: a leading ``::`` is
  written ``\\x3a:``, and every ``##[`` or ``##vso[`` (the runners look for them anywhere in a
  line, ``vso`` in any case) is written ``\\x23#[`` / ``\\x23#vso[``.

``multiline=True`` keeps ``\\n`` (and only ``\\n``) as a line break and applies the rules to every
line. The result is idempotent: ``inert(inert(x)) == inert(x)``.

``inert_lines(text)`` applies only the line rules, for a composed report whose own escape codes
(the reverse video ``show`` uses on a terminal) must stay; its untrusted fragments went through
``inert`` first. ``markdown(text)`` and ``junit_json(obj)`` make text inert where it is rendered:
a step summary or a pull-request comment, and JUnit properties.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: ``\\`` and ``'`` are the two characters repr escapes that are printable: written back as they are
_REPR_PRINTABLE = re.compile(r"\\([\\'])")
#: a line the GitHub runner (``TrimStart()`` then ``StartsWith("::")``) reads as a command; ``\\s``
#: covers .NET's whitespace, and the zero-width characters older runtimes also trimmed
_LINE_COMMAND = re.compile(r"\A([\s\u180e\u200b\ufeff]*):(?=:)")
#: ``##[`` (GitHub's v1 commands, ``IndexOf`` anywhere in the line) and ``##vso[`` (Azure)
_ANYWHERE_COMMAND = re.compile(r"#(?=#(?:vso)?\[)", re.IGNORECASE)


def _escaped(text: str) -> str:
    """``text`` with every non-printable character written as ``repr`` writes it."""
    return _REPR_PRINTABLE.sub(r"\1", repr(text)[1:-1])


def _guarded(line: str) -> str:
    """One line that no CI runner reads as a command."""
    if "::" in line:
        line = _LINE_COMMAND.sub(r"\1\\x3a", line, count=1)
    if "#" in line:
        line = _ANYWHERE_COMMAND.sub(r"\\x23", line)
    return line


def inert(text: object, *, multiline: bool = False) -> str:
    """``text`` safe to print on a terminal and in a CI log (see the module docstring)."""
    s = text if isinstance(text, str) else str(text)
    parts = s.split("\n") if multiline else [s]
    return "\n".join(_guarded(p if p.isprintable() else _escaped(p)) for p in parts)


def inert_lines(text: str) -> str:
    """``text`` with no line a CI runner would read as a command; its characters unchanged otherwise.

    For composed output whose untrusted fragments are already ``inert`` and whose own escape codes
    must stay. Every kind of line break a runner or ``str.splitlines`` knows is a line start here.
    """
    if "::" not in text and "#" not in text:
        return text
    out = re.split(r"(\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029])", text)
    return "".join(p if i % 2 else _guarded(p) for i, p in enumerate(out))


class GuardedStream:
    """A text stream no line of which a CI runner reads as a command, whoever wrote to it.

    The CLI prints through it (``cli.app.main``): a fragment some print site forgot to make ``inert``
    (a golden's field, a file name, a log record through logging's last-resort handler) still
    cannot start a workflow command. It applies only the line rules (``inert_lines``), so the
    library's own escape codes stay. A command cut between writes (``print(":", ":", sep="")``,
    ``"#"`` then ``"#vso["``) is seen whole: the tail of a write that could still become one is
    held until the next write, or written escaped on ``flush``.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._pending = ""
        self._pending_at_start = True  # does ``_pending`` (or the next write) begin a line?

    def write(self, text: str) -> int:
        if not text:
            return 0
        data, at_start = self._pending + text, self._pending_at_start
        last_break = max(data.rfind(ch) for ch in _LINE_BREAKS)
        line_start = last_break + 1 if last_break >= 0 else (0 if at_start else -1)
        hold = 0
        if line_start >= 0 and _OPEN_LINE_COMMAND.fullmatch(data, line_start):
            hold = len(data) - line_start
        else:
            m = _OPEN_ANYWHERE_COMMAND.search(data)
            hold = len(m.group()) if m else 0
        head = data[: len(data) - hold]
        if head:
            self._stream.write(inert_lines(head) if at_start else inert_lines("x" + head)[1:])
        self._pending_at_start = (line_start == len(head)) if hold else (head[-1] in _LINE_BREAKS)
        self._pending = data[len(head) :]
        return len(text)

    def flush(self) -> None:
        if self._pending:
            # a later write may continue this line: written escaped, it cannot complete a command
            held, self._pending = self._pending, ""
            self._stream.write(held.replace(":", "\\x3a").replace("#", "\\x23"))
            # a line that so far holds only what a runner trims still starts here: ``" "``, flush,
            # ``"::"`` is the line ``" ::"``, a command unless the next write is guarded as a start
            self._pending_at_start = self._pending_at_start and _LINE_LEAD.fullmatch(held) is not None
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


#: every character ``inert_lines`` starts a line after
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: the start of a line that one more ``:`` makes a workflow command
_OPEN_LINE_COMMAND = re.compile(r"[\s\u180e\u200b\ufeff]*:?")
#: what a runner trims before it reads a line
_LINE_LEAD = re.compile(r"[\s\u180e\u200b\ufeff]*")
#: the end of a line that more text makes ``##[`` or ``##vso[``
_OPEN_ANYWHERE_COMMAND = re.compile(r"#(?:#(?:v(?:s(?:o)?)?)?)?\Z", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# Markdown and HTML

#: inline Markdown (CommonMark, GitHub's tables, strikethrough and math) a backslash neutralises
_MD_INLINE = re.compile(r"[\\`*_~\[\]|$]")
#: characters that open a block when they start a list item or heading: a backslash keeps them text
_MD_BLOCK_START = re.compile(r"\A(?:[#+=-]|\d{1,9}(?=[.)]))")
_MD_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9+.-]):(?=//)|(?<=www)\.|@", re.IGNORECASE)


def markdown(text: object) -> str:
    """``text`` as Markdown that renders as exactly that text, on one line, with no markup.

    HTML's ``& < >`` become entities (no tag, comment or autolink ``<...>`` can open), every inline
    Markdown character is backslash-escaped (emphasis, code, strikethrough, math, links, images,
    footnotes, table pipes), a leading block marker (``#``, ``-``, ``+``, ``=``, ``1.``) and leading
    spaces cannot start a heading, list or code block, and bare URLs, ``www.`` and e-mail
    addresses cannot become links. Line breaks and controls are escaped first (``inert``), so the
    text cannot leave its table cell, list item or heading. Not for use inside a code span.
    """
    s = inert(text)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_INLINE.sub(r"\\\g<0>", s)
    s = _MD_AUTOLINK.sub(lambda m: "\\" + m.group(), s)
    stripped = s.lstrip(" ")
    s = "&#32;" * (len(s) - len(stripped)) + stripped
    m = _MD_BLOCK_START.match(s)
    if m:
        s = "\\" + s if not m.group()[0].isdigit() else s[: m.end()] + "\\" + s[m.end() :]
    return s


#: inside a JSON string, what a Markdown or HTML viewer of JUnit XML could act on: the escapes
#: ``\\``, ``\"`` and ``\/`` (a Markdown backslash escape would eat their backslash) and the
#: active characters (``_`` only where it can emphasise, so ``case_id`` stays readable)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_ACTIVE = re.compile(r"\\[\\\"/]|[<>&'`*~|$\[\]()!#:@^{}]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()[-1]):04x}"


def junit_json(obj: Any) -> str:
    """``obj`` as JSON whose every string is inert in a JUnit viewer that renders Markdown or HTML.

    The JSON decodes to the same value (``json.loads(junit_json(x)) == x``): every non-ASCII,
    control and active character is a ``\\uXXXX`` escape, so a Markdown viewer shows the JSON as
    it is written and an HTML one finds no tag or entity.
    """
    text = json.dumps(obj, sort_keys=True, ensure_ascii=True)
    return _JSON_STRING.sub(lambda m: _JSON_ACTIVE.sub(_json_escape, m.group()), text)


# ---------------------------------------------------------------------------------------------
# GitHub workflow commands (the library's own annotations)


def _command_escaped(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def command_data(text: object) -> str:
    """The message of a workflow command: ``inert`` (line breaks kept, the annotation shows them),
    then ``%``, CR and LF escaped as the runner reads them."""
    return _command_escaped(inert(text, multiline=True))


def command_property(text: object) -> str:
    """A property value of a workflow command (a file, a title): one ``inert`` line, then ``%``,
    CR, LF, ``:`` and ``,`` escaped, so it cannot end the property or the command."""
    return _command_escaped(inert(text)).replace(":", "%3A").replace(",", "%2C")


__all__ = ["GuardedStream", "command_data", "command_property", "inert", "inert_lines", "junit_json", "markdown"]
