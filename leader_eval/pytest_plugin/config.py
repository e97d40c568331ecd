"""The plugin's options: ``--le-*`` on the command line, ``leader_eval_*`` in the ini file.

Sampling options come from ``leader_eval.runs.options.SAMPLING_OPTIONS`` (the table ``leader-eval run``
is checked against); the rest are the plugin's own. A command-line value beats the ini value,
which beats the default. Every value goes through the same converter as the CLI's: a bad one is
a pytest usage error (exit 4) naming the option, never a traceback.

Which YAML files are suites is the user's choice, never a guess from their content: files that
match the ini globs ``leader_eval_suites`` (default ``evals/**/*.yaml``, relative to the rootdir)
or that are named on the command line. Nothing here imports more than the standard library and
pytest, so an installed but unused plugin costs a repo nothing.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from leader_eval.runs.options import DEFAULT_KEEP_RUNS, PROJECT_OPTIONS, SAMPLING_OPTIONS, TRUSTED_OPTIONS, Option

if TYPE_CHECKING:
    from leader_eval.runs.config_file import ConfigFile
    from leader_eval.runs.model_spec import ModelEntry
    from leader_eval.runs.trusted import Trusted

PREFIX = "--le-"
INI_PREFIX = "leader_eval_"
DEFAULT_SUITES = ["evals/**/*.yaml", "evals/**/*.yml"]
#: the plugin's own options (sampling ones come from the shared table): the project options a
#: configuration file may set too (runs/options.py)
PLUGIN_OPTIONS: tuple[Option, ...] = PROJECT_OPTIONS

#: command-line only: these change files or select cases, so an ini file never sets them silently
#: (a shard is one CI job's slice of the suites: an ini key would make every job the same shard)
CMDLINE_ONLY = ("update-golden", "allow-missing-golden", "tolerance", "case", "shard", "stress")


@dataclass
class PluginOptions:
    """Every option's effective value (command line > ini > default)."""

    sampling: dict[str, Any]
    mode: str = "soft"
    golden_dir: Path = Path("golden")
    baseline: str = "main"
    golden_strict: bool = False
    allow_missing_golden: bool = False
    run_dir: Path = Path("runs")
    keep_runs: int = DEFAULT_KEEP_RUNS
    update_golden: bool = False
    tolerances: dict[str, float] = field(default_factory=dict)
    case_ids: list[str] = field(default_factory=list)
    shard: tuple[int, int] | None = None  # (I, N) of --le-shard I/N
    stress: bool = False  # --le-stress: run the suites' stress sweeps (gate: stress:)
    suite_globs: list[str] = field(default_factory=lambda: list(DEFAULT_SUITES))
    explicit: frozenset[Path] = frozenset()
    #: the ini set ``leader_eval_suites`` (its globs must match; the default's need not)
    globs_set: bool = False
    #: the ``--le-*`` options given on the command line (a session with them must collect a suite)
    given: tuple[str, ...] = ()
    #: the trusted names' sources but code: (file, ini, command line); ``trusted`` ranks them
    trusted_layers: tuple[Trusted | None, Trusted | None, Trusted | None] = (None, None, None)
    #: ``[tool.leader-eval]`` / ``leader-eval.toml`` found from the rootdir upward (runs/config_file.py)
    config_file: ConfigFile | None = None
    #: the model entries (``--le-model`` repeated or the ini's lines); two or more: a model matrix,
    #: each suite sampled and gated once per entry (``sampling`` holds the first entry's values)
    entries: tuple[ModelEntry, ...] = ()

    @property
    def matrix(self) -> bool:
        return len(self.entries) > 1

    @property
    def model(self) -> str:
        return str(self.sampling.get("model") or "local:smollm2")

    @property
    def trusted(self) -> Trusted:
        """What a suite's judge/teammate/check names mean: files < ini < code (a conftest's
        ``register_*``, read when a suite runs) < command line."""
        from leader_eval.runs.trusted import assemble

        files, ini, cli = self.trusted_layers
        return assemble(files=files, ini=ini, cli=cli)

    @property
    def max_error_rate(self) -> float:
        return float(self.sampling.get("max_error_rate") or 0.0)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("leader-eval", "leader-eval: evaluate checkpoints on suites (docs/pytest.md)")
    for opt in (*SAMPLING_OPTIONS, *PLUGIN_OPTIONS):
        kw = opt.argparse_kwargs()
        # None: "not given", so an ini value can apply; the table's default comes last
        kw["default"] = None
        group.addoption(PREFIX + opt.name, dest=INI_PREFIX + opt.dest, **kw)
        if opt.flag:
            parser.addini(INI_PREFIX + opt.dest, help=opt.help, type="bool", default=None)
        else:
            parser.addini(INI_PREFIX + opt.dest, help=opt.help, type="string", default=None)
    group.addoption(
        PREFIX + "update-golden",
        dest=INI_PREFIX + "update_golden",
        action="store_true",
        help="rewrite the golden of each suite whose full case set ran and completed",
    )
    group.addoption(
        PREFIX + "allow-missing-golden",
        dest=INI_PREFIX + "allow_missing_golden",
        action="store_true",
        help="a suite without a golden warns instead of failing the gate (its very first run; command line only)",
    )
    group.addoption(
        PREFIX + "tolerance",
        dest=INI_PREFIX + "tolerance",
        action="append",
        metavar="METRIC=VALUE",
        help="per-metric tolerance, e.g. score=0.05, beating the golden file's (repeatable, comma-separated)",
    )
    group.addoption(
        PREFIX + "case",
        dest=INI_PREFIX + "case",
        action="append",
        metavar="ID",
        help="only these case ids (repeatable, comma-separated); the gate pairs them with the golden's",
    )
    group.addoption(
        PREFIX + "shard",
        dest=INI_PREFIX + "shard",
        metavar="I/N",
        help="sample only shard I of N of each suite's cases (deterministic by case id; needs --le-seed); "
        "the session records its shard and does not gate: leader-eval merge, then leader-eval gate",
    )
    group.addoption(
        PREFIX + "stress",
        dest=INI_PREFIX + "stress",
        action="store_true",
        help="run each suite's long-context sweep and judge its gate: stress: requirements (long; command line only)",
    )
    for opt in TRUSTED_OPTIONS:
        group.addoption(
            PREFIX + opt.name, dest=INI_PREFIX + opt.dest, metavar=opt.name.upper(), **opt.argparse_kwargs()
        )
        parser.addini(INI_PREFIX + opt.dest + "s", help=opt.help, type="linelist", default=None)
    parser.addini(
        INI_PREFIX + "suites",
        help="globs (relative to the rootdir) of the suite files to collect; default evals/**/*.yaml",
        type="linelist",
        default=None,
    )


