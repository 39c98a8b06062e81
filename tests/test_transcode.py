"""``collect``'s OTLP protobuf -> JSON conversion (``launchtrace.otlp.transcode``) against ``json_format``.

``launchtrace collect`` writes a JSON Lines output with :func:`~launchtrace.otlp.transcode.json_line`; the
definition is ``launchtrace.otlp.transcode.reference_line`` (``json_format.MessageToDict`` with integer enums, ids
as hex): the maintained library. Requests are generated with the opentelemetry-proto classes (every AnyValue
kind, nesting, unicode, extreme integers, doubles including NaN, infinities, -0.0 and subnormals, events, links,
status, several resources and scopes, empty fields); every line must load to the reference's value with the same
JSON types. Bytes protobuf rejects are rejected by the collector; a ``.pb`` output holds the bytes as received.
"""

from __future__ import annotations

import math
import struct

import grpc
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace.otlp.transcode import json_line, reference_line
from launchtrace.receiver.collect import Collector, _count_spans, decode_request
from protowire import field, request_of_span

INT64 = st.integers(-(2**63), 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1)
UINT32 = st.integers(0, 2**32 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
TEXT = st.one_of(
    st.sampled_from(["", "a", "service.name", "launchtrace.op", 'q"uo\\te', "\x00\x1f\x7f\n\t\r\b\f", "é✓𝄞"]),
    st.text(max_size=12),
    st.text(st.characters(codec="utf-8"), max_size=12),
)
DOUBLES = st.one_of(
    st.floats(),
    st.floats(allow_subnormal=True, min_value=-1e-300, max_value=1e-300),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1e16, 1e-7, 1e-5, 0.1, 1.0, 2.0**63]),
    st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0]),
)
IDS = st.one_of(st.sampled_from([b"", b"\x00" * 8, b"\xff" * 16]), st.binary(max_size=17))
# a span's own ids are valid: the collector refuses a span without them (issue 25)
TRACE_IDS = st.binary(min_size=16, max_size=16).filter(any)
SPAN_IDS = st.binary(min_size=8, max_size=8).filter(any)
T_ID, S_ID = b"\x01" * 16, b"\x02" * 8


def _any_value(children: st.SearchStrategy) -> st.SearchStrategy:
    def array(values: list) -> AnyValue:
        v = AnyValue()
        v.array_value.SetInParent()
        v.array_value.values.extend(values)
        return v

    def kvlist(pairs: list) -> AnyValue:
        v = AnyValue()
        v.kvlist_value.SetInParent()
        for key, value in pairs:
            v.kvlist_value.values.add(key=key).value.CopyFrom(value)
        return v

    return st.one_of(
        st.lists(children, max_size=3).map(array),
        st.lists(st.tuples(TEXT, children), max_size=3).map(kvlist),
    )


SCALARS = st.one_of(
    st.builds(AnyValue),
    TEXT.map(lambda s: AnyValue(string_value=s)),
    st.booleans().map(lambda b: AnyValue(bool_value=b)),
    INT64.map(lambda i: AnyValue(int_value=i)),
    DOUBLES.map(lambda d: AnyValue(double_value=d)),
    st.binary(max_size=10).map(lambda b: AnyValue(bytes_value=b)),
    INT32.map(lambda i: AnyValue(string_value_strindex=i)),
)
ANY_VALUES = st.recursive(SCALARS, _any_value, max_leaves=8)


@st.composite
def key_values(draw: st.DrawFn) -> KeyValue:
    kv = KeyValue(key=draw(TEXT))
    if draw(st.booleans()):
        kv.value.CopyFrom(draw(ANY_VALUES))
    if draw(st.integers(0, 4)) == 0:
        kv.key_strindex = draw(INT32)
    return kv


