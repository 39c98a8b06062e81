"""OTLP/JSON for :class:`~launchtrace.spans.SpanData`: the encoder of the JSON Lines file sink and the decoder
of every reader.

The encoder writes what the OTLP/JSON spec asks for: lowerCamelCase keys, hex ids, integer enums, 64-bit
integers as decimal strings, bytes as base64, spans grouped by resource and instrumentation scope, default
values left out. It builds plain dicts and serialises them with one ``orjson.dumps`` call, because it runs on
the export path.

The decoder accepts what producers really write: hex or base64 ids (Tempo, ``json_format``), enum names
(``SPAN_KIND_SERVER``) or integers, 64-bit integers as strings or numbers, ``resourceSpans`` or the legacy
``batches``, ``scopeSpans`` or ``instrumentationLibrarySpans``; unknown keys are ignored. It never raises on
bad data: a span it cannot read is skipped and reported as a :class:`~launchtrace.otlp.problems.Problem`.

Example::

    from launchtrace.otlp.json_codec import decode_traces_data, encode_line
    from launchtrace.spans import SpanData
    span = SpanData(bytes(15) + b"\\x01", bytes(7) + b"\\x02", None, "step", 1, 2, (("n", 3),))
    line = encode_line([span])   # '{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[...'
    spans, problems = decode_traces_data(orjson.loads(line), where="spans.jsonl:1")
    assert spans == [span] and not problems
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from launchtrace._lazy import lazy_module
from launchtrace.errors import BadSpan
from launchtrace.fastinit import slot_constructor
from launchtrace.otlp.ids import SPAN_ID_BYTES, TRACE_ID_BYTES, IdError, decode_id
from launchtrace.otlp.jsonkeys import (
    ARRAY_VALUE,
    ATTRIBUTES,
    BOOL_VALUE,
    BYTES_VALUE,
    CODE,
    DOUBLE_VALUE,
    DROPPED_ATTRIBUTES_COUNT,
    DROPPED_EVENTS_COUNT,
    DROPPED_LINKS_COUNT,
    END_TIME_UNIX_NANO,
    EVENTS,
    FLAGS,
    INT_VALUE,
    KEY,
    KIND,
    KVLIST_VALUE,
    LINKS,
    MESSAGE,
    NAME,
    PARENT_SPAN_ID,
    RESOURCE,
    RESOURCE_SPANS,
    SCHEMA_URL,
    SCOPE,
    SCOPE_SPANS,
    SPAN_ID,
    SPANS,
    START_TIME_UNIX_NANO,
    STATUS,
    STRING_VALUE,
    TIME_UNIX_NANO,
    TRACE_ID,
    TRACE_STATE,
    VALUE,
    VALUES,
    VERSION,
)
from launchtrace.otlp.problems import Problem
from launchtrace.spans import SpanData, SpanEvent, SpanLink

orjson = lazy_module("orjson")  # encode_line's; the readers of launch files (baseline build) never need it

__all__ = [
    "KIND_NAMES",
    "STATUS_NAMES",
    "decode_traces_data",
    "encode_any_value",
    "encode_line",
    "encode_line_bytes",
    "encode_traces_data",
    "group_spans",
    "line_encoder",
]

KIND_NAMES = (
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
    "SPAN_KIND_PRODUCER",
    "SPAN_KIND_CONSUMER",
)
STATUS_NAMES = ("STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# ------------------------------------------------------------------------------------------------ encoding


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _enc_float(v: float) -> dict:
    if math.isfinite(v):
        return {DOUBLE_VALUE: v}
    return {DOUBLE_VALUE: "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")}


_ENCODE_VALUE: dict[type, Callable[[Any], dict]] = {
    str: lambda v: {STRING_VALUE: v},
    bool: lambda v: {BOOL_VALUE: v},
    int: lambda v: {INT_VALUE: str(v)} if _INT64_MIN <= v <= _INT64_MAX else {STRING_VALUE: str(v)},
    float: _enc_float,
    bytes: lambda v: {BYTES_VALUE: _b64(v)},
    bytearray: lambda v: {BYTES_VALUE: _b64(bytes(v))},
    tuple: lambda v: {ARRAY_VALUE: {VALUES: [encode_any_value(x) for x in v]}},
    list: lambda v: {ARRAY_VALUE: {VALUES: [encode_any_value(x) for x in v]}},
    dict: lambda v: {KVLIST_VALUE: {VALUES: _enc_attrs(v.items())}},
    type(None): lambda v: {},
}


def encode_any_value(value: Any) -> dict:
    """An OTLP/JSON ``AnyValue`` for a Python value; numpy scalars become numbers, anything else a string."""
    enc = _ENCODE_VALUE.get(type(value))
    if enc is not None:
        return enc(value)
    if isinstance(value, bool):
        return {BOOL_VALUE: bool(value)}
    if isinstance(value, numbers.Integral):
        return _ENCODE_VALUE[int](int(value))
    if isinstance(value, numbers.Real):
        return _enc_float(float(value))
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):  # not Integral
        return {BOOL_VALUE: bool(value)}
    return {STRING_VALUE: str(value)}


def _enc_attrs(items: Iterable[tuple[Any, Any]]) -> list[dict]:
    enc = _ENCODE_VALUE
    out = []
    for k, v in items:
        f = enc.get(type(v))
        out.append({KEY: k if type(k) is str else str(k), VALUE: f(v) if f else encode_any_value(v)})
    return out


def _add_attributes(d: dict[str, Any], attributes: tuple, dropped: int) -> dict[str, Any]:
    """``d`` with the attributes and their dropped count of a span, event or link (each only when set)."""
    if attributes:
        d[ATTRIBUTES] = _enc_attrs(attributes)
    if dropped:
        d[DROPPED_ATTRIBUTES_COUNT] = dropped
    return d


def _enc_event(e: SpanEvent) -> dict:
    return _add_attributes({TIME_UNIX_NANO: str(e.time_ns), NAME: e.name}, e.attributes, e.dropped_attributes_count)


def _enc_link(k: SpanLink) -> dict:
    d: dict[str, Any] = {TRACE_ID: k.trace_id.hex(), SPAN_ID: k.span_id.hex()}
    if k.trace_state:
        d[TRACE_STATE] = k.trace_state
    _add_attributes(d, k.attributes, k.dropped_attributes_count)
    if k.flags:
        d[FLAGS] = k.flags
    return d


def _enc_span(s: SpanData) -> dict:
    d: dict[str, Any] = {TRACE_ID: s.trace_id.hex(), SPAN_ID: s.span_id.hex()}
    if s.trace_state:
        d[TRACE_STATE] = s.trace_state
    if s.parent_span_id:
        d[PARENT_SPAN_ID] = s.parent_span_id.hex()
    if s.flags:
        d[FLAGS] = s.flags
    d[NAME] = s.name
    if s.kind:
        d[KIND] = s.kind
    d[START_TIME_UNIX_NANO] = str(s.start_ns)
    d[END_TIME_UNIX_NANO] = str(s.end_ns)
    _add_attributes(d, s.attributes, s.dropped_attributes_count)
    if s.events:
        d[EVENTS] = [_enc_event(e) for e in s.events]
    if s.dropped_events_count:
        d[DROPPED_EVENTS_COUNT] = s.dropped_events_count
    if s.links:
        d[LINKS] = [_enc_link(k) for k in s.links]
    if s.dropped_links_count:
        d[DROPPED_LINKS_COUNT] = s.dropped_links_count
    if s.status_code or s.status_message:
        d[STATUS] = _enc_status(s)
    return d


def _enc_status(s: SpanData) -> dict:
    status: dict[str, Any] = {}
    if s.status_message:
        status[MESSAGE] = s.status_message
    if s.status_code:
        status[CODE] = s.status_code
    return status


def _value_key(*parts: Any) -> Any:
    """A hashable key for equal-valued resources or scopes, or ``None`` when a value is unhashable."""
    try:
        hash(parts)
    except TypeError:
        return None
    return parts


Groups = list[tuple[SpanData, list[tuple[SpanData, list[Any]]]]]
"""Per resource: its first span and, per scope, that scope's first span and the encoded spans."""


