"""Placeholders: the one definition of unrendered template syntax and placeholder markers.

Render time (``render.py`` refuses to sample a message that holds one) and output time (the leak
detector reports one as ``leak_placeholder``) both read ``PLACEHOLDER_SHAPES``; suites add
their own regexes (``render.placeholder_patterns``) and exemptions
(``render.allowed_placeholders``) to both.

What counts (docs/leakage.md):

- template syntax: ``{{ ... }}``, ``{% ... %}``, ``{# ... #}`` (on one line, up to 200 chars);
- a variable in single braces, padded or not: ``{goal}``, ``{ goal }``, ``{agent_name}``,
  ``{agentName}``, ``{AGENT_NAME}``, ``{GOAL}`` (upper snake case only for the known slots);
- a bracketed or angled name: snake case with at least one underscore (``[AGENT_NAME]``,
  ``<CURRENT_GOAL>``, ``[current_goal]``, ``[ AGENT_NAME ]``), upper kebab case ending in a slot
  noun (``[AGENT-NAME]``, ``<START-DATE>``; not ``[COVID-19]``, ``[FOLLOW-UP]``) or one of
  ``PLACEHOLDER_WORDS`` (``[GOAL]``, ``<NAME>``); and ``[INSERT ...]``, ``[FILL IN ...]``,
  ``[YOUR NAME]``, ``[TODO: ...]``;
- a slot written in words, any letter case (``is_slot_phrase``): prefix words and a slot noun
  (``[Your Name]``, ``[Team Member]``), any words and a strong noun (``[Recipient Name]``,
  ``[Task Description]``), an instruction (``[Insert relevant details]``), a noun and an
  of-phrase (``[Name of the project]``), optionally ``here``; in square brackets, and in angle
  brackets or braces when it starts upper case or with an instruction verb (``<Your Name>``,
  ``{Agent Name}``, ``<insert goal here>``; not ``<tool name>``, a prompt's format metavariable);
- a name of the suite's own template variables in any of those brackets (``[EVENTS]``), a name
  with an underscore in any case, padded, in kebab case or run together (``<agent_name>``,
  ``[agent-name]``, ``{agentName}``).
- slots in other languages (words: ``checks/slot_words.py``): ``[Name des Empfängers]``,
  ``[Votre nom]``, ``[Имя получателя]``, ``【担当者名】``, ``[이름]``, ``[اسم المستلم]``, in square
  brackets of any width (``［会社名］``, ``【…】``, ``〔…〕``), in corner brackets before an honorific
  (``「氏名」様``), in parentheses after "your" or an instruction (``(Your Name)``, ``(Ihr Name)``);
  role nouns in a value's place (``Assigned to [OWNER]``); filler runs (``〇〇さん``, ``××様``,
  ``＿＿``); format slots in prose (``${name}``, ``$GOAL``, ``%s``, ``%(x)s``, ``{0}`` beside
  ``{1}``). ``is_slot_at`` is the one judgement of every slot candidate, at render and output time.

Near misses that are not placeholders: other bracketed words (``[OK]``, ``[UPDATE]``,
``[insert coin]``, ``[Todo]``), buttons, titles and places (``[Change Name]``, ``[Name of the Wind]``,
``[Meeting Room]``), kebab phrases (``[UP-TO-DATE]``), LaTeX (``\\text{Time}``), a slot phrase that is a
filled form label or a Markdown reference label (``is_filled_label``: ``[Team Role] Scout``),
status tags, language codes and headings in any language (``[ERLEDIGT]``, ``[DE]``, ``【重要】``),
filled labels in any script (``【日時】11月28日``), numerals (``二〇二〇年``), prices (``$5``),
numbers and letters (``[1]``, ``[x]``, ``[ ]``), Markdown links and references (``[GOAL](url)``,
``[GOAL][1]``), citations (``[Smith 2020]``), Mistral control words (``[TOOL_CALLS]``, which are
tool markup), and anything inside a code span (judged by the leak detector).

Every shape is linear-time: bounded quantifiers that stop at a newline or the bracket's closer.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from leader_eval.checks.han_kana import HAN_KANA
from leader_eval.checks.slot_words import KOREAN_AFTER, SLOT_WORDS, union

#: single upper-case words that appear bracketed only as a template's unfilled slot (``[TASK]``,
#: ``[UPDATE]``, ``[USER]`` also serve as chat labels: not here)
PLACEHOLDER_WORDS = (
    "GOAL",
    "NAME",
    "DATE",
    "TIME",
    "LOCATION",
    "TOPIC",
    "PLACEHOLDER",
    "TODO",
    "TBD",
)
_WORDS = "|".join(PLACEHOLDER_WORDS)
#: what a template slot written in words names (``[Your Name]``, ``[insert goal here]``)
SLOT_NOUNS = frozenset(
    (
        *("name", "goal", "task", "room", "agent", "user", "topic", "target", "location", "place", "date", "time"),
        *("message", "team", "project", "company", "city", "email", "role", "member", "deadline", "number"),
        *("position", "signature"),
    )
)
#: the slot nouns that are a slot on their own (``[Name]``); ``[Task]`` alone is a chat label
SLOT_NOUNS_ALONE = frozenset(
    (
        *("name", "goal", "date", "time", "location", "topic", "email", "city", "company", "placeholder"),
        *("recipient", "signature", "username"),
    )
)
#: words that may come before the slot noun (at most three of them)
SLOT_PREFIXES = frozenset(
    (
        *("insert", "fill", "in", "enter", "add", "your", "current", "agent", "agent's", "team", "team's", "user"),
        *("user's", "first", "last", "full", "player", "target", "project", "company", "meeting", "start", "due"),
        *("player's", "specific", "relevant", "recipient", "recipient's", "teammate", "teammate's", "leader"),
        *("leader's", "assigned", "phone", "contact"),
    )
)
#: nouns that are a slot after any one to three words: ``[Recipient Name]``, ``[Task Description]``,
#: ``[GOAL DESCRIPTION]``, ``[Teammate's Name]``
SLOT_HEADS = frozenset(("name", "description", "email", "address", "title"))
#: verbs that open an instruction to fill a slot: ``[Insert relevant details]``, ``[Enter your name]``;
#: the instruction must end with what it asks for (a ``SLOT_NOUNS``/``SLOT_HEADS`` word or
#: ``SLOT_DETAILS``): ``[insert coin]`` is no slot
SLOT_VERBS = frozenset(("insert", "enter", "add", "fill", "describe", "specify", "provide", "write", "type", "put"))
SLOT_DETAILS = frozenset(("details", "detail", "info", "information"))
#: slot nouns that take an "of" phrase: ``[Name of the project]``, ``[Date of the meeting]``
SLOT_OF_HEADS = frozenset(("name", "description", "title", "date", "details", "address"))
#: what an of-phrase must end in: ``[Name of the project]``, ``[Name of recipient]``; not
#: ``[Name of the Wind]``, ``[Title of Liberty]``, ``[Details of the Plan]`` (titles, headings)
SLOT_OF_OBJECTS = frozenset(("meeting", "event", "recipient", "sender", "person", "organization", "teammate", "leader"))
#: an interface verb before a ``SLOT_HEADS`` noun names a button: ``[Change Name]``, ``[Edit Title]``
#: (an instruction verb, ``[Insert Name]``, ``[Enter Name]``, is a slot)
UI_VERBS = frozenset(
    (
        *("change", "edit", "show", "hide", "view", "update", "set", "rename", "copy", "clear", "reset", "save"),
        *("delete", "remove", "sort", "filter", "search", "toggle", "open", "close"),
    )
)
#: nouns of the game world, a slot only after a pronoun or instruction: ``[Your Position]``, not
#: ``[Start Position]``, ``[Meeting Room]``
WORLD_NOUNS = frozenset(("room", "position"))
WORLD_PREFIXES = frozenset(
    (
        *("insert", "fill", "in", "enter", "add", "your", "agent", "agent's", "user", "user's", "recipient"),
        *("recipient's", "teammate", "teammate's", "leader's", "player's", "assigned"),
    )
)


def _english_slot_phrase(inner: str) -> bool:
    """Is the text between brackets a slot written in English words (any letter case, optionally ending
    in "here"): up to three ``SLOT_PREFIXES`` and a ``SLOT_NOUNS`` word; one to three words and a
    ``SLOT_HEADS`` noun; a ``SLOT_VERBS`` verb, up to four words and what it asks for; a
    ``SLOT_OF_HEADS`` noun, "of" and one to three words, the last a slot noun or
    ``SLOT_OF_OBJECTS``; or two slot nouns joined by "and"/"or"? Hyphens separate words
    (``[Your-Name]``); a number may stand between words or after a single word (``[Agent 1
    Name]``, ``[Name 2]``). ``[insert coin]``, ``[Change Name]``, ``[Meeting Room]`` are not."""
    words = inner.lower().replace("-", " ").split()
    if len(words) == 2 and words[1].isdigit():
        words.pop()  # [Name 2]
    if not words or words[0].isdigit() or words[-1].isdigit():
        return False  # [Mill Street Address 12]: a number ends an address or a title
    words = [w for w in words if not w.isdigit()]
    if words[-1] == "here":
        words.pop()
    if len(words) == 1:
        return words[0] in SLOT_NOUNS_ALONE
    if len(words) < 2 or len(words) > 6:
        return False
    if words[0] in SLOT_VERBS and words[-1] in _ASKED_FOR:
        return True
    if words[0] in SLOT_OF_HEADS and words[1] == "of" and 3 <= len(words) <= 5 and words[-1] in _OF_OBJECTS:
        return True
    if len(words) == 3 and words[1] in ("and", "or") and words[0] in _PAIRED and words[2] in _PAIRED:
        return True  # [Date and Time], [Name or Role]
    if len(words) > 4:
        return False
    if words[-1] in WORLD_NOUNS:
        return all(w in WORLD_PREFIXES for w in words[:-1])
    return (words[-1] in SLOT_HEADS and words[0] not in UI_VERBS) or (
        words[-1] in SLOT_NOUNS and all(w in SLOT_PREFIXES for w in words[:-1])
    )


_ASKED_FOR = SLOT_NOUNS | SLOT_HEADS | SLOT_DETAILS
_OF_OBJECTS = SLOT_NOUNS | SLOT_HEADS | SLOT_OF_OBJECTS
# [Time and Place] is a heading; [Date and Time] a slot
_PAIRED = (SLOT_NOUNS | SLOT_HEADS) - {"place"}


# --- slots in every language (the words: checks/slot_words.py) ----------------------------------

_WORD_LANGUAGES = {k: v for k, v in SLOT_WORDS.items() if k not in ("zh", "ja")}
_CJK_LANGUAGES = {k: v for k, v in SLOT_WORDS.items() if k in ("zh", "ja")}
_ALONE = union("alone", _WORD_LANGUAGES) | union("yours_nouns", _WORD_LANGUAGES)
_HEADS = union("heads", _WORD_LANGUAGES)
_HEADS_LAST = union("heads_last", _WORD_LANGUAGES)
_POSSESSIVES = union("possessives", _WORD_LANGUAGES)
_VERBS = union("verbs", _WORD_LANGUAGES)  # first or last: [Insérer le lien], [Link hier einfügen]
_FIRST_VERBS = _VERBS | SLOT_VERBS  # English instructions open the phrase: [Insert link to ...]
_LINKS = union("links", _WORD_LANGUAGES)
_OBJECTS = union("objects", _WORD_LANGUAGES)
_ARTICLES = union("articles", _WORD_LANGUAGES)
_HERE_WORDS = union("here", _WORD_LANGUAGES) | {"here"}
_ROLES = union("roles", _WORD_LANGUAGES)
_SUFFIXES = tuple(sorted(union("suffixes", _WORD_LANGUAGES), key=len, reverse=True))
_UI = union("ui_verbs", _WORD_LANGUAGES) | UI_VERBS
_GREETINGS = union("greetings", _WORD_LANGUAGES)
_LINK_NOUNS = union("asked", _WORD_LANGUAGES) & (_HEADS | {"link", "url", "lien", "enlace", "ссылка", "링크", "رابط"})
_NOUNS = _HEADS | {w for w in _ALONE if " " not in w} | SLOT_NOUNS | SLOT_HEADS
_YOURS_NOUNS = union("yours_nouns", _WORD_LANGUAGES)  # [Göreviniz]: "your task", one word
_FOREIGN_LINKS = union("links", {k: v for k, v in _WORD_LANGUAGES.items() if k != "en"})


@dataclass(frozen=True)
class _LanguageSet:
    """One language's words of the scaffold-noun rules (``_domain_slot``, ``_whose``)."""

    nouns: frozenset[str]  # "nouns" and "yours_nouns"
    world: frozenset[str]
    yours: frozenset[str]  # "possessives" and "yours"
    current: frozenset[str]
    heads: frozenset[str]
    objects: frozenset[str]
    #: every word of a noun or a world noun ("mục", "tiêu"): a phrase without one is not looked at
    noun_words: frozenset[str]
    #: and of the qualifiers: a phrase with another word is no slot of this language's
    words: frozenset[str]


