"""The compiled protobuf encoder (``launchtrace.otlp._protoenc``) against the protobuf library.

The library path of :mod:`launchtrace.otlp.encode_proto` (the generated ``opentelemetry-proto`` classes filled
from the spans, ``SerializeToString``) is the definition: the C encoder's bytes must parse (``FromString``) to the
message the library builds (byte for byte the same where every count fits its field), over random spans with
every value type (nested arrays and key-value lists, dicts and lists, ``None`` and other objects written as
``str()``, ints beyond 64 bits, bools next to ints, NaN and infinities, lone surrogates, subclasses of the basic
types), events, links, status and several resources and scopes. Its caches must be exact (a tuple reused, values
changed in place) and bounded, and it must not leak. ``tests/test_encode_proto.py`` checks the bytes against
opentelemetry-proto with each encoder in turn (its ``encoder`` fixture).
"""

from __future__ import annotations

import enum
import math
import os
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace import native
from launchtrace.otlp.encode_proto import ProtoEncoder, request_message
from launchtrace.spans import SpanData, SpanEvent, SpanLink
from strategies import span_strategy
from test_encode_proto import reference

_protoenc = native.load("launchtrace.otlp._protoenc")
pytestmark = pytest.mark.skipif(_protoenc is None, reason="launchtrace.otlp._protoenc is not built")


class Color(enum.IntEnum):
    RED = 1
    BIG = 1 << 70


class MyStr(str):
    pass


class MyFloat(float):
    pass


class Plain:
    """An object without a conversion of its own: written as its ``str()``."""

    def __str__(self) -> str:
        return "plain\udc80object"


ids16 = st.binary(min_size=16, max_size=16)
ids8 = st.binary(min_size=8, max_size=8)
text = st.text(max_size=10)  # surrogates included: written as '?'
keys = st.one_of(st.text(string.ascii_letters + ".é_\ud800", min_size=1, max_size=6), st.just("k"))
scalars = st.one_of(
    text,
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.integers(min_value=-(1 << 80), max_value=1 << 80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=8),
    st.sampled_from(
        [0, 1, True, False, 1.0, 0.0, -0.0, math.inf, -math.inf, math.nan, "", b"", None, Color.RED, Color.BIG]
    ),
    st.builds(MyStr, text),
    st.builds(MyFloat, st.floats()),
    st.builds(Plain),
    st.builds(bytearray, st.binary(max_size=4)),
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
u32 = st.integers(min_value=0, max_value=(1 << 32) - 1)
u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
small = st.one_of(st.integers(min_value=0, max_value=1000), st.just(1 << 40))

spans = span_strategy(
    text=text,
    attributes=attributes,
    resources=st.sampled_from(
        [(), (("service.name", "svc"),), (("service.name", "other"), ("host", "h1")), (("k", {"a": (1, 2)}),)]
    ),
    u32=u32,
    u64=u64,
    counts=small,
    links=st.builds(
        SpanLink,
        trace_id=st.one_of(ids16, st.just(b"")),
        span_id=st.one_of(ids8, st.just(b"")),
        attributes=attributes,
        trace_state=text,
        flags=u32,
        dropped_attributes_count=small,
    ),
    trace_id=st.one_of(ids16, st.binary(max_size=20)),
    span_id=st.one_of(ids8, st.binary(max_size=10)),
    parent_span_id=st.one_of(st.none(), ids8, st.just(b"")),
    end_ns=st.one_of(u64, st.just(0)),
    kind=st.integers(min_value=0, max_value=300),
    scope_attributes=st.sampled_from([(), (("a", 1),), (("l", [1, "x"]),)]),
)


def both() -> tuple[ProtoEncoder, ProtoEncoder]:
    return ProtoEncoder(compiled=True), ProtoEncoder(compiled=False)


def assert_library(encoded: bytes, batch: list) -> None:
    """The compiled bytes parse to the message the protobuf library builds from ``batch`` (compared serialised:
    a NaN is never equal to itself in a message; a count past 32 bits parses to its low 32 bits)."""
    assert TracesData.FromString(encoded).SerializeToString() == request_message(batch).SerializeToString()


def _base(**kw: Any) -> SpanData:
    fields: dict[str, Any] = {"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "parent_span_id": None, "name": "k"}
    fields.update(kw)
    return SpanData(**fields)


def test_default_encoder_is_the_compiled_one() -> None:
    assert ProtoEncoder().compiled is not None
    assert ProtoEncoder(compiled=False).compiled is None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(spans, max_size=6))
def test_parses_to_the_message_the_library_builds(batch: list[SpanData]) -> None:
    c = ProtoEncoder(compiled=True)
    encoded = c.encode(batch)
    assert_library(encoded, batch)
    assert c.encode(batch) == encoded  # again, through the caches


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(spans, min_size=1, max_size=4), st.lists(spans, min_size=1, max_size=4))
def test_one_encoder_across_batches(a: list[SpanData], b: list[SpanData]) -> None:
    c = ProtoEncoder(compiled=True)
    for batch in (a, b, a, b + a):
        assert_library(c.encode(batch), batch)


