"""Sends encoded OTLP trace requests over gRPC (grpcio) or HTTP (``http.client``), with the OTLP exporter's settings
and retry rule, and nothing of the OpenTelemetry SDK's exporters but their behaviour.

Why our own: :class:`~launchtrace.export.sinks.OtlpSink` hands over bytes it has already encoded, which the SDK
exporters' public API (``export(ReadableSpan...)``) cannot take; reaching into their private members pinned the
SDK to one minor release. What is kept from them, as the OTLP exporter specification describes it:

- settings from the keyword arguments, else ``OTEL_EXPORTER_OTLP_TRACES_*``, else ``OTEL_EXPORTER_OTLP_*``:
  endpoint, headers, timeout (seconds, default 10), compression (``gzip``, ``deflate`` over HTTP, at
  :data:`COMPRESS_LEVEL`), insecure (gRPC), CA certificate, client key and certificate (mTLS);
- retries: at most 6 attempts within ``timeout``; back-off ``2**n`` s with +-20 % jitter, or the receiver's own
  delay (gRPC ``RetryInfo``, HTTP ``Retry-After``); retried are gRPC CANCELLED, DEADLINE_EXCEEDED,
  RESOURCE_EXHAUSTED, ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS and HTTP 429, 502, 503, 504 and connection
  errors; ``shutdown()`` aborts a back-off at once;
- after gRPC UNAVAILABLE the channel is made again, so a restarted receiver is reached without waiting out the
  channel's own reconnect back-off; over HTTP one persistent connection per sending thread, replaced at once
  (no failed attempt) when the receiver closed it between requests;
- the response's partial success (spans the receiver rejected) is returned for counting.

Over HTTPS the server is verified against the configured CA file, else ``REQUESTS_CA_BUNDLE`` /
``CURL_CA_BUNDLE``, else certifi's bundle, as the SDK's exporter (through ``requests``) does; ``HTTP_PROXY`` /
``HTTPS_PROXY`` / ``NO_PROXY`` are honoured as there (read when the sender is made).

Example::

    sender = make_sender("grpc", "http://127.0.0.1:4317", timeout=5)
    result = sender.send(request_bytes)  # SendResult(ok=True, reason='', rejected=0, message='')
    sender.shutdown()
"""

from __future__ import annotations

import base64
import email.utils
import gzip
import http.client
import logging
import os
import random
import select
import ssl
import threading
import time
import urllib.request
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse, urlsplit, urlunsplit

from launchtrace._version import __version__

__all__ = ["GrpcSender", "HttpSender", "SendResult", "make_sender"]

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
DEFAULT_TIMEOUT_S = 10.0
USER_AGENT = f"launchtrace/{__version__}"
GRPC_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
RETRYABLE_HTTP = frozenset({429, 502, 503, 504})
COMPRESS_LEVEL = 1
"""zlib's fastest level for ``gzip`` / ``deflate`` over HTTP, on the export worker: a request of 512 launch spans
(539,082 bytes) costs the sender 13.7 million instructions at level 1, 35.4 million at gzip's default 9 and 28.4
million at zlib's default 6, for 17,823 bytes against 16,689 at 9 (``benchmarks/bench_otlpsend.py``)."""
RETRYABLE_GRPC_NAMES = frozenset(
    {"CANCELLED", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "OUT_OF_RANGE", "UNAVAILABLE", "DATA_LOSS"}
)


class SendResult(NamedTuple):
    """One request's outcome: delivered or not (with why), and spans the receiver rejected (partial success)."""

    ok: bool
    reason: str = ""
    rejected: int = 0
    message: str = ""


class _Retry(Exception):
    """A retryable failure of one attempt: why, and the receiver's own delay (``None``: the back-off)."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


# -- settings -----------------------------------------------------------------------------------------------
def env_setting(name: str) -> str | None:
    """``OTEL_EXPORTER_OTLP_TRACES_<name>``, else ``OTEL_EXPORTER_OTLP_<name>``, else ``None`` (blank is unset)."""
    for variable in (f"OTEL_EXPORTER_OTLP_TRACES_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


def parse_headers(raw: Mapping[str, str] | Sequence[tuple[str, str]] | str | None) -> dict[str, str]:
    """Headers given as a mapping, pairs, or the variables' ``k=v,k2=v2`` form (values URL-decoded)."""
    if raw is None:
        raw = env_setting("HEADERS") or ""
    if isinstance(raw, Mapping):
        return {str(k).strip().lower(): str(v) for k, v in raw.items()}
    if not isinstance(raw, str):
        return {str(k).strip().lower(): str(v) for k, v in raw}
    headers: dict[str, str] = {}
    for part in raw.split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip():
            headers[unquote(key).strip().lower()] = unquote(value).strip()
        elif part.strip():
            logger.warning("launchtrace: ignoring an OTLP header without '=' (%d characters)", len(part))
    return headers