def _language_set(t: Mapping[str, frozenset[str]]) -> _LanguageSet:
    def part(*names: str) -> frozenset[str]:
        return frozenset().union(*(t.get(n, frozenset()) for n in names))

    def words_of(phrases: frozenset[str]) -> frozenset[str]:
        return frozenset(w for phrase in phrases for w in phrase.split())

    nouns, world = part("nouns", "yours_nouns"), part("world")
    yours, current = part("possessives", "yours"), part("current")
    return _LanguageSet(
        nouns,
        world,
        yours,
        current,
        part("heads", "heads_last"),
        part("objects"),
        words_of(nouns | world),
        words_of(nouns | world | yours | current),
    )


_LANGUAGE_SETS = tuple(_language_set(t) for t in _WORD_LANGUAGES.values() if "nouns" in t or "yours_nouns" in t)
#: the words any language's scaffold nouns are made of (each phrase judged costs ~100 us without it)
_NOUN_WORDS = frozenset().union(*(t.noun_words for t in _LANGUAGE_SETS))
#: who a slot names when it names the one the model speaks to (a label with a value stays a slot):
#: "your" in every language, as a word, a phrase ("của bạn", "שלך") or a suffix ("Göreviniz")
_ADDRESSEE_WORDS = (
    frozenset(("your", "yours"))
    | _POSSESSIVES
    | _YOURS_NOUNS
    | {w for w in union("yours", _WORD_LANGUAGES) if " " not in w}
)
_ADDRESSEE_PHRASES = tuple(w for w in union("yours", _WORD_LANGUAGES) if " " in w)
_DOMAIN_HEADS = frozenset().union(*(t.nouns for t in _LANGUAGE_SETS))  # a scaffold noun as a head
_ASKED = _NOUNS | union("asked", _WORD_LANGUAGES) | SLOT_DETAILS | _OBJECTS
_ASKED_PHRASES = frozenset(w for w in union("asked", _WORD_LANGUAGES) if " " in w)
_CJK_ALONE = union("alone", _CJK_LANGUAGES)
_CJK_HEADS = tuple(sorted(union("heads", _CJK_LANGUAGES), key=len, reverse=True))
_CJK_VERBS = tuple(sorted(union("verbs", _CJK_LANGUAGES), key=len, reverse=True))
_CJK_CURRENT = union("current", _CJK_LANGUAGES)
_CJK_OPENERS = tuple(
    sorted(
        union("possessives", _CJK_LANGUAGES) | union("here", _CJK_LANGUAGES) | _CJK_CURRENT | set(_CJK_VERBS),
        key=len,
        reverse=True,
    )
)
# "your" as a pronoun in the genitive (您的, あなたの); not the honorific prefixes お, ご, 贵 (お部屋 is
# "the room", politely) nor 我方 ("our side")
_CJK_YOURS = frozenset(p for p in union("possessives", _CJK_LANGUAGES) if p.endswith(("的", "の")))
_CJK_DOMAIN = union("nouns", _CJK_LANGUAGES)
_CJK_YOURS_OPENERS = tuple(sorted(_CJK_YOURS, key=len, reverse=True))
_CJK_WORLD = union("world", _CJK_LANGUAGES)
_CJK_ASKED = union("asked", _CJK_LANGUAGES)
_CJK_ROLES = union("roles", _CJK_LANGUAGES)
_CJK_NOT = union("not", _CJK_LANGUAGES)
_HONORIFICS = tuple(sorted(union("honorifics", _CJK_LANGUAGES) | KOREAN_AFTER, key=len, reverse=True))
# written apart, a whole word: "[नाम] जी" is a slot, "[नाम] जीत" (a value) a label
_WORD_HONORIFICS = tuple(sorted(union("honorifics", _WORD_LANGUAGES), key=len, reverse=True))


