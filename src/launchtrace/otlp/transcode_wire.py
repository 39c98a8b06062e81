"""Serialized OTLP traces -> one OTLP JSON Lines line, by walking the protobuf wire format.

``launchtrace collect`` writes every request it receives as JSON. Walking the parsed message costs one
Python object per attribute (about 1 us each through upb, 30 per launch span), which made the writer the
receiver's bottleneck. This walks the request's bytes instead: the span fields are read in place, and each
attribute's bytes are looked up in a cache of their JSON (launch spans repeat most of their attributes), so
an attribute costs one slice and one dictionary lookup. Everything rare (resources, scopes, events, links,
status, attribute cache misses) is still converted by ``json_format`` through the caller's caches.

The walk handles exactly the canonical form a protobuf library writes for the fields of OTLP's ``Span``:
any unknown field, unexpected wire type, repeated singular field (protobuf would merge it) or length that
does not add up returns ``None``, and the caller converts that message the slow way. ``tests/test_collect.py``
checks over random spans that the line loads to the same value as ``json_format``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

__all__ = ["wire_line"]

Converter = Callable[[bytes, Any], bytes]  # (serialized sub-message, its class) -> its JSON, cached
Attributes = Callable[[list[bytes]], list[bytes]]  # serialized KeyValues -> their JSON, cached


class _Unhandled(Exception):
    """The bytes hold something the walk does not handle: convert the message the slow way."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """The varint at ``buf[i]`` and the index after it."""
    result = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise _Unhandled
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, bytes]]:
    """``(tag, payload)`` of every length-delimited field of a message (any other wire type: unhandled)."""
    out = []
    i, end = 0, len(buf)
    while i < end:
        tag = buf[i]
        if tag & 7 != 2 or tag >= 0x80:
            raise _Unhandled
        n = buf[i + 1] if i + 1 < end else 0x80
        if n < 0x80:
            i += 2
        else:
            n, i = _varint(buf, i + 1)
        if i + n > end:
            raise _Unhandled
        out.append((tag, buf[i : i + n]))
        i += n
    return out


def _text(raw: bytes) -> bytes:
    return orjson.dumps(raw.decode("utf-8"))


def _to_dict(message: Any) -> dict:
    return json_format.MessageToDict(message, use_integers_for_enums=True)


def _hex_ids(d: dict) -> dict:
    import base64

    for key in ("traceId", "spanId", "parentSpanId"):
        if d.get(key):
            d[key] = base64.b64decode(d[key]).hex()
    return d


def _span(buf: bytes, attributes: Attributes) -> bytes:
    """One span's JSON, fields in ``json_format``'s order of meaning, defaults left out as it does."""
    trace_id = span_id = trace_state = parent = name = status = None
    kind = start = end = flags = dropped_attrs = dropped_events = dropped_links = None
    attrs: list[bytes] = []
    events: list[bytes] = []
    links: list[bytes] = []
    i, stop = 0, len(buf)
    while i < stop:
        tag = buf[i]
        i += 1
        if tag == 0x4A:  # the attributes, one after another: most of a launch span, read in a tight loop
            while True:
                n = buf[i]
                if n < 0x80:
                    i += 1
                else:
                    n, i = _varint(buf, i)
                attrs.append(buf[i : i + n])
                i += n
                if i >= stop or buf[i] != 0x4A:
                    break
                i += 1
            if i > stop:
                raise _Unhandled
        elif tag & 7 == 2:  # length-delimited
            n = buf[i] if i < stop else 0x80
            if n < 0x80:
                i += 1
            else:
                n, i = _varint(buf, i)
            if i + n > stop:
                raise _Unhandled
            payload = buf[i : i + n]
            i += n
            if tag == 0x0A and trace_id is None:
                trace_id = payload
            elif tag == 0x12 and span_id is None:
                span_id = payload
            elif tag == 0x22 and parent is None:
                parent = payload
            elif tag == 0x2A and name is None:
                name = payload
            elif tag == 0x1A and trace_state is None:
                trace_state = payload
            elif tag == 0x5A:
                events.append(payload)
            elif tag == 0x6A:
                links.append(payload)
            elif tag == 0x7A and status is None:
                status = payload
            else:
                raise _Unhandled
        elif tag == 0x39 and start is None and i + 8 <= stop:
            start = int.from_bytes(buf[i : i + 8], "little")
            i += 8
        elif tag == 0x41 and end is None and i + 8 <= stop:
            end = int.from_bytes(buf[i : i + 8], "little")
            i += 8
        elif tag == 0x30 and kind is None:
            kind, i = _varint(buf, i)
        elif tag == 0x50 and dropped_attrs is None:
            dropped_attrs, i = _varint(buf, i)
        elif tag == 0x60 and dropped_events is None:
            dropped_events, i = _varint(buf, i)
        elif tag == 0x70 and dropped_links is None:
            dropped_links, i = _varint(buf, i)
        elif tag == 0x85 and flags is None and i + 5 <= stop and buf[i] == 0x01:  # field 16, fixed32
            flags = int.from_bytes(buf[i + 1 : i + 5], "little")
            i += 5
        else:
            raise _Unhandled
    if i != stop or (kind is not None and kind > 0x7FFFFFFF):
        raise _Unhandled  # a negative enum value: let json_format decide
    out = []
    if trace_id:
        out.append(b'"traceId":"%s"' % trace_id.hex().encode())
    if span_id:
        out.append(b'"spanId":"%s"' % span_id.hex().encode())
    if trace_state:
        out.append(b'"traceState":' + _text(trace_state))
    if parent:
        out.append(b'"parentSpanId":"%s"' % parent.hex().encode())
    if flags:
        out.append(b'"flags":%d' % flags)
    if name:
        out.append(b'"name":' + _text(name))
    if kind:
        out.append(b'"kind":%d' % kind)
    if start:
        out.append(b'"startTimeUnixNano":"%d"' % start)
    if end:
        out.append(b'"endTimeUnixNano":"%d"' % end)
    if attrs:
        out.append(b'"attributes":[' + b",".join(attributes(attrs)) + b"]")
    if dropped_attrs:
        out.append(b'"droppedAttributesCount":%d' % dropped_attrs)
    if events:
        out.append(b'"events":' + orjson.dumps([_to_dict(Span.Event.FromString(e)) for e in events]))
    if dropped_events:
        out.append(b'"droppedEventsCount":%d' % dropped_events)
    if links:
        out.append(b'"links":' + orjson.dumps([_hex_ids(_to_dict(Span.Link.FromString(k))) for k in links]))
    if dropped_links:
        out.append(b'"droppedLinksCount":%d' % dropped_links)
    if status is not None:
        out.append(b'"status":' + orjson.dumps(_to_dict(Status.FromString(status))))
    return b"{" + b",".join(out) + b"}"


def _once(fields: list[tuple[int, bytes]], tag: int) -> bytes | None:
    """The payload of singular field ``tag`` (``None`` when absent; twice: protobuf merges, unhandled)."""
    found = [payload for t, payload in fields if t == tag]
    if len(found) > 1:
        raise _Unhandled
    return found[0] if found else None


def _group(
    buf: bytes, head: bytes, head_cls: Any, items: bytes, item: Callable[[bytes], bytes], block: Converter
) -> bytes:
    """``ResourceSpans`` / ``ScopeSpans``: the same shape, field 1 its resource or scope (a cached block), field
    2 the repeated items inside, field 3 ``schemaUrl``."""
    fields = _fields(buf)
    if any(t not in (0x0A, 0x12, 0x1A) for t, _ in fields):
        raise _Unhandled
    parts = []
    first = _once(fields, 0x0A)
    if first is not None:
        parts.append(head + block(first, head_cls))
    inner = [payload for t, payload in fields if t == 0x12]
    if inner:
        parts.append(items + b",".join([item(x) for x in inner]) + b"]")
    schema_url = _once(fields, 0x1A)
    if schema_url:
        parts.append(b'"schemaUrl":' + _text(schema_url))
    return b"{" + b",".join(parts) + b"}"


def _resource_spans(buf: bytes, attributes: Attributes, block: Converter) -> bytes:
    def scope_spans(ss: bytes) -> bytes:
        return _group(ss, b'"scope":', InstrumentationScope, b'"spans":[', lambda s: _span(s, attributes), block)

    return _group(buf, b'"resource":', Resource, b'"scopeSpans":[', scope_spans, block)


def wire_line(raw: bytes, attributes: Attributes, block: Converter) -> bytes | None:
    """The JSON line (with its newline) of the serialized ``TracesData`` / request ``raw``, or ``None``.

    ``attributes([kv_bytes, ...])`` and ``block(bytes, Resource | InstrumentationScope)`` give the JSON of
    those sub-messages (the caller caches them). ``None``: the bytes hold something this walk leaves to
    ``json_format`` (see the module docstring).
    """
    try:
        fields = _fields(raw)
        if any(t != 0x0A for t, _ in fields):
            return None
        body = b",".join([_resource_spans(rs, attributes, block) for rs in (p for _, p in fields)])
    except (_Unhandled, IndexError, UnicodeDecodeError):
        return None
    return b'{"resourceSpans":[' + body + b"]}\n"
