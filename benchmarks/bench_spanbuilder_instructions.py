"""Span building cost per record in instructions (valgrind's callgrind): ``bench_spanbuilder.py``'s records, counted
where its wall-clock ratios on these shared machines are not repeatable (0.82x to 0.89x for ``fold=always``).

The records come from ``bench_spanbuilder.capture_events`` (a copy, three launches and a fill per step, each step in
its own ``launchtrace.scope``), captured twice in one process, ``--n1`` and ``--n2`` steps, after one step that
loads the kernel's module (so neither capture holds a module load). Then, for each ``fold`` mode, ``SpanBuilder.feed``
+ ``flush`` over each capture (the spans freed in the block, as the export worker frees them): four times
uncounted (Python's specializing interpreter settles), then four counted pairs (n1, n2), the first of which is
dropped (like ``bench_instructions.py``'s first block, it carries one-time work). Per record:
``(I(n2) - I(n1)) / (records(n2) - records(n1))``, so start-up and the builder's own set-up cancel; the three
pairs kept agree to about 100 instructions. ``os.getpgrp()`` zeroes callgrind's counters and ``os.getsid(0)``
dumps them (``bench_instructions.py``'s method); the process is down to its main thread and
``gc.collect()`` has run before each block. Warp's kernel cache is warmed under valgrind (``--tool=none``) first.

``--python`` measures another tree: a Python whose environment has that tree of launchtrace installed (``pip
install -e .``); the child runs from that tree's root, with its own ``benchmarks/bench_spanbuilder.py``. To compare
two trees, run this once per tree, alternating (A B B A).

    python benchmarks/bench_spanbuilder_instructions.py [--python ../before/.venv/bin/python]
        [--folds off,always,auto] [--n1 40] [--n2 120]

About 20 s per mode under valgrind on a quiet 2-core machine, plus 40 s of warm-up.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WARM, PAIRS = 4, 3


def child(fold: str, n1: int, n2: int, mark: bool) -> None:
    """Runs under valgrind, from the measured tree's root: the blocks, and each capture's record count on stderr."""
    import gc
    import threading
    import time

    sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
    import warp as wp

    from bench_spanbuilder import capture_events
    from launchtrace.export.config import ExportConfig
    from launchtrace.export.spanbuilder import SpanBuilder

    wp.config.quiet = True
    wp.init()
    capture_events(1)  # the module load, outside the counted captures
    captures = [capture_events(n1), capture_events(n2)]
    print("records", *(sum(1 for kind, _ in ev if kind == "record") for ev in captures), file=sys.stderr)

    def build(events: list) -> list:
        builder = SpanBuilder(ExportConfig.resolve(file_path=os.devnull, fold=fold))
        return builder.feed(events) + builder.flush()

    for _ in range(WARM):
        for events in captures:
            build(events)
    while threading.active_count() > 1:
        time.sleep(0.05)
    zero, dump = (os.getpgrp, lambda: os.getsid(0)) if mark else (lambda: None, lambda: None)
    for _ in range(PAIRS + 1):
        for events in captures:
            gc.collect()
            zero()
            build(events)
            dump()


def measure(python: str, tree: Path, fold: str, n1: int, n2: int) -> list[float]:
    """Per-record instructions of each counted pair."""
    with tempfile.TemporaryDirectory(prefix="lt-sbinstr-") as folder:
        out = os.path.join(folder, "cg.out")
        cmd = [
            "valgrind", "--tool=callgrind", "--zero-before=getpgrp", "--dump-before=getsid",
            f"--callgrind-out-file={out}", "-q", python, str(Path(__file__).resolve()),
            "--child", fold, str(n1), str(n2),
        ]  # fmt: skip
        done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
        counts = re.search(r"^records (\d+) (\d+)$", done.stderr, re.M)
        if done.returncode != 0 or counts is None:
            raise SystemExit(f"callgrind run failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
        totals = []
        for path in sorted(glob.glob(out + ".*"), key=lambda p: int(p.rsplit(".", 1)[1])):
            text = Path(path).read_text()
            found = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
            totals.append(int(found.group(1)) if found else 0)
    r1, r2 = int(counts.group(1)), int(counts.group(2))
    return [(totals[i + 1] - totals[i]) / (r2 - r1) for i in range(2, 2 * PAIRS + 2, 2)]


def tree_of(python: str) -> Path:
    """The repository root of the launchtrace that ``python`` imports (an editable install)."""
    code = "import launchtrace, pathlib; print(pathlib.Path(launchtrace.__file__).resolve())"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip()).parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the tree to measure")
    parser.add_argument("--folds", default="off,always,auto")
    parser.add_argument("--n1", type=int, default=40, help="steps in the smaller capture (5 records each)")
    parser.add_argument("--n2", type=int, default=120, help="steps in the larger capture")
    parser.add_argument("--child", nargs=3, metavar=("FOLD", "N1", "N2"), help=argparse.SUPPRESS)
    parser.add_argument("--no-mark", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fold, n1, n2 = args.child
        child(fold, int(n1), int(n2), not args.no_mark)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_spanbuilder_instructions: valgrind is not on PATH (apt-get install valgrind)")
    tree = tree_of(args.python)
    warm = ["valgrind", "--tool=none", "-q", args.python, str(Path(__file__).resolve()), "--child", "off", "1", "2"]
    subprocess.run([*warm, "--no-mark"], cwd=tree, capture_output=True, check=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"tree {tree}; load average {load:.1f}; {args.n1} and {args.n2} steps (5 records each)")
    for fold in args.folds.split(","):
        per = measure(args.python, tree, fold, args.n1, args.n2)
        print(
            f"SpanBuilder, fold={fold:<6}: {statistics.median(per):,.0f} instructions per record "
            f"(pairs: {', '.join(f'{x:,.0f}' for x in per)})"
        )


if __name__ == "__main__":
    main()
