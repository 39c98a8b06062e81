"""``launchtrace collect``: a real OTLP receiver, fed by the stock OpenTelemetry SDK exporters and raw HTTP.

Nothing is mocked: the SDK's ``TracerProvider`` + ``OTLPSpanExporter`` (gRPC and HTTP) send over loopback, raw
HTTP bodies are posted with ``urllib``, and the command runs as a subprocess stopped by real signals.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import StatusCode

from launchtrace.otlp.encode_proto import encode_spans
from launchtrace.otlp.json_codec import encode_line
from launchtrace.receiver.collect import Collector
from protowire import request_of_span
from strategies import spans as spans_strategy
from test_sinks import make_spans, parse_jsonl


def sdk_spans(exporter, n: int) -> list:
    """Send ``n`` child spans under one root through the real SDK; returns the finished SDK spans."""
    provider = TracerProvider(resource=Resource.create({"service.name": "collect-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("collect-test", "1.0")
    with tracer.start_as_current_span("root") as root:
        for i in range(n):
            with tracer.start_as_current_span(f"child-{i}", attributes={"i": i, "x": [1.5, 2.5]}) as span:
                if i == 1:
                    span.set_status(StatusCode.ERROR, "boom")
    provider.shutdown()
    return [root]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_collector_writes_what_the_sdk_exporters_send(tmp_path: Path, protocol: str) -> None:
    out = tmp_path / "collected.jsonl"
    with Collector(out, grpc_port=0, http_port=0) as c:
        if protocol == "grpc":
            exporter = GrpcExporter(endpoint=f"http://127.0.0.1:{c.grpc_port}", insecure=True)
        else:
            exporter = HttpExporter(endpoint=f"http://127.0.0.1:{c.http_port}/v1/traces")
        sdk_spans(exporter, 3)
        assert c.wait_for_spans(4)
    messages = parse_jsonl(out)  # the file holds OTLP JSON that parses back to TracesData
    spans = [s for m in messages for rs in m.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert sorted(s.name for s in spans) == ["child-0", "child-1", "child-2", "root"]
    root = next(s for s in spans if s.name == "root")
    assert all(s.parent_span_id == root.span_id for s in spans if s.name != "root")
    assert next(s for s in spans if s.name == "child-1").status.code == StatusCode.ERROR.value
    rs = messages[0].resource_spans[0]
    assert {kv.key: kv.value.string_value for kv in rs.resource.attributes}["service.name"] == "collect-test"
    line = orjson.loads(out.read_text().splitlines()[0])
    span = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and isinstance(span["kind"], int)


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_http_accepts_protobuf_json_and_gzip_and_rejects_garbage(tmp_path: Path) -> None:
    spans = make_spans(4)
    with Collector(tmp_path / "c.jsonl", grpc_port=None, http_port=0, keep=True) as c:
        url = f"http://127.0.0.1:{c.http_port}/v1/traces"
        proto = encode_spans(spans)
        assert post(url, proto, {"Content-Type": "application/x-protobuf"})[0] == 200
        assert (
            post(url, gzip.compress(proto), {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})[0]
            == 200
        )
        assert post(url, encode_line(spans).encode(), {"Content-Type": "application/json"})[0] == 200
        status, body = post(url, b"\xff\x00garbage", {"Content-Type": "application/x-protobuf"})
        assert status == 400 and b"cannot decode" in body
        assert (
            post(
                url,
                b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
                {"Content-Type": "application/json"},
            )[0]
            == 400
        )
        assert post(url.replace("/v1/traces", "/v1/logs"), proto, {"Content-Type": "application/x-protobuf"})[0] == 404
        assert post(url, proto, {"Content-Type": "text/plain"})[0] == 415
        assert c.wait_for_spans(3 * len(spans))
        assert c.spans() == spans * 3
    assert len(parse_jsonl(tmp_path / "c.jsonl")) == 3


def start_cli(out: Path, *extra: str) -> tuple[subprocess.Popen, int, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "collect", "--out", str(out), "--grpc", "0", "--http", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.startswith("launchtrace collect: listening on grpc 127.0.0.1:"), line
    grpc_port = int(line.split("grpc 127.0.0.1:")[1].split(",")[0])
    http_port = int(line.split("http 127.0.0.1:")[1].split(";")[0])
    return proc, grpc_port, http_port


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_stops_cleanly_on_a_signal_with_nothing_lost(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "collected.jsonl"
    proc, grpc_port, http_port = start_cli(out)
    try:
        from launchtrace.export.sinks import OtlpSink

        sink = OtlpSink(f"http://127.0.0.1:{grpc_port}", protocol="grpc")
        http_sink = OtlpSink(f"http://127.0.0.1:{http_port}/v1/traces", protocol="http/protobuf")
        for i in range(10):
            sink.write(make_spans(100, start=1 + 100 * i))
            http_sink.write(make_spans(10, start=2000 + 10 * i))
        sink.shutdown()
        http_sink.shutdown()
        assert sink.stats().exported == 1000 and http_sink.stats().exported == 100
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "received 1100 spans in 20 requests; wrote 1100" in err
    spans = [s for m in parse_jsonl(out) for rs in m.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(spans) == 1100


def test_cli_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with Collector(None, grpc_port=0, http_port=None) as c:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "launchtrace",
                "collect",
                "--out",
                str(tmp_path / "x.jsonl"),
                "--grpc",
                str(c.grpc_port),
                "--http",
                "off",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "in use" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_rejects_a_bad_port_argument(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "launchtrace", "collect", "--grpc", "70000"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "out of range" in proc.stderr


def test_cli_max_spans_stops_by_itself(tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    proc, grpc_port, _ = start_cli(out, "--max-spans", "50")
    from launchtrace.export.sinks import OtlpSink

    sink = OtlpSink(f"http://127.0.0.1:{grpc_port}", protocol="grpc")
    sink.write(make_spans(60))
    sink.shutdown()
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == 0
    assert len(parse_jsonl(out)) == 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans_strategy, max_size=5), st.lists(spans_strategy, max_size=3))
def test_fast_transcoding_matches_json_format(batch: list, other: list) -> None:
    """The collector's line equals json_format's (hex ids, integer enums), caches warmed by another batch."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from launchtrace.otlp.transcode import json_line, reference_line

    json_line(ExportTraceServiceRequest.FromString(encode_spans(other)))
    message = ExportTraceServiceRequest.FromString(encode_spans(batch))
    assert orjson.loads(json_line(message)) == orjson.loads(reference_line(message))


