"""How OtlpSink cuts a batch into OTLP requests: under the receivers' 4 MiB limit, and one bad span dropped alone.

A Collector, Jaeger or Tempo rejects a gRPC request over 4 MiB whole, and a span whose attribute cannot be
encoded (its ``str()`` raises, a list that contains itself) used to take its whole request with it. The sink
splits such a request in halves until each part fits or the bad span is alone, and counts exactly what it
drops. These run through whichever protobuf encoder is in use (compiled where built).
"""

from __future__ import annotations

import pytest

from launchtrace.collect import Collector
from launchtrace.export import sinks
from launchtrace.export.sinks import MAX_REQUEST_BYTES, OtlpSink
from launchtrace.spans import SpanData


class _Unprintable:
    def __str__(self) -> str:
        raise ZeroDivisionError("no str for this value")


def _spans(n: int, size: int = 10) -> list[SpanData]:
    return [
        SpanData(
            b"\x01" * 16,
            (i + 1).to_bytes(8, "big"),
            None,
            "k",
            1,
            2,
            (("payload", "x" * size), ("seq", i)),
            scope_name="launchtrace",
        )
        for i in range(n)
    ]


def test_a_request_over_the_limit_is_split_and_every_span_arrives() -> None:
    spans = _spans(1500, size=6000)  # about 9 MB in one chunk of 2,048
    with Collector(None, grpc_port=0, http_port=None, keep=True) as c:
        sink = OtlpSink(f"http://127.0.0.1:{c.grpc_port}", protocol="grpc")
        sink.write(spans)
        assert c.wait_for_spans(len(spans))
        sizes = [m.ByteSize() for m in c.messages]
        sink.shutdown()
    assert sink.stats().exported == len(spans) and sink.stats().dropped == 0
    assert len(sizes) >= 3 and max(sizes) <= MAX_REQUEST_BYTES
    assert sorted(int.from_bytes(s.span_id, "big") for s in c.spans()) == list(range(1, len(spans) + 1))


def test_one_span_that_cannot_be_encoded_is_dropped_alone() -> None:
    spans = _spans(300)
    bad = (*spans[7].attributes, ("bad", _Unprintable()))
    spans[7] = SpanData(b"\x01" * 16, (8).to_bytes(8, "big"), None, "k", 1, 2, bad, scope_name="launchtrace")
    with Collector(None, grpc_port=0, http_port=None, keep=True) as c:
        sink = OtlpSink(f"http://127.0.0.1:{c.grpc_port}", protocol="grpc")
        sink.write(spans)
        assert c.wait_for_spans(299)
        sink.shutdown()
        received = sorted(int.from_bytes(s.span_id, "big") for s in c.spans())
    assert sink.stats().exported == 299 and sink.stats().dropped == 1
    assert received == [i for i in range(1, 301) if i != 8]


def test_requests_through_the_sender_thread_are_split_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sinks, "MAX_SPANS_PER_REQUEST", 500)
    spans = _spans(1200, size=9000)  # three chunks of up to 4.5 MB each
    with Collector(None, grpc_port=0, http_port=None, keep=True) as c:
        sink = OtlpSink(f"http://127.0.0.1:{c.grpc_port}", protocol="grpc")
        sink.write(spans)
        assert c.wait_for_spans(len(spans))
        sizes = [m.ByteSize() for m in c.messages]
        sink.shutdown()
    assert sink.stats().exported == len(spans) and sink.stats().dropped == 0
    assert len(sizes) >= 4 and max(sizes) <= MAX_REQUEST_BYTES
