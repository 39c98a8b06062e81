"""The compiled JSON Lines encoder (``launchtrace.otlp._jsonenc``) against the Python one it stands in for.

The library path, ``json_codec.encode_line`` (dicts and orjson), is the reference: the compiled encoder must
write the very same bytes for any batch, warm caches or not, and its lines must parse with
protobuf's ``json_format`` (ids turned from OTLP's hex to proto3's base64 first) into the message that
``test_encode_proto``'s field-by-field reference builds.
"""

from __future__ import annotations

import base64
import enum
import gc
import math
import resource
import struct
import sys
from typing import Any

import numpy as np
import orjson
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace import native
from launchtrace.otlp.json_codec import encode_any_value, encode_line_bytes, group_spans, line_encoder
from launchtrace.spans import SpanData, SpanEvent, SpanLink
from strategies import ids8, span_strategy
from strategies import spans as proto_spans
from test_encode_proto import reference

_jsonenc = native.load("launchtrace.otlp._jsonenc")  # raises under LAUNCHTRACE_REQUIRE_NATIVE when missing
pytestmark = pytest.mark.skipif(_jsonenc is None, reason="launchtrace.otlp._jsonenc is not built (or pure Python)")


def compiled() -> Any:
    """The compiled encoder itself (whatever LAUNCHTRACE_PURE_PYTHON says)."""
    return _jsonenc.Encoder(SpanData, SpanEvent, SpanLink, encode_any_value, group_spans)


def library_line(batch: list[SpanData]) -> bytes:
    """The library path's line: ``json_codec.encode_line``, with its newline."""
    return encode_line_bytes(batch)


# -- values of every kind the span model allows, and some it only tolerates --
class Color(enum.IntEnum):
    RED = 1


class Name(str):
    def __str__(self) -> str:
        return "name:" + self


class Thing:
    """An object whose str() is all the codec writes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


odd_chars = st.sampled_from(list('"\\/\x00\x01\x08\x09\x0a\x0c\x0d\x1f\x7f\x80\xff\u2028\ufffféÿ€😀\U0010ffff'))
surrogates = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"])
text = st.text(st.one_of(st.characters(), odd_chars, surrogates), max_size=12)
clean_text = st.text(st.one_of(st.characters(exclude_categories=("Cs",)), odd_chars), max_size=12)
keys = st.one_of(text, st.integers(-5, 5), st.sampled_from(["launchtrace.seq", "k", ""]))
special_floats = st.sampled_from(
    [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e300, -1e300, 5e-324, 1e16, 1e15, 1e-5, 1e-4, 1e-7, 0.1, 1e22]
)
scalars = st.one_of(
    text,
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.integers(min_value=-(1 << 200), max_value=1 << 200),
    st.floats(),
    special_floats,
    st.binary(max_size=10),
    st.binary(max_size=10).map(bytearray),
    st.none(),
    st.sampled_from([0, 1, True, False, 1.0, -0.0, "", b"", Color.RED, np.int64(7), np.float32(0.1), np.bool_(True)]),
    text.map(Thing),
    clean_text.map(Name),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(tuple),
        st.lists(inner, max_size=3),
        st.dictionaries(keys, inner, max_size=3),
    ),
    max_leaves=8,
)
attributes = st.lists(st.tuples(keys, values), max_size=6).map(tuple)
u64 = st.integers(min_value=0, max_value=(1 << 63) - 1)
small = st.integers(min_value=0, max_value=1000)
spans = span_strategy(
    text=text,
    attributes=attributes,
    resources=st.sampled_from([(), (("service.name", "svc"),), (("service.name", "other"), ("k", {"a": (1, 2.5)}))]),
    u64=u64,
    counts=small,
    parent_span_id=st.one_of(st.none(), ids8, st.just(b"")),
    start_ns=st.integers(-(1 << 63), (1 << 63) - 1),
    kind=st.integers(min_value=0, max_value=7),
    scope_name=st.sampled_from(["", "launchtrace", "other\u00e9"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans, max_size=6), st.lists(spans, max_size=3))
def test_same_bytes_as_encode_line(batch: list[SpanData], other: list[SpanData]) -> None:
    encoder = compiled()
    encoder.encode(other)  # warm the caches with something else first
    expected = library_line(batch)
    assert encoder.encode(batch) == expected
    assert encoder.encode(batch) == expected  # the cached path gives the same


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(proto_spans, max_size=6))
def test_lines_parse_with_json_format_into_the_reference_message(batch: list[SpanData]) -> None:
    doc = orjson.loads(compiled().encode(batch))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                _hex_ids_to_base64(span)
                for link in span.get("links", ()):
                    _hex_ids_to_base64(link)
    parsed = json_format.ParseDict(doc, TracesData())
    # compared as dicts: NaN is never equal to itself in a message, and becomes "NaN" in both dicts
    assert json_format.MessageToDict(parsed) == json_format.MessageToDict(reference(batch))


def _hex_ids_to_base64(d: dict) -> None:
    """OTLP/JSON writes ids in hex; proto3's JSON mapping, which json_format implements, reads base64."""
    for k in ("traceId", "spanId", "parentSpanId"):
        if k in d:
            d[k] = base64.b64encode(bytes.fromhex(d[k])).decode()


