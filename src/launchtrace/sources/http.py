"""A small HTTP client for trace backends: auth, TLS, timeouts, retries, and one-line errors.

Built on ``requests`` (already installed with the OTLP/HTTP exporter). It retries 429 and 5xx answers and
dropped connections with exponential backoff, honouring ``Retry-After`` (capped), and turns every failure
into a :class:`~launchtrace.errors.UserError` that names the URL and what went wrong. Credentials (bearer
token, basic auth, user info in the base URL) never appear in errors, logs or ``repr``.

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
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
import requests
import urllib3

from launchtrace.errors import UserError

__all__ = ["HttpAnswer", "HttpClient", "HttpOptions"]

_log = logging.getLogger(__name__)
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_SNIPPET = 160


@dataclasses.dataclass(frozen=True)
class HttpOptions:
    """How to reach a backend. ``token`` and ``basic_auth`` are kept out of ``repr``.

    ``verify=False`` turns TLS verification off; ``ca_file`` verifies against that bundle instead of the
    system's. ``retries`` is how many times a 429 / 5xx / dropped connection is retried after the first try.
    """

    base_url: str
    token: str | None = dataclasses.field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = dataclasses.field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = ()
    verify: bool = True
    ca_file: str | None = None
    timeout: float = 10.0
    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 30.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"backend URL {_public_url(self.base_url)!r} must be http:// or https:// with a host")
        if self.timeout <= 0:
            raise UserError(f"timeout must be positive, got {self.timeout}")
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
        parts = urlsplit(options.base_url)
        self.base_url = _public_url(options.base_url).rstrip("/")
        auth = options.basic_auth
        if auth is None and (parts.username or parts.password):
            auth = (parts.username or "", parts.password or "")
        self._auth = auth
        self._headers = {"User-Agent": "launchtrace-pull"}
        self._headers.update(dict(options.headers))
        if options.token:
            self._headers["Authorization"] = f"Bearer {options.token}"
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
        """
        url = self.url(path)
        headers = {**self._headers, "Accept": accept}
        attempts = self.options.retries + 1
        for attempt in range(1, attempts + 1):
            _log.debug("GET %s params=%s (attempt %d/%d)", url, params, attempt, attempts)
            try:
                with warnings.catch_warnings():
                    if self._verify is False:
                        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                    resp = self._session.get(
                        url,
                        params=params,
                        headers=headers,
                        auth=self._auth,
                        timeout=self.options.timeout,
                        verify=self._verify,
                        allow_redirects=True,
                    )
            except requests.exceptions.SSLError as exc:
                raise UserError(f"{url}: TLS failed ({_reason(exc)}); see --ca-file or --insecure") from None
            except requests.exceptions.Timeout:
                problem = f"no answer within {self.options.timeout:g} s"
                if attempt == attempts:
                    raise UserError(f"{url}: {problem} ({_tries(attempts)})") from None
                self._wait(attempt, None, url, problem)
                continue
            except requests.exceptions.ConnectionError as exc:
                problem = f"cannot connect ({_reason(exc)})"
                if attempt == attempts:
                    raise UserError(f"{url}: {problem} ({_tries(attempts)})") from None
                self._wait(attempt, None, url, problem)
                continue
            except requests.exceptions.RequestException as exc:
                raise UserError(f"{url}: request failed ({_reason(exc)})") from None
            answer = HttpAnswer(
                _public_url(resp.url) or url,
                resp.status_code,
                resp.headers.get("Content-Type", ""),
                resp.content,
                dict(resp.headers),
            )
            if answer.status in allow:
                return answer
            if answer.status in _RETRY_STATUS and attempt < attempts:
                self._wait(attempt, resp.headers.get("Retry-After"), url, f"HTTP {answer.status}")
                continue
            raise UserError(self._status_error(answer, attempt))
        raise AssertionError("unreachable")  # pragma: no cover

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
