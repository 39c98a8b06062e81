"""The file sink and the OTLP sink, against real files, real failing files and a real OTLP receiver.

The OTLP sink is tested over loopback gRPC and HTTP into :class:`launchtrace.receiver.collect.Collector`; failure cases
use a port nobody listens on (down at start) and a receiver stopped mid-run.
"""

from __future__ import annotations

import base64
import logging
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from conftest import upstream_fixtures
from launchtrace.export.sinks import FileSink, OtlpSink
from launchtrace.receiver.collect import Collector
from launchtrace.spans import STATUS_ERROR, SpanData, SpanEvent, SpanLink

REPO = Path(__file__).resolve().parents[1]
FIXTURE = upstream_fixtures() / "otlp_file_exporter_spec_traces.jsonl"
RESOURCE = (("service.name", "sink-test"), ("process.pid", 42))


def make_spans(n: int, start: int = 0) -> list[SpanData]:
    trace = bytes.fromhex("5b8efff798038103d269b633813fc700")
    root = SpanData(
        trace,
        (1).to_bytes(8, "big"),
        None,
        "step",
        1_000,
        9_000,
        (("launchtrace.step", 3),),
        resource=RESOURCE,
        scope_name="launchtrace",
        scope_version="0.1.0",
    )
    out = [root] if start == 0 else []
    for i in range(start, start + n):
        out.append(
            SpanData(
                trace,
                (i + 2).to_bytes(8, "big"),
                root.span_id,
                "sim.integrate",
                1_000 + i,
                2_000 + i,
                (("launchtrace.dim", (64,)), ("launchtrace.i", i), ("x", 0.5), ("ok", True), ("ü", "ω")),
                status_code=STATUS_ERROR if i % 7 == 3 else 0,
                status_message="ValueError: boom" if i % 7 == 3 else "",
                events=(SpanEvent("exception", 1_500 + i, (("exception.type", "ValueError"),)),) if i % 7 == 3 else (),
                links=(SpanLink(trace, root.span_id),) if i == 0 else (),
                resource=RESOURCE,
                scope_name="launchtrace",
                scope_version="0.1.0",
            )
        )
    return out


