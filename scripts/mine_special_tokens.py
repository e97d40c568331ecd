"""Mine the special and control tokens of every chat template in fixtures/chat_templates/ into
leader_eval/checks/special_tokens_catalogue.py (the leak detector's catalogue; issue 22).

    python scripts/mine_special_tokens.py            # rewrite the catalogue
    python scripts/mine_special_tokens.py --check    # exit 1 when the committed one is stale

Templates build many tokens from pieces (``'<' + dsml_token + 'invoke name="'``,
``'<tool_call{}>'.format(HYTK)``, ``ns_token ~ '<tool_call>'``), so the template's string
variables and concatenations are evaluated first (string literals and names only, never a call
of anything), and the raw text and every evaluated string are searched for token shapes.

Only token-shaped strings are kept, never role words (``User:``, ``assistant``): the bar tokens
``<|x|>`` and ``<｜x｜>``, Gemma 4's asymmetric ``<|x>`` / ``<x|>``, namespaced tags (``<seed:x>``,
``<x:opensource>``, ``<｜DSML｜x>``), upper-case bracket words (``[INST]``, ``[gMASK]``), MiniMax's
bracket tokens (``]~b]``, ``]<]x[>[``), snake-case tags with a boundary word (``<end_of_sentence>``,
``<tool_sep>``, ``<im_patch>``) or a call-part word (``<arg_key>``), and upper-case angle tags that
name a token or a tool (``<REKA_IMG_TOKEN>``, ``<TOOLCALL>``). Prompt section tags of a system
prompt (``<ROLE>``, ``<available_tools>``, ``<b>``) are not tokens.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "fixtures" / "chat_templates"
OUT = ROOT / "leader_eval" / "checks" / "special_tokens_catalogue.py"

# --- evaluating the template's strings ---------------------------------------------------------
_LEX = re.compile(
    r"""(?P<str>'(?:[^'\\\n]|\\.){0,400}'|"(?:[^"\\\n]|\\.){0,400}")"""
    r"|(?P<fmt>\.format\(\s*(?P<arg>[A-Za-z_]\w*)\s*\))"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op>[+~])"
    r"|(?P<ws>\s+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
_SET = re.compile(r"\{%-?\s*set\s+([A-Za-z_]\w*)\s*=\s*(.{1,400}?)\s*-?%\}")