def group_spans(spans: Iterable[SpanData], encode: Callable[[SpanData], Any]) -> Groups:
    """``spans`` grouped by resource, then instrumentation scope, in first-seen order, encoded by ``encode``.

    The grouping of every OTLP/JSON writer here. Spans of one batch usually share their resource and scope
    tuples, so groups are found by identity first (the very same objects as the previous span's: no look-up
    at all), and by value only for a tuple not seen before; an unhashable value groups by identity alone.
    """
    groups: Groups = []
    by_id: dict[tuple, tuple[list, dict]] = {}
    by_value: dict[Any, tuple[list, dict]] = {}
    last: SpanData | None = None  # the previous span, and the list its encoding went to
    last_list: list[Any] = []
    for s in spans:
        if (
            last is not None
            and s.resource is last.resource
            and s.scope_attributes is last.scope_attributes
            and s.scope_name is last.scope_name
            and s.scope_version is last.scope_version
            and s.resource_schema_url is last.resource_schema_url
            and s.schema_url is last.schema_url
        ):
            last_list.append(encode(s))
            continue
        rid = (id(s.resource), s.resource_schema_url)
        group = by_id.get(rid)
        if group is None:
            vkey = _value_key(s.resource, s.resource_schema_url)
            group = by_value.get(vkey) if vkey is not None else None
            if group is None:
                scopes_list: list[tuple[SpanData, list[Any]]] = []
                groups.append((s, scopes_list))
                group = (scopes_list, {})
                if vkey is not None:
                    by_value[vkey] = group
            by_id[rid] = group
        scopes_list, scopes = group
        sid = (s.scope_name, s.scope_version, id(s.scope_attributes), s.schema_url)
        span_list = scopes.get(sid)
        if span_list is None:
            vkey = _value_key("by value", s.scope_name, s.scope_version, s.scope_attributes, s.schema_url)
            span_list = scopes.get(vkey) if vkey is not None else None
            if span_list is None:
                span_list = []
                scopes_list.append((s, span_list))
                if vkey is not None:
                    scopes[vkey] = span_list
            scopes[sid] = span_list
        span_list.append(encode(s))
        last, last_list = s, span_list
    return groups


