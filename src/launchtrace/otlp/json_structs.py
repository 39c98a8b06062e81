"""The typed skeleton of an OTLP JSON line that :mod:`launchtrace.otlp.json_fast`'s Python path reads with
``msgspec`` (the module docstring there says why and how).

A module of its own so that ``msgspec`` is imported only when that path runs: where the compiled reader is built,
the commands that read files (``baseline build``: ~10 ms of its start-up) never need it.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from launchtrace.otlp import jsonkeys

__all__ = ["UNSET", "DecodeError", "decode_line"]

# signed 64-bit integers: orjson reads integers beyond 64 bits as floats, msgspec as ints, so those (and the
# unsigned ones from 2**63, which msgspec cannot bound) get no answer
_Int = Annotated[int, Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class _OtlpStruct(msgspec.Struct, forbid_unknown_fields=True, gc=False, rename=jsonkeys.BY_FIELD):
    """A message of a TracesData line: its fields named as in OTLP's ``.proto``, read by their OTLP/JSON keys
    (the field table's, :mod:`launchtrace.otlp.jsonkeys`); an unknown key is no answer."""


class _Status(_OtlpStruct):
    code: _Int | str = 0
    message: str = ""


class _Event(_OtlpStruct):
    time_unix_nano: _Int | str = 0
    name: str = ""
    attributes: Raw | UnsetType = UNSET
    dropped_attributes_count: _Int | str = 0


class _Link(_OtlpStruct):
    trace_id: str = ""
    span_id: str = ""
    trace_state: str = ""
    attributes: Raw | UnsetType = UNSET
    dropped_attributes_count: _Int | str = 0
    flags: _Int | str = 0


class _Span(_OtlpStruct):
    trace_id: str = ""
    span_id: str = ""
    trace_state: str = ""
    parent_span_id: str = ""
    flags: _Int | str = 0
    name: str = ""
    kind: _Int | str = 0
    start_time_unix_nano: _Int | str = 0
    end_time_unix_nano: _Int | str = 0
    attributes: Raw | UnsetType = UNSET
    dropped_attributes_count: _Int | str = 0
    events: list[_Event] | None = None
    dropped_events_count: _Int | str = 0
    links: list[_Link] | None = None
    dropped_links_count: _Int | str = 0
    status: _Status | None = None


class _Scope(_OtlpStruct):
    name: str = ""
    version: str = ""
    attributes: Raw | UnsetType = UNSET
    dropped_attributes_count: _Int | str = 0  # not read by the general decoder either


class _ScopeSpans(_OtlpStruct):
    scope: _Scope | None = None
    spans: list[_Span] = []
    schema_url: str = ""


class _Resource(_OtlpStruct):
    attributes: Raw | UnsetType = UNSET
    dropped_attributes_count: _Int | str = 0  # not read by the general decoder either


class _ResourceSpans(_OtlpStruct):
    resource: _Resource | None = None
    scope_spans: list[_ScopeSpans] = []  # "instrumentationLibrarySpans" is an unknown field here: no answer
    schema_url: str = ""


class _TracesData(_OtlpStruct):
    resource_spans: list[_ResourceSpans]  # any other top-level key (batches, result, trace...): no answer


decode_line = msgspec.json.Decoder(_TracesData).decode
DecodeError = msgspec.DecodeError
