"""Export cost and throughput, as ratios against a baseline measured in the same run.

Three measurements, each alternating its two sides (A B A B ...) for ``--pairs`` pairs after one warm-up
pair, reporting the median per-pair ratio with its min and max:

1. total: a loop of ``--launches`` launches of a trivial compiled kernel exported to the JSON Lines file sink,
   final flush included, versus the same loop bare (``uninstrument()``d). Target <= 1.5x. Once per fold mode
   (``--fold``, default ``auto,always``): ``auto`` (the default) writes every launch as its own span (its step
   traces of 1,000 launches fit the span budget), ``off`` too, ``always`` folds the loop into summary spans.
2. hot path: the same exported loop timed without the final flush (what the launching thread pays while the
   export worker runs beside it) versus bare. Target <= 1.10x.
   Both also as CPU time, which a loaded machine disturbs far less than wall time: the process's CPU time
   (every thread: the export worker included) for 1, and the launching thread's own CPU time for 2 (which does
   not count time spent waiting for the GIL, so the wall-time figure stays the one that judges 2).
3. OTLP/gRPC into ``launchtrace collect`` (a separate process) on loopback: spans per second counted at the
   receiver (it parses every request and says when it has them all), our OtlpSink sending real launch spans
   built by the SpanBuilder, versus the stock SDK (TracerProvider + BatchSpanProcessor + OTLPSpanExporter)
   sending spans with the same attributes. Target >= 200,000 spans/s. Also: ours until the receiver has
   written every span to its ``.pb`` file (the protobuf as received: the receiver's sustained rate);
   the CPU time each side spends per span (sender: this process; receiver: the collect process); and the
   sender alone, into a gRPC server in another process that answers without parsing (what the sending side
   can do when the receiver costs nothing).

1m and 2m: 1 and 2 with the launch metrics on (``--only metrics``).

Run: ``python benchmarks/bench_export.py`` (about a minute). Figures from a CPU-only machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import warp as wp

import launchtrace.capture as capture
from launchtrace import scope as capture_scope
from launchtrace.capture import bus
from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline
from launchtrace.export.sinks import OtlpSink
from launchtrace.export.spanbuilder import SpanBuilder

wp.config.quiet = True


@wp.kernel
def _axpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


def summary(name: str, ratios: list[float], unit: str = "x") -> str:
    return (
        f"{name}: median {statistics.median(ratios):.3f}{unit} (min {min(ratios):.3f}, max {max(ratios):.3f}, "
        f"{len(ratios)} pairs)"
    )


DEVICE = "cpu"
"""The Warp device the launch loops run on (``--device``)."""


def alternate(a: Callable[[], float], b: Callable[[], float], pairs: int) -> list[tuple[float, float]]:
    a(), b()  # warm-up pair
    return [(a(), b()) for _ in range(pairs)]


# -- 1 and 2: the launch loop ------------------------------------------------------------------------------------
class LaunchLoop:
    def __init__(self, n: int, fold: str = "off") -> None:
        self.n = n
        self.fold = fold
        self.x = wp.ones(256, dtype=float, device=DEVICE)
        self.y = wp.zeros(256, dtype=float, device=DEVICE)
        wp.launch(_axpy, dim=256, inputs=[self.x, self.y, 0.5], device=DEVICE)  # compile
        self.tmp = tempfile.mkdtemp(prefix="bench_export_")
        self.hot: list[float] = []
        self.hot_metrics: list[float] = []
        self.cpu: dict[str, list[tuple[float, float]]] = {"bare": [], "exported": []}  # (process, thread)

    def loop(self) -> None:
        x, y = self.x, self.y
        for _ in range(self.n):
            wp.launch(_axpy, dim=256, inputs=[x, y, 0.5], device=DEVICE)

    def bare(self) -> float:
        capture.uninstrument()
        p0, c0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
        self.loop()
        t1, c1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
        self.cpu["bare"].append((p1 - p0, c1 - c0))
        return t1 - t0

    def captured(self) -> float:
        """Instrumented with a bus subscription but no export worker: the capture hot path alone."""
        with bus.subscribe(capacity=self.n + 10):
            capture.instrument()
            t0 = time.perf_counter()
            self.loop()
            t1 = time.perf_counter()
            capture.uninstrument()
        return t1 - t0

    def exported(self, metrics: bool = False) -> float:
        path = os.path.join(self.tmp, "spans.jsonl")
        config = ExportConfig.resolve(file_path=path, fold=self.fold, export_interval_s=0.05)
        pipeline = ExportPipeline(config, truncate=True).start()
        if metrics:  # launch metrics on: counted on the worker, served for scraping (nobody scrapes here)
            from launchtrace.export.metrics import LaunchMetrics, MetricsExport

            counts = LaunchMetrics()
            export = MetricsExport(counts, (("service.name", "bench"),), ("prometheus",), prometheus="127.0.0.1:0")
            pipeline.observers.append(counts.observe)
        capture.instrument()
        p0, c0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
        self.loop()
        t1, c1 = time.perf_counter(), time.thread_time()
        stats = pipeline.stop(timeout=120)
        t2, p2 = time.perf_counter(), time.process_time()
        capture.uninstrument()
        if metrics:
            export.shutdown()
            if sum(n for _, n in counts.counts()) != self.n:
                raise SystemExit(f"the metrics counted {counts.counts()}, not {self.n} launches")
            self.hot_metrics.append(t1 - t0)
            return t2 - t0
        self.cpu["exported"].append((p2 - p0, c1 - c0))
        single = stats.exported - stats.summary_spans  # launch spans, and the few step roots
        if stats.dropped or single + stats.folded_records < self.n or (self.fold != "always" and single < self.n):
            raise SystemExit(f"lost spans in the benchmark: {stats}")
        self.folded = (stats.folded_records, stats.summary_spans, stats.exported)
        self.hot.append(t1 - t0)
        return t2 - t0


def bench_loop(n: int, pairs: int, fold: str = "off", capture_alone: bool = True) -> None:
    loop = LaunchLoop(n, fold)
    runs = alternate(loop.bare, loop.exported, pairs)
    hot = loop.hot[1:]  # drop the warm-up
    bare = [a for a, _ in runs]
    folded, summaries, exported = loop.folded
    print(
        f"fold={fold}: bare loop median {1e6 * statistics.median(bare) / n:.1f} us per launch ({n} launches); "
        f"{exported} spans exported, {folded} records folded into {summaries} summary spans"
    )
    print(summary(f"1. total, file sink, fold={fold}, final flush included / bare", [b / a for a, b in runs]))
    print(summary("2. hot path with export running (loop only) / bare", [h / a for (a, _), h in zip(runs, hot)]))
    cpu_bare, cpu_exported = loop.cpu["bare"][1:], loop.cpu["exported"][1:]  # the warm-up pair dropped
    print(summary("   1 as CPU time (process, every thread)", [e[0] / b[0] for b, e in zip(cpu_bare, cpu_exported)]))
    print(summary("   2 as CPU time (launching thread)", [e[1] / b[1] for b, e in zip(cpu_bare, cpu_exported)]))
    if not capture_alone:
        return
    capture_only = alternate(loop.bare, loop.captured, pairs)
    print(summary("   (capture alone, subscribed, no export worker) / bare", [b / a for a, b in capture_only]))


def bench_metrics(n: int, pairs: int) -> None:
    """1 and 2 with the launch metrics on (launchtrace.export.metrics): bare, exported and exported with metrics
    in turn, so that each ratio is of neighbours in time."""
    loop = LaunchLoop(n)
    rounds = [(loop.bare(), loop.exported(), loop.exported(metrics=True)) for _ in range(pairs + 1)][1:]
    hot, hot_m = loop.hot[1:], loop.hot_metrics[1:]
    print(summary("1m. total with launch metrics on / bare", [m / b for b, _, m in rounds]))
    print(summary("2m. hot path with launch metrics on / bare", [h / b for (b, _, _), h in zip(rounds, hot_m)]))
    print(summary("    total, metrics on / metrics off", [m / e for _, e, m in rounds]))
    print(summary("    hot path, metrics on / metrics off", [hm / h for h, hm in zip(hot, hot_m)]))
    # the worker's own cost per record, on the same drained events: counting them vs building their spans
    from launchtrace.export.metrics import LaunchMetrics

    with bus.subscribe(capacity=n + 10) as sub:
        capture.instrument()
        with capture_scope("step"):
            loop.loop()
        capture.uninstrument()
        events = sub.drain()
    costs = []
    for _ in range(pairs):
        t0 = time.perf_counter()
        LaunchMetrics().observe(events)
        t1 = time.perf_counter()
        SpanBuilder(ExportConfig.resolve(file_path=os.devnull, fold="off")).feed(events)
        t2 = time.perf_counter()
        costs.append((t1 - t0, t2 - t1))
    per = statistics.median(a for a, _ in costs) / len(events) * 1e6
    ratios = [a / b for a, b in costs]
    print(f"    worker cost per record: metrics {per:.2f} us; " + summary("metrics / span building", ratios))


# -- 3: OTLP/gRPC throughput -----------------------------------------------------------------------------------
def launch_spans(n: int) -> list:
    """Real launch spans: ``n`` launches captured and built by the SpanBuilder (folding off)."""
    x = wp.ones(256, dtype=float, device=DEVICE)
    y = wp.zeros(256, dtype=float, device=DEVICE)
    capture.instrument()
    with bus.subscribe(capacity=n + 10) as sub:
        for _ in range(n):
            wp.launch(_axpy, dim=256, inputs=[x, y, 0.5], device=DEVICE)
        events = sub.drain()
    capture.uninstrument()
    builder = SpanBuilder(ExportConfig.resolve(fold=False, file_path=os.devnull))
    spans = builder.feed(events) + builder.flush()
    return [s for s in spans if s.attribute("launchtrace.op")][:n]


class Receiver:
    """``launchtrace collect`` in its own process, stopping by itself after ``n`` spans."""

    def __init__(self, n: int, out: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "launchtrace",
                "collect",
                "--out",
                out,
                "--grpc",
                "0",
                "--http",
                "off",
                "--max-spans",
                str(n),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.proc.stdout.readline()
        self.port = int(line.split("grpc 127.0.0.1:")[1].split(";")[0])
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        """CPU seconds the receiver process used so far (user + system; 0.0 where /proc is missing)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_all(self, written: bool = False) -> float:
        """Block until the receiver says it has every span; the time then.

        ``written``: then also wait for it to write them all to its file and exit (``collect --max-spans``
        stops by itself: it writes what it received, fsyncs and exits), and return that time instead.
        """
        line = self.proc.stdout.readline()
        t = time.perf_counter()
        if not line.startswith("launchtrace collect: reached"):
            raise SystemExit(f"receiver ended early: {line!r}")
        if written:
            self.proc.wait()
            return time.perf_counter()
        self.proc.kill()  # its file is not what we measure; do not wait for the writer
        self.proc.wait()
        return t