@functools.cache
def _cjk_char() -> re.Pattern[str]:
    """A character of Han or kana. Compiled at its first use: re's compiler spends ~2 ms on these
    ranges, and only a bracketed phrase asks."""
    return re.compile(f"[{HAN_KANA}]")


_CJK_BLANKS = str.maketrans("", "", " \t\u3000\u30fb")  # blanks and the katakana middle dot
_ELISIONS = ("l'", "d'", "dell'", "dall'", "nell'", "all'", "sull'", "un'", "qu'")
# an elided link word ("d'", "dell'"): the phrase says whose (``[Rôle de l'agent]`` has "de")
_ELIDED_LINK = re.compile(r"(?i)(?<!\w)(?:d|dell|dall|all|sull|nell)['\u2019]\w")


def is_slot_phrase(inner: str, *, domain: bool = True) -> bool:
    """Is the text between brackets a slot written in words, in English (``_english_slot_phrase``)
    or in another language of ``slot_words.SLOT_WORDS`` (``_word_slot``, ``_cjk_slot``)?
    ``domain=False``: not by the scaffold's nouns after "your" or "current" in Chinese and Japanese
    (a lenticular bracket's ``【当前任务】`` is the heading of a prompt's section)."""
    if _english_slot_phrase(inner):
        return True
    if _cjk_char().search(inner):
        return _cjk_slot(inner, domain=domain)
    return _word_slot(_words_of(inner), elided_link=_ELIDED_LINK.search(inner) is not None)


def _words_of(inner: str) -> list[str]:
    """Lower-case words: hyphens split them, "e-mail" is "email", French and Italian elisions
    (``l'expéditeur``) and the Arabic article (``المستلم``) are taken off."""
    out = []
    lowered = inner.lower().replace("i\u0307", "i")  # a lower-cased Turkish "İ" keeps its dot
    for w in lowered.replace("\u2019", "'").replace("e-mail", "email").replace("-", " ").split():
        if "'" in w:
            w = next((w[len(e) :] for e in _ELISIONS if w.startswith(e) and len(w) > len(e)), w)
        if w.startswith("\u0627\u0644") and len(w) > 3:  # ال
            w = w[2:]
        out.append(w)
    return out


def _compound(word: str) -> bool:
    """A German or Dutch compound ending in a slot noun: ``projektname``, ``startdatum``."""
    return (
        word.endswith(_SUFFIXES)
        and word not in _UI
        and any(len(word) - len(s) >= 3 for s in _SUFFIXES if word.endswith(s))
    )


def _noun(word: str) -> bool:
    return word in _NOUNS or _compound(word)


def _word_slot(words: list[str], *, elided_link: bool = False) -> bool:
    """The rules of ``is_slot_phrase`` for languages that put spaces between words: a word or
    two that is a slot alone (``[Datum]``, ``[Fecha límite]``, ``[Projektname]``); an instruction
    verb first or last and what it asks for (``[Insérer le lien vers le document]``, ``[Namen
    hier einfügen]``); a link noun and a preposition (``[Link to map]``); a possessive and a slot
    noun first or last (``[Votre nom]``, ``[Ihre E-Mail-Adresse]``); a head noun and whose it is
    (``[Nom du projet]``, ``[Имя получателя]``); modifiers and a head noun last (``[Полное
    имя]``, ``[받는 사람 이름]``). "Here" and leading articles are skipped; a number may end a
    single word (``[Name 2]``), not a phrase (a citation: ``[Müller 2020]``)."""
    if len(words) == 2 and words[1].isdigit():
        words = words[:1]
    if not words or words[-1].isdigit():
        return False
    unarticled = [w for w in words if w not in _ARTICLES]
    if _domain_slot(unarticled):
        return True  # before "here" is skipped: Polish "tu" (here) is Spanish "tu" (your)
    words = [w for w in words if w not in _HERE_WORDS]
    while len(words) > 1 and words[0] in _ARTICLES:
        words = words[1:]
    if not words or len(words) > 6:
        return False
    if " ".join(words) in _ALONE or (len(words) == 1 and _compound(words[0])):
        return True
    if len(words) == 1:
        return False
    if words[0] in _FIRST_VERBS or words[-1] in _VERBS:
        rest = words[1:] if words[0] in _FIRST_VERBS else words[:-1]
        # an asked-for noun of two or three words, as Vietnamese writes its syllables apart: [Chèn
        # mục tiêu], [Nhập nội dung] (not whose objects: [Thêm khách hàng] is a button, as [Add customer])
        return any(w in _ASKED or _compound(w) for w in rest) or any(
            " ".join(rest[i : i + n]) in _ASKED_PHRASES for n in (2, 3) for i in range(len(rest) - n + 1)
        )
    if words[0] in _LINK_NOUNS and words[1] in _LINKS and len(words) <= 5:
        return True
    body = [w for w in words if w not in _ARTICLES]
    if body != unarticled and _domain_slot(body):
        return True  # without "here": [Votre objectif ici]
    if words[0] in _POSSESSIVES:
        rest = body[1:]
        return 1 <= len(rest) <= 3 and (_noun(rest[0]) or _noun(rest[-1]))
    if (body[0] in _HEADS or body[0] in _DOMAIN_HEADS) and 2 <= len(body) <= 5:
        rest = [w for w in body[1:] if w not in _LINKS]
        # a link word of another language than English, read before the articles go (Dutch "de"
        # is one, French "de" a link); "to" and "for" make English names ([Agent to Agent])
        linked = elided_link or not _FOREIGN_LINKS.isdisjoint(words[1:])
        if 1 <= len(rest) <= 2 and _whose(body[0], rest, linked=linked):
            return True  # [Nom du projet], [Nombre del agente], [Rolle des Agenten], [Имя агента]
    if len(words) <= 3 and all(w in _ALONE or _compound(w) for w in words):
        return True  # [Vorname Nachname], [Nom Prénom], [Имя Фамилия]
    return len(words) <= 4 and words[-1] in _HEADS_LAST and words[0] not in _UI


