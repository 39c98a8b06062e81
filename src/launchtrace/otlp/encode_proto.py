"""Hand-written OTLP protobuf encoding of :class:`~launchtrace.spans.SpanData`, for speed.

Building ``opentelemetry.proto`` messages in Python costs about as much per span as a kernel launch (the
SDK's own encoder several times more), and the exporter has to keep up with the launches. This module writes
the
protobuf wire format directly and caches what repeats from span to span: the encoded ``KeyValue`` of each
(key, value) pair, whole attribute blocks (by the identity of the attributes tuple), span names, and the
encoded ``Resource`` and ``InstrumentationScope``. The output is the bytes of an
``ExportTraceServiceRequest``, which on the wire is identical to a ``TracesData`` (both are
``repeated ResourceSpans resource_spans = 1``).

``tests/test_encode_proto.py`` checks, over random spans (every attribute value type, nested arrays and
key-value lists, events, links, status, unicode), that the bytes parse to exactly the message built field by
field with the opentelemetry-proto classes.

Conversion rules for attribute values (shared with that reference): ``str``, ``bool``, ``int``, ``float``,
``bytes``, ``tuple``/``list`` (``ArrayValue``, nesting allowed) and ``dict`` (``KvlistValue``) map directly;
an ``int`` outside the signed 64-bit range and any other type (``None``, objects) are written as their
``str()``; lone surrogates in strings are replaced by ``?``. Spans are grouped by equal resource (then equal
instrumentation scope) in order of first appearance, spans keeping their order.

Compiled: ``launchtrace.otlp._protoenc`` (where built, and unless ``LAUNCHTRACE_PURE_PYTHON=1``) writes the
same bytes in C, many times faster (``docs/export.md``, "Encoders"); :class:`ProtoEncoder` uses it when it is
there, and this Python code stays the definition and the fallback. ``tests/test_protoenc_native.py`` checks the two give
identical bytes.

Example::

    from launchtrace.otlp.encode_proto import encode_spans
    payload = encode_spans([span])  # bytes of an ExportTraceServiceRequest / TracesData
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from launchtrace import native
from launchtrace.otlp.attrcache import AttributeBlocks, FieldCache
from launchtrace.otlp.fields import tag
from launchtrace.spans import SpanData

__all__ = ["ProtoEncoder", "encode_spans"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_CACHE_LIMIT = 1 << 16  # entries per cache before it is cleared (bounded memory for unique values)

_pack_q = struct.Struct("<Q").pack
_pack_d = struct.Struct("<d").pack
_pack_i = struct.Struct("<I").pack
_pack_times = struct.Struct("<BQBQ").pack  # start_time_unix_nano and end_time_unix_nano with their tags

_SMALL_VARINTS: tuple[bytes, ...] = tuple(
    bytes([n]) if n < 0x80 else bytes([(n & 0x7F) | 0x80, n >> 7]) for n in range(1 << 14)
)

# The wire keys of every field written below, from the one OTLP field table (launchtrace.otlp.fields)
_STRING, _BOOL, _INT, _DOUBLE, _ARRAY, _KVLIST, _BYTES = (
    tag("AnyValue", f)
    for f in ("string_value", "bool_value", "int_value", "double_value", "array_value", "kvlist_value", "bytes_value")
)
_ARRAY_VALUES, _KVLIST_VALUES = tag("ArrayValue", "values"), tag("KeyValueList", "values")
_KEY, _VALUE = tag("KeyValue", "key"), tag("KeyValue", "value")
_RESOURCE_ATTRS = tag("Resource", "attributes")
_SCOPE_NAME, _SCOPE_VERSION, _SCOPE_ATTRS = (tag("InstrumentationScope", f) for f in ("name", "version", "attributes"))
_EVENT_TIME, _EVENT_NAME, _EVENT_ATTRS, _EVENT_DROPPED = (
    tag("Span.Event", f) for f in ("time_unix_nano", "name", "attributes", "dropped_attributes_count")
)
_LINK_TRACE, _LINK_SPAN, _LINK_STATE, _LINK_ATTRS, _LINK_DROPPED, _LINK_FLAGS = (
    tag("Span.Link", f)
    for f in ("trace_id", "span_id", "trace_state", "attributes", "dropped_attributes_count", "flags")
)
_TRACE_ID, _SPAN_ID, _TRACE_STATE, _PARENT, _NAME, _KIND, _START, _END, _ATTRS, _FLAGS = (
    tag("Span", f)
    for f in (
        "trace_id", "span_id", "trace_state", "parent_span_id", "name", "kind", "start_time_unix_nano",
        "end_time_unix_nano", "attributes", "flags",
    )
)  # fmt: skip
_DROPPED_ATTRS, _EVENTS, _DROPPED_EVENTS, _LINKS, _DROPPED_LINKS, _STATUS = (
    tag("Span", f)
    for f in ("dropped_attributes_count", "events", "dropped_events_count", "links", "dropped_links_count", "status")
)
_STATUS_MESSAGE, _STATUS_CODE = tag("Status", "message"), tag("Status", "code")
_RS_RESOURCE, _RS_SCOPE_SPANS, _RS_SCHEMA_URL = (
    tag("ResourceSpans", f) for f in ("resource", "scope_spans", "schema_url")
)
_SS_SCOPE, _SS_SPANS, _SS_SCHEMA_URL = (tag("ScopeSpans", f) for f in ("scope", "spans", "schema_url"))
_RESOURCE_SPANS = tag("TracesData", "resource_spans")
_TRUE, _FALSE = _BOOL + b"\x01", _BOOL + b"\x00"
_ID_HEADS = _TRACE_ID + b"\x10", _SPAN_ID + b"\x08", _PARENT + b"\x08"  # 16- and 8-byte ids' tag and length
_KINDS = tuple(_KIND + bytes([k]) for k in range(16))  # Span.kind fields


def _varint(n: int) -> bytes:
    """Base-128 varint of a non-negative integer (negative int64 must be given as ``n + 2**64``)."""
    if 0 <= n < 16384:
        return _SMALL_VARINTS[n]
    if n < 0:
        raise ValueError("negative value for an unsigned OTLP field")
    if n >> 64:
        raise OverflowError("value does not fit a 64-bit OTLP field")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # lone surrogates: protobuf strings must be valid UTF-8
        return text.encode("utf-8", "replace")


def _field(tag: bytes, body: bytes) -> bytes:
    """A length-delimited field: tag, length, body."""
    n = len(body)
    return tag + (_SMALL_VARINTS[n] if n < 16384 else _varint(n)) + body


def _any_value(value: Any) -> bytes:
    """The body of an ``AnyValue`` message for ``value`` (see the module docstring for the rules)."""
    t = type(value)
    if t is str:
        return _field(_STRING, _utf8(value))
    if t is bool:
        return _TRUE if value else _FALSE
    if t is int:
        if 0 <= value <= _INT64_MAX:
            return _INT + _varint(value)
        if _INT64_MIN <= value < 0:
            return _INT + _varint(value + (1 << 64))
        return _field(_STRING, str(value).encode())
    if t is float:
        return _DOUBLE + _pack_d(value)
    if t is tuple or t is list:
        return _field(_ARRAY, b"".join([_field(_ARRAY_VALUES, _any_value(v)) for v in value]))
    if t is dict:
        return _field(_KVLIST, b"".join([_field(_KVLIST_VALUES, _key_value(k, v)) for k, v in value.items()]))
    if t is bytes:
        return _field(_BYTES, value)
    # subclasses (numpy scalars, enums) and everything else
    if isinstance(value, bool):
        return _any_value(bool(value))
    if isinstance(value, str):
        return _any_value(str(value))
    if isinstance(value, int):
        return _any_value(int(value))
    if isinstance(value, float):
        return _any_value(float(value))
    if isinstance(value, (tuple, list)):
        return _any_value(tuple(value))
    return _field(_STRING, _utf8(str(value)))


def _key_value(key: str, value: Any) -> bytes:
    """The body of a ``KeyValue`` message."""
    return _field(_KEY, _utf8(str(key))) + _field(_VALUE, _any_value(value))


def _attributes(tag: bytes, attributes: Iterable[tuple[str, Any]]) -> bytes:
    """Repeated ``KeyValue`` fields with ``tag``, uncached (resource, scope, events, links)."""
    return b"".join([_field(tag, _key_value(k, v)) for k, v in attributes])


def _resource(attributes: tuple) -> bytes:
    return _attributes(_RESOURCE_ATTRS, attributes)


def _scope(name: str, version: str, attributes: tuple) -> bytes:
    out = b""
    if name:
        out += _field(_SCOPE_NAME, _utf8(name))
    if version:
        out += _field(_SCOPE_VERSION, _utf8(version))
    return out + _attributes(_SCOPE_ATTRS, attributes)


def _event(event: Any) -> bytes:
    out = _EVENT_TIME + _pack_q(event.time_ns) if event.time_ns else b""
    if event.name:
        out += _field(_EVENT_NAME, _utf8(event.name))
    out += _attributes(_EVENT_ATTRS, event.attributes)
    if event.dropped_attributes_count:
        out += _EVENT_DROPPED + _varint(event.dropped_attributes_count)
    return out


def _link(link: Any) -> bytes:
    out = _field(_LINK_TRACE, link.trace_id) if link.trace_id else b""
    if link.span_id:
        out += _field(_LINK_SPAN, link.span_id)
    if link.trace_state:
        out += _field(_LINK_STATE, _utf8(link.trace_state))
    out += _attributes(_LINK_ATTRS, link.attributes)
    if link.dropped_attributes_count:
        out += _LINK_DROPPED + _varint(link.dropped_attributes_count)
    if link.flags:
        out += _LINK_FLAGS + _pack_i(link.flags)
    return out


def _append_rare(parts: list[bytes], s: SpanData) -> None:
    """Fields 10 to 14 (dropped attributes, events, dropped events, links, dropped links), in order."""
    if s.dropped_attributes_count:
        parts.append(_DROPPED_ATTRS + _varint(s.dropped_attributes_count))
    for event in s.events:
        parts.append(_field(_EVENTS, _event(event)))
    if s.dropped_events_count:
        parts.append(_DROPPED_EVENTS + _varint(s.dropped_events_count))
    for link in s.links:
        parts.append(_field(_LINKS, _link(link)))
    if s.dropped_links_count:
        parts.append(_DROPPED_LINKS + _varint(s.dropped_links_count))


def _hashable(value: Any) -> Any:
    """A hashable stand-in for an attribute tuple that may hold dicts or lists (used to group spans)."""
    try:
        hash(value)
    except TypeError:
        return ("\0repr", repr(value))
    return value


class ProtoEncoder:
    """Encodes batches of spans, keeping caches of what repeats between spans and batches.

    Not thread-safe: give each worker thread its own encoder. Caches are cleared when they exceed
    65,536 entries, so unique attribute values (sequence numbers, timestamps) cannot grow memory.

    ``compiled``: ``None`` (default) uses the C encoder when it is built and allowed, ``True`` requires it
    (``ImportError`` otherwise, as ``JsonLinesEncoder``), ``False`` uses this module's Python code (the reference).

    Example::

        encoder = ProtoEncoder()
        payload = encoder.encode(spans)  # bytes of an ExportTraceServiceRequest
    """

    def __init__(self, *, compiled: bool | None = None) -> None:
        module = native.load("launchtrace.otlp._protoenc") if compiled is not False else None
        if compiled and module is None:
            raise ImportError("launchtrace.otlp._protoenc is not built (or LAUNCHTRACE_PURE_PYTHON is set)")
        self.compiled: Any = module.Encoder(SpanData) if module is not None else None
        if self.compiled is not None:
            # the C method itself as the instance's encode: no Python frame per batch
            self.encode = self.compiled.encode  # type: ignore[method-assign]
        self._keys: dict[str, bytes] = {}  # attribute key -> encoded KeyValue.key field
        # (key, value) -> the whole Span.attributes field (tag, length, KeyValue); blocks of them per span
        self._fields = FieldCache(self._attribute_field)
        self._blocks = AttributeBlocks(self._fields)
        self._names: dict[str, bytes] = {}  # span name -> Span.name field
        self._resources: dict[Any, bytes] = {}  # resource key -> ResourceSpans.resource field
        self._scopes: dict[Any, bytes] = {}  # scope key -> ScopeSpans.scope field

    # -- attributes -----------------------------------------------------------------------------------------
    def _attribute_field(self, key: Any, value: Any) -> bytes:
        return _field(_ATTRS, self._key_field(key) + _field(_VALUE, _any_value(value)))

    def _key_field(self, key: str) -> bytes:
        kb = self._keys.get(key)
        if kb is None:
            if len(self._keys) > _CACHE_LIMIT:
                self._keys.clear()
            kb = self._keys[key] = _field(_KEY, _utf8(str(key)))
        return kb

    # -- spans ----------------------------------------------------------------------------------------------
    def _span(self, s: SpanData) -> bytes:
        """One ``ScopeSpans.spans`` field; fields in the order of their numbers (16, flags, last)."""
        tid, sid, parent = s.trace_id, s.span_id, s.parent_span_id
        if len(tid) == 16 and len(sid) == 8:
            head = _ID_HEADS[0] + tid + _ID_HEADS[1] + sid
        else:
            head = (_field(_TRACE_ID, tid) if tid else b"") + (_field(_SPAN_ID, sid) if sid else b"")
        if s.trace_state:
            head += _field(_TRACE_STATE, _utf8(s.trace_state))
        if parent:
            head += _ID_HEADS[2] + parent if len(parent) == 8 else _field(_PARENT, parent)
        name = self._names.get(s.name)
        if name is None:
            if len(self._names) > _CACHE_LIMIT:
                self._names.clear()
            name = self._names[s.name] = _field(_NAME, _utf8(s.name)) if s.name else b""
        parts = [head, name]
        if s.kind:
            parts.append(_KINDS[s.kind] if 0 <= s.kind < 16 else _KIND + _varint(s.kind))
        start, end = s.start_ns, s.end_ns
        if start and end:
            parts.append(_pack_times(_START[0], start, _END[0], end))
        elif start:
            parts.append(_START + _pack_q(start))
        elif end:
            parts.append(_END + _pack_q(end))
        if s.attributes:
            parts.append(self._blocks.block(s.attributes))
        if s.events or s.links or s.dropped_attributes_count or s.dropped_events_count or s.dropped_links_count:
            _append_rare(parts, s)
        if s.status_code or s.status_message:
            status = _field(_STATUS_MESSAGE, _utf8(s.status_message)) if s.status_message else b""
            if s.status_code:
                status += _STATUS_CODE + _varint(s.status_code)
            parts.append(_field(_STATUS, status))
        if s.flags:
            parts.append(_FLAGS + _pack_i(s.flags))
        body = b"".join(parts)
        n = len(body)
        return _SS_SPANS + (_SMALL_VARINTS[n] if n < 16384 else _varint(n)) + body

    def _resource_field(self, key: Any, span: SpanData) -> bytes:
        field = self._resources.get(key)
        if field is None:
            if len(self._resources) > 1024:
                self._resources.clear()
            field = self._resources[key] = _field(_RS_RESOURCE, _resource(span.resource))
        return field

    def _scope_field(self, key: Any, span: SpanData) -> bytes:
        field = self._scopes.get(key)
        if field is None:
            if len(self._scopes) > 1024:
                self._scopes.clear()
            body = _scope(span.scope_name, span.scope_version, span.scope_attributes)
            field = self._scopes[key] = _field(_SS_SCOPE, body)
        return field

    def _group(self, spans: Iterable[SpanData]) -> dict[Any, dict[Any, list[SpanData]]]:
        """Spans grouped by resource then scope, by value, in order of first appearance."""
        groups: dict[Any, dict[Any, list[SpanData]]] = {}
        by_id: dict[int, Any] = {}  # id of a resource/scope tuple -> its key (objects live during the call)
        last_r = last_s = None
        last_list: list[SpanData] | None = None
        for s in spans:
            r, sc = s.resource, s.scope_attributes
            if r is last_r and sc is last_s and last_list is not None and _same_scope(s, last_list[-1]):
                last_list.append(s)
                continue
            rk = by_id.get(id(r))
            if rk is None:
                rk = by_id[id(r)] = _hashable(r)
            sk_attrs = by_id.get(id(sc))
            if sk_attrs is None:
                sk_attrs = by_id[id(sc)] = _hashable(sc)
            rkey = (rk, s.resource_schema_url)
            skey = (s.scope_name, s.scope_version, sk_attrs, s.schema_url)
            last_list = groups.setdefault(rkey, {}).setdefault(skey, [])
            last_list.append(s)
            last_r, last_s = r, sc
        return groups

    def encode(self, spans: Sequence[SpanData]) -> bytes:
        """The bytes of an ``ExportTraceServiceRequest`` (== ``TracesData``) holding ``spans``."""
        out = []
        span = self._span
        for rkey, scopes in self._group(spans).items():
            first = next(iter(scopes.values()))[0]
            parts = [self._resource_field(rkey, first)]
            for skey, members in scopes.items():
                body = [self._scope_field(skey, members[0])]
                body += [span(s) for s in members]
                if members[0].schema_url:
                    body.append(_field(_SS_SCHEMA_URL, _utf8(members[0].schema_url)))
                parts.append(_field(_RS_SCOPE_SPANS, b"".join(body)))
            if first.resource_schema_url:
                parts.append(_field(_RS_SCHEMA_URL, _utf8(first.resource_schema_url)))
            out.append(_field(_RESOURCE_SPANS, b"".join(parts)))
        return b"".join(out)


def _same_scope(a: SpanData, b: SpanData) -> bool:
    return (
        a.scope_name == b.scope_name
        and a.scope_version == b.scope_version
        and a.schema_url == b.schema_url
        and a.resource_schema_url == b.resource_schema_url
    )


def encode_spans(spans: Sequence[SpanData]) -> bytes:
    """Encode ``spans`` with a fresh :class:`ProtoEncoder` (use one encoder per thread for speed)."""
    return ProtoEncoder().encode(spans)
