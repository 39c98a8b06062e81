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

import threading
from pathlib import Path

import numpy as np
import warp as wp

import launchtrace
from launchtrace.capture import bus
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import TraceData
from launchtrace.otlp.json_codec import encode_line
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


def write_trace_file(path: Path, variant: str = "base", steps: int = 3, sim: Sim | None = None) -> Path:
    """Run the program and write its spans as OTLP JSON Lines (the exporter's span builder and encoder,
    without folding), as the file sink would."""
    sim = sim or Sim()
    with trace_launches():  # holds the instrumentation
        sub = bus.subscribe(thread=threading.get_ident())
        for _ in range(steps):
            step(sim, variant)
        sub.close()
        events = sub.drain()
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    spans = builder.feed(events) + builder.flush()
    path.write_text(encode_line(spans) + "\n", encoding="utf-8")
    return path


def test_capture_gives_the_analyzer_owners_and_access() -> None:
    trace = run_program(steps=1)
    assert trace.records[0].kernel.endswith(".scale") and trace.records[1].kernel.endswith(".add")
    assert trace.records[2].kernel == "wp.copy" and len(trace.records) == 3
    scale_rec = trace.records[0]
    owners = {b.name: (b.owner, b.access) for b in scale_rec.buffers}
    assert owners == {"x": ("sim.x", "r"), "y": ("sim.tmp", "w")}
    assert [s.name for s in trace.scopes.values() if not s.internal] == ["step"]


def test_a_written_trace_file_loads_back_with_the_same_topology(tmp_path: Path) -> None:
    from launchtrace.sources.loading import load_traces
    from launchtrace.topology import topology_key

    sim = Sim()
    traces = load_traces(write_trace_file(tmp_path / "t.jsonl", steps=3, sim=sim))
    assert [len(t) for t in traces] == [3, 3, 3]  # one trace per outermost scope occurrence, in run order
    live = run_program("base", 3, sim)
    rebuilt = [topology_key(r) for t in traces for r in t.records]
    assert rebuilt == [topology_key(r) for r in live.records]


def write_substep_file(path: Path, *, fold: bool, steps: int = 2, substeps: int = 6) -> Path:
    """A program whose steps repeat substeps (scale, add, copy) back to back, written through the exporter's
    span builder with folding on or off: the same run, with and without summary spans."""
    sim = Sim()
    with trace_launches():
        sub = bus.subscribe(thread=threading.get_ident())
        for _ in range(steps):
            with launchtrace.scope("step"):
                for _ in range(substeps):
                    wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
                    wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)
                    wp.copy(sim.x, sim.out)
        sub.close()
        events = sub.drain()
    builder = SpanBuilder(ExportConfig.resolve(fold=fold))
    spans = builder.feed(events) + builder.flush()
    path.write_text(encode_line(spans) + "\n", encoding="utf-8")
    return path
