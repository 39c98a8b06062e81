"""``launchtrace demo``: run the bundled Warp particle simulation instrumented and exported.

With no OTLP endpoint configured the spans go to the OTLP JSON Lines file in the working directory (or
``--out``); the command prints where, and a summary of what was captured.
"""

from __future__ import annotations

import argparse
import collections
import time

from launchtrace.errors import UserError
from launchtrace.export.config import FOLD_MODES

HELP = "run a bundled Warp simulation on the CPU, instrumented, and export its spans (no server needed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=60, help="simulation steps, one trace each (default 60)")
    parser.add_argument("--particles", type=int, default=1024, help="number of particles (default 1024)")
    parser.add_argument("--substeps", type=int, default=4, help="substeps per step (default 4)")
    parser.add_argument("--device", default="cpu", help="Warp device (default cpu)")
    parser.add_argument("--out", help="OTLP JSON Lines file to write (default: launchtrace-<time>-<pid>.jsonl here)")
    parser.add_argument("--value-stats", action="store_true", help="add value statistics of each launch's outputs")
    parser.add_argument("--device-timing", action="store_true", help="add CUDA event times (with --device cuda:0)")
    parser.add_argument(
        "--fold",
        choices=FOLD_MODES,
        help="when repeated launches become summary spans: auto (the default: only a trace that would pass its "
        "span budget), always (from the first repeat), off (never)",
    )


def run(args: argparse.Namespace) -> int:
    for name in ("steps", "particles", "substeps"):
        if getattr(args, name) <= 0:
            raise UserError(f"--{name} must be a positive integer, got {getattr(args, name)}")
    import warp as wp

    wp.config.quiet = True
    import launchtrace
    from launchtrace.capture import bus
    from launchtrace.cli._output import make_parent
    from launchtrace.demo.particles import ParticleSim

    settings: dict = {"file_path": make_parent("--out", args.out)} if args.out else {}
    if args.value_stats:
        settings["value_stats"] = True
    if args.device_timing:
        settings["device_timing"] = True
    if args.fold:
        settings["fold"] = args.fold
    try:
        pipeline = launchtrace.start_export(**settings)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    counts: collections.Counter[str] = collections.Counter()
    with bus.subscribe() as tally:
        t0 = time.perf_counter()
        sim = ParticleSim(num_particles=args.particles, substeps=args.substeps, device=args.device)
        energies = sim.run(args.steps)
        elapsed = time.perf_counter() - t0
        for kind, item in tally.drain():
            if kind == "record":
                counts[f"{item.op} {item.kernel}"] += 1
    stats = launchtrace.stop_export()
    print(
        f"simulated {args.steps} steps of {args.particles} particles in {elapsed:.2f} s; "
        f"kinetic energy {energies[0]:.3f} -> {energies[-1]:.3f}"
    )
    print(f"captured {sum(counts.values())} device operations:")
    for name, count in counts.most_common():
        print(f"  {count:6d}  {name}")
    print(
        f"exported {stats.exported} spans ({stats.folded_records} records folded into {stats.summary_spans} summary "
        f"spans), dropped {stats.dropped}, to {pipeline.sink.description}"
    )
    return 0 if stats.dropped == 0 else 1
