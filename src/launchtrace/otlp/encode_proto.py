"""OTLP protobuf encoding of :class:`~launchtrace.spans.SpanData`: the bytes of an ``ExportTraceServiceRequest``.

Where it is built, the compiled ``launchtrace.otlp._protoenc`` writes the bytes directly, caching what repeats
from span to span (attribute pairs and blocks, names, resources, scopes): the export worker shares the GIL with
the launching thread (its cost in ``docs/export.md``, "Encoders"). Without a compiler (or with
``LAUNCHTRACE_PURE_PYTHON=1``) the maintained library does the job: the ``opentelemetry-proto`` generated classes,
filled from the spans and serialised with ``SerializeToString``. ``tests/test_encode_proto.py`` and
``tests/test_protoenc_native.py`` check that the compiled bytes parse (``FromString``) to the message the library
path builds.

Conversion rules for attribute values (the compiled encoder's too): ``str``, ``bool``, ``int``, ``float``,
``bytes``, ``tuple``/``list`` (``ArrayValue``, nesting allowed) and ``dict`` (``KvlistValue``) map directly;
an ``int`` outside the signed 64-bit range and any other type (``None``, objects) are written as their
``str()``; lone surrogates in strings are replaced by ``?``. Spans are grouped by equal resource (then equal
instrumentation scope) in order of first appearance, spans keeping their order.

Example::

    from launchtrace.otlp.encode_proto import encode_spans
    payload = encode_spans([span])  # bytes of an ExportTraceServiceRequest / TracesData
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from launchtrace import native
from launchtrace.spans import SpanData

__all__ = ["ProtoEncoder", "encode_spans", "request_message"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _text(text: str) -> str:
    """``text`` as protobuf takes it: valid UTF-8 (lone surrogates become ``?``)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode()
    return text


def _u32(n: int) -> int:
    """A count for a ``uint32`` field: the compiled encoder writes a wider one as a 64-bit varint, which every
    protobuf parser reads as its low 32 bits; the library takes those bits (negative: ``ValueError``)."""
    if n <= 0xFFFFFFFF:
        return n
    if n >> 64:
        raise OverflowError("value does not fit a 64-bit OTLP field")
    return n & 0xFFFFFFFF


def _fill_any(value: Any, out: Any) -> None:
    """Set the ``AnyValue`` ``out`` from ``value`` (see the module docstring for the rules)."""
    t = type(value)
    if t is str:
        out.string_value = _text(value)
    elif t is bool:
        out.bool_value = value
    elif t is int:
        if _INT64_MIN <= value <= _INT64_MAX:
            out.int_value = value
        else:
            out.string_value = str(value)
    elif t is float:
        out.double_value = value
    elif t is tuple or t is list:
        array = out.array_value
        array.SetInParent()
        add = array.values.add
        for v in value:
            _fill_any(v, add())
    elif t is dict:
        kvlist = out.kvlist_value
        kvlist.SetInParent()
        _fill_attributes(value.items(), kvlist.values)
    elif t is bytes:
        out.bytes_value = value
    # subclasses (numpy scalars, enums) and everything else
    elif isinstance(value, bool):
        out.bool_value = bool(value)
    elif isinstance(value, str):
        _fill_any(str(value), out)
    elif isinstance(value, int):
        _fill_any(int(value), out)
    elif isinstance(value, float):
        out.double_value = float(value)
    elif isinstance(value, (tuple, list)):
        _fill_any(tuple(value), out)
    else:
        out.string_value = _text(str(value))


def _fill_attributes(attributes: Iterable[tuple[Any, Any]], out: Any) -> None:
    """Append one ``KeyValue`` per pair to the repeated field ``out``."""
    add = out.add
    for key, value in attributes:
        kv = add()
        kv.key = _text(str(key))
        _fill_any(value, kv.value)


