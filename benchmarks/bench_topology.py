"""Topology and ownership costs: aligning two 100,000-launch traces, fingerprints, repeats, owner look-ups.

Method (shared/notes/measuring.md): every figure is a ratio against a baseline measured alternately in the
same process (A B A B ..., ``--pairs`` pairs after a warm-up), reported as the median with min and max; the
absolute medians are printed too.

- alignment / fingerprint / find_repeats of N-launch traces, against building their topology keys (the work
  any comparison has to do anyway);
- ``OWNERS.locate`` with ``--owned`` live arrays registered, against a bare ``wp.launch`` of a trivial
  compiled kernel on the CPU (it runs once per array argument when records are materialised).

    python benchmarks/bench_topology.py [--launches 100000] [--pairs 5] [--owned 1000]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import warp as wp

from launchtrace.capture import bus
from launchtrace.model import LaunchRecord, Site
from launchtrace.ownership import OWNERS
from launchtrace.topology import align, diff_records, find_repeats, fingerprint, topology_keys

wp.config.quiet = True

SITE = Site("sim.py", 10, "step", "sim")


@wp.kernel
def trivial(x: wp.array(dtype=float), s: float):
    i = wp.tid()
    x[i] = s


def step_records(steps: int, drag: bool = False, dt: float = 0.01) -> list[LaunchRecord]:
    """A simulation's trace: per step integrate, (drag), collide, a copy."""
    out = []
    for _ in range(steps):
        out.append(LaunchRecord("launch", "sim.integrate", (4096,), None, ((0, 1), (1, 2)), ((2, dt),), SITE))
        if drag:
            out.append(LaunchRecord("launch", "sim.drag", (4096,), None, ((0, 2),), ((1, 0.99),), SITE))
        out.append(LaunchRecord("launch", "sim.collide", (4096,), None, ((0, 1), (1, 3)), (), SITE))
        out.append(LaunchRecord("copy", "wp.copy", (4096,), None, ((0, 4), (1, 1)), (), SITE))
    return out


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def compare(name: str, baseline: Callable[[], object], subject: Callable[[], object], pairs: int, unit: str) -> None:
    baseline()
    subject()  # warm-up
    ratios, base_t, subj_t = [], [], []
    for _ in range(pairs):
        b = timed(baseline)
        s = timed(subject)
        base_t.append(b)
        subj_t.append(s)
        ratios.append(s / b)
    scale = {"s": 1.0, "us": 1e6}[unit]
    print(
        f"{name:<44} {statistics.median(subj_t) * scale:10.3f} {unit}  "
        f"x{statistics.median(ratios):.2f} baseline (min {min(ratios):.2f}, max {max(ratios):.2f}; "
        f"baseline {statistics.median(base_t) * scale:.3f} {unit})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--owned", type=int, default=1000)
    parser.add_argument("--part", choices=("all", "topology", "owners"), default="all")
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")

    if args.part in ("all", "topology"):
        bench_topology(args)
    if args.part in ("all", "owners"):
        bench_owners(args)


def bench_topology(args: argparse.Namespace) -> None:
    steps = args.launches // 3
    a = step_records(steps)
    cases = {
        "one launch inserted": [
            *a[: len(a) // 2],
            LaunchRecord("launch", "sim.extra", (1,), None, (), (), SITE),
            *a[len(a) // 2 :],
        ],
        "a launch inserted every step": step_records(steps, drag=True),
        "a scalar changed every step": step_records(steps, dt=0.02),
    }
    ka = topology_keys(a)
    print(f"trace A: {len(a)} records; baseline: topology_keys of both traces")
    for label, b in cases.items():
        kb = topology_keys(b)

        def keys(b=b) -> None:
            topology_keys(a)
            topology_keys(b)

        compare(f"align, {label} ({len(b)})", keys, lambda kb=kb: align(ka, kb), args.pairs, "s")
        compare(f"diff_records, {label}", keys, lambda b=b: diff_records(a, b), args.pairs, "s")
    compare("fingerprint", lambda: topology_keys(a), lambda: fingerprint(a), args.pairs, "s")
    compare("find_repeats", lambda: topology_keys(a), lambda: find_repeats(ka), args.pairs, "s")


def bench_owners(args: argparse.Namespace) -> None:
    """Owner look-ups against a bare launch."""
    wp.init()
    x = wp.zeros(1, dtype=float, device="cpu")
    wp.launch(trivial, dim=1, inputs=[x, 1.0])
    arrays = [wp.zeros(16, dtype=float, device="cpu") for _ in range(args.owned)]
    OWNERS.own(arrays, "pool")
    probe = arrays[len(arrays) // 2].ptr + 8
    seq = bus.next_seq()
    n = 20_000

    def launches() -> None:
        for _ in range(n):
            wp.launch(trivial, dim=1, inputs=[x, 1.0])

    def locates() -> None:
        locate = OWNERS.locate
        for _ in range(n):
            locate(probe, seq)

    def misses() -> None:
        locate = OWNERS.locate
        for _ in range(n):
            locate(12345, seq)

    print(f"per call over {n} calls, {args.owned} owned arrays; baseline: a bare wp.launch (CPU)")
    compare("OWNERS.locate (hit)", launches, locates, args.pairs, "s")
    compare("OWNERS.locate (miss)", launches, misses, args.pairs, "s")
    compare("OWNERS.any_at", launches, lambda: [OWNERS.any_at(seq) for _ in range(n)], args.pairs, "s")

    # One address owned, freed and reused 2,000 times (an arena or mempool handing the block out again):
    # look-ups at a seq in the middle of that history and at the present.
    pool = wp.zeros(4096, dtype=float, device="cpu")
    history = []
    for _ in range(2000):
        block = {"buf": wp.array(ptr=pool.ptr, dtype=float, shape=(1024,), device="cpu")}
        OWNERS.own(block, "arena")
        history.append(bus.next_seq())
        del block
    old, now = history[1000], bus.next_seq()
    compare(
        "OWNERS.locate (reused 2000x, old seq)",
        launches,
        lambda: [OWNERS.locate(pool.ptr + 4, old) for _ in range(n)],
        args.pairs,
        "s",
    )
    compare(
        "OWNERS.locate (reused 2000x, now)",
        launches,
        lambda: [OWNERS.locate(pool.ptr + 4, now) for _ in range(n)],
        args.pairs,
        "s",
    )


if __name__ == "__main__":
    main()
