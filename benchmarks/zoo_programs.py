"""The zoo: small Warp programs of different shapes that ``zoo_verdicts.py`` runs many times (CPU device).

    launchtrace run --out OUT.jsonl benchmarks/zoo_programs.py PROGRAM [STEPS]

Programs (each step is one top-level scope, except ``timers``, whose phases are top-level timers):

- ``timers``: zero-code ``wp.ScopedTimer`` phases (``integrate``, ``collide``), no launchtrace import at all;
- ``tape``: ``wp.Tape`` forward and backward of tiny kernels (64 elements) in a ``wp.ScopedTimer("step")``;
- ``bimodal``: a kernel whose cost depends on random input (each element loops a random number of times),
  every tenth step heavier (five more ``smooth`` launches);
- ``temps``: temporaries allocated, used and freed every step (the allocator hands freed addresses back);
- ``many``: 22 distinct kernels per step;
- ``scope``: ``launchtrace.scope("step")`` with nested ``launchtrace.scope`` phases;
- ``solver``: host data uploaded outside the timer every step (``wp.array(numpy_array)``: a NumPy temporary the
  allocator may hand out again), three relaxation sweeps in ``wp.ScopedTimer("solve")``;
- ``loose``: no scope and no timer at all (every launch is unscoped work under the exporter's step roots), about
  20 ms of host work a step, so the roots' one-second window closes wherever the clock says;
- ``workers``: two threads, each its own ``wp.ScopedTimer`` steps and its own arrays allocated in the thread;
- ``pool_beside``, ``pool_light``, ``pool_inside``, ``prodcons``: other threads launching while a timed step
  runs: a ``ThreadPoolExecutor`` whose four tasks per step (Python work, then ``spray_k``: under no scope, on
  pool threads) run beside the main thread's ``wp.ScopedTimer("iteration")`` of four ``fill_k`` launches, each
  after Python work; the same with two light tasks and one launch in the timer; two tasks submitted and awaited
  inside the timer; a producer thread (no scope) launching ``produce_k`` into buffers a queue hands to the main
  thread, which consumes each in a ``wp.ScopedTimer("consume")``;
- ``loose_inner``, ``loose_branch``, ``loose_setup``, ``loose_pingpong``, ``loose_many``: more shapes with no
  scope and no timer (each loop iteration is timed as a step, see ``analysis/unscoped.py``), each with a few
  milliseconds of host work per iteration: an inner relaxation loop whose sweep count (1-4 pairs) varies per
  outer step (from a fixed seed: the topology does not depend on ``ZOO_SEED``), then one ``settle`` launch; a
  launch pair only every third iteration, host work in every one; 20 fills and uploads before the loop and an
  ``x.numpy()`` read-back in every iteration; two buffers swapped after every launch of ``leap`` (``s0 -> s1``,
  then ``s1 -> s0``, at one call site); a helper that launches ``mix`` on three arrays, then ``stir`` once.

Environment: ``ZOO_SLOW`` (default 1) multiplies the loop count of one kernel per program (its cost changes;
its arguments, dims and the launch topology do not): ``collide``, ``tape_loss``, ``cost``, ``blur``, ``k07``,
``shade``, ``relax``, ``drift``, ``churn``, ``settle``, ``bend``, ``soak``, ``leap``, ``stir``, ``fill_k``,
``gather_k``, ``consume_k`` (:data:`TARGET`).
In ``tape`` this slows ``tape_loss``'s adjoint launches too (``Tape.backward`` launches it with ``adjoint=True``:
the generated backward replays the same loop), by the same factor (the kept runs: forward 1.33x / 1.66x, adjoint
1.32x / 1.66x), and nothing else (every other kernel within 0.99-1.04x): ``zoo_verdicts.py`` counts the adjoint
row as the slowed kernel's. ``ZOO_SEED`` changes only the seed of the
random inputs.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import warp as wp

wp.config.quiet = True

SLOW = float(os.environ.get("ZOO_SLOW", "1"))
SEED = int(os.environ.get("ZOO_SEED", "0"))
N = 1024
TARGET = {
    "timers": "collide",
    "tape": "tape_loss",
    "bimodal": "cost",
    "temps": "blur",
    "many": "k07",
    "scope": "shade",
    "solver": "relax",
    "loose": "drift",
    "workers": "churn",
    "loose_inner": "settle",
    "loose_branch": "bend",
    "loose_setup": "soak",
    "loose_pingpong": "leap",
    "loose_many": "stir",
    "pool_beside": "fill_k",
    "pool_light": "fill_k",
    "pool_inside": "gather_k",
    "prodcons": "consume_k",
}


def loops(base: int, target: bool) -> int:
    return max(1, round(base * SLOW)) if target else base


BASE = wp.constant(40)
TARGET_LOOPS = wp.constant(loops(40, True))
MANY_LOOPS = wp.constant(20)
MANY_TARGET_LOOPS = wp.constant(loops(20, True))


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()
    a = x[i]
    for _k in range(BASE):
        a = wp.sin(a) * 0.5 + 0.2
    v[i] = v[i] * 0.9 + a * 0.1
    x[i] = x[i] + v[i] * 0.01


@wp.kernel
def collide(x: wp.array(dtype=float), f: wp.array(dtype=float)):
    i = wp.tid()
    a = x[i]
    for _k in range(TARGET_LOOPS):
        a = wp.cos(a) * 0.5 + 0.1
    f[i] = a


@wp.kernel
def apply(f: wp.array(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()
    v[i] = v[i] - f[i] * 0.001


@wp.kernel
def tape_scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0 + 1.0


@wp.kernel
def tape_square(y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = y[i] * y[i]


@wp.kernel
def tape_loss(z: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    a = z[i]
    for _k in range(TARGET_LOOPS):
        a = wp.sin(a) * 0.5 + 0.25
    wp.atomic_add(loss, 0, a)


@wp.kernel
def cost(r: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    a = r[i]
    n = int(r[i] * float(TARGET_LOOPS) * 2.0)
    for _k in range(n):
        a = wp.sin(a) * 0.5 + 0.3
    out[i] = a


@wp.kernel
def smooth(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(BASE):
        s = wp.cos(s) * 0.5 + 0.2
    b[i] = s


@wp.kernel
def blur(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.sin(s) * 0.5 + 0.15
    b[i] = s


@wp.kernel
def combine(a: wp.array(dtype=float), b: wp.array(dtype=float), c: wp.array(dtype=float)):
    i = wp.tid()
    c[i] = a[i] * 0.5 + b[i] * 0.5


@wp.kernel
def shade(x: wp.array(dtype=float), c: wp.array(dtype=float)):
    i = wp.tid()
    a = x[i]
    for _k in range(TARGET_LOOPS):
        a = wp.sin(a) * 0.5 + 0.05
    c[i] = a


@wp.kernel
def k00(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.01
    x[t] = v


@wp.kernel
def k01(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.02
    x[t] = v


@wp.kernel
def k02(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.03
    x[t] = v


@wp.kernel
def k03(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.04
    x[t] = v


@wp.kernel
def k04(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.05
    x[t] = v


@wp.kernel
def k05(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.06
    x[t] = v


@wp.kernel
def k06(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.07
    x[t] = v


@wp.kernel
def k07(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_TARGET_LOOPS):
        v = wp.sin(v) * 0.5 + 0.08
    x[t] = v


@wp.kernel
def k08(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.09
    x[t] = v


@wp.kernel
def k09(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.10
    x[t] = v


@wp.kernel
def k10(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.11
    x[t] = v


@wp.kernel
def k11(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.12
    x[t] = v


@wp.kernel
def k12(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.13
    x[t] = v


@wp.kernel
def k13(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.14
    x[t] = v


@wp.kernel
def k14(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.15
    x[t] = v


@wp.kernel
def k15(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.16
    x[t] = v


@wp.kernel
def k16(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.17
    x[t] = v


@wp.kernel
def k17(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.18
    x[t] = v


@wp.kernel
def k18(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.19
    x[t] = v


@wp.kernel
def k19(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.20
    x[t] = v


@wp.kernel
def k20(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.21
    x[t] = v


@wp.kernel
def k21(x: wp.array(dtype=float)):
    t = wp.tid()
    v = x[t]
    for _k in range(MANY_LOOPS):
        v = wp.sin(v) * 0.5 + 0.22
    x[t] = v


@wp.kernel
def relax(x: wp.array(dtype=float), y: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    n = x.shape[0]
    s = (b[i] + x[wp.max(i - 1, 0)] + x[wp.min(i + 1, n - 1)]) / 3.0
    for _k in range(TARGET_LOOPS):
        s = wp.sin(s) * 0.5 + 0.1
    y[i] = s


@wp.kernel
def drift(x: wp.array(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()
    a = x[i]
    for _k in range(TARGET_LOOPS):
        a = wp.sin(a) * 0.5 + 0.05
    v[i] = a


@wp.kernel
def churn(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.cos(s) * 0.5 + 0.35
    b[i] = s


@wp.kernel
def settle(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.sin(s) * 0.5 + 0.4
    b[i] = s


@wp.kernel
def bend(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.cos(s) * 0.5 + 0.45
    b[i] = s


@wp.kernel
def soak(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.sin(s) * 0.5 + 0.55
    b[i] = s


@wp.kernel
def leap(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.cos(s) * 0.5 + 0.6
    b[i] = b[i] * 0.5 + s * 0.5


@wp.kernel
def stir(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.sin(s) * 0.5 + 0.65
    b[i] = s


@wp.kernel
def sweep(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    n = x.shape[0]
    s = (x[wp.max(i - 1, 0)] + x[i] + x[wp.min(i + 1, n - 1)]) / 3.0
    for _k in range(BASE):
        s = wp.cos(s) * 0.5 + 0.3
    y[i] = s


@wp.kernel
def mix(x: wp.array(dtype=float)):
    i = wp.tid()
    s = x[i]
    for _k in range(MANY_LOOPS):
        s = wp.sin(s) * 0.5 + 0.7
    x[i] = s


@wp.kernel
def fill_k(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.sin(s) * 0.5 + 0.75
    b[i] = s


@wp.kernel
def spray_k(a: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(BASE):
        s = wp.cos(s) * 0.5 + 0.8
    a[i] = s


@wp.kernel
def gather_k(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.cos(s) * 0.5 + 0.85
    b[i] = s


@wp.kernel
def produce_k(a: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(BASE):
        s = wp.sin(s) * 0.5 + 0.9
    a[i] = s


@wp.kernel
def consume_k(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    s = a[i]
    for _k in range(TARGET_LOOPS):
        s = wp.cos(s) * 0.5 + 0.95
    b[i] = b[i] * 0.5 + s * 0.5


MANY = [globals()[f"k{i:02d}"] for i in range(22)]


def run_timers(steps: int, rng: np.random.Generator) -> None:
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    v = wp.zeros(N, dtype=float, device="cpu")
    f = wp.zeros(N, dtype=float, device="cpu")
    for _ in range(steps):
        with wp.ScopedTimer("integrate", print=False):
            wp.launch(integrate, dim=N, inputs=[x, v], device="cpu")
        with wp.ScopedTimer("collide", print=False):
            wp.launch(collide, dim=N, inputs=[x, f], device="cpu")
            wp.launch(apply, dim=N, inputs=[f, v], device="cpu")


def run_tape(steps: int, rng: np.random.Generator) -> None:
    n = 64
    x = wp.array(rng.random(n).astype(np.float32), dtype=float, device="cpu", requires_grad=True)
    y = wp.zeros(n, dtype=float, device="cpu", requires_grad=True)
    z = wp.zeros(n, dtype=float, device="cpu", requires_grad=True)
    loss = wp.zeros(1, dtype=float, device="cpu", requires_grad=True)
    for _ in range(steps):
        with wp.ScopedTimer("step", print=False):
            tape = wp.Tape()
            with tape:
                wp.launch(tape_scale, dim=n, inputs=[x, y], device="cpu")
                wp.launch(tape_square, dim=n, inputs=[y, z], device="cpu")
                wp.launch(tape_loss, dim=n, inputs=[z, loss], device="cpu")
            tape.backward(loss)
            tape.zero()
            loss.zero_()


def run_bimodal(steps: int, rng: np.random.Generator) -> None:
    r = wp.zeros(N, dtype=float, device="cpu")
    out = wp.zeros(N, dtype=float, device="cpu")
    b = wp.zeros(N, dtype=float, device="cpu")
    for k in range(steps):
        r.assign(rng.random(N).astype(np.float32))
        with wp.ScopedTimer("step", print=False):
            wp.launch(cost, dim=N, inputs=[r, out], device="cpu")
            for _ in range(6 if k % 10 == 9 else 1):
                wp.launch(smooth, dim=N, inputs=[out, b], device="cpu")


def run_temps(steps: int, rng: np.random.Generator) -> None:
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    for _ in range(steps):
        with wp.ScopedTimer("step", print=False):
            tmp = wp.empty(N, dtype=float, device="cpu")
            wp.launch(blur, dim=N, inputs=[x, tmp], device="cpu")
            del tmp  # freed: the next allocation may get its address
            other = wp.zeros(N, dtype=float, device="cpu")
            wp.launch(smooth, dim=N, inputs=[x, other], device="cpu")
            mixed = wp.empty(N, dtype=float, device="cpu")
            wp.launch(combine, dim=N, inputs=[x, other, mixed], device="cpu")
            wp.copy(x, mixed)
            del other, mixed


def run_many(steps: int, rng: np.random.Generator) -> None:
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    for _ in range(steps):
        with wp.ScopedTimer("step", print=False):
            for k in MANY:
                wp.launch(k, dim=N, inputs=[x], device="cpu")


def run_scope(steps: int, rng: np.random.Generator) -> None:
    import launchtrace

    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    v = wp.zeros(N, dtype=float, device="cpu")
    c = wp.zeros(N, dtype=float, device="cpu")
    for i in range(steps):
        with launchtrace.scope("step", step=i):
            with launchtrace.scope("physics"):
                wp.launch(integrate, dim=N, inputs=[x, v], device="cpu")
            with launchtrace.scope("render"):
                wp.launch(shade, dim=N, inputs=[x, c], device="cpu")
                wp.launch(apply, dim=N, inputs=[c, v], device="cpu")


def run_solver(steps: int, rng: np.random.Generator) -> None:
    b_host = rng.random(N).astype(np.float32)
    x = wp.zeros(N, dtype=float, device="cpu")
    y = wp.zeros(N, dtype=float, device="cpu")
    for k in range(steps):
        b = wp.array(b_host * np.float32(0.99**k), dtype=float, device="cpu")  # a new host temporary each step
        with wp.ScopedTimer("solve", print=False):
            for _ in range(3):
                wp.launch(relax, dim=N, inputs=[x, y, b], device="cpu")
                x, y = y, x


def run_loose(steps: int, rng: np.random.Generator) -> None:
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    v = wp.zeros(N, dtype=float, device="cpu")
    for _ in range(steps):
        wp.launch(drift, dim=N, inputs=[x, v], device="cpu")
        wp.launch(apply, dim=N, inputs=[v, x], device="cpu")
        time.sleep(0.02)  # the host's part of a step


def run_workers(steps: int, rng: np.random.Generator) -> None:
    data = {name: rng.random(N).astype(np.float32) for name in ("a", "b")}

    def work(name: str, kernel: wp.Kernel) -> None:
        a = wp.array(data[name], dtype=float, device="cpu")  # allocated in the thread: its own unscoped work
        b = wp.zeros(N, dtype=float, device="cpu")
        for _ in range(steps):
            with wp.ScopedTimer(f"{name}.step", print=False):
                wp.launch(kernel, dim=N, inputs=[a, b], device="cpu")
                wp.launch(apply, dim=N, inputs=[b, a], device="cpu")

    threads = [threading.Thread(target=work, args=("a", smooth)), threading.Thread(target=work, args=("b", churn))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_loose_inner(steps: int, rng: np.random.Generator) -> None:
    sweeps = np.random.default_rng(7).integers(1, 5, size=steps)  # fixed: the topology is the same in every run
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    y = wp.zeros(N, dtype=float, device="cpu")
    for k in range(steps):
        for _ in range(int(sweeps[k])):
            wp.launch(sweep, dim=N, inputs=[x, y], device="cpu")
            wp.launch(sweep, dim=N, inputs=[y, x], device="cpu")
        wp.launch(settle, dim=N, inputs=[x, y], device="cpu")
        time.sleep(0.01)


def run_loose_branch(steps: int, rng: np.random.Generator) -> None:
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    v = wp.zeros(N, dtype=float, device="cpu")
    host = rng.random((64, 64))
    for k in range(3 * steps):
        host = np.tanh(host @ host.T * 0.01)  # host work between launches
        time.sleep(0.003)
        if k % 3 == 0:
            wp.launch(bend, dim=N, inputs=[x, v], device="cpu")
            wp.launch(apply, dim=N, inputs=[v, x], device="cpu")


def run_loose_setup(steps: int, rng: np.random.Generator) -> None:
    fields = []
    for i in range(20):  # setup: fills and uploads, once
        f = wp.zeros(N, dtype=float, device="cpu")
        f.fill_(float(i))
        fields.append(wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu"))
        fields.append(f)
    x, v = fields[0], fields[1]
    total = 0.0
    for _ in range(steps):
        wp.launch(soak, dim=N, inputs=[x, v], device="cpu")
        wp.launch(apply, dim=N, inputs=[v, x], device="cpu")
        total += float(x.numpy().sum())  # a read-back every iteration
        time.sleep(0.01)


def run_loose_pingpong(steps: int, rng: np.random.Generator) -> None:
    s0 = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    s1 = wp.zeros(N, dtype=float, device="cpu")
    v = wp.zeros(N, dtype=float, device="cpu")
    for _ in range(steps):
        for _half in range(2):
            wp.launch(leap, dim=N, inputs=[s0, s1], device="cpu")
            s0, s1 = s1, s0
        wp.launch(integrate, dim=N, inputs=[s0, v], device="cpu")
        time.sleep(0.01)


def _mix_all(arrays: list[wp.array]) -> None:
    for a in arrays:
        wp.launch(mix, dim=N, inputs=[a], device="cpu")  # one call site, three arrays


def run_loose_many(steps: int, rng: np.random.Generator) -> None:
    arrays = [wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu") for _ in range(3)]
    out = wp.zeros(N, dtype=float, device="cpu")
    for _ in range(steps):
        _mix_all(arrays)
        wp.launch(stir, dim=N, inputs=[arrays[0], out], device="cpu")
        wp.launch(apply, dim=N, inputs=[out, arrays[1]], device="cpu")
        time.sleep(0.01)


def _host_work(n: int = 4000) -> float:
    """Python work that holds the GIL (a task's own preparation): the threads take turns at the interpreter."""
    return sum(i * 0.5 for i in range(n))


def run_pool_beside(steps: int, rng: np.random.Generator) -> None:
    """Four pool tasks a step, each Python work and a 2 ms launch, beside a timed step of four launches each after
    Python work: a task's request for the GIL lands inside the main thread's ``wp.launch`` or not, as the threads'
    phase settles, and a kernel holds the GIL while it runs (measured: two threads' launches take twice one's)."""
    from concurrent.futures import ThreadPoolExecutor

    side = [wp.array(rng.random(4 * N).astype(np.float32), dtype=float, device="cpu") for _ in range(4)]
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    y = wp.zeros(N, dtype=float, device="cpu")

    def task(a: wp.array) -> None:
        _host_work(20000)
        wp.launch(spray_k, dim=4 * N, inputs=[a], device="cpu")

    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(steps):
            futures = [pool.submit(task, a) for a in side]
            with wp.ScopedTimer("iteration", print=False):
                for _ in range(4):
                    _host_work(20000)
                    wp.launch(fill_k, dim=N, inputs=[x, y], device="cpu")
                wp.launch(apply, dim=N, inputs=[y, x], device="cpu")
            for f in futures:
                f.result()


def run_pool_light(steps: int, rng: np.random.Generator) -> None:
    """``pool_beside`` lighter: two tasks of little Python work, one launch in the timed step."""
    from concurrent.futures import ThreadPoolExecutor

    side = [wp.array(rng.random(4 * N).astype(np.float32), dtype=float, device="cpu") for _ in range(2)]
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    y = wp.zeros(N, dtype=float, device="cpu")

    def task(a: wp.array) -> None:
        _host_work()
        wp.launch(spray_k, dim=4 * N, inputs=[a], device="cpu")

    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(steps):
            futures = [pool.submit(task, a) for a in side]
            with wp.ScopedTimer("iteration", print=False):
                wp.launch(fill_k, dim=N, inputs=[x, y], device="cpu")
                wp.launch(apply, dim=N, inputs=[y, x], device="cpu")
            for f in futures:
                f.result()


def run_pool_inside(steps: int, rng: np.random.Generator) -> None:
    """The timed step hands work to a pool and waits for it (the pool's launches inside the step's time)."""
    from concurrent.futures import ThreadPoolExecutor

    side = [wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu") for _ in range(2)]
    x = wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu")
    y = wp.zeros(N, dtype=float, device="cpu")

    def task(a: wp.array) -> None:
        _host_work()
        wp.launch(spray_k, dim=N, inputs=[a], device="cpu")

    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(steps):
            with wp.ScopedTimer("iteration", print=False):
                futures = [pool.submit(task, a) for a in side]
                wp.launch(gather_k, dim=N, inputs=[x, y], device="cpu")
                for f in futures:
                    f.result()
                wp.launch(apply, dim=N, inputs=[y, x], device="cpu")


def run_prodcons(steps: int, rng: np.random.Generator) -> None:
    """A producer thread (no scope) fills buffers that the main thread consumes in a timed step."""
    import queue

    buffers = [wp.array(rng.random(N).astype(np.float32), dtype=float, device="cpu") for _ in range(3)]
    out = wp.zeros(N, dtype=float, device="cpu")
    ready: queue.Queue = queue.Queue(maxsize=2)

    def produce() -> None:
        for k in range(steps):
            a = buffers[k % len(buffers)]
            _host_work()
            wp.launch(produce_k, dim=N, inputs=[a], device="cpu")
            ready.put(a)
        ready.put(None)

    producer = threading.Thread(target=produce, name="producer")
    producer.start()
    while (a := ready.get()) is not None:
        with wp.ScopedTimer("consume", print=False):
            wp.launch(consume_k, dim=N, inputs=[a, out], device="cpu")
    producer.join()


PROGRAMS = {
    "timers": run_timers,
    "tape": run_tape,
    "bimodal": run_bimodal,
    "temps": run_temps,
    "many": run_many,
    "scope": run_scope,
    "solver": run_solver,
    "loose": run_loose,
    "workers": run_workers,
    "loose_inner": run_loose_inner,
    "loose_branch": run_loose_branch,
    "loose_setup": run_loose_setup,
    "loose_pingpong": run_loose_pingpong,
    "loose_many": run_loose_many,
    "pool_beside": run_pool_beside,
    "pool_light": run_pool_light,
    "pool_inside": run_pool_inside,
    "prodcons": run_prodcons,
}


def main() -> None:
    name, steps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
    wp.init()
    PROGRAMS[name](steps, np.random.default_rng(SEED))
    wp.synchronize()


if __name__ == "__main__":
    main()
