"""What exporting costs a hot launch loop: bare vs exported (file sink), alternating A B A B in one process.

The program is ``scripts/soak.py``'s loop (scoped steps of tiny kernel launches on the CPU device). For each
pair, A runs it with Warp uninstrumented, B with ``launchtrace.start_export`` writing the JSON Lines file; we
time the loop as the program sees it (``loop``) and until the last span is written (``+flush``: the exporter's
backlog). Prints the median B/A ratio with min and max over the pairs after one warm-up pair, and the events
left queued when the loop ended (the backlog the worker had not caught up with).

Example::

    python benchmarks/bench_soak.py --launches 20000 --pairs 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import soak  # the soak's program, shared (scripts/ is on the path above)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=7)
    args = parser.parse_args(argv)

    import warp as wp

    import launchtrace.capture as capture
    import launchtrace.export as export

    wp.config.quiet = True
    run, issued = soak.program(args.launches, args.steps)
    loop_ratios, flush_ratios, backlogs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs + 1):
            capture.uninstrument()
            t0 = time.perf_counter()
            run()
            bare = time.perf_counter() - t0
            pipeline = export.start_export(file_path=str(Path(tmp) / "b.jsonl"), truncate=True)
            t0 = time.perf_counter()
            run()
            loop = time.perf_counter() - t0
            backlog = len(pipeline._sub.queue)
            export.stop_export(300)
            total = time.perf_counter() - t0
            capture.uninstrument()
            if pair == 0:
                continue  # warm-up
            loop_ratios.append(loop / bare)
            flush_ratios.append(total / bare)
            backlogs.append(backlog)
            print(f"pair {pair}: bare {bare:.3f} s, exported loop {loop:.3f} s, +flush {total:.3f} s, "
                  f"backlog {backlog} events", flush=True)  # fmt: skip
    for name, ratios in (("loop", loop_ratios), ("loop+flush", flush_ratios)):
        print(
            f"{name}: exported/bare median {statistics.median(ratios):.2f} "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f}) over {len(ratios)} pairs of {issued} launches"
        )
    print(f"backlog at loop end: median {statistics.median(backlogs):.0f} events ({issued} launches issued)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