def encode_traces_data(spans: Iterable[SpanData]) -> dict:
    """One OTLP/JSON ``TracesData`` dict holding ``spans``, grouped by :func:`group_spans`."""
    resource_spans: list[dict] = []
    for first, scopes in group_spans(spans, _enc_span):
        rdict: dict[str, Any] = {RESOURCE: {ATTRIBUTES: _enc_attrs(first.resource)} if first.resource else {}}
        rdict[SCOPE_SPANS] = []
        if first.resource_schema_url:
            rdict[SCHEMA_URL] = first.resource_schema_url
        for sfirst, encoded in scopes:
            scope: dict[str, Any] = {}
            if sfirst.scope_name:
                scope[NAME] = sfirst.scope_name
            if sfirst.scope_version:
                scope[VERSION] = sfirst.scope_version
            if sfirst.scope_attributes:
                scope[ATTRIBUTES] = _enc_attrs(sfirst.scope_attributes)
            sdict: dict[str, Any] = {SCOPE: scope, SPANS: encoded}
            if sfirst.schema_url:
                sdict[SCHEMA_URL] = sfirst.schema_url
            rdict[SCOPE_SPANS].append(sdict)
        resource_spans.append(rdict)
    return {RESOURCE_SPANS: resource_spans}


def _scrub(obj: Any) -> Any:
    """``obj`` with lone surrogates in strings replaced by ``?`` (they cannot be written as UTF-8)."""
    if type(obj) is str:
        return obj.encode("utf-8", "replace").decode("utf-8")
    if type(obj) is dict:
        return {_scrub(k): _scrub(v) for k, v in obj.items()}
    if type(obj) is list:
        return [_scrub(x) for x in obj]
    return obj


