"""Fast OTLP JSON Lines encoding of :class:`~launchtrace.spans.SpanData` for the file sink.

:func:`launchtrace.otlp.json_codec.encode_line` builds a dict per span and per attribute, which costs several
times a kernel launch per span. This encoder writes the same JSON directly as bytes and caches what repeats
from span to span: the JSON of each (key, value) attribute, span names, resources and scopes. Values are
rendered by ``json_codec.encode_any_value`` and ``orjson``, so the rules (hex ids, integer enums, 64-bit
integers as strings, NaN as ``"NaN"``, base64 bytes) are the codec's own; ``tests/test_encode_jsonl.py``
checks over random spans that each line loads to exactly what ``encode_line`` produces. A batch that
``orjson`` cannot write (lone surrogates) falls back to ``encode_line``, which replaces them.

Where it is built, the compiled ``launchtrace.otlp._jsonenc`` does this work, several times faster (figures in
``docs/export.md``, "Speed"): the export worker shares the GIL with the launching thread. This
Python code stays the definition: the compiled encoder writes the same bytes (``tests/test_jsonenc_native.py``)
and hands back any batch it does not handle (``Unsupported``: odd field types, deep nesting), which is then
encoded here.

Example::

    from launchtrace.otlp.encode_jsonl import JsonLinesEncoder
    line = JsonLinesEncoder().encode(spans)  # b'{"resourceSpans":[...]}\\n'
"""

from __future__ import annotations

from binascii import hexlify as _hex
from collections.abc import Sequence
from typing import Any

import orjson

from launchtrace import native
from launchtrace.otlp.attrcache import AttributeBlocks, FieldCache
from launchtrace.otlp.json_codec import _enc_event, _enc_link, _enc_status, encode_any_value, encode_line, group_spans
from launchtrace.otlp.jsonkeys import KEY, NAME, VALUE, VERSION, keyed
from launchtrace.spans import SpanData, SpanEvent, SpanLink

__all__ = ["JsonLinesEncoder"]

_CACHE_LIMIT = 1 << 16
_dumps = orjson.dumps


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# the JSON fragments of a span, their keys from the field table (jsonkeys), built once
_COMMON_SPAN = keyed(
    '{"<TRACE_ID>":"%b","<SPAN_ID>":"%b"%b%b%b,"<START_TIME_UNIX_NANO>":"%d","<END_TIME_UNIX_NANO>":"%d"%b}'
)
_IDS = keyed('{"<TRACE_ID>":"%b","<SPAN_ID>":"%b"')
_TRACE_STATE = keyed(',"<TRACE_STATE>":')
_PARENT = keyed(',"<PARENT_SPAN_ID>":"%b"')
_FLAGS = keyed(',"<FLAGS>":%d')
_NAME = keyed(',"<NAME>":')
_KIND = keyed(',"<KIND>":%d')
_KINDS = (b"", *(_KIND % k for k in range(1, 6)))  # kind 0 (unspecified) is left out
_TIMES = keyed(',"<START_TIME_UNIX_NANO>":"%d","<END_TIME_UNIX_NANO>":"%d"')
_ATTRIBUTES = keyed(',"<ATTRIBUTES>":')
_ATTRIBUTES_OPEN = keyed(',"<ATTRIBUTES>":[')
_DROPPED_ATTRIBUTES = keyed(',"<DROPPED_ATTRIBUTES_COUNT>":%d')
_EVENTS = keyed(',"<EVENTS>":')
_DROPPED_EVENTS = keyed(',"<DROPPED_EVENTS_COUNT>":%d')
_LINKS = keyed(',"<LINKS>":')
_DROPPED_LINKS = keyed(',"<DROPPED_LINKS_COUNT>":%d')
_STATUS = keyed(',"<STATUS>":')
_INT_VALUE_OPEN = keyed(',"<VALUE>":{"<INT_VALUE>":"')
_LINE_OPEN = keyed('{"<RESOURCE_SPANS>":[')
_RESOURCE_ATTRIBUTES = keyed('{"<ATTRIBUTES>":')
_RESOURCE_OPEN = keyed('%s{"<RESOURCE>":%s,"<SCOPE_SPANS>":[')
_SCOPE_ATTRIBUTES = keyed('"<ATTRIBUTES>":')
_SCOPE_OPEN = keyed('%s{"<SCOPE>":%s,"<SPANS>":[')
_SCHEMA_URL = keyed(',"<SCHEMA_URL>":')
_key_prefixes: dict[str, bytes] = {}


def _attr_json(key: Any, value: Any) -> bytes:
    if type(value) is int and type(key) is str and _INT64_MIN <= value <= _INT64_MAX:
        # the codec's own encoding of an int64 (a decimal string), without building dicts: sequence numbers
        # and pointers change on every span, so this runs once per span
        prefix = _key_prefixes.get(key)
        if prefix is None:
            if len(_key_prefixes) > _CACHE_LIMIT:
                _key_prefixes.clear()
            prefix = _key_prefixes[key] = _dumps({KEY: key})[:-1] + _INT_VALUE_OPEN
        return b'%b%d"}}' % (prefix, value)
    return _dumps({KEY: key if type(key) is str else str(key), VALUE: encode_any_value(value)})


def _attrs_json(attributes: tuple) -> bytes:
    return b"[" + b",".join([_attr_json(k, v) for k, v in attributes]) + b"]"


class _NoException(Exception):
    """Never raised: what ``encode`` catches when there is no compiled encoder."""


