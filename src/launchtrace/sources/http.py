"""A small HTTP client for trace backends: auth, TLS, timeouts, retries, and one-line errors.

Built on ``requests`` (already installed with the OTLP/HTTP exporter). It retries 429 and 5xx answers and
dropped connections with exponential backoff, honouring ``Retry-After`` (capped), and turns every failure
into a :class:`~launchtrace.errors.UserError` that names the URL and what went wrong. Credentials (bearer
token, basic auth, user info in the base URL, and every ``headers`` entry) never appear in errors, logs or
``repr``, and are sent only to the origin they were given for: a redirect elsewhere drops them all.

A backend is not trusted to be reasonable: ``timeout`` is a deadline for the whole request (connecting,
headers, body, redirects), enforced by shutting the socket down when it passes (a server dripping a byte a
second cannot hold a request past it); the answer is streamed and inflated in bounded steps (``gzip``,
``deflate``, and layers of them) and refused past ``max_answer_bytes`` of inflated body.

Example::

    from launchtrace.sources.http import HttpClient, HttpOptions
    client = HttpClient(HttpOptions("http://tempo:3200", headers=(("X-Scope-OrgID", "team-a"),)))
    answer = client.get("/api/search", params={"q": "{}", "limit": 20})
    body = answer.json()
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import math
import socket
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import orjson
import requests
import urllib3
import urllib3.connection
from requests.adapters import HTTPAdapter

from launchtrace.errors import UserError

__all__ = ["DEFAULT_MAX_ANSWER_BYTES", "HttpAnswer", "HttpClient", "HttpOptions", "parse_size"]

_log = logging.getLogger(__name__)
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_SNIPPET = 160
DEFAULT_MAX_ANSWER_BYTES = 64 << 20
"""The largest answer body, after inflation, read from a backend (``--max-answer-bytes``)."""
_READ_STEP = 64 << 10  # bytes read from the socket at a time
_INFLATE_STEP = 1 << 20  # bytes inflated at a time, per layer
_MAX_REDIRECTS = 10
_MAX_ENCODINGS = 3
_WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclasses.dataclass(frozen=True)
class HttpOptions:
    """How to reach a backend. ``token`` and ``basic_auth`` are kept out of ``repr``.

    ``verify=False`` turns TLS verification off; ``ca_file`` verifies against that bundle instead of the
    system's. ``retries`` is how many times a 429 / 5xx / dropped connection is retried after the first try.
    """

    base_url: str
    token: str | None = dataclasses.field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = dataclasses.field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False)
    verify: bool = True
    ca_file: str | None = None
    timeout: float = 10.0
    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"backend URL {_public_url(self.base_url)!r} must be http:// or https:// with a host")
        if not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise UserError(f"timeout must be positive and finite (seconds), got {self.timeout}")
        if self.max_answer_bytes < 1:
            raise UserError(f"max_answer_bytes must be positive, got {self.max_answer_bytes}")
        if self.retries < 0:
            raise UserError(f"retries must be 0 or more, got {self.retries}")


@dataclasses.dataclass(frozen=True)
class HttpAnswer:
    """A backend's answer: the final ``url`` (without credentials), ``status``, ``content_type``, ``body``."""

    url: str
    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)

    def json(self) -> Any:
        """The body parsed as JSON; a body that is not JSON is a ``UserError`` naming the URL."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise UserError(f"{self.url}: answer is not JSON ({exc}): {_snippet(self.body)}") from None

    def snippet(self) -> str:
        return _snippet(self.body)


def _snippet(body: bytes) -> str:
    text = body[: _SNIPPET * 2].decode("utf-8", "replace").strip().replace("\n", " ")
    return repr(text[:_SNIPPET] + ("..." if len(text) > _SNIPPET else ""))


def _public_url(url: str) -> str:
    """``url`` without user info (``https://user:pass@host`` -> ``https://host``)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def parse_size(text: str, option: str = "size") -> int:
    """``"64M"``, ``"512k"``, ``"1G"``, ``"1000000"`` -> bytes (binary units); ``UserError`` otherwise."""
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = t[-1:] if t[-1:] in units else ""
    number = t[: len(t) - len(unit)]
    if not number.isdigit() or int(number) < 1:
        raise UserError(f"{option} {text!r}: expected a size in bytes, or with k, M, G (64M)")
    return int(number) * units[unit]


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)


