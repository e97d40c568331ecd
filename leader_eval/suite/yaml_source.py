"""Bounded YAML for suites: JSON-shaped data with the line of every node, or a one-line error.

The document is built straight from libyaml's event stream (no recursion, so no depth can crash
it), counting as it goes. Refused, each as ``SuiteError(FILE, LINE, ...)``:

- alias bombs: more than ``MAX_YAML_NODES`` nodes or ``MAX_YAML_EXPANDED_CHARS`` characters of
  scalars after alias expansion, or more than ``MAX_YAML_ALIASES`` aliases;
- an alias inside its own anchor (a recursive structure), an undefined alias;
- nesting deeper than ``MAX_YAML_DEPTH``;
- merge keys (``<<``), duplicate keys, keys that are not plain strings;
- values JSON cannot hold: dates and timestamps (quote them), ``!!binary``, ``!!set``, NaN and
  infinities, custom tags;
- more than one document in the file.

Aliases share one Python object, so memory stays proportional to the file; the counts bound the
work of everything that walks the data afterwards (schema validation, hashing, rendering).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from leader_eval.bounded.limits import MAX_YAML_ALIASES, MAX_YAML_DEPTH, MAX_YAML_EXPANDED_CHARS, MAX_YAML_NODES
from leader_eval.errors import SuiteError

_PARSER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
JsonPath = tuple[str | int, ...]

_TAG = "tag:yaml.org,2002:"
_SEQ_TAGS = {None, "!", _TAG + "seq"}
_MAP_TAGS = {None, "!", _TAG + "map"}
_STR = _TAG + "str"
_PLAIN_TAGS_MAX = 4096
_NULL = _TAG + "null"


@dataclass(slots=True)
class _Open:
    value: list[Any] | dict[str, Any]
    path: JsonPath
    anchor: str | None
    line: int
    nodes: int = 1
    chars: int = 0
    key: str | None = None
    key_line: int = 0
    has_key: bool = False
    extra: dict[str, int] = field(default_factory=dict)
    is_map: bool = False


def _line_of(ev: yaml.Event) -> int:
    return ev.start_mark.line + 1 if ev.start_mark is not None else 1


class _Builder:
    def __init__(self, path: Path):
        self.path = path
        self.lines: dict[JsonPath, int] = {}
        self.anchors: dict[str, tuple[Any, int, int]] = {}
        self.stack: list[_Open] = []
        self.nodes = 0
        self.chars = 0
        self.aliases = 0
        self.result: Any = None
        self.done = False
        self.anchored = 0  # open collections with an anchor: the only ones whose counts are read
        self.constructor = yaml.SafeLoader("")
        self.plain_tags: dict[str, str] = {}  # a plain scalar's text -> its resolved tag

    def fail(self, line: int, message: str) -> SuiteError:
        return SuiteError(self.path, line, message)

    # -- counting ------------------------------------------------------------------------------

    def count(self, line: int, nodes: int, chars: int) -> None:
        self.nodes += nodes
        self.chars += chars
        if self.anchored:
            for frame in self.stack:
                frame.nodes += nodes
                frame.chars += chars
        if self.nodes > MAX_YAML_NODES:
            raise self.fail(line, f"YAML expands to over {MAX_YAML_NODES:,} nodes (an alias bomb, or too many cases)")
        if self.chars > MAX_YAML_EXPANDED_CHARS:
            raise self.fail(line, f"YAML expands to over {MAX_YAML_EXPANDED_CHARS:,} characters of text (alias bomb?)")

    # -- placing a finished value -------------------------------------------------------------

    def child_path(self, line: int) -> JsonPath:
        if not self.stack:
            return ()
        top = self.stack[-1]
        if isinstance(top.value, list):
            return (*top.path, len(top.value))
        if not top.has_key:
            raise self.fail(line, "mapping keys must be plain scalars")
        assert top.key is not None
        return (*top.path, top.key)

    def place(self, value: Any, line: int) -> None:
        if not self.stack:
            self.result = value
            self.done = True
            self.lines.setdefault((), line)
            return
        top = self.stack[-1]
        if not top.is_map:
            assert isinstance(top.value, list)
            self.lines[(*top.path, len(top.value))] = line
            top.value.append(value)
        else:
            assert top.key is not None and isinstance(top.value, dict)
            top.value[top.key] = value
            self.lines[(*top.path, top.key)] = top.key_line
            top.has_key = False
            top.key = None

    def place_key(self, key: Any, tag: str, line: int) -> None:
        top = self.stack[-1]
        assert isinstance(top.value, dict)
        if tag == _TAG + "merge":
            raise self.fail(line, "YAML merge keys (<<) are not supported; write the keys out")
        if not isinstance(key, str):
            raise self.fail(line, f"mapping keys must be strings, got {key!r}")
        if key in top.value or key in top.extra:
            raise self.fail(line, f"duplicate key {key!r}")
        top.extra[key] = line
        top.key = key
        top.key_line = line
        top.has_key = True

    def expecting_key(self) -> bool:
        return bool(self.stack) and self.stack[-1].is_map and not self.stack[-1].has_key

    # -- events --------------------------------------------------------------------------------

    def scalar(self, ev: yaml.ScalarEvent) -> None:
        # ~20,000 calls for a 2,000-case suite: counting, keys and placing are written out here
        # for the common node (no anchor open around it); ``count``, ``place_key`` and ``place``
        # say the same at length, and the rest goes through them
        mark = ev.start_mark
        line = mark.line + 1 if mark is not None else 1
        text = ev.value
        tag = ev.tag
        if tag is None or tag == "!":
            if not ev.implicit[0]:
                tag = _STR  # quoted: a string whatever it reads like (the resolver's answer)
            else:
                # a plain scalar's tag depends on its text alone (SafeLoader has no path
                # resolvers), and keys and values repeat from case to case
                tag = self.plain_tags.get(text)
                if tag is None:
                    tag = self.constructor.resolve(yaml.ScalarNode, text, ev.implicit)
                    if len(self.plain_tags) < _PLAIN_TAGS_MAX:
                        self.plain_tags[text] = tag
        value = text if tag == _STR else self.construct(tag, ev, line)
        stack = self.stack
        top = stack[-1] if stack else None
        if top is not None and top.is_map and not top.has_key:
            if tag != _STR or type(value) is not str or value in top.value or value in top.extra:
                self.place_key(value, tag, line)  # refuses it, with the reason
            top.extra[value] = line
            top.key = value
            top.key_line = line
            top.has_key = True
            self._count_one(line, len(text))
            return
        self._count_one(line, len(text))
        if ev.anchor:
            self.anchors[ev.anchor] = (value, 1, len(text))
        if top is None:
            self.place(value, line)
        elif top.is_map:
            key = cast(str, top.key)  # a map's frame holds its key here (has_key)
            cast(dict[str, Any], top.value)[key] = value
            self.lines[(*top.path, key)] = top.key_line
            top.has_key = False
            top.key = None
        else:
            items = cast(list[Any], top.value)
            self.lines[(*top.path, len(items))] = line
            items.append(value)

    def _count_one(self, line: int, chars: int) -> None:
        """``count(line, 1, chars)``."""
        if self.anchored:
            self.count(line, 1, chars)
            return
        self.nodes += 1
        self.chars += chars
        if self.nodes > MAX_YAML_NODES or self.chars > MAX_YAML_EXPANDED_CHARS:
            self.nodes -= 1
            self.chars -= chars
            self.count(line, 1, chars)  # raises, with the message

    def construct(self, tag: str, ev: yaml.ScalarEvent, line: int) -> Any:
        if tag == _STR:
            return ev.value
        if tag == _NULL:
            return None
        node = yaml.ScalarNode(tag, ev.value)
        c = self.constructor
        try:
            if tag == _TAG + "bool":
                return c.construct_yaml_bool(node)
            if tag == _TAG + "int":
                return c.construct_yaml_int(node)
            if tag == _TAG + "float":
                value = c.construct_yaml_float(node)
                if not math.isfinite(value):
                    raise self.fail(line, f"{ev.value!r} is not a finite number (JSON has no NaN or infinity)")
                return value
            if tag == _TAG + "merge":
                return ev.value  # refused by place_key with a better message
        except (ValueError, yaml.YAMLError) as exc:
            raise self.fail(line, f"invalid YAML value {ev.value[:40]!r}: {exc}") from exc
        if tag == _TAG + "timestamp":
            raise self.fail(line, f"YAML reads {ev.value!r} as a date/time, which JSON cannot hold; quote it")
        if tag == _TAG + "binary":
            raise self.fail(line, "!!binary values are not supported; suites hold JSON data")
        raise self.fail(line, f"unsupported YAML tag {tag!r}; suites hold JSON data")

    def start(self, ev: yaml.CollectionStartEvent, kind: type) -> None:
        line = _line_of(ev)
        if self.expecting_key():
            raise self.fail(line, "mapping keys must be plain scalars")
        tags = _SEQ_TAGS if kind is list else _MAP_TAGS
        if ev.tag not in tags:
            raise self.fail(line, f"unsupported YAML tag {ev.tag!r}; suites hold JSON data")
        if len(self.stack) >= MAX_YAML_DEPTH:
            raise self.fail(line, f"YAML nests deeper than {MAX_YAML_DEPTH} levels")
        path = self.child_path(line)
        self.lines[path] = line
        self.count(line, 1, 0)
        if ev.anchor:
            self.anchored += 1
        self.stack.append(_Open(kind(), path, ev.anchor, line, nodes=1, is_map=kind is dict))

    def end(self, ev: yaml.Event) -> None:
        frame = self.stack.pop()
        if frame.anchor:
            self.anchored -= 1
            self.anchors[frame.anchor] = (frame.value, frame.nodes, frame.chars)
        self.place(frame.value, frame.line)

    def alias(self, ev: yaml.AliasEvent) -> None:
        line = _line_of(ev)
        if self.expecting_key():
            raise self.fail(line, "mapping keys must be plain scalars, not aliases")
        self.aliases += 1
        if self.aliases > MAX_YAML_ALIASES:
            raise self.fail(line, f"more than {MAX_YAML_ALIASES:,} YAML aliases")
        if any(f.anchor == ev.anchor for f in self.stack):
            raise self.fail(line, f"recursive YAML alias *{ev.anchor} (it refers to a node that holds it)")
        if ev.anchor not in self.anchors:
            raise self.fail(line, f"undefined YAML alias *{ev.anchor}")
        value, nodes, chars = self.anchors[ev.anchor]
        self.count(line, nodes, chars)
        self.place(value, line)


def load_yaml(path: str | Path, source: str) -> tuple[Any, dict[JsonPath, int]]:
    """Parse one YAML document into JSON-shaped data and a ``path -> line`` map (1-based)."""
    b = _Builder(Path(path))
    documents = 0
    parser: Any = None
    scalar, start, end = b.scalar, b.start, b.end
    try:
        # the parser's own loop, without ``yaml.parse``'s generator around it: a 2,000-case
        # suite is ~36,000 events (made inside the try: the pure-Python reader refuses an
        # unprintable character as it is made)
        parser = _PARSER(source)
        get_event = parser.get_event
        while (ev := get_event()) is not None:
            cls = type(ev)
            if cls is yaml.ScalarEvent:
                scalar(ev)
            elif cls is yaml.MappingStartEvent:
                start(ev, dict)
            elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
                end(ev)
            elif cls is yaml.SequenceStartEvent:
                start(ev, list)
            elif cls is yaml.AliasEvent:
                b.alias(ev)
            elif cls is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise b.fail(_line_of(ev), "a suite file holds one YAML document (found a second '---')")
            elif cls is yaml.StreamEndEvent:
                break
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise SuiteError(path, line, f"invalid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise SuiteError(path, None, f"invalid YAML: {exc}") from exc
    finally:
        if parser is not None:
            parser.dispose()
        b.constructor.dispose()
    if not b.done:
        raise SuiteError(path, 1, "the file is empty")
    return b.result, b.lines


def line_of(lines: Mapping[JsonPath, int], path: JsonPath) -> int:
    """Line of the closest node at or above ``path`` in a ``load_yaml`` line table (1-based)."""
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path, 1)