def _whose(head: str, rest: list[str], *, linked: bool) -> bool:
    """Does ``rest`` say whose ``head`` (a head noun or one of the scaffold's nouns) is, so that the
    phrase is a slot? A head noun and its object or a slot phrase (``[Nom du projet]``,
    ``[Numéro de téléphone]``); after a link word, one of the scaffold's nouns too (``[Nombre del
    agente]``, ``[Rolle des Agenten]``, ``[Objectif de l'équipe]``); without one, only in a script
    that is not Latin or as a phrase of two words (``[Имя агента]``, ``[اسم الوكيل]``, ``[Tên người
    dùng]``). The head and the scaffold's noun come from one language's table: the nouns are
    English words too (``[Data Agent]``, ``[Email Message]`` are names) and a Vietnamese ``[Đội
    bạn]`` is a friend's team."""
    whose = " ".join(rest)
    if head in _HEADS and (rest[-1] in _OBJECTS or whose in _ALONE):
        return True
    if _NOUN_WORDS.isdisjoint(rest) and head not in _DOMAIN_HEADS:
        return False
    for t in _LANGUAGE_SETS:
        if not (head in t.heads or head in t.nouns):
            continue
        if not (rest[-1] in t.nouns or whose in t.nouns or (head in t.nouns and rest[-1] in t.objects)):
            continue
        if linked:
            return True
        if head in t.heads and (len(rest) == 2 or not _latin(whose)):
            return True
        if head in t.nouns and rest[-1] in t.objects and not _latin(whose):
            return True
    return False


def _latin(text: str) -> bool:
    return all(c.isascii() or "LATIN" in unicodedata.name(c, "") for c in text if not c.isspace())


def _domain_slot(words: list[str]) -> bool:
    """What the scaffold's slots name, after "your" or "current" in either order: ``[Ihr Ziel]``,
    ``[Objectif actuel]``, ``[Votre objectif actuel]``, ``[Текущая задача]``, ``[현재 목표]``,
    ``[Mục tiêu hiện tại của bạn]`` (a noun of one or two words, qualifiers of one or two; a room
    or a position only after "your": ``[Aktueller Raum]`` names a place on a map), the noun and
    its qualifiers from one language's table (Spanish "actual" is English "actual": ``[Actual
    Message]`` is no slot). English's own rule is ``SLOT_NOUNS`` after ``SLOT_PREFIXES``."""
    n = len(words)
    if not 2 <= n <= 6 or _NOUN_WORDS.isdisjoint(words):
        return False
    distinct = set(words)
    for t in _LANGUAGE_SETS:
        if t.noun_words.isdisjoint(distinct) or not distinct <= t.words:
            continue
        for i in range(n):
            for j in range(i + 1, min(i + 2, n) + 1):
                noun = " ".join(words[i:j])
                if noun in t.nouns:
                    allowed = t.yours | t.current
                elif noun in t.world:
                    allowed = t.yours
                else:
                    continue
                if _qualified(words[:i], allowed) and _qualified(words[j:], allowed) and (i > 0 or j < n):
                    return True
    return False


def _qualified(words: list[str], allowed: frozenset[str]) -> bool:
    """``words`` are qualifiers of ``allowed`` (a word or a two-word phrase each: ``hiện tại``,
    ``của bạn``)."""
    k = 0
    while k < len(words):
        if " ".join(words[k : k + 2]) in allowed and k + 1 < len(words):
            k += 2
        elif words[k] in allowed:
            k += 1
        else:
            return False
    return True


def _cjk_slot(inner: str, *, domain: bool = True) -> bool:
    """The rules of ``is_slot_phrase`` for Chinese and Japanese, on characters: after up to three
    openers (possessives, "here", instruction verbs: ``您的``, ``在此``, ``填写``, ``ここに``, ``お``)
    and without an instruction at the end (``を挿入``), a word that is a slot alone (``氏名``,
    ``日期``) or ends in a slot noun (``收件人姓名``, ``担当者名``, ``截止日期``), or what an
    instruction asks for (``插入链接``); after "your" or "current", what the scaffold's slots name
    (``当前目标``, ``あなたの役割``; a room only after "your"). Not: ``重要``, ``お知らせ``, ``报名``,
    ``我的目标`` (headings, words, the speaker's own goal)."""
    s = inner.translate(_CJK_BLANKS)
    asked = yours = current = False
    for _ in range(3):
        opener = next((p for p in _CJK_OPENERS if s.startswith(p) and len(s) > len(p)), None)
        if opener is None:
            break
        asked = asked or opener in _CJK_VERBS
        yours = yours or opener in _CJK_YOURS
        current = current or opener in _CJK_CURRENT
        s = s[len(opener) :]
    if domain and (((yours or current) and s in _CJK_DOMAIN) or (yours and s in _CJK_WORLD)):
        return True  # [当前目标], [你的任务], ［あなたの役割］, [您的房间]
    verb = next((v for v in _CJK_VERBS if s.endswith(v) and len(s) > len(v)), None)
    if verb is not None:
        asked, s = True, s[: -len(verb)].removesuffix("\u3092")  # を
    if not s or len(s) > 12 or s in _CJK_NOT or s.endswith(tuple(_CJK_NOT)):
        return False
    return s in _CJK_ALONE or s.endswith(_CJK_HEADS) or (asked and s in _CJK_ASKED)


# combining marks, which are no \w: Devanagari vowel signs (नाम), Hebrew points, Arabic harakat,
# the dot of a lower-cased Turkish "İ"
_MARKS = "\u0300-\u036f\u0591-\u05c7\u064b-\u065f\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963"


def _alternation(words: frozenset[str]) -> str:
    return "|".join(sorted(words, key=lambda w: (-len(w), w)))


#: what the leak detector matches after "[" before asking ``is_slot_phrase`` (padding allowed:
#: ``[ Your Name ]``)
SLOT_CANDIDATE = "(?=[ \t]{0,3}[^\\W\\d_])(?:[^\\W\u3007]|['\u2019\\- " + _MARKS + "]){1,60}+\\](?![\\[(])"
#: the same after "<": ``<Your Name>``, ``<YOUR NAME>``, ``<Prénom>``, ``<名前>``, ``<insert goal
#: here>``. These need an upper-case or uncased first letter or a ``SLOT_VERBS`` verb first: in
#: lower case, ``<name>``, ``<time>``, ``<b>`` are HTML/XML tags and ``<tool name>``, ``<your
#: message>`` are how a prompt spells a format ("Reply with {"tool": "<tool name>", ...}")
_BRACED_SLOT_GUARD = rf"(?=[^\W\d_a-z]|(?:{_alternation(SLOT_VERBS)})\s)"
# the words of a slot in any script: letters, digits, "_" (not 〇, a filler of its own), apostrophes,
# hyphens and spaces
_WORD_RUN = "(?:[^\\W\u3007]|['\u2019\\- " + _MARKS + "])"
#: brackets read as square ones: full-width, lenticular, tortoise-shell, white lenticular
SQUARE_BRACKETS = {"[": "]", "\uff3b": "\uff3d", "\u3010": "\u3011", "\u3014": "\u3015", "\u3016": "\u3017"}
_LENTICULAR = ("\u3010", "\u3016")  # 【 〖
#: corner brackets quote in Japanese: a slot only before an honorific or as an instruction
CORNER_BRACKETS = {"\u300c": "\u300d", "\u300e": "\u300f"}


# what may open a parenthesised slot: "your" in any language, an instruction verb, capitalised
# or upper case (in prose a lower-case parenthesis is an aside: "(your call)")
# the languages that put an article before "your"
_ARTICLED = tuple(SLOT_WORDS[k] for k in ("it", "pt", "hu"))
# (and an article before "your": "(Il tuo nome)", "(Az Ön neve)")
_PAREN_OPENERS = sorted(
    {
        f(w)
        for w in (
            *_POSSESSIVES,
            *_FIRST_VERBS,
            "your",
            *(f"{a} {p}" for t in _ARTICLED for a in t["articles"] for p in t["possessives"]),
        )
        if w.replace(" ", "").isalpha()
        for f in (str.capitalize, str.upper, str.title)
    },
    key=lambda w: (-len(w), w),
)


