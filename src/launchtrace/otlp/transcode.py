"""OTLP protobuf messages -> OTLP JSON Lines, for ``launchtrace collect``, exactly as ``json_format`` writes them.

The reference conversion is ``google.protobuf.json_format.MessageToDict`` (integer enums) with ids turned
from base64 into hex, as the OTLP/JSON specification asks: :func:`reference_line`. It walks every field in
Python and costs several times what receiving the span did, so a receiver fed by a fast exporter falls
behind. :func:`json_line` gives the same JSON with the span level written by hand and everything below it
(attributes, resources, scopes) converted once per distinct serialized form by the reference itself and
cached: identical bytes make identical JSON. Events, links and status go through the reference each time
(they are rare). ``tests/test_collect.py`` checks over random spans that both load to the same value.

``launchtrace collect`` writes its JSON Lines output with it (an output named ``.pb`` gets the protobuf as
received instead, and needs no conversion); ``tests/test_transcode.py`` checks it against :func:`reference_line`
over generated requests.

Example::

    from launchtrace.otlp.transcode import json_line
    line = json_line(request)  # b'{"resourceSpans":[...]}\\n'
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from google.protobuf import json_format

from launchtrace.otlp.jsonkeys import (
    LINKS,
    PARENT_SPAN_ID,
    RESOURCE_SPANS,
    SCOPE_SPANS,
    SPAN_ID,
    SPANS,
    TRACE_ID,
    keyed,
)

__all__ = ["json_line", "reference_line"]

_CACHE_LIMIT = 1 << 16

# the JSON fragments written by hand, their keys from the field table (jsonkeys), built once
_STRING_VALUE = keyed('{"<STRING_VALUE>":')
_INT_VALUE = keyed('{"<INT_VALUE>":"%d"}')
_TRUE, _FALSE = keyed('{"<BOOL_VALUE>":true}'), keyed('{"<BOOL_VALUE>":false}')
_DOUBLE_VALUE = keyed('{"<DOUBLE_VALUE>":')
_KEY, _VALUE = keyed('{"<KEY>":'), keyed(',"<VALUE>":')
_TRACE_ID, _SPAN_ID = keyed('"<TRACE_ID>":"%s"'), keyed('"<SPAN_ID>":"%s"')
_TRACE_STATE, _PARENT_SPAN_ID = keyed('"<TRACE_STATE>":'), keyed('"<PARENT_SPAN_ID>":"%s"')
_FLAGS, _NAME, _KIND = keyed('"<FLAGS>":%d'), keyed('"<NAME>":'), keyed('"<KIND>":%d')
_START, _END = keyed('"<START_TIME_UNIX_NANO>":"%d"'), keyed('"<END_TIME_UNIX_NANO>":"%d"')
_ATTRIBUTES, _DROPPED_ATTRIBUTES = keyed('"<ATTRIBUTES>":['), keyed('"<DROPPED_ATTRIBUTES_COUNT>":%d')
_EVENTS, _DROPPED_EVENTS = keyed('"<EVENTS>":'), keyed('"<DROPPED_EVENTS_COUNT>":%d')
_LINKS, _DROPPED_LINKS = keyed('"<LINKS>":'), keyed('"<DROPPED_LINKS_COUNT>":%d')
_STATUS = keyed('"<STATUS>":')
_RESOURCE, _SCOPE, _SPANS = keyed('"<RESOURCE>":'), keyed('"<SCOPE>":'), keyed('"<SPANS>":[')
_SCOPE_SPANS, _SCHEMA_URL = keyed('"<SCOPE_SPANS>":['), keyed('"<SCHEMA_URL>":')
_LINE_OPEN = keyed('{"<RESOURCE_SPANS>":[')
_ID_KEYS = (TRACE_ID, SPAN_ID, PARENT_SPAN_ID)
_KNOWN_SPAN_FIELDS = frozenset(
    {
        "trace_id", "span_id", "trace_state", "parent_span_id", "flags", "name", "kind", "start_time_unix_nano",
        "end_time_unix_nano", "attributes", "dropped_attributes_count", "events", "dropped_events_count", "links",
        "dropped_links_count", "status",
    }
)  # fmt: skip


def _to_dict(message: Any) -> dict:
    return json_format.MessageToDict(message, use_integers_for_enums=True)


def _hex_ids(obj: dict) -> dict:
    for key in _ID_KEYS:
        value = obj.get(key)
        if value:
            obj[key] = base64.b64decode(value).hex()
    return obj


def reference_line(message: Any) -> bytes:
    """The line by ``json_format`` alone (the definition :func:`json_line` must match)."""
    d = _to_dict(message)
    for rs in d.get(RESOURCE_SPANS, ()):
        for ss in rs.get(SCOPE_SPANS, ()):
            for span in ss.get(SPANS, ()):
                _hex_ids(span)
                for link in span.get(LINKS, ()):
                    _hex_ids(link)
    d.setdefault(RESOURCE_SPANS, [])
    return orjson.dumps(d) + b"\n"


class _Cache:
    """Serialized sub-message -> its JSON (bytes), bounded."""

    def __init__(self) -> None:
        self._d: dict[bytes, bytes] = {}

    def json_all(self, messages: Any) -> list[bytes]:
        """:meth:`json` of each message (one list comprehension each, no call per message on a hit)."""
        raws = [m.SerializeToString() for m in messages]
        out = list(map(self._d.get, raws))
        if None in out:
            out = [o if o is not None else self.json(m) for o, m in zip(out, messages)]
        return out

    def json(self, message: Any) -> bytes:
        raw = message.SerializeToString()
        out = self._d.get(raw)
        if out is None:
            if len(self._d) > _CACHE_LIMIT:
                self._d.clear()
            out = self._d[raw] = orjson.dumps(_to_dict(message))
        return out


def _scalar_json(v: Any) -> bytes | None:
    """``json_format``'s JSON of an ``AnyValue`` holding a string, bool, int or finite double; else ``None``.

    A launch span's attributes hold a few values that change every launch (its sequence number, a pointer, a
    scalar argument): every one is a cache miss, and ``json_format`` costs more than a launch for one. These
    four kinds are written here as ``json_format`` writes them (int64 as a decimal string, doubles as JSON numbers);
    bytes, arrays, key-value lists, NaN and infinities go to the reference.
    """
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return _STRING_VALUE + orjson.dumps(v.string_value) + b"}"
    if kind == "int_value":
        return _INT_VALUE % v.int_value
    if kind == "bool_value":
        return _TRUE if v.bool_value else _FALSE
    if kind == "double_value":
        x = v.double_value
        if x - x == 0.0:  # finite
            return _DOUBLE_VALUE + orjson.dumps(x) + b"}"
    return None


class _AttributeCache(_Cache):
    """:class:`_Cache` for ``KeyValue`` attributes: a miss on a scalar value is written by hand."""

    def json(self, message: Any) -> bytes:
        raw = message.SerializeToString()
        out = self._d.get(raw)
        if out is None:
            hand = message.key and message.HasField("value") and not message.key_strindex
            value = _scalar_json(message.value) if hand else None
            if value is None:
                out = orjson.dumps(_to_dict(message))
            else:
                out = _KEY + orjson.dumps(message.key) + _VALUE + value + b"}"
            if len(self._d) > _CACHE_LIMIT:
                self._d.clear()
            self._d[raw] = out
        return out


_attrs = _AttributeCache()
_blocks = _Cache()


def _span(s: Any) -> bytes:
    out = []
    if s.trace_id:
        out.append(_TRACE_ID % s.trace_id.hex().encode())
    if s.span_id:
        out.append(_SPAN_ID % s.span_id.hex().encode())
    if s.trace_state:
        out.append(_TRACE_STATE + orjson.dumps(s.trace_state))
    if s.parent_span_id:
        out.append(_PARENT_SPAN_ID % s.parent_span_id.hex().encode())
    if s.flags:
        out.append(_FLAGS % s.flags)
    if s.name:
        out.append(_NAME + orjson.dumps(s.name))
    if s.kind:
        out.append(_KIND % s.kind)
    if s.start_time_unix_nano:
        out.append(_START % s.start_time_unix_nano)
    if s.end_time_unix_nano:
        out.append(_END % s.end_time_unix_nano)
    if s.attributes:
        out.append(_ATTRIBUTES + b",".join(_attrs.json_all(s.attributes)) + b"]")
    if s.dropped_attributes_count:
        out.append(_DROPPED_ATTRIBUTES % s.dropped_attributes_count)
    if s.events:
        out.append(_EVENTS + orjson.dumps([_to_dict(e) for e in s.events]))
    if s.dropped_events_count:
        out.append(_DROPPED_EVENTS % s.dropped_events_count)
    if s.links:
        out.append(_LINKS + orjson.dumps([_hex_ids(_to_dict(k)) for k in s.links]))
    if s.dropped_links_count:
        out.append(_DROPPED_LINKS % s.dropped_links_count)
    if s.HasField("status"):
        out.append(_STATUS + orjson.dumps(_to_dict(s.status)))
    return b"{" + b",".join(out) + b"}"


def _entry_head(entry: Any, field: str, key: bytes) -> list[bytes]:
    """A resource_spans or scope_spans entry's first field: its resource or scope block, when set."""
    return [key + _blocks.json(getattr(entry, field))] if entry.HasField(field) else []


