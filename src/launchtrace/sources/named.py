"""What a user names as a trace source: a file, a folder, or a backend URL (see docs/sources.md).

A backend is named by its base URL with the backend in front of the scheme, and the search in the query
string with the names of ``launchtrace pull``'s options::

    jaeger+http://127.0.0.1:16686?service=sim&since=1h&limit=50
    tempo+https://tempo:3200?query={ resource.service.name = "sim" }&since=2h
    jaeger+http://127.0.0.1:16686?trace-id=5b8efff798038103d269b633813fc60c&api=classic

Options in the URL apply to that source only and win over the same options on the command line, so
``launchtrace diff jaeger+URL?since=2d&until=1d jaeger+URL?since=1d`` compares two windows. Anything that is not
``jaeger+`` / ``tempo+`` followed by ``http(s)://`` is a path.

Reading a backend needs the connection options (auth, TLS, limits) the command line gives, so the command sets a
reader for the duration of the command (:func:`reading_backends`); :func:`read_backend` uses it.

Example::

    name = parse_backend("jaeger+http://127.0.0.1:16686?service=sim&since=1h")
    name.kind, name.url, dict(name.options)  # ('jaeger', 'http://127.0.0.1:16686', {'service': 'sim', ...})
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterator
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from launchtrace.errors import UserError
from launchtrace.sources.report import ReadResult

__all__ = ["BACKENDS", "QUERY_OPTIONS", "BackendName", "parse_backend", "read_backend", "reading_backends"]

BACKENDS = ("jaeger", "tempo")
QUERY_OPTIONS = (
    "trace-id",
    "service",
    "operation",
    "query",
    "attribute",
    "since",
    "until",
    "limit",
    "api",
    "protobuf",
)
"""The options a backend URL's query string may carry: ``launchtrace pull``'s search options, without ``--``.
``trace-id`` and ``attribute`` may repeat."""


@dataclasses.dataclass(frozen=True)
class BackendName:
    """A parsed backend source: ``kind`` (jaeger | tempo), the base ``url``, the ``options`` from its query."""

    kind: str
    url: str
    options: tuple[tuple[str, str], ...] = ()
    text: str = ""

    def __str__(self) -> str:
        return self.text or f"{self.kind}+{self.url}"


def parse_backend(text: str) -> BackendName | None:
    """The backend ``text`` names, or ``None`` when it names a path; ``UserError`` for a malformed backend URL.

    A bare ``http(s)://`` URL is refused with the two spellings that would name it (which backend it is
    cannot be told from the URL).
    """
    scheme, plus, rest = text.partition("+")
    lower = text.lower()
    if lower.startswith(("http://", "https://")):
        raise UserError(f"{text}: say which backend: jaeger+{text} or tempo+{text} (see docs/sources.md)")
    if not plus or scheme.lower() not in BACKENDS or not rest.lower().startswith(("http://", "https://")):
        return None
    parts = urlsplit(rest)
    if not parts.hostname:
        raise UserError(f"{text}: no host in the URL")
    options = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        key = key.replace("_", "-")
        if key not in QUERY_OPTIONS:
            raise UserError(f"{text}: unknown option {key!r} in the URL (known: {', '.join(QUERY_OPTIONS)})")
        options.append((key, value))
    url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return BackendName(scheme.lower(), url, tuple(options), text)


Reader = Callable[[BackendName], ReadResult]
_reader: contextvars.ContextVar[Reader | None] = contextvars.ContextVar("launchtrace_backend_reader", default=None)


@contextlib.contextmanager
def reading_backends(reader: Reader) -> Iterator[None]:
    """Within the block, :func:`read_backend` reads with ``reader`` (the command line's connection options)."""
    token = _reader.set(reader)
    try:
        yield
    finally:
        _reader.reset(token)


def read_backend(name: BackendName) -> ReadResult:
    """The spans ``name`` selects, read with the reader the running command set."""
    reader = _reader.get()
    if reader is None:
        raise UserError(f"{name}: backend sources are read by the launchtrace commands (launchtrace pull)")
    return reader(name)