class _Deadline:
    """The deadline of one request: when it passes, the socket in use is shut down, which ends any read.

    A per-read timeout lets a server that sends a byte a second hold a request forever; only the whole
    request's deadline bounds it. The connection classes below hand the socket over (:meth:`watch`) just
    before the answer is read.
    """

    current = threading.local()

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.passed = False
        self._timer: threading.Timer | None = None

    def left(self) -> float:
        return max(0.001, self.end - time.monotonic())

    def watch(self, sock: socket.socket) -> None:
        self.cancel()
        self._timer = threading.Timer(self.end - time.monotonic(), self._shut, args=(sock,))
        self._timer.daemon = True
        self._timer.start()

    def _shut(self, sock: socket.socket) -> None:
        self.passed = True
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the raw socket, also under TLS
        except OSError:
            pass

    def expired(self) -> bool:
        return self.passed or time.monotonic() >= self.end

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class _DeadlineMixin:
    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        deadline = getattr(_Deadline.current, "value", None)
        sock = getattr(self, "sock", None)
        if deadline is not None and sock is not None:
            deadline.watch(sock)
        return super().getresponse(*args, **kwargs)  # type: ignore[misc]


class _HTTPConnection(_DeadlineMixin, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_DeadlineMixin, urllib3.connection.HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _DeadlineAdapter(HTTPAdapter):
    """requests' adapter with connections that put their socket under the request's :class:`_Deadline`."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


class _TooLarge(Exception):
    pass


class _Inflater:
    """Undoes ``Content-Encoding`` layers (gzip members, deflate) in bounded steps into at most ``limit`` bytes."""

    def __init__(self, encodings: list[str], limit: int) -> None:
        self.names = list(reversed(encodings))  # the last applied is undone first
        self.stages = [zlib.decompressobj(_WBITS[e]) for e in self.names]
        self.limit = limit
        self.parts: list[bytes] = []
        self.total = 0

    def feed(self, data: bytes, stage: int = 0) -> None:
        if stage == len(self.stages):
            self.total += len(data)
            if self.total > self.limit:
                raise _TooLarge
            self.parts.append(data)
            return
        d = self.stages[stage]
        while True:
            piece = d.decompress(data, _INFLATE_STEP)
            data = d.unconsumed_tail
            if piece:
                self.feed(piece, stage + 1)
            if d.eof and d.unused_data and _WBITS[self.names[stage]] == 31:
                data = d.unused_data  # another gzip member
                d = self.stages[stage] = zlib.decompressobj(31)
                continue
            if not piece and not data:
                return

    def result(self) -> bytes:
        for name, d in zip(self.names, self.stages, strict=True):
            if not d.eof:
                raise zlib.error(f"{name} data ends early")
        return b"".join(self.parts)


class HttpClient:
    """GET requests against one backend; see :class:`HttpOptions`. ``sleep`` is replaceable for tests."""

    def __init__(
        self,
        options: HttpOptions,
        *,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options
        self._sleep = sleep
        self._session = session or requests.Session()
        self._session.trust_env = False  # no proxy or netrc credentials picked up behind the user's back
        adapter = _DeadlineAdapter()
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        parts = urlsplit(options.base_url)
        self.base_url = _public_url(options.base_url).rstrip("/")
        self._origin = _origin(self.base_url)
        auth = options.basic_auth
        if auth is None and (parts.username or parts.password):
            auth = (parts.username or "", parts.password or "")
        self._auth = auth
        self._headers = {"User-Agent": "launchtrace-pull", "Accept-Encoding": "gzip, deflate"}
        self._user_headers = dict(options.headers)
        if options.token:
            self._user_headers["Authorization"] = f"Bearer {options.token}"
        self._verify: bool | str = options.ca_file if options.ca_file else options.verify
        if self._verify is False:
            _log.warning("TLS certificates of %s are not verified (insecure)", self.base_url)

    def __repr__(self) -> str:
        return f"HttpClient({self.base_url!r})"

    def url(self, path: str) -> str:
        return self.base_url + path

    def get(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        accept: str = "application/json",
        allow: frozenset[int] = frozenset({200}),
    ) -> HttpAnswer:
        """GET ``path`` (appended to the base URL). Statuses in ``allow`` are answers; others raise ``UserError``.

        429 and 5xx are retried first (up to ``retries`` more tries, backing off); 401/403 name the auth options.
        Each try has ``timeout`` seconds in all.
        """
        url = self.url(path)
        attempts = self.options.retries + 1
        for attempt in range(1, attempts + 1):
            _log.debug("GET %s params=%s (attempt %d/%d)", url, params, attempt, attempts)
            deadline = _Deadline(self.options.timeout)
            _Deadline.current.value = deadline
            try:
                answer = self._fetch(url, params, accept, deadline)
            except _Retry as retry:
                if attempt == attempts:
                    raise UserError(f"{url}: {retry} ({_tries(attempts)})") from None
                self._wait(attempt, None, url, str(retry))
                continue
            finally:
                deadline.cancel()
                _Deadline.current.value = None
            if answer.status in allow:
                return answer
            if answer.status in _RETRY_STATUS and attempt < attempts:
                self._wait(attempt, answer.headers.get("Retry-After"), url, f"HTTP {answer.status}")
                continue
            raise UserError(self._status_error(answer, attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _fetch(self, url: str, params: Mapping[str, Any] | None, accept: str, deadline: _Deadline) -> HttpAnswer:
        """One try: the request, its redirects and the body, within ``deadline``; ``_Retry`` for what may pass."""
        current = url
        credentials = True  # the user's headers and auth go to the origin they were given for, nowhere else
        for _hop in range(_MAX_REDIRECTS + 1):
            headers = {**self._headers, "Accept": accept}
            if credentials:
                headers.update(self._user_headers)
            try:
                with warnings.catch_warnings():
                    if self._verify is False:
                        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                    left = deadline.left()
                    resp = self._session.get(
                        current,
                        params=params if current == url else None,
                        headers=headers,
                        auth=self._auth if credentials else None,
                        timeout=(left, left),
                        verify=self._verify,
                        allow_redirects=False,
                        stream=True,
                    )
                try:
                    if resp.status_code in _REDIRECTS and resp.headers.get("Location"):
                        current = urljoin(resp.url, resp.headers["Location"])
                        if urlsplit(current).scheme not in ("http", "https"):
                            raise UserError(f"{url}: redirected to a URL that is not http(s)")
                        if _origin(current) != self._origin:
                            credentials = False
                        continue
                    body = self._body(resp, url, deadline)
                finally:
                    resp.close()
            except requests.exceptions.SSLError as exc:
                if deadline.expired():  # the deadline shut the socket down under TLS
                    raise _Retry(self._problem(exc, deadline)) from None
                raise UserError(f"{url}: TLS failed ({_reason(exc)}); see --ca-file or --insecure") from None
            except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
                raise _Retry(self._problem(exc, deadline)) from None
            return HttpAnswer(
                _public_url(resp.url) or url, resp.status_code, resp.headers.get("Content-Type", ""), body,
                dict(resp.headers),
            )  # fmt: skip
        raise UserError(f"{url}: more than {_MAX_REDIRECTS} redirects (last to {_public_url(current)})")

    def _problem(self, exc: BaseException, deadline: _Deadline) -> str:
        if deadline.expired() or isinstance(exc, requests.exceptions.ReadTimeout):
            return f"no complete answer within {self.options.timeout:g} s"
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            return f"cannot connect within {self.options.timeout:g} s"
        if isinstance(exc, requests.exceptions.ConnectionError) and _is_connect_failure(exc):
            return f"cannot connect ({_reason(exc)})"
        return f"connection failed while reading the answer ({_reason(exc)})"

    def _body(self, resp: requests.Response, url: str, deadline: _Deadline) -> bytes:
        """The answer's body read in steps and inflated, never more than ``max_answer_bytes`` inflated."""
        limit = self.options.max_answer_bytes
        encodings = [e.strip().lower() for e in resp.headers.get("Content-Encoding", "").split(",")]
        encodings = [e for e in encodings if e and e != "identity"]
        unknown = [e for e in encodings if e not in _WBITS]
        if unknown or len(encodings) > _MAX_ENCODINGS:
            raise UserError(f"{url}: answer's Content-Encoding {resp.headers['Content-Encoding']!r} is not supported")
        declared = resp.headers.get("Content-Length", "")
        too_large = f"{url}: answer is over {_size(limit)} (--max-answer-bytes)"
        if not encodings and declared.isdigit() and int(declared) > limit:
            raise UserError(too_large)
        inflater = _Inflater(encodings, limit)
        try:
            while True:
                chunk = resp.raw.read(_READ_STEP, decode_content=False)
                if not chunk:
                    break
                inflater.feed(chunk)
            return inflater.result()
        except _TooLarge:
            if encodings:
                raise UserError(
                    f"{url}: answer inflates to more than {_size(limit)} ({', '.join(encodings)}; --max-answer-bytes)"
                ) from None
            raise UserError(too_large) from None
        except zlib.error as exc:
            if deadline.expired():
                raise _Retry(f"no complete answer within {self.options.timeout:g} s") from None
            raise UserError(f"{url}: answer's {', '.join(encodings)} data is damaged ({exc})") from None

    def _wait(self, attempt: int, retry_after: str | None, url: str, problem: str) -> None:
        delay = _retry_after(retry_after, time.time())
        if delay is None:
            delay = self.options.backoff * 2 ** (attempt - 1)
        delay = min(delay, self.options.max_backoff)
        _log.info("%s: %s, retrying in %.1f s", url, problem, delay)
        self._sleep(delay)

    def _status_error(self, answer: HttpAnswer, attempt: int) -> str:
        text = f"{answer.url}: HTTP {answer.status}"
        if answer.status in (401, 403):
            text += " (check --token, --basic-auth or --header)"
        if attempt > 1:
            text += f" after {attempt} tries"
        if answer.body:
            text += f": {answer.snippet()}"
        return text


class _Retry(Exception):
    """A try that failed in a way another try may not: no connection, a dropped one, the deadline."""


def _is_connect_failure(exc: BaseException) -> bool:
    inner: BaseException | None = exc
    seen = 0
    while inner is not None and seen < 10:
        if isinstance(inner, (urllib3.exceptions.NewConnectionError, ConnectionRefusedError)):
            return True
        inner = getattr(inner, "reason", None) or inner.__cause__ or inner.__context__
        if not isinstance(inner, BaseException):
            return False
        seen += 1
    return False


def _tries(n: int) -> str:
    return "tried once" if n == 1 else f"tried {n} times"


def _reason(exc: BaseException) -> str:
    """The innermost reason of a requests error, without the URL (which could carry user info)."""
    inner: BaseException = exc
    while True:
        nxt = getattr(inner, "reason", None) or inner.__cause__ or inner.__context__
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    text = str(inner)
    # urllib3 phrases: "<urllib3.connection.HTTPConnection object at 0x..>: Failed to establish ...: [Errno 111] ..."
    if ": " in text and text.startswith("<"):
        text = text.split(": ", 1)[1]
    return text[:200]