def _entry_close(fields: list[bytes], schema_url: str) -> bytes:
    """A resource_spans or scope_spans entry's object: its fields, then its schema_url when set."""
    if schema_url:
        fields.append(_SCHEMA_URL + orjson.dumps(schema_url))
    return b"{" + b",".join(fields) + b"}"


def _fast_line(message: Any) -> bytes:
    resource_parts = []
    for rs in message.resource_spans:
        fields = _entry_head(rs, "resource", _RESOURCE)
        if rs.scope_spans:
            scope_parts = []
            for ss in rs.scope_spans:
                sfields = _entry_head(ss, "scope", _SCOPE)
                if ss.spans:
                    sfields.append(_SPANS + b",".join([_span(s) for s in ss.spans]) + b"]")
                scope_parts.append(_entry_close(sfields, ss.schema_url))
            fields.append(_SCOPE_SPANS + b",".join(scope_parts) + b"]")
        resource_parts.append(_entry_close(fields, rs.schema_url))
    return _LINE_OPEN + b",".join(resource_parts) + b"]}\n"


def _span_fields_known() -> bool:
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    return {f.name for f in Span.DESCRIPTOR.fields} <= _KNOWN_SPAN_FIELDS


_FAST = _span_fields_known()  # a newer opentelemetry-proto with new span fields: use the reference


def json_line(message: Any) -> bytes:
    """One OTLP JSON Lines line (with its newline) for a ``TracesData`` / ``ExportTraceServiceRequest``.

    The message walk, else (a newer opentelemetry-proto with span fields it does not know, a value it does not
    write) the reference.
    """
    if not _FAST:
        return reference_line(message)
    try:
        return _fast_line(message)
    except (orjson.JSONEncodeError, ValueError, TypeError):
        return reference_line(message)
