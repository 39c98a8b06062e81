"""The protobuf encoder against messages built field by field with opentelemetry-proto.

The reference below uses only the generated classes (``Span``, ``KeyValue``, ``AnyValue``...), set one field
at a time, with the same documented conversion rules as the encoder; the encoder's bytes must parse into a
message equal to it, and re-serialise to the same bytes. Every test runs twice, through the ``encoder`` fixture:
with the compiled encoder (``launchtrace.otlp._protoenc``, where built) and with the library path that runs
without a compiler (``encode_proto.request_message``: the generated classes filled from the spans).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData

from launchtrace import native
from launchtrace.otlp.encode_proto import ProtoEncoder, encode_spans
from launchtrace.spans import SpanData
from strategies import spans, tricky_values

INT64 = (-(1 << 63), (1 << 63) - 1)


@pytest.fixture(scope="module", params=["compiled", "python"], autouse=True)
def encoder(request):
    """Which encoder ``ProtoEncoder()`` and ``encode_spans`` use for the module's tests (module-scoped, so
    hypothesis's tests may use it): the compiled one, or the library (``LAUNCHTRACE_PURE_PYTHON=1``)."""
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "python":
            mp.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
        elif native.load("launchtrace.otlp._protoenc") is None:  # raises under LAUNCHTRACE_REQUIRE_NATIVE
            pytest.skip("launchtrace.otlp._protoenc is not built (or pure Python)")
        assert (ProtoEncoder().compiled is not None) == (request.param == "compiled")
        yield request.param


# -- reference: field by field with the generated classes --
def ref_any(value: Any, out: AnyValue) -> None:
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, int):
        if INT64[0] <= value <= INT64[1]:
            out.int_value = value
        else:
            out.string_value = str(value)
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, (tuple, list)):
        out.array_value.SetInParent()
        for v in value:
            ref_any(v, out.array_value.values.add())
    elif isinstance(value, dict):
        out.kvlist_value.SetInParent()
        for k, v in value.items():
            ref_kv(k, v, out.kvlist_value.values.add())
    else:
        out.string_value = str(value)


def ref_kv(key: str, value: Any, out: KeyValue) -> None:
    out.key = key
    ref_any(value, out.value)


def ref_span(s: SpanData, out: Span) -> None:
    out.trace_id = s.trace_id
    out.span_id = s.span_id
    out.trace_state = s.trace_state
    if s.parent_span_id:
        out.parent_span_id = s.parent_span_id
    out.flags = s.flags
    out.name = s.name
    out.kind = s.kind
    out.start_time_unix_nano = s.start_ns
    out.end_time_unix_nano = s.end_ns
    for k, v in s.attributes:
        ref_kv(k, v, out.attributes.add())
    out.dropped_attributes_count = s.dropped_attributes_count
    for e in s.events:
        ev = out.events.add()
        ev.time_unix_nano = e.time_ns
        ev.name = e.name
        for k, v in e.attributes:
            ref_kv(k, v, ev.attributes.add())
        ev.dropped_attributes_count = e.dropped_attributes_count
    out.dropped_events_count = s.dropped_events_count
    for link in s.links:
        lk = out.links.add()
        lk.trace_id = link.trace_id
        lk.span_id = link.span_id
        lk.trace_state = link.trace_state
        for k, v in link.attributes:
            ref_kv(k, v, lk.attributes.add())
        lk.dropped_attributes_count = link.dropped_attributes_count
        lk.flags = link.flags
    out.dropped_links_count = s.dropped_links_count
    if s.status_code or s.status_message:
        out.status.code = s.status_code
        out.status.message = s.status_message


def reference(spans: list[SpanData]) -> TracesData:
    """Group by equal resource then equal scope, first appearance first; spans keep their order."""
    msg = TracesData()
    rs_index: dict[str, tuple[ResourceSpans, dict[str, ScopeSpans]]] = {}
    for s in spans:
        rkey = repr((s.resource, s.resource_schema_url))
        if rkey not in rs_index:
            rs = msg.resource_spans.add()
            rs.resource.SetInParent()
            for k, v in s.resource:
                ref_kv(k, v, rs.resource.attributes.add())
            rs.schema_url = s.resource_schema_url
            rs_index[rkey] = (rs, {})
        rs, scopes = rs_index[rkey]
        skey = repr((s.scope_name, s.scope_version, s.scope_attributes, s.schema_url))
        if skey not in scopes:
            ss = rs.scope_spans.add()
            ss.scope.SetInParent()
            ss.scope.name = s.scope_name
            ss.scope.version = s.scope_version
            for k, v in s.scope_attributes:
                ref_kv(k, v, ss.scope.attributes.add())
            ss.schema_url = s.schema_url
            scopes[skey] = ss
        ref_span(s, scopes[skey].spans.add())
    return msg


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans, max_size=6))
def test_bytes_parse_to_the_field_by_field_message(batch: list[SpanData]) -> None:
    encoded = encode_spans(batch)
    expected = reference(batch)
    got = TracesData.FromString(encoded)
    assert got == expected
    assert ExportTraceServiceRequest.FromString(encoded).SerializeToString(deterministic=True) == (
        expected.SerializeToString(deterministic=True)
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(spans, min_size=1, max_size=4), st.lists(spans, min_size=1, max_size=4))
def test_caches_do_not_leak_between_batches(a: list[SpanData], b: list[SpanData]) -> None:
    """One encoder reused across batches gives the same bytes as a fresh one (the caches are exact)."""
    encoder = ProtoEncoder()
    encoder.encode(a)
    assert TracesData.FromString(encoder.encode(b)) == reference(b)
    assert encoder.encode(a) == encode_spans(a)