def resolve_timeout(timeout: float | None) -> float:
    if timeout is not None:
        return float(timeout)
    raw = env_setting("TIMEOUT")
    try:
        return float(raw) if raw is not None else DEFAULT_TIMEOUT_S
    except ValueError:
        logger.warning("launchtrace: ignoring OTEL_EXPORTER_OTLP_TIMEOUT=%r; using %s s", raw, DEFAULT_TIMEOUT_S)
        return DEFAULT_TIMEOUT_S


def resolve_compression(compression: Any) -> str:
    """``"gzip"``, ``"deflate"`` or ``"none"``; also takes ``grpc.Compression`` members."""
    value = compression if compression is not None else env_setting("COMPRESSION")
    name = str(getattr(value, "name", value) or "none").strip().lower()
    name = {"nocompression": "none"}.get(name, name)
    if name not in ("gzip", "deflate", "none"):
        logger.warning("launchtrace: unknown OTLP compression %r; sending uncompressed", value)
        return "none"
    return name


def _file(path: str | None) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


class _Sender:
    """The retry loop shared by both protocols; subclasses make one attempt."""

    description = ""

    def __init__(
        self,
        headers: Any = None,
        timeout: float | None = None,
        compression: Any = None,
        certificate_file: str | None = None,
        client_key_file: str | None = None,
        client_certificate_file: str | None = None,
    ) -> None:
        """The settings both protocols share, each from its argument or else the variables."""
        self.timeout = resolve_timeout(timeout)
        self.header_map = parse_headers(headers)
        self.compression = resolve_compression(compression)
        self.ca_file = certificate_file or env_setting("CERTIFICATE")
        self.key_file = client_key_file or env_setting("CLIENT_KEY")
        self.cert_file = client_certificate_file or env_setting("CLIENT_CERTIFICATE")
        self._closed = threading.Event()

    def send(self, data: bytes) -> SendResult:
        """Deliver ``data`` (an encoded ``ExportTraceServiceRequest``), retrying within the timeout; never raises."""
        deadline = time.monotonic() + self.timeout
        result = SendResult(False, "shut down")
        for attempt in range(MAX_ATTEMPTS):
            if self._closed.is_set():
                return SendResult(False, "shut down")
            try:
                return self._attempt(data, max(deadline - time.monotonic(), 0.001))
            except _Retry as retry:
                result, delay = SendResult(False, retry.reason), retry.delay
            except Exception as exc:  # a client failure it does not report as a status: not retried
                logger.debug("launchtrace: OTLP send to %s raised", self.description, exc_info=True)
                return SendResult(False, repr(exc))
            wait = delay if delay is not None else 2**attempt * random.uniform(0.8, 1.2)
            if attempt + 1 == MAX_ATTEMPTS or wait > deadline - time.monotonic():
                return result
            logger.debug("launchtrace: retrying OTLP send to %s in %.2fs (%s)", self.description, wait, result.reason)
            if self._closed.wait(wait):
                return SendResult(False, "shut down")
        return result

    def _attempt(self, data: bytes, timeout: float) -> SendResult:
        """One try: the final result (delivered, or failed and not retryable), or :class:`_Retry`."""
        raise NotImplementedError

    def shutdown(self) -> None:
        self._closed.set()


def _rejected(body: bytes) -> tuple[int, str]:
    """The partial success of an ``ExportTraceServiceResponse`` (0 rejected when empty or unreadable)."""
    if not body:
        return 0, ""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    try:
        partial = ExportTraceServiceResponse.FromString(body).partial_success
    except Exception:  # a receiver answering something else: delivered, nothing known about rejections
        return 0, ""
    return partial.rejected_spans, partial.error_message


