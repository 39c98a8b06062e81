"""Capture hot path: a loop of ``wp.launch`` of a trivial compiled kernel, instrumented (records kept, no
export) versus bare, in the same process.

Method (shared/notes/measuring.md): warm up (compile), then alternate bare / instrumented blocks, at least 5
pairs; the bare side runs with instrumentation fully removed (``uninstrument()``). Prints the median of the
per-pair ratios with min and max, and the per-launch costs. Also measures a patched-but-unobserved launch
(instrumented, nobody subscribed).

    python benchmarks/bench_capture.py [--launches 20000] [--pairs 7] [--device cuda:0]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import warp as wp

import launchtrace
from launchtrace.capture import bus

wp.config.quiet = True


@wp.kernel
def trivial(x: wp.array(dtype=float), s: float):
    i = wp.tid()
    x[i] = s


def loop(x: wp.array, n: int) -> float:
    launch = wp.launch
    t0 = time.perf_counter()
    for _ in range(n):
        launch(trivial, dim=1, inputs=[x, 1.0])
    return time.perf_counter() - t0


def main() -> None:
    import gc
    import os

    if os.environ.get("BENCH_NO_GC"):
        gc.disable()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--device", default="cpu", help="Warp device (default cpu; cuda:0 on a GPU machine)")
    args = parser.parse_args()

    wp.init()
    x = wp.zeros(1, dtype=float, device=args.device)
    loop(x, 100)  # compile
    wp.synchronize_device(args.device)

    ratios, quiet_ratios, bare_us, inst_us = [], [], [], []
    for _ in range(args.pairs):
        launchtrace.uninstrument()
        bare = loop(x, args.launches)

        launchtrace.instrument()
        sub = bus.subscribe(capacity=10 * args.launches)
        inst = loop(x, args.launches)
        assert len(sub.drain_raw()) == args.launches
        sub.close()
        quiet = loop(x, args.launches)  # patched, nobody listening
        launchtrace.uninstrument()

        ratios.append(inst / bare)
        quiet_ratios.append(quiet / bare)
        bare_us.append(bare / args.launches * 1e6)
        inst_us.append(inst / args.launches * 1e6)

    print(
        f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()} "
        f"warp {wp.__version__}, device {args.device} ({wp.get_device(args.device).name})"
    )
    print(f"bare wp.launch:             {statistics.median(bare_us):6.2f} us/launch (median of {args.pairs})")
    print(f"instrumented (recording):   {statistics.median(inst_us):6.2f} us/launch")
    print(
        f"ratio recording / bare:     median {statistics.median(ratios):.3f}  "
        f"min {min(ratios):.3f}  max {max(ratios):.3f}  (target <= 1.05)"
    )
    print(
        f"ratio patched-idle / bare:  median {statistics.median(quiet_ratios):.3f}  "
        f"min {min(quiet_ratios):.3f}  max {max(quiet_ratios):.3f}"
    )


if __name__ == "__main__":
    main()
