"""How OtlpSink cuts a batch into OTLP requests: under the receivers' 4 MiB limit, and one bad span dropped alone.

A Collector, Jaeger or Tempo rejects a gRPC request over 4 MiB whole, and a span whose attribute cannot be
encoded (its ``str()`` raises, a list that contains itself) used to take its whole request with it. The sink
splits such a request in halves until each part fits or the bad span is alone, and counts exactly what it
drops. These run through whichever protobuf encoder is in use (compiled where built).
"""

from __future__ import annotations

import pytest

from launchtrace.export import sinks
from launchtrace.export.sinks import MAX_REQUEST_BYTES, OtlpSink
from launchtrace.receiver.collect import Collector
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


class _ConcurrencyProbe(Collector):
    """A collector whose receive() notes how many requests are being received at once.

    The first request waits (up to ``hold_s``) for a second one to arrive, so a sender with two requests on the
    wire is seen at 2, and a sender with one at 1 (the wait then runs out).
    """

    def __init__(self, hold_s: float) -> None:
        super().__init__(None, grpc_port=0, http_port=None)
        import threading

        self._probe_lock = threading.Lock()
        self._second = threading.Event()
        self._hold_s = hold_s
        self.now = self.most = 0

    def receive(self, message, headers=None, spans=None, raw=None):  # type: ignore[no-untyped-def]
        with self._probe_lock:
            self.now += 1
            self.most = max(self.most, self.now)
            if self.now >= 2:
                self._second.set()
        try:
            self._second.wait(self._hold_s)
            return super().receive(message, headers, spans, raw)
        finally:
            with self._probe_lock:
                self.now -= 1


@pytest.mark.parametrize("in_flight", [1, 2])
def test_grpc_keeps_in_flight_requests_on_the_wire(monkeypatch: pytest.MonkeyPatch, in_flight: int) -> None:
    monkeypatch.setattr(sinks, "MAX_SPANS_PER_REQUEST", 100)
    spans = _spans(600)
    with _ConcurrencyProbe(hold_s=1.0 if in_flight == 1 else 10.0) as c:
        sink = OtlpSink(f"http://127.0.0.1:{c.grpc_port}", protocol="grpc", in_flight=in_flight)
        sink.write(spans)
        assert sink.stats().exported == len(spans)  # write() returned: every request was answered
        sink.shutdown()
        assert c.spans_received == len(spans)
    assert c.most == in_flight


def test_grpc_sends_two_requests_at_once_by_default() -> None:
    sink = OtlpSink("http://127.0.0.1:9", protocol="grpc")
    http_sink = OtlpSink("http://127.0.0.1:9/v1/traces", protocol="http/protobuf")
    assert (sink.in_flight, http_sink.in_flight) == (sinks.GRPC_IN_FLIGHT, 1) and sinks.GRPC_IN_FLIGHT == 2
    with pytest.raises(ValueError, match="in_flight"):
        OtlpSink("http://127.0.0.1:9", protocol="grpc", in_flight=0)
