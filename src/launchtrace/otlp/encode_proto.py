"""Hand-written OTLP protobuf encoding of :class:`~launchtrace.spans.SpanData`, for speed.

Building ``opentelemetry.proto`` messages costs about 10 µs per span in Python (the SDK's own encoder
about 100 µs); the exporter has to keep up with kernel launches that take 10 µs. This module writes the
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
same bytes in C, about ten times faster; :class:`ProtoEncoder` uses it when it is there, and this Python code
stays the definition and the fallback. ``tests/test_protoenc_native.py`` checks the two give identical bytes.

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

_KINDS = tuple(b"\x30" + bytes([k]) for k in range(16))  # Span.kind fields


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
        return _field(b"\x0a", _utf8(value))
    if t is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if t is int:
        if 0 <= value <= _INT64_MAX:
            return b"\x18" + _varint(value)
        if _INT64_MIN <= value < 0:
            return b"\x18" + _varint(value + (1 << 64))
        return _field(b"\x0a", str(value).encode())
    if t is float:
        return b"\x21" + _pack_d(value)
    if t is tuple or t is list:
        return _field(b"\x2a", b"".join([_field(b"\x0a", _any_value(v)) for v in value]))
    if t is dict:
        return _field(b"\x32", b"".join([_field(b"\x0a", _key_value(k, v)) for k, v in value.items()]))
    if t is bytes:
        return _field(b"\x3a", value)
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
    return _field(b"\x0a", _utf8(str(value)))


def _key_value(key: str, value: Any) -> bytes:
    """The body of a ``KeyValue`` message."""
    return _field(b"\x0a", _utf8(str(key))) + _field(b"\x12", _any_value(value))


def _attributes(tag: bytes, attributes: Iterable[tuple[str, Any]]) -> bytes:
    """Repeated ``KeyValue`` fields with ``tag``, uncached (resource, scope, events, links)."""
    return b"".join([_field(tag, _key_value(k, v)) for k, v in attributes])


def _resource(attributes: tuple) -> bytes:
    return _attributes(b"\x0a", attributes)


def _scope(name: str, version: str, attributes: tuple) -> bytes:
    out = b""
    if name:
        out += _field(b"\x0a", _utf8(name))
    if version:
        out += _field(b"\x12", _utf8(version))
    return out + _attributes(b"\x1a", attributes)


def _event(event: Any) -> bytes:
    out = b"\x09" + _pack_q(event.time_ns) if event.time_ns else b""
    if event.name:
        out += _field(b"\x12", _utf8(event.name))
    out += _attributes(b"\x1a", event.attributes)
    if event.dropped_attributes_count:
        out += b"\x20" + _varint(event.dropped_attributes_count)
    return out


def _link(link: Any) -> bytes:
    out = _field(b"\x0a", link.trace_id) if link.trace_id else b""
    if link.span_id:
        out += _field(b"\x12", link.span_id)
    if link.trace_state:
        out += _field(b"\x1a", _utf8(link.trace_state))
    out += _attributes(b"\x22", link.attributes)
    if link.dropped_attributes_count:
        out += b"\x28" + _varint(link.dropped_attributes_count)
    if link.flags:
        out += b"\x35" + _pack_i(link.flags)
    return out


def _append_rare(parts: list[bytes], s: SpanData) -> None:
    """Fields 10 to 14 (dropped attributes, events, dropped events, links, dropped links), in order."""
    if s.dropped_attributes_count:
        parts.append(b"\x50" + _varint(s.dropped_attributes_count))
    for event in s.events:
        parts.append(_field(b"\x5a", _event(event)))
    if s.dropped_events_count:
        parts.append(b"\x60" + _varint(s.dropped_events_count))
    for link in s.links:
        parts.append(_field(b"\x6a", _link(link)))
    if s.dropped_links_count:
        parts.append(b"\x70" + _varint(s.dropped_links_count))


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
        return _field(b"\x4a", self._key_field(key) + _field(b"\x12", _any_value(value)))

    def _key_field(self, key: str) -> bytes:
        kb = self._keys.get(key)
        if kb is None:
            if len(self._keys) > _CACHE_LIMIT:
                self._keys.clear()
            kb = self._keys[key] = _field(b"\x0a", _utf8(str(key)))
        return kb

    # -- spans ----------------------------------------------------------------------------------------------
    def _span(self, s: SpanData) -> bytes:
        """One ``ScopeSpans.spans`` field; fields in the order of their numbers (16, flags, last)."""
        tid, sid, parent = s.trace_id, s.span_id, s.parent_span_id
        if len(tid) == 16 and len(sid) == 8:
            head = b"\x0a\x10" + tid + b"\x12\x08" + sid
        else:
            head = (_field(b"\x0a", tid) if tid else b"") + (_field(b"\x12", sid) if sid else b"")
        if s.trace_state:
            head += _field(b"\x1a", _utf8(s.trace_state))
        if parent:
            head += b"\x22\x08" + parent if len(parent) == 8 else _field(b"\x22", parent)
        name = self._names.get(s.name)
        if name is None:
            if len(self._names) > _CACHE_LIMIT:
                self._names.clear()
            name = self._names[s.name] = _field(b"\x2a", _utf8(s.name)) if s.name else b""
        parts = [head, name]
        if s.kind:
            parts.append(_KINDS[s.kind] if 0 <= s.kind < 16 else b"\x30" + _varint(s.kind))
        start, end = s.start_ns, s.end_ns
        if start and end:
            parts.append(_pack_times(0x39, start, 0x41, end))
        elif start:
            parts.append(b"\x39" + _pack_q(start))
        elif end:
            parts.append(b"\x41" + _pack_q(end))
        if s.attributes:
            parts.append(self._blocks.block(s.attributes))
        if s.events or s.links or s.dropped_attributes_count or s.dropped_events_count or s.dropped_links_count:
            _append_rare(parts, s)
        if s.status_code or s.status_message:
            status = _field(b"\x12", _utf8(s.status_message)) if s.status_message else b""
            if s.status_code:
                status += b"\x18" + _varint(s.status_code)
            parts.append(_field(b"\x7a", status))
        if s.flags:
            parts.append(b"\x85\x01" + _pack_i(s.flags))
        body = b"".join(parts)
        n = len(body)
        return b"\x12" + (_SMALL_VARINTS[n] if n < 16384 else _varint(n)) + body  # ScopeSpans.spans

    def _resource_field(self, key: Any, span: SpanData) -> bytes:
        field = self._resources.get(key)
        if field is None:
            if len(self._resources) > 1024:
                self._resources.clear()
            field = self._resources[key] = _field(b"\x0a", _resource(span.resource))
        return field

    def _scope_field(self, key: Any, span: SpanData) -> bytes:
        field = self._scopes.get(key)
        if field is None:
            if len(self._scopes) > 1024:
                self._scopes.clear()
            body = _scope(span.scope_name, span.scope_version, span.scope_attributes)
            field = self._scopes[key] = _field(b"\x0a", body)
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
                    body.append(_field(b"\x1a", _utf8(members[0].schema_url)))
                parts.append(_field(b"\x12", b"".join(body)))
            if first.resource_schema_url:
                parts.append(_field(b"\x1a", _utf8(first.resource_schema_url)))
            out.append(_field(b"\x0a", b"".join(parts)))
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
