"""The small Warp program ``bench_verdicts.py`` runs many times: three kernels on the CPU device, each step in
``launchtrace.scope("step")`` with a ``wp.ScopedTimer("relax")`` around four folded substeps.

``BENCH_SLOW_FACTOR`` (read when the module is built) multiplies the inner loop count of ``stretch`` only: its
cost changes, its arguments and the launch topology do not.

    python benchmarks/verdicts_program.py OUT.jsonl [STEPS]
"""

from __future__ import annotations

import os
import sys

import warp as wp

import launchtrace

wp.config.quiet = True

BASE_LOOPS = 60
STRETCH_LOOPS = wp.constant(round(BASE_LOOPS * float(os.environ.get("BENCH_SLOW_FACTOR", "1"))))
RELAX_LOOPS = wp.constant(BASE_LOOPS // 2)
N = 2048


@wp.kernel
def stretch(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    for _k in range(STRETCH_LOOPS):
        v = wp.sin(v) * 0.5 + 0.25
    y[i] = v


@wp.kernel
def relax(y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    v = y[i]
    for _k in range(RELAX_LOOPS):
        v = wp.cos(v) * 0.5 + 0.1
    z[i] = v


@wp.kernel
def accumulate(z: wp.array(dtype=float), x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * 0.999 + z[i] * 0.001


def main() -> None:
    out, steps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
    launchtrace.start_export(file_path=out, truncate=True, fold=os.environ.get("BENCH_FOLD", "1") == "1")
    x = wp.full(N, 0.5, dtype=float, device="cpu")
    y = wp.zeros(N, dtype=float, device="cpu")
    z = wp.zeros(N, dtype=float, device="cpu")
    for i in range(steps):
        with launchtrace.scope("step", step=i):
            wp.launch(stretch, dim=N, inputs=[x, y], device="cpu")
            with wp.ScopedTimer("relax", print=False):
                for _ in range(4):
                    wp.launch(relax, dim=N, inputs=[y, z], device="cpu")
            wp.launch(accumulate, dim=N, inputs=[z, x], device="cpu")
    launchtrace.flush()


if __name__ == "__main__":
    main()