def test_cache_distinguishes_equal_but_different_values() -> None:
    """1, True and 1.0 are equal in Python, as are 0.0 and -0.0, (1,) and (True,): their encodings differ."""
    encoder = ProtoEncoder()
    base = {"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "parent_span_id": None, "name": "k"}
    for value in (1, True, 1.0, 0.0, -0.0, (1,), (True,), (1.0,), float("nan"), "1"):
        span = SpanData(**base, attributes=(("x", value),))
        got = TracesData.FromString(encoder.encode([span]))
        assert got == reference([span]), value
        any_value = got.resource_spans[0].scope_spans[0].spans[0].attributes[0].value
        assert (
            any_value.WhichOneof("value")
            == {
                int: "int_value",
                bool: "bool_value",
                float: "double_value",
                tuple: "array_value",
                str: "string_value",
            }[type(value)]
        )


def test_unique_values_stay_exact_and_the_caches_bounded() -> None:
    encoder = ProtoEncoder()
    base = {"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "parent_span_id": None, "name": "k"}
    for i in range(70_000):
        span = SpanData(**base, attributes=(("seq", i),))
        encoded = encoder.encode([span])
    assert TracesData.FromString(encoded) == reference([span])
    if encoder.compiled is not None:  # the library path keeps nothing between batches
        info = encoder.compiled.cache_info()
        assert info["blocks"] <= info["block_slots"]


def test_one_resource_spans_per_resource_value_not_per_object() -> None:
    r1 = (("service.name", "a"),)
    r2 = tuple(list(r1))  # equal value, different object
    base = {"trace_id": b"\x01" * 16, "parent_span_id": None, "name": "k"}
    batch = [
        SpanData(**base, span_id=bytes([0, 0, 0, 0, 0, 0, 0, i + 1]), resource=r, scope_name="s")
        for i, r in enumerate([r1, r2, r1])
    ]
    msg = TracesData.FromString(encode_spans(batch))
    assert len(msg.resource_spans) == 1
    assert [s.span_id[-1] for s in msg.resource_spans[0].scope_spans[0].spans] == [1, 2, 3]


def test_lone_surrogates_are_replaced_not_raised() -> None:
    span = SpanData(b"\x01" * 16, b"\x02" * 8, None, "bad\ud800name", attributes=(("k", "v\udfff"),))
    msg = TracesData.FromString(encode_spans([span]))
    assert msg.resource_spans[0].scope_spans[0].spans[0].name == "bad?name"


# -- the template path: same keys span after span, values changing among equal-but-different ones --


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(tricky_values, min_size=3, max_size=3), min_size=2, max_size=8))
def test_spans_with_the_same_keys_and_changing_values_stay_exact(rows: list[list]) -> None:
    """Consecutive spans with one key sequence hit the template cache; every span must still encode exactly."""
    encoder = ProtoEncoder()
    base = {"trace_id": b"\x01" * 16, "parent_span_id": None, "name": "k"}
    batch = [
        SpanData(**base, span_id=(i + 1).to_bytes(8, "big"), attributes=tuple(zip(("a", "b", "c"), row)))
        for i, row in enumerate(rows)
    ]
    for span in batch:
        assert TracesData.FromString(encoder.encode([span])) == reference([span])
    assert TracesData.FromString(encoder.encode(batch)) == reference(batch)


def test_a_dict_value_changed_in_place_is_re_encoded() -> None:
    encoder = ProtoEncoder()
    base = {"trace_id": b"\x01" * 16, "parent_span_id": None, "name": "k"}
    value = {"a": 1}
    first = SpanData(**base, span_id=b"\x00" * 7 + b"\x01", attributes=(("m", value), ("n", 2)))
    encoder.encode([first])
    value["a"] = 2  # same object, new content
    second = SpanData(**base, span_id=b"\x00" * 7 + b"\x02", attributes=(("m", value), ("n", 2)))
    assert TracesData.FromString(encoder.encode([second])) == reference([second])
