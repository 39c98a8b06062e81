"""OTLP protobuf bytes -> :class:`~launchtrace.spans.SpanData`, through the opentelemetry-proto messages.

Reads a ``TracesData`` or an ``ExportTraceServiceRequest`` (the two are wire-identical: field 1 is
``repeated ResourceSpans``), which is also what Tempo answers with ``Accept: application/protobuf``, and the
Collector's file exporter ``format: proto`` form, where each message is prefixed by its length as a 4-byte
big-endian integer. Like the JSON decoder it reports problems instead of raising.

Example::

    from launchtrace.otlp.proto_decode import decode_traces_bytes
    spans, problems = decode_traces_bytes(body, where="http://tempo:3200/api/traces/5b8e...")
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace.otlp.ids import SPAN_ID_BYTES, TRACE_ID_BYTES
from launchtrace.otlp.problems import Problem
from launchtrace.spans import SpanData, SpanEvent, SpanLink

__all__ = ["MAX_MESSAGE_BYTES", "decode_traces_bytes", "iter_length_prefixed", "spans_from_message"]

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""A length prefix beyond this is taken as garbage, not as a message to allocate."""

_LENGTH = struct.Struct(">I")


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "bool_value":
        return v.bool_value
    if which == "double_value":
        return v.double_value
    if which == "bytes_value":
        return bytes(v.bytes_value)
    if which == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    if which == "kvlist_value":
        return dict(_attrs(v.kvlist_value.values))
    return None


def _attrs(kvs) -> tuple:
    return tuple((kv.key, _value(kv.value)) for kv in kvs)


def _check_ids(trace_id: bytes, span_id: bytes, what: str) -> str | None:
    if len(trace_id) != TRACE_ID_BYTES or not any(trace_id):
        return f"{what} trace id {trace_id.hex()!r} is not 16 non-zero bytes"
    if len(span_id) != SPAN_ID_BYTES or not any(span_id):
        return f"{what} span id {span_id.hex()!r} is not 8 non-zero bytes"
    return None


MAX_BAD_RUN = 10_000
"""Spans skipped in a row after which the rest of a scope's list is skipped unread, in one problem (the same cap
as :data:`launchtrace.otlp.json_codec.MAX_BAD_RUN`)."""


def spans_from_message(msg: TracesData, *, where: str = "") -> tuple[list[SpanData], list[Problem]]:
    """The spans of a parsed ``TracesData`` message; spans with bad ids or enums are skipped with a problem."""
    spans: list[SpanData] = []
    problems: list[Problem] = []
    for r, rs in enumerate(msg.resource_spans):
        resource = _attrs(rs.resource.attributes)
        for s, ss in enumerate(rs.scope_spans):
            scope_attrs = _attrs(ss.scope.attributes)
            bad_run = 0  # spans skipped in a row: past MAX_BAD_RUN the rest of the list is skipped unread
            for i, sp in enumerate(ss.spans):
                path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                if bad_run >= MAX_BAD_RUN:
                    rest = len(ss.spans) - i
                    msg = f"{path}: {rest} more spans skipped unread after {MAX_BAD_RUN} in a row were not spans"
                    problems.append(Problem(where, msg, skipped=rest))
                    break
                bad = _check_ids(sp.trace_id, sp.span_id, "span")
                if bad is None and sp.parent_span_id and len(sp.parent_span_id) != SPAN_ID_BYTES:
                    bad = f"parent span id {sp.parent_span_id.hex()!r} is not 8 bytes"
                if bad is None and not 0 <= sp.kind <= 5:
                    bad = f"unknown span kind {sp.kind}"
                if bad is None and not 0 <= sp.status.code <= 2:
                    bad = f"unknown status code {sp.status.code}"
                if bad is not None:
                    bad_run += 1
                    problems.append(Problem(where, f"{path}: span skipped: {bad}", skipped=1))
                    continue
                bad_run = 0
                links = []
                for k, ln in enumerate(sp.links):
                    bad_link = _check_ids(ln.trace_id, ln.span_id, "link")
                    if bad_link is not None:
                        problems.append(Problem(where, f"{path}: link {k} dropped: {bad_link}"))
                        continue
                    links.append(
                        SpanLink(
                            ln.trace_id,
                            ln.span_id,
                            _attrs(ln.attributes),
                            ln.trace_state,
                            ln.flags,
                            ln.dropped_attributes_count,
                        )
                    )
                events = tuple(
                    SpanEvent(e.name, e.time_unix_nano, _attrs(e.attributes), e.dropped_attributes_count)
                    for e in sp.events
                )
                spans.append(
                    SpanData(
                        sp.trace_id,
                        sp.span_id,
                        sp.parent_span_id or None,
                        sp.name,
                        sp.start_time_unix_nano,
                        sp.end_time_unix_nano,
                        _attrs(sp.attributes),
                        sp.kind,
                        sp.status.code,
                        sp.status.message,
                        events,
                        tuple(links),
                        sp.trace_state,
                        sp.flags,
                        sp.dropped_attributes_count,
                        sp.dropped_events_count,
                        sp.dropped_links_count,
                        resource,
                        rs.schema_url,
                        ss.scope.name,
                        ss.scope.version,
                        scope_attrs,
                        ss.schema_url,
                    )
                )
    return spans, problems


def decode_traces_bytes(data: bytes, *, where: str = "") -> tuple[list[SpanData], list[Problem]]:
    """The spans of serialised ``TracesData`` / ``ExportTraceServiceRequest`` bytes, and what was wrong."""
    msg = TracesData()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        return [], [Problem(where, f"not an OTLP protobuf TracesData ({len(data)} bytes): {exc}")]
    return spans_from_message(msg, where=where)


def iter_length_prefixed(stream: BinaryIO, *, name: str = "") -> Iterator[tuple[int, bytes | Problem]]:
    """``(offset, message bytes)`` for each message of a length-prefixed stream (4-byte big-endian lengths).

    ``name`` (the file) starts the ``where`` of a problem: ``"spans.pb:byte 1200"``.
    A truncated, zero or absurd length ends the stream with one ``(offset, Problem)``: after a bad prefix
    nothing later can be framed safely. Reads one message at a time, so memory stays flat.
    """
    offset = 0
    while True:
        head = stream.read(4)
        if not head:
            return
        if len(head) < 4:
            yield offset, Problem(f"{name}:byte {offset}", f"truncated length prefix ({len(head)} of 4 bytes)")
            return
        (size,) = _LENGTH.unpack(head)
        if size == 0:  # no exporter frames nothing; a run of these is zeros (/dev/zero looped here forever)
            yield offset, Problem(f"{name}:byte {offset}", "length 0: an empty message; not this format?")
            return
        if size > MAX_MESSAGE_BYTES:
            yield offset, Problem(f"{name}:byte {offset}", f"length prefix {size} is not plausible; not this format?")
            return
        body = stream.read(size)
        if len(body) < size:
            yield offset, Problem(f"{name}:byte {offset}", f"truncated message: {len(body)} of {size} bytes")
            return
        yield offset, body
        offset += 4 + size
