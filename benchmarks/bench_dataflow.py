"""Dataflow of a whole run: how its cost grows with the run's length (linear is the target).

``launchtrace dataflow`` analyses a whole process at once by default, so a long run is one big dataflow.
Synthetic records (3 buffers each, drawn from 1,000 buffers, owned or bare pointers) are analysed at n and 4n
records; the ratio of the times is about 4 when the cost is linear, 16 when quadratic.

    python benchmarks/bench_dataflow.py [--n 5000]
"""

from __future__ import annotations

import argparse
import random
import time

from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.model import BufferArg, LaunchRecord, Site


def records(n: int, buffers: int, owned: bool, seed: int = 1) -> list[LaunchRecord]:
    rng = random.Random(seed)
    site = Site("bench.py", 1, "step")
    out = []
    for i in range(n):
        bufs = []
        for k in range(3):
            p = rng.randrange(buffers)
            owner = {"owner": f"sim.b{p}", "offset": 0} if owned else {}
            bufs.append(BufferArg(k, f"a{k}", 0x10000 + p * 4096, nbytes=4096, access="w" if k == 2 else "r", **owner))
        arrays = tuple((b.key, b.ptr) for b in bufs)
        out.append(
            LaunchRecord("launch", "m.k", (64,), None, arrays, (), site, buffers=tuple(bufs), start_ns=i * 10, seq=i)
        )
    return out


def timed(recs: list[LaunchRecord]) -> tuple[float, int]:
    start = time.perf_counter()
    flow = build_dataflow(recs)
    return time.perf_counter() - start, len(flow.edges)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    args = parser.parse_args()
    for owned in (False, True):
        small, e_small = timed(records(args.n, 1000, owned))
        large, e_large = timed(records(4 * args.n, 1000, owned))
        kind = "owned" if owned else "bare pointers"
        print(
            f"{kind:>13}: {args.n} records {small:.2f} s ({e_small} edges), {4 * args.n} records {large:.2f} s "
            f"({e_large} edges); ratio {large / small:.1f} (4 = linear, 16 = quadratic)"
        )


if __name__ == "__main__":
    main()
