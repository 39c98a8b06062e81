"""tinygrad capture hot path: jitted calls on tinygrad's CPU device, recorded (one subscription, as the exporter
has) versus bare (``uninstrument()``), in the same process, alternating A B A B.

Two workloads: a jitted MLP training step (8-16-4, SGD, batch 4: every kernel of the step passes the recorder on
every replay) and a jitted tiny add (one kernel per call: the recorder's cost against the smallest kernel
tinygrad runs). The recorded side decodes its events after each timed block, as the export worker would off the
launching thread; that decode time is reported per record too (it is not on the launching thread).

    python benchmarks/bench_tinygrad.py [--calls 200] [--pairs 15] [--export]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import tinygrad_programs as tp

tp.configure_env("CPU")

import launchtrace  # noqa: E402
from launchtrace.capture import bus  # noqa: E402
from launchtrace.export.config import ExportConfig  # noqa: E402
from launchtrace.export.pipeline import ExportPipeline  # noqa: E402


def timed(fn, args: tuple, calls: int, sub=None, every: int = 20) -> tuple[float, float, int, float]:
    """``(wall s, this thread's CPU s, records, decode s)`` of ``calls`` calls.

    tinygrad's CPU device runs its kernels in the calling thread, so the thread's CPU time is the program's work
    plus the recorder's, without the time other processes on a shared machine take the core away (the wall ratio
    is printed too). With ``sub``, the events are decoded every ``every`` calls with the clocks stopped, as the
    export worker does every 50 ms, so they die young as they do under export (the queue does not grow for the
    whole block, which would make the cycle collector walk thousands of queued events)."""
    wall = cpu = decode = 0.0
    records = 0
    done = 0
    while done < calls:
        n = min(every, calls - done) if sub is not None else calls - done
        if not done:
            gc.collect()  # instrument() / uninstrument() allocate: no collection they set off lands in a block
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(n):
            fn(*args)
        wall += time.perf_counter() - t0
        cpu += time.thread_time() - c0
        done += n
        if sub is not None:
            d0 = time.perf_counter()
            records += sum(1 for kind, _ in sub.drain() if kind == "record")
            decode += time.perf_counter() - d0
    return wall, cpu, records, decode


def measure(name: str, fn, args: tuple, calls: int, pairs: int) -> tuple[int, float]:
    for _ in range(3):
        fn(*args)  # jit: eager call, capture, first replay
    ratios, wall_ratios, bare_us, rec_us, decode_us = [], [], [], [], []
    per_call = 0
    for _ in range(pairs):
        launchtrace.uninstrument()
        bare_wall, bare, _, _ = timed(fn, args, calls)
        launchtrace.instrument()
        sub = bus.subscribe(capacity=1_000_000)
        rec_wall, rec, n, decode = timed(fn, args, calls, sub)
        sub.close()
        assert n and n % calls == 0, (n, calls)
        per_call = n // calls
        ratios.append(rec / bare)
        wall_ratios.append(rec_wall / bare_wall)
        bare_us.append(bare / calls * 1e6)
        rec_us.append(rec / calls * 1e6)
        decode_us.append(decode / n * 1e6)
    launchtrace.uninstrument()
    extra = [(r - b) / per_call for r, b in zip(rec_us, bare_us)]
    print(f"{name}: {per_call} kernel(s) per call, {calls} calls per block, {pairs} pairs (A B A B ...)")
    print(f"  bare:      {statistics.median(bare_us):8.1f} us/call (thread CPU time, median)")
    print(f"  recorded:  {statistics.median(rec_us):8.1f} us/call")
    print(
        f"  ratio recorded / bare (CPU): median {statistics.median(ratios):.3f}  min {min(ratios):.3f}  "
        f"max {max(ratios):.3f}"
    )
    print(
        f"  ratio recorded / bare (wall): median {statistics.median(wall_ratios):.3f}  "
        f"min {min(wall_ratios):.3f}  max {max(wall_ratios):.3f}"
    )
    print(f"  recorder cost per kernel on the launching thread: median {statistics.median(extra):.2f} us")
    print(f"  decode per record (off the launching thread):     median {statistics.median(decode_us):.1f} us")
    return per_call, statistics.median(bare_us)


def measure_export(name: str, fn, args: tuple, calls: int, pairs: int) -> None:
    """The same loop with the export pipeline running (file sink, folding on, as ``launchtrace run``): the
    launching thread's wall time for the loop, and the process's CPU time until every span is written."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="bench_tinygrad_")
    hot, total = [], []
    for _ in range(pairs):
        launchtrace.uninstrument()
        gc.collect()
        w0, p0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn(*args)
        bare_wall, bare_cpu = time.perf_counter() - w0, time.process_time() - p0
        config = ExportConfig.resolve(file_path=os.path.join(folder, "spans.jsonl"), export_interval_s=0.05)
        pipeline = ExportPipeline(config, truncate=True).start()
        launchtrace.instrument()
        gc.collect()
        w0, p0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn(*args)
        loop_wall = time.perf_counter() - w0
        stats = pipeline.stop(timeout=120)
        cpu = time.process_time() - p0
        launchtrace.uninstrument()
        if stats.dropped:
            raise SystemExit(f"lost spans in the benchmark: {stats}")
        hot.append(loop_wall / bare_wall)
        total.append(cpu / bare_cpu)
    print(f"{name} with export running (file sink), {calls} calls per block, {pairs} pairs")
    print(
        f"  launching thread, loop wall time / bare: median {statistics.median(hot):.3f}  "
        f"min {min(hot):.3f}  max {max(hot):.3f}"
    )
    print(
        f"  process CPU time until written / bare:   median {statistics.median(total):.3f}  "
        f"min {min(total):.3f}  max {max(total):.3f}"
    )