def encode_line(spans: Iterable[SpanData]) -> str:
    """One line of OTLP JSON Lines (without the newline): a compact ``TracesData`` holding ``spans``.

    Integers outside the signed 64-bit range are written as strings and lone surrogates as ``?``, as the
    protobuf encoder does, so a strange attribute value never makes the export fail.
    """
    obj = encode_traces_data(spans)
    try:
        return orjson.dumps(obj).decode("utf-8")
    except orjson.JSONEncodeError:
        return orjson.dumps(_scrub(obj)).decode("utf-8")


def encode_line_bytes(spans: Sequence[SpanData]) -> bytes:
    """:func:`encode_line` as the file sink writes it: UTF-8, with its newline."""
    return (encode_line(spans) + "\n").encode("utf-8")


def line_encoder(compiled: bool | None = None) -> Callable[[Sequence[SpanData]], bytes]:
    """What the JSON Lines file sink encodes a batch with (one per thread: the compiled encoder caches).

    The compiled ``launchtrace.otlp._jsonenc`` where it is built (it writes :func:`encode_line_bytes`'s bytes
    several times faster: ``docs/export.md``), with a batch it raises ``Unsupported`` for (odd field types,
    deep nesting) handed to :func:`encode_line_bytes`; that function alone where no compiler was present (or
    ``LAUNCHTRACE_PURE_PYTHON`` is set). ``compiled``: ``None`` whichever is there, ``True`` required
    (``ImportError`` when not built), ``False`` the library path only.
    """
    from launchtrace import native

    module = native.load("launchtrace.otlp._jsonenc") if compiled is not False else None
    if module is None:
        if compiled:
            raise ImportError("launchtrace.otlp._jsonenc is not built (or LAUNCHTRACE_PURE_PYTHON is set)")
        return encode_line_bytes
    encode = module.Encoder(SpanData, SpanEvent, SpanLink, encode_any_value, group_spans).encode
    unsupported = module.Unsupported

    def encode_batch(spans: Sequence[SpanData]) -> bytes:
        try:
            return encode(spans)
        except unsupported:  # a batch the compiled encoder leaves to the library
            return encode_line_bytes(spans)

    return encode_batch


# ------------------------------------------------------------------------------------------------ decoding


def _int(v: Any, what: str) -> int:
    t = type(v)
    if t is int:
        return v
    if t is str:
        try:
            return int(v)
        except ValueError:
            raise BadSpan(f"{what} {v!r} is not an integer") from None
    if t is float and v.is_integer():
        return int(v)
    raise BadSpan(f"{what} must be an integer or a decimal string, got {type(v).__name__} {v!r}")


def _str(v: Any, what: str) -> str:
    if type(v) is str:
        return v
    raise BadSpan(f"{what} must be a string, got {type(v).__name__} {v!r}")


def _list(v: Any, what: str) -> list:
    if type(v) is list:
        return v
    raise BadSpan(f"{what} must be a list, got {type(v).__name__}")


def _dict(v: Any, what: str) -> dict:
    if type(v) is dict:
        return v
    raise BadSpan(f"{what} must be an object, got {type(v).__name__}")


def _enum(v: Any, names: tuple[str, ...], what: str) -> int:
    if type(v) is int:
        if 0 <= v < len(names):
            return v
        raise BadSpan(f"unknown {what} {v}")
    if type(v) is str:
        try:
            return names.index(v)
        except ValueError:
            if v.isdecimal() and int(v) < len(names):
                return int(v)
            raise BadSpan(f"unknown {what} {v!r}") from None
    raise BadSpan(f"{what} must be an integer or an enum name, got {type(v).__name__} {v!r}")


def _dec_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    raise BadSpan(f"{BOOL_VALUE} must be true or false, got {v!r}")


_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _dec_double(v: Any) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    if t is str:
        special = _SPECIAL_FLOATS.get(v)
        if special is not None:
            return special
        try:
            return float(v)
        except ValueError:
            pass
    raise BadSpan(f"{DOUBLE_VALUE} must be a number, got {v!r}")


