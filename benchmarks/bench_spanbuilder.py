"""Span building and rebuilding cost per record, as ratios against a bare CPU ``wp.launch`` in the same run.

The records come from a real instrumented Warp loop (a copy, three launches and a fill per step, each step in
its own ``launchtrace.scope``, buffers owned), drained from the capture bus once. Then, alternating A B A B
for ``--pairs`` pairs after a warm-up pair, each side timed over the same number of records:

- A: ``--records`` bare launches of a trivial kernel (not instrumented);
- B: ``SpanBuilder.feed`` + ``flush`` over the drained events with ``fold`` off / always / auto (the default:
  these step traces fit the budget, so every record is a span, held back until its step ends), or ``rebuild``
  of the spans (folding off).

Printed: the median per-pair ratio (cost per record / cost per bare launch) with min and max. Below 1.0 means
a record costs less to turn into a span than the launch it stands for costs to issue.

Run: ``python benchmarks/bench_spanbuilder.py`` (about 20 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import warp as wp

import launchtrace
from launchtrace.capture import bus
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.sources.rebuild import rebuild

wp.config.quiet = True


@wp.kernel
def _axpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


class _Sim:
    def __init__(self, n: int = 64) -> None:
        self.x = wp.zeros(n, dtype=float)
        self.y = wp.zeros(n, dtype=float)
        self.z = wp.zeros(n, dtype=float)
        self.n = n

    def step(self) -> None:
        wp.copy(self.z, self.x)
        wp.launch(_axpy, dim=self.n, inputs=[self.x, self.y, 0.5])
        wp.launch(_axpy, dim=self.n, inputs=[self.y, self.z, 0.25])
        self.z.zero_()
        wp.launch(_axpy, dim=self.n, inputs=[self.z, self.x, 2.0])


def capture_events(steps: int) -> list:
    sim = _Sim()
    owned = launchtrace.own(sim, "sim")
    launchtrace.instrument()
    sub = bus.subscribe()
    try:
        for i in range(steps):
            with launchtrace.scope("step", step=i):
                sim.step()
        return sub.drain()
    finally:
        sub.close()
        launchtrace.uninstrument()
        launchtrace.disown(owned)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    wp.init()
    events = capture_events(args.records // 5)
    records = sum(1 for kind, _ in events if kind == "record")
    x, y = wp.zeros(64, dtype=float), wp.zeros(64, dtype=float)

    def bare() -> float:
        start = time.perf_counter()
        for _ in range(records):
            wp.launch(_axpy, dim=64, inputs=[x, y, 0.5])
        return (time.perf_counter() - start) / records

    def build(fold: str) -> tuple[float, list]:
        builder = SpanBuilder(ExportConfig.resolve(file_path=os.devnull, fold=fold))
        start = time.perf_counter()
        spans = builder.feed(events) + builder.flush()
        return (time.perf_counter() - start) / records, spans

    unfolded = build("off")[1]

    def rebuilt() -> float:
        start = time.perf_counter()
        rebuild(unfolded)
        return (time.perf_counter() - start) / records

    sides = {
        "SpanBuilder, fold=off   ": lambda: build("off")[0],
        "SpanBuilder, fold=always": lambda: build("always")[0],
        "SpanBuilder, fold=auto  ": lambda: build("auto")[0],
        "rebuild (unfolded spans)": rebuilt,
    }
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f}; {records} records, {len(unfolded)} spans")
    bare()  # warm-up
    for name, side in sides.items():
        side()  # warm-up pair
        bare()
        ratios = []
        base = []
        for _ in range(args.pairs):
            a = bare()
            b = side()
            ratios.append(b / a)
            base.append(a)
        print(
            f"{name} per record / bare wp.launch: median {statistics.median(ratios):.2f}x "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f}; bare launch {statistics.median(base) * 1e6:.1f} us)"
        )


if __name__ == "__main__":
    main()
