"""What value_stats costs: a loop of ``wp.launch`` of a kernel writing ``--elements`` floats, recorded with the
measurements off and with ``value_stats`` on, against the bare loop, in the same process.

Method (shared/notes/measuring.md): warm up (compile), then rounds of bare / recording (probes off) /
recording with value statistics, each block ``--launches`` launches; prints the median of the per-round ratios
with min and max, and the per-launch costs. "off / bare" is ``bench_capture.py``'s "recording / bare": the
flag check the measurements add to ``wp.launch`` is inside it.

    python benchmarks/bench_probes.py [--launches 5000] [--rounds 7] [--elements 1024]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import warp as wp

import launchtrace
from launchtrace.capture import bus, probes

wp.config.quiet = True


@wp.kernel
def fill(x: wp.array(dtype=float), s: float):
    i = wp.tid()
    x[i] = s * float(i)


def loop(x: wp.array, n: int) -> float:
    launch = wp.launch
    dim = x.shape[0]
    t0 = time.perf_counter()
    for _ in range(n):
        launch(fill, dim=dim, inputs=[x, 1.0])
    return time.perf_counter() - t0


def recorded(x: wp.array, n: int) -> float:
    sub = bus.subscribe(capacity=10 * n)
    try:
        return loop(x, n)
    finally:
        assert len(sub.drain_raw()) == n
        sub.close()


def _summary(label: str, ratios: list[float]) -> str:
    return (
        f"{label} median {statistics.median(ratios):.3f}  min {min(ratios):.3f}  max {max(ratios):.3f}"
        f"  ({len(ratios)} rounds)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--elements", type=int, default=1024)
    args = parser.parse_args()

    wp.init()
    x = wp.zeros(args.elements, dtype=float, device="cpu")
    loop(x, 100)  # compile

    us: dict[str, list[float]] = {"bare": [], "off": [], "stats": []}
    off_bare, stats_off, stats_bare = [], [], []
    for _ in range(args.rounds):
        launchtrace.uninstrument()
        bare = loop(x, args.launches)
        launchtrace.instrument()
        off = recorded(x, args.launches)
        probes.configure(value_stats=True)
        stats = recorded(x, args.launches)
        probes.configure(value_stats=False)
        launchtrace.uninstrument()
        for key, seconds in (("bare", bare), ("off", off), ("stats", stats)):
            us[key].append(seconds / args.launches * 1e6)
        off_bare.append(off / bare)
        stats_off.append(stats / off)
        stats_bare.append(stats / bare)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {platform.machine()} python {platform.python_version()} warp {wp.__version__}, CPU device, "
        f"{os.cpu_count()} CPUs, load average {load:.1f}; {args.elements} float32 written per launch"
    )
    for key, label in (("bare", "bare wp.launch"), ("off", "recording, probes off"), ("stats", "value_stats on")):
        print(f"{label + ':':24} {statistics.median(us[key]):8.2f} us/launch (median)")
    print(_summary("recording off / bare:    ", off_bare))
    print(_summary("value_stats / off:       ", stats_off))
    print(_summary("value_stats / bare:      ", stats_bare))


if __name__ == "__main__":
    main()