def _value(config: pytest.Config, opt: Option, file: Any = None) -> Any:
    """The option's value: command line > ini > configuration file > default."""
    dest = INI_PREFIX + opt.dest
    value = config.getoption(dest, default=None)
    if value is not None and value is not False:
        return value
    try:
        ini = config.getini(dest)
    except ValueError:
        ini = None
    if ini not in (None, "", []):
        try:
            return opt.convert(ini)
        except (argparse.ArgumentTypeError, ValueError) as err:
            raise pytest.UsageError(f"ini {dest} = {ini!r}: {err}") from None
    if file is not None and opt.dest in file.values:
        return file.values[opt.dest]
    return False if opt.flag else opt.default


_TOLERANCE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\S+)\s*$")


def parse_tolerance_syntax(items: list[str]) -> dict[str, float]:
    """``METRIC=VALUE`` pairs with VALUE in [0, 1]; metric names are checked once a suite is collected."""
    out: dict[str, float] = {}
    for item in items:
        for part in str(item).split(","):
            if not part.strip():
                continue
            m = _TOLERANCE.match(part)
            if not m:
                raise pytest.UsageError(f"{PREFIX}tolerance {part.strip()!r}: expected METRIC=VALUE, e.g. score=0.05")
            try:
                value = float(m.group(2))
            except ValueError:
                raise pytest.UsageError(f"{PREFIX}tolerance {part.strip()!r}: {m.group(2)!r} is not a number") from None
            if not 0 <= value <= 1:
                raise pytest.UsageError(f"{PREFIX}tolerance {part.strip()!r}: must lie in [0, 1]")
            out[m.group(1)] = value
    return out


