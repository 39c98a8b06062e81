"""Every benchmark on two trees, alternating: is anything slower after a change than before it?

Issue 26 asks for all benchmarks rerun before and after on the same machine, alternating, with no regression on
the user's thread. Each side is a Python interpreter whose environment has one tree of launchtrace installed
(``pip install -e .`` in a virtual environment per tree, compiled parts built): the tree's own benchmark script
runs under its own interpreter, so each side measures itself with the options both understand. The order is
before, after, after, before (A B B A), so a drift in the machine's load falls on both sides alike.

The sizes are reduced (a shared 2-core machine): each benchmark reports ratios against its own baseline in the
same process, so what is compared between the trees is that ratio (or a rate), not a wall time. The outputs go
to ``--out`` whole, one file per benchmark, side and round; this prints each run's last lines side by side.

Run::

    python benchmarks/compare_trees.py --before ../before/.venv/bin/python --after .venv/bin/python \\
        --out /tmp/compare [--only capture,export]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

# name -> (script, arguments, on the user's thread?)
BENCHMARKS: dict[str, tuple[str, list[str], bool]] = {
    "capture": ("bench_capture.py", ["--launches", "20000", "--pairs", "5"], True),
    "export-loop": ("bench_export.py", ["--only", "loop", "--launches", "3000", "--pairs", "3"], True),
    "soak": ("bench_soak.py", ["--launches", "200", "--steps", "20", "--pairs", "3"], True),
    "appspan": ("bench_appspan.py", ["--spans", "20000", "--pairs", "3"], True),
    "probes": ("bench_probes.py", ["--launches", "2000", "--rounds", "3"], True),
    "identity": ("bench_identity.py", ["--n", "2000", "--pairs", "3", "--run-pairs", "1"], True),
    "fanout": ("bench_fanout.py", ["--n", "100000", "--runs", "5"], True),
    "tinygrad": ("bench_tinygrad.py", ["--calls", "100", "--pairs", "3"], True),
    "stages": ("bench_stages.py", ["--launches", "3000", "--runs", "3"], True),
    "spanbuilder": ("bench_spanbuilder.py", ["--records", "5000", "--pairs", "3"], True),
    "exit-delay": ("bench_exit_delay.py", ["--runs", "2"], True),
    "export-otlp": (
        "bench_export.py",
        ["--only", "otlp", "--otlp-spans", "20000", "--sdk-spans", "600", "--pairs", "1"],
        False,
    ),
    "collect": ("bench_collect.py", ["--spans", "20000", "--runs", "2"], False),
    "read": ("bench_read.py", ["--spans", "20000", "--pairs", "3"], False),
    "file-size": ("bench_file_size.py", ["--steps", "20", "--launches", "50"], False),
    "topology": ("bench_topology.py", ["--launches", "20000", "--pairs", "3"], False),
    "diff": ("bench_diff.py", ["--launches", "20000", "--pairs", "2"], False),
    "dataflow": ("bench_dataflow.py", ["--n", "2000"], False),
    "snapshot-plugin": ("bench_snapshot_plugin.py", ["--pairs", "2"], False),
}


def tree_of(python: str) -> Path:
    """The repository root of the launchtrace that ``python`` imports (an editable install)."""
    out = subprocess.run(
        [python, "-c", "import launchtrace, pathlib; print(pathlib.Path(launchtrace.__file__).resolve())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip()).parents[2]


def run_one(python: str, tree: Path, script: str, args: list[str], out: Path, timeout: float) -> str:
    """One benchmark run on one tree; its whole output saved to ``out``; its last lines returned."""
    path = tree / "benchmarks" / script
    if not path.is_file():
        text = f"(no {script} in {tree})"
    else:
        started = time.monotonic()
        try:
            done = subprocess.run(
                [python, str(path), *args],
                cwd=tree,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            text = done.stdout + done.stderr + f"\n(exit {done.returncode}, {time.monotonic() - started:.0f} s)"
        except subprocess.TimeoutExpired:
            text = f"(timed out after {timeout:.0f} s)"
    out.write_text(text)
    return "\n".join(text.strip().splitlines()[-8:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="Python of the tree before (its own venv)")
    parser.add_argument("--after", default=sys.executable, help="Python of the tree after")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="", help="comma-separated names (default: all): " + ",".join(BENCHMARKS))
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmarks: {', '.join(unknown)}")
    sides = {"before": (args.before, tree_of(args.before)), "after": (args.after, tree_of(args.after))}
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        script, bench_args, user_thread = BENCHMARKS[name]
        print(f"== {name} ({'user thread' if user_thread else 'offline'}): {script} {' '.join(bench_args)}", flush=True)
        for round_no, side in enumerate(("before", "after", "after", "before")):
            python, tree = sides[side]
            load = os.getloadavg()[0]
            tail = run_one(python, tree, script, bench_args, args.out / f"{name}.{side}.{round_no}.txt", args.timeout)
            print(f"-- {side} (round {round_no}, load {load:.1f})\n{tail}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
