"""The compiled encoders' attribute caches, on their pair-identity path (spans sharing (key, value) pair objects,
as the span builder makes them: one cached tuple of pairs per call site, plus a fresh ``launchtrace.seq`` pair),
stay exact.

Both encoders (compiled where built, else the library path) are checked against the libraries: the JSON Lines
encoder against ``json_codec.encode_line``, the protobuf encoder against the message built field by field with
the opentelemetry-proto classes.
"""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace.otlp.encode_proto import ProtoEncoder
from launchtrace.otlp.json_codec import encode_line, line_encoder
from launchtrace.spans import SpanData
from strategies import tricky_values
from test_encode_proto import reference

BASE = {"trace_id": b"\x01" * 16, "parent_span_id": None, "name": "k"}


def _span(i: int, attrs: tuple) -> SpanData:
    return SpanData(**BASE, span_id=(i + 1).to_bytes(8, "big"), attributes=attrs)


def _check(spans: list[SpanData]) -> None:
    jsonl, proto = line_encoder(), ProtoEncoder()
    for span in spans:  # one at a time: every span after the first goes through the caches
        assert orjson.loads(jsonl([span])) == orjson.loads(encode_line([span]))
        assert TracesData.FromString(proto.encode([span])) == reference([span])
    assert orjson.loads(jsonl(spans)) == orjson.loads(encode_line(spans))
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
    jsonl, proto = line_encoder(), ProtoEncoder()
    jsonl([first])
    proto.encode([first])
    value.append(3)  # the same pair object, new content
    second = _span(1, (first.attributes[0], pair, ("seq", 2)))
    assert orjson.loads(jsonl([second])) == orjson.loads(encode_line([second]))
    assert TracesData.FromString(proto.encode([second])) == reference([second])


def test_int64_edges_and_big_ints_follow_the_codec() -> None:
    values = [0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**30, True, False]
    _check([_span(i, (("x", 1), ("launchtrace.seq", v))) for i, v in enumerate(values)])


def test_the_same_attributes_tuple_holding_a_list_is_encoded_again_after_the_list_changed() -> None:
    """The identity level (the very same tuple object) used to return the block made before the list in it was
    mutated; both encoders, library and compiled, must follow the list."""
    shape = [1, 2]
    attrs = (("launchtrace.kernel", "k"), ("launchtrace.dims", shape))
    jsonl, proto, library_proto = line_encoder(), ProtoEncoder(), ProtoEncoder(compiled=False)
    for step in range(3):
        span = _span(step, attrs)
        assert orjson.loads(jsonl([span])) == orjson.loads(encode_line([span]))
        for encoder in (proto, library_proto):
            assert TracesData.FromString(encoder.encode([span])) == reference([span])
        shape.append(step)  # the same tuple object, another value