def read_options(config: pytest.Config) -> PluginOptions:
    """Every option's value; raises ``pytest.UsageError`` (exit 4) on a bad one."""
    from leader_eval.errors import LeaderEvalError
    from leader_eval.runs.config_file import load_config

    try:
        file = load_config(config.rootpath)
    except LeaderEvalError as err:
        raise pytest.UsageError(str(err)) from None
    sampling = {opt.dest: _value(config, opt, file) for opt in SAMPLING_OPTIONS}
    entries = _model_entries(sampling)
    _matrix_refusals(config, len(entries))
    sampling = dict(entries[0].values)
    own = {opt.dest: _value(config, opt, file) for opt in PLUGIN_OPTIONS}
    set_globs = config.getini(INI_PREFIX + "suites") or (file.suites if file is not None else None)
    globs = set_globs or list(DEFAULT_SUITES)
    update_golden = bool(config.getoption(INI_PREFIX + "update_golden", default=False))
    case_ids = [c for i in config.getoption(INI_PREFIX + "case", default=None) or [] for c in i.split(",") if c]
    shard = parse_shard_option(config.getoption(INI_PREFIX + "shard", default=None), sampling, update_golden, case_ids)
    return PluginOptions(
        sampling=sampling,
        mode=own["eval_mode"],
        golden_dir=Path(own["golden_dir"]),
        baseline=str(own["baseline"]),
        golden_strict=bool(own["golden_strict"]),
        allow_missing_golden=bool(config.getoption(INI_PREFIX + "allow_missing_golden", default=False)),
        run_dir=Path(own["run_dir"]),
        keep_runs=int(own["keep_runs"]),
        update_golden=update_golden,
        tolerances=parse_tolerance_syntax(config.getoption(INI_PREFIX + "tolerance", default=None) or []),
        case_ids=case_ids,
        shard=shard,
        stress=bool(config.getoption(INI_PREFIX + "stress", default=False)),
        suite_globs=[str(g) for g in globs],
        explicit=frozenset(_explicit_paths(config)),
        globs_set=bool(set_globs),
        given=tuple(_given_options(config)),
        trusted_layers=_trusted(config, file),
        config_file=file,
        entries=tuple(entries),
    )


def _model_entries(sampling: dict[str, Any]) -> list[Any]:
    """The session's model entries: ``--le-model`` repeated, else the ini's ``leader_eval_model``
    lines (one entry a line), else the file's or the default model; each with its own options
    applied (``'SPEC --temperature 0.2'``). Two or more are a model matrix (docs/pytest.md)."""
    from leader_eval.runs.model_spec import model_entries
    from leader_eval.runs.trusted import TrustedError

    given = sampling.get("model")
    if isinstance(given, str) and "\n" in given:  # an ini list, one entry a line
        sampling = {**sampling, "model": [line.strip() for line in given.splitlines() if line.strip()]}
    try:
        entries = model_entries(sampling, flag=PREFIX + "model")
    except TrustedError as err:
        raise pytest.UsageError(str(err)) from None
    if len(entries) < 2:
        return entries
    from leader_eval.decide.matrix import MAX_ENTRIES  # heavy: only for a matrix

    if len(entries) > MAX_ENTRIES:
        raise pytest.UsageError(f"{PREFIX}model: {len(entries)} entries; a matrix takes at most {MAX_ENTRIES}")
    if any("seed" in e.own for e in entries):
        raise pytest.UsageError(
            f"{PREFIX}model: a matrix pairs its models by one seed: give {PREFIX}seed once for all, not inside an entry"
        )
    return entries


