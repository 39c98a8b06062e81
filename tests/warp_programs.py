"""Small real Warp programs the capture tests run on the CPU device.

Kernels live in a module of their own (not in a test file) so Warp compiles them once per session and its
kernel cache serves every test that uses them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float), s: float):
    i = wp.tid()
    y[i] = x[i] * s


@wp.kernel
def integrate(pos: wp.array(dtype=wp.vec3), vel: wp.array(dtype=wp.vec3), gravity: wp.vec3, dt: float):
    i = wp.tid()
    vel[i] = vel[i] + gravity * dt
    pos[i] = pos[i] + vel[i] * dt


@wp.kernel
def square_sum(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, x[i] * x[i])


@wp.struct
class Particles:
    pos: wp.array(dtype=wp.vec3)
    mass: float


@wp.kernel
def drift(p: Particles, dt: float):
    i = wp.tid()
    p.pos[i] = p.pos[i] + wp.vec3(p.mass * dt, 0.0, 0.0)


@wp.kernel
def tiled_copy(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i, _j = wp.tid()
    y[i] = x[i]


class Sim:
    """A tiny particle simulation: the shape of a real step (launches, a copy, a fill, a reduction)."""

    def __init__(self, n: int = 64, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.n = n
        self.pos = wp.array(rng.random((n, 3), dtype=np.float32), dtype=wp.vec3, device=DEVICE)
        self.vel = wp.zeros(n, dtype=wp.vec3, device=DEVICE)
        self.prev = wp.zeros(n, dtype=wp.vec3, device=DEVICE)
        self.energy = wp.zeros(1, dtype=float, device=DEVICE)
        self.speed = wp.zeros(n, dtype=float, device=DEVICE)

    def step(self, dt: float = 0.01) -> None:
        wp.copy(self.prev, self.pos)
        wp.launch(integrate, dim=self.n, inputs=[self.pos, self.vel, wp.vec3(0.0, -9.8, 0.0), dt])
        self.energy.zero_()
        wp.launch(scale, dim=self.n, inputs=[self.speed, self.speed, 0.5])
        wp.launch(square_sum, dim=self.n, inputs=[self.speed, self.energy])

    def result(self) -> np.ndarray:
        return np.concatenate([self.pos.numpy().ravel(), self.vel.numpy().ravel(), self.energy.numpy()])


def internal_work(build: Callable[[], object]) -> list[tuple[str, str]]:
    """``(op, kernel)`` of the device work Warp's own code issues while ``build()`` runs (the fills inside
    ``wp.zeros``, the copy inside ``wp.array(data)``), in issue order, as ``launchtrace.testing.trace_launches``
    records it with Warp's calls included (the capture bus, not the exporter).

    Export keeps Warp's internal records, so a program that builds its arrays while export runs exports these
    too: the exact oracle for those extra spans. Warp's ``print_launches`` log cannot be it (fills and copies
    are not ``wp.launch`` calls).
    """
    from launchtrace.testing import trace_launches

    with trace_launches(include_warp=True) as trace:
        build()
    return [(str(r.op), r.kernel) for r in trace if r.internal]


def warp_key(kernel: str) -> str:
    """Warp's own key of a recorded kernel name, as Warp's launch log prints it: the part after the module for a
    kernel defined at module level; for one defined inside a function (``m.make.<locals>.axpy#fb888011``), the
    dotted name mangled as Warp does (``make__locals__axpy``), the ``module="unique"`` hash left off. Which of
    those the record's module part is cannot be told from the name alone, so the caller compares with
    ``endswith`` on the whole mangled name (:meth:`LaunchLog.matches`)."""
    return re.sub("[^0-9a-zA-Z_]+", "", kernel.split("#")[0].replace(".", "__"))


class LaunchLog:
    """A Warp logger (``wp.set_logger``) that keeps the ``print_launches`` lines: the independent oracle for
    executed ``wp.launch`` calls (one ``kernel: <key> ...`` line each)."""

    def __init__(self) -> None:
        self.kernels: list[str] = []

    def matches(self, names: list[str]) -> bool:
        """Whether recorded kernel names are, one for one, the launches Warp logged (see :func:`warp_key`)."""
        keys = [warp_key(n) for n in names]
        return len(keys) == len(self.kernels) and all(k.endswith(f"__{w}") for k, w in zip(keys, self.kernels))

    def info(self, message: str) -> None:
        if message.startswith("kernel: "):
            self.kernels.append(message.split()[1])

    def debug(self, message: str) -> None:
        pass

    def warning(self, message: str, category=None, stacklevel: int = 1) -> None:
        pass

    def error(self, message: str) -> None:
        pass


@wp.struct
class Body:
    mass: float
    vel: wp.vec3


@wp.kernel
def element_parts(b: wp.array(dtype=Body), v: wp.array(dtype=wp.vec3), idx: wp.array(dtype=int), s: float):
    """Writes parts of elements: a struct field, vector components (one through an index array)."""
    i = wp.tid()
    b[i].mass = s
    v[idx[i]][0] = s
    v[i][1] += s


@wp.func
def _row_end(offsets: wp.array(dtype=int), row: int) -> int:
    """Reads ``offsets`` only, through a second function."""
    return _first(offsets, row + 1)


@wp.func
def _first(values: wp.array(dtype=int), i: int) -> int:
    return values[i]


@wp.func
def _store(out: wp.array(dtype=float), i: int, v: float):
    out[i] = v


@wp.kernel
def through_funcs(offsets: wp.array(dtype=int), out: wp.array(dtype=float)):
    """Hands both arrays to ``@wp.func`` helpers: one only reads its array, the other only writes."""
    i = wp.tid()
    _store(out, i, float(_row_end(offsets, i) - offsets[i]))


@wp.kernel
def grid_neighbours(grid: wp.uint64, p: wp.array(dtype=wp.vec3), r: float, count: wp.array(dtype=int)):
    i = wp.tid()
    q = wp.hash_grid_query(grid, p[i], r)
    j = int(0)  # noqa: UP018, RUF046 (Warp: a variable the loop changes is declared by a constructor)
    n = int(0)  # noqa: UP018, RUF046
    while wp.hash_grid_query_next(q, j):
        n += 1
    count[i] = n


@wp.kernel
def mesh_distance(mesh: wp.uint64, p: wp.array(dtype=wp.vec3), d: wp.array(dtype=float)):
    i = wp.tid()
    q = wp.mesh_query_point(mesh, p[i], 10.0)
    if q.result:
        d[i] = wp.length(wp.mesh_eval_position(mesh, q.face, q.u, q.v) - p[i])


def geometry_steps(steps: int = 3, n: int = 32) -> None:
    """A frame loop that rebuilds a ``wp.HashGrid`` and queries a ``wp.Mesh``: kernels take both as a
    ``uint64`` handle (``grid.id``, ``mesh.id``), a native pointer that differs from run to run."""
    rng = np.random.default_rng(0)
    p = wp.array(rng.random((n, 3), dtype=np.float32), dtype=wp.vec3, device=DEVICE)
    count = wp.zeros(n, dtype=int, device=DEVICE)
    d = wp.zeros(n, dtype=float, device=DEVICE)
    points = wp.array(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32), dtype=wp.vec3, device=DEVICE)
    mesh = wp.Mesh(points=points, indices=wp.array([0, 1, 2], dtype=int, device=DEVICE))
    grid = wp.HashGrid(8, 8, 8, device=DEVICE)
    for _ in range(steps):
        with wp.ScopedTimer("frame", print=False):
            grid.build(p, 0.2)
            wp.launch(grid_neighbours, dim=n, inputs=[grid.id, p, 0.2, count], device=DEVICE)
            wp.launch(mesh_distance, dim=n, inputs=[mesh.id, p, d], device=DEVICE)


if __name__ == "__main__":  # python warp_programs.py geometry: geometry_steps() as a script
    if sys.argv[1:] == ["geometry"]:
        geometry_steps()
