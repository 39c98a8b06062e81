"""``launchtrace collect``'s receiving side on its own: the transcoder per span, and the receiver end to end.

1. Converting one request of real launch spans (SpanBuilder output, 31 attributes each) from protobuf bytes to
   its OTLP JSON line, in microseconds per span: the compiled transcoder (``_wire2json.transcode``), its
   checking walk alone (``count``, what receiving costs), the protobuf parse plus the Python message walk
   with warm caches (what the writer runs without the compiled module), and ``json_format`` itself (the
   reference).
2. The receiver end to end: ``launchtrace collect --max-spans N`` in its own process, fed pre-encoded requests
   over gRPC (raw bytes, so the sender costs almost nothing) until it has written every span and exited;
   compiled transcoder versus ``LAUNCHTRACE_PURE_PYTHON=1``, alternating, median of ``--runs``.

Run: ``python benchmarks/bench_collect.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def per_span_us(fn: Callable[[], object], spans: int, repeat: int) -> float:
    """Best of ``repeat`` timings of ``fn``, in microseconds per span."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / spans * 1e6


def bench_transcode(requests: list[bytes], spans: int) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from launchtrace.otlp import transcode

    w2j = transcode.native_transcoder()
    parse = ExportTraceServiceRequest.FromString
    messages = [parse(r) for r in requests]
    for m in messages[:2]:  # the Python walk's caches warm, as in a running collector
        transcode._fast_line(m)

    def each(fn: Callable[[bytes], object]) -> None:
        for r in requests:  # each result dropped at once, as the collector's writer does
            fn(r)

    print(f"1. protobuf -> JSON line, {spans} launch spans in {len(requests)} requests, us/span (best of runs):")
    rows = []
    if w2j is not None:
        rows.append(("compiled transcode", lambda: each(w2j.transcode), 7))
        rows.append(("compiled count (checks only)", lambda: each(w2j.count), 7))
    rows.append(("protobuf parse (FromString)", lambda: each(parse), 3))
    rows.append(("parse + Python walk, warm caches", lambda: each(lambda r: transcode._fast_line(parse(r))), 3))
    rows.append(("json_format reference", lambda: [transcode.reference_line(m) for m in messages[:2]], 1))
    results = {}
    for name, fn, repeat in rows:
        n = spans if name != "json_format reference" else sum(_count(m) for m in messages[:2])
        results[name] = per_span_us(fn, n, repeat)
        print(f"   {name:34s} {results[name]:8.3f} us/span  ({1e6 / results[name]:12,.0f} spans/s)")
    if w2j is not None:
        c = results["compiled transcode"]
        print(
            f"   compiled is {results['parse + Python walk, warm caches'] / c:.1f}x the Python walk, "
            f"{results['json_format reference'] / c:.0f}x json_format"
        )


def _count(message: object) -> int:
    return sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)


def receiver_until_written(requests: list[bytes], spans: int, pure: bool, senders: int = 2) -> float:
    """Spans/s from the first request sent until ``collect`` wrote them all and exited."""
    import grpc

    env = dict(os.environ, LAUNCHTRACE_PURE_PYTHON="1" if pure else "0")
    with tempfile.TemporaryDirectory(prefix="bench_collect_") as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-m", "launchtrace", "collect", "--out", os.path.join(tmp, "c.jsonl"), "--grpc", "0",
             "--http", "off", "--max-spans", str(spans)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )  # fmt: skip
        port = int(proc.stdout.readline().split("grpc 127.0.0.1:")[1].split(";")[0])
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 1 << 26)])
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        export(b"", timeout=30)  # connected (an empty request: no spans)

        def send(part: list[bytes]) -> None:
            for r in part:
                export(r, timeout=120)

        threads = [threading.Thread(target=send, args=(requests[i::senders],)) for i in range(senders)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        proc.wait(timeout=300)
        t1 = time.perf_counter()
        channel.close()
        size = os.path.getsize(os.path.join(tmp, "c.jsonl"))
    if proc.returncode != 0 or size == 0:
        raise SystemExit(f"collect failed (exit {proc.returncode}, {size} bytes written)")
    return spans / (t1 - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=512, help="spans per request (OtlpSink's batch)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import warp as wp

    from bench_export import launch_spans
    from launchtrace.otlp.encode_proto import encode_spans

    wp.init()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    os.environ["LAUNCHTRACE_PURE_PYTHON"] = "1"  # the capture's Python reference builds the spans: the same
    try:  # spans whether or not its compiled wrapper is built (what is measured here is the receiving side)
        template = launch_spans(min(args.spans, 2048))
    finally:
        del os.environ["LAUNCHTRACE_PURE_PYTHON"]
    spans = [template[i % len(template)] for i in range(args.spans)]
    requests = [encode_spans(spans[i : i + args.batch]) for i in range(0, len(spans), args.batch)]
    total = sum(_count_raw(r) for r in requests)
    print(f"launch spans: {total} with {len(spans[0].attributes)} attributes, {args.batch} per request, "
          f"{sum(map(len, requests)) / total:.0f} protobuf bytes per span")  # fmt: skip
    bench_transcode(requests, total)
    fast, pure = [], []
    for _ in range(args.runs):
        fast.append(receiver_until_written(requests, total, pure=False))
        pure.append(receiver_until_written(requests, total, pure=True))
    print(
        f"2. collect until written (exits), fed raw requests over gRPC: compiled median {statistics.median(fast):,.0f} "
        f"spans/s (min {min(fast):,.0f}, max {max(fast):,.0f}); pure Python median {statistics.median(pure):,.0f} "
        f"(min {min(pure):,.0f}, max {max(pure):,.0f}); {args.runs} runs each, alternating"
    )


def _count_raw(raw: bytes) -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return _count(ExportTraceServiceRequest.FromString(raw))


if __name__ == "__main__":
    main()
