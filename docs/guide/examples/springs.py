"""A program as a new user writes it, with no launchtrace call: a spring chain trained with a ``wp.Tape``;
State / Model / Trainer classes own their arrays; ``wp.ScopedTimer`` s "forward", "backward", "update".

Run it as ``launchtrace run --value-stats --out springs.jsonl examples/springs.py 3``: ``blowup`` writes a NaN
at iteration 3 (the first argument; none: no NaN); ``--bare`` leaves the timers out. See docs/traces.md, "The
first hour with your own program"; ``tests/test_first_hour.py`` and ``scripts/report_screenshots.py`` run it."""

import contextlib
import sys

import numpy as np
import warp as wp

N = 64
NAN_STEP = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else -1
BARE = "--bare" in sys.argv  # no ScopedTimer: the Tape passes become tape.forward / tape.backward spans


@wp.kernel
def spring_forces(x: wp.array(dtype=wp.vec2), k: wp.array(dtype=float), f: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    if i + 1 < x.shape[0]:
        d = x[i + 1] - x[i]
        wp.atomic_add(f, i, k[0] * d)
        wp.atomic_sub(f, i + 1, k[0] * d)


@wp.kernel
def repulsion(x: wp.array(dtype=wp.vec2), f: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    f[i] = f[i] - 0.01 * x[i]


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    f: wp.array(dtype=wp.vec2),
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    v_out[i] = v[i] + f[i] * dt
    x_out[i] = x[i] + v_out[i] * dt


@wp.kernel
def loss_kernel(x: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.dot(x[i], x[i]))


@wp.kernel
def blowup(x: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    if i == 0:
        x[i] = wp.vec2(wp.nan, 0.0)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class State:
    def __init__(self):
        self.x = wp.array(
            np.stack([np.arange(N, dtype=np.float32), np.zeros(N, dtype=np.float32)], 1),
            dtype=wp.vec2,
            requires_grad=True,
        )
        self.v = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
        self.f = wp.zeros(N, dtype=wp.vec2, requires_grad=True)


class Model:
    def __init__(self, substeps):
        self.k = wp.array([0.5], dtype=float, requires_grad=True)
        self.states = [State() for _ in range(substeps + 1)]


class Trainer:
    def __init__(self, substeps=4):
        self.substeps = substeps
        self.model = Model(substeps)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def forward(self):
        m = self.model
        for s in range(self.substeps):
            a, b = m.states[s], m.states[s + 1]
            a.f.zero_()
            wp.launch(spring_forces, dim=N, inputs=[a.x, m.k], outputs=[a.f])
            wp.launch(repulsion, dim=N, inputs=[a.x], outputs=[a.f])
            wp.launch(integrate, dim=N, inputs=[a.x, a.v, a.f, 0.01], outputs=[b.x, b.v])
        wp.launch(loss_kernel, dim=N, inputs=[m.states[-1].x], outputs=[self.loss])

    def step(self, it):
        tape = wp.Tape()
        self.loss.zero_()
        with timer("forward"):
            with tape:
                self.forward()
        if it == NAN_STEP:
            wp.launch(blowup, dim=N, inputs=[self.model.states[-1].x])
        with timer("backward"):
            tape.backward(loss=self.loss)
        with timer("update"):
            wp.launch(sgd, dim=1, inputs=[self.model.k, self.model.k.grad, 1e-6])
        tape.zero()


def timer(name):
    return contextlib.nullcontext() if BARE else wp.ScopedTimer(name, print=False)


trainer = Trainer()
for it in range(6):
    trainer.step(it)
print("loss", trainer.loss.numpy()[0])
