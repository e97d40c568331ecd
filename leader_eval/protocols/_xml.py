"""What the XML-style formats share (private): a value per parameter, read by a Python loop.

A JSON protocol's arguments are decoded in C; an XML-style format's parameters are read one by
one in Python (a few microseconds each), so a 1 MB output of 40,000 tiny parameters would cost
most of a second. No tool takes that many: more than ``MAX_PARAMETERS`` parameters in one output
fail the strict parse, and a lenient scan stops there (as ``MAX_CALLS`` does for calls).
"""

from __future__ import annotations

from leader_eval.protocols._scan import Fail

MAX_PARAMETERS = 4096
TOO_MANY_PARAMETERS_ERROR = f"more than {MAX_PARAMETERS} parameters in one output"


class ParamCount:
    """Parameters read so far in one output (strict parse or one lenient scan)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def add(self) -> None:
        self.n += 1
        if self.n > MAX_PARAMETERS:
            raise Fail(TOO_MANY_PARAMETERS_ERROR)


def drop_newlines(body: str) -> str:
    """A value less one newline at each end: the templates write them around the value."""
    if body.startswith("\n"):
        body = body[1:]
    return body[:-1] if body.endswith("\n") else body
