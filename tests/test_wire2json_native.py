"""The compiled OTLP protobuf -> JSON transcoder (``launchtrace.otlp._wire2json``) against ``json_format``.

``launchtrace collect`` writes what it receives with the C walk; the definition is
``launchtrace.otlp.transcode.reference_line`` (``json_format.MessageToDict`` with integer enums, ids as hex).
Requests are generated with the opentelemetry-proto classes (every AnyValue kind, nesting, unicode, extreme
integers, doubles including NaN, infinities, -0.0 and subnormals, events, links, status, several resources and
scopes, empty fields); every line must load to the reference's value with the same JSON types, and be
byte-identical to the Python conversion where that one applies. Bytes the walk is not sure of (truncated,
mutated, unknown fields, invalid UTF-8) must give ``None`` (the collector then parses them with protobuf, which
rejects the malformed ones) or exactly what protobuf + ``json_format`` give: never other JSON, never a crash.
"""

from __future__ import annotations

import math
import os
import random
import struct
import threading

import grpc
import orjson
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace.otlp import transcode
from launchtrace.otlp.transcode import reference_line
from launchtrace.receiver.collect import Collector, _count_spans

w2j = transcode.native_transcoder()
pytestmark = pytest.mark.skipif(w2j is None, reason="launchtrace.otlp._wire2json is not built (or pure Python)")

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
# a span's own ids are valid: the walk leaves a span without them to protobuf, which the collector refuses (issue 25)
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
    """Whatever ``raw`` is: the walk gives ``None`` or exactly protobuf + json_format's line and span count."""
    got = w2j.transcode(raw)
    assert w2j.count(raw) == (None if got is None else got[1])
    if got is None:
        return
    message = ExportTraceServiceRequest.FromString(raw)  # accepted by the walk: protobuf must accept it too
    assert strict_equal(orjson.loads(got[0]), orjson.loads(reference_line(message)))
    assert got[0].endswith(b"\n") and got[0].count(b"\n") == 1
    assert got[1] == _count_spans(message)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(requests())
def test_compiled_line_equals_json_format(req: ExportTraceServiceRequest) -> None:
    raw = req.SerializeToString()
    got = w2j.transcode(raw)
    assert got is not None, "every canonically serialized request is handled in C"
    line, n = got
    assert strict_equal(orjson.loads(line), orjson.loads(reference_line(req)))
    assert n == _count_spans(req) == w2j.count(raw)
    assert w2j.transcode(TracesData.FromString(raw).SerializeToString()) == got  # the same wire layout
    try:
        python_line = transcode._fast_line(req)  # the Python conversion: the same bytes, key order included
    except (orjson.JSONEncodeError, ValueError, TypeError):
        return
    assert line == python_line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(requests(), st.data())
def test_truncated_and_mutated_bytes_never_give_wrong_json(req: ExportTraceServiceRequest, data: st.DataObject) -> None:
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


def test_random_garbage_never_gives_wrong_json() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        check_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))))


def _field(tag: int, payload: bytes) -> bytes:
    n, length = len(payload), b""
    while True:
        length += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            break
    return bytes([tag]) + length + payload


def _in_span(span_bytes: bytes) -> bytes:
    """A request of one span with valid ids and ``span_bytes`` after them."""
    ids = _field(0x0A, T_ID) + _field(0x12, S_ID)
    return _field(0x0A, _field(0x12, _field(0x12, ids + span_bytes)))


