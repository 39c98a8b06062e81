"""Small real Warp programs (CPU device) that the analyzer tests trace, and checks of what capture gives them.

Other analyzer test modules import ``run_program`` and friends from here. Each program runs a few steps, each
inside ``launchtrace.scope("step")``, on buffers owned as ``sim.*``; ``variant`` changes exactly one thing:

- ``"base"``: scale(x, 0.5) -> tmp; add(tmp, v) -> out; copy out -> x
- ``"dim"``: the add runs over half the elements
- ``"insert"``: an extra add(tmp, v) -> tmp2 after the scale
- ``"swap"``: the add reads ``alt`` instead of ``v``
- ``"scalar"``: the scale factor is 0.25
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import launchtrace
from launchtrace.model import TraceData
from launchtrace.testing import trace_launches

N = 64
DEVICE = "cpu"


@wp.kernel
def scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * s


@wp.kernel
def add(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i] + b[i]


@wp.kernel
def busy(x: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    i = wp.tid()
    acc = x[i]
    for _k in range(n):
        acc = wp.sin(acc) + 1.0
    y[i] = acc


class Sim:
    """The program's state: every array an attribute, owned as ``sim.<name>``."""

    def __init__(self, label: str = "sim") -> None:
        def arr(value: float) -> wp.array:
            return wp.array(np.full(N, value, dtype=np.float32), dtype=float, device=DEVICE)

        self.x, self.v, self.alt = arr(1.0), arr(2.0), arr(3.0)
        self.tmp, self.tmp2, self.out = arr(0.0), arr(0.0), arr(0.0)
        launchtrace.own(self, label)


def step(sim: Sim, variant: str = "base") -> None:
    with launchtrace.scope("step"):
        factor = 0.25 if variant == "scalar" else 0.5
        wp.launch(scale, dim=N, inputs=[sim.x, factor], outputs=[sim.tmp], device=DEVICE)
        if variant == "insert":
            wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.tmp2], device=DEVICE)
        other = sim.alt if variant == "swap" else sim.v
        dim = N // 2 if variant == "dim" else N
        wp.launch(add, dim=dim, inputs=[sim.tmp, other], outputs=[sim.out], device=DEVICE)
        wp.copy(sim.x, sim.out)


def run_program(variant: str = "base", steps: int = 3, sim: Sim | None = None) -> TraceData:
    """Trace ``steps`` steps of the program (a fresh :class:`Sim` unless one is given)."""
    sim = sim or Sim()
    with trace_launches() as trace:
        for _ in range(steps):
            step(sim, variant)
    return trace.to_data()


def test_capture_gives_the_analyzer_owners_and_access() -> None:
    trace = run_program(steps=1)
    assert trace.records[0].kernel.endswith(".scale") and trace.records[1].kernel.endswith(".add")
    assert trace.records[2].kernel == "wp.copy" and len(trace.records) == 3
    scale_rec = trace.records[0]
    owners = {b.name: (b.owner, b.access) for b in scale_rec.buffers}
    assert owners == {"x": ("sim.x", "r"), "y": ("sim.tmp", "w")}
    assert [s.name for s in trace.scopes.values() if not s.internal] == ["step"]


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