# the words in parentheses as _WORD_RUN{1,60}+ and ")", read in chunks: the closer within 60
# characters first, then the runs of letters possessively ("(Il tuo " * 125000: a branch per letter
# was half the scan)
_PAREN_RUN = "(?=[^()\n]{0,60}\\))(?:[^\\W\u3007]++|['\u2019\\- " + _MARKS + "]++){1,60}+\\)"


_NAME_RUNS = "X\u0425O"  # X, Cyrillic Х, O


def _by_first_letter(words: list[str]) -> str:
    """``words`` as an alternation grouped by first letter (``Y(?:OUR|our)|...``): the regex engine
    tries a group only where its letter stands, not every word at every "(" ("(" * 10**6)."""
    groups: dict[str, list[str]] = {}
    for w in words:
        groups.setdefault(w[0], []).append(re.escape(w[1:]))
    return "|".join(f"{re.escape(c)}(?:{'|'.join(rests)})" for c, rests in groups.items())


SLOT_CANDIDATES: tuple[tuple[str, str], ...] = (
    ("[", SLOT_CANDIDATE),
    ("<", _BRACED_SLOT_GUARD + _WORD_RUN + "{1,60}+>"),
    # in braces any letter first: {nombre}, {datum} (is_slot_at asks for another language than English)
    ("{", r"(?<![A-Za-z0-9_\\]\{)(?=[^\W\d_])" + _WORD_RUN + r"{1,60}+\}"),
    # a word between percent signs, a mail merge's or a batch file's variable: %NAME%, %nombre%
    # (not after a word or a digit: "50%Name%"; not a percentage: "10% and 20%")
    ("%", "(?<![\\w%]%)(?=[^\\W\\d_])[^\\W\u3007]{1,40}+%(?![\\w%])"),
    # a run of three or more X (Latin, Cyrillic) or O standing for a name: "Dear XXX", "OOO님"
    # (is_slot_at asks for a greeting before or an honorific after)
    *((c, f"(?<![A-Za-z0-9\u0400-\u04ff]{c}){c}{{2,19}}+(?![A-Za-z0-9\u0400-\u04ff])") for c in _NAME_RUNS),
    # a positional format field: {0}, {1} ("x^{0}", "\mathbf{0}", "a_{0}" are maths)
    ("{", r"(?<![\w\\^]\{)[0-9]{1,2}\}"),
    *(
        (opener, f"(?=[ \u3000]{{0,3}}[^\\W\\d_])(?:[^\\W\u3007]|['\u2019\\- \u3000{_MARKS}]){{1,60}}+{closer}")
        for opener, closer in SQUARE_BRACKETS.items()
        if opener != "["
    ),
    *((opener, f"(?=[^\\W\\d_]){_WORD_RUN}{{1,40}}+{closer}") for opener, closer in CORNER_BRACKETS.items()),
    (
        "(",
        rf"(?=[ \t]{{0,3}}[{''.join(sorted({w[0] for w in _PAREN_OPENERS}))}])"
        rf"(?=[ \t]{{0,3}}(?:{_by_first_letter(_PAREN_OPENERS)})[ '\u2019\-])" + _PAREN_RUN,
    ),
)

# possessive (no backtracking into a run that cannot end well): "[INSERT " * 50000 stays cheap
_UPPER_SNAKE = r"[A-Z][A-Z0-9]{0,40}+(?:_[A-Z0-9]{1,40}+){1,8}+"
_LOWER_SNAKE = r"[a-z][a-z0-9]{0,40}+(?:_[a-z0-9]{1,40}+){1,8}+"
# upper kebab case whose last segment names a slot: [AGENT-NAME], <START-DATE>; each segment starts
# with a letter and the last is a slot noun, so [COVID-19], [GPT-4], [UTF-8], [FOLLOW-UP] are not
# or in a slot noun and HERE ([NAME-HERE]); a function word in it makes it a phrase: [UP-TO-DATE],
# [SAVE-THE-DATE], [YOU-ARE-HERE]
_KEBAB_LAST = (
    *("NAME", "GOAL", "DATE", "LOCATION", "TOPIC", "EMAIL", "ID", "DESCRIPTION", "DETAILS", "TITLE", "ROLE"),
    *("NUMBER", "ADDRESS"),
)
KEBAB_SLOT_NOUNS = _KEBAB_LAST  # for the leak scanner's leads (checks/leakage.py)
_KEBAB_FUNCTION_WORDS = "TO|OF|THE|A|AN|ARE|IS|AT|IN|ON|UP|OUT|BY|FOR|AND|OR"
_UPPER_KEBAB = (
    # a hyphen after the first segment first: the function-word check is costly at every letter
    r"(?=[A-Z][A-Z0-9]{0,40}+-)"
    rf"(?!(?:[A-Z0-9]{{1,41}}-){{0,8}}(?:{_KEBAB_FUNCTION_WORDS})-)"
    r"[A-Z][A-Z0-9]{0,40}+(?:-[A-Z][A-Z0-9]{0,40}+){1,8}+(?:"
    + "|".join(f"(?<=-{w})|(?<=[^A-Z0-9]{w}-HERE)" for w in _KEBAB_LAST)
    + ")"
)
# lower camel case in braces: {agentName}, {currentGoal} (a template variable; prose has none), a
# first part of two letters or more: {iPhone}, {eBay} are names
# and a lower-case letter or digit in every hump: {macOS} is a name
_LOWER_CAMEL = r"[a-z][a-z0-9]{1,40}+(?:[A-Z][a-z0-9]{1,40}+){1,8}+"
# possessive: what follows never starts with a blank, and retrying shorter pads made "[   " * N slow
_PAD = r"[ \t]{0,3}+"
# Mistral's control words are bracketed upper snake case too; they are tool markup
_MISTRAL = r"(?!/?(?:TOOL_CALLS|TOOL_RESULTS|TOOL_CONTENT|AVAILABLE_TOOLS|CALL_ID|SYSTEM_PROMPT)\])"
# a bracket that opens a Markdown link or reference is a link's text, not a slot
_NOT_LINK = r"(?![\[(])"

# format slots in prose (in code they are code: the leak detector exempts code spans):
# ${name}, $GOAL, $AGENT_NAME (a known slot word or upper snake case: $AAPL, $HOME, $5 are not);
# %s, %(name)s, %1$s (not after a word or digit: "50%s"); {0} is a slot candidate (SLOT_CANDIDATES)
_DOLLAR_WORDS = "|".join(
    sorted(
        {*PLACEHOLDER_WORDS, *_KEBAB_LAST, "OWNER", "DEADLINE", "ASSIGNEE", "RECIPIENT", "SENDER", "AGENT"}, key=len
    )[::-1]
)
#: a variable after "$": upper snake case or a slot word (``$AGENT_NAME``, ``$GOAL``; ``$5``,
#: ``$HOME``, ``$AAPL`` are not). Not lower snake case: ``$x_1`` is LaTeX, ``$my_var`` a shell's
#: variable, and a prompt with either would not render. (A set test before the alternatives:
#: "{$" * 500000 tried each of them at every "$".)
_DOLLAR_SHAPE = rf"(?<![\w$]\$)(?=[A-Za-z_])(?:{_UPPER_SNAKE}|{_DOLLAR_WORDS})(?![\w$])"
_FORMAT_SLOTS: tuple[tuple[str, str], ...] = (
    # ${name}, and a dotted path, ${agent.name} (a JS template literal's or Maven's property in prose)
    ("$", r"\{[A-Za-z_][A-Za-z0-9_]{0,40}+(?:\.[A-Za-z_][A-Za-z0-9_]{0,40}+){0,4}+\}(?!\$)"),
    ("$", _DOLLAR_SHAPE),
    ("%", r"(?<![\w%]%)(?:\([A-Za-z_][A-Za-z0-9_]{0,40}+\)[sdifr]|[1-9]\$[sd]|s)(?![A-Za-z0-9])"),
)
# filler runs that stand for a name or a number: 〇〇さん, ××様, ○○, △△株式会社, ＿＿ (two or more of
# one glyph). Not a numeral (二〇二〇年: 〇 after a numeral), not a rating or a quiz mark (●●●○○,
# ○×: next to another such glyph)
_NUMERALS = (
    "0-9\uff10-\uff19\u96f6\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341\u767e\u5343\u4e07\u5104\u5146"
)
_GLYPHS = "\u25cb\u25ef\u25cf\u25ce\u25b3\u25b2\u25bd\u25a1\u25a0\u00d7\u2606\u2605"


