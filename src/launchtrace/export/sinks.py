"""Where exported spans go: an OTLP JSON Lines file, or an OTLP receiver over gRPC or HTTP.

Both sinks take batches of :class:`~launchtrace.spans.SpanData` on the export worker thread, never raise, and
count what they could not deliver exactly. A failure is logged once (a warning naming the destination and the
reason); the next batch that gets through logs again with the number of spans dropped so far.

- :class:`FileSink` appends one OTLP/JSON ``TracesData`` per line (the OTLP file exporter format, which the
  Collector's ``otlpjsonfile`` receiver reads). A failed write (full disk, read-only folder) is rolled back so
  the file never holds half a line.
- :class:`OtlpSink` sends through the opentelemetry-exporter-otlp span exporters, so the standard
  ``OTEL_EXPORTER_OTLP_*`` variables (endpoint, headers, certificates, compression, timeout, insecure) and
  their retry and reconnection logic apply unchanged; only the translation step is replaced: the bytes come
  from :mod:`launchtrace.otlp.encode_proto` (compiled where built; its cost is in docs/export.md) instead of the
  SDK's encoder, and go through the gRPC channel as they are (no message objects on either side of the call).

Example::

    from launchtrace.export.sinks import FileSink, OtlpSink
    sink = FileSink("launchtrace-spans.jsonl")
    sink.write(spans)
    sink = OtlpSink("http://localhost:4317", protocol="grpc")
    sink.write(spans)
    print(sink.stats())  # SinkStats(exported=..., dropped=..., batches=..., failures=...)
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from launchtrace.otlp.encode_jsonl import JsonLinesEncoder
from launchtrace.spans import SpanData

__all__ = [
    "EXPORT_THREAD_PREFIX",
    "FileSink",
    "OtlpSink",
    "Sink",
    "SinkStats",
]

logger = logging.getLogger(__name__)

EXPORT_THREAD_PREFIX = "launchtrace-export"
"""Threads whose name starts with this are the export worker's; the SDK exporters' own per-attempt log lines
from them are silenced (this module logs once and counts instead)."""

MAX_SPANS_PER_REQUEST = 2048
"""OTLP requests are split to at most this many spans (about 2.4 MB of launch spans with 31 attributes)."""

MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The default gRPC receive limit of the Collector, Jaeger and Tempo: a larger request (spans with big attributes)
is split in halves until each part fits, rather than rejected whole."""

GRPC_IN_FLIGHT = 2
"""OTLP/gRPC requests on the wire at once (one channel, HTTP/2 streams): while the receiver decodes one, the next
arrives. Two moved more spans per second than one into ``launchtrace collect`` (``docs/export.md``, "Speed");
HTTP keeps one (a ``requests`` session is not documented as safe to share between threads)."""

_GRPC_EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@dataclasses.dataclass(frozen=True)
class SinkStats:
    """What a sink did so far: spans delivered, spans dropped (failed or rejected), batches, failures."""

    exported: int = 0
    dropped: int = 0
    batches: int = 0
    failures: int = 0


class Sink(Protocol):
    """What the export worker writes to."""

    description: str

    def write(self, spans: Sequence[SpanData]) -> None: ...

    def stats(self) -> SinkStats: ...

    def shutdown(self) -> None: ...


class _Accounting:
    """Exact counts and the log-once rule shared by the sinks."""

    def __init__(self, description: str) -> None:
        self.description = description
        self._lock = threading.Lock()
        self._exported = self._dropped = self._batches = self._failures = 0
        self._failing = False  # the last batch failed; the next success says so

    def ok(self, n: int) -> None:
        with self._lock:
            self._exported += n
            self._batches += 1
            recovered = self._failing
            self._failing = False
            dropped = self._dropped
        if recovered:
            logger.warning(
                "launchtrace: export to %s works again; %d spans were dropped while it failed",
                self.description,
                dropped,
            )

    def failed(self, n: int, reason: object) -> None:
        with self._lock:
            self._dropped += n
            self._batches += 1
            self._failures += 1
            first = not self._failing
            self._failing = True
        if first:
            logger.warning(
                "launchtrace: could not export %d spans to %s (%s); further failures are counted in "
                "launchtrace.export.stats()",
                n,
                self.description,
                reason,
            )

    def lost(self, n: int) -> None:
        """Spans given after the sink was closed (the exit flush ran out of time): counted, the caller says so."""
        with self._lock:
            self._dropped += n
            self._batches += 1

    def rejected(self, n: int, reason: str) -> None:
        """Spans of an accepted request that the receiver rejected (OTLP partial success): not exported."""
        with self._lock:
            self._exported -= n
            self._dropped += n
        logger.warning("launchtrace: %s rejected %d spans: %s", self.description, n, reason or "no reason given")

    def stats(self) -> SinkStats:
        with self._lock:
            return SinkStats(self._exported, self._dropped, self._batches, self._failures)


