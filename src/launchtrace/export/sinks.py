"""Where exported spans go: an OTLP JSON Lines file, or an OTLP receiver over gRPC or HTTP.

Both sinks take batches of :class:`~launchtrace.spans.SpanData` on the export worker thread, never raise, and
count what they could not deliver exactly. A failure is logged once (a warning naming the destination and the
reason); the next batch that gets through logs again with the number of spans dropped so far.

- :class:`FileSink` appends one OTLP/JSON ``TracesData`` per line (the OTLP file exporter format, which the
  Collector's ``otlpjsonfile`` receiver reads). A failed write (full disk, read-only folder) is rolled back so
  the file never holds half a line.
- :class:`OtlpSink` encodes requests with :mod:`launchtrace.otlp.encode_proto` (compiled where built; its cost
  is in docs/export.md) and sends the bytes as they are through :mod:`launchtrace.export.otlpsend`, which reads
  the standard ``OTEL_EXPORTER_OTLP_*`` variables (endpoint, headers, certificates, compression, timeout,
  insecure) and retries as the SDK's OTLP exporters do, over grpcio and requests' public API.

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

from launchtrace.export.fileopen import write_whole
from launchtrace.export.otlpsend import make_sender
from launchtrace.export.threadsignals import leave_signals_to_the_program
from launchtrace.otlp.json_codec import line_encoder
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
"""Threads whose name starts with this are the export worker's (and its OTLP senders')."""

MAX_SPANS_PER_REQUEST = 2048
"""OTLP requests are split to at most this many spans (about 2.4 MB of launch spans with 31 attributes)."""

MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The default gRPC receive limit of the Collector, Jaeger and Tempo: a larger request (spans with big attributes)
is split in halves until each part fits, rather than rejected whole."""

GRPC_IN_FLIGHT = 2
"""OTLP/gRPC requests on the wire at once (one channel, HTTP/2 streams): while the receiver decodes one, the next
arrives. Two moved more spans per second than one into ``launchtrace collect`` (``docs/export.md``, "Speed");
HTTP keeps one (one persistent HTTP/1.1 connection; a larger ``in_flight`` opens one per sender thread)."""


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
        self._encode = line_encoder()
        self.bytes_written = 0  # by this process (a child appending to the same file adds its own)
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
                data = self._encode(spans)
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
                write_whole(fd, data)
            except OSError as exc:
                self._acct.failed(len(spans), exc)
                return
            self.bytes_written += len(data)
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
        self.bytes_written = 0
        self._truncate = False
        self._fd = None
        self._closed = False


def _gzip_member(data: bytes) -> bytes:
    """``data`` as one complete gzip member (level 6, no timestamp: equal batches give equal bytes)."""
    import gzip

    return gzip.compress(data, compresslevel=6, mtime=0)


# ------------------------------------------------------------------------------------------------------ OTLP
@dataclasses.dataclass(frozen=True, slots=True)
class _Payload:
    """An encoded ExportTraceServiceRequest and the number of spans in it."""

    data: bytes
    count: int


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

    ``endpoint`` ``None`` resolves it from ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
    as the SDK exporters do (for HTTP the base endpoint gets ``/v1/traces`` appended; an explicit HTTP endpoint is
    used as given). ``exporter_kwargs`` are the SDK exporters' settings, passed to
    :func:`launchtrace.export.otlpsend.make_sender` (``headers``, ``timeout``, ``compression``, ``insecure``,
    ``credentials``, ``certificate_file``...).
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
        self._sender = make_sender(protocol, endpoint, **exporter_kwargs)
        where = self._sender.description
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
        leave_signals_to_the_program()
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
        result = self._sender.send(payload.data)
        if not result.ok:
            self._acct.failed(payload.count, result.reason)
            return
        self._acct.ok(payload.count)
        if result.rejected:
            self._acct.rejected(result.rejected, result.message)

    def stats(self) -> SinkStats:
        return self._acct.stats()

    def shutdown(self) -> None:
        """Close the channel or connections and abort retries in progress; the sender thread ends."""
        try:
            self._sender.shutdown()
        except Exception:  # never raise into the user's program at exit
            logger.debug("launchtrace: OTLP sender shutdown failed", exc_info=True)
        self._closing = True  # the sender threads end once nothing is queued