def _not_kaomoji(g: str) -> str:
    """Not a face: a run of ``g`` (its first glyph just read) alone in parentheses that open after
    a blank, the text's start or the arm "m": ``m(＿＿)m``, ``疲れた (××)``; ``担当者(〇〇)`` stays."""
    return f"(?!(?<=[(\uff08]{g})(?<![^\\W\uff4dm][(\uff08]{g}){g}{{0,40}}+[)\uff09])"


_FILLERS: tuple[tuple[str, str], ...] = (
    ("\u3007", f"(?<![{_NUMERALS}\u3007]\u3007){_not_kaomoji(chr(0x3007))}\u3007{{1,39}}+(?![{_NUMERALS}])"),
    *(
        (g, "(?<![" + _GLYPHS + "0-9]" + g + ")" + _not_kaomoji(g) + g + "{1,39}+(?![" + _GLYPHS + "0-9])")
        for g in "\u25cb\u25ef\u25cf\u25b3\u25a1\u00d7"
    ),
    ("\uff3f", _not_kaomoji("\uff3f") + "\uff3f{1,39}+"),
)

#: (first character, rest of the regex): the shapes, split so the leak detector can group its
#: one combined scanner by first character (docs/performance.md)
PLACEHOLDER_SHAPES: tuple[tuple[str, str], ...] = (
    ("{", r"\{[^{}\n]{0,200}\}\}"),
    ("{", r"%[^%\n]{0,200}%\}"),
    ("{", r"#[^#\n]{0,200}#\}"),
    # upper snake case in braces only for the known slots: {NORTH_BARN_X} inside a broken JSON
    # call is the model's garbage, not an unfilled slot (tests/corpus/real)
    (
        "{",
        rf"{_PAD}(?:current_goal|goal|agent_name|room|name|task|{_WORDS}|AGENT_NAME|CURRENT_GOAL|{_LOWER_SNAKE}"
        rf"|{_LOWER_CAMEL}|placeholder){_PAD}\}}",
    ),
    (
        "[",
        r"(?=[A-Za-z])(?:(?:TODO|TBD):[^\[\]\n]{0,200}+|INSERT\b[^\[\]\n]{0,200}+|FILL(?:\s{1,3}IN)?\b[^\[\]\n]{0,200}+"
        rf"|YOUR [A-Z ]{{1,80}}+|{_WORDS}|{_MISTRAL}{_UPPER_SNAKE}|{_LOWER_SNAKE})\]{_NOT_LINK}",
    ),
    ("<", rf"(?:INSERT\b[^<>\n]{{0,200}}+|{_WORDS}|placeholder|{_UPPER_SNAKE}|{_UPPER_KEBAB})>"),
    # padded ([ AGENT_NAME ]) and kebab ([AGENT-NAME]) bracketed slots
    # (the blanks are possessive and a letter must follow: the words were tried after every "[   ")
    (
        "[",
        rf"(?:[ \t]{{1,3}}+(?=[A-Za-z_])(?:{_WORDS}|{_UPPER_SNAKE}|{_LOWER_SNAKE}){_PAD}"
        rf"|{_UPPER_KEBAB})\]{_NOT_LINK}",
    ),
    *_FORMAT_SLOTS,
    *_FILLERS,
)

#: the same shapes as standalone regexes (what ``render.find_placeholders`` searches for)
PLACEHOLDER_PATTERNS: tuple[str, ...] = tuple(re.escape(first) + rest for first, rest in PLACEHOLDER_SHAPES)
#: an ERB or EJS tag (``<%= agent_name %>``, ``<%- goal %>``, ``<% if (x) { %>``): template syntax, as
#: ``{{ }}`` and ``{% %}`` are; searched for only in a text holding its literal, "<%" (as one of the
#: combined scanner's shapes it cost every "<" of a text: ``"<% " * 333333`` went 87 -> 212 ms)
TEMPLATE_TAG_LITERAL = "<%"
TEMPLATE_TAG_PATTERN = r"<%[^%<>\n]{1,200}+%>"
#: the slot candidates as standalone regexes: a match is a slot where ``is_slot_at`` says so
SLOT_PATTERNS: tuple[str, ...] = tuple(re.escape(first) + rest for first, rest in SLOT_CANDIDATES)


#: words that keep a line-start slot a slot whatever follows it (``[Your Name] Ada``, ``[Agent
#: Name]: hi all``): the model knows who speaks and to whom; an instruction is never filled
_UNFILLED = (
    frozenset(("your", "yours", "agent", "agent's", "user", "user's", "teammate", "teammate's", "here"))
    | SLOT_VERBS
    | _POSSESSIVES
    | _VERBS
    | _HERE_WORDS
)
# indent, a list or quote marker, a heading's hashes or a table's bar, and bold: "### [Datum] 12.03.",
# "| [Ort] | Mühle |", "**[Ort]** Mühle"
_LINE_START = re.compile(r"[ \t]{0,8}(?:(?:[-*>|]|#{1,6}|[0-9]{1,3}[.)])[ \t]{1,3})?(?:\*\*|__)?")
_LINK_DESTINATION = r"(?:<|[a-z][a-z0-9+.-]{1,20}:|/|\.{1,2}/|#)"  # <url>, https:, mailto:, /path, ./path, #anchor
# after the label: bold's closer, then a colon (a blank before it in French: "[Nom] : Ada") or
# blanks (and a table's bar), then the value on the same line
_LABEL_VALUE = re.compile(r"(?:\*\*|__)?(?:([ \t]?[:\uff1a])[ \t]{0,3}|[ \t]{1,3}(?:\|[ \t]{1,3})?)(?=[^\s|])")
# what stands before a label in the middle of a line: "Zeit: 10 Uhr, [Ort]: Mühle"
_LABEL_SEPARATORS = frozenset(",;|\u2013\u2014\u2022\u00b7\uff0c\u3001\uff1b")


_REFERENCE = re.compile(rf"(?:^|\n)[ ]{{0,3}}(\[[^\[\]\n]{{1,62}}\]):[ \t]{{0,3}}{_LINK_DESTINATION}")


@functools.lru_cache(maxsize=4)
def _reference_labels(text: str, lo: int) -> frozenset[str]:
    """The Markdown reference labels ``text[lo:]`` defines, once per text (a string's hash is
    cached, so each later hit in the same text costs a lookup, not a scan)."""
    if "]:" not in text:
        return frozenset()
    return frozenset(m.group(1) for m in _REFERENCE.finditer(text[lo:]))