# ------------------------------------------------------------------------------------------------------ file
class FileSink:
    """Appends OTLP JSON Lines to ``path``: one ``TracesData`` per line, per written batch.

    The file is opened on the first write with ``O_APPEND``, so processes sharing the path (a forked child)
    interleave whole lines; never through a symbolic link nor when another user owns it
    (:mod:`launchtrace.export.fileopen`). A path ending in ``.gz`` (or ``compress=True``) gets each batch as one
    gzip member: the file is a valid gzip stream (members concatenate, as ``gzip -d`` and every launchtrace
    reader take them) that a crash or another process's batch never leaves half-written. Each line (or member) is
    written with one ``write`` call; if it fails part way, the file is truncated back to where it was.
    ``truncate=True`` empties the file at once, at construction.
    """

    def __init__(self, path: str | os.PathLike[str], *, truncate: bool = False, compress: bool | None = None) -> None:
        self.path = os.fspath(path)
        self.compressed = self.path.endswith(".gz") if compress is None else compress
        self.description = f"file {self.path}"
        self._truncate = truncate
        self._fd: int | None = None
        self._closed = False
        self._acct = _Accounting(self.description)
        self._lock = threading.Lock()
        self._encoder = JsonLinesEncoder()
        if truncate:  # now, not at the first write: a forked child may append before the parent writes
            try:
                self._open()
            except OSError as exc:
                logger.debug("launchtrace: cannot open %s yet: %s", self.path, exc)

    def _open(self) -> int:
        from launchtrace.export.fileopen import open_append  # no symbolic link, no other user's file

        fd = open_append(self.path)
        if self._truncate:
            os.ftruncate(fd, 0)
            self._truncate = False
        self._fd = fd
        return fd

    def write(self, spans: Sequence[SpanData]) -> None:
        if not spans:
            return
        with self._lock:
            try:
                data = self._encoder.encode(spans)
                if self.compressed:
                    data = _gzip_member(data)
            except (TypeError, ValueError) as exc:  # an attribute value orjson cannot write
                self._acct.failed(len(spans), f"cannot encode: {exc}")
                return
            if self._closed:  # the exit flush ran out of time: what comes after is dropped, and counted
                self._acct.lost(len(spans))
                return
            try:
                fd = self._fd if self._fd is not None else self._open()
            except OSError as exc:
                self._acct.failed(len(spans), exc)
                return
            try:
                _write_all(fd, data)
            except OSError as exc:
                self._acct.failed(len(spans), exc)
                return
            self._acct.ok(len(spans))  # under the lock: once shutdown() returns, the counts are the file's

    def stats(self) -> SinkStats:
        return self._acct.stats()

    def sync(self) -> None:
        """Push what was written to the disk (``fsync``); failures are logged, not raised."""
        with self._lock:
            if self._fd is not None:
                try:
                    os.fsync(self._fd)
                except OSError as exc:
                    logger.debug("launchtrace: fsync of %s failed: %s", self.path, exc)

    def shutdown(self) -> None:
        """Close the file. Not fsynced: every line is already with the kernel, which keeps it when the program
        exits (what a program's own log files get too); an fsync would lengthen every program's exit, far more
        on network file systems (``docs/export.md``). :meth:`sync` is there for a caller that needs it."""
        with self._lock:
            fd, self._fd = self._fd, None
            self._closed = True
        if fd is not None:
            os.close(fd)

    def reopen_after_fork(self) -> None:
        """In a forked child: forget the parent's descriptor (the child opens its own, appending)."""
        self._lock = threading.Lock()
        self._acct = _Accounting(self.description)
        self._truncate = False
        self._fd = None
        self._closed = False