def _dec_bytes(v: Any) -> bytes:
    if type(v) is str:
        try:  # standard or URL-safe alphabet, padding optional
            return base64.b64decode(v.replace("-", "+").replace("_", "/") + "=" * (-len(v) % 4), validate=True)
        except (binascii.Error, ValueError):
            pass
    raise BadSpan(f"{BYTES_VALUE} must be base64, got {v!r}")


def _dec_array(v: Any) -> tuple:
    values = _dict(v, ARRAY_VALUE).get(VALUES, ())
    return tuple(_dec_value(x) for x in _list(values, f"{ARRAY_VALUE}.{VALUES}"))


def _dec_kvlist(v: Any) -> dict:
    values = _dict(v, KVLIST_VALUE).get(VALUES, ())
    return dict(_dec_attrs(_list(values, f"{KVLIST_VALUE}.{VALUES}")))


_DECODE_VALUE: dict[str, Callable[[Any], Any]] = {
    STRING_VALUE: lambda v: _str(v, STRING_VALUE),
    BOOL_VALUE: _dec_bool,
    INT_VALUE: lambda v: _int(v, INT_VALUE),
    DOUBLE_VALUE: _dec_double,
    BYTES_VALUE: _dec_bytes,
    ARRAY_VALUE: _dec_array,
    KVLIST_VALUE: _dec_kvlist,
}


def _dec_value(v: Any) -> Any:
    if type(v) is not dict:
        raise BadSpan(f"attribute value must be an object, got {type(v).__name__} {v!r}")
    for key, x in v.items():
        if key == STRING_VALUE and type(x) is str:  # the common case, without a call
            return x
        dec = _DECODE_VALUE.get(key)
        if dec is not None:
            return dec(x)
    return None  # an empty AnyValue


def _scalar(v: Any) -> Any:
    """An array element: the common string and integer forms inline, the rest by :func:`_dec_value`."""
    if type(v) is dict and len(v) == 1:
        ((vk, x),) = v.items()
        if type(x) is str:
            if vk == STRING_VALUE:
                return x
            if vk == INT_VALUE and x.isdecimal():
                return int(x)
    return _dec_value(v)


def _dec_attr(kv: Any) -> tuple[str, Any]:
    if type(kv) is not dict:
        raise BadSpan(f"attribute must be an object with key and value, got {kv!r}")
    key = kv.get(KEY)
    if type(key) is not str:
        raise BadSpan(f"attribute key must be a string, got {key!r}")
    return key, _dec_value(kv.get(VALUE))


def _dec_attrs(attrs: Any) -> tuple:
    """Attributes as ``((key, value), ...)``; the common one-kind scalar values are decoded inline (this loop
    is most of the decoder's time), everything else through :func:`_dec_attr`.

    A value object with one key is probed with ``dict.get`` per kind, most common first: unlike unpacking
    ``.items()`` that allocates nothing, and with one key there is no question which kind comes first.
    """
    if type(attrs) is not list:
        raise BadSpan(f"attributes must be a list, got {type(attrs).__name__}")
    out = []
    append = out.append
    for kv in attrs:
        try:  # the common shape, {"key": k, "value": {"<kind>Value": x}}, without checking each step first
            v = kv[VALUE]
            key = kv[KEY]
        except (TypeError, KeyError):
            append(_dec_attr(kv))  # raises the precise error, or reads an empty value
            continue
        if type(v) is dict and len(v) == 1 and type(key) is str:
            x = v.get(STRING_VALUE)
            if x is not None:
                if type(x) is str:
                    append((key, x))
                    continue
            else:
                x = v.get(INT_VALUE)
                if x is not None:
                    if type(x) is str:
                        try:  # what _int reads, so a failure goes the slow way to its precise error
                            append((key, int(x)))
                            continue
                        except ValueError:
                            pass
                else:
                    x = v.get(ARRAY_VALUE)
                    if x is not None:
                        values = x.get(VALUES, ()) if type(x) is dict else None
                        if type(values) is list:  # the elements as _scalar reads them, without a call each
                            items = []
                            for e in values:
                                if type(e) is dict and len(e) == 1:
                                    ex = e.get(STRING_VALUE)
                                    if ex is not None:
                                        if type(ex) is str:
                                            items.append(ex)
                                            continue
                                    else:
                                        ex = e.get(INT_VALUE)
                                        if type(ex) is str and ex.isdecimal():
                                            items.append(int(ex))
                                            continue
                                items.append(_dec_value(e))
                            append((key, tuple(items)))
                            continue
                    else:
                        x = v.get(BOOL_VALUE)
                        if type(x) is bool:
                            append((key, x))
                            continue
                        x = v.get(DOUBLE_VALUE)
                        if type(x) is float:
                            append((key, x))
                            continue
        append(_dec_attr(kv))
    return tuple(out)