def is_filled_label(text: str, start: int, end: int, lo: int = 0) -> bool:
    """Is the bracketed slot phrase ``text[start:end]`` (``[Team Name]``) a label, not a slot?

    - a Markdown reference link: ``text`` defines it on a line of its own with a URL or path
      (``[Job Description]: https://...``), so ``[Job Description]`` is the link's text;
    - a form label with its value, written in title or sentence case (``[Team Name]``, not
      ``[TEAM NAME]``), not naming the speaker or addressee nor instructing (``_UNFILLED``:
      ``[Your Name] Ada`` stays a slot): at the start of a line (``lo`` or after a newline,
      optionally indented and after a list marker) followed on the same line by an optional colon,
      a space and a value that starts with a capital letter, a digit, "(", "@" or "+" (``[Team
      Role] Scout``, ``- [Quest Title]: The Lost Mill``); elsewhere a colon, a space and a value
      that starts with a digit, "(", "@" or "+" (``Office [Phone Number]: 555-0199``);
    - in a script without letter case (Chinese, Japanese, Korean, Arabic), the same with any value
      that is not an honorific (``【担当者名】様``, ``[회사명] 여러분`` stay slots) nor, written on
      without a blank, a particle (``【会社名】の``, ``[장소]에서``): ``【日時】11月28日``, ``[이름] 홍길동``.

    Square brackets of any width (``SQUARE_BRACKETS``)."""
    inner = text[start + 1 : end - 1].strip(" \t\u3000")
    if text[start] not in SQUARE_BRACKETS or not inner:
        return False
    if text[start] == "[" and text[start:end] in _reference_labels(text, lo):
        return True
    if not (inner[0].isupper() or inner[0].islower()):
        return _uncased_label(text, start, end, lo)
    if not inner[0].isupper() or inner == inner.upper():
        return False
    m = _LABEL_VALUE.match(text, end)
    if m is None or not _UNFILLED.isdisjoint(inner.lower().replace("-", " ").split()) or _names_addressee(inner):
        return False
    first, colon = text[m.end()], m.group(1) is not None
    if _at_line_start(text, start, lo):
        return colon or first.isupper() or first.isdigit() or first in "(@+"
    if not colon:
        return False
    return first.isdigit() or first in "(@+" or (first.isupper() and _after_separator(text, start, lo))


def _after_separator(text: str, start: int, lo: int) -> bool:
    """Does ``start`` follow a comma, a semicolon, a dash or a bar on its line (up to three blanks
    between): a label in the middle of a line of labels?"""
    k = start - 1
    while k >= lo and k > start - 4 and text[k] in " \t\u3000":
        k -= 1
    return k >= lo and text[k] in _LABEL_SEPARATORS


_UNCASED_VALUE = re.compile(r"(?:\*\*|__)?((?:[ \t]?[:\uff1a])?)([ \t\u3000]{0,3}(?:\|[ \t]{1,3})?)(\w{1,40})")


def _uncased_label(text: str, start: int, end: int, lo: int) -> bool:
    m = _UNCASED_VALUE.match(text, end)
    if m is None:
        return False
    colon, blanks, word = m.groups()
    if word.startswith(_HONORIFICS) or _honorific_word(text, m.start(3)):
        return False
    # "your" keeps a slot a slot, as in the cased rule: [你的任务] 建造塔楼, [당신의 목표] 탑 건설
    if _names_addressee(text[start + 1 : end - 1].strip(" \t\u3000")):
        return False
    if not _at_line_start(text, start, lo):
        return bool(colon) and (word[0].isdigit() or _after_separator(text, start, lo))
    # hiragana, Hangul or a Chinese particle written on: a particle or an ending, not a value
    c = word[0]
    return bool(colon or blanks) or not ("\u3040" <= c <= "\u309f" or "\uac00" <= c <= "\ud7a3" or c in _ZH_PARTICLES)


def _names_addressee(inner: str) -> bool:
    """Does a slot phrase name the one the model speaks to ("your" in any language)?"""
    if inner.startswith(_CJK_YOURS_OPENERS):
        return True
    words = _words_of(inner)
    if not _ADDRESSEE_WORDS.isdisjoint(words):
        return True
    spaced = f" {' '.join(words)} "  # whole words: "của bạn", not "của bạnh"
    return any(f" {p} " in spaced for p in _ADDRESSEE_PHRASES)


def _honorific_word(text: str, pos: int) -> bool:
    # a whole word: what follows is no letter, digit or combining mark (जी ends in a vowel sign)
    for h in _WORD_HONORIFICS:
        if text.startswith(h, pos):
            after = text[pos + len(h) : pos + len(h) + 1]
            return not after or not (after.isalnum() or unicodedata.category(after).startswith("M"))
    return False


_ZH_PARTICLES = frozenset("\u7684\u4e4b\u548c\u4e0e\u53ca\u7b49")  # 的 之 和 与 及 等


def is_slot_at(text: str, start: int, end: int, lo: int = 0) -> bool:
    """Is the slot candidate ``text[start:end]`` (a match of ``SLOT_CANDIDATES``; ``lo``: where the
    visible text starts) an unfilled slot? The one judgement of the leak detector and the renderer:

    - in square brackets of any width (``SQUARE_BRACKETS``): a slot phrase (``is_slot_phrase``) that
      is no filled label (``is_filled_label``), or a role noun in a value's place (``_role_slot``);
    - in corner brackets: a slot phrase before an honorific, or an instruction (``_corner_slot``);
    - in parentheses: a slot phrase that opens with "your" or an instruction, capitalised;
    - ``{0}``: a positional field in a format string (``_positional_slot``);
    - between percent signs: a slot word or upper snake case ending in one (``_percent_slot``);
    - in angle brackets and braces: a slot phrase (the candidate's guard asked for a capital)."""
    opener, inner = text[start], text[start + 1 : end - 1]
    if opener in SQUARE_BRACKETS:
        # Chinese and Japanese write a prompt's section headings in lenticular brackets
        if is_slot_phrase(inner, domain=opener not in _LENTICULAR):
            return not is_filled_label(text, start, end, lo)
        return _role_slot(text, start, end, lo, inner)
    if opener == "{" and inner.isdigit():
        return _positional_slot(text, start, lo)
    if opener in CORNER_BRACKETS:
        return _corner_slot(text, inner, end)
    if opener == "(":
        return not inner.lstrip()[:1].islower() and is_slot_phrase(inner)
    if opener == "%":
        return _percent_slot(inner)
    if opener in _NAME_RUNS:
        return _name_run_slot(text, start, end, lo)
    return _braced_slot(inner, opener)


def _name_run_slot(text: str, start: int, end: int, lo: int) -> bool:
    """``XXX``, ``ХХХ``, ``OOO`` where a name goes: after a greeting (``Dear XXX``, ``Уважаемый
    ХХХ``, ``尊敬的XXX``) or before an honorific (``OOO님``, ``XXX様``); not ``Super Bowl XXX``,
    ``the XXX size``, ``OOO until Monday``."""
    if text.startswith(_HONORIFICS, end):
        return True
    before = text[max(lo, start - 24) : start]
    if before.endswith(_ZH_GREETINGS):
        return True
    m = _GREETING_BEFORE.search(before)
    return m is not None and m.group(1).lower() in _GREETINGS


_ZH_GREETINGS = ("\u5c0a\u656c\u7684", "\u4eb2\u7231\u7684", "\u656c\u7231\u7684")  # 尊敬的 亲爱的 敬爱的


