"""Every secret the run holds, and the one scrubber that removes them from what a model server sends.

A model server is untrusted: it can echo the request's ``Authorization`` header into the reply's
content, reasoning, tool-call arguments or error body. Every string of every ``Completion`` is
scrubbed at the backend boundary (``backends.base.guard``), before the runner, the run directory,
the sample cache, a golden file, a report or a log can see it.

What counts as a secret, read when a scrubber is built (so a key set after import still counts):

* values registered by a backend: the API-key variable it reads (``register_env``), the password
  and ``user:password`` of URL userinfo, credential-like request header values (``register``);
* ``TINKER_API_KEY`` and every environment variable whose name has a credential word as one of its
  ``_``-separated parts (``OPENAI_API_KEY``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``;
  not ``TOKENIZERS_PARALLELISM``).

Each secret is matched in the encodings it travels in: raw (so also inside ``Bearer X`` and
``Basic X``), base64 (standard and URL-safe, at each of the three byte alignments, so a secret
inside a longer base64 blob such as ``base64("Authorization: Bearer X")`` is found too),
URL-encoded (also every byte, and twice), JSON-escaped and hex; and in every case form a server may have changed it to
(``case_forms``: upper, lower, title, swapped, capitalised), each in every encoding. The raw,
URL-encoded, JSON and hex forms also match in any mix of case (a server that upper-cases a key,
a ``%2f`` for ``%2F``, upper-case hex); base64 changes entirely with case, so it is matched for the
listed case forms. A match becomes ``[redacted]``, which keeps JSON in tool-call arguments valid.
Secrets shorter than ``MIN_SECRET_CHARS`` are ignored: redacting every ``"1"`` of a model's
output would destroy it, and a 3-character key protects nothing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
#: shorter values are not treated as secrets (see the module docstring)
MIN_SECRET_CHARS = 8
#: a base64 fragment shorter than this would match ordinary text by chance
_MIN_B64_CORE = 8
#: environment variable names that hold credentials: a credential word as a whole ``_`` part
_CREDENTIAL_ENV = re.compile(
    r"(?:^|_)(?:API_?KEY|APIKEY|KEY|TOKEN|SECRET|SECRET_ACCESS_KEY|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)(?:_|$)",
    re.IGNORECASE,
)
#: request header names whose values are credentials
CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|cookie|session|password", re.IGNORECASE)

_lock = threading.Lock()
_registered: set[str] = set()
_registered_env: set[str] = {"TINKER_API_KEY"}


def register(value: str | None) -> None:
    """Add a secret the process holds (a URL password, a header value); ignored when too short."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _registered.add(value)


def register_env(name: str | None) -> None:
    """Treat the value of environment variable ``name`` as a secret, whatever it is called."""
    if name:
        with _lock:
            _registered_env.add(name)


def register_header(name: str, value: str) -> None:
    """A request header's value, when its name says it is a credential (``Bearer X`` also adds X)."""
    if not CREDENTIAL_HEADER.search(name):
        return
    register(value)
    scheme, _, rest = value.partition(" ")
    if rest and scheme.isalpha():
        register(rest.strip())


_env_names: dict[tuple[frozenset[Any], frozenset[str]], tuple[str, ...]] = {}


def _secret_env_names(registered: frozenset[str]) -> tuple[str, ...]:
    """Names of the set environment variables that are credential-like or ``registered``; rescanned
    only when the set of names changes (this runs once per sample request, so the regex scan of
    every name is cached, and no absent name is looked up: a miss costs a raised KeyError)."""
    raw = getattr(os.environ, "_data", None)  # CPython's encoded mapping: no decoding to list the names
    key = (frozenset(raw if raw is not None else os.environ), registered)
    names = _env_names.get(key)
    if names is None:
        names = tuple(n for n in os.environ if n in registered or _CREDENTIAL_ENV.search(n))
        _env_names.clear()
        _env_names[key] = names
    return names