ATTRS = st.lists(key_values(), max_size=4)


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 3))):
        rs = req.resource_spans.add(schema_url=draw(TEXT))
        if draw(st.booleans()):
            rs.resource.SetInParent()
            rs.resource.attributes.extend(draw(ATTRS))
            rs.resource.dropped_attributes_count = draw(UINT32)
            for _ in range(draw(st.integers(0, 2))):
                rs.resource.entity_refs.add(
                    schema_url=draw(TEXT),
                    type=draw(TEXT),
                    id_keys=draw(st.lists(TEXT, max_size=2)),
                    description_keys=draw(st.lists(TEXT, max_size=2)),
                )
        for _ in range(draw(st.integers(0, 3))):
            ss = rs.scope_spans.add(schema_url=draw(TEXT))
            if draw(st.booleans()):
                ss.scope.SetInParent()
                ss.scope.name, ss.scope.version = draw(TEXT), draw(TEXT)
                ss.scope.attributes.extend(draw(ATTRS))
                ss.scope.dropped_attributes_count = draw(UINT32)
            for _ in range(draw(st.integers(0, 3))):
                span = ss.spans.add(
                    trace_id=draw(TRACE_IDS), span_id=draw(SPAN_IDS), parent_span_id=draw(IDS), trace_state=draw(TEXT),
                    flags=draw(UINT32), name=draw(TEXT), kind=draw(st.one_of(st.integers(0, 5), INT32)),
                    start_time_unix_nano=draw(UINT64), end_time_unix_nano=draw(UINT64),
                    dropped_attributes_count=draw(UINT32), dropped_events_count=draw(UINT32),
                    dropped_links_count=draw(UINT32),
                )  # fmt: skip
                span.attributes.extend(draw(ATTRS))
                for _ in range(draw(st.integers(0, 2))):
                    e = span.events.add(time_unix_nano=draw(UINT64), name=draw(TEXT))
                    e.attributes.extend(draw(ATTRS))
                    e.dropped_attributes_count = draw(UINT32)
                for _ in range(draw(st.integers(0, 2))):
                    k = span.links.add(trace_id=draw(IDS), span_id=draw(IDS), trace_state=draw(TEXT))
                    k.attributes.extend(draw(ATTRS))
                    k.dropped_attributes_count, k.flags = draw(UINT32), draw(UINT32)
                if draw(st.booleans()):
                    span.status.SetInParent()
                    span.status.message = draw(TEXT)
                    span.status.code = draw(st.one_of(st.integers(0, 2), INT32))
    return req


def strict_equal(a: object, b: object) -> bool:
    """Equal values of the same JSON types (``1`` is not ``1.0``); NaN never appears (json_format writes
    ``"NaN"``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def check_bytes(raw: bytes) -> None:
    """Whatever ``raw`` is: the collector rejects it (what protobuf rejects, spans without ids) or writes exactly
    json_format's line, with the span count protobuf gives."""
    try:
        message, n = decode_request(raw)
    except Exception:
        return
    line = json_line(message)
    assert strict_equal(orjson.loads(line), orjson.loads(reference_line(message)))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert n == _count_spans(message)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(requests())
