"""The span model shared by the exporter (which writes it) and the sources (which read it back).

A deliberately small, dependency-free mirror of an OTLP span: the encoders in ``launchtrace.export`` turn it
into OTLP protobuf bytes or OTLP/JSON, the readers in ``launchtrace.sources`` produce it from files, Jaeger and
Tempo. It is not the OpenTelemetry SDK's ``ReadableSpan``: building one of those per launch costs several times
a CPU kernel launch, and the readers must not need an SDK at all.

Attribute values are Python ``str``, ``bool``, ``int``, ``float``, ``bytes``, or a ``tuple`` of those
(nesting allowed, as OTLP's ``ArrayValue`` allows), or a ``dict`` (OTLP ``KvlistValue``).

Example::

    from launchtrace.spans import SpanData
    span = SpanData(trace_id=bytes(15) + b"\\x01", span_id=bytes(7) + b"\\x02", parent_span_id=None,
                    name="sim.integrate", start_ns=1, end_ns=2, attributes=(("launchtrace.op", "launch"),))
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = [
    "KIND_CLIENT",
    "KIND_CONSUMER",
    "KIND_INTERNAL",
    "KIND_PRODUCER",
    "KIND_SERVER",
    "KIND_UNSPECIFIED",
    "STATUS_ERROR",
    "STATUS_OK",
    "STATUS_UNSET",
    "SpanData",
    "SpanEvent",
    "SpanLink",
]

KIND_UNSPECIFIED, KIND_INTERNAL, KIND_SERVER, KIND_CLIENT, KIND_PRODUCER, KIND_CONSUMER = range(6)
STATUS_UNSET, STATUS_OK, STATUS_ERROR = range(3)

Attributes = tuple  # tuple[tuple[str, Any], ...]: ordered, keys unique


@dataclasses.dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes = ()
    dropped_attributes_count: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class SpanLink:
    trace_id: bytes
    span_id: bytes
    attributes: Attributes = ()
    trace_state: str = ""
    flags: int = 0
    dropped_attributes_count: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class SpanData:
    """One span with the resource and instrumentation scope it was reported under.

    ``trace_id`` is 16 bytes, ``span_id`` and ``parent_span_id`` 8 bytes; ``parent_span_id`` is ``None`` for
    a root span. ``resource`` and ``scope_attributes`` are attribute tuples; spans of one batch usually share
    the same tuple objects.
    """

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes | None
    name: str
    start_ns: int = 0
    end_ns: int = 0
    attributes: Attributes = ()
    kind: int = KIND_INTERNAL
    status_code: int = STATUS_UNSET
    status_message: str = ""
    events: tuple = ()  # SpanEvent
    links: tuple = ()  # SpanLink
    trace_state: str = ""
    flags: int = 0
    dropped_attributes_count: int = 0
    dropped_events_count: int = 0
    dropped_links_count: int = 0
    resource: Attributes = ()
    resource_schema_url: str = ""
    scope_name: str = ""
    scope_version: str = ""
    scope_attributes: Attributes = ()
    schema_url: str = ""

    def attribute(self, key: str, default: Any = None) -> Any:
        """The value of attribute ``key`` (a linear scan: spans carry few dozen attributes)."""
        for k, v in self.attributes:
            if k == key:
                return v
        return default

    def attributes_dict(self) -> dict[str, Any]:
        return dict(self.attributes)

    @property
    def trace_id_hex(self) -> str:
        return self.trace_id.hex()

    @property
    def span_id_hex(self) -> str:
        return self.span_id.hex()
