"""A model entry with its own options: ``SPEC [--flag value ...]``, for model roles and the matrix.

One syntax wherever a model is named with settings of its own: ``run --model 'gguf:m.gguf
--temperature 0.2'`` (one entry of a model matrix), ``--model-role 'grader=openai:URL#m
--api-mode chat'``, an ini line ``leader_eval_model_roles = grader=local:smollm2 --temperature
0``, a ``[tool.leader-eval.model-roles]`` string. The text up to the first `` --`` is the model
spec, verbatim (a GGUF path may hold spaces); the rest is split as a shell would (``shlex``) and
parsed with the sampling option table (``options.SAMPLING_OPTIONS``, every row but ``model``),
so a value goes through the converter ``leader-eval run`` uses and an error names the CLI flag.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from leader_eval.runs.argtypes import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
    sample_count,
)
from leader_eval.runs.options import SAMPLING_OPTIONS, Option
from leader_eval.runs.trusted import NamedModel, Trusted, TrustedError, checks_from_pairs, split_pair

#: an entry longer than this is refused before it is split (a command line or an ini line)
MAX_ENTRY_CHARS = 4096
_FLAGS_START = re.compile(r"\s--")
#: the converters of options whose value is a number (a TOML number in a file, never a string)
_NUMBER_TYPES = (sample_count, non_negative_int, non_negative_float, positive_int, positive_float, probability)
SAMPLING_BY_NAME: dict[str, Option] = {o.name: o for o in SAMPLING_OPTIONS}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise TrustedError(message)


def _entry_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="", add_help=False, allow_abbrev=False, exit_on_error=False)
    for opt in SAMPLING_OPTIONS:
        if opt.name == "model":
            continue
        kw = opt.argparse_kwargs()
        kw["default"] = argparse.SUPPRESS  # only what the entry gives
        parser.add_argument("--" + opt.name, **kw)
    return parser


def parse_entry(text: str, *, where: str) -> dict[str, Any]:
    """``{"model": SPEC, dest: value, ...}`` from ``SPEC [--flag value ...]``; ``TrustedError`` names ``where``."""
    if not isinstance(text, str):
        raise TrustedError(f"{where}: {text!r} is not a model spec")
    if len(text) > MAX_ENTRY_CHARS:
        raise TrustedError(f"{where}: longer than {MAX_ENTRY_CHARS} characters")
    found = _FLAGS_START.search(text)
    spec = (text[: found.start()] if found else text).strip()
    if not spec or spec.startswith("-"):
        raise TrustedError(f"{where}: {text!r} does not start with a model spec (e.g. local:smollm2)")
    values: dict[str, Any] = {"model": spec}
    if found:
        try:
            tokens = shlex.split(text[found.start() :])
        except ValueError as exc:
            raise TrustedError(f"{where}: {exc}") from None
        try:
            parsed = _entry_parser().parse_args(tokens)
        except argparse.ArgumentError as exc:
            raise TrustedError(f"{where}: {exc}") from None
        except TrustedError as exc:
            raise TrustedError(f"{where}: {exc}") from None
        values.update(vars(parsed))
    return values


def convert_value(opt: Option, raw: Any, *, where: str) -> Any:
    """A TOML value for ``opt``, converted as ``--name VALUE`` would be (the same range checks):
    a flag takes a boolean, a number option a number, any other option a string."""
    if opt.flag:
        if not isinstance(raw, bool):
            raise TrustedError(f"{where}: {raw!r} is not a boolean (true/false)")
        return raw
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise TrustedError(f"{where}: {raw!r} is not a {'number' if _numeric(opt) else 'string'}")
    if isinstance(raw, int | float) and not _numeric(opt):
        raise TrustedError(f"{where}: {raw!r} is not a string (quote it)")
    if isinstance(raw, str) and _numeric(opt):
        raise TrustedError(f"{where}: {raw!r} is a string, not a number (drop the quotes)")
    try:
        return opt.convert(str(raw) if isinstance(raw, int | float) else raw)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise TrustedError(f"{where}: {exc}") from None


def _numeric(opt: Option) -> bool:
    return opt.type in _NUMBER_TYPES


def suggestion(key: str, known: Sequence[str]) -> str:
    """`` (did you mean max-tokens?)`` for a near miss, else the empty string."""
    close = difflib.get_close_matches(key.replace("_", "-"), list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def entry_from_table(table: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """A model entry from a TOML table of option names (``{model = "...", temperature = 0}``)."""
    if not isinstance(table.get("model"), str) or not table["model"].strip():
        raise TrustedError(f'{where}: needs model = "SPEC"')
    values: dict[str, Any] = {"model": table["model"].strip()}
    names = [o.name for o in SAMPLING_OPTIONS]
    for key, raw in table.items():
        if key == "model":
            continue
        opt = SAMPLING_BY_NAME.get(str(key))
        if opt is None:
            raise TrustedError(f"{where}.{key}: not a sampling option{suggestion(str(key), names)}")
        values[opt.dest] = convert_value(opt, raw, where=f"{where}.{key}")
    return values


def roles_from_pairs(pairs: Iterable[str], *, source: str) -> dict[str, NamedModel]:
    """Model roles from ``NAME=SPEC [--flag value ...]`` lines (command line, ini)."""
    out: dict[str, NamedModel] = {}
    for text in pairs:
        name, rest = split_pair(str(text), where=source)
        out[name] = NamedModel(name, parse_entry(rest, where=f"{source} {name}"), source)
    return out


def trusted_from_options(
    model_roles: Iterable[str] | None, check_functions: Iterable[str] | None, *, prefix: str = "--"
) -> Trusted:
    """The command line's definitions (``--model-role``/``--check-function``, ``--le-*`` in pytest)."""
    return Trusted(
        roles_from_pairs(model_roles or (), source=f"{prefix}model-role"),
        checks_from_pairs(check_functions or (), source=f"{prefix}check-function"),
    )


@dataclass(frozen=True)
class ModelEntry:
    """One ``--model`` entry: its text, the options it set itself, and the values it samples with."""

    text: str
    own: Mapping[str, Any]  # options the entry gave after its spec
    values: Mapping[str, Any]  # the command's sampling values with the entry's beating them

    @property
    def model(self) -> str:
        return str(self.values["model"])


def model_entries(values: Mapping[str, Any], *, flag: str = "--model") -> list[ModelEntry]:
    """One entry per ``--model`` given (the default model when none was): ``values["model"]`` is
    a spec, a list of entries or None."""
    given = values.get("model")
    texts: Sequence[str] = [given] if isinstance(given, str) else list(given or [])
    if not texts:
        texts = [str(SAMPLING_BY_NAME["model"].default)]
    out = []
    for text in texts:
        entry = parse_entry(text, where=f"{flag} {text!r}" if len(text) < 200 else flag)
        own = {k: v for k, v in entry.items() if k != "model"}
        out.append(ModelEntry(text, own, {**values, **entry}))
    return out


def one_model(values: Mapping[str, Any], *, command: str) -> Mapping[str, Any]:
    """The sampling values of a command that takes one model: ``--model`` once (with its own
    options, if any); a matrix is ``leader-eval run``'s alone."""
    entries = model_entries(values)
    if len(entries) > 1:
        raise TrustedError(
            f"--model given {len(entries)} times: {command} samples one model (a model matrix is leader-eval run's)"
        )
    return entries[0].values
