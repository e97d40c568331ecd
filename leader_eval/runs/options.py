"""The sampling options ``leader-eval run`` and the pytest plugin share, defined once.

Each ``Option`` is one row: its name (``--max-tokens`` on the CLI, ``--le-max-tokens`` and the ini
key ``leader_eval_max_tokens`` in pytest), how its text becomes a value (the same converter in
both: a bad value is a one-line usage error, never a traceback), its default and its help. The
plugin builds its options from this table; ``tests/runs/test_options.py`` checks that the CLI's
``run`` subcommand offers every row with the same type, choices, default and help, so the two
cannot drift. ``run_options`` turns parsed values into the library's ``RunOptions``, and
``check_run_options`` checks a ``RunOptions`` built by hand as the converters check the text.

This module imports nothing heavy: pytest loads it in every session of every repo that has
leader-eval installed.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from leader_eval.bounded.limits import MAX_SAMPLES_PER_CASE
from leader_eval.errors import LeaderEvalError, OptionError
from leader_eval.protocols import check_protocol
from leader_eval.runs.argtypes import (
    name_component,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
    protocol_name,
    sample_count,
)
from leader_eval.runs.trusted import Trusted, assemble
from leader_eval.types import is_finite_number, is_int


class _PathField:
    """A dataclass field that holds ``Path | None`` and takes any path: a ``str`` or an
    ``os.PathLike`` is converted on every assignment, at construction and after it (the pytest
    plugin sets ``options.out`` later), so no code behind it meets a ``str`` where it joins paths."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = "_" + name

    @overload
    def __get__(self, obj: None, owner: type) -> None: ...
    @overload
    def __get__(self, obj: object, owner: type) -> Path | None: ...
    def __get__(self, obj: object | None, owner: type) -> Path | None:
        # on the class (the dataclass machinery asks for the default), the default is None
        return None if obj is None else getattr(obj, self._name, None)

    def __set__(self, obj: object, value: str | os.PathLike[str] | None) -> None:
        if value is not None and not isinstance(value, Path):
            if not isinstance(value, str | os.PathLike):
                raise TypeError(f"RunOptions: {self._name[1:]} must be a path (str or os.PathLike), not {value!r}")
            value = Path(value)
        object.__setattr__(obj, self._name, value)


@dataclass
class RunOptions:
    """What ``leader_eval.run`` samples and where it writes (docs/api.md lists every field)."""

    model: str = "local:smollm2"
    samples: int | None = None
    seed: int | None = None
    tags: Sequence[str] = ()
    case_ids: Sequence[str] = ()
    limit: int | None = None
    out: _PathField = _PathField()  # a str or os.PathLike path; read back as Path | None
    protocol: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    concurrency: int = 64
    context_length: int | None = None
    progress: bool = True
    label: str | None = None
    max_samples: int | None = None  # cap on new backend samples (cost control)
    backend_options: dict[str, Any] = field(default_factory=dict)  # e.g. tokenizer= for tinker://
    cache: bool = True  # the content-addressed sample cache (LEADER_EVAL_CACHE_DIR, default ~/.cache/leader-eval)
    extra_manifest: dict[str, Any] = field(default_factory=dict)
    # model roles and Python checks a suite may name (runs/trusted.py); the default is what code
    # registered (conftest.py) when the options were built
    trusted: Trusted = field(default_factory=assemble)


def check_run_options(options: RunOptions) -> None:
    """Refuse option values that would silently change the measurement (the library twin of the
    CLI's ``argtypes``): counts are integers in range, the temperature a finite number >= 0."""
    # planning (and the limits) load only when a run is checked, not with the pytest plugin

    counts = {
        "samples": (options.samples, 1),
        "limit": (options.limit, 1),
        "max_tokens": (options.max_tokens, 1),
        "context_length": (options.context_length, 1),
        "concurrency": (options.concurrency, 1),
        "max_samples": (options.max_samples, 0),
    }
    for name, (value, low) in counts.items():
        if value is not None and not (is_int(value) and value >= low):
            raise LeaderEvalError(f"run option {name}={value!r}: must be an integer >= {low}")
    if options.samples is not None and options.samples > MAX_SAMPLES_PER_CASE:
        raise LeaderEvalError(
            f"run option samples={options.samples}: at most {MAX_SAMPLES_PER_CASE:,} samples per case "
            "(docs/security.md)"
        )
    t = options.temperature
    if t is not None and not (is_finite_number(t) and t >= 0):
        raise LeaderEvalError(f"run option temperature={t!r}: must be a finite number >= 0")
    if options.seed is not None and not is_int(options.seed):
        raise LeaderEvalError(f"run option seed={options.seed!r}: must be an integer")
    if options.label is not None:
        try:
            name_component(options.label)
        except argparse.ArgumentTypeError as exc:
            raise LeaderEvalError(f"run option label: {exc}") from None
    check_protocol(options.protocol, where="run option protocol")