def test_line_equals_json_format(req: ExportTraceServiceRequest) -> None:
    line = json_line(req)
    assert strict_equal(orjson.loads(line), orjson.loads(reference_line(req)))
    assert json_line(TracesData.FromString(req.SerializeToString())) == line  # the same message either way


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(requests(), st.data())
def test_truncated_and_mutated_bytes_are_rejected_or_written_as_json_format_writes_them(
    req: ExportTraceServiceRequest, data: st.DataObject
) -> None:
    raw = req.SerializeToString()
    for cut in sorted({0, len(raw) // 2, max(0, len(raw) - 1), *data.draw(st.lists(st.integers(0, len(raw))))}):
        check_bytes(raw[:cut])
    if not raw:
        return
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        op = data.draw(st.sampled_from(["set", "xor", "insert", "delete"]))
        if op == "set":
            buf[i] = data.draw(st.integers(0, 255))
        elif op == "xor":
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "insert":
            buf[i:i] = data.draw(st.binary(min_size=1, max_size=3))
        elif len(buf) > 1:
            del buf[i]
    check_bytes(bytes(buf))


def _in_span(span_bytes: bytes) -> bytes:
    """A request of one span with valid ids and ``span_bytes`` after them."""
    return request_of_span(field(0x0A, T_ID) + field(0x12, S_ID) + span_bytes)


@settings(max_examples=200, deadline=None)
@given(DOUBLES)
def test_double_attribute_matches_json_format(x: float) -> None:
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add(trace_id=T_ID, span_id=S_ID)
    span.attributes.add(key="x").value.double_value = x
    check_bytes(req.SerializeToString())


def _send(port: int, *requests: bytes) -> list[grpc.StatusCode | None]:
    """Each request over gRPC to ``port``: ``None`` when answered OK, else the status code."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    codes: list[grpc.StatusCode | None] = []
    for raw in requests:
        try:
            assert export(raw, timeout=10) == b""
            codes.append(None)
        except grpc.RpcError as err:
            codes.append(err.code())
    channel.close()
    return codes


def _requests() -> tuple[bytes, bytes, bytes]:
    """Spans of launchtrace's own encoder; a span with an unknown field (protobuf parses and keeps it); one with
    invalid UTF-8 (protobuf rejects it)."""
    from launchtrace.otlp.encode_proto import encode_spans
    from test_sinks import make_spans

    return encode_spans(make_spans(5)), _in_span(b"\x2a\x01a\xa8\x01\x05"), _in_span(b"\x2a\x02\xc3\x28")


def test_collector_writes_json_format_lines_and_rejects_what_protobuf_rejects(tmp_path) -> None:
    """Over gRPC: what protobuf parses is written as json_format writes it (an unknown field too); what it rejects
    gets INVALID_ARGUMENT and is not counted."""
    from test_sinks import parse_jsonl

    good, odd, bad = _requests()
    out = tmp_path / "c.jsonl"
    with Collector(out, grpc_port=0, http_port=None, keep=True) as c:
        assert _send(c.grpc_port, good, odd, bad) == [None, None, grpc.StatusCode.INVALID_ARGUMENT]
        n = _count_spans(ExportTraceServiceRequest.FromString(good)) + 1
        assert c.wait_for_spans(n) and c.wait_written()
        assert c.spans_received == n and c.requests_received == 2
        assert [type(m) for m in c.messages] == [ExportTraceServiceRequest] * 2
    lines = out.read_bytes().splitlines()
    want = [reference_line(ExportTraceServiceRequest.FromString(r)) for r in (good, odd)]
    assert [orjson.loads(x) for x in lines] == [orjson.loads(x) for x in want]
    assert len(parse_jsonl(out)) == 2


@pytest.mark.parametrize("name", ["c.pb", "c.pb.gz"])
def test_a_pb_output_holds_the_requests_as_received_and_reads_back(tmp_path, name: str) -> None:
    """``--out *.pb``: every accepted request's bytes exactly as sent, each behind its 4-byte big-endian length
    (the Collector's ``format: proto``); launchtrace's reader gives back the spans the JSON output gives."""
    import gzip

    from launchtrace.sources.files import read_spans

    good, odd, bad = _requests()
    good_message = ExportTraceServiceRequest.FromString(good)
    out = tmp_path / name
    with Collector(out, grpc_port=0, http_port=None) as c:
        assert _send(c.grpc_port, good, b"", odd, bad) == [None, None, None, grpc.StatusCode.INVALID_ARGUMENT]
        assert c.wait_written()
    data = out.read_bytes()
    if name.endswith(".gz"):
        data = gzip.decompress(data)  # one member per request
    assert data == b"".join(struct.pack(">I", len(r)) + r for r in (good, odd))  # the empty request holds nothing
    with Collector(tmp_path / "c.jsonl", grpc_port=0, http_port=None) as c:
        _send(c.grpc_port, good, odd)
        assert c.wait_written()
    from_pb, from_json = read_spans(str(out)), read_spans(str(tmp_path / "c.jsonl"))
    assert from_pb.errors == from_json.errors == 0
    assert from_pb.spans == from_json.spans and len(from_pb.spans) == _count_spans(good_message) + 1


def test_a_pb_output_cut_in_a_message_is_truncated_to_whole_messages_and_a_jsonl_one_is_refused(tmp_path) -> None:
    """A crash mid-write left part of a message: the next collect drops it (one warning) and appends after the
    last whole one. A ``.pb`` name on a JSON Lines file is refused rather than mixing two formats in one file."""
    good, odd, _ = _requests()
    out = tmp_path / "c.pb"
    whole = struct.pack(">I", len(good)) + good
    out.write_bytes(whole + struct.pack(">I", len(odd)) + odd[:5])
    with Collector(out, grpc_port=0, http_port=None) as c:
        _send(c.grpc_port, odd)
        assert c.wait_written()
    assert out.read_bytes() == whole + struct.pack(">I", len(odd)) + odd
    lines = tmp_path / "lines.pb"
    lines.write_bytes(reference_line(ExportTraceServiceRequest.FromString(good)))
    with pytest.raises(OSError, match="holds json spans"):
        Collector(lines, grpc_port=None, http_port=0).start()
    assert lines.read_bytes() == reference_line(ExportTraceServiceRequest.FromString(good))  # untouched