def test_fast_transcoding_of_every_span_field_set_to_one() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from launchtrace.otlp.transcode import json_line, reference_line
    from launchtrace.spans import SpanData, SpanEvent, SpanLink

    one = SpanData(
        b"\x01" * 16, b"\x02" * 8, b"\x03" * 8, "n", 1, 1, (("a", 1),), kind=1, status_code=1, status_message="m",
        events=(SpanEvent("e", 1, (("b", 1),), 1),),
        links=(SpanLink(b"\x04" * 16, b"\x05" * 8, (("c", 1),), "s", 1, 1),),
        trace_state="t", flags=1, dropped_attributes_count=1, dropped_events_count=1, dropped_links_count=1,
        resource=(("r", 1),), resource_schema_url="u", scope_name="s", scope_version="v", scope_attributes=(("d", 1),),
        schema_url="w",
    )  # fmt: skip
    message = ExportTraceServiceRequest.FromString(encode_spans([one, *make_spans(3)]))
    fast, ref = orjson.loads(json_line(message)), orjson.loads(reference_line(message))
    assert fast == ref
    span = fast["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert {k for k in span} == {
        "traceId", "spanId", "parentSpanId", "traceState", "flags", "name", "kind", "startTimeUnixNano",
        "endTimeUnixNano", "attributes", "droppedAttributesCount", "events", "droppedEventsCount", "links",
        "droppedLinksCount", "status",
    }  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(b"\x7a\x02\x18\x02" + b"\x7a\x04\x12\x02ok", id="status-twice-merged"),
        pytest.param(b"\xa8\x01\x05", id="unknown-field-21"),
        pytest.param(b"\x2a\x03two", id="name-twice-last-wins"),
        pytest.param(b"\x30\xff\xff\xff\xff\x0f", id="kind-negative"),
    ],
)
def test_odd_wire_forms_convert_as_json_format_does(extra: bytes) -> None:
    """A span sent in a form protobuf merges or keeps (a singular field twice, an unknown field, a negative
    enum) converts to ``json_format``'s line: the line is made from the parsed message, not the bytes."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from launchtrace.otlp.transcode import json_line, reference_line

    base = ExportTraceServiceRequest.FromString(encode_spans(make_spans(1))).resource_spans[0].scope_spans[0]
    raw = request_of_span(base.spans[0].SerializeToString() + extra)
    message = ExportTraceServiceRequest.FromString(raw)
    assert orjson.loads(json_line(message)) == orjson.loads(reference_line(message))


def test_message_walk_is_taken_for_ordinary_spans() -> None:
    """The fast path really runs for what launchtrace's exporter sends (else the speed-up would be silent)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from launchtrace.otlp import transcode

    message = ExportTraceServiceRequest.FromString(encode_spans(make_spans(20)))
    assert transcode._FAST
    line = transcode._fast_line(message)
    assert transcode.json_line(message) == line
    assert orjson.loads(line) == orjson.loads(transcode.reference_line(message))


def test_the_collector_imports_its_decoders_when_it_starts_not_on_the_first_request() -> None:
    """In a fresh interpreter (this one has them imported already): the first request used to pay 30 ms."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from launchtrace.receiver.collect import Collector\n"
        "assert 'launchtrace.otlp.transcode' not in sys.modules\n"
        "with Collector(None, grpc_port=None, http_port=0):\n"
        "    print('launchtrace.otlp.transcode' in sys.modules,\n"
        "          'opentelemetry.proto.collector.trace.v1.trace_service_pb2' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