# -- gRPC -------------------------------------------------------------------------------------------------------
class GrpcSender(_Sender):
    """OTLP/gRPC over one grpcio channel, sending request bytes as they are (no message objects)."""

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        insecure: bool | None = None,
        credentials: Any = None,
        channel_options: Sequence[tuple[str, Any]] = (),
        **shared: Any,
    ) -> None:
        import grpc

        super().__init__(**shared)
        url = endpoint or env_setting("ENDPOINT") or "http://localhost:4317"
        parsed = urlparse(url if "//" in url else f"//{url}")
        self.target = parsed.netloc or url
        if parsed.scheme == "https":
            insecure = False
        elif insecure is None:
            raw = env_setting("INSECURE")
            insecure = raw.lower() == "true" if raw is not None else parsed.scheme == "http"
        self.description = url
        self.metadata = tuple(self.header_map.items())
        self.grpc_compression = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate}.get(
            self.compression, grpc.Compression.NoCompression
        )
        self._options = (("grpc.primary_user_agent", USER_AGENT), *channel_options)
        self._credentials = None
        if not insecure:
            self._credentials = credentials or grpc.ssl_channel_credentials(
                root_certificates=_file(self.ca_file),
                private_key=_file(self.key_file),
                certificate_chain=_file(self.cert_file),
            )
        self._lock = threading.Lock()
        self._channel, self._call = self._open()

    def _open(self) -> tuple[Any, Callable[..., Any]]:
        import grpc

        if self._credentials is None:
            channel = grpc.insecure_channel(self.target, options=self._options, compression=self.grpc_compression)
        else:
            channel = grpc.secure_channel(
                self.target, self._credentials, options=self._options, compression=self.grpc_compression
            )
        return channel, channel.unary_unary(GRPC_METHOD, request_serializer=None, response_deserializer=None)

    def _reopen(self, call: Callable[..., Any]) -> None:
        """A new channel after UNAVAILABLE, once per failed channel (the senders share it)."""
        with self._lock:
            if call is not self._call or self._closed.is_set():
                return
            old = self._channel
            self._channel, self._call = self._open()
        old.close()

    def _attempt(self, data: bytes, timeout: float) -> SendResult:
        import grpc

        call = self._call
        try:
            body = call(data, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as error:
            code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
            reason = f"{code.name}: {error.details() if hasattr(error, 'details') else ''}"
            if code.name not in RETRYABLE_GRPC_NAMES:
                return SendResult(False, reason)
            if code is grpc.StatusCode.UNAVAILABLE:
                self._reopen(call)
            raise _Retry(reason, _retry_info_delay(error)) from None
        rejected, message = _rejected(body)
        return SendResult(True, "", rejected, message)

    def shutdown(self) -> None:
        super().shutdown()
        with self._lock:
            channel = self._channel
        channel.close()


def _retry_info_delay(error: Any) -> float | None:
    """The server's ``google.rpc.RetryInfo`` delay in seconds, if it sent one."""
    try:
        raw = dict(error.trailing_metadata() or ()).get("google.rpc.retryinfo-bin")
    except Exception:
        return None
    if raw is None:
        return None
    from google.rpc.error_details_pb2 import RetryInfo

    try:
        delay = RetryInfo.FromString(raw).retry_delay
    except Exception:
        return None
    return delay.seconds + delay.nanos / 1e9


# -- HTTP -------------------------------------------------------------------------------------------------------
class HttpSender(_Sender):
    """OTLP/HTTP protobuf over persistent ``http.client`` connections, one per sending thread at a time (the sink's
    sender threads share the sender when ``in_flight`` > 1).

    Not ``requests``: its session cost about 3.4 million instructions per request here, on the export worker that
    shares the user's GIL (each request walks the whole environment twice for proxy variables and is prepared
    anew); this sends the same request for about a ninth of that (``benchmarks/bench_otlpsend.py``). What came
    from ``requests`` stays: the CA bundle is the configured one, else ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``,
    else certifi's; ``HTTP(S)_PROXY`` / ``NO_PROXY`` are honoured, read once.
    """

    def __init__(self, endpoint: str | None = None, **shared: Any) -> None:
        super().__init__(**shared)
        url = endpoint or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        if not url:
            base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
            url = base.rstrip("/") + "/v1/traces"
        self.url = self.description = url
        self.headers = {"Content-Type": "application/x-protobuf", "User-Agent": USER_AGENT}
        if self.compression != "none":
            self.headers["Content-Encoding"] = self.compression
        self.headers.update(self.header_map)
        self._idle: list[http.client.HTTPConnection] = []  # connections between requests, ready for the next
        self._context: ssl.SSLContext | None = None
        self._invalid = ""
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError as exc:
            port, self._invalid = None, f"invalid endpoint {url!r}: {exc}"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self._invalid = f"invalid endpoint {url!r}: not an http:// or https:// URL"
        self._tls = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", port
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._proxy = None if self._invalid else _proxy_for(parts.scheme, parts.hostname or "")
        if self._proxy is not None and not self._tls:  # a plain proxy gets the whole URL; an https one a tunnel
            self.path = urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))
            self.headers.update(self._proxy[2])

    def _attempt(self, data: bytes, timeout: float) -> SendResult:
        if self._invalid:
            return SendResult(False, self._invalid)
        if self.compression == "gzip":
            data = gzip.compress(data, COMPRESS_LEVEL, mtime=0)
        elif self.compression == "deflate":
            data = zlib.compress(data, COMPRESS_LEVEL)
        conn = self._idle_connection(timeout)
        try:
            if conn is not None:
                try:
                    response, body = _exchange(conn, self.path, data, self.headers)
                except _STALE:  # closed by the receiver as this request went out: once more at once, on a new one
                    conn.close()
                    conn = None
            if conn is None:
                conn = self._new_connection(timeout)
                response, body = _exchange(conn, self.path, data, self.headers)
        except ssl.SSLError as exc:
            _close(conn)
            if not isinstance(exc, _TLS_CLOSED):  # the certificate or the handshake: a retry cannot change it
                return SendResult(False, f"TLS: {exc}")
            raise _Retry(f"connection failed: {type(exc).__name__}") from None
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, not HTTP; a CA file
            _close(conn)
            if conn is None:  # not connected: the CA file, key or certificate could not be read
                return SendResult(False, f"{'TLS' if self._tls else 'connection'}: {exc}")
            raise _Retry(f"connection failed: {type(exc).__name__}") from None
        except ValueError:  # http.client refuses a header or path with control characters: never echo a header
            _close(conn)
            return SendResult(False, "invalid request: a header name or value, or the path, is not valid HTTP")
        if response.will_close or self._closed.is_set():
            conn.close()
        else:
            self._idle.append(conn)
        if 200 <= response.status < 300:
            rejected, message = _rejected(body)
            return SendResult(True, "", rejected, message)
        reason = f"HTTP {response.status} {response.reason}"
        if response.status not in RETRYABLE_HTTP:
            return SendResult(False, reason)
        raise _Retry(reason, _retry_after(response.getheader("Retry-After")))

    def _idle_connection(self, timeout: float) -> http.client.HTTPConnection | None:
        """An idle connection the receiver has not closed meanwhile, if there is one."""
        while self._idle:
            try:
                conn = self._idle.pop()
            except IndexError:  # another sender thread took the last one
                break
            if conn.sock is not None and not _readable(conn.sock):
                conn.sock.settimeout(timeout)
                conn.timeout = timeout
                return conn
            conn.close()  # readable while idle: the receiver closed it (or sent bytes nobody asked for)
        return None

    def _new_connection(self, timeout: float) -> http.client.HTTPConnection:
        """A new connection (it connects when the request is sent), through the proxy when there is one."""
        if self._proxy is None:
            host, port, tunnel = self._host, self._port, None
        else:
            host, port, tunnel = self._proxy
        if not self._tls:
            return http.client.HTTPConnection(host, port, timeout=timeout)
        if self._context is None:
            self._context = self._tls_context()
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._context)
        if tunnel is not None:
            conn.set_tunnel(self._host, self._port, headers=tunnel)
        return conn

    def _tls_context(self) -> ssl.SSLContext:
        """Verifying against the configured CA, else the bundle ``requests`` would pick; the client certificate."""
        ca = self.ca_file or os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or _certifi()
        if ca and os.path.isdir(ca):
            context = ssl.create_default_context(capath=ca)
        else:
            context = ssl.create_default_context(cafile=ca)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def shutdown(self) -> None:
        super().shutdown()
        while self._idle:
            try:
                self._idle.pop().close()
            except IndexError:
                break