@dataclass(frozen=True)
class Option:
    """One option of the shared table."""

    name: str  # without dashes: "max-tokens"
    help: str
    type: Callable[[str], Any] | None = str
    default: Any = None
    choices: tuple[str, ...] | None = None
    flag: bool = False  # store_true
    #: may be given more than once (``--model A --model B``: a model matrix); parsed as a list
    repeat: bool = False

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    def convert(self, text: Any) -> Any:
        """The value of ``text`` (an ini string or a parsed value), or ``argparse.ArgumentTypeError``."""
        if self.flag:
            if isinstance(text, bool):
                return text
            low = str(text).strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off", ""):
                return False
            raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true/false)")
        value = self.type(text) if self.type is not None and isinstance(text, str) else text
        if self.choices and value not in self.choices:
            raise argparse.ArgumentTypeError(f"{value!r}: choose from {', '.join(self.choices)}")
        return value

    def argparse_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``add_argument`` / pytest's ``addoption`` (the same in both)."""
        if self.flag:
            return {"action": "store_true", "help": self.help}
        # a repeatable option's default is applied after parsing (argparse would append to it)
        kw: dict[str, Any] = {"help": self.help, "default": None if self.repeat else self.default}
        if self.repeat:
            kw["action"] = "append"
        if self.type is not None and self.type is not str:
            kw["type"] = self.type
        if self.choices:
            kw["choices"] = list(self.choices)
        return kw


#: What ``leader-eval run`` and the pytest plugin both expose for sampling a suite.
SAMPLING_OPTIONS: tuple[Option, ...] = (
    Option(
        "model",
        "local:smollm2 | gguf:PATH | replay:RUN_DIR | openai:URL#MODEL | tinker://...; "
        "'SPEC --temperature 0.2 ...' gives this model its own options; repeat for a model matrix (run)",
        default="local:smollm2",
        repeat=True,
    ),
    Option("samples", "samples per case (default: the suite's; at most 100000)", sample_count),
    Option("seed", "run seed (default: the suite's, else fresh; recorded in the manifest)", non_negative_int),
    Option(
        "label",
        "the run's label: names its run directory and report, never chooses a golden (default: from the model)",
        name_component,
    ),
    Option("protocol", "tool-call protocol (beats the suite's and the backend's)", protocol_name),
    Option("temperature", "sampling temperature (beats the suite's)", non_negative_float),
    Option("max-tokens", "largest completion in tokens (beats the suite's)", positive_int),
    Option("concurrency", "requests in flight", positive_int, default=64),
    Option("context-length", "override the model's context length", positive_int),
    Option(
        "rope-scaling",
        "local/gguf: extend the context past the GGUF's training length with llama.cpp's YaRN "
        "(yarn, with --context-length; a different model: part of its id and cache key)",
        None,
        choices=("none", "yarn"),
    ),
    Option("tokenizer", "tinker: local path of the base model's Hugging Face tokenizer (offline)"),
    Option("base-model", "tinker: base model name, when it cannot be resolved from the checkpoint"),
    Option("renderer", "tinker: a tinker-cookbook renderer name (qwen3, kimi_k2, ...)"),
    Option("api-mode", "openai: completions (raw text) or chat", None, choices=("completions", "chat")),
    Option("template-gguf", "openai completions mode: read the chat template and tokenizer from this GGUF"),
    Option("chat-template", "openai completions mode: a jinja2 chat template file"),
    Option("api-key-env", "openai: environment variable holding the API key (default OPENAI_API_KEY)"),
    Option(
        "max-samples",
        "stop cleanly after this many new samples (cost cap; an episode reserves its max_steps)",
        non_negative_int,
    ),
    Option("no-cache", "do not read or write the sample cache", flag=True),
    Option(
        "max-error-rate",
        "share of samples that may end in a sampler error before the run fails (default 0: none)",
        probability,
        default=0.0,
    ),
    Option(
        "request-timeout",
        "openai/tinker: seconds one request may take, body included (openai default 120; "
        "a sample with its retries gets 3x this)",
        positive_float,
    ),
    Option(
        "max-response-bytes",
        "openai: cap on a response body after decompression (default 8388608); larger is a sample error",
        positive_int,
    ),
    Option(
        "cache-id",
        "name the weights behind a remote model for the sample cache (remote servers are never "
        "served from the cache across runs without it)",
    ),
)