def _fill_span(s: SpanData, out: Any) -> None:
    out.trace_id = s.trace_id
    out.span_id = s.span_id
    if s.trace_state:
        out.trace_state = _text(s.trace_state)
    if s.parent_span_id:
        out.parent_span_id = s.parent_span_id
    if s.flags:
        out.flags = s.flags
    out.name = _text(s.name)
    if s.kind < 0:  # an enum field would take it (as ten bytes); the compiled encoder refuses it too
        raise ValueError("negative value for an unsigned OTLP field")
    out.kind = s.kind
    out.start_time_unix_nano = s.start_ns
    out.end_time_unix_nano = s.end_ns
    if s.attributes:
        _fill_attributes(s.attributes, out.attributes)
    out.dropped_attributes_count = _u32(s.dropped_attributes_count)
    for e in s.events:
        event = out.events.add()
        event.time_unix_nano = e.time_ns
        event.name = _text(e.name)
        _fill_attributes(e.attributes, event.attributes)
        event.dropped_attributes_count = _u32(e.dropped_attributes_count)
    out.dropped_events_count = _u32(s.dropped_events_count)
    for k in s.links:
        link = out.links.add()
        link.trace_id = k.trace_id
        link.span_id = k.span_id
        if k.trace_state:
            link.trace_state = _text(k.trace_state)
        _fill_attributes(k.attributes, link.attributes)
        link.dropped_attributes_count = _u32(k.dropped_attributes_count)
        link.flags = k.flags
    out.dropped_links_count = _u32(s.dropped_links_count)
    if s.status_code or s.status_message:
        if s.status_code < 0:
            raise ValueError("negative value for an unsigned OTLP field")
        out.status.code = s.status_code
        if s.status_message:
            out.status.message = _text(s.status_message)


def _hashable(value: Any) -> Any:
    """A hashable stand-in for an attribute tuple that may hold dicts or lists (used to group spans)."""
    try:
        hash(value)
    except TypeError:
        return ("\0repr", repr(value))
    return value


def _group(spans: Iterable[SpanData]) -> dict[Any, dict[Any, list[SpanData]]]:
    """Spans grouped by resource then scope, by value, in order of first appearance (the compiled rule)."""
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


def _same_scope(a: SpanData, b: SpanData) -> bool:
    return (
        a.scope_name == b.scope_name
        and a.scope_version == b.scope_version
        and a.schema_url == b.schema_url
        and a.resource_schema_url == b.resource_schema_url
    )


def request_message(spans: Iterable[SpanData]) -> Any:
    """The ``ExportTraceServiceRequest`` holding ``spans``, built with the generated protobuf classes."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    for scopes in _group(spans).values():
        first = next(iter(scopes.values()))[0]
        rs = request.resource_spans.add()
        rs.resource.SetInParent()
        _fill_attributes(first.resource, rs.resource.attributes)
        if first.resource_schema_url:
            rs.schema_url = _text(first.resource_schema_url)
        for members in scopes.values():
            head = members[0]
            ss = rs.scope_spans.add()
            ss.scope.SetInParent()
            if head.scope_name:
                ss.scope.name = _text(head.scope_name)
            if head.scope_version:
                ss.scope.version = _text(head.scope_version)
            _fill_attributes(head.scope_attributes, ss.scope.attributes)
            if head.schema_url:
                ss.schema_url = _text(head.schema_url)
            add = ss.spans.add
            for s in members:
                _fill_span(s, add())
    return request


class ProtoEncoder:
    """Encodes batches of spans: the compiled encoder where built, else the protobuf library.

    Not thread-safe: give each worker thread its own encoder (the compiled one caches across batches, its
    caches bounded). ``compiled``: ``None`` (default) uses the C encoder when it is built and allowed, ``True``
    requires it (``ImportError`` otherwise), ``False`` uses the generated protobuf classes.

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

    def encode(self, spans: Sequence[SpanData]) -> bytes:
        """The bytes of an ``ExportTraceServiceRequest`` (== ``TracesData``) holding ``spans``."""
        return request_message(spans).SerializeToString()


def encode_spans(spans: Sequence[SpanData]) -> bytes:
    """Encode ``spans`` with a fresh :class:`ProtoEncoder` (use one encoder per thread for speed)."""
    return ProtoEncoder().encode(spans)