CPU_PER_SPAN: dict[str, list[float]] = {"sender": [], "receiver": []}  # us per span, from ours()


def ours(spans: list, tmp: str, written: bool = False) -> float:
    out = os.path.join(tmp, "ours.pb")  # the protobuf as received: collect converts nothing (docs/collect.md)
    if os.path.exists(out):  # each run writes a new file, as a new collect does (not 120 MB more per run)
        os.unlink(out)
    receiver = Receiver(len(spans), out)
    sink = OtlpSink(receiver.endpoint, protocol="grpc")
    c0, r0 = time.process_time(), receiver.cpu_s()
    t0 = time.perf_counter()
    sink.write(spans)
    c1, r1 = time.process_time(), receiver.cpu_s()  # every request answered: the receiver has counted them all
    t1 = receiver.wait_all(written)
    sink.shutdown()
    if not written:
        CPU_PER_SPAN["sender"].append((c1 - c0) / len(spans) * 1e6)
        CPU_PER_SPAN["receiver"].append((r1 - r0) / len(spans) * 1e6)
    return len(spans) / (t1 - t0)


_NULL_RECEIVER = """
import sys
from concurrent import futures
import grpc
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=[("grpc.max_receive_message_length", 1 << 26)])
handler = grpc.unary_unary_rpc_method_handler(lambda raw, context: b"")
service = "opentelemetry.proto.collector.trace.v1.TraceService"
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"Export": handler}),))
print(server.add_insecure_port("127.0.0.1:0"), flush=True)
server.start()
sys.stdin.read()
"""


