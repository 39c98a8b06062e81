"""A real OTLP trace receiver that writes what it receives to a span file: OTLP JSON Lines, or the protobuf as sent.

For local multi-process runs (every process exports over OTLP to one ``launchtrace collect``) and for the
project's own end-to-end tests. It speaks OTLP/gRPC (grpcio with the opentelemetry-proto ``TraceService``) and
OTLP/HTTP (``POST /v1/traces`` with protobuf or JSON bodies, optionally gzip or deflate encoded), on loopback by
default. Every request is parsed by the protobuf library (which rejects what is malformed), checked and counted
as it arrives, and queued for a writer thread, which appends it in the format the output's name asks for:

- ``.pb`` / ``.pb.gz``: the request's protobuf bytes as received, each behind its length as a 4-byte big-endian
  integer (the Collector's file exporter ``format: proto``, which every launchtrace reader takes): nothing is
  converted, so the writer keeps up with any sender;
- anything else: OTLP JSON Lines, one ``TracesData`` per request (hex ids, integer enums, 64-bit integers as
  strings: ``json_format``'s conversion, sped up by :mod:`launchtrace.otlp.transcode`).

:meth:`Collector.stop` stops accepting, writes everything queued, and ``fsync``\\ s the file: nothing received is
lost.

Example::

    from launchtrace.receiver.collect import Collector
    with Collector("spans.jsonl", grpc_port=0, http_port=0) as c:
        print(c.grpc_port, c.http_port)  # the bound ports
        ...  # export to f"http://127.0.0.1:{c.grpc_port}"
        c.wait_for_spans(100, timeout=10)
    # spans.jsonl now holds every span received
"""

from __future__ import annotations

import base64
import gzip
import http.server
import logging
import operator
import os
import queue
import struct
import threading
import time
import zlib
from collections.abc import Callable
from concurrent import futures
from typing import Any

from launchtrace.export.fileopen import write_whole
from launchtrace.otlp.jsonkeys import (
    ATTRIBUTES,
    EVENTS,
    LINKS,
    PARENT_SPAN_ID,
    RESOURCE,
    RESOURCE_SPANS,
    SCOPE_SPANS,
    SPAN_ID,
    SPANS,
    TRACE_ID,
)

__all__ = ["PROTOBUF_SUFFIXES", "Collector", "decode_request", "message_to_json_line", "writes_protobuf"]

logger = logging.getLogger(__name__)