@pytest.mark.parametrize(
    ("raw", "protobuf_accepts"),
    [
        pytest.param(_in_span(b"\x2a\x02\xc3\x28"), False, id="invalid-utf8-name"),
        pytest.param(_in_span(b"\x2a\x02\xc0\x80"), False, id="overlong-utf8"),
        pytest.param(_in_span(b"\x2a\x03\xed\xa0\x80"), False, id="utf8-surrogate"),
        pytest.param(_in_span(b"\x2a\x04\xf4\x90\x80\x80"), False, id="above-u10ffff"),
        pytest.param(_in_span(b"\x30" + b"\x80" * 10 + b"\x01"), False, id="varint-over-10-bytes"),
        pytest.param(_in_span(b"\x2a\x05ab"), False, id="length-past-the-end"),
        pytest.param(_field(0x0A, _field(0x12, b"\x12\x05ab")) + b"abc", False, id="nested-overrun"),
        pytest.param(_in_span(b"\x4a\x04\x12\x02\x10\x02"), True, id="bool-2"),
        pytest.param(_in_span(b"\xa8\x01\x05"), True, id="unknown-field"),
        pytest.param(_field(0x0A, _field(0x12, _field(0x12, b"\x2a\x01a"))), True, id="span-without-ids"),
        pytest.param(_in_span(b"\x2b\x2c"), True, id="group"),
        pytest.param(_in_span(b"\x2a\x01a\x2a\x01b"), True, id="name-twice"),
        pytest.param(_in_span(b"\x4a\x06\x12\x04\x08\x01\x18\x02"), True, id="two-oneof-members"),
        pytest.param(_in_span(b"\x30\xff\xff\xff\xff\x0f"), True, id="enum-not-sign-extended"),
        pytest.param(_in_span(b"\x50\x80\x80\x80\x80\x10"), True, id="uint32-over-32-bits"),
        pytest.param(_in_span(b"\x32\x00"), None, id="wrong-wire-type"),
        pytest.param(b"\x07", False, id="wire-type-7"),
        pytest.param(b"\x00\x00", False, id="field-0"),
    ],
)
def test_what_the_walk_leaves_to_protobuf(raw: bytes, protobuf_accepts: bool | None) -> None:
    """Each gives None (the collector then parses with protobuf, which decides); the malformed ones protobuf
    rejects, so the collector rejects them too."""
    assert w2j.transcode(raw) is None and w2j.count(raw) is None
    if protobuf_accepts is None:
        return
    try:
        ExportTraceServiceRequest.FromString(raw)
        accepted = True
    except DecodeError:
        accepted = False
    assert accepted == protobuf_accepts


def test_nesting_past_the_limit_is_left_to_protobuf() -> None:
    v = AnyValue(string_value="x")
    for depth in range(40):
        outer = AnyValue()
        outer.array_value.values.append(v)
        v = outer
        req = ExportTraceServiceRequest()
        span = req.resource_spans.add().scope_spans.add().spans.add(trace_id=T_ID, span_id=S_ID)
        span.attributes.add(key="k").value.CopyFrom(v)
        check_bytes(req.SerializeToString())
        if depth < 10:
            assert w2j.count(req.SerializeToString()) == 1


def test_strings_are_escaped_as_orjson_escapes_them() -> None:
    """``_jsonfmt.h``'s escaping, which both compiled writers use: every ASCII character and some non-ASCII ones
    at each position of an 8-byte word (the escaping reads 8 bytes at a time), byte for byte the Python
    conversion's (orjson's)."""
    chars = [chr(c) for c in range(128)] + ["\u00e9", "\u2713", "\U0001d11e", "\u0080", "\uffff"]
    for ch in chars:
        for left in range(9):
            for text in ("a" * left + ch + "b" * (8 - left), "\u00e9" * (left % 2) + "x" * left + ch + "y" * 9):
                req = ExportTraceServiceRequest()
                span = req.resource_spans.add().scope_spans.add().spans.add(trace_id=T_ID, span_id=S_ID, name=text)
                span.attributes.add(key="k").value.string_value = text
                line, _ = w2j.transcode(req.SerializeToString())
                assert line == transcode._fast_line(req), repr(text)
                assert orjson.dumps(text) in line