def hex_ids_to_base64(obj: object) -> object:
    """OTLP/JSON ids are hex; json_format wants base64 (checked lengths: 16 or 8 bytes)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("traceId", "spanId", "parentSpanId") and v:
                raw = bytes.fromhex(v)
                assert len(raw) == (16 if k == "traceId" else 8), (k, v)
                out[k] = base64.b64encode(raw).decode()
            else:
                out[k] = hex_ids_to_base64(v)
        return out
    if isinstance(obj, list):
        return [hex_ids_to_base64(x) for x in obj]
    return obj


def parse_jsonl(path: Path) -> list[TracesData]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        out.append(json_format.ParseDict(hex_ids_to_base64(orjson.loads(line)), TracesData()))
    return out


def shape(obj: object, path: str = "") -> set[tuple[str, str]]:
    """(key path, JSON type) pairs; list items share the path ``[]``."""
    if isinstance(obj, dict):
        pairs = {(path, "object")}
        for k, v in obj.items():
            pairs |= shape(v, f"{path}.{k}")
        return pairs
    if isinstance(obj, list):
        pairs = {(path, "array")}
        for v in obj:
            pairs |= shape(v, f"{path}[]")
        return pairs
    kind = "bool" if isinstance(obj, bool) else type(obj).__name__
    return {(path, kind)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- file sink -------------------------------------------------------------------------------------------------
def test_file_sink_writes_otlp_json_lines_that_parse_as_traces_data(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    sink = FileSink(path)
    sink.write(make_spans(5))
    sink.write(make_spans(3, start=5))
    sink.shutdown()
    messages = parse_jsonl(path)
    assert len(messages) == 2
    spans = [s for m in messages for rs in m.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(spans) == 6 + 3
    assert spans[1].parent_span_id == spans[0].span_id
    assert spans[4].status.code == STATUS_ERROR and spans[4].events[0].name == "exception"
    assert sink.stats().exported == 9 and sink.stats().dropped == 0


def test_file_sink_output_has_the_shape_of_the_spec_example(tmp_path: Path) -> None:
    """Every key path we write that the spec's example also has carries the same JSON type there; every key
    is lowerCamelCase OTLP; ids are hex of the right length; enums are integers; 64-bit ints are strings."""
    path = tmp_path / "spans.jsonl"
    sink = FileSink(path)
    sink.write(make_spans(8))
    sink.shutdown()
    ours: set[tuple[str, str]] = set()
    for line in path.read_text().splitlines():
        ours |= shape(orjson.loads(line))
    theirs: set[tuple[str, str]] = set()
    for line in FIXTURE.read_text().splitlines():
        theirs |= shape(orjson.loads(line))
    their_types = {}
    for p, kind in theirs:
        their_types.setdefault(p, set()).add(kind)
    shared = [(p, k) for p, k in ours if p in their_types]
    assert len(shared) > 20
    for p, kind in shared:
        assert kind in their_types[p], (p, kind, their_types[p])
    span = ".resourceSpans[].scopeSpans[].spans[]"
    assert (f"{span}.kind", "int") in ours and (f"{span}.status.code", "int") in ours
    assert (f"{span}.startTimeUnixNano", "str") in ours
    assert (f"{span}.attributes[].value.intValue", "str") in ours
    first = orjson.loads(path.read_text().splitlines()[0])
    s0 = first["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    assert len(s0["traceId"]) == 32 and len(s0["spanId"]) == 16 and len(s0["parentSpanId"]) == 16
    assert all(c in "0123456789abcdef" for c in s0["traceId"] + s0["spanId"])


def test_file_sink_on_a_full_disk_warns_once_and_counts_drops(caplog: pytest.LogCaptureFixture) -> None:
    sink = FileSink("/dev/full")  # every write fails with ENOSPC
    with caplog.at_level(logging.WARNING, logger="launchtrace.export.sinks"):
        for i in range(4):
            sink.write(make_spans(2, start=2 * i + 1))  # never raises
    assert sink.stats().dropped == 8 and sink.stats().exported == 0 and sink.stats().failures == 4
    warnings = [r for r in caplog.records if r.name == "launchtrace.export.sinks"]
    assert len(warnings) == 1 and "No space left" in warnings[0].getMessage()


def test_file_sink_in_an_unwritable_folder_counts_drops(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    if os.geteuid() == 0:  # root writes anywhere: a folder that does not exist fails the same way
        target = tmp_path / "missing" / "spans.jsonl"
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = ro / "spans.jsonl"
    sink = FileSink(target)
    with caplog.at_level(logging.WARNING, logger="launchtrace.export.sinks"):
        sink.write(make_spans(3))
        sink.write(make_spans(2, start=3))
    assert sink.stats().dropped == 4 + 2
    assert len([r for r in caplog.records if r.name == "launchtrace.export.sinks"]) == 1


def test_a_write_cut_short_leaves_only_whole_lines(tmp_path: Path) -> None:
    """A file size limit (RLIMIT_FSIZE) stops a line part way: the partial line is rolled back, the drops
    are counted, and every line left in the file parses."""
    path = tmp_path / "spans.jsonl"
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        from test_sinks import make_spans
        from launchtrace.export.sinks import FileSink
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        sink = FileSink({str(path)!r})
        sink.write(make_spans(10))
        size = __import__("os").path.getsize({str(path)!r})
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + size // 2, resource.RLIM_INFINITY))
        for i in range(3):
            sink.write(make_spans(10, start=10 + 10 * i))
        s = sink.stats()
        print(s.exported, s.dropped)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    exported, dropped = map(int, out.stdout.split())
    assert (exported, dropped) == (11, 30)
    messages = parse_jsonl(path)
    assert len(messages) == 1
    assert path.read_bytes().endswith(b"\n")


# -- OTLP sink -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_sink_delivers_every_span_unchanged(protocol: str) -> None:
    with Collector(None, grpc_port=0, http_port=0, keep=True) as c:
        port = c.grpc_port if protocol == "grpc" else c.http_port
        suffix = "" if protocol == "grpc" else "/v1/traces"
        sink = OtlpSink(f"http://127.0.0.1:{port}{suffix}", protocol=protocol)
        sent = make_spans(20)
        sink.write(sent)
        assert c.wait_for_spans(len(sent))
        received = c.spans()
    sink.shutdown()
    assert received == sent
    assert sink.stats().exported == len(sent) and sink.stats().dropped == 0


def test_otlp_sink_splits_big_batches_into_requests() -> None:
    with Collector(None, grpc_port=0, http_port=None, keep=True) as c:
        sink = OtlpSink(f"http://127.0.0.1:{c.grpc_port}", protocol="grpc")
        sent = make_spans(5000)
        sink.write(sent)
        assert c.wait_for_spans(len(sent))
        assert c.requests_received == 3  # 2048 + 2048 + 905
    sink.shutdown()


def test_otlp_http_sink_honours_the_standard_compression_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    with Collector(None, grpc_port=None, http_port=0, keep=True) as c:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{c.http_port}")
        sink = OtlpSink(None, protocol="http/protobuf")  # endpoint resolved from the variable, as the SDK does
        assert sink.endpoint == f"http://127.0.0.1:{c.http_port}/v1/traces"
        sink.write(make_spans(4))
        assert c.wait_for_spans(5)
        assert c.last_headers.get("content-encoding") == "gzip"  # what arrived, and the receiver read it
    sink.shutdown()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_sink_down_at_start_then_up_counts_drops_logs_once_then_recovery(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    suffix = "" if protocol == "grpc" else "/v1/traces"
    sink = OtlpSink(f"http://127.0.0.1:{port}{suffix}", protocol=protocol, timeout=0.5)
    with caplog.at_level(logging.WARNING, logger="launchtrace.export.sinks"):
        sink.write(make_spans(3))
        sink.write(make_spans(2, start=3))
        assert sink.stats().dropped == 4 + 2 and sink.stats().exported == 0
        with Collector(
            None, grpc_port=port if protocol == "grpc" else None, http_port=port if protocol != "grpc" else None
        ) as c:
            sink.write(make_spans(5, start=5))
            assert c.wait_for_spans(5)
    sink.shutdown()
    ours = [r.getMessage() for r in caplog.records if r.name == "launchtrace.export.sinks"]
    assert len(ours) == 2, ours
    assert "could not export 4 spans" in ours[0]
    assert "works again; 6 spans were dropped" in ours[1]
    assert sink.stats().exported == 5 and sink.stats().dropped == 6


def test_otlp_partial_success_rejections_are_counted_as_drops(caplog: pytest.LogCaptureFixture) -> None:
    """A real gRPC server that accepts the request but rejects 3 spans (OTLP partial success)."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as pb
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc as pb_grpc

    class Rejecting(pb_grpc.TraceServiceServicer):
        def Export(self, request, context):
            return pb.ExportTraceServiceResponse(
                partial_success=pb.ExportTracePartialSuccess(rejected_spans=3, error_message="too old")
            )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_TraceServiceServicer_to_server(Rejecting(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        sink = OtlpSink(f"http://127.0.0.1:{port}", protocol="grpc")
        with caplog.at_level(logging.WARNING, logger="launchtrace.export.sinks"):
            sink.write(make_spans(9))
        sink.shutdown()
    finally:
        server.stop(0)
    assert sink.stats().dropped == 3 and sink.stats().exported == 10 - 3
    assert any("rejected 3 spans: too old" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_sink_sends_the_standard_headers_variable(protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=team-a,authorization=Bearer%20t0ken")
    with Collector(None, grpc_port=0, http_port=0) as c:
        port = c.grpc_port if protocol == "grpc" else c.http_port
        suffix = "" if protocol == "grpc" else "/v1/traces"
        sink = OtlpSink(f"http://127.0.0.1:{port}{suffix}", protocol=protocol)
        sink.write(make_spans(2))
        assert c.wait_for_spans(3)
        headers = c.last_headers
    sink.shutdown()
    assert headers["x-tenant"] == "team-a" and headers["authorization"] == "Bearer t0ken"


def test_otlp_sink_keeps_working_after_shutdown_counts_and_never_hangs() -> None:
    """After shutdown() the sender thread ends; a later multi-request write restarts it and fails fast."""
    with Collector(None, grpc_port=0, http_port=None, keep=True) as c:
        sink = OtlpSink(f"http://127.0.0.1:{c.grpc_port}", protocol="grpc")
        sink.write(make_spans(5000))  # three requests through the sender thread
        assert c.wait_for_spans(5001)
        sink.shutdown()
        sink.write(make_spans(5000, start=5000))  # exporter shut down: every request fails, counted
    assert sink.stats().exported == 5001 and sink.stats().dropped == 5000
