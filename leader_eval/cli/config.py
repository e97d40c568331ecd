"""``leader-eval config``: every setting, its value and where it came from; never a secret.

Sources, a later one winning: default < ``pyproject.toml:LINE`` / ``leader-eval.toml:LINE`` <
command line (pytest adds its ini between the file and the command line). An API key is shown
only as the name of the environment variable that holds it, with whether it is set.
"""

from __future__ import annotations

import argparse
import os
import re

from leader_eval.report import table
from leader_eval.runs.config_file import REFUSED, ConfigFile, display_path
from leader_eval.runs.model_spec import model_entries
from leader_eval.runs.options import PROJECT_OPTIONS, SAMPLING_OPTIONS
from leader_eval.secrets import scrub
from leader_eval.store.cache import ENV as CACHE_ENV
from leader_eval.store.cache import default_cache_dir

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
#: a URL's userinfo (``http://user:password@host``): the backend registers the password as a
#: secret only once it is built, which ``config`` never does
_USERINFO = re.compile(r"(://)[^/@\s]+@")
_QUERY_VALUE = re.compile(r"([?&][^=&#\s]*=)[^&#\s]*")
#: the file key whose CLI flag has another name (cli/settings.py)
CLI_FLAG = {"golden-dir": "golden"}


def run(args: argparse.Namespace) -> int:
    config: ConfigFile | None = getattr(args, "config_file", None)
    given: set[str] = getattr(args, "given", set())
    where = config.display if config else "none (pyproject.toml [tool.leader-eval] or leader-eval.toml, cwd upward)"
    print(f"configuration file: {where}")
    rows = []
    for opt in (*SAMPLING_OPTIONS, *PROJECT_OPTIONS):
        flag = CLI_FLAG.get(opt.name, opt.name)
        dest = flag.replace("-", "_")
        if not hasattr(args, dest):
            continue  # pytest's own (eval-mode, keep-runs, ...): shown with their ini keys in docs/pytest.md
        value = getattr(args, dest)
        if dest in given:
            source = "command line"
        elif config is not None and config.source(opt.dest):
            source = str(config.source(opt.dest))
        else:
            source = "default (the suite's)" if opt.name in REFUSED and opt.name != "label" else "default"
        if opt.name == "model":
            value = ", ".join(e.text for e in model_entries({"model": value}))
        shown = "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        rows.append([opt.name, _shown(shown), source])
    key_env = getattr(args, "api_key_env", None) or DEFAULT_API_KEY_ENV
    rows.append(["api key", f"${key_env} ({'set' if os.environ.get(key_env) else 'not set'})", "env"])
    rows.append(
        ["sample cache", str(default_cache_dir()), f"env {CACHE_ENV}" if os.environ.get(CACHE_ENV) else "default"]
    )
    if config is not None and config.suites:
        rows.append(["suites (pytest)", ", ".join(config.suites), config.where("suites")])
    print(table(["setting", "value", "source"], rows))
    trusted = getattr(args, "trusted", None)
    if trusted is not None and (trusted.models or trusted.checks):
        named = [["model role", n, _shown(_role(m.values)), m.source] for n, m in sorted(trusted.models.items())]
        named += [
            ["check function", n, c.target if isinstance(c.target, str) else repr(c.target), c.source]
            for n, c in sorted(trusted.checks.items())
        ]
        print(table(["kind", "name", "means", "source"], named))
    if config is not None:
        print(f"(pytest: the ini's leader_eval_* keys beat {display_path(config.path)}; the command line beats both)")
    return 0


def _shown(text: str) -> str:
    """A value as ``config`` prints it: no registered secret, no URL password, no query-string
    value (``?api_key=...``: run refuses such URLs, but config shows what a file says)."""
    return _QUERY_VALUE.sub(r"\1***", _USERINFO.sub(r"\1***@", scrub(text)))


def _role(values: dict[str, object]) -> str:
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in values.items() if k != "model")
    return f"{values.get('model')} {flags}".strip()
