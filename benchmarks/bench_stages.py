"""Where the export worker's time goes, per launch: materialise, build spans, encode (JSON Lines, protobuf).

Captures ``--launches`` launches of a trivial compiled kernel (the one ``bench_export.py`` uses) through the real
bus, then times each stage alone on those events, ``--runs`` times, and prints the median microseconds per
launch. These are absolute times on a shared machine (they move with its load), meant for comparing a change
before and after in the same conditions; the ratios that judge the targets come from ``bench_export.py``.
``--owned`` labels the kernel's arrays among 50 other owned buffers first (owner look-ups in the materializer).
Where the compiled encoders are built, the library paths that run without a compiler (``json_codec.encode_line``,
the protobuf classes) are timed too, in the same run.

Run: ``python benchmarks/bench_stages.py [--owned]`` (a few seconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import warp as wp

import launchtrace
from launchtrace.capture import bus
from launchtrace.capture.materialize import Materializer
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.otlp.encode_proto import ProtoEncoder
from launchtrace.otlp.json_codec import encode_line_bytes, line_encoder

wp.config.quiet = True


@wp.kernel
def _axpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


def one_run(x: wp.array, y: wp.array, n: int) -> list[float]:
    with bus.subscribe(capacity=n + 10) as sub:
        for _ in range(n):
            wp.launch(_axpy, dim=256, inputs=[x, y, 0.5], device="cpu")
        raw = sub.drain_raw()
    t0 = time.perf_counter()
    events = Materializer().run(raw)
    t1 = time.perf_counter()
    builder = SpanBuilder(ExportConfig.resolve(fold=False, file_path=os.devnull))
    spans = builder.feed(events) + builder.flush()
    t2 = time.perf_counter()
    encode_line = line_encoder()
    encode_line(spans)
    t3 = time.perf_counter()
    proto = ProtoEncoder()
    proto.encode(spans)
    t4 = time.perf_counter()
    times = [1e6 * (b - a) / n for a, b in ((t0, t1), (t1, t2), (t2, t3), (t3, t4))]
    if encode_line is not encode_line_bytes:
        t5 = time.perf_counter()
        encode_line_bytes(spans)
        times.append(1e6 * (time.perf_counter() - t5) / n)
    if proto.compiled is not None:
        t6 = time.perf_counter()
        ProtoEncoder(compiled=False).encode(spans)
        times.append(1e6 * (time.perf_counter() - t6) / n)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--owned", action="store_true")
    args = parser.parse_args()
    wp.init()
    x = wp.ones(256, dtype=float, device="cpu")
    y = wp.zeros(256, dtype=float, device="cpu")
    wp.launch(_axpy, dim=256, inputs=[x, y, 0.5], device="cpu")  # compile
    others = [wp.zeros(64, dtype=float, device="cpu") for _ in range(50)]
    if args.owned:
        launchtrace.own({"x": x, "y": y, "others": others}, "sim")
    launchtrace.instrument()
    one_run(x, y, args.launches)  # warm-up
    runs = [one_run(x, y, args.launches) for _ in range(args.runs)]
    launchtrace.uninstrument()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; CPU device only")
    names = (
        "materialise",
        "span builder",
        "JSON Lines encode",
        "protobuf encode",
        "JSON Lines (library)",
        "protobuf (library)",
    )
    for name, values in zip(names, zip(*runs)):
        print(
            f"{name:>18}: median {statistics.median(values):6.2f} us per launch "
            f"(min {min(values):.2f}, max {max(values):.2f}; {args.runs} runs of {args.launches})"
        )


if __name__ == "__main__":
    main()
