"""The OTLP trace messages' fields in one table: protobuf name, OTLP/JSON key, field number, type and tag.

Why: launchtrace writes and reads OTLP in several codecs (protobuf and JSON, Python and C), and each used to
spell the keys and numbers itself. The table is read from the opentelemetry-proto descriptors, the
definition of OTLP, so nothing in it is typed by hand: ``scripts/gen_otlp_keys.py`` writes its JSON keys out
as constants for the codecs (:mod:`launchtrace.otlp.jsonkeys` for ``json_codec``, ``transcode``, ``collect``, the
``msgspec`` structs of ``json_fast`` and the OTLP keys of ``sources.documents`` and ``sources.traceql_metrics``;
``_jsonkeys.h`` for ``_jsonenc.c`` and ``_jsonread.c``), and its field numbers and wire tags as C macros
(``_otlpfields.h``, for ``_protoenc.c``). ``tests/test_otlp_fields.py`` checks
that the generated files are current and that those codecs spell no key, number or tag by hand.
The compiled protobuf encoder's bytes are checked against the protobuf library's parse of them
(``test_protoenc_native.py``); :mod:`~launchtrace.otlp.encode_proto`'s fallback is the generated classes themselves.

Messages are named as in the ``.proto`` files without their package (``"Span"``, ``"Span.Event"``,
``"AnyValue"``), fields by their protobuf name.

Example::

    from launchtrace.otlp.fields import MESSAGES, tag
    MESSAGES["Span"]["start_time_unix_nano"].json  # 'startTimeUnixNano'
    tag("Span", "kind")                            # b'0' (field 6, varint)
"""

from __future__ import annotations

from typing import NamedTuple

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

__all__ = ["MESSAGES", "Field", "json_key", "tag"]

_WIRE_TYPES = {
    FieldDescriptor.TYPE_DOUBLE: 1,
    FieldDescriptor.TYPE_FIXED64: 1,
    FieldDescriptor.TYPE_SFIXED64: 1,
    FieldDescriptor.TYPE_FLOAT: 5,
    FieldDescriptor.TYPE_FIXED32: 5,
    FieldDescriptor.TYPE_SFIXED32: 5,
    FieldDescriptor.TYPE_STRING: 2,
    FieldDescriptor.TYPE_BYTES: 2,
    FieldDescriptor.TYPE_MESSAGE: 2,
}  # every other type of OTLP's fields (ints, bools, enums) is a varint: wire type 0
_TYPE_NAMES = {value: name[5:].lower() for name, value in vars(FieldDescriptor).items() if name.startswith("TYPE_")}


class Field(NamedTuple):
    """One field of an OTLP message."""

    name: str  # protobuf name: start_time_unix_nano
    json: str  # OTLP/JSON key: startTimeUnixNano
    number: int
    type: str  # protobuf type: fixed64, string, message, enum, ...
    repeated: bool
    tag: bytes  # the field's key on the wire (number and wire type, as a varint)


def _wire_key(number: int, wire: int) -> bytes:
    """The varint of ``number << 3 | wire``: one byte up to field 15, two up to 2047 (OTLP's are below 20)."""
    key = number << 3 | wire
    if key >= 1 << 14:
        raise ValueError(f"field number {number} is beyond this table's two-byte keys")
    return bytes([key]) if key < 0x80 else bytes([key & 0x7F | 0x80, key >> 7])


def _field(f: FieldDescriptor) -> Field:
    wire = _WIRE_TYPES.get(f.type, 0)
    return Field(f.name, f.json_name, f.number, _TYPE_NAMES[f.type], f.is_repeated, _wire_key(f.number, wire))


def _short_name(d: Descriptor) -> str:
    return d.full_name.removeprefix(d.file.package + ".")


def _tables(root: Descriptor) -> dict[str, dict[str, Field]]:
    """Every message reachable from ``root``, by short name: its fields by protobuf name."""
    out: dict[str, dict[str, Field]] = {}
    todo = [root]
    while todo:
        d = todo.pop()
        name = _short_name(d)
        if name in out:
            continue
        out[name] = {f.name: _field(f) for f in d.fields}
        todo.extend(f.message_type for f in d.fields if f.message_type is not None)
    return out


MESSAGES: dict[str, dict[str, Field]] = _tables(TracesData.DESCRIPTOR)
"""``TracesData`` and every message inside it: ``ResourceSpans``, ``Span``, ``Span.Event``, ``AnyValue``..."""


def tag(message: str, field: str) -> bytes:
    """The wire key of ``message``'s field ``field`` (``KeyError``: OTLP has no such field)."""
    return MESSAGES[message][field].tag


def json_key(message: str, field: str) -> str:
    """The OTLP/JSON key of ``message``'s field ``field``."""
    return MESSAGES[message][field].json
