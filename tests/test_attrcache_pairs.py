"""The attribute caches' pair-identity path (spans sharing (key, value) pair objects, as the span builder
makes them: one cached tuple of pairs per call site, plus a fresh ``launchtrace.seq`` pair) stays exact.

Both encoders are checked against their references: the JSON Lines encoder against ``json_codec.encode_line``,
the protobuf encoder against the message built field by field with the opentelemetry-proto classes.
"""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace.otlp.encode_jsonl import JsonLinesEncoder
from launchtrace.otlp.encode_proto import ProtoEncoder
from launchtrace.otlp.json_codec import encode_line
from launchtrace.spans import SpanData
from strategies import tricky_values
from test_encode_proto import reference

BASE = {"trace_id": b"\x01" * 16, "parent_span_id": None, "name": "k"}


def _span(i: int, attrs: tuple) -> SpanData:
    return SpanData(**BASE, span_id=(i + 1).to_bytes(8, "big"), attributes=attrs)


def _check(spans: list[SpanData]) -> None:
    jsonl, proto = JsonLinesEncoder(), ProtoEncoder()
    for span in spans:  # one at a time: every span after the first goes through the caches
        assert orjson.loads(jsonl.encode([span])) == orjson.loads(encode_line([span]))
        assert TracesData.FromString(proto.encode([span])) == reference([span])
    assert orjson.loads(jsonl.encode(spans)) == orjson.loads(encode_line(spans))
    assert TracesData.FromString(proto.encode(spans)) == reference(spans)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(tricky_values, min_size=3, max_size=3),
    st.lists(st.tuples(st.integers(0, 4), tricky_values, st.integers(-(2**63), 2**64)), min_size=1, max_size=8),
)
def test_shared_pairs_with_some_replaced_stay_exact(static_values: list, changes: list) -> None:
    static = tuple(zip(("a", "b", "c"), static_values))
    spans = []
    for i, (position, value, seq) in enumerate(changes):
        attrs = [*static, ("launchtrace.seq", seq)]
        if position < len(attrs):
            attrs[position] = (attrs[position][0], value)  # another pair object at that position
        spans.append(_span(i, tuple(attrs)))
    _check(spans)


def test_same_first_pair_different_length_or_keys() -> None:
    first = ("a", 1)
    _check(
        [
            _span(0, (first, ("b", 2), ("seq", 1))),
            _span(1, (first, ("b", 2))),
            _span(2, (first, ("c", 2), ("seq", 3))),
            _span(3, (first, ("b", "x"), ("seq", 4))),
        ]
    )


def test_a_list_value_changed_in_place_is_re_encoded() -> None:
    value = [1, 2]
    pair = ("m", value)
    first = _span(0, (("k", "v"), pair, ("seq", 1)))
    jsonl, proto = JsonLinesEncoder(), ProtoEncoder()
    jsonl.encode([first])
    proto.encode([first])
    value.append(3)  # the same pair object, new content
    second = _span(1, (first.attributes[0], pair, ("seq", 2)))
    assert orjson.loads(jsonl.encode([second])) == orjson.loads(encode_line([second]))
    assert TracesData.FromString(proto.encode([second])) == reference([second])


def test_int64_edges_and_big_ints_follow_the_codec() -> None:
    values = [0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**30, True, False]
    _check([_span(i, (("x", 1), ("launchtrace.seq", v))) for i, v in enumerate(values)])


def test_a_key_new_on_every_span_becomes_volatile_and_encodes_the_same():
    """``launchtrace.seq`` misses the field cache on every span: after 256 misses in a row it is encoded without
    the cache (it stops filling it), a key whose values repeat never is, and every field equals ``make``'s."""
    from launchtrace.otlp.attrcache import FieldCache
    from launchtrace.otlp.encode_jsonl import _attr_json

    cache = FieldCache(_attr_json)
    for i in range(1000):
        for kv in (("launchtrace.seq", i), ("launchtrace.kernel", f"k{i % 3}"), ("n", i % 100)):
            assert cache.field(kv) == _attr_json(*kv)
    assert cache.volatile == {"launchtrace.seq"}
    size = len(cache)
    for i in range(1000, 1100):
        assert cache.field(("launchtrace.seq", i)) == _attr_json("launchtrace.seq", i)
    assert len(cache) == size  # no longer cached


def test_the_same_attributes_tuple_holding_a_list_is_encoded_again_after_the_list_changed() -> None:
    """The identity level (the very same tuple object) used to return the block made before the list in it was
    mutated; both encoders, Python and compiled, must follow the list."""
    shape = [1, 2]
    attrs = (("launchtrace.kernel", "k"), ("launchtrace.dims", shape))
    encoders = [JsonLinesEncoder(compiled=False), ProtoEncoder(compiled=False), JsonLinesEncoder(), ProtoEncoder()]
    for step in range(3):
        span = _span(step, attrs)
        for encoder in encoders:
            out = encoder.encode([span])
            if isinstance(encoder, JsonLinesEncoder):
                assert orjson.loads(out) == orjson.loads(encode_line([span]))
            else:
                assert TracesData.FromString(out) == reference([span])
        shape.append(step)  # the same tuple object, another value
