"""``launchtrace collect``'s receiving side on its own: the per-span costs, and the receiver end to end.

1. One request of real launch spans (SpanBuilder output) in microseconds per span: the protobuf parse and id
   check (what receiving costs, in either output format), the parse plus the Python message walk with warm
   caches (what a JSON Lines output costs more), and ``json_format`` itself (the reference).
2. The receiver end to end: ``launchtrace collect --max-spans N`` in its own process, fed pre-encoded requests
   over gRPC (raw bytes, so the sender costs almost nothing) until it has written every span and exited; a
   ``.pb`` output (the protobuf as received) versus a ``.jsonl`` one, alternating, median of ``--runs``.

Run: ``python benchmarks/bench_collect.py [--spans 50000] [--runs 3]`` (about a minute).
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
    from launchtrace.otlp import transcode
    from launchtrace.receiver.collect import decode_request

    for r in requests[:2]:  # the Python walk's caches warm, as in a running collector
        transcode.json_line(decode_request(r)[0])
    messages = [decode_request(r)[0] for r in requests[:2]]

    def each(fn: Callable[[bytes], object]) -> None:
        for r in requests:  # each result dropped at once, as the collector's writer does
            fn(r)

    print(f"1. {spans} launch spans in {len(requests)} requests, us/span (best of runs):")
    rows = [
        ("parse + id check (receiving)", lambda: each(decode_request), 5),
        ("parse + check + Python walk", lambda: each(lambda r: transcode.json_line(decode_request(r)[0])), 3),
        ("json_format reference", lambda: [transcode.reference_line(m) for m in messages], 1),
    ]
    for name, fn, repeat in rows:
        n = spans if name != "json_format reference" else sum(_count(m) for m in messages)
        us = per_span_us(fn, n, repeat)
        print(f"   {name:34s} {us:8.3f} us/span  ({1e6 / us:12,.0f} spans/s)")


def _count(message: object) -> int:
    return sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)


def receiver_until_written(requests: list[bytes], spans: int, out: str, senders: int = 2) -> float:
    """Spans/s from the first request sent until ``collect`` wrote them all to ``out`` (a file name) and exited."""
    import grpc

    with tempfile.TemporaryDirectory(prefix="bench_collect_") as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-m", "launchtrace", "collect", "--out", os.path.join(tmp, out), "--grpc", "0",
             "--http", "off", "--max-spans", str(spans)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
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
        size = os.path.getsize(os.path.join(tmp, out))
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
    results: dict[str, list[float]] = {"c.pb": [], "c.jsonl": []}
    for _ in range(args.runs):
        for out, rates in results.items():
            rates.append(receiver_until_written(requests, total, out))
    print("2. collect until written (exits), fed raw requests over gRPC, alternating, spans/s:")
    for out, rates in results.items():
        print(
            f"   --out {out:8s} median {statistics.median(rates):,.0f} (min {min(rates):,.0f}, max {max(rates):,.0f}; "
            f"{args.runs} runs)"
        )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def _count_raw(raw: bytes) -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return _count(ExportTraceServiceRequest.FromString(raw))


if __name__ == "__main__":
    main()