def _matrix_refusals(config: pytest.Config, n: int) -> None:
    """What a matrix session does not do: a golden is written from one trusted model, a shard is
    merged per model and a stress sweep judges one model (one model per session for those)."""
    if n < 2:
        return
    for dest, flag in (("update_golden", "update-golden"), ("shard", "shard"), ("stress", "stress")):
        if config.getoption(INI_PREFIX + dest, default=None):
            raise pytest.UsageError(
                f"{PREFIX}{flag} takes one {PREFIX}model; this session gives {n} (a model matrix): run it per model"
            )


def _trusted(config: pytest.Config, file: Any) -> tuple[Any, Any, Any]:
    """Model roles and check functions from the file, the ini's linelists and ``--le-*``."""
    from leader_eval.runs.model_spec import roles_from_pairs, trusted_from_options
    from leader_eval.runs.trusted import Trusted, TrustedError, checks_from_pairs

    try:
        roles_key, checks_key = (INI_PREFIX + o.dest + "s" for o in TRUSTED_OPTIONS)
        ini = Trusted(
            roles_from_pairs(config.getini(roles_key) or [], source=f"ini {roles_key}"),
            checks_from_pairs(config.getini(checks_key) or [], source=f"ini {checks_key}"),
        )
        cli = trusted_from_options(
            config.getoption(INI_PREFIX + "model_role", default=None),
            config.getoption(INI_PREFIX + "check_function", default=None),
            prefix=PREFIX,
        )
    except TrustedError as err:
        raise pytest.UsageError(str(err)) from None
    return (file.trusted if file is not None else None, ini, cli)


def _given_options(config: pytest.Config) -> list[str]:
    """The ``--le-*`` options on the command line, as typed (``--le-model``, ``--le-seed``...)."""
    return [str(a).split("=", 1)[0] for a in config.invocation_params.args if str(a).startswith(PREFIX)]


def value_options() -> set[str]:
    """Every ``--le-*`` option that takes a value (the rest are flags)."""
    out = {PREFIX + o.name for o in (*SAMPLING_OPTIONS, *PLUGIN_OPTIONS, *TRUSTED_OPTIONS) if not o.flag}
    return out | {PREFIX + "tolerance", PREFIX + "case", PREFIX + "shard"}


def check_rootdir_kept(config: pytest.Config) -> None:
    """A usage error when a space-separated ``--le-* PATH`` moved the rootdir.

    pytest decides its rootdir and ini file before it loads plugins, so in ``--le-golden-dir
    /abs/dir`` it takes ``/abs/dir`` for a test path: the rootdir moves to a common ancestor, the
    ini file and the suite globs are read from there, and a session can match no suite and pass.
    The rootdir is decided again without those values (pytest's own function); if it differs,
    the user is told to write ``--le-golden-dir=/abs/dir``."""
    args = [str(a) for a in config.invocation_params.args]
    takes_value = value_options()
    here = config.invocation_params.dir
    values = {
        i + 1: args[i + 1]
        for i, a in enumerate(args[:-1])
        if a in takes_value and not args[i + 1].startswith("-") and _exists(here / args[i + 1])
    }
    if not values:
        return
    try:
        from _pytest.config.findpaths import determine_setup

        def decide(argv: list[str]) -> tuple[Path, Path | None]:
            found = determine_setup(
                inifile=config.option.inifilename,
                override_ini=config.option.override_ini,
                args=argv,
                rootdir_cmd_arg=config.option.rootdir or None,
                invocation_dir=config.invocation_params.dir,
            )
            return found[0], found[1]

        with_values = decide(args)
        without = decide([a for i, a in enumerate(args) if i not in values])
    except Exception:  # pytest's internals changed: the no-suite check below still refuses a silent pass
        return
    if with_values != without:
        i, value = next(iter(values.items()))
        raise pytest.UsageError(
            f"{args[i - 1]} {value}: pytest read {value} as a test path before leader-eval loaded and moved the "
            f"rootdir to {with_values[0]} (from {without[0]}); write {args[i - 1]}={value}"
        )


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte: not a path
        return False