_TLS_CLOSED = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)  # closed mid-request: retried
_STALE = (ConnectionResetError, BrokenPipeError, *_TLS_CLOSED)  # http.client.RemoteDisconnected is the first


def _exchange(
    conn: http.client.HTTPConnection, path: str, data: bytes, headers: dict[str, str]
) -> tuple[http.client.HTTPResponse, bytes]:
    """One POST and its whole answer (read to the end, so the connection can carry the next request)."""
    conn.request("POST", path, data, headers)
    response = conn.getresponse()
    return response, response.read()


def _close(conn: http.client.HTTPConnection | None) -> None:
    if conn is not None:
        conn.close()


def _certifi() -> str | None:
    try:
        import certifi
    except ImportError:  # the system's store
        return None
    return certifi.where()


def _readable(sock: Any) -> bool:
    """Whether ``sock`` has something to read now (``poll`` where there is one: ``select`` stops at fd 1024)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], (), (), 0)[0])


def _proxy_for(scheme: str, host: str) -> tuple[str, int, dict[str, str]] | None:
    """The ``HTTP_PROXY`` / ``HTTPS_PROXY`` (else ``ALL_PROXY``) for ``host`` unless ``NO_PROXY`` covers it: its
    host, port and the headers it needs (``Proxy-Authorization`` for ``user:password@``)."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass_environment(host, proxies):
        return None
    parts = urlsplit(proxy if "//" in proxy else f"http://{proxy}")
    if not parts.hostname:
        return None
    headers = {}
    if parts.username is not None:
        token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(token).decode()
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), headers


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date (RFC 9110); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def make_sender(protocol: str, endpoint: str | None, **settings: Any) -> GrpcSender | HttpSender:
    """The sender for ``protocol`` (``grpc`` or ``http/protobuf``); ``settings`` as the SDK exporters name them."""
    if protocol == "grpc":
        return GrpcSender(endpoint, **settings)
    return HttpSender(endpoint, **settings)
