"""Aligned diff of two 100,000-launch traces against a ``difflib`` baseline, in the same run.

Two synthetic traces of a step loop (10 kernels per step, 10,000 steps, buffers owned, durations jittered),
the second with edits a regression would bring: a launch inserted every 500 steps, a dim changed every 700,
a scalar changed every 900. Two shapes are timed:

- ``scoped``: every step inside a ``step`` scope (the usual case: segments matched by occurrence);
- ``flat``: no scopes, one 100,000-record sequence (the aligner's long path).

The baseline is ``difflib.SequenceMatcher(autojunk=False).get_opcodes()`` over the same topology keys and
the same segments (what a hand-rolled diff would use); it only aligns, it names no fields and computes no
timing. Runs alternate A B A B after a warm-up, and the median ratio is printed with its min and max.
difflib is quadratic on one long repetitive sequence, so in the flat shape it is paired with ours at
``--flat-baseline`` launches and ours is also timed alone at full size.

Run: ``python benchmarks/bench_diff.py [--launches 100000] [--pairs 5]``
"""

from __future__ import annotations

import argparse
import difflib
import statistics
import time

from launchtrace.analysis.diff import diff_traces, segments
from launchtrace.model import BufferArg, LaunchRecord, ScopeRecord, Site, TraceData
from launchtrace.topology import topology_key

KERNELS = 10


def make_trace(launches: int, edited: bool, scoped: bool, seed: int) -> TraceData:
    site = Site("sim.py", 10, "step", "sim")
    records: list[LaunchRecord] = []
    scopes: dict[int, ScopeRecord] = {}
    t = 1_000_000
    steps = launches // KERNELS
    jitter = seed
    for s in range(steps):
        scope_id = s + 1 if scoped else None
        if scoped:
            scopes[scope_id] = ScopeRecord(scope_id, "step", "user", start_ns=t)
        for k in range(KERNELS):
            dim = (1024,)
            scalar = 0.01
            if edited and k == 3 and s % 700 == 0:
                dim = (512,)
            if edited and k == 5 and s % 900 == 0:
                scalar = 0.02
            bufs = (
                BufferArg(0, "x", 0x1000 + k * 4096, (1024,), "float32", 4096, f"sim.b{k}", 0, access="r"),
                BufferArg(1, "y", 0x1000 + (k + 1) * 4096, (1024,), "float32", 4096, f"sim.b{k + 1}", 0, access="w"),
            )
            jitter = (jitter * 1103515245 + 12345) % 2**31
            dur = 5_000 + k * 300 + jitter % 400
            records.append(
                LaunchRecord(
                    "launch", f"sim.k{k}", dim, None, ((0, bufs[0].ptr), (1, bufs[1].ptr)), ((2, scalar),), site,
                    params=("x", "y", "dt"), buffers=bufs, start_ns=t, end_ns=t + dur, scope_id=scope_id,
                )
            )  # fmt: skip
            t += dur + 100
            if edited and k == 1 and s % 500 == 0:
                records.append(dataclasses_replace(records[-1], kernel="sim.extra", start_ns=t, end_ns=t + 900))
                t += 1000
    return TraceData(records, scopes)


def dataclasses_replace(rec: LaunchRecord, **changes) -> LaunchRecord:
    import dataclasses

    return dataclasses.replace(rec, **changes)


def run_ours(a: TraceData, b: TraceData) -> int:
    result = diff_traces(a, b)
    return sum(result.counts.values())


def run_difflib(a: TraceData, b: TraceData) -> int:
    """The baseline: difflib over the same segments (matched by scope name and occurrence) as ours."""
    seg_a = {(s.name, s.occurrence): s.records for s in segments([a])}
    seg_b = {(s.name, s.occurrence): s.records for s in segments([b])}
    blocks = 0
    for key in dict.fromkeys([*seg_a, *seg_b]):
        ka = [topology_key(r, streams=True) for r in seg_a.get(key, ())]
        kb = [topology_key(r, streams=True) for r in seg_b.get(key, ())]
        ops = difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes()
        blocks += sum(1 for op in ops if op[0] != "equal")
    return blocks


def timed(fn, *args) -> tuple[float, int]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def pairs_of(a: TraceData, b: TraceData, pairs: int) -> None:
    timed(run_ours, a, b)  # warm-up
    timed(run_difflib, a, b)
    ours, base, ratios = [], [], []
    entries = blocks = 0
    for _ in range(pairs):
        t_ours, entries = timed(run_ours, a, b)
        t_base, blocks = timed(run_difflib, a, b)
        ours.append(t_ours)
        base.append(t_base)
        ratios.append(t_ours / t_base)
    print(f"  launchtrace diff_traces: median {statistics.median(ours):.3f} s ({entries} entries)")
    print(f"  difflib baseline:        median {statistics.median(base):.3f} s ({blocks} non-equal opcodes)")
    print(
        f"  ratio ours/difflib: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}) over {pairs} pairs"
    )


def bench(shape: str, launches: int, pairs: int, flat_baseline: int) -> None:
    scoped = shape == "scoped"
    if scoped or launches <= flat_baseline:
        a, b = make_trace(launches, False, scoped, 1), make_trace(launches, True, scoped, 2)
        print(f"{shape}: {len(a.records):,} vs {len(b.records):,} records")
        pairs_of(a, b, pairs)
        return
    # flat: difflib is quadratic on a repetitive 100,000-key sequence (about 100 s at 30,000 here, so
    # about 20 minutes at 100,000); pair it at a size it can finish, and time ours alone at full size.
    a, b = make_trace(flat_baseline, False, False, 1), make_trace(flat_baseline, True, False, 2)
    print(f"flat: {len(a.records):,} vs {len(b.records):,} records (difflib's size)")
    pairs_of(a, b, pairs)
    a, b = make_trace(launches, False, False, 1), make_trace(launches, True, False, 2)
    timed(run_ours, a, b)
    runs = [timed(run_ours, a, b) for _ in range(pairs)]
    times = [t for t, _ in runs]
    print(f"flat: {len(a.records):,} vs {len(b.records):,} records (ours alone)")
    print(
        f"  launchtrace diff_traces: median {statistics.median(times):.3f} s "
        f"(min {min(times):.3f}, max {max(times):.3f}; {runs[0][1]} entries)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--shape", choices=("scoped", "flat", "both"), default="both")
    parser.add_argument("--flat-baseline", type=int, default=10_000, help="difflib's size in the flat shape")
    args = parser.parse_args()
    for shape in ("scoped", "flat") if args.shape == "both" else (args.shape,):
        bench(shape, args.launches, args.pairs, args.flat_baseline)


if __name__ == "__main__":
    main()