def _plain_values() -> st.SearchStrategy:
    """Values the reference converts exactly as opentelemetry-proto's generated classes do (no objects)."""
    scalar = st.one_of(
        st.text(st.characters(exclude_categories=("Cs",)), max_size=8),
        st.booleans(),
        st.integers(min_value=-(1 << 70), max_value=1 << 70),
        st.floats(allow_nan=False),
        st.binary(max_size=6),
    )
    return st.recursive(scalar, lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=5)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from("abcd"), _plain_values()), max_size=5), min_size=1, max_size=5))
def test_decodes_to_the_field_by_field_message(rows: list[list[tuple[str, Any]]]) -> None:
    batch = [_base(span_id=(i + 1).to_bytes(8, "big"), attributes=tuple(row)) for i, row in enumerate(rows)]
    assert TracesData.FromString(ProtoEncoder(compiled=True).encode(batch)) == reference(batch)


def test_build_launch_like_spans_reuse_pairs_and_stay_exact() -> None:
    """The span builder's layout: one tuple of pairs per call site plus a sequence number per span."""
    common = (("op", "launch"), ("dim", (256,)), ("ptr", 1 << 40), ("a", 0.5), ("flag", True))
    batch = [_base(attributes=(*common, ("seq", i))) for i in range(50)]
    c, py = both()
    assert c.encode(batch) == py.encode(batch)
    info = c.compiled.cache_info()
    assert info["pair_reuses"] >= 49 * len(common)
    assert info["pairs_encoded"] <= len(common) + 50


def test_requests_over_two_mib_and_several_groups() -> None:
    """Lengths of four varint bytes (bodies past 2 MiB) and several resources and scopes in one request."""
    big = "x" * 900
    batch = [
        _base(
            attributes=(("big", big), ("seq", i)),
            resource=(("service.name", f"svc{i % 2}"),),
            resource_schema_url="r" if i % 2 else "",
            scope_name=f"scope{i % 3}",
            schema_url="s" if i % 3 == 1 else "",
        )
        for i in range(3000)
    ]
    c, py = both()
    encoded = c.encode(batch)
    assert len(encoded) > 2 * 1024 * 1024
    assert encoded == py.encode(batch)
    msg = TracesData.FromString(encoded)
    assert [len(rs.scope_spans) for rs in msg.resource_spans] == [3, 3]


def test_the_same_tuple_is_copied_whole() -> None:
    attrs = (("a", 1), ("b", "x"), ("c", (1.5, None)))
    c, py = both()
    batch = [_base(attributes=attrs) for _ in range(10)]
    assert c.encode(batch) == py.encode(batch)
    assert c.compiled.cache_info()["block_hits"] == 9


@pytest.mark.parametrize("kind", ["list", "dict", "object"])
def test_values_changed_in_place_are_re_encoded(kind: str) -> None:
    """A tuple that holds a list, dict or object is never copied from the cache: its content may change."""

    class Counter:
        n = 0

        def __str__(self) -> str:
            return f"n={self.n}"

    value: Any = {"list": [1], "dict": {"x": 1}, "object": Counter()}[kind]
    attrs = (("first", "same"), ("v", value))
    c = ProtoEncoder(compiled=True)
    before = c.encode([_base(attributes=attrs)])
    if kind == "list":
        value.append(2)
    elif kind == "dict":
        value["x"] = 2
    else:
        value.n = 2
    after = c.encode([_base(attributes=attrs)])  # the very same tuple
    fresh = ProtoEncoder(compiled=False).encode([_base(attributes=attrs)])
    assert after == fresh != before
    shared = c.encode([_base(attributes=(*attrs, ("seq", 1)))])  # a new tuple sharing the pairs
    assert shared == ProtoEncoder(compiled=False).encode([_base(attributes=(*attrs, ("seq", 1)))])