def _gzip_member(data: bytes) -> bytes:
    """``data`` as one complete gzip member (level 6, no timestamp: equal batches give equal bytes)."""
    import gzip

    return gzip.compress(data, compresslevel=6, mtime=0)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` or nothing: on a failure part way, truncate back to the starting size."""
    start = os.fstat(fd).st_size
    view = memoryview(data)
    try:
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError:
        try:
            os.ftruncate(fd, start)
        except OSError as exc:
            logger.debug("launchtrace: could not roll back a partial line: %s", exc)
        raise


# ------------------------------------------------------------------------------------------------------ OTLP
@dataclasses.dataclass(frozen=True, slots=True)
class _Payload:
    """An encoded ExportTraceServiceRequest and the number of spans in it (what the exporters call data)."""

    data: bytes
    count: int


def _grpc_exporter_class() -> type:
    """The SDK's gRPC span exporter with its translation step replaced by pre-encoded bytes."""
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    class BytesGrpcSpanExporter(OTLPSpanExporter):
        """Sends ``_Payload`` bytes as they are: same channel, credentials, headers, retries as the SDK's."""

        rejected: list[tuple[int, str]]

        def _initialize_channel_and_stub(self) -> None:
            super()._initialize_channel_and_stub()
            raw = self._channel.unary_unary(
                _GRPC_EXPORT_METHOD,
                request_serializer=None,  # the request is already bytes
                response_deserializer=ExportTraceServiceResponse.FromString,
            )
            exporter = self

            class _Stub:
                @staticmethod
                def Export(request: bytes, **kwargs: Any) -> Any:
                    response = raw(request, **kwargs)
                    partial = response.partial_success
                    if partial.rejected_spans:
                        exporter.rejected.append((partial.rejected_spans, partial.error_message))
                    return response

            self.rejected = []
            self._client = _Stub()

        def _translate_data(self, data: Any) -> bytes:  # type: ignore[override]
            return data.data

        def _count_data(self, data: Any) -> int:  # type: ignore[override]
            return data.count

    del grpc
    return BytesGrpcSpanExporter


_QUIET_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
)


class _FromExportThread(logging.Filter):
    """Drops the SDK exporters' per-attempt records logged from our worker thread (we log once and count)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.threadName and record.threadName.startswith(EXPORT_THREAD_PREFIX):
            logger.debug("launchtrace: exporter said: %s", record.getMessage())
            return False
        return True


_QUIET_FILTER = _FromExportThread()


def _quiet_sdk_exporter_logs() -> None:
    for name in _QUIET_LOGGERS:
        lg = logging.getLogger(name)
        if _QUIET_FILTER not in lg.filters:
            lg.addFilter(_QUIET_FILTER)


def _session_keeping_its_ca(exporter_kwargs: dict[str, Any]) -> Any:
    """A ``requests.Session`` for the SDK's HTTP exporter that keeps the CA it is given, or ``None``.

    The exporter sets ``session.verify`` to ``OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE``, but ``requests`` lets
    ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` from the environment win over ``session.verify``, so with
    either set (common: distributions and CI images set them) the OTLP certificate was silently ignored and
    TLS to a private CA failed. Only used when a certificate is configured and no credential-provider session
    is (``OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER``).
    """
    configured = (
        exporter_kwargs.get("certificate_file")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
        or os.environ.get("OTEL_EXPORTER_OTLP_CERTIFICATE")
    )
    if not configured or "session" in exporter_kwargs:
        return None
    if os.environ.get("OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER"):
        return None
    import requests

    class _Session(requests.Session):
        def merge_environment_settings(self, url, proxies, stream, verify, cert):  # type: ignore[no-untyped-def]
            merged = super().merge_environment_settings(url, proxies, stream, verify, cert)
            if verify is None and isinstance(self.verify, str):
                merged["verify"] = self.verify  # the configured CA, not the environment's bundle
            return merged

    return _Session()


class _Outstanding:
    """Requests of one :meth:`OtlpSink.write` not yet answered: starts at 1 for the write itself."""

    __slots__ = ("_done", "_left", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._left = 1
        self._done = threading.Event()

    def add(self) -> None:
        with self._lock:
            self._left += 1

    def finish(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._done.set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)


class OtlpSink:
    """Sends spans over OTLP/gRPC (``protocol="grpc"``) or OTLP/HTTP protobuf (``"http/protobuf"``).

    ``endpoint`` ``None`` lets the SDK exporter resolve it from ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` as it always does (for HTTP the base endpoint gets ``/v1/traces``
    appended; an explicit HTTP endpoint is used as given, as in the SDK). ``exporter_kwargs`` pass through to
    the SDK exporter (``headers``, ``timeout``, ``compression``, ``insecure``, ``credentials``...).
    ``in_flight``: requests sent at once by :meth:`write` (default :data:`GRPC_IN_FLIGHT` for gRPC, 1 for HTTP).
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        protocol: str = "grpc",
        in_flight: int | None = None,
        **exporter_kwargs: Any,
    ) -> None:
        from launchtrace.otlp.encode_proto import ProtoEncoder

        if protocol not in ("grpc", "http/protobuf"):
            raise ValueError(f"protocol must be 'grpc' or 'http/protobuf', got {protocol!r}")
        if in_flight is None:
            in_flight = GRPC_IN_FLIGHT if protocol == "grpc" else 1
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, got {in_flight}")
        self.in_flight = in_flight
        self.protocol = protocol
        self._encoder = ProtoEncoder()
        _quiet_sdk_exporter_logs()
        if protocol == "grpc":
            self._exporter = _grpc_exporter_class()(endpoint=endpoint, **exporter_kwargs)
            where = endpoint or self._exporter._endpoint
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            session = _session_keeping_its_ca(exporter_kwargs)
            if session is not None:
                exporter_kwargs = {**exporter_kwargs, "session": session}
            self._exporter = OTLPSpanExporter(endpoint=endpoint, **exporter_kwargs)
            where = self._exporter._endpoint
        self.endpoint = where
        self.description = f"OTLP {protocol} {where}"
        self._acct = _Accounting(self.description)
        self._senders: list[threading.Thread] = []
        self._queue: queue.Queue = queue.Queue(maxsize=2)
        self._closing = False

    def write(self, spans: Sequence[SpanData]) -> None:
        """Send ``spans`` in requests of at most 2,048; returns when every request is answered or given up.

        With more than one request, sender threads send while this thread encodes the next requests (the gRPC
        and HTTP clients release the GIL while they wait), at most two requests ahead; ``in_flight`` senders
        each have one request on the wire, so the receiver can work on one while the next arrives.
        """
        chunks = [spans[i : i + MAX_SPANS_PER_REQUEST] for i in range(0, len(spans), MAX_SPANS_PER_REQUEST)]
        if len(chunks) <= 1:
            for chunk in chunks:
                for payload in self._encode(chunk):
                    self._send(payload)
            return
        pending = self._sender_queue()
        batch = _Outstanding()
        for chunk in chunks:
            for payload in self._encode(chunk):
                batch.add()
                self._put(pending, (payload, batch))
        batch.finish()  # the count now only goes down: done when the senders have finished every request
        while not batch.wait(1.0):
            self._sender_queue()  # restarts a sender if one ever died; the queued items are still there

    def _encode(self, chunk: Sequence[SpanData]) -> list[_Payload]:
        """The requests for ``chunk``: one, or halves when it exceeds :data:`MAX_REQUEST_BYTES` or cannot be
        encoded (so one span that cannot be encoded, or is too big alone, is dropped and counted, not the batch)."""
        try:
            data = self._encoder.encode(chunk)
        except Exception as exc:  # a value whose str() raises, a self-containing list, an out-of-range field
            if len(chunk) > 1:
                half = len(chunk) // 2
                return self._encode(chunk[:half]) + self._encode(chunk[half:])
            self._acct.failed(len(chunk), f"cannot encode: {exc!r}")
            return []
        if len(data) > MAX_REQUEST_BYTES and len(chunk) > 1:
            half = len(chunk) // 2
            return self._encode(chunk[:half]) + self._encode(chunk[half:])
        return [_Payload(data, len(chunk))]

    def _put(self, q: queue.Queue, item: object) -> None:
        while True:
            try:
                q.put(item, timeout=1.0)
                return
            except queue.Full:
                self._sender_queue()  # the sender may have ended after shutdown(): start another

    def _sender_queue(self) -> queue.Queue:
        alive = [t for t in self._senders if t.is_alive()]
        while len(alive) < self.in_flight:
            t = threading.Thread(
                target=self._send_loop,
                name=f"{EXPORT_THREAD_PREFIX}-send-{os.getpid()}-{len(alive)}",
                daemon=True,
            )
            t.start()
            alive.append(t)
        self._senders = alive
        return self._queue

    def _send_loop(self) -> None:
        q = self._queue
        while True:
            try:
                item = q.get(timeout=0.5)
            except queue.Empty:
                if self._closing:
                    return  # idle after shutdown(); a later write() starts new senders
                continue
            payload, batch = item
            try:
                self._send(payload)
            finally:
                batch.finish()

    def _send(self, payload: _Payload) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            if self.protocol == "grpc":
                ok = self._exporter._export(payload) is SpanExportResult.SUCCESS
                reason: object = "see the DEBUG log of launchtrace.export.sinks"
            else:
                result = self._exporter._client.export(payload.data)
                ok, reason = result.success, result.reason or result.error or result.status_code
        except Exception as exc:  # the SDK exporter failed in a way it does not handle itself
            logger.debug("launchtrace: exporter raised", exc_info=True)
            ok, reason = False, exc
        if ok:
            self._acct.ok(payload.count)
            rejected = getattr(self._exporter, "rejected", None)
            while rejected:
                try:
                    n, message = rejected.pop(0)
                except IndexError:  # another sender took the last one
                    break
                self._acct.rejected(n, message)
        else:
            self._acct.failed(payload.count, reason)

    def stats(self) -> SinkStats:
        return self._acct.stats()

    def shutdown(self) -> None:
        """Close the channel or session and abort retries in progress; the sender thread ends."""
        try:
            self._exporter.shutdown()
        except Exception:  # never raise into the user's program at exit
            logger.debug("launchtrace: exporter shutdown failed", exc_info=True)
        self._closing = True  # the sender threads end once nothing is queued