def current_secrets() -> frozenset[str]:
    """Every secret value known now: registered ones, registered variables, credential-named variables."""
    with _lock:
        values = set(_registered)
        registered = frozenset(_registered_env)
    env = os.environ
    values.update(v for n in _secret_env_names(registered) if (v := env.get(n)))
    return frozenset(v for v in values if len(v) >= MIN_SECRET_CHARS)


def case_forms(secret: str) -> set[str]:
    """``secret`` as a server may echo it after changing its case."""
    return {secret, secret.upper(), secret.lower(), secret.title(), secret.swapcase(), secret.capitalize()}


def encodings(secret: str) -> set[str]:
    """The strings ``secret`` may appear as: raw, base64 (any alignment), URL-, JSON- and hex-encoded,
    each for every case form (``case_forms``)."""
    return {e for form in case_forms(secret) for e in _encodings_of(form)}


def _encodings_of(secret: str) -> set[str]:
    raw = secret.encode("utf-8")
    out = {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1], raw.hex()}
    # every byte percent-encoded, and URL-encoded twice (a query string inside a URL)
    out.add("".join(f"%{b:02X}" for b in raw))
    out.add(quote(quote(secret, safe=""), safe=""))
    for offset in range(3):
        enc = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        # characters that depend only on the secret's bytes, whatever surrounds it in the blob
        start = (offset * 8 + 5) // 6
        end = ((offset + len(raw)) * 8) // 6
        core = enc[start:end]
        if len(core) >= _MIN_B64_CORE:
            out.add(core)
            out.add(core.replace("+", "-").replace("/", "_"))
    return {s for s in out if len(s) >= min(MIN_SECRET_CHARS, len(secret))}


class Scrubber:
    """Replaces every encoding of a fixed set of secrets, in any case; the empty set is a no-op."""

    def __init__(self, secrets: Iterable[str]):
        needles = sorted({e for s in secrets for e in encodings(s)}, key=len, reverse=True)
        self._re = re.compile("|".join(map(re.escape, needles)), re.IGNORECASE) if needles else None
        # a case-insensitive alternation is ~10x slower than substring tests (it loses the engine's
        # first-character filter), so it runs only on a string that holds a needle in some case
        self._folded = tuple(sorted({n.lower() for n in needles}))
        self._exact = tuple(n for n in needles if not n.isascii())  # str.lower is not per character there

    def __bool__(self) -> bool:
        return self._re is not None

    def _maybe(self, value: str) -> bool:
        low = value.lower()
        return any(n in low for n in self._folded) or any(n in value for n in self._exact)

    def text(self, value: str) -> str:
        if self._re is None or not self._maybe(value):
            return value
        return self._re.sub(REDACTED, value)

    def value(self, obj: Any) -> Any:
        """A copy of ``obj`` (JSON-like: str, list, tuple, dict at any depth) with every string scrubbed."""
        if self._re is None:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.value(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return type(obj)(self.value(v) for v in obj)
        return obj


@lru_cache(maxsize=8)
def _scrubber_for(secrets: frozenset[str]) -> Scrubber:
    return Scrubber(secrets)


def scrubber() -> Scrubber:
    """The scrubber for every secret known now (cached while the set does not change)."""
    return _scrubber_for(current_secrets())


def scrub(text: str) -> str:
    """``text`` with every known secret, in every encoding, replaced by ``[redacted]``."""
    return scrubber().text(text)


def scrub_value(obj: Any) -> Any:
    return scrubber().value(obj)


def contains_secret(data: bytes, secrets: Iterable[str] | None = None) -> bool:
    """Whether ``data`` holds any known secret in any encoding and case (for tests and audits)."""
    folded = data.lower()  # ASCII letters only: a non-ASCII secret is still found in its listed forms
    for s in current_secrets() if secrets is None else secrets:
        for e in encodings(s):
            if e.encode() in data or e.encode().lower() in folded:
                return True
    return False


__all__ = [
    "REDACTED",
    "Scrubber",
    "case_forms",
    "contains_secret",
    "current_secrets",
    "encodings",
    "register",
    "register_env",
    "register_header",
    "scrub",
    "scrub_value",
    "scrubber",
]