def test_equal_values_of_other_types_are_not_confused() -> None:
    c, py = both()
    for value in (1, True, 1.0, 0.0, -0.0, (1,), (True,), (1.0,), math.nan, "1", Color.RED, MyFloat(1.0)):
        batch = [_base(attributes=(("x", value),))]
        assert c.encode(batch) == py.encode(batch), value


def test_caches_stay_bounded() -> None:
    c = ProtoEncoder(compiled=True)
    for i in range(5000):
        c.encode([_base(attributes=((f"k{i}", i), ("v", 1)), resource=(("r", i),), scope_name=str(i))])
    info = c.compiled.cache_info()
    assert info["blocks"] <= info["block_slots"] == 1024
    assert info["resources"] <= 1025 and info["scopes"] <= 1025
    c.compiled.clear_caches()
    assert c.compiled.cache_info()["blocks"] == 0


def test_errors_are_raised_and_the_encoder_stays_usable() -> None:
    class Bad:
        def __str__(self) -> str:
            raise ZeroDivisionError("no str")

    c, py = both()
    ok = [_base(attributes=(("a", 1), ("b", 2)))]
    cases: list[tuple[SpanData, type[BaseException]]] = [
        (_base(attributes=(("a", 1), ("b", Bad()))), ZeroDivisionError),
        (_base(attributes=(("a", 1), ("b", [Bad()]))), ZeroDivisionError),
        (_base(kind=-1), ValueError),
        (_base(dropped_links_count=-5), ValueError),
        (_base(trace_id=None), TypeError),
        (_base(name=5), (TypeError, AttributeError)),  # type: ignore[list-item]
    ]
    for span, exc in cases:
        with pytest.raises(exc):
            c.encode([span])
        with pytest.raises(exc):
            py.encode([span])
        assert c.encode(ok) == py.encode(ok)
    with pytest.raises(ValueError):  # the Python encoder takes the first two items of a longer "pair"
        c.encode([_base(attributes=(("a", 1, 2),))])
    nested: list = []
    nested.append(nested)
    with pytest.raises(RecursionError):
        c.encode([_base(attributes=(("loop", nested),))])
    assert c.encode(ok) == py.encode(ok)


def test_other_span_like_objects_are_read_by_attribute() -> None:
    class Like:
        def __init__(self, span: SpanData) -> None:
            self._span = span

        def __getattr__(self, name: str) -> Any:
            return getattr(self._span, name)

    span = _base(attributes=(("a", 1),), events=(SpanEvent("e", 5, (("x", "y"),)),), links=(SpanLink(b"", b""),))
    c, py = both()
    assert c.encode([Like(span), span]) == py.encode([Like(span), span])


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_no_leak_over_100k_encodes() -> None:
    nested = {"d": [1, 2.5, "é", None, (1 << 70,)], "s": "bad\ud800"}
    spans_ = [
        _base(attributes=(("a", 1), ("n", nested), ("o", Plain()), ("seq", 0))),
        _base(
            attributes=(("x", "y"),),
            events=(SpanEvent("ev", 1, (("k", [1]),)),),
            links=(SpanLink(b"\x01" * 16, b"\x02" * 8, (("l", 1.5),), "ts", 1),),
            status_code=2,
            status_message="failed",
            resource=(("r", [1]),),
        ),
    ]
    bad = _base(attributes=(("a", 1), ("b", [1, 2, None, object.__new__(_Unprintable)])))
    c = ProtoEncoder(compiled=True)

    def run(n: int) -> None:
        for i in range(n):
            spans_[0] = _base(attributes=(*spans_[0].attributes[:3], ("seq", i)))
            c.encode(spans_)
            if i % 10 == 0:
                try:
                    c.encode([bad])
                except ZeroDivisionError:
                    pass

    run(10_000)  # warm-up: caches and allocator at their working size
    before = _rss_bytes()
    run(100_000)
    grown = _rss_bytes() - before
    assert grown < 8 * 1024 * 1024, f"RSS grew {grown / 1e6:.1f} MB over 100k encodes"


class _Unprintable:
    def __str__(self) -> str:
        raise ZeroDivisionError


def test_an_encoder_without_init_raises_instead_of_crashing() -> None:
    bare = _protoenc.Encoder.__new__(_protoenc.Encoder)
    for call in (lambda: bare.encode([]), bare.cache_info, bare.clear_caches):
        with pytest.raises(RuntimeError):
            call()
