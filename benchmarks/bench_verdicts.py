"""Verdict quality of ``launchtrace diff``'s timing: the false-alarm rate over A/A pairs and the detection rate
over A/B pairs, measured on real runs of a small Warp program (``verdicts_program.py``, CPU device), each run
a separate process exporting its own trace file.

Method (shared/notes/measuring.md, "Measuring a verdict"): both variants are compiled first (not counted).
Then each round runs A, A' (the same program again) and B (``stretch`` made 1.5x as costly through
``BENCH_SLOW_FACTOR``, so its arguments and the topology stay equal), the order alternating between rounds
(A A' B, then B A A'), so each compared pair ran back to back. Every pair is diffed with
:func:`launchtrace.analysis.diff.diff_traces`, the code behind ``launchtrace diff``:

- one run per side (what users mostly run): A/A is (A, A'), A/B is (A', B) or (B's neighbour A, B);
- several runs per side: consecutive blocks of ``--runs`` rounds, A/A = A runs against A' runs, A/B = A runs
  against B runs.

A/A: a pair is a false alarm when any group (kernel or scope) is reported significant. A/B: ``stretch`` must
be reported slower; any other kernel reported is counted against it (the scopes holding ``stretch`` slow down
too, rightly). For contrast it also prints how often a plain Mann-Whitney test over the steps (no run-level
drift allowance) would have called an A/A pair. The raw traces stay in ``--keep`` for re-analysis
(``--analyze DIR`` skips the runs).

    python benchmarks/bench_verdicts.py [--rounds 20] [--steps 60] [--runs 3] [--keep DIR] [--analyze DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.verdicts import mann_whitney_u
from launchtrace.sources.loading import load_traces

PROGRAM = Path(__file__).with_name("verdicts_program.py")
SLOWED = "__main__.stretch"
SLOW_FACTOR = "1.5"


def run_once(out: Path, steps: int, slow: bool) -> float:
    env = dict(os.environ, BENCH_SLOW_FACTOR=SLOW_FACTOR if slow else "1")
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, str(PROGRAM), str(out), str(steps)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
    )
    return time.perf_counter() - t0


def collect(folder: Path, rounds: int, steps: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    run_once(folder / "compile-a.jsonl", 2, False)  # compile both variants: not samples
    run_once(folder / "compile-b.jsonl", 2, True)
    took = []
    for r in range(rounds):
        order = [("a", False), ("a2", False), ("b", True)]
        if r % 2:
            order = [order[2], order[0], order[1]]
        for name, slow in order:
            took.append(run_once(folder / f"r{r:02d}-{name}.jsonl", steps, slow))
    print(f"{3 * rounds} runs of {steps} steps, {statistics.median(took):.1f} s each (median)")


def _flagged(result) -> list:
    return [t for t in result.timing if t.verdict.significant]


def _naive(result_rows, a, b) -> bool:
    """Whether a Mann-Whitney test over steps alone would call some group (for contrast only)."""
    del result_rows
    from launchtrace.analysis.diff import step_series

    _, va, _ = step_series(a)
    _, vb, _ = step_series(b)
    for key in va.keys() & vb.keys():
        sa = [v for _, v in sorted(va[key].items())][2:]
        sb = [v for _, v in sorted(vb[key].items())][2:]
        if len(sa) >= 5 and len(sb) >= 5 and mann_whitney_u(sa, sb)[1] < 0.01:
            return True
    return False


def analyze(folder: Path, runs_per_side: int) -> None:
    rounds = sorted({p.name.split("-")[0] for p in folder.glob("r*-a.jsonl")})
    traces = {(r, v): load_traces(folder / f"{r}-{v}.jsonl") for r in rounds for v in ("a", "a2", "b")}
    print(f"\n## one run per side ({len(rounds)} A/A pairs, {len(rounds)} A/B pairs)")
    aa_alarms, naive_alarms, found, others = 0, 0, 0, {}
    effects = []
    for i, r in enumerate(rounds):
        aa = diff_traces(traces[(r, "a")], traces[(r, "a2")])
        flagged = _flagged(aa)
        aa_alarms += bool(flagged)
        naive_alarms += _naive(aa, traces[(r, "a")], traces[(r, "a2")])
        for t in aa.timing:
            if t.kind == "kernel" and t.scope == "step":
                effects.append(abs(t.verdict.effect))
        for t in flagged:
            print(f"  A/A {r}: false alarm: {t.group}: {t.verdict.reason}")
        # the A/B pair that ran back to back: (A', B) in rounds A A' B, (B, A) in rounds B A A'
        ab = diff_traces(traces[(r, "a2" if i % 2 == 0 else "a")], traces[(r, "b")])
        hit = [t for t in ab.timing if t.kind == "kernel" and t.name == SLOWED and t.verdict.direction == "slower"]
        found += bool(hit)
        if not hit:
            row = next((t for t in ab.timing if t.kind == "kernel" and t.name == SLOWED), None)
            print(f"  A/B {r}: {SLOWED} missed: {row.verdict.reason if row else 'absent'}")
        for t in _flagged(ab):
            if t.kind == "kernel" and t.name != SLOWED:
                others[t.name] = others.get(t.name, 0) + 1
                print(f"  A/B {r}: other kernel reported: {t.group}: {t.verdict.reason}")
    n = len(rounds)
    effects.sort()
    print(f"A/A false alarms: {aa_alarms} of {n} pairs ({aa_alarms / n:.0%}); target <= 5%")
    print(f"A/B {SLOWED} reported slower: {found} of {n} ({found / n:.0%}); target >= 95%")
    print(f"A/B other kernels reported: {others or 'none'} (most for one kernel: {max(others.values(), default=0)})")
    if effects:
        p95 = effects[min(len(effects) - 1, int(0.95 * len(effects)))]
        print(
            f"A/A |effect| of kernels, per pair: median {statistics.median(effects):.1%}, p95 {p95:.1%}, "
            f"max {effects[-1]:.1%}"
        )
    print(f"for contrast, a Mann-Whitney test over steps alone: {naive_alarms} of {n} A/A pairs called")

    blocks = [rounds[k : k + runs_per_side] for k in range(0, n - runs_per_side + 1, runs_per_side)]
    if not blocks:
        return
    print(f"\n## {runs_per_side} runs per side ({len(blocks)} A/A comparisons, {len(blocks)} A/B comparisons)")
    aa_alarms = found = 0
    others = {}
    for block in blocks:
        a = [t for r in block for t in traces[(r, "a")]]
        a2 = [t for r in block for t in traces[(r, "a2")]]
        b = [t for r in block for t in traces[(r, "b")]]
        aa = diff_traces(a, a2)
        aa_alarms += bool(_flagged(aa))
        for t in _flagged(aa):
            print(f"  A/A {block[0]}..: false alarm: {t.group}: {t.verdict.reason}")
        ab = diff_traces(a, b)
        row = next((t for t in ab.timing if t.kind == "kernel" and t.name == SLOWED), None)
        found += bool(row and row.verdict.direction == "slower")
        if row and row.verdict.direction != "slower":
            print(f"  A/B {block[0]}..: {SLOWED} missed: {row.verdict.reason}")
        elif row:
            print(f"  A/B {block[0]}..: {row.verdict.reason}")
        for t in _flagged(ab):
            if t.kind == "kernel" and t.name != SLOWED:
                others[t.name] = others.get(t.name, 0) + 1
    print(
        f"A/A false alarms: {aa_alarms} of {len(blocks)}; A/B {SLOWED} reported slower: {found} of {len(blocks)}; "
        f"other kernels reported: {others or 'none'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--runs", type=int, default=3, help="runs per side in the several-runs mode")
    parser.add_argument("--keep", help="keep the traces in this folder (default: a temporary one)")
    parser.add_argument("--analyze", help="only analyze the traces already in this folder")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, CPU device")
    if args.analyze:
        analyze(Path(args.analyze), args.runs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        t0 = time.perf_counter()
        collect(folder, args.rounds, args.steps)
        analyze(folder, args.runs)
        print(f"\ntook {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
