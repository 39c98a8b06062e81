"""A fast reader for the common OTLP JSON line: typed skeleton, cached attributes, or no answer at all.

:func:`launchtrace.otlp.json_codec.decode_traces_data` needs the line as dicts, and ``orjson.loads`` alone,
building a dict and a string per attribute, costs more per span than the whole of this reader.
:class:`FastLineDecoder` parses the span skeleton (ids, name, kind, times, status, events, links) with
``msgspec`` into typed structs, keeps each ``attributes`` array as its raw JSON text and decodes that through a
cache of attribute texts: a launch span's attributes repeat from span to span, and the one that never repeats
(a sequence number) is read through a template of its key.

It returns exactly what the general decoder returns for the line (the same spans, equal field for field, and
no problems) or ``None``, and the caller then runs the general decoder on that line, which reports whatever is
wrong as it always did. Anything this reader is not sure about gives ``None``: a problem of any kind, a key it
does not know (``forbid_unknown_fields``), legacy keys (``batches``, ``instrumentationLibrarySpans``), another
JSON type than the usual one for a field, integers beyond 64 bits, ``\\u`` escapes. ``tests/test_json_fast.py``
checks the two against each other on generated spans, the upstream fixtures and malformed lines.

Why the attribute cache is sound. A compact array (``orjson``, our sink) reads ``[{"key":K1,...},{"key":...}]``.
The reader splits the text between ``[{"key":`` and ``}]`` on the bytes ``},{"key":`` and looks each piece
``Pi`` up. With ``Wi = {"key": + Pi + }`` the array's text is exactly ``[W1,W2,...,Wn]``. A piece gets a value
only after ``orjson`` parsed its ``Wi`` on its own (with at most :data:`MAX_BRACKETS` brackets, so its nesting
stays far inside ``orjson``'s 1,024 levels and Python's recursion limit). So when every piece has a value, every
``Wi`` is one valid JSON object on its own, ``[W1,...,Wn]`` is a valid array with the elements ``W1...Wn``, and
as JSON's grammar is unambiguous that is *the* parse of the array: the pieces decode to what the whole array
decodes to. A split in the wrong place (``},{"key":`` inside a nested ``kvlistValue``) leaves some ``Wi``
unbalanced: it does not parse, and that array is parsed whole instead. (Inside a string those bytes cannot
occur: their ``"`` would end it and leave ``key`` outside one.) A piece's value is the general decoder's
``_dec_attrs`` of its ``Wi``, so the value rules (64-bit integers as strings, ``"NaN"``, base64 bytes, ...) are
the codec's own; a value holding a ``dict`` is not cached, so no two spans share a mutable value.

A template covers the piece that differs in every span: when a piece that parsed ends in one string value
(``"launchtrace.seq","value":{"intValue":"41"}``) whose bytes are plain ASCII that needs no escape, the same
text with other such bytes in that place is the same object with that one string changed, so
``..."intValue":"`` + digits + ``"}`` is read as ``(key, int(digits))`` without a parse. When most pieces of
an array are new (every value differs from span to span), the next :data:`SKIP` arrays are parsed whole with
``orjson``, which is then faster than piece by piece; so the worst case costs what the general decoder costs.

Why nothing the general decoder rejects gets through. Every field is typed as the general decoder reads it, so
``msgspec`` checks every occurrence of it, duplicates included, as strictly as ``orjson`` does (strings,
escapes, UTF-8, numbers); ``attributes`` texts are checked by ``orjson`` as above. What ``msgspec`` only
skips (without checking UTF-8, numbers that overflow a double or nesting depth) is an ``attributes`` text the
reader never decodes: the earlier copy of a key written twice in one object (the last one counts, as in
``orjson``), whether ``attributes`` itself or a ``resource``, ``spans``, ``events``... holding one. So a line is
accepted only when the bytes ``"attributes"`` occur in it exactly as often as the reader decoded an
``attributes`` field, and it has no ``\\u`` escape (``msgspec`` matches an escaped key to its field, which the
count would not see).

The compiled reader. Where ``launchtrace.otlp._jsonread`` is built (:func:`launchtrace.native.load`), a
decoder first asks it: a hand-written strict JSON parser in C for this one line shape that builds the spans
directly, under the same contract (the general decoder's spans or ``None``; see the comment at the top of
``_jsonread.c``). Its ``None`` sends the line to the Python fast path above, and that one's ``None`` to the
general decoder, as before; :meth:`FastLineDecoder.decode_python` is the Python path alone, the reference the
tests and ``benchmarks/bench_read.py`` compare the compiled reader with (``LAUNCHTRACE_PURE_PYTHON=1``: no
compiled reader at all).

Example::

    from launchtrace.otlp.json_fast import FastLineDecoder
    decoder = FastLineDecoder()        # one per file: the attribute cache lives here
    spans = decoder.decode(line)       # list[SpanData], or None: read the line with decode_traces_data
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from launchtrace import native
from launchtrace._lazy import lazy_module
from launchtrace.otlp import jsonkeys
from launchtrace.otlp.ids import SPAN_ID_BYTES, TRACE_ID_BYTES, decode_id
from launchtrace.otlp.json_codec import KIND_NAMES, STATUS_NAMES, _dec_attrs, _dec_bytes, _enum, _int, _new_span
from launchtrace.spans import SpanData, SpanEvent, SpanLink

if TYPE_CHECKING:
    from msgspec import Raw

    from launchtrace.otlp.json_structs import _Event, _Link, _TracesData

# the Python path's own modules, imported when it first runs: the compiled reader needs neither
orjson = lazy_module("orjson")
_structs = lazy_module("launchtrace.otlp.json_structs")

__all__ = ["CACHE_LIMIT", "MAX_BRACKETS", "SKIP", "FastLineDecoder", "compiled_decoder"]

CACHE_LIMIT = 1 << 14  # attribute pieces remembered per decoder (about 3 MB), emptied past it; templates too
SKIP = 7  # after an array of mostly new pieces, arrays parsed whole before the pieces are looked up again
MAX_BRACKETS = 512  # "{" plus "[" in a text parsed on its own: bounds its nesting depth

_fromhex = bytes.fromhex
_HEAD = jsonkeys.keyed('[{"<KEY>":')
_TAIL = b"}]"
_SEP = jsonkeys.keyed('},{"<KEY>":')
_KEY = jsonkeys.keyed('{"<KEY>":')
_ATTRIBUTES = jsonkeys.keyed('"<ATTRIBUTES>"')  # the key's bytes, counted in a line
_END = b'"}'  # a piece whose value is one string: ..."value":{"intValue":"123"} (the split took the last })
_SAFE = bytes(c for c in range(0x20, 0x7F) if c not in b'"\\')  # string bytes that need no escape or check
_ZERO_SPAN_ID = bytes(SPAN_ID_BYTES)
_KINDS = frozenset(range(len(KIND_NAMES)))
_IMMUTABLE = frozenset((str, int, float, bool, bytes, type(None)))


class _NoAnswer(Exception):
    """The line is not one the fast path can vouch for; the general decoder reads it."""


def _shareable(value: object) -> bool:
    """Whether one decoded value may be handed to many spans (nothing in it can be changed)."""
    t = type(value)
    if t in _IMMUTABLE:
        return True
    return t is tuple and all(_shareable(x) for x in value)  # type: ignore[attr-defined]


def _parse_alone(text: bytes) -> object:
    """``orjson.loads(text)`` for a text whose nesting stays far inside every limit, else :class:`_NoAnswer`.

    Each level of nesting takes two bytes, so a text of up to twice :data:`MAX_BRACKETS` bytes needs no count.
    """
    if len(text) > 2 * MAX_BRACKETS and text.count(b"{") + text.count(b"[") > MAX_BRACKETS:
        raise _NoAnswer
    return orjson.loads(text)


class _AttributeTexts:
    """Attribute arrays from their JSON text, through a cache of the pieces between ``},{"key":``."""

    def __init__(self) -> None:
        self.pieces: dict[bytes, tuple] = {}
        # "...","value":{"intValue":" (or stringValue) of a piece that parsed -> (key, is_int): the same text
        # with other digits (or other plain ASCII) in place of the value is that key with the other value
        self.templates: dict[bytes, tuple[str, bool]] = {}
        self.skip = 0  # arrays still to parse whole, without looking their pieces up

    def decode(self, text: bytes) -> tuple:
        """The attributes of one array's JSON text, as ``_dec_attrs`` reads them (its errors too)."""
        if self.skip:
            self.skip -= 1
        elif text[:8] == _HEAD and text[-2:] == _TAIL:
            pieces = text[8:-2].split(_SEP)
            found = tuple(map(self.pieces.get, pieces))
            if None not in found:
                return found
            try:
                return self.misses(pieces, found)
            except (_NoAnswer, ValueError):  # a piece that is not JSON alone: a split inside a nested value
                pass
        elif text == b"[]":
            return ()
        return _dec_attrs(_parse_alone(text))

    def misses(self, pieces: list[bytes], found: tuple) -> tuple:
        """``found`` with its ``None`` s decoded: by a template, or each piece parsed on its own.

        When most pieces are new, the next :data:`SKIP` arrays are parsed whole (``skip``): parsing the array
        at once is faster than piece by piece, and most of its pieces would be new again.
        """
        cache = self.pieces
        if len(cache) >= CACHE_LIMIT:
            cache.clear()
        count = found.count(None)
        if count == 1:  # the usual case: one attribute (a sequence number...) differs per span
            i = found.index(None)
            item = self.by_template(pieces[i])
            if item is not None:
                cache[pieces[i]] = item
                return (*found[:i], item, *found[i + 1 :])
            missing = [i]
        else:
            if count * 2 > len(found):
                self.skip = SKIP
            missing = [i for i, item in enumerate(found) if item is None]
        out = list(found)
        parse = []
        for i in missing:
            piece = pieces[i]
            item = self.by_template(piece)
            if item is None:
                parse.append(i)
            else:
                out[i] = cache[piece] = item
        if parse:
            objs = [_parse_alone(_KEY + pieces[i] + b"}") for i in parse]
            for i, obj, item in zip(parse, objs, _dec_attrs(objs)):
                out[i] = item
                if _shareable(item[1]):
                    cache[pieces[i]] = item
                    self.learn(pieces[i], obj, item)
        return tuple(out)

    def by_template(self, piece: bytes) -> tuple | None:
        """``piece``'s item through the template of its text before the value, or ``None``.

        The value must be plain digits (or plain ASCII for a string): ``int()`` alone would also take bytes
        a JSON string cannot hold unescaped (a tab), and such a line is no JSON at all.
        """
        head, _, value = piece.rpartition(b':"')
        template = self.templates.get(head)
        if template is None or value[-2:] != _END:
            return None
        key, is_int = template
        value = value[:-2]
        if is_int:
            return (key, int(value)) if value.isdigit() else None
        return None if value.strip(_SAFE) else (key, value.decode("ascii"))

    def learn(self, piece: bytes, obj: Any, item: tuple) -> None:
        """Remember ``piece``'s template when ``obj``, what it parsed to alone, is ``{"key", "value"}`` with
        one intValue or stringValue, and the piece ends with that string, plain ASCII (module docstring).

        ``x.encode() == text`` below makes sure the bytes before ``"}`` are that string's whole content.
        """
        value = obj.get(jsonkeys.VALUE)
        if len(obj) != 2 or type(value) is not dict or len(value) != 1 or piece[-2:] != _END:
            return
        ((kind, x),) = value.items()
        is_int = kind == jsonkeys.INT_VALUE
        head, sep, text = piece.rpartition(b':"')
        text = text[:-2]
        plain = text.isdigit() if is_int else kind == jsonkeys.STRING_VALUE and not text.strip(_SAFE)
        if sep and plain and type(x) is str and x.encode() == text:
            if len(self.templates) >= CACHE_LIMIT:
                self.templates.clear()
            self.templates[head] = (item[0], is_int)


def compiled_decoder(id_encoding: str = "auto") -> Any:
    """The compiled reader's decoder (``decode(line) -> list[SpanData] | None``), or ``None`` where it is not
    built, ``LAUNCHTRACE_PURE_PYTHON`` is set, or it does not accept these span classes (a field added to them
    and not to it: it checks their slots rather than fill them wrongly)."""
    module = native.load("launchtrace.otlp._jsonread")
    if module is None:
        return None
    try:
        return module.Decoder(
            SpanData, SpanEvent, SpanLink, decode_id, _dec_bytes, KIND_NAMES, STATUS_NAMES, id_encoding
        )
    except TypeError:
        return None


class FastLineDecoder:
    """Decodes common OTLP JSON lines to spans (see the module docstring); one per file or stream.

    ``compiled=False`` leaves the compiled reader out even where it is built (the Python reference alone).
    """

    def __init__(self, id_encoding: str = "auto", *, compiled: bool = True) -> None:
        self.id_encoding = id_encoding
        self._texts = _AttributeTexts()
        self._hex_ids = id_encoding in ("auto", "hex")  # what decode_id's own plain-hex shortcut requires
        self.compiled = compiled_decoder(id_encoding) if compiled else None

    def _attributes(self, raw: Raw) -> tuple:
        return self._texts.decode(bytes(raw))

    def decode(self, line: bytes | memoryview) -> list[SpanData] | None:
        """The spans of one JSON line, exactly as the general decoder reads them, or ``None``: ask it instead.

        The compiled reader first where it is built (it reads a memoryview in place), then the Python fast path
        for a line it has no answer for.
        """
        if self.compiled is not None:
            spans = self.compiled.decode(line)
            if spans is not None:
                return spans
        line = bytes(line)  # the same object when it is bytes; a view of a read buffer is copied here, once
        return self.decode_python(line)

    def decode_python(self, line: bytes) -> list[SpanData] | None:
        """:meth:`decode` by the Python fast path alone (the reference of the compiled reader)."""
        try:
            data = _structs.decode_line(line)
        except (_structs.DecodeError, RecursionError):  # ValidationError too: malformed, another shape, odd types
            return None
        try:
            spans, attribute_fields = self._spans(data)
        except (_NoAnswer, ValueError, RecursionError):  # IdError, the codec's BadSpan, orjson's errors
            return None
        # an "attributes" key twice in one object hides its first value from every check (module docstring)
        if line.count(_ATTRIBUTES) != attribute_fields or (b"\\" in line and b"\\u" in line):
            return None
        return spans

    def _spans(self, data: _TracesData) -> tuple[list[SpanData], int]:
        out: list[SpanData] = []
        append = out.append
        texts = self._texts
        pieces_get = texts.pieces.get
        misses = texts.misses
        attributes = self._attributes
        encoding = self.id_encoding
        hex_ids = self._hex_ids
        unset = _structs.UNSET
        fields = 0  # attributes fields decoded
        trace_ids: dict[str, bytes] = {}
        parent_ids: dict[str, bytes] = {}
        for rs in data.resource_spans:
            resource_attrs: tuple = ()
            if rs.resource is not None and rs.resource.attributes is not unset:
                resource_attrs = attributes(rs.resource.attributes)
                fields += 1
            resource_schema_url = rs.schema_url
            for ss in rs.scope_spans:
                scope = ss.scope
                scope_name, scope_version, scope_attrs = "", "", ()
                if scope is not None:
                    scope_name, scope_version = scope.name, scope.version
                    if scope.attributes is not unset:
                        scope_attrs = attributes(scope.attributes)
                        fields += 1
                schema_url = ss.schema_url
                for d in ss.spans:
                    text = d.trace_id
                    trace_id = trace_ids.get(text)
                    if trace_id is None:
                        trace_id = trace_ids[text] = decode_id(text, TRACE_ID_BYTES, encoding)
                    text = d.span_id
                    span_id = b""
                    if hex_ids and len(text) == 16:  # decode_id's own shortcut, inline
                        try:
                            span_id = _fromhex(text)
                        except ValueError:
                            pass
                    if len(span_id) != SPAN_ID_BYTES or span_id == _ZERO_SPAN_ID:
                        span_id = decode_id(text, SPAN_ID_BYTES, encoding)
                    text = d.parent_span_id
                    if text:
                        parent_id = parent_ids.get(text)
                        if parent_id is None:
                            parent_id = parent_ids[text] = decode_id(text, SPAN_ID_BYTES, encoding)
                    else:
                        parent_id = None
                    raw = d.attributes
                    if raw is unset:
                        attrs: tuple = ()
                    else:
                        fields += 1
                        text = bytes(raw)  # the common case of _AttributeTexts.decode, inline
                        if not texts.skip and text[:8] == _HEAD and text[-2:] == _TAIL:
                            pieces = text[8:-2].split(_SEP)
                            attrs = tuple(map(pieces_get, pieces))
                            if None in attrs:
                                try:
                                    attrs = misses(pieces, attrs)
                                except (_NoAnswer, ValueError):  # not JSON alone: a split inside a nested value
                                    attrs = _dec_attrs(_parse_alone(text))
                        else:
                            attrs = texts.decode(text)
                    start, end, kind, flags = d.start_time_unix_nano, d.end_time_unix_nano, d.kind, d.flags
                    dropped_attrs = d.dropped_attributes_count
                    dropped_events = d.dropped_events_count
                    dropped_links = d.dropped_links_count
                    status, events, links = d.status, d.events, d.links
                    if status is not None:
                        code = _enum(status.code, STATUS_NAMES, "status code")
                        message = status.message
                    else:
                        code, message = 0, ""
                    if events:
                        events, n = self._events(events)
                        fields += n
                    else:
                        events = ()
                    if links:
                        links, n = self._links(links)
                        fields += n
                    else:
                        links = ()
                    # msgspec gives int or str; for a str the general decoder's _int is int() (ValueError: no answer)
                    append(
                        _new_span(
                            trace_id,
                            span_id,
                            parent_id,
                            d.name,
                            start if type(start) is int else int(start),
                            end if type(end) is int else int(end),
                            attrs,
                            kind if kind in _KINDS else _enum(kind, KIND_NAMES, "span kind"),
                            code,
                            message,
                            events,
                            links,
                            d.trace_state,
                            flags if type(flags) is int else int(flags),
                            dropped_attrs if type(dropped_attrs) is int else int(dropped_attrs),
                            dropped_events if type(dropped_events) is int else int(dropped_events),
                            dropped_links if type(dropped_links) is int else int(dropped_links),
                            resource_attrs,
                            resource_schema_url,
                            scope_name,
                            scope_version,
                            scope_attrs,
                            schema_url,
                        )
                    )
        return out, fields

    def _events(self, events: list[_Event]) -> tuple[tuple[SpanEvent, ...], int]:
        out = []
        fields = 0
        unset = _structs.UNSET
        for e in events:
            attrs: tuple = ()
            if e.attributes is not unset:
                attrs = self._attributes(e.attributes)
                fields += 1
            out.append(SpanEvent(e.name, _int(e.time_unix_nano, "time"), attrs, _int(e.dropped_attributes_count, "n")))
        return tuple(out), fields

    def _links(self, links: list[_Link]) -> tuple[tuple[SpanLink, ...], int]:
        out = []
        fields = 0
        encoding = self.id_encoding
        unset = _structs.UNSET
        for k in links:
            attrs: tuple = ()
            if k.attributes is not unset:
                attrs = self._attributes(k.attributes)
                fields += 1
            out.append(
                SpanLink(
                    decode_id(k.trace_id, TRACE_ID_BYTES, encoding),
                    decode_id(k.span_id, SPAN_ID_BYTES, encoding),
                    attrs,
                    k.trace_state,
                    _int(k.flags, jsonkeys.FLAGS),
                    _int(k.dropped_attributes_count, "n"),
                )
            )
        return tuple(out), fields