# the launch-span shape: one tuple of pairs per call site, the changing pairs appended
_site = (("launchtrace.op", "launch"), ("launchtrace.kernel", "m.k"), ("launchtrace.dim", (256,)))
tricky = st.sampled_from(
    [0, 1, True, 1.0, 0.0, -0.0, math.nan, "1", b"1", (1,), (True,), (1.0,), [1], {"a": 1}, None, Thing("t")]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(tricky, min_size=2, max_size=2), min_size=2, max_size=10))
def test_block_cache_stays_exact_as_values_change(rows: list[list]) -> None:
    encoder = compiled()
    base = {"trace_id": b"\x01" * 16, "parent_span_id": None, "name": "k"}
    shared_pair = ("x", rows[0][0])
    for i, (a, b) in enumerate(rows):
        attrs = (*_site, shared_pair, ("a", a), ("launchtrace.seq", i), ("b", b))
        span = SpanData(**base, span_id=(i + 1).to_bytes(8, "big"), attributes=attrs)
        assert encoder.encode([span]) == library_line([span])


def test_a_list_changed_in_place_is_encoded_again() -> None:
    encoder = compiled()
    value: list = [1]
    attrs = (("k", value), ("s", "x"))
    span = SpanData(b"\x01" * 16, b"\x02" * 8, None, "n", attributes=attrs)
    assert encoder.encode([span]) == library_line([span])
    value.append("more")
    assert b'"more"' in encoder.encode([span])
    assert encoder.encode([span]) == library_line([span])


def _escape_cases() -> list[str]:
    """Every ASCII character, then some non-ASCII ones, alone and at each position of an 8-byte word (the
    escaping reads 8 bytes at a time), in ASCII-only strings and in strings that are not."""
    chars = [chr(c) for c in range(128)] + ["\u00e9", "\u2713", "\U0001d11e", "\u0080", "\uffff"]
    cases = []
    for ch in chars:
        for left in range(9):
            cases.append("a" * left + ch + "b" * (8 - left))
            cases.append("\u00e9" * (left % 2) + "x" * left + ch + "y" * (9 - left))
    return cases


def test_strings_are_escaped_as_orjson_escapes_them() -> None:
    """``_jsonfmt.h``'s escaping, which both compiled writers use, byte for byte orjson's (the library path's)."""
    encoder = compiled()
    for text in _escape_cases():
        span = SpanData(b"\x01" * 16, b"\x02" * 8, None, text, attributes=(("k", text),))
        line = encoder.encode([span])
        assert line == library_line([span]), repr(text)
        assert orjson.dumps(text) in line


def test_floats_are_written_as_orjson_writes_them() -> None:
    rng = np.random.default_rng(7)
    samples = [*rng.standard_normal(20_000) * 10.0 ** rng.integers(-30, 30, 20_000)]
    samples += [struct.unpack("<d", rng.bytes(8))[0] for _ in range(20_000)]
    samples += [0.0, -0.0, 5e-324, 1.7976931348623157e308, 1e16, 9999999999999998.0, 1e-5, 0.0001, 1e-7]
    for x in samples:
        x = float(x)
        if math.isfinite(x):
            assert _jsonenc.format_float(x) == orjson.dumps(x), x


