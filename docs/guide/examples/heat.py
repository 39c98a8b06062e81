"""Heat diffusion on a grid: the guide's example of scopes and owners in a real Warp program.

A `Solver` owns its fields; each step is one trace (`launchtrace.scope("step", step=i)`), with the diffusion
sweeps and the measurement as child scopes. Run it as `python3 examples/heat.py --out heat.jsonl`.
"""

import argparse

import numpy as np
import warp as wp

import launchtrace


@wp.kernel
def diffuse(src: wp.array2d(dtype=float), dst: wp.array2d(dtype=float), alpha: float):
    i, j = wp.tid()
    n = src.shape[0]
    if i == 0 or j == 0 or i == n - 1 or j == n - 1:
        dst[i, j] = src[i, j]
        return
    lap = src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1] - 4.0 * src[i, j]
    dst[i, j] = src[i, j] + alpha * lap


@wp.kernel
def total_heat(field: wp.array2d(dtype=float), total: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(total, 0, field[i, j])


class Fields:
    def __init__(self, n: int) -> None:
        start = np.zeros((n, n), dtype=np.float32)
        start[n // 2 - 2 : n // 2 + 2, n // 2 - 2 : n // 2 + 2] = 100.0
        self.temperature = [wp.array(start, dtype=float), wp.zeros((n, n), dtype=float)]
        self.total = wp.zeros(1, dtype=float)


class Solver:
    def __init__(self, n: int, sweeps: int) -> None:
        self.n, self.sweeps = n, sweeps
        self.fields = Fields(n)

    def step(self) -> float:
        t = self.fields.temperature
        with launchtrace.scope("diffuse", sweeps=self.sweeps):
            for s in range(self.sweeps):
                wp.launch(diffuse, dim=(self.n, self.n), inputs=[t[s % 2], t[(s + 1) % 2], 0.2])
        with launchtrace.scope("measure"):
            self.fields.total.zero_()
            wp.launch(total_heat, dim=(self.n, self.n), inputs=[t[self.sweeps % 2], self.fields.total])
            return float(self.fields.total.numpy()[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--sweeps", type=int, default=6)
    parser.add_argument("--out", default="heat.jsonl")
    args = parser.parse_args()

    launchtrace.start_export(file_path=args.out, truncate=True)  # OTEL_EXPORTER_OTLP_ENDPOINT set: OTLP instead
    solver = Solver(args.size, args.sweeps)
    launchtrace.own(solver, "solver")  # spans say solver.fields.temperature[0], not a pointer
    for i in range(args.steps):
        with launchtrace.scope("step", step=i):
            heat = solver.step()
    launchtrace.flush()
    print(f"{args.steps} steps of a {args.size}x{args.size} grid, total heat {heat:.1f}, spans in {args.out}")


if __name__ == "__main__":
    main()