def _dec_event(e: Any) -> SpanEvent:
    e = _dict(e, "event")
    return SpanEvent(
        _str(e.get(NAME, ""), "event name"),
        _int(e.get(TIME_UNIX_NANO, 0), f"event {TIME_UNIX_NANO}"),
        _dec_attrs(e[ATTRIBUTES]) if ATTRIBUTES in e else (),
        _int(e.get(DROPPED_ATTRIBUTES_COUNT, 0), f"event {DROPPED_ATTRIBUTES_COUNT}"),
    )


def _dec_link(k: Any, id_encoding: str) -> SpanLink:
    k = _dict(k, "link")
    return SpanLink(
        decode_id(k.get(TRACE_ID, ""), TRACE_ID_BYTES, id_encoding),
        decode_id(k.get(SPAN_ID, ""), SPAN_ID_BYTES, id_encoding),
        _dec_attrs(k[ATTRIBUTES]) if ATTRIBUTES in k else (),
        _str(k.get(TRACE_STATE, ""), f"link {TRACE_STATE}"),
        _int(k.get(FLAGS, 0), "link flags"),
        _int(k.get(DROPPED_ATTRIBUTES_COUNT, 0), f"link {DROPPED_ATTRIBUTES_COUNT}"),
    )


_new_span = slot_constructor(SpanData, tuple(f.name for f in dataclasses.fields(SpanData)))  # every field, in order


class _Context:
    """Resource and scope fields shared by the spans of one ``scopeSpans`` entry."""

    __slots__ = (
        RESOURCE,
        "resource_schema_url",
        "schema_url",
        "scope_attributes",
        "scope_name",
        "scope_version",
    )

    def __init__(self, resource: tuple, resource_schema_url: str) -> None:
        self.resource = resource
        self.resource_schema_url = resource_schema_url
        self.scope_name = ""
        self.scope_version = ""
        self.scope_attributes: tuple = ()
        self.schema_url = ""


