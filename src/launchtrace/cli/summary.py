"""``launchtrace summary TRACE``: per-kernel counts and durations."""

from __future__ import annotations

import argparse
import dataclasses

from launchtrace.analysis.replays import with_replay_counts
from launchtrace.analysis.stats import kernel_stats
from launchtrace.cli._analyzer import add_format, write_json, write_text
from launchtrace.loading import load_traces

HELP = "per-kernel counts and time (p50, p95, total) over traces"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument("--top", type=int, default=0, help="only the N kernels with the most total time")
    add_format(parser)


def run(args: argparse.Namespace) -> int:
    traces = load_traces(args.traces)
    rows = with_replay_counts(kernel_stats(traces), traces)  # count what each capture_launch ran
    if args.top > 0:
        rows = rows[: args.top]
    if args.format == "json":
        write_json([dataclasses.asdict(r) for r in rows], None)
        return 0
    width = max([len(r.kernel) for r in rows] + [6])
    lines = [
        f"{len(traces)} trace(s), {sum(len(t) for t in traces)} records",
        f"{'kernel':<{width}}  {'op':<9} {'count':>8} {'total ms':>10} {'p50 us':>9} {'p95 us':>9} {'max us':>9}",
    ]
    for r in rows:
        lines.append(
            f"{r.kernel:<{width}}  {r.op:<9} {r.count:>8} {r.total_ns / 1e6:>10.3f} {r.p50_ns / 1e3:>9.1f} "
            f"{r.p95_ns / 1e3:>9.1f} {r.max_ns / 1e3:>9.1f}"
        )
    write_text("\n".join(lines) + "\n", None)
    return 0