def _percent_slot(inner: str) -> bool:
    """``%NAME%``, ``%nombre%``, ``%AGENT_NAME%``: a slot word alone (in any language) or upper
    snake case ending in a slot noun; ``%PATH%``, ``%APPDATA%`` are a system's variables."""
    if inner in PLACEHOLDER_WORDS or is_slot_phrase(inner):
        return True
    last = inner.rsplit("_", 1)[-1].lower()
    return "_" in inner and inner == inner.upper() and last in _OF_OBJECTS


def _braced_slot(inner: str, opener: str) -> bool:
    """In angle brackets and braces a slot phrase that starts upper case or in a script without case
    (``<Prénom>``, ``<ИМЯ>``, ``{Empfänger}``, ``<名前>``, ``{이름}``) or with an instruction verb;
    in braces also a lower-case one in another language than English (``{nombre}``, ``{имя}``,
    ``{datum}``): in prose a template's variable. A lower-case English ``<name>`` is a tag and
    ``<tool name>`` a prompt's metavariable."""
    first = inner[:1]
    if len(inner) < 2:
        return False  # {x}: a variable in maths or code
    if first.isupper() or not first.islower() or inner.split(" ", 1)[0] in SLOT_VERBS:
        return is_slot_phrase(inner)
    if opener != "{" or (first.isascii() and _english_slot_phrase(inner)):
        return False
    return _cjk_slot(inner) if _cjk_char().search(inner) else _word_slot(_words_of(inner))


def _role_slot(text: str, start: int, end: int, lo: int, inner: str) -> bool:
    """A role noun or a deadline (``slot_words`` "roles") in a value's place: after a word, a
    colon or "@" on the same line (``Assigned to [OWNER]``, ``Responsable: [RESPONSABLE]``,
    ``负责人：［负责人］``), not a line's label (``[OWNER] Ada``) nor followed by a colon."""
    if _cjk_char().search(inner):
        if inner.translate(_CJK_BLANKS) not in _CJK_ROLES:
            return False
    else:
        words = _words_of(inner)
        while len(words) > 1 and words[0] in _ARTICLES:
            words = words[1:]
        if " ".join(words) not in _ROLES:
            return False
    if text[end : end + 1] in (":", "\uff1a"):
        return False
    return _value_place(text, start, lo)


def _value_place(text: str, start: int, lo: int) -> bool:
    """Does ``start`` follow, on its line, a word or a colon (up to three blanks between), "@", or
    a Chinese or Japanese character (written without blanks)?"""
    k, blanks = start - 1, 0
    while k >= lo and text[k] in " \t" and blanks < 3:
        k, blanks = k - 1, blanks + 1
    if k < lo:
        return False
    c = text[k]
    if c in ":\uff1a@":
        return True
    return (blanks > 0 and c.isalnum()) or _cjk_char().match(c) is not None


_POSITIONAL = re.compile(r"(?<![\w\\^]\{)\{([0-9]{1,2})\}")
_GREETING_BEFORE = re.compile(r"(\w{1,20}),?[ \t]{1,3}\Z")  # "Hallo {0}", "Привет, {0}"


@functools.lru_cache(maxsize=4)
def _positional_fields(text: str, lo: int) -> frozenset[str]:
    """The distinct positional fields (``{0}``, ``{1}``) of ``text[lo:]``, once per text (at most
    64 read: two are enough)."""
    return frozenset(m.group(1) for m in itertools.islice(_POSITIONAL.finditer(text, lo), 64))


def _positional_slot(text: str, start: int, lo: int) -> bool:
    """``{0}`` is a format string's field when the text has another (``Hello {0}, build {1}``) or it
    stands where a name goes: after a greeting or a colon (``Hallo {0},``, ``To: {0}``). Alone in
    prose it is maths: ``the set {0}``, ``use {x} and {0}``."""
    if len(_positional_fields(text, lo)) >= 2:
        return True
    before = text[max(lo, start - 24) : start]
    if before.rstrip(" \t")[-1:] in (":", "\uff1a"):
        return True
    m = _GREETING_BEFORE.search(before)
    return m is not None and m.group(1).lower() in _GREETINGS


def _corner_slot(text: str, inner: str, end: int) -> bool:
    """Corner brackets quote (``「氏名」欄に``: the field named 氏名): a slot phrase in them is a slot
    before an honorific (``「氏名」様``, ``『会社名』御中``) or when it is an instruction."""
    if not is_slot_phrase(inner):
        return False
    if text.startswith(_HONORIFICS, end):
        return True
    return any(v in inner for v in _CJK_VERBS)


def _at_line_start(text: str, start: int, lo: int) -> bool:
    # looks back at most 24 characters (the longest _LINE_START): linear on a long line of hits
    k = max(lo, start - 24)
    nl = text.rfind("\n", k, start)
    if nl == -1 and k > lo:
        return False
    return _LINE_START.fullmatch(text, k if nl == -1 else nl + 1, start) is not None


# what a name shape may start with (after its padding), as the (?=[A-Za-z_]) it had before
_FOLDABLE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"


def _same_letter(c: str, letter: str) -> bool:
    return re.fullmatch(f"(?i:{re.escape(letter)})", c) is not None


def name_shapes(names: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Shapes for a suite's own template variable names (``{{ name }}`` is template syntax
    already). A name with an underscore (``agent_name``) in any bracket and letter case:
    ``[agent_name]``, ``[AGENT_NAME]``, ``{Agent_Name}``, ``<AGENT_NAME>`` (a lower-case ``<name>``
    is an XML tag). A one-word name (``team``, ``events``) only as written or upper-cased in
    braces and as written in square brackets: ``{team}``, ``{TEAM}``, ``[team]``; ``[TEAM]`` and
    ``[Team]`` also serve as chat labels. A name also as a variable of the template
    languages after "$" (Python's ``string.Template``, a shell, PHP) when it has an underscore:
    ``$agent_name``, ``$agentName``. Names shorter than three characters are skipped: ``[x]`` is a
    checkbox, not a slot."""
    usable = sorted({n for n in names if len(n) >= 3 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,60}", n)})
    snake = [n for n in usable if "_" in n.strip("_")]
    single = [n for n in usable if n not in snake]
    shapes: list[tuple[str, str]] = []
    if snake:
        # each name also in kebab case and run together (camelCase in any case: agentName);
        # the guard keeps the case-insensitive alternation from being tried after every bracket
        spellings = sorted({v for n in snake for v in (n, *(n.replace("_", c) for c in ("-", "", " ")))}, key=len)[::-1]
        # the first letters the names can start with, as the case-insensitive match sees them
        # (a set test is cheaper than trying each spelling at every bracket)
        firsts = "".join(sorted({c for c in _FOLDABLE if any(_same_letter(c, n[0]) for n in spellings)}))
        alt = _PAD + f"(?=[{re.escape(firsts)}])(?i:" + "|".join(map(re.escape, spellings)) + ")" + _PAD
        shapes += [("[", alt + r"\]" + _NOT_LINK), ("<", alt + ">"), ("{", alt + r"\}")]
        # after "$", a variable of Python's string.Template, a shell or PHP: $agent_name, $agentName
        # (a one-word name is a word of code too: $team in PHP, $events in maths; and not
        # __AGENT_NAME__: a shape that opens with "_", a slot's inner character, would keep the
        # scan from dropping the slots past their budget, leakage._without)
        idents = sorted({v for n in snake for v in (n, n.replace("_", ""))}, key=len)[::-1]
        # one entry: each "$" of a text tries it once
        shapes.append(("$", r"(?<![\w$]\$)(?i:" + "|".join(map(re.escape, idents)) + r")(?![\w$])"))
    if single:
        exact = "(?:" + "|".join(single) + ")"
        both = "(?:" + "|".join(sorted({*single, *(n.upper() for n in single)})) + ")"
        shapes += [("[", exact + r"\]" + _NOT_LINK), ("{", both + r"\}")]
    return tuple(shapes)