def _dec_span(d: Any, ctx: _Context, id_encoding: str, link_problems: list[str], id_cache: dict) -> SpanData:
    if type(d) is not dict:
        raise BadSpan(f"span must be an object, got {type(d).__name__}")
    # ids: spans of one line share their trace id (and children their parent's id), so each id text is
    # decoded once per line; only ids that decode_id accepts are remembered
    text = d.get(TRACE_ID, "")
    trace_id = id_cache.get(text) if type(text) is str else None
    if trace_id is None or len(trace_id) != TRACE_ID_BYTES:
        trace_id = decode_id(text, TRACE_ID_BYTES, id_encoding)
        id_cache[text] = trace_id
    span_id = decode_id(d.get(SPAN_ID, ""), SPAN_ID_BYTES, id_encoding)
    parent = d.get(PARENT_SPAN_ID)
    if parent:
        parent_id = id_cache.get(parent) if type(parent) is str else None
        if parent_id is None or len(parent_id) != SPAN_ID_BYTES:
            parent_id = decode_id(parent, SPAN_ID_BYTES, id_encoding)
            id_cache[parent] = parent_id
    else:
        parent_id = None
    status = d.get(STATUS)
    if status:
        status = _dict(status, STATUS)
        code = _enum(status.get(CODE, 0), STATUS_NAMES, "status code")
        message = _str(status.get(MESSAGE, ""), "status message")
    else:
        code, message = 0, ""
    events = d.get(EVENTS)
    links = d.get(LINKS)
    decoded_links = []
    if links:
        for i, k in enumerate(_list(links, LINKS)):
            try:
                decoded_links.append(_dec_link(k, id_encoding))
            except (BadSpan, IdError) as exc:
                link_problems.append(f"link {i} dropped: {exc}")
    name = d.get(NAME, "")
    kind = d.get(KIND, 0)
    start = d.get(START_TIME_UNIX_NANO, 0)
    end = d.get(END_TIME_UNIX_NANO, 0)
    # the rarely present fields in one lookup each; _int only for a value that is not already an int
    trace_state = d.get(TRACE_STATE, "")
    flags = d.get(FLAGS, 0)
    dropped_attrs = d.get(DROPPED_ATTRIBUTES_COUNT, 0)
    dropped_events = d.get(DROPPED_EVENTS_COUNT, 0)
    dropped_links = d.get(DROPPED_LINKS_COUNT, 0)
    return _new_span(
        trace_id,
        span_id,
        parent_id,
        name if type(name) is str else _str(name, NAME),
        int(start) if type(start) is str and start.isdecimal() else _int(start, START_TIME_UNIX_NANO),
        int(end) if type(end) is str and end.isdecimal() else _int(end, END_TIME_UNIX_NANO),
        _dec_attrs(d[ATTRIBUTES]) if ATTRIBUTES in d else (),
        kind if type(kind) is int and 0 <= kind <= 5 else _enum(kind, KIND_NAMES, "span kind"),
        code,
        message,
        tuple(_dec_event(e) for e in _list(events, EVENTS)) if events else (),
        tuple(decoded_links),
        trace_state if type(trace_state) is str else _str(trace_state, TRACE_STATE),
        flags if type(flags) is int else _int(flags, FLAGS),
        dropped_attrs if type(dropped_attrs) is int else _int(dropped_attrs, DROPPED_ATTRIBUTES_COUNT),
        dropped_events if type(dropped_events) is int else _int(dropped_events, DROPPED_EVENTS_COUNT),
        dropped_links if type(dropped_links) is int else _int(dropped_links, DROPPED_LINKS_COUNT),
        ctx.resource,
        ctx.resource_schema_url,
        ctx.scope_name,
        ctx.scope_version,
        ctx.scope_attributes,
        ctx.schema_url,
    )


MAX_BAD_RUN = 10_000
"""Spans skipped in a row (empty, without ids) after which the rest of a scope's span list is skipped unread, in
one problem: 10,000,000 empty spans in one line took 91 s and 2.7 GB before "no launchtrace spans" (issue 25)."""


def _span_label(d: Any) -> str:
    if type(d) is dict and isinstance(d.get(SPAN_ID), str) and d.get(SPAN_ID):
        return f"span {d[SPAN_ID]!r} (trace {d.get(TRACE_ID)!r})"
    return "span"