class JsonLinesEncoder:
    """Encodes batches of spans as OTLP JSON Lines, caching across batches (one encoder per thread).

    ``compiled``: use ``launchtrace.otlp._jsonenc`` (``None``: where it is built and
    ``LAUNCHTRACE_PURE_PYTHON`` is not set; ``False``: this Python code only, the reference the tests compare
    against; ``True``: required, ``ImportError`` when not built).
    """

    def __init__(self, compiled: bool | None = None) -> None:
        self._names: dict[str, bytes] = {}
        self._blocks = AttributeBlocks(FieldCache(_attr_json), separator=b",")
        self._native: Any = None
        self._unsupported: type[Exception] = _NoException
        if compiled is not False:
            module = native.load("launchtrace.otlp._jsonenc")
            if module is None and compiled:
                raise ImportError("launchtrace.otlp._jsonenc is not built (or LAUNCHTRACE_PURE_PYTHON is set)")
            if module is not None:
                self._native = module.Encoder(SpanData, SpanEvent, SpanLink, encode_any_value, group_spans)
                self._unsupported = module.Unsupported

    @property
    def compiled(self) -> bool:
        """Whether batches go through the compiled encoder first."""
        return self._native is not None

    def _name(self, name: str) -> bytes:
        if len(self._names) > _CACHE_LIMIT:
            self._names.clear()
        encoded = self._names[name] = _NAME + _dumps(name)
        return encoded

    def _attributes(self, attributes: tuple) -> bytes:
        return b"[" + self._blocks.block(attributes) + b"]"

    def _span(self, s: SpanData) -> bytes:
        if not (
            s.trace_state
            or s.flags
            or s.dropped_attributes_count
            or s.events
            or s.dropped_events_count
            or s.links
            or s.dropped_links_count
            or s.status_code
            or s.status_message
        ):  # a launch span's shape: one formatting operation, no copies of the growing line
            name = self._names.get(s.name)
            if name is None:
                name = self._name(s.name)
            parent = s.parent_span_id
            return _COMMON_SPAN % (
                _hex(s.trace_id),
                _hex(s.span_id),
                _PARENT % _hex(parent) if parent else b"",
                name,
                _KINDS[s.kind] if 0 <= s.kind < len(_KINDS) else _KIND % s.kind,
                s.start_ns,
                s.end_ns,
                _ATTRIBUTES_OPEN + self._blocks.block(s.attributes) + b"]" if s.attributes else b"",
            )
        out = _IDS % (_hex(s.trace_id), _hex(s.span_id))
        if s.trace_state:
            out += _TRACE_STATE + _dumps(s.trace_state)
        if s.parent_span_id:
            out += _PARENT % _hex(s.parent_span_id)
        if s.flags:
            out += _FLAGS % s.flags
        name = self._names.get(s.name)
        out += name if name is not None else self._name(s.name)
        if s.kind:
            out += _KIND % s.kind
        out += _TIMES % (s.start_ns, s.end_ns)
        if s.attributes:
            out += _ATTRIBUTES + self._attributes(s.attributes)
        if s.dropped_attributes_count:
            out += _DROPPED_ATTRIBUTES % s.dropped_attributes_count
        if s.events:
            out += _EVENTS + _dumps([_enc_event(e) for e in s.events])
        if s.dropped_events_count:
            out += _DROPPED_EVENTS % s.dropped_events_count
        if s.links:
            out += _LINKS + _dumps([_enc_link(k) for k in s.links])
        if s.dropped_links_count:
            out += _DROPPED_LINKS % s.dropped_links_count
        if s.status_code or s.status_message:
            out += _STATUS + _dumps(_enc_status(s))
        return out + b"}"

    def encode(self, spans: Sequence[SpanData]) -> bytes:
        """One line (with its newline): a ``TracesData`` holding ``spans``."""
        if self._native is not None:
            try:
                return self._native.encode(spans)
            except self._unsupported:
                pass  # a batch the compiled encoder leaves to this one
        try:
            return self._encode(spans)
        except (orjson.JSONEncodeError, UnicodeEncodeError):
            return (encode_line(spans) + "\n").encode("utf-8")

    def _encode(self, spans: Sequence[SpanData]) -> bytes:
        out = [_LINE_OPEN]  # pieces joined once: a batch's line can be megabytes
        for r, (first, scopes) in enumerate(group_spans(spans, self._span)):
            resource = _RESOURCE_ATTRIBUTES + _attrs_json(first.resource) + b"}" if first.resource else b"{}"
            out.append(_RESOURCE_OPEN % (b"," if r else b"", resource))
            for k, (sfirst, span_parts) in enumerate(scopes):
                scope: dict[str, Any] = {}
                if sfirst.scope_name:
                    scope[NAME] = sfirst.scope_name
                if sfirst.scope_version:
                    scope[VERSION] = sfirst.scope_version
                body = _dumps(scope)
                if sfirst.scope_attributes:
                    body = body[:-1] + (b"," if scope else b"") + _SCOPE_ATTRIBUTES
                    body += _attrs_json(sfirst.scope_attributes) + b"}"
                out.append(_SCOPE_OPEN % (b"," if k else b"", body))
                out.append(b",".join(span_parts))
                out.append(b"]")
                if sfirst.schema_url:
                    out.append(_SCHEMA_URL + _dumps(sfirst.schema_url))
                out.append(b"}")
            out.append(b"]")
            if first.resource_schema_url:
                out.append(_SCHEMA_URL + _dumps(first.resource_schema_url))
            out.append(b"}")
        out.append(b"]}\n")
        return b"".join(out)
