"""Hand-labeled corpus of leader outputs for the leak and degeneration detectors.

Records live in the YAML files beside this module. The expected finding spans are written
inline by hand: ``⟦`` and ``⟧`` surround the exact characters a finding must cover, and the
record's ``expect`` list gives the reason of each bracketed span, in the order the opening
brackets appear. The loader strips the brackets and turns them into ``[reason, start, end]``
triples. Nothing here calls a detector.

Leak records::

    - id: tool-01
      text: "@Ada take the map ⟦<tool_use>⟧"
      expect: [leak_tool_markup]      # or "none"
      config: {markers: ["[brb:"]}    # LeakConfig overrides (lists become tuples)
      where: call[0].arguments.message  # optional

Degeneration records add ``stop_reason`` (default "stop") and ``prompt`` (a key of the file's
``prompts`` map, or literal text); ``expect`` lists the failing checks' reasons, and a
``repetition`` entry takes its span from the one bracketed region (the repeated run: from the
start of the first copy to the end of the second).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
OPEN, CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧

LEAK_FILES = (
    "leak_tool_markup.yaml",
    "leak_reasoning.yaml",
    "leak_special_token.yaml",
    "leak_marker.yaml",
    "leak_placeholder.yaml",
    "leak_placeholder_i18n.yaml",
    "leak_scaffold.yaml",
    "forbidden_pattern.yaml",
    "leak_family_tokens.yaml",
    "near_miss.yaml",
    "near_miss_i18n.yaml",
    "near_miss_tokens.yaml",
)
NEAR_MISS_FILES = frozenset(f for f in LEAK_FILES if f.startswith("near_miss"))
DEGENERATION_FILES = ("degeneration.yaml",)
LOCATED = {"repetition"}  # degeneration reasons that carry a span


@dataclass
class LeakRecord:
    id: str
    file: str
    text: str
    expected: list[tuple[str, int, int]]
    config: dict[str, Any]
    where: str = "text"
    note: str = ""


@dataclass
class DegenerationRecord:
    id: str
    file: str
    text: str
    expected: list[str]
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    stop_reason: str | None = "stop"
    prompt: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def strip_brackets(annotated: str) -> tuple[str, list[tuple[int, int]]]:
    """Remove ⟦ ⟧ and return the plain text and the bracketed spans (by opening order)."""
    out: list[str] = []
    spans: list[list[int]] = []
    stack: list[int] = []
    pos = 0
    for ch in annotated:
        if ch == OPEN:
            stack.append(len(spans))
            spans.append([pos, -1])
        elif ch == CLOSE:
            if not stack:
                raise ValueError(f"unbalanced {CLOSE} in {annotated!r}")
            spans[stack.pop()][1] = pos
        else:
            out.append(ch)
            pos += 1
    if stack:
        raise ValueError(f"unbalanced {OPEN} in {annotated!r}")
    return "".join(out), [(s, e) for s, e in spans]


def _tuples(cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()}


def _expect_list(raw: Any) -> list[str]:
    if raw in (None, "none", []):
        return []
    return [str(x) for x in raw]


def base_leak_config() -> dict[str, Any]:
    """The suite every leak record is judged under unless it overrides a field: a
    ChatML (Qwen-style) template, the village-leader scaffold and the registry's call markup."""
    scaffold = yaml.safe_load((HERE / "scaffold.yaml").read_text(encoding="utf-8"))
    from leader_eval.scoring.scorer import registry_call_markup

    return {
        # every registered protocol's call markup, as the scorer passes it (issue 22)
        "call_markup": registry_call_markup(),
        "special_tokens": ("<|im_start|>", "<|im_end|>", "<|endoftext|>"),
        "eot_tokens": ("<|im_end|>",),
        "markers": ("[NO CHAT]",),
        "scaffold_texts": (scaffold["system_prompt"], scaffold["tools_json"]),
    }


def load_leak_records() -> list[LeakRecord]:
    base = base_leak_config()
    records: list[LeakRecord] = []
    for name in LEAK_FILES:
        doc = yaml.safe_load((HERE / name).read_text(encoding="utf-8"))
        file_cfg = _tuples(doc.get("defaults", {}).get("config", {}))
        for raw in doc["records"]:
            text, spans = strip_brackets(raw["text"])
            reasons = _expect_list(raw.get("expect"))
            if len(reasons) != len(spans):
                raise ValueError(f"{name}:{raw['id']}: {len(spans)} bracketed spans but {len(reasons)} reasons")
            cfg = {**base, **file_cfg, **_tuples(raw.get("config", {}))}
            triples = [(r, s, e) for r, (s, e) in zip(reasons, spans, strict=True)]
            expected = sorted(triples, key=lambda t: (t[1], t[2], t[0]))
            where = raw.get("where", "text")
            records.append(LeakRecord(raw["id"], name, text, expected, cfg, where, raw.get("note", "")))
    _unique(records)
    return records


def load_degeneration_records() -> list[DegenerationRecord]:
    records: list[DegenerationRecord] = []
    for name in DEGENERATION_FILES:
        doc = yaml.safe_load((HERE / name).read_text(encoding="utf-8"))
        prompts: dict[str, str] = doc.get("prompts", {})
        for raw in doc["records"]:
            text, spans = strip_brackets(raw["text"])
            reasons = _expect_list(raw.get("expect"))
            located = [r for r in reasons if r in LOCATED]
            if len(located) != len(spans):
                raise ValueError(f"{name}:{raw['id']}: {len(spans)} bracketed spans for {located}")
            prompt = raw.get("prompt", "")
            records.append(
                DegenerationRecord(
                    id=raw["id"],
                    file=name,
                    text=text,
                    expected=reasons,
                    spans=dict(zip(located, spans, strict=True)),
                    stop_reason=raw.get("stop_reason", "stop"),
                    prompt=prompts.get(prompt, prompt),
                    config=_tuples(raw.get("config", {})),
                    note=raw.get("note", ""),
                )
            )
    _unique(records)
    return records


def _unique(records: list[Any]) -> None:
    seen: set[str] = set()
    for r in records:
        if r.id in seen:
            raise ValueError(f"duplicate corpus id {r.id!r}")
        seen.add(r.id)


#: the issue's bar for precision and recall per class
PRF_TARGET = 0.98


def prf_table(name: str, table: dict[str, tuple[int, int, int]], lines: list[str], low: list[str]) -> None:
    """Append a precision/recall table (class -> (tp, predicted, labeled)) to ``lines``; append
    ``name/class`` to ``low`` for each class below ``PRF_TARGET``."""
    lines.append(f"{name}: class  precision  recall  (tp / predicted / labeled)")
    for cls, (tp, pred, lab) in table.items():
        p = tp / pred if pred else None
        r = tp / lab if lab else None
        lines.append(
            f"  {cls:<28} {'-' if p is None else f'{p:.3f}':>9} {'-' if r is None else f'{r:.3f}':>7}"
            f"  ({tp} / {pred} / {lab})"
        )
        if (p is not None and p < PRF_TARGET) or (r is not None and r < PRF_TARGET):
            low.append(f"{name}/{cls}")
