"""What watching the application's active span costs the application: an SDK span made current
(``start_as_current_span`` + end, no exporter) with launchtrace's export running, OpenTelemetry's runtime
context wrapped (:mod:`launchtrace.capture.appspan`) versus not, alternating in one process.

Each such span changes the thread's active span twice (attach, detach): two events queued for the export
worker. Prints the per-span costs and the median of the per-pair ratios with min and max.

    python benchmarks/bench_appspan.py [--spans 20000] [--pairs 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from opentelemetry.sdk.trace import TracerProvider

import launchtrace.export as export
from launchtrace.capture import appspan


def loop(tracer, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        with tracer.start_as_current_span("request"):
            pass
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000)
    parser.add_argument("--pairs", type=int, default=9)
    args = parser.parse_args()
    tracer = TracerProvider().get_tracer("bench")
    path = os.path.join(tempfile.mkdtemp(prefix="bench_appspan_"), "spans.jsonl")
    export.start_export(instrument=False, file_path=path, truncate=True)
    loop(tracer, 1000)  # warm up
    pairs = []
    for _ in range(args.pairs):
        appspan.unwatch()
        bare = loop(tracer, args.spans)
        appspan.watch()
        watched = loop(tracer, args.spans)
        pairs.append((bare, watched))
    appspan.unwatch()
    export.stop_export()
    ratios = [w / b for b, w in pairs]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"SDK span made current, bare:    {statistics.median(b for b, _ in pairs):7.2f} us (median of {args.pairs})")
    print(f"same, active span watched:      {statistics.median(w for _, w in pairs):7.2f} us")
    spread = f"min {min(ratios):.3f}  max {max(ratios):.3f}"
    print(f"ratio watched / bare:           median {statistics.median(ratios):.3f}  {spread}")


if __name__ == "__main__":
    main()