def measure_hook(pairs: int, per_block: int = 20_000) -> float:
    """The recorder's own cost per kernel: the hook around a no-op instead of tinygrad's executor, called with a
    real jit call and context, queue drained every 1,000 events (as a consumer would), against the bare no-op.
    Returns the median cost in microseconds (less noisy than the workload ratios on a shared machine)."""
    from tinygrad import Tensor, TinyJit
    from tinygrad.engine import realize

    from launchtrace.capture import tinygrad as frontend

    seen = []
    original = realize.pm_exec.rewrite

    def grab(call, ctx=None):
        seen.append((call, ctx))
        return original(call, ctx)

    launchtrace.uninstrument()
    a = Tensor.ones(16).contiguous().realize()

    @TinyJit
    def add(t):
        return (t * 2).realize()

    realize.pm_exec.rewrite = grab
    try:
        for _ in range(3):
            add(a)
    finally:
        del realize.pm_exec.rewrite
    call, ctx = seen[-1]

    def noop(c, x=None):
        return None

    import dataclasses

    hook = frontend._make_hook(noop, realize)
    results = {}
    for per_run in (19, 1):  # kernels per run_linear (one ExecContext): the MLP step's, a tiny jitted call's
        costs = []
        runs = per_block // per_run
        for _ in range(pairs):
            gc.collect()
            c0 = time.thread_time()
            for _run in range(runs):
                fresh = dataclasses.replace(ctx)
                for _ in range(per_run):
                    noop(call, fresh)
            bare = time.thread_time() - c0
            sub = bus.subscribe(capacity=1_000_000)
            gc.collect()
            c0 = time.thread_time()
            for r in range(runs):
                fresh = dataclasses.replace(ctx)
                for _ in range(per_run):
                    hook(call, fresh)
                if r % 50 == 0:
                    sub.queue.clear()  # a consumer drains
            hooked = time.thread_time() - c0
            sub.close()
            costs.append((hooked - bare) / (runs * per_run) * 1e6)
        results[per_run] = statistics.median(costs)
        print(
            f"recorder hook alone, {per_run} kernel(s) per run_linear (no-op executor, real jit call): median "
            f"{results[per_run]:.2f} us per kernel (min {min(costs):.2f}, max {max(costs):.2f}, {pairs} pairs)"
        )
    return results[19]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--export", action="store_true", help="also measure with the export pipeline running")
    args = parser.parse_args()

    from importlib.metadata import version

    from tinygrad import Tensor, TinyJit

    print(
        f"machine: {platform.machine()} python {platform.python_version()} tinygrad {version('tinygrad')}, "
        f"DEV={os.environ['DEV']}, {os.cpu_count()} CPUs"
    )
    _model, _opt, step = tp.make_training()
    x, y = tp.batch()
    bare_step = measure("jitted MLP step", step, (x, y), args.calls, args.pairs)
    if args.export:
        measure_export("jitted MLP step", step, (x, y), args.calls, max(5, args.pairs // 3))

    a = Tensor.ones(16).contiguous().realize()

    @TinyJit
    def add(t):
        return (t + 1).realize()

    measure("jitted tiny add", add, (a,), args.calls * 4, args.pairs)
    cost = measure_hook(args.pairs)
    kernels, bare_us = bare_step
    print(
        f"MLP step estimated from the hook alone: 1 + {kernels} x {cost:.2f} us / {bare_us:.1f} us = "
        f"{1 + kernels * cost / bare_us:.3f}x (target <= 1.05)"
    )


if __name__ == "__main__":
    main()