def sender_alone(spans: list, runs: int = 5) -> list[float]:
    """Spans/s of OtlpSink.write into a gRPC server (another process) that answers without parsing."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _NULL_RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        sink = OtlpSink(f"http://127.0.0.1:{int(proc.stdout.readline())}", protocol="grpc")
        sink.write(spans[:4096])  # warm-up: channel connected
        rates = []
        for _ in range(runs):
            t0 = time.perf_counter()
            sink.write(spans)
            rates.append(len(spans) / (time.perf_counter() - t0))
        sink.shutdown()
        if sink.stats().dropped:
            raise SystemExit(f"lost spans in the benchmark: {sink.stats()}")
        return rates
    finally:
        proc.stdin.close()
        proc.wait()


def stock_sdk(template: list, n: int, tmp: str) -> float:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    receiver = Receiver(n, os.path.join(tmp, "sdk.jsonl"))
    provider = TracerProvider(resource=Resource.create(dict(template[0].resource)))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint, insecure=True), max_queue_size=n)
    )
    tracer = provider.get_tracer("launchtrace-bench")
    attrs = [dict(template[i % len(template)].attributes) for i in range(min(n, 64))]
    t0 = time.perf_counter()
    for i in range(n):
        a = attrs[i % len(attrs)]
        span = tracer.start_span(template[0].name, attributes=a)
        span.end()
    provider.force_flush()
    t1 = receiver.wait_all()
    provider.shutdown()
    return n / (t1 - t0)


def bench_otlp(n_ours: int, n_sdk: int, pairs: int) -> None:
    spans = launch_spans(n_ours)
    print(f"launch spans: {len(spans)} with {len(spans[0].attributes)} attributes each")
    from launchtrace.otlp.encode_proto import ProtoEncoder
    from launchtrace.otlp.json_codec import encode_line_bytes, line_encoder

    proto, jsonl = ProtoEncoder(), line_encoder()
    encoders = [("ProtoEncoder, compiled" if proto.compiled is not None else "ProtoEncoder, protobuf classes", proto)]
    if proto.compiled is not None:
        encoders.append(("ProtoEncoder, protobuf classes (no compiler)", ProtoEncoder(compiled=False)))
    if jsonl is not encode_line_bytes:
        encoders.append(("JSON Lines, compiled", jsonl))
    encoders.append(("JSON Lines, encode_line (no compiler)", encode_line_bytes))
    for name, encoder in encoders:
        encode = getattr(encoder, "encode", encoder)
        rates = []
        for _ in range(3):
            t0 = time.perf_counter()
            for i in range(0, len(spans), 2048):
                encode(spans[i : i + 2048])
            rates.append(len(spans) / (time.perf_counter() - t0))
        rate = statistics.median(rates)
        print(f"   {name} alone: median {rate:,.0f} spans/s, {1e6 / rate:.2f} us per span (3 runs)")
    tmp = tempfile.mkdtemp(prefix="bench_otlp_")
    runs = alternate(lambda: ours(spans, tmp), lambda: stock_sdk(spans, n_sdk, tmp), pairs)
    print(
        f"3. OTLP/gRPC into launchtrace collect, spans/s at the receiver: ours median "
        f"{statistics.median(r for r, _ in runs):,.0f} (min {min(r for r, _ in runs):,.0f}, "
        f"max {max(r for r, _ in runs):,.0f}); stock SDK median {statistics.median(s for _, s in runs):,.0f} "
        f"(min {min(s for _, s in runs):,.0f}, max {max(s for _, s in runs):,.0f})"
    )
    print(summary("   ours / stock SDK", [r / s for r, s in runs]))
    sender, receiver = CPU_PER_SPAN["sender"][1:], CPU_PER_SPAN["receiver"][1:]  # without the warm-up
    print(
        f"   CPU per span while sending (median of {len(sender)}): sender {statistics.median(sender):.2f} us "
        f"(encode + gRPC), receiver {statistics.median(receiver):.2f} us (collect: parse, count, writer meanwhile)"
    )
    alone = sender_alone(spans)
    print(
        f"   sender alone, into a gRPC server that does not parse: median {statistics.median(alone):,.0f} spans/s "
        f"(min {min(alone):,.0f}, max {max(alone):,.0f}; {len(alone)} runs)"
    )
    written = [ours(spans, tmp, written=True) for _ in range(3)]
    print(
        f"   ours until written to the receiver's .pb file (collect exits): median "
        f"{statistics.median(written):,.0f} spans/s (min {min(written):,.0f}, max {max(written):,.0f}; 3 runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=3000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--otlp-spans", type=int, default=50_000)
    parser.add_argument("--sdk-spans", type=int, default=5_000)
    parser.add_argument("--only", choices=["loop", "otlp", "metrics"])
    parser.add_argument("--fold", default="auto,always", help="fold modes for measurements 1 and 2, comma-separated")
    parser.add_argument("--device", default="cpu", help="Warp device of the launch loops (default cpu; cuda:0)")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    wp.init()
    name = wp.get_device(DEVICE).name
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; device {DEVICE} ({name})")
    if args.only in (None, "loop"):
        for i, fold in enumerate(args.fold.split(",")):
            bench_loop(args.launches, args.pairs, fold.strip(), capture_alone=i == 0)
    if args.only in (None, "metrics"):
        bench_metrics(args.launches, args.pairs)
    if args.only in (None, "otlp"):
        bench_otlp(args.otlp_spans, args.sdk_spans, args.pairs)


if __name__ == "__main__":
    main()
