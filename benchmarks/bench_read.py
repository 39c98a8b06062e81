"""Reading OTLP JSON Lines: launchtrace's reader (file -> SpanData) versus ``google.protobuf.json_format``
parsing the same file into ``TracesData`` messages, in the same process.

Method (shared/notes/measuring.md): write one file of spans shaped like launchtrace's (kernel launch spans
with ~15 attributes: strings, ints, int and string arrays, bools; resource and scope shared per line, 512
spans per line as the sink batches them), warm up both sides once, then alternate ours / baseline for at
least 5 pairs. Prints spans/s of each side per pair and the median of the per-pair speed ratios (ours over
baseline) with min and max. The baseline only builds protobuf messages (it does not even produce SpanData),
so the comparison favours it. Target: >= 200,000 spans/s and faster than the baseline.

    python benchmarks/bench_read.py [--spans 100000] [--pairs 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace.otlp.json_codec import encode_line
from launchtrace.sources.files import SpanFile
from launchtrace.spans import SpanData

BATCH = 512


def make_spans(n: int) -> list[SpanData]:
    resource = (("service.name", "sim"), ("host.name", "node-1"), ("process.pid", 4242))
    scope_attrs = (("launchtrace.version", "0.1.0"),)
    trace_id = bytes.fromhex("5b8efff798038103d269b633813fc700")
    spans = []
    for i in range(n):
        attrs = (
            ("launchtrace.op", "launch"),
            ("launchtrace.kernel", f"sim.integrate_{i % 7}"),
            ("launchtrace.module", "sim"),
            ("launchtrace.module.hash", "9f2c41d0aa"),
            ("launchtrace.dim", (1024, i % 16 + 1)),
            ("launchtrace.device", "cuda:0"),
            ("launchtrace.api", "wp.launch"),
            ("launchtrace.adjoint", False),
            ("launchtrace.bytes", 4096 * (i % 9 + 1)),
            ("launchtrace.seq", i),
            ("launchtrace.array_keys", ("0", "1", "3.pos")),
            ("launchtrace.arg.0.ptr", 0x7F0000000000 + 256 * (i % 97)),
            ("launchtrace.arg.2", 0.01),
            ("code.filepath", "sim/step.py"),
            ("code.lineno", 120 + i % 5),
        )
        spans.append(
            SpanData(
                trace_id,
                (i + 1).to_bytes(8, "big"),
                (i // 64 + 1).to_bytes(8, "big") if i % 64 else None,
                f"sim.integrate_{i % 7}",
                1_700_000_000_000_000_000 + i * 1000,
                1_700_000_000_000_000_000 + i * 1000 + 700,
                attrs,
                resource=resource,
                scope_name="launchtrace",
                scope_version="0.1.0",
                scope_attributes=scope_attrs,
            )
        )
    return spans


def ours(path: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, spans)."""
    t0, c0 = time.perf_counter(), time.process_time()
    with SpanFile(path) as f:
        n = sum(1 for _ in f)
    return time.perf_counter() - t0, time.process_time() - c0, n


def baseline(path: str) -> tuple[float, float, int]:
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            msg = json_format.Parse(line, TracesData())
            n += sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
    return time.perf_counter() - t0, time.process_time() - c0, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()

    spans = make_spans(args.spans)
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for i in range(0, len(spans), BATCH):
            f.write(encode_line(spans[i : i + BATCH]) + "\n")
    size_mb = os.path.getsize(path) / 1e6
    del spans
    try:
        ours(path), baseline(path)  # warm-up
        ratios, ours_rates, base_rates, ours_cpu_rates = [], [], [], []
        for _ in range(args.pairs):
            t_ours, c_ours, n_ours = ours(path)
            t_base, _, n_base = baseline(path)
            assert n_ours == n_base == args.spans, (n_ours, n_base)
            ours_rates.append(n_ours / t_ours)
            ours_cpu_rates.append(n_ours / c_ours)
            base_rates.append(n_base / t_base)
            ratios.append(t_base / t_ours)
    finally:
        os.unlink(path)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus, load {load:.1f}")
    print(f"file: {args.spans} spans, {size_mb:.1f} MB, {BATCH} spans per line")
    for i, (a, b) in enumerate(zip(ours_rates, base_rates), 1):
        print(f"pair {i}: launchtrace {a:>10,.0f} spans/s   json_format {b:>10,.0f} spans/s")
    print(
        f"launchtrace reader: median {statistics.median(ours_rates):,.0f} spans/s "
        f"(min {min(ours_rates):,.0f}, max {max(ours_rates):,.0f})"
    )
    print(f"launchtrace reader per CPU second of this process: median {statistics.median(ours_cpu_rates):,.0f}")
    print(f"json_format baseline: median {statistics.median(base_rates):,.0f} spans/s")
    print(
        f"speed ratio (launchtrace / json_format): median {statistics.median(ratios):.2f}x "
        f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)"
    )


if __name__ == "__main__":
    main()
