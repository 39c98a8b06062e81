"""Hand-framed protobuf for the tests that feed a reader bytes no protobuf library writes (a field a walk must
refuse after a valid span, a name that is not UTF-8): one length-delimited framing, one request shape.

Example::

    from protowire import field, request_of_span
    raw = request_of_span(field(0x0A, trace_id) + field(0x12, span_id) + b"\\x2a\\x02\\xc3\\x28")
"""

from __future__ import annotations


def field(tag: int, payload: bytes) -> bytes:
    """``payload`` as a length-delimited field: the one-byte ``tag``, the length as a varint, the bytes."""
    n, length = len(payload), b""
    while True:
        length += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            break
    return bytes([tag]) + length + payload


def request_of_span(span_bytes: bytes) -> bytes:
    """An ExportTraceServiceRequest whose only span (resource_spans 1 > scope_spans 2 > spans 2) is
    ``span_bytes``, as given."""
    return field(0x0A, field(0x12, field(0x12, span_bytes)))
