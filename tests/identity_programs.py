"""Small Warp programs for the buffer-identity tests (``tests/test_identity.py``), run as scripts under
``launchtrace run``: no launchtrace call in them, as a new user writes them.

``springs``: a spring chain with State / Model / Trainer classes owning their arrays, a ``wp.Tape`` over
substeps, ``tape.backward``, an SGD kernel and ``wp.ScopedTimer`` phases (the shape of issue 23).
``temporaries``: every step allocates temporaries, uses them and drops them (the allocator hands the freed
addresses to the next ones in an order that varies); with ``keep`` it also keeps one allocation per step alive
(a real per-step allocation).

Usage: ``python identity_programs.py springs|temporaries [keep] [steps]``
"""

from __future__ import annotations

import sys

import numpy as np
import warp as wp

N = 64
DEVICE = "cpu"


@wp.kernel
def spring_forces(x: wp.array(dtype=float), k: float, f: wp.array(dtype=float)):
    i = wp.tid()
    left = x[i - 1] if i > 0 else x[i]
    f[i] = k * (left - x[i])


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), f: wp.array(dtype=float), dt: float,
              x_out: wp.array(dtype=float), v_out: wp.array(dtype=float)):  # fmt: skip
    i = wp.tid()
    v_out[i] = v[i] + f[i] * dt
    x_out[i] = x[i] + v_out[i] * dt


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(param: wp.array(dtype=float), grad: wp.array(dtype=float), rate: float):
    i = wp.tid()
    param[i] = param[i] - rate * grad[i]


@wp.kernel
def scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * s


class State:
    def __init__(self, n: int) -> None:
        self.x = wp.zeros(n, dtype=float, device=DEVICE, requires_grad=True)
        self.v = wp.zeros(n, dtype=float, device=DEVICE, requires_grad=True)
        self.f = wp.zeros(n, dtype=float, device=DEVICE, requires_grad=True)


class Model:
    def __init__(self, n: int, substeps: int) -> None:
        self.stiffness = 0.5
        self.states = [State(n) for _ in range(substeps + 1)]
        self.target = wp.array(np.linspace(0.0, 1.0, n, dtype=np.float32), dtype=float, device=DEVICE)


class Trainer:
    def __init__(self, n: int = N, substeps: int = 4) -> None:
        self.model = Model(n, substeps)
        self.substeps = substeps
        self.loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)

    def forward(self) -> None:
        states = self.model.states
        for s in range(self.substeps):
            a, b = states[s], states[s + 1]
            wp.launch(spring_forces, dim=N, inputs=[a.x, self.model.stiffness], outputs=[a.f], device=DEVICE)
            wp.launch(integrate, dim=N, inputs=[a.x, a.v, a.f, 0.01], outputs=[b.x, b.v], device=DEVICE)
        wp.launch(loss_kernel, dim=N, inputs=[states[-1].x, self.model.target], outputs=[self.loss], device=DEVICE)

    def step(self) -> None:
        tape = wp.Tape()
        with wp.ScopedTimer("forward", print=False):
            with tape:
                self.forward()
        with wp.ScopedTimer("backward", print=False):
            tape.backward(loss=self.loss)
        with wp.ScopedTimer("update", print=False):
            first = self.model.states[0]
            wp.launch(sgd, dim=N, inputs=[first.v, first.v.grad, 0.01], device=DEVICE)
        tape.zero()
        self.loss.zero_()


def springs(steps: int) -> None:
    trainer = Trainer()
    for _ in range(steps):
        trainer.step()


def temporaries(steps: int, keep: bool) -> None:
    x = wp.array(np.ones(N, dtype=np.float32), dtype=float, device=DEVICE)
    out = wp.zeros(N, dtype=float, device=DEVICE)
    kept = []
    rng = np.random.default_rng()  # the allocation pattern below varies run to run: addresses get reused
    for _ in range(steps):
        with wp.ScopedTimer("step", print=False):
            a = wp.empty(N, dtype=float, device=DEVICE)
            b = wp.empty(N * int(rng.integers(1, 3)), dtype=float, device=DEVICE)
            wp.launch(scale, dim=N, inputs=[x, 2.0], outputs=[a], device=DEVICE)
            wp.launch(scale, dim=N, inputs=[a, 0.5], outputs=[b], device=DEVICE)
            if rng.integers(0, 2):
                del a  # freed early in some steps: the next allocation may take its address
            c = wp.empty(N, dtype=float, device=DEVICE)
            wp.launch(scale, dim=N, inputs=[b, 1.0], outputs=[c], device=DEVICE)
            if keep:
                grown = wp.empty(N, dtype=float, device=DEVICE)
                kept.append(grown)
                wp.launch(scale, dim=N, inputs=[c, 1.0], outputs=[grown], device=DEVICE)
            wp.launch(scale, dim=N, inputs=[c, 1.0], outputs=[out], device=DEVICE)
            del b, c


if __name__ == "__main__":
    which = sys.argv[1]
    rest = sys.argv[2:]
    keep = "keep" in rest
    numbers = [int(a) for a in rest if a.isdigit()]
    steps = numbers[0] if numbers else 4
    if which == "springs":
        springs(steps)
    else:
        temporaries(steps, keep)
