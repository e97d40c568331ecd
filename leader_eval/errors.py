"""User-facing errors: one line, naming the file, the line and what is wrong."""

from __future__ import annotations

import re
from pathlib import Path


class LeaderEvalError(Exception):
    """Bad input from the user. The CLI prints ``str(err)`` and exits with status 2."""

    exit_status = 2


class SuiteError(LeaderEvalError):
    def __init__(self, path: str | Path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message.replace("\n", " ").strip()
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {self.message}")


class RunDirError(LeaderEvalError):
    """A run directory that does not belong to this command, or is unreadable."""


class ChatTemplateError(LeaderEvalError):
    """A model's chat template that fails to compile or render, or goes past a resource bound."""

    def __init__(self, message: str):
        super().__init__(message.replace("\n", " ").strip())


class SuiteErrors(SuiteError):
    """Every error found in one suite file (``errors``, in file and line order).

    ``str()`` stays one line: the first error, and how many more there are; ``leader-eval lint``
    prints each of ``errors`` on its own line.
    """

    def __init__(self, errors: list[SuiteError]):
        self.errors = list(errors)
        first = self.errors[0]
        more = len(self.errors) - 1
        hint = f" (and {more} more error{'s' if more > 1 else ''}: leader-eval lint lists them all)" if more else ""
        super().__init__(first.path, first.line, first.message + hint)


class OptionError(LeaderEvalError):
    """A problem with options of the shared option table (``leader_eval.runs.options``), named in
    the caller's spelling: the message names them as command-line flags (``--chat-template``);
    ``spelled("--le-")`` names them as the pytest plugin's options (``--le-chat-template``). Never
    a Python keyword. ``options``: the dests the message names (``chat_template``).
    """

    def __init__(self, message: str, *options: str):
        self.options = options
        super().__init__(message)

    def spelled(self, prefix: str) -> str:
        names = "|".join(re.escape(o.replace("_", "-")) for o in self.options)
        if not names:
            return str(self)
        return re.sub(rf"(?<![\w-])--({names})(?![\w-])", lambda m: prefix + m.group(1), str(self))


def spelled(err: BaseException, prefix: str) -> str:
    """``err``'s message with its options in ``prefix`` spelling (``--le-`` in pytest)."""
    return err.spelled(prefix) if isinstance(err, OptionError) else str(err)