def _dec_scope_spans(
    ss: Any, path: str, ctx: _Context, id_encoding: str, where: str, out: list, problems: list
) -> None:
    ss = _dict(ss, path)
    scope = ss.get(SCOPE) if SCOPE in ss else ss.get("instrumentationLibrary")
    if scope:
        scope = _dict(scope, f"{path}.scope")
        ctx.scope_name = _str(scope.get(NAME, ""), "scope name")
        ctx.scope_version = _str(scope.get(VERSION, ""), "scope version")
        ctx.scope_attributes = _dec_attrs(scope[ATTRIBUTES]) if ATTRIBUTES in scope else ()
    else:
        ctx.scope_name, ctx.scope_version, ctx.scope_attributes = "", "", ()
    ctx.schema_url = _str(ss.get(SCHEMA_URL, ""), f"{path}.{SCHEMA_URL}")
    link_problems: list[str] = []
    id_cache: dict = {}
    spans = _list(ss.get(SPANS, ()), f"{path}.spans")
    bad_run = 0  # spans skipped in a row: past MAX_BAD_RUN the rest of the list is skipped unread
    for i, d in enumerate(spans):
        if bad_run >= MAX_BAD_RUN:
            rest = len(spans) - i
            msg = f"{path}.spans[{i}:]: {rest} more spans skipped unread after {MAX_BAD_RUN} in a row were not spans"
            problems.append(Problem(where, msg, skipped=rest))
            break
        try:
            out.append(_dec_span(d, ctx, id_encoding, link_problems, id_cache))
            bad_run = 0
        except (BadSpan, IdError) as exc:
            bad_run += 1
            problems.append(Problem(where, f"{path}.spans[{i}]: {_span_label(d)} skipped: {exc}", skipped=1))
        except RecursionError:
            msg = f"{path}.spans[{i}]: {_span_label(d)} skipped: attribute values nested too deeply"
            problems.append(Problem(where, msg, skipped=1))
        if link_problems:
            for msg in link_problems:
                problems.append(Problem(where, f"{path}.spans[{i}]: {_span_label(d)}: {msg}"))
            link_problems.clear()


def _count_spans(rs: Any) -> int:
    """How many spans a resource entry holds, best effort, for the skip count when it is unreadable."""
    try:
        return sum(len(ss.get(SPANS, ())) for ss in rs.get(SCOPE_SPANS, ()) or ())
    except (AttributeError, TypeError):
        return 0


def decode_traces_data(obj: Any, *, where: str = "", id_encoding: str = "auto") -> tuple[list[SpanData], list[Problem]]:
    """The spans of one OTLP/JSON ``TracesData`` / ``ExportTraceServiceRequest`` object, and what was wrong.

    ``where`` (e.g. ``"spans.jsonl:3"``) prefixes every problem. ``id_encoding`` is ``"auto"`` (hex or base64,
    told apart by length) or ``"hex"`` / ``"base64"`` for a producer known to write one of them. Spans that
    cannot be read are skipped, each with a :class:`Problem` whose ``skipped`` is 1.
    """
    problems: list[Problem] = []
    if type(obj) is not dict:
        return [], [Problem(where, f"expected a TracesData JSON object, got {type(obj).__name__}")]
    key = RESOURCE_SPANS if RESOURCE_SPANS in obj else "batches"
    resource_spans = obj.get(key)
    if resource_spans is None:
        if obj:
            keys = ", ".join(sorted(obj)[:5])
            problems.append(Problem(where, f"no '{RESOURCE_SPANS}' (or legacy 'batches') in an object with {keys}"))
        return [], problems
    if type(resource_spans) is not list:
        return [], [Problem(where, f"'{key}' must be a list, got {type(resource_spans).__name__}")]
    spans: list[SpanData] = []
    for r, rs in enumerate(resource_spans):
        path = f"{key}[{r}]"
        try:
            rs = _dict(rs, path)
            resource = rs.get(RESOURCE) or {}
            resource = _dict(resource, f"{path}.resource")
            attrs = _dec_attrs(resource[ATTRIBUTES]) if ATTRIBUTES in resource else ()
            ctx = _Context(attrs, _str(rs.get(SCHEMA_URL, ""), f"{path}.{SCHEMA_URL}"))
            sskey = SCOPE_SPANS if SCOPE_SPANS in rs else "instrumentationLibrarySpans"
            scope_spans = _list(rs.get(sskey, ()), f"{path}.{sskey}")
        except BadSpan as exc:
            n = _count_spans(rs)
            problems.append(Problem(where, f"{path}: {n} span(s) skipped: {exc}", skipped=n))
            continue
        for s, ss in enumerate(scope_spans):
            sspath = f"{path}.{sskey}[{s}]"
            try:
                _dec_scope_spans(ss, sspath, ctx, id_encoding, where, spans, problems)
            except BadSpan as exc:
                n = len(ss.get(SPANS, ())) if type(ss) is dict and type(ss.get(SPANS)) is list else 0
                problems.append(Problem(where, f"{sspath}: {n} span(s) skipped: {exc}", skipped=n))
    return spans, problems
