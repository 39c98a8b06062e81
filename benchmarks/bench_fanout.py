"""What queueing one capture event through ``bus.offer`` costs against the fan-out loop written inline.

Why: issue 17 replaced the inlined copies of the queue fan-out (hotpath, warp's Python wrapper, tinygrad) with
calls to ``bus.offer``; that is one Python call more per event on the pure-Python paths (the compiled wrapper
queues in C). Both are timed here the same way (a function per event, one open subscription, interleaved
runs), so the difference is that call. Prints the median ns per event of each.

Run: ``python benchmarks/bench_fanout.py [--n 200000] [--runs 7]`` (a few seconds).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from launchtrace.capture import bus

EVENT = (0, 1, 2, "launch", None, None, 3, "m", None, 4, 5, None, None, None)


def inline(event: tuple) -> None:
    """The fan-out as it was written at each place that queued events."""
    for sub in bus._subs:
        q = sub.queue
        n = len(q)
        if n < sub.capacity:
            q.append(event)
            if n == sub.capacity // 2 and bus.wake_consumers is not None:
                bus.wake_consumers()
        else:
            sub.full(event)
    if bus.touch_activity is not None:
        bus.touch_activity()


def via_offer(event: tuple, offer: Callable[[tuple], None] = bus.offer) -> None:  # bound once, as callers do
    offer(event)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"inlined fan-out": [], "bus.offer": []}
    with bus.subscribe(capacity=10 * args.n) as sub:
        for _ in range(args.runs):
            for label, fn in (("inlined fan-out", inline), ("bus.offer", via_offer)):
                sub.queue.clear()
                t0 = time.perf_counter_ns()
                for _ in range(args.n):
                    fn(EVENT)
                times[label].append((time.perf_counter_ns() - t0) / args.n)
    a, b = (statistics.median(v) for v in times.values())
    print(f"inlined fan-out {a:.0f} ns/event, bus.offer {b:.0f} ns/event: {b - a:+.0f} ns per event")


if __name__ == "__main__":
    main()
