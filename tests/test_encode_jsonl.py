"""The file sink's JSON Lines encoder (``json_codec.line_encoder``: compiled where built, else the library path)
against the OTLP/JSON codec's ``encode_line`` it must agree with, over random spans."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launchtrace.otlp.json_codec import encode_line, line_encoder
from launchtrace.spans import SpanData
from strategies import spans, tricky_values


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans, max_size=6), st.lists(spans, max_size=3))
def test_each_line_loads_to_what_the_codec_writes(batch: list[SpanData], other: list[SpanData]) -> None:
    encoder = line_encoder()
    encoder(other)  # warm the caches with something else first
    line = encoder(batch)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == orjson.loads(encode_line(batch))
    assert orjson.loads(encoder(batch)) == orjson.loads(line)  # cached path gives the same


def test_equal_values_of_different_types_stay_apart() -> None:
    encoder = line_encoder()
    base = {"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "parent_span_id": None, "name": "k"}
    for value in (1, True, 1.0, 0.0, -0.0, (1,), (True,), (1.0,), float("nan"), "1", float("inf")):
        span = SpanData(**base, attributes=(("x", value),))
        assert orjson.loads(encoder([span])) == orjson.loads(encode_line([span])), value


def test_lone_surrogates_fall_back_to_the_codec() -> None:
    span = SpanData(b"\x01" * 16, b"\x02" * 8, None, "bad\ud800", attributes=(("k", "v\udfff"),))
    line = line_encoder()([span])
    assert orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] == "bad?"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(tricky_values, min_size=3, max_size=3), min_size=2, max_size=8))
def test_spans_with_the_same_keys_and_changing_values_stay_exact(rows: list[list]) -> None:
    encoder = line_encoder()
    base = {"trace_id": b"\x01" * 16, "parent_span_id": None, "name": "k"}
    batch = [
        SpanData(**base, span_id=(i + 1).to_bytes(8, "big"), attributes=tuple(zip(("a", "b", "c"), row)))
        for i, row in enumerate(rows)
    ]
    for span in batch:
        assert orjson.loads(encoder([span])) == orjson.loads(encode_line([span]))