SAMPLING_BY_DEST: dict[str, Option] = {o.dest: o for o in SAMPLING_OPTIONS}

#: what a suite's names mean (runs/trusted.py), on every sampling command and in pytest
#: (``--le-model-role``; the ini's linelists ``leader_eval_model_roles``/``leader_eval_check_functions``)
TRUSTED_OPTIONS: tuple[Option, ...] = (
    Option(
        "model-role",
        "NAME=SPEC [--flag value ...]: the model a suite's judge or teammate NAME means, with its own "
        "sampling options (repeatable; beats pyproject.toml and the ini)",
        repeat=True,
    ),
    Option(
        "check-function",
        "NAME=MODULE:FUNCTION: the Python check a suite's NAME means (repeatable; beats pyproject.toml and the ini)",
        repeat=True,
    ),
)

DEFAULT_KEEP_RUNS = 5
MODES = ("soft", "strict")

#: where runs and goldens live and how a session decides: the pytest plugin's own options, which a
#: configuration file (runs/config_file.py) may set for the CLI too (baseline, golden-dir, run-dir)
PROJECT_OPTIONS: tuple[Option, ...] = (
    Option(
        "eval-mode",
        "soft: a failing case is reported as xfail and the gate decides the exit status; "
        "strict: any failing sample fails its case and the session",
        None,
        default="soft",
        choices=MODES,
    ),
    Option("golden-dir", "directory of golden baselines", default="golden"),
    Option(
        "baseline",
        "the golden baseline every model is gated against: GOLDEN_DIR/<suite>/<baseline>.json (default main)",
        name_component,
        default="main",
    ),
    Option(
        "golden-strict",
        "CI mode (docs/gating.md); a missing golden fails with or without it",
        flag=True,
    ),
    Option("run-dir", "directory the run directories are written under", default="runs"),
    Option(
        "keep-runs",
        "run directories made by pytest kept per suite and label (older ones are deleted; 0 keeps all)",
        non_negative_int,
        default=DEFAULT_KEEP_RUNS,
    ),
)


def add_arguments(parser: argparse.ArgumentParser | Any, prefix: str = "--") -> None:
    """Add every sampling option, and the trusted names' options, to an argparse parser (``leader-eval run``)."""
    for opt in (*SAMPLING_OPTIONS, *TRUSTED_OPTIONS):
        parser.add_argument(prefix + opt.name, **opt.argparse_kwargs())


def backend_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """Options only some samplers take: Tinker's tokenizer/base model/renderer, a server's API mode,
    timeouts and body caps, the cache identity. ``values``: parsed option values by dest."""
    model = str(values.get("model") or "")
    out: dict[str, Any] = {}
    if model.startswith(("local:", "gguf:")) and values.get("rope_scaling"):
        out["rope_scaling"] = values["rope_scaling"]
    if model.startswith("tinker"):
        for name in ("tokenizer", "base_model", "renderer"):
            if values.get(name):
                out[name] = values[name]
    if model.startswith("openai:"):
        # the backend's own in-flight limit would otherwise cap --concurrency at its default
        out["max_concurrency"] = values.get("concurrency") or 64
        if values.get("api_mode"):
            out["mode"] = values["api_mode"]
        if values.get("api_key_env"):
            out["api_key_env"] = values["api_key_env"]
        if values.get("template_gguf"):
            out["gguf_path"] = values["template_gguf"]
        if values.get("chat_template"):
            path = Path(values["chat_template"])
            try:
                out["chat_template"] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeError) as exc:
                raise OptionError(f"--chat-template {path}: cannot read: {exc}", "chat_template") from None
        if values.get("max_response_bytes") is not None:
            out["max_response_bytes"] = values["max_response_bytes"]
    if values.get("request_timeout") is not None and model.startswith(("openai:", "tinker")):
        out["timeout_s"] = values["request_timeout"]
    if values.get("cache_id"):
        out["cache_id"] = values["cache_id"]
    return out


def run_options(values: Mapping[str, Any], **extra: Any) -> RunOptions:
    """``RunOptions`` from parsed sampling values by dest; ``extra`` sets the other fields."""
    return RunOptions(
        model=values.get("model") or "local:smollm2",
        samples=values.get("samples"),
        seed=values.get("seed"),
        protocol=values.get("protocol"),
        temperature=values.get("temperature"),
        max_tokens=values.get("max_tokens"),
        concurrency=values.get("concurrency") or 64,
        context_length=values.get("context_length"),
        label=values.get("label"),
        max_samples=values.get("max_samples"),
        cache=not values.get("no_cache"),
        backend_options=backend_options(values),
        **extra,
    )