def check_globs_match(options: PluginOptions, rootpath: Path) -> None:
    """A usage error for a ``leader_eval_suites`` glob the user set that matches no file (a typo
    would otherwise collect nothing and pass). The default globs need not match: a repo that
    does not use the plugin has no ``evals/``."""
    if not options.globs_set:
        return
    for g in options.suite_globs:
        pattern = g.strip().removeprefix("./")
        try:
            found = next((p for p in rootpath.glob(pattern) if p.suffix in (".yaml", ".yml")), None)
        except (ValueError, OSError) as exc:
            raise pytest.UsageError(f"ini {INI_PREFIX}suites: glob {g!r}: {exc}") from None
        if found is None:
            raise pytest.UsageError(
                f"ini {INI_PREFIX}suites: glob {g!r} matches no suite file (*.yaml, *.yml) under the rootdir {rootpath}"
            )


def no_suite_message(options: PluginOptions, rootpath: Path) -> str:
    """The usage error of a session given ``--le-*`` options that collected no suite."""
    globs = ", ".join(options.suite_globs)
    return (
        f"{', '.join(dict.fromkeys(options.given))} given but no leader-eval suite was collected: the suite "
        f"globs ({INI_PREFIX}suites: {globs}) match nothing under the rootdir {rootpath} that this session "
        "collects; name the suite file (pytest evals/x.yaml) or set leader_eval_suites"
    )


def parse_shard_option(
    text: str | None, sampling: dict[str, Any], update_golden: bool, case_ids: list[str]
) -> tuple[int, int] | None:
    """``--le-shard I/N`` as ``(I, N)``, checked as ``leader-eval run --shard`` checks it (the
    same parser and message); a usage error without an explicit seed, with ``--le-update-golden``
    (a shard is never a baseline) or with ``--le-case`` (the shards' union must be the suite)."""
    if text is None:
        return None
    from leader_eval.runs.merge import ShardError, parse_shard

    try:
        shard = parse_shard(text)
    except ShardError as err:
        raise pytest.UsageError(plugin_message(str(err))) from None
    if sampling.get("seed") is None:
        raise pytest.UsageError(
            f"{PREFIX}shard needs an explicit {PREFIX}seed (or ini leader_eval_seed): "
            "the shards must draw the samples of one run"
        )
    if update_golden:
        raise pytest.UsageError(
            f"{PREFIX}shard cannot {PREFIX}update-golden: a shard is not the whole run; "
            "merge the shards and run leader-eval gate --update-golden"
        )
    if case_ids:
        raise pytest.UsageError(f"{PREFIX}shard slices the whole suite: drop {PREFIX}case")
    return shard


def plugin_message(message: str) -> str:
    """A CLI message that starts with its option, renamed to the plugin's (``--shard`` -> ``--le-shard``)."""
    return PREFIX + message[2:] if message.startswith("--") else message


def _explicit_paths(config: pytest.Config) -> list[Path]:
    """YAML files named on the command line (``pytest evals/x.yaml`` or ``evals/x.yaml::case``)."""
    out = []
    base = config.invocation_params.dir
    for arg in config.args:
        path = str(arg).split("::", 1)[0]
        if path.endswith((".yaml", ".yml")):
            out.append((base / path).resolve())
    return out


@lru_cache(maxsize=64)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A ``**``-aware glob as a regex over POSIX relative paths (``**/`` matches zero or more folders)."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def is_suite_path(path: Path, options: PluginOptions, rootpath: Path) -> bool:
    """Whether the user configured ``path`` as a suite: named on the command line, or matching a glob."""
    if path.suffix not in (".yaml", ".yml"):
        return False
    resolved = path.resolve()
    if resolved in options.explicit:
        return True
    try:
        rel = resolved.relative_to(rootpath.resolve()).as_posix()
    except ValueError:
        return False
    return any(_glob_regex(g.strip().removeprefix("./")).match(rel) for g in options.suite_globs)


def suites_configured(options: PluginOptions, rootpath: Path) -> bool:
    """Whether any suite file exists for this session (decides xdist's distribution mode)."""
    if options.explicit:
        return True
    for g in options.suite_globs:
        try:
            if next(iter(rootpath.glob(g)), None) is not None:
                return True
        except (ValueError, OSError):
            continue
    return False
