"""Buffer identity (``launchtrace.allocations``): what it costs per allocation and per launch, and whether
fresh runs of unchanged programs diff as topology-equal.

Costs (same process, alternating bare / instrumented blocks, shared/notes/measuring.md; as this process's CPU
time, which other processes on a shared machine disturb less than wall time):

- per allocation: a loop of ``wp.empty(n)`` (allocated and dropped at once), bare (not instrumented) against
  instrumented (the ``array._init_new`` hook notes the allocation and its death);
- per launch, on the launching thread: ``wp.launch`` of a trivial kernel with a subscriber, on arrays the
  registry knows (allocated while instrumented) against arrays it does not (allocated before): the hot path
  records pointers only, so the two must match;
- per launch, off the launching thread: materialising those launches' events into records (the export
  worker's share), labelled against unlabelled arrays, and a step that allocates a temporary each time
  (allocations invalidate the materializer's launch templates) against one that does not.

Runs: ``--run-pairs K`` runs K pairs of fresh ``launchtrace run`` processes of each program of
``tests/identity_programs.py`` and counts the pairs ``launchtrace diff`` exits 1 on (target 0), and checks
``check-static`` on each run.

    python benchmarks/bench_identity.py [--n 20000] [--pairs 7] [--run-pairs 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import warp as wp

import launchtrace
from launchtrace.capture import bus
from launchtrace.capture.materialize import Materializer

wp.config.quiet = True
_clock = time.process_time  # this process's CPU time: steadier than wall time on a machine shared with others
ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "identity_programs.py"


@wp.kernel
def trivial(x: wp.array(dtype=float), y: wp.array(dtype=float), s: float):
    i = wp.tid()
    y[i] = x[i] * s


def allocations(n: int) -> float:
    empty = wp.empty
    t0 = _clock()
    for _ in range(n):
        empty(16, dtype=float, device="cpu")
    return _clock() - t0


def launches(x: wp.array, y: wp.array, n: int, temporary: bool = False) -> float:
    launch = wp.launch
    t0 = _clock()
    for _ in range(n):
        if temporary:
            y = wp.empty(1, dtype=float, device="cpu")
        launch(trivial, dim=1, inputs=[x, y, 1.0])
    return _clock() - t0


def recorded(x: wp.array, y: wp.array, n: int, temporary: bool = False) -> tuple[float, list]:
    sub = bus.subscribe(capacity=10 * n)
    took = launches(x, y, n, temporary)
    raw = sub.drain_raw()
    sub.close()
    return took, raw


def materialise(raw: list) -> float:
    t0 = _clock()
    Materializer().run(list(raw))
    return _clock() - t0


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f}x (min {min(xs):.3f}, max {max(xs):.3f})"


def costs(n: int, pairs: int) -> None:
    launchtrace.uninstrument()
    old_x, old_y = wp.ones(1, dtype=float, device="cpu"), wp.zeros(1, dtype=float, device="cpu")  # not known
    launches(old_x, old_y, 100)  # compile
    launchtrace.instrument()
    new_x, new_y = wp.ones(1, dtype=float, device="cpu"), wp.zeros(1, dtype=float, device="cpu")  # known
    alloc_r, alloc_bare, alloc_inst = [], [], []
    hot_r, mat_r, tmp_r, mat_us, mat_old_us, tmp_us, plain_us = [], [], [], [], [], [], []
    for _ in range(pairs):
        launchtrace.uninstrument()
        bare = allocations(n)
        launchtrace.instrument()
        inst = allocations(n)
        alloc_r.append(inst / bare)
        alloc_bare.append(bare / n * 1e6)
        alloc_inst.append(inst / n * 1e6)

        t_old, raw_old = recorded(old_x, old_y, n)
        t_new, raw_new = recorded(new_x, new_y, n)
        hot_r.append(t_new / t_old)
        m_old, m_new = materialise(raw_old), materialise(raw_new)
        mat_r.append(m_new / m_old)
        mat_old_us.append(m_old / n * 1e6)
        mat_us.append(m_new / n * 1e6)

        _, raw_plain = recorded(new_x, new_y, n // 4)
        _, raw_tmp = recorded(new_x, new_y, n // 4, temporary=True)
        launch_events = [e for e in raw_tmp if e[3] == "launch"]
        m_plain, m_tmp = materialise(raw_plain), materialise(launch_events)
        tmp_r.append(m_tmp / m_plain)
        plain_us.append(m_plain / (n // 4) * 1e6)
        tmp_us.append(m_tmp / (n // 4) * 1e6)
    print(f"per allocation (wp.empty(16), {n} per block, {pairs} pairs):")
    print(f"  bare {statistics.median(alloc_bare):.2f} us, instrumented {statistics.median(alloc_inst):.2f} us")
    print(f"  instrumented / bare: {_median(alloc_r)}")
    print("per launch, launching thread (subscriber on), labelled arrays / unlabelled arrays: " + _median(hot_r))
    print(
        f"per launch, materialised: unlabelled {statistics.median(mat_old_us):.2f} us, labelled "
        f"{statistics.median(mat_us):.2f} us: {_median(mat_r)}"
    )
    print(
        f"per launch, materialised, a temporary allocated before each launch (templates invalidated): "
        f"{statistics.median(tmp_us):.2f} us against {statistics.median(plain_us):.2f} us: {_median(tmp_r)}"
    )


def _run(out: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(PROGRAMS), *args]
    subprocess.run(cmd, check=True, capture_output=True, cwd=out.parent, timeout=600)


def _cli(*args: str) -> int:
    return subprocess.run([sys.executable, "-m", "launchtrace", *args], capture_output=True, timeout=600).returncode


def run_pairs(k: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for program in (("temporaries", "8"), ("springs", "3")):
            differ = not_static = 0
            for i in range(k):
                a, b = Path(tmp) / f"a{i}.jsonl", Path(tmp) / f"b{i}.jsonl"
                _run(a, *program)
                _run(b, *program)
                differ += _cli("diff", str(a), str(b)) == 1
                if program[0] == "temporaries":
                    not_static += _cli("check-static", str(a), "--scope", "step") != 0
            print(f"{program[0]}: {k} pairs of fresh runs, topology differs in {differ}", end="")
            print(f", check-static not static in {not_static} of {k} runs" if program[0] == "temporaries" else "")
        a = Path(tmp) / "keep.jsonl"
        _run(a, "temporaries", "keep", "4")
        print(f"temporaries keep: check-static exit {_cli('check-static', str(a), '--scope', 'step')} (1: reported)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="allocations / launches per block")
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--run-pairs", type=int, default=0, help="pairs of fresh launchtrace runs per program")
    args = parser.parse_args()
    wp.init()
    costs(args.n, args.pairs)
    if args.run_pairs:
        run_pairs(args.run_pairs)


if __name__ == "__main__":
    main()
