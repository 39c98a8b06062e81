"""Device timing against the host window, on a real CUDA device: every figure printed.

Launches a busy kernel ``--launches`` times on ``--device`` with launchtrace's device timing on (pooled CUDA
events, :mod:`launchtrace.capture.devicetiming`), synchronizes, and prints for each launch when the host
issued it, when the device says it started and ended (mapped to the host clock through the anchor events),
and how far each lies from the host window ``[before first launch, after synchronize]``. Exits 1 when a
device time falls outside that window (with 1 ms of slack), is not positive, or launches on one stream
overlap; exits 2 when there is no CUDA device.

    python scripts/gpu_device_timing.py [--device cuda:0] [--launches 20]
"""

from __future__ import annotations

import argparse
import sys
import time

SLACK_NS = 1_000_000  # 1 ms: far above the anchor's error bound (a few us)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--size", type=int, default=1 << 20, help="threads per launch")
    args = parser.parse_args()

    import warp as wp

    wp.config.quiet = True
    wp.init()
    if not wp.is_cuda_available():
        print("gpu_device_timing: no CUDA device available (Warp sees none); nothing measured", file=sys.stderr)
        return 2

    import launchtrace
    from launchtrace.capture import probes
    from launchtrace.model import DeviceTime
    from launchtrace.testing import trace_launches

    @wp.kernel
    def busy(y: wp.array(dtype=float), rounds: int):
        i = wp.tid()
        v = y[i]
        for _ in range(rounds):
            v = v * 0.999 + 0.001
        y[i] = v

    device = args.device
    y = wp.zeros(args.size, dtype=float, device=device)
    launchtrace.instrument()
    wp.launch(busy, dim=y.shape, inputs=[y, 1], device=device)  # compile and load first
    wp.synchronize_device(device)
    probes.configure(device_timing=True)
    try:
        with trace_launches() as trace:
            before = time.time_ns()
            for _ in range(args.launches):
                wp.launch(busy, dim=y.shape, inputs=[y, 2000], device=device)
            wp.synchronize_device(device)
            after = time.time_ns()
    finally:
        probes.configure(device_timing=False)
        launchtrace.uninstrument()

    print(f"device {device} ({wp.get_device(device).name}); host window {(after - before) / 1e6:.3f} ms")
    print(
        f"{'#':>3} {'host issue us':>14} {'dev start us':>13} {'dev end us':>11} {'dev dur us':>11}"
        "  (from the window's start)"
    )
    failures = []
    previous = None
    for n, rec in enumerate(trace):
        t = rec.probes[0] if rec.probes else None
        if not isinstance(t, DeviceTime):
            failures.append(f"launch {n}: no device time ({t!r})")
            continue
        print(
            f"{n:>3} {(rec.start_ns - before) / 1e3:>14.1f} {(t.start_ns - before) / 1e3:>13.1f} "
            f"{(t.end_ns - before) / 1e3:>11.1f} {t.duration_ns / 1e3:>11.1f}"
        )
        if t.duration_ns <= 0:
            failures.append(f"launch {n}: duration {t.duration_ns} ns")
        if not before - SLACK_NS <= t.start_ns < t.end_ns <= after + SLACK_NS:
            failures.append(f"launch {n}: device time outside the host window")
        if t.start_ns < rec.start_ns - SLACK_NS:
            failures.append(f"launch {n}: device started before the host issued it")
        if previous is not None and previous.end_ns > t.start_ns + SLACK_NS:
            failures.append(f"launch {n}: overlaps the previous launch on one stream")
        previous = t
    timed = [r.probes[0] for r in trace if r.probes and isinstance(r.probes[0], DeviceTime)]
    if timed:
        durations = sorted(t.duration_ns for t in timed)
        median_us = durations[len(durations) // 2] / 1e3
        print(
            f"timed {len(timed)}/{len(trace)} launches; device duration median {median_us:.1f} us, "
            f"first start {(timed[0].start_ns - before) / 1e3:.1f} us after the window opened, "
            f"last end {(after - timed[-1].end_ns) / 1e3:.1f} us before it closed"
        )
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