def test_doubles_are_written_as_orjson_writes_them() -> None:
    """Shortest round-trip digits, orjson's notation: random bit patterns, powers of two, subnormals, short
    decimals and the edges."""
    rng = random.Random(11)
    edges = [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e16, 9999999999999998.0, 1e-5, 1e-6,
             0.1, 0.3, 1 / 3, 123456789.0, 1e21, 1e22, 2.0**53, 2.0**63]  # fmt: skip
    values = edges + [1.0 * rng.randrange(-(10**6), 10**6) / 10 ** rng.randrange(8) for _ in range(1000)]
    values += [2.0**k for k in range(-1074, 1024)]  # where the interval that reads back is lopsided
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(200_000)]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(52)))[0] for _ in range(20_000)]  # subnormal
    values += [round(rng.random() * 10 ** rng.randrange(9), rng.randrange(7)) for _ in range(50_000)]
    for x in values:
        if math.isfinite(x):
            assert w2j.format_double(x) == orjson.dumps(x), x
            assert w2j.format_double(-x) == orjson.dumps(-x), -x
    assert w2j.format_double(math.nan) == b'"NaN"' and w2j.format_double(-math.inf) == b'"-Infinity"'
    assert w2j.format_double(-0.0) == b"-0.0"


@settings(max_examples=300, deadline=None)
@given(DOUBLES)
def test_double_attribute_matches_json_format(x: float) -> None:
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add(trace_id=T_ID, span_id=S_ID)
    span.attributes.add(key="x").value.double_value = x
    check_bytes(req.SerializeToString())
    assert w2j.transcode(req.SerializeToString()) is not None


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_no_leak_over_100k_calls() -> None:
    from launchtrace.otlp.encode_proto import encode_spans
    from test_sinks import make_spans

    good = encode_spans(make_spans(3))
    bad = good[:-3]
    for _ in range(2000):
        w2j.transcode(good), w2j.count(good), w2j.transcode(bad), w2j.transcode(bytearray(good))
    before = _rss_kib()
    for _ in range(100_000):
        w2j.transcode(good)
        w2j.count(good)
        w2j.transcode(bad)
        w2j.transcode(bytearray(good))
    assert _rss_kib() - before < 8 * 1024  # one leaked line per call would be hundreds of MiB
    big = encode_spans(make_spans(2000))  # over the size walked without the GIL, from short-lived threads
    before = _rss_kib()
    for _ in range(50):
        threads = [threading.Thread(target=w2j.transcode, args=(big,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert _rss_kib() - before < 32 * 1024  # output buffers are pooled, not kept per thread
    with pytest.raises(TypeError):
        w2j.transcode("not bytes")


def test_collector_queues_bytes_and_rejects_what_protobuf_rejects(tmp_path) -> None:
    """Over gRPC: a request the walk handles is written from its bytes; one it leaves alone but protobuf parses
    is written too (the same JSON); one protobuf rejects gets INVALID_ARGUMENT and is not counted."""
    from launchtrace.otlp.encode_proto import encode_spans
    from test_sinks import make_spans, parse_jsonl

    good = encode_spans(make_spans(5))
    odd = _in_span(b"\x2a\x01a\xa8\x01\x05")  # an unknown field: parsed by protobuf, which ignores it
    bad = _in_span(b"\x2a\x02\xc3\x28")  # invalid UTF-8
    out = tmp_path / "c.jsonl"
    with Collector(out, grpc_port=0, http_port=None, keep=True) as c:
        channel = grpc.insecure_channel(f"127.0.0.1:{c.grpc_port}")
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        assert export(good, timeout=10) == b"" and export(odd, timeout=10) == b""
        with pytest.raises(grpc.RpcError) as err:
            export(bad, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        channel.close()
        n = _count_spans(ExportTraceServiceRequest.FromString(good)) + 1
        assert c.wait_for_spans(n) and c.wait_written()
        assert c.spans_received == n and c.requests_received == 2
        assert [type(m) for m in c.messages] == [ExportTraceServiceRequest] * 2  # keep=True: parsed when asked
    lines = out.read_bytes().splitlines()
    want = [reference_line(ExportTraceServiceRequest.FromString(r)) for r in (good, odd)]
    assert [orjson.loads(x) for x in lines] == [orjson.loads(x) for x in want]
    assert len(parse_jsonl(out)) == 2