DEFAULT_GRPC_PORT = 4317
DEFAULT_HTTP_PORT = 4318
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Largest request accepted (the Collector's default is 4 MiB; a local tool can afford more)."""

DEFAULT_IDLE_TIMEOUT_S = 30.0
"""An HTTP connection silent this long (idle keep-alive, or a body that stopped coming) is closed."""
_TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_EMPTY_RESPONSE = b""  # ExportTraceServiceResponse() serialized: every field default
_SYNC_EVERY_BYTES = 8 << 20  # the writer wakes the syncer after this many bytes
_LENGTH = struct.Struct(">I")  # the length before each message of a protobuf output (launchtrace.otlp.proto_decode)
PROTOBUF_SUFFIXES = (".pb", ".pb.gz")
"""Output names that get the requests' protobuf bytes as received, length-prefixed; any other gets JSON Lines."""


def writes_protobuf(out: str | os.PathLike[str] | None) -> bool:
    """Whether ``collect`` writes the protobuf it received (length-prefixed) to ``out``, by its name."""
    return out is not None and os.fspath(out).endswith(PROTOBUF_SUFFIXES)


_ID_HEX_DIGITS = {TRACE_ID: 32, SPAN_ID: 16, PARENT_SPAN_ID: 16}
_HEX = frozenset("0123456789abcdefABCDEF")


def _ids_to_base64(obj: dict) -> None:
    """Hex ids -> base64 for ``json_format``; an id that is not exactly 32 / 16 hex digits, or is all zeros, is
    the sender's error (an empty or missing ``parentSpanId`` is a root; a span or link needs both other ids)."""
    for key, digits in _ID_HEX_DIGITS.items():
        value = obj.get(key)
        if key == PARENT_SPAN_ID and not value:
            continue
        if not isinstance(value, str) or len(value) != digits or not _HEX.issuperset(value):
            raise ValueError(f"{key} {value!r} is not {digits} hex digits (OTLP/JSON ids are hex)")
        if value.count("0") == digits:
            raise ValueError(f"{key} {value!r} is all zeros (an invalid id)")
        obj[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")


def _walk_spans(d: dict, fix: Callable[[dict], None]) -> None:
    for rs in d.get(RESOURCE_SPANS, ()) or ():
        for ss in rs.get(SCOPE_SPANS, ()) or ():
            for span in ss.get(SPANS, ()) or ():
                fix(span)
                for link in span.get(LINKS, ()) or ():
                    fix(link)


def message_to_json_line(message: Any) -> bytes:
    """One OTLP JSON Lines line (with its newline) for a ``TracesData`` / ``ExportTraceServiceRequest``:
    ``json_format``'s conversion with integer enums and hex ids (see :mod:`launchtrace.otlp.transcode`)."""
    from launchtrace.otlp.transcode import json_line

    return json_line(message)


def _parse_json_request(body: bytes) -> Any:
    import orjson
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    d = orjson.loads(body)
    if not isinstance(d, dict):
        raise ValueError("the body is not a JSON object")
    attributes = _count_attributes(d)
    if attributes > MAX_ATTRIBUTES_PER_REQUEST:
        raise BodyTooLarge(f"{attributes} attributes in one request, over {MAX_ATTRIBUTES_PER_REQUEST}: split it")
    _walk_spans(d, _ids_to_base64)
    return json_format.ParseDict(d, ExportTraceServiceRequest(), ignore_unknown_fields=True)


def _count_spans(message: Any) -> int:
    return sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)


def _parse_proto(raw: bytes) -> Any:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return ExportTraceServiceRequest.FromString(raw)


def decode_request(raw: bytes) -> tuple[Any, int]:
    """A serialized ``ExportTraceServiceRequest`` -> (the parsed message, its span count); raises on malformed
    bytes (the protobuf library's ``DecodeError``) and on spans without valid ids: the sender's error."""
    message = _parse_proto(raw)
    _check_ids(message)
    return message, _count_spans(message)


_ID_SIZES = ((TRACE_ID, operator.attrgetter("trace_id"), 16), (SPAN_ID, operator.attrgetter("span_id"), 8))


def _check_ids(message: Any) -> None:
    """Every span needs a 16-byte trace id and an 8-byte span id, neither all zeros (OTLP's rule, and what the
    JSON path already refused): an empty span or an id-less one is the sender's error, answered with 400, not
    a line of nothing in the file (1,000,000 empty spans over protobuf were accepted with a 200). Checked a
    scope's ids at a time: 0.44 -> 0.37 us a span (best of 7), most of receiving's Python for a ``.pb`` output."""
    for rs in message.resource_spans:
        for ss in rs.scope_spans:
            spans = ss.spans
            for what, field, size in _ID_SIZES:
                ids = list(map(field, spans))
                if set(map(len, ids)) - {size} or bytes(size) in ids:
                    i = next(i for i, value in enumerate(ids) if len(value) != size or not any(value))
                    raise ValueError(f"span {i} of a scope has no valid {what} ({len(ids[i])} bytes)")


MAX_ATTRIBUTES_PER_REQUEST = 1 << 18
"""Attributes (resource, span, event and link ones together) one OTLP/JSON request may carry: 262,144, four
times 2,048 spans of 31 attributes. A request with more is answered 413 before the slow conversion (one 64.7 MB
request of 1.4 million attributes held ``collect`` for 49 s and 1 GB)."""


def _count_attributes(d: dict) -> int:
    n = 0
    for rs in d.get(RESOURCE_SPANS, ()) or ():
        n += len((rs.get(RESOURCE) or {}).get(ATTRIBUTES) or ())
        for ss in rs.get(SCOPE_SPANS, ()) or ():
            for span in ss.get(SPANS, ()) or ():
                n += len(span.get(ATTRIBUTES) or ())
                for part in [*(span.get(EVENTS) or ()), *(span.get(LINKS) or ())]:
                    n += len(part.get(ATTRIBUTES) or ()) if isinstance(part, dict) else 0
    return n


def _warm_decoders() -> None:
    """Import what decoding a request needs now, not on the first request.

    The first request to a fresh collector took far longer than the next ones (the transcoder's and the
    protobuf messages' imports; ``docs/export.md``, "Speed"), which a sender saw as latency and a short run as
    lost throughput.
    """
    decode_request(b"")  # an empty request: the protobuf parser answers no spans
    from launchtrace.otlp import transcode  # noqa: F401  (the JSON writer's)


class _Pending:
    """A request queued for the writer; ``done`` is set once its line was written (``ok``) or failed."""

    __slots__ = ("done", "ok", "raw", "request", "spans")

    def __init__(self, request: Any, spans: int, raw: bytes | None) -> None:
        self.request = request
        self.spans = spans
        self.raw = raw  # the protobuf bytes as received, where it came as protobuf
        self.done = threading.Event()
        self.ok = True


class Collector:
    """Receives OTLP traces over gRPC and HTTP and appends them to ``out`` as OTLP JSON Lines.

    ``grpc_port`` / ``http_port``: ``0`` picks a free port, ``None`` turns that protocol off. ``out`` ``None``
    writes no file (tests that only look at :attr:`messages`); a name ending in ``.pb`` or ``.pb.gz`` gets the
    protobuf as received (:func:`writes_protobuf`), any other OTLP JSON Lines. ``keep=True`` also keeps every received
    request in :attr:`messages`. ``max_pending_spans`` bounds what waits for the writer: past it, receiving
    waits (back-pressure on the senders), it never drops. ``idle_timeout``: seconds an HTTP connection may
    stay silent (between requests, or inside one) before it is closed and its thread ends.
    """

    def __init__(
        self,
        out: str | os.PathLike[str] | None,
        *,
        grpc_port: int | None = DEFAULT_GRPC_PORT,
        http_port: int | None = DEFAULT_HTTP_PORT,
        host: str = "127.0.0.1",
        keep: bool = False,
        max_pending_spans: int = 500_000,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
    ) -> None:
        self.out = None if out is None else os.fspath(out)
        self._gzip = self.out is not None and self.out.endswith(".gz")  # spans.jsonl.gz: compressed as written
        self._protobuf = writes_protobuf(self.out)
        self.host = host
        self.keep = keep
        self.messages: list[Any] = []
        self.last_headers: dict[str, str] = {}
        self.spans_received = 0
        self.requests_received = 0
        self.spans_written = 0
        self.spans_failed = 0  # received, not written (a full disk): refused to their senders
        self.problems: dict[str, int] = {}  # requests that failed, by kind (rejected with 400, client went away)
        self.grpc_port: int | None = grpc_port
        self.http_port: int | None = http_port
        self._want_grpc = grpc_port
        self._want_http = http_port
        self._queue: queue.Queue = queue.Queue()
        self._max_pending = max(1, max_pending_spans)
        self.idle_timeout = idle_timeout
        self._lock = threading.Condition()
        self._grpc_server: Any = None
        self._http_server: http.server.ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._sync_thread: threading.Thread | None = None
        self._sync_wanted = threading.Event()
        self._sync_done = False
        self._file: Any = None
        self._stopped = False
        self._closed = False  # the writer's end marker is queued: receive() refuses from now on
        self.write_errors = 0

    # -- receiving -------------------------------------------------------------------------------------------
    def receive(
        self, message: Any, headers: dict[str, str] | None = None, spans: int | None = None, raw: bytes | None = None
    ) -> bool:
        """Count ``message`` and queue it for the file.

        ``message``: an ``ExportTraceServiceRequest``, its serialized bytes (decoded by :func:`decode_request`,
        which raises on malformed bytes), or what :func:`decode_request` returned with its count as ``spans``
        (the receivers decode first, to answer a malformed request with an error), then with the bytes it was
        decoded from as ``raw`` (what a protobuf output holds). ``headers``: the request's
        gRPC metadata or HTTP headers (lower-case names), kept as :attr:`last_headers` (tests check that the
        standard header variables arrive).

        Returns once the request's line is written to the file (``write`` returned: a SIGKILL of the receiver
        cannot lose it), ``True``; the receiver acknowledges the request only then. ``False`` (nothing counted
        or queued) once :meth:`stop` closed the writer, or when the line could not be written: the receiver
        must then refuse the request so the sender keeps the spans (a keep-alive HTTP connection outlives the
        listening socket).
        """
        if isinstance(message, (bytes, bytearray, memoryview)):
            raw = bytes(message)
            message, spans = decode_request(raw)
        n = _count_spans(message) if spans is None else spans
        if headers is not None:
            self.last_headers = headers
        pending = _Pending(message, n, raw)
        with self._lock:
            while (
                self.spans_received - self.spans_written - self.spans_failed > self._max_pending
                and self.out is not None
            ):
                if self._closed:
                    break
                self._lock.wait(0.5)  # back-pressure: the sender waits for the writer, nothing is dropped
            if self._closed:
                return False
            self.spans_received += n
            self.requests_received += 1
            if self.keep:
                self.messages.append(message)
            self._lock.notify_all()
            self._queue.put(pending)  # under the lock: never behind the writer's end marker
        pending.done.wait()  # acknowledged means written: the OS has the line when the sender hears "ok"
        return pending.ok

    def note_problem(self, kind: str) -> bool:
        """Count one request that failed for ``kind``; whether it is the first of its kind (to be logged)."""
        with self._lock:
            n = self.problems.get(kind, 0) + 1
            self.problems[kind] = n
        if n == 1 and kind.startswith("client went away"):
            logger.warning("launchtrace collect: a %s; more are counted, not logged", kind)
        return n == 1

    def refusal(self) -> str:
        """Why :meth:`receive` refused a request, for the sender."""
        if self._closed:
            return "launchtrace collect is shutting down"
        return f"launchtrace collect could not write to {self.out}"

    def wait_for_spans(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until at least ``count`` spans were received; whether they were."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.spans_received < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def spans(self) -> list[Any]:
        """Every span kept so far as :class:`~launchtrace.spans.SpanData` (needs ``keep=True``)."""
        from launchtrace.otlp.proto_decode import spans_from_message

        out: list[Any] = []
        with self._lock:
            messages = list(self.messages)
        for m in messages:
            spans, problems = spans_from_message(m, where="collector")
            if problems:
                raise ValueError(f"received spans that do not decode: {problems[:3]}")
            out.extend(spans)
        return out

    # -- writing ---------------------------------------------------------------------------------------------
    def _writer(self) -> None:
        unsynced = 0  # bytes written since the syncer was last woken
        while True:
            pending = self._queue.get()
            if pending is None:
                break
            if self._file is not None:
                try:
                    line = self._record(pending)
                    if self._gzip:  # one gzip member per request: the file stays a valid gzip stream
                        line = gzip.compress(line, compresslevel=6, mtime=0)
                    write_whole(self._file.fileno(), line)  # to the OS now: the receiver acknowledges after this
                    unsynced += len(line)
                    if unsynced >= _SYNC_EVERY_BYTES:
                        self._sync_wanted.set()
                        unsynced = 0
                except Exception as exc:  # the writer must outlive any one request
                    self.write_errors += 1
                    pending.ok = False
                    logger.error(
                        "launchtrace collect: could not write %d spans to %s: %s", pending.spans, self.out, exc
                    )
            with self._lock:
                if pending.ok:
                    self.spans_written += pending.spans
                else:  # not in the file (the sender was told so and keeps them): never counted as written
                    self.spans_failed += pending.spans
                self._lock.notify_all()
            pending.done.set()

    def _record(self, pending: _Pending) -> bytes:
        """What the file gets for one request: its protobuf as received behind its length, or its JSON line."""
        if not self._protobuf:
            return message_to_json_line(pending.request)
        raw = pending.raw if pending.raw is not None else pending.request.SerializeToString()
        return _LENGTH.pack(len(raw)) + raw if raw else b""  # an empty request holds nothing (and 0 ends a file)

    def _syncer(self, fd: int) -> None:
        """``fdatasync`` the file whenever the writer says another 8 MiB were written, until stop() says done.

        Why: the file reaches the disk while requests still arrive, so the ``fsync`` in :meth:`stop` has
        little left to do (it was a third of ``collect``'s time until written: 122 MB of JSON per 50,000
        launch spans). Its own thread: the writer never waits for the disk.
        """
        while True:
            self._sync_wanted.wait()
            self._sync_wanted.clear()
            if self._sync_done:
                return
            try:
                os.fdatasync(fd)
            except OSError as exc:  # the final fsync reports for good; this one only hurries it along
                logger.debug("launchtrace collect: fdatasync %s: %s", self.out, exc)
                return

    def wait_written(self, timeout: float = 10.0) -> bool:
        """Wait until everything received so far is in the file."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.spans_written + self.spans_failed < self.spans_received:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> Collector:
        """Bind the ports, start serving and writing; raises ``OSError`` when a port cannot be bound."""
        _warm_decoders()
        if self.out is not None:
            from launchtrace.export.fileopen import drop_partial_last_line, open_append

            fd = open_append(self.out, readable=True)  # no symbolic link, no other user's file
            try:
                _check_format(self.out, self._protobuf)
            except OSError:
                os.close(fd)
                raise
            try:
                if self._protobuf and not self._gzip:
                    drop_partial_last_message(fd, self.out)  # what a crash or a full disk left before this collect
                elif not self._gzip:
                    drop_partial_last_line(fd, self.out)
            except OSError as exc:
                logger.debug("launchtrace collect: cannot check the end of %s: %s", self.out, exc)
            self._file = os.fdopen(fd, "ab", buffering=0)  # closed in stop()
        writer = threading.Thread(target=self._writer, name="launchtrace-collect-writer", daemon=True)
        writer.start()
        self._threads.append(writer)
        if self._file is not None and hasattr(os, "fdatasync"):
            self._sync_thread = threading.Thread(
                target=self._syncer, args=(self._file.fileno(),), name="launchtrace-collect-sync", daemon=True
            )
            self._sync_thread.start()
        try:
            if self._want_grpc is not None:
                self._start_grpc(self._want_grpc)
            if self._want_http is not None:
                self._start_http(self._want_http)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_grpc(self, port: int) -> None:
        import grpc

        if port:
            _check_free(self.host, port)  # grpc would log its own multi-line complaint to stderr
        collector = self

        def export(raw: bytes, context: Any) -> bytes:
            # the request as bytes (no deserializer): parsed here, kept as received for a protobuf output
            try:
                request, n = decode_request(raw)
            except Exception as exc:  # any undecodable request is the sender's error
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"cannot decode the request: {exc}")
            metadata = {k.lower(): v for k, v in context.invocation_metadata() if isinstance(v, str)}
            if not collector.receive(request, metadata, n, raw):
                context.abort(grpc.StatusCode.UNAVAILABLE, collector.refusal())
            return _EMPTY_RESPONSE

        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="launchtrace-collect-grpc"),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        method = grpc.unary_unary_rpc_method_handler(export)  # no (de)serializers: bytes in, bytes out
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_TRACE_SERVICE, {"Export": method}),))
        try:
            bound = server.add_insecure_port(f"{self.host}:{port}")
        except RuntimeError:  # grpcio >= 1.60 raises where older versions returned 0
            bound = 0
        if bound == 0:
            raise OSError(f"cannot listen for OTLP/gRPC on {self.host}:{port} (port in use?)")
        server.start()
        self._grpc_server = server
        self.grpc_port = bound

    def _start_http(self, port: int) -> None:
        handler = _http_handler(self)
        try:
            server = _HttpServer((self.host, port), handler)
        except OSError as exc:
            raise OSError(f"cannot listen for OTLP/HTTP on {self.host}:{port}: {exc.strerror}") from None
        server.collector = self
        self._http_server = server
        self.http_port = server.server_address[1]
        t = threading.Thread(target=server.serve_forever, name="launchtrace-collect-http", daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, grace: float = 5.0) -> None:
        """Stop receiving (requests in flight get ``grace`` seconds), write everything queued, fsync, close."""
        if self._stopped:
            return
        self._stopped = True
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
        if self._grpc_server is not None:
            self._grpc_server.stop(grace).wait()
        with self._lock:
            self._closed = True
            self._queue.put(None)
            self._lock.notify_all()
        for t in self._threads:
            t.join()
        if self._sync_thread is not None:  # before the file is closed under it
            self._sync_done = True
            self._sync_wanted.set()
            self._sync_thread.join()
        if self._file is not None:
            try:
                os.fsync(self._file.fileno())
            finally:
                self._file.close()
                self._file = None

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _check_format(out: str, protobuf: bool) -> None:
    """Raise ``OSError`` when ``out`` already holds spans in the other format than its name asks for (JSON Lines
    in a ``.pb`` file, protobuf in a ``.jsonl``): appending would leave a file no reader takes whole."""
    from launchtrace.sources.sniff import span_file_kind

    kind = span_file_kind(out)
    if kind in ("json", "protobuf") and (kind == "protobuf") != protobuf:
        want = "length-prefixed protobuf" if protobuf else "JSON Lines"
        raise OSError(f"{out} holds {kind} spans; its name asks for {want}: pick a name that matches")


def drop_partial_last_message(fd: int, name: str) -> int:
    """Truncate a length-prefixed protobuf file that ends in part of a message (a writer killed or out of space
    in the middle of one) back to its last whole message; the bytes dropped, said once in a warning. A file
    whose lengths do not frame it is left as it is (the reader names what is wrong with it)."""
    size = os.fstat(fd).st_size
    end = 0
    while end + _LENGTH.size <= size:
        (length,) = _LENGTH.unpack(os.pread(fd, _LENGTH.size, end))
        if length == 0 or end + _LENGTH.size + length > size:
            break
        end += _LENGTH.size + length
    if end == size or (end + _LENGTH.size <= size and length == 0):
        return 0
    os.ftruncate(fd, end)
    logger.warning("launchtrace collect: %s ended in part of a message: dropped its last %d bytes", name, size - end)
    return size - end


def _check_free(host: str, port: int) -> None:
    """Raise ``OSError`` naming ``host:port`` if it cannot be bound right now."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}: {exc.strerror}") from None


_CONTENT_TYPES = {"application/x-protobuf": "proto", "application/protobuf": "proto", "application/json": "json"}
_GZIP_WBITS = 31
_ZLIB_WBITS = 15
_INFLATE_STEP = 1 << 20


class BodyTooLarge(ValueError):
    """A request body (as sent, or inflated) over :data:`MAX_MESSAGE_BYTES`."""


def inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` decoded from ``gzip`` (every member) or ``deflate`` (zlib), never more than ``limit`` bytes.

    Raises :class:`BodyTooLarge` as soon as the output passes ``limit`` (a 2 MB bomb inflating to 2 GB costs
    ``limit`` bytes, not 2 GB), ``zlib.error`` / ``ValueError`` for damaged or truncated data.
    """
    wbits = _GZIP_WBITS if encoding == "gzip" else _ZLIB_WBITS
    out: list[bytes] = []
    total = 0
    data = body
    d = zlib.decompressobj(wbits)
    while True:
        piece = d.decompress(data, min(_INFLATE_STEP, limit + 1 - total))  # in steps: no one buffer of `limit`
        total += len(piece)
        if total > limit:
            raise BodyTooLarge(f"the {encoding} body inflates to more than {limit} bytes")
        out.append(piece)
        data = d.unconsumed_tail
        if d.eof:
            data = d.unused_data
            if encoding != "gzip" or not data:
                break
            d = zlib.decompressobj(wbits)  # another gzip member
        elif not data:
            raise ValueError(f"the {encoding} body is truncated")
    return b"".join(out)


class _HttpServer(http.server.ThreadingHTTPServer):
    """The standard library's threading server with a listen backlog for bursts and daemon handler threads.

    ``request_queue_size`` is ``listen()``'s backlog: the default 5 reset 91 of 200 senders connecting at once.
    Each connection gets a thread, which ends when the connection has been idle for the handler's ``timeout``,
    so idle connections cost threads only that long. Why the standard library and not a server package: with
    these two settings and the handler's own body reading (lengths checked before reading, chunked bodies,
    bounded inflation) it takes the bursts and hostile clients of ``tests/test_hostile_collect.py``; OTLP
    senders hold few connections each, so a thread per connection is not the limit.
    """

    request_queue_size = 1024
    daemon_threads = True
    block_on_close = False
    collector: Collector | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (reset, broken pipe, timed out) is counted by kind and said once per kind, not
        printed as a 20-line traceback per connection (3,000 early disconnects made 67,816 lines of stderr)."""
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError) and self.collector is not None:
            self.collector.note_problem(f"client went away ({type(exc).__name__})")
            return
        super().handle_error(request, client_address)


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _http_handler(collector: Collector) -> type[http.server.BaseHTTPRequestHandler]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "launchtrace-collect"
        timeout = collector.idle_timeout  # per socket read: an idle or stalled connection ends its thread

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("launchtrace collect http: " + format, *args)

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: int, message: str) -> None:
            if collector.note_problem(f"rejected with {status}"):
                logger.warning(
                    "launchtrace collect: rejected %s from %s: %s (more are counted, not logged)",
                    self.path,
                    self.client_address[0],
                    message,
                )
            self._reply(status, message.encode() + b"\n", "text/plain; charset=utf-8")

        def _read_body(self) -> bytes:
            """The body as sent (``Content-Length`` or chunked), never more than the limit; raises _BadRequest."""
            limit = MAX_MESSAGE_BYTES
            coding = (self.headers.get("Transfer-Encoding") or "").strip().lower()
            if coding:
                if coding != "chunked":
                    raise _BadRequest(501, f"Transfer-Encoding {coding!r} is not supported (chunked is)")
                return self._read_chunked(limit)
            lengths = self.headers.get_all("Content-Length") or []
            if not lengths:
                return b""
            text = lengths[0].strip()
            if len(set(lengths)) > 1 or not (text.isascii() and text.isdigit()):
                raise _BadRequest(400, f"Content-Length {', '.join(lengths)!r} is not a byte count")
            length = int(text)
            if length > limit:
                raise _BadRequest(413, f"body of {length} bytes is over {limit}")
            body = self.rfile.read(length)
            if len(body) < length:
                raise _BadRequest(400, f"body ended after {len(body)} of {length} bytes")
            return body

        def _read_chunked(self, limit: int) -> bytes:
            parts: list[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(1026)
                size_text = line.split(b";", 1)[0].strip()
                if not line.endswith(b"\n") or not size_text or len(size_text) > 16:
                    raise _BadRequest(400, "malformed chunk size line")
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise _BadRequest(400, f"chunk size {size_text[:20]!r} is not hex") from None
                if size < 0 or size_text[:1] in (b"+", b"-"):
                    raise _BadRequest(400, f"chunk size {size_text[:20]!r} is not hex")
                if size == 0:
                    for _ in range(64):  # trailer fields, then the blank line
                        if self.rfile.readline(8192).strip() == b"":
                            return b"".join(parts)
                    raise _BadRequest(400, "too many chunked trailer lines")
                total += size
                if total > limit:
                    raise _BadRequest(413, f"chunked body is over {limit} bytes")
                data = self.rfile.read(size)
                if len(data) < size or self.rfile.read(2) != b"\r\n":
                    raise _BadRequest(400, "chunked body ended in a chunk")
                parts.append(data)

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/traces":
                self.close_connection = True  # the body is not read
                self._error(404, f"{self.path}: only /v1/traces is served")
                return
            try:
                body = self._read_body()
            except _BadRequest as exc:
                self.close_connection = True  # what is left of the body cannot be framed: end the connection
                self._error(exc.status, str(exc))
                return
            kind = _CONTENT_TYPES.get((self.headers.get("Content-Type") or "").split(";")[0].strip().lower())
            if kind is None:
                self._error(415, f"Content-Type {self.headers.get('Content-Type')!r} is not OTLP")
                return
            encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding not in ("identity", "gzip", "deflate"):
                self._error(415, f"Content-Encoding {encoding!r} is not supported")
                return
            try:
                if encoding != "identity":
                    body = inflate(body, encoding, MAX_MESSAGE_BYTES)
                raw = body if kind == "proto" else None
                if raw is not None:
                    message, n = decode_request(raw)
                else:
                    message = _parse_json_request(body)
                    n = _count_spans(message)
            except BodyTooLarge as exc:
                self._error(413, str(exc))
                return
            except Exception as exc:  # any undecodable body is the sender's error: answer 400
                self._error(400, f"cannot decode the {kind} body: {exc}")
                return
            del body
            if not collector.receive(message, {k.lower(): v for k, v in self.headers.items()}, n, raw):
                self.close_connection = True
                self._error(503, collector.refusal())
                return
            response = ExportTraceServiceResponse()
            if kind == "proto":
                self._reply(200, response.SerializeToString(), "application/x-protobuf")
            else:
                self._reply(200, b"{}", "application/json")

    return Handler