def test_unusual_fields_go_to_the_library() -> None:
    """What the compiled encoder does not take raises Unsupported; the sink's encoder then uses encode_line."""
    base = {"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "parent_span_id": None, "name": "k"}
    deep: Any = 1
    for _ in range(60):
        deep = (deep,)
    odd = [
        SpanData(**{**base, "start_ns": 1 << 70}),
        SpanData(**{**base, "name": Name("sub")}),
        SpanData(**{**base, "trace_id": bytearray(16)}),
        SpanData(**base, attributes=[("k", 1)]),  # type: ignore[arg-type]
        SpanData(**base, attributes=(["k", 1],)),
        SpanData(**base, attributes=(("deep", deep),)),
    ]
    for span in odd:
        with pytest.raises(_jsonenc.Unsupported):
            compiled().encode([span])
        wrapper = line_encoder(compiled=True)
        try:
            expected = library_line([span])
        except Exception as exc:  # whatever the library raises, the wrapper raises too
            with pytest.raises(type(exc)):
                wrapper([span])
        else:
            assert wrapper([span]) == expected


def test_several_resources_and_scopes_group_as_the_library_does() -> None:
    r1, r2 = (("service.name", "a"),), (("service.name", "b"),)
    r1_copy = tuple(list(r1))
    base = {"trace_id": b"\x01" * 16, "parent_span_id": None, "name": "k"}
    layout = [(r1, "s"), (r2, "s"), (r1_copy, "t"), (r1, "s"), (r2, "u"), ((("d", {"x": 1}),), "s")]
    batch = [
        SpanData(**base, span_id=bytes([0] * 7 + [i + 1]), resource=r, scope_name=scope, attributes=(("i", i),))
        for i, (r, scope) in enumerate(layout)
    ]
    line = compiled().encode(batch)
    assert line == library_line(batch)
    assert len(orjson.loads(line)["resourceSpans"]) == 3


def test_the_wrapper_uses_the_compiled_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    assert line_encoder() is not encode_line_bytes and line_encoder(compiled=True) is not encode_line_bytes
    assert line_encoder(compiled=False) is encode_line_bytes
    monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
    assert line_encoder() is encode_line_bytes
    with pytest.raises(ImportError):
        line_encoder(compiled=True)


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (resource.getpagesize() // 1024)


def test_no_leak_over_100k_encodes() -> None:
    encoder = compiled()
    site = (*_site, ("launchtrace.bytes", 2048), ("launchtrace.scalar.a", 0.5))
    base = {"trace_id": b"\x01" * 16, "parent_span_id": b"\x03" * 8, "name": "m.k"}

    def batch(i: int) -> list[SpanData]:
        attrs = (*site, ("launchtrace.arg.x.ptr", 94017365775936 + i % 7), ("t", i * 0.5), ("launchtrace.seq", i))
        odd = (("obj", Thing("x")), ("list", [i, "s"]), ("map", {"k": b"\x00" * (i % 5)}), ("big", 1 << 65))
        return [
            SpanData(**base, span_id=i.to_bytes(8, "big"), start_ns=i, end_ns=i + 1, attributes=attrs),
            SpanData(**base, span_id=b"\x09" * 8, attributes=(("u", str(i)), *odd), events=(SpanEvent("e", i),)),
        ]

    for i in range(5_000):  # caches and allocator at their working size
        encoder.encode(batch(i))
    gc.collect()
    before = _rss_kib()
    for i in range(100_000):
        encoder.encode(batch(i))
    gc.collect()
    grown = _rss_kib() - before
    assert grown < 20_000, f"RSS grew by {grown} KiB over 100k encodes"
    assert encoder.cached_blocks <= 1024


def test_references_are_given_back_on_success_and_on_unsupported() -> None:
    encoder = compiled()
    thing, items = Thing("t\ud800"), [1, Thing("u")]
    kv = {"a": items, 3: thing}
    value = (items, kv, 1.5, 1 << 80)
    attrs = (("a", thing), ("b", items), ("c", kv), ("e", value))
    event, link = SpanEvent("e", 1, attrs), SpanLink(b"1" * 16, b"2" * 8, attrs, "ts", 1, 1)
    deep: Any = 1
    for _ in range(60):
        deep = (deep,)
    span = SpanData(b"\x01" * 16, b"\x02" * 8, None, "n", attributes=attrs, events=(event,), links=(link,))
    bad = SpanData(b"\x01" * 16, b"\x02" * 8, None, "n", attributes=(*attrs, ("deep", deep)), resource=attrs)
    objects = [thing, items, kv, value, attrs, event, link, span, bad, deep]
    encoder.encode([span, span])
    encoder.clear()
    gc.collect()
    before = [sys.getrefcount(o) for o in objects]
    for _ in range(2_000):
        encoder.encode([span, span])
        with pytest.raises(_jsonenc.Unsupported):
            encoder.encode([span, bad])
    encoder.clear()
    gc.collect()
    assert [sys.getrefcount(o) for o in objects] == before
