"""User-facing errors: one line, naming the file, the line and what is wrong."""

from __future__ import annotations

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