def _unquote(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _chains(source: str, names: dict[str, str]) -> list[str]:
    """Every maximal ``a + b ~ c`` chain of string literals and known names, evaluated;
    ``'...{}...'.format(NAME)`` applied. Anything else ends a chain."""
    out: list[str] = []
    parts: list[str] = []
    want_operand = True
    for m in _LEX.finditer(source):
        kind = m.lastgroup
        if kind == "ws":
            continue
        if kind in ("str", "name") and want_operand:
            if kind == "str":
                parts.append(_unquote(m.group()))
            elif m.group() in names:
                parts.append(names[m.group()])
            else:
                if len(parts) > 0:
                    out.append("".join(parts))
                parts, want_operand = [], True
                continue
            want_operand = False
        elif kind == "fmt" and parts and not want_operand:
            arg = names.get(m.group("arg"), "")
            parts[-1] = parts[-1].replace("{}", arg)
        elif kind == "op" and parts and not want_operand:
            want_operand = True
        else:
            if parts:
                out.append("".join(parts))
            parts, want_operand = [], True
    if parts:
        out.append("".join(parts))
    return out


def _string_variables(source: str) -> dict[str, str]:
    names: dict[str, str] = {}
    for _ in range(3):  # a variable built from earlier ones (ns_token ~ '<tool_call>')
        for m in _SET.finditer(source):
            values = _chains(m.group(2), names)
            if len(values) == 1 and _is_whole_chain(m.group(2), names):
                names[m.group(1)] = values[0]
    return names


def _is_whole_chain(expr: str, names: dict[str, str]) -> bool:
    """Is ``expr`` nothing but one chain of literals, known names and ``.format(name)``?"""
    rest = _LEX.sub(lambda m: "" if m.lastgroup in ("str", "fmt", "op", "ws") else m.group(), expr)
    return all(n in names for n in re.findall(r"[A-Za-z_]\w*", rest)) and not re.sub(r"[A-Za-z_]\w*", "", rest)


# --- token shapes -----------------------------------------------------------------------------
_BOUNDARY = r"(?:begin|beginning|start|end|sep|eos|bos|eot|eom|pad|patch|im)"
_CALL_PART = r"(?:arg|args|tool|call)"
CLOSED_SHAPES = (
    r"<\|[^|<>\s]{1,64}\|>",  # <|im_start|>, <|"|>
    r"<\uff5c[^\uff5c<>\s]{1,64}\uff5c>",  # <｜end▁of▁sentence｜>
    r"<\|[A-Za-z_][\w:.-]{0,40}>",  # Gemma 4: <|turn>
    r"</?[A-Za-z_][\w:.-]{0,40}\|>",  # Gemma 4: <turn|>
    r"</?[a-z]{1,16}:[A-Za-z_][\w.]{0,40}>",  # <seed:eos>, <minimax:tool_call>, </mm:think>
    r"</?[a-z_]{2,40}:[a-z]{2,16}>",  # Hy3: <tool_call:opensource>
    r"</?\uff5c[A-Za-z]{1,16}\uff5c[A-Za-z_]\w{0,40}>",  # DeepSeek DSML: <｜DSML｜function_calls>
    r"\[/?[a-z]?[A-Z][A-Z_]{1,40}\]",  # [INST], [/INST], [TOOL_CALLS], [gMASK]
    r"\]~!?[a-z][\[\]]|\[[a-z]~\[",  # MiniMax: ]~b], ]~!b[, [e~[
    r"\]<\][a-z_]{1,40}\[>\[",  # MiniMax: ]<]minimax[>[
    rf"</?(?:{_BOUNDARY}_[a-z_]{{1,40}}|[a-z_]{{1,40}}_{_BOUNDARY}|[a-z_]{{1,20}}_of_[a-z_]{{1,20}})>",
    rf"</?{_CALL_PART}_[a-z_]{{1,40}}>",  # <arg_key>, <tool_response>
    r"</?[A-Z0-9_]{0,40}(?:TOKEN|TOOL[A-Z_]*|[A-Z]_\d{1,3})>",  # <REKA_IMG_TOKEN>, <TOOLCALL>, <SPECIAL_10>
    r"</?(?:s|unk|pad|bos|eos|sop|eop|sep)>",
)
# tags that take attributes: the head is the token (<｜DSML｜invoke name="...">, <atem:invoke ...>)
OPEN_SHAPES = (
    r"<\uff5c[A-Za-z]{1,16}\uff5c[A-Za-z_]\w{0,40}(?=\s)",
    r"<[a-z]{1,16}:[A-Za-z_][\w.]{0,40}(?=\s)",
)
_CLOSED = re.compile("|".join(f"(?:{s})" for s in CLOSED_SHAPES))
_OPEN = re.compile("|".join(f"(?:{s})" for s in OPEN_SHAPES))
# a format placeholder left in by a template that fills it in later ({}, {name}) is not a token
_UNFILLED = re.compile(r"[{}$]")


def mine(source: str) -> tuple[set[str], set[str]]:
    names = _string_variables(source)
    texts = [source, *_chains(source, names)]
    closed: set[str] = set()
    heads: set[str] = set()
    for text in texts:
        closed.update(t for t in _CLOSED.findall(text) if not _UNFILLED.search(t))
        heads.update(t for t in _OPEN.findall(text) if not _UNFILLED.search(t))
    return closed, heads


def _quote(item: str) -> str:
    """A Python literal of ``item`` as the project's formatter writes it (double quotes unless the
    text holds one), so that the generated module is already formatted."""
    body = item.replace("\\", "\\\\")
    if '"' in item and "'" not in item:
        return f"'{body}'"
    return '"' + body.replace('"', '\\"') + '"'


def render(closed: set[str], heads: set[str], sources: int) -> str:
    def tup(items: set[str]) -> str:
        return "\n".join(f"    {_quote(item)}," for item in sorted(items))

    return f'''"""The special and control tokens of every chat template in fixtures/chat_templates/ (generated).

GENERATED by scripts/mine_special_tokens.py from {sources} templates: do not edit by hand.
Regenerate with ``python scripts/mine_special_tokens.py`` after adding a template; tests/checks/
test_special_tokens_catalogue.py fails while this file is stale. The leak detector
(checks/leakage.py) finds every one of these in any model's output; docs/leakage.md says how
each is classed.
"""

from __future__ import annotations

#: whole tokens, as a template writes them
TOKENS: tuple[str, ...] = (
{tup(closed)}
)

#: tag heads that a template follows with attributes (``<｜DSML｜invoke name="...">``)
TAG_HEADS: tuple[str, ...] = (
{tup(heads)}
)
'''


def generate() -> str:
    closed: set[str] = set()
    heads: set[str] = set()
    paths = sorted(TEMPLATES.glob("*.jinja"))
    for path in paths:
        c, h = mine(path.read_text(encoding="utf-8"))
        closed |= c
        heads |= h
    return render(closed, heads, len(paths))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed catalogue is stale")
    args = ap.parse_args(argv)
    text = generate()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python scripts/mine_special_tokens.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
