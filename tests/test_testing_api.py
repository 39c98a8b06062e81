"""The seed-compatible testing API over real Warp kernels on the CPU device (and over hand-built TraceData)."""

from __future__ import annotations

import gc
import inspect
import threading
import weakref

import numpy as np
import pytest
import warp as wp
from tests import warp_programs as wpp

import launchtrace
from launchtrace import capture
from launchtrace.model import Site, TraceData
from launchtrace.testing import (
    BufferSet,
    LaunchRecord,
    LaunchTrace,
    assert_pointers_within,
    assert_same_topology,
    buffers_of,
    trace_launches,
)
from launchtrace.topology import ChangeKind

DEVICE = "cpu"
HERE = __file__
N_BIG = 100_000


@wp.kernel
def damp(v: wp.array(dtype=wp.vec3), factor: float):
    i = wp.tid()
    v[i] = v[i] * factor


class Stepper(wpp.Sim):
    """wpp.Sim with the knobs a topology test needs: a scalar, a dim, an extra launch, a per-call buffer."""

    def step(self, dt: float = 0.01, n: int | None = None, drag: bool = False, scratch_per_call: bool = False) -> None:
        n = self.n if n is None else n
        wp.launch(wpp.integrate, dim=n, inputs=[self.pos, self.vel, wp.vec3(0.0, -9.8, 0.0), dt])
        if drag:
            wp.launch(damp, dim=n, inputs=[self.vel, 0.99])
        speed = wp.zeros(self.n, dtype=float, device=DEVICE) if scratch_per_call else self.speed
        wp.launch(wpp.scale, dim=n, inputs=[speed, speed, 0.5])
        wp.launch(wpp.square_sum, dim=n, inputs=[speed, self.energy])


LINE_DRAG = next(
    i
    for i, text in enumerate(inspect.getsourcelines(Stepper.step)[0], Stepper.step.__code__.co_firstlineno)
    if "wp.launch(damp" in text
)


@pytest.fixture
def sim(warp_cpu) -> Stepper:
    s = Stepper(n=1000)
    s.step()  # compile outside the traced blocks
    return s


def test_same_call_twice_has_the_same_topology(sim: Stepper) -> None:
    with trace_launches() as first:
        sim.step()
    with trace_launches() as second:
        sim.step()
    owned = buffers_of(sim, root="sim")
    assert first.kernels() == [
        "tests.warp_programs.integrate",
        "tests.warp_programs.scale",
        "tests.warp_programs.square_sum",
    ]
    assert first.same_topology(second, buffers=owned)
    assert_same_topology(first, second, buffers=owned)
    assert first.fingerprint(owned) == second.fingerprint(owned)
    assert_pointers_within(first, owned)
    assert first.topology(owned)[0][3] == ((0, ("sim.pos", 0)), (1, ("sim.vel", 0)))


def test_changed_scalar_is_named_by_parameter(sim: Stepper) -> None:
    with trace_launches() as a:
        sim.step(dt=0.01)
    with trace_launches() as b:
        sim.step(dt=0.02)
    (entry,) = a.diff_entries(b, buffers=buffers_of(sim, root="sim"))
    assert entry.kind == ChangeKind.CHANGED and entry.index_a == 0
    assert [(f.field, f.name) for f in entry.fields] == [("scalar", "dt")]
    assert entry.fields[0].before == pytest.approx(0.01) and entry.fields[0].after == pytest.approx(0.02)
    (line,) = a.diff(b)
    assert line.startswith("#0 tests.warp_programs.integrate (from ")
    assert "scalar dt 0.01" in line and "-> 0.02" in line
    assert a.same_topology(b, scalars=False)
    with pytest.raises(AssertionError, match="scalar dt"):
        assert_same_topology(a, b)


def test_changed_dim_is_reported_on_every_launch(sim: Stepper) -> None:
    with trace_launches() as a:
        sim.step()
    with trace_launches() as b:
        sim.step(n=500)
    entries = a.diff_entries(b, buffers=buffers_of(sim, root="sim"))
    assert [(e.index_a, [f.field for f in e.fields]) for e in entries] == [(0, ["dim"]), (1, ["dim"]), (2, ["dim"])]
    assert entries[0].fields[0].before == (1000,) and entries[0].fields[0].after == (500,)


def test_inserted_launch_is_one_insertion_with_its_site(sim: Stepper) -> None:
    with trace_launches() as a:
        sim.step()
    with trace_launches() as b:
        sim.step(drag=True)
    lines = a.diff(b, buffers=buffers_of(sim, root="sim"))
    assert lines == [
        "3 launches/copies vs 4",
        f"#1 inserted {damp.module.name}.damp dim=(1000,) (from {HERE}:{LINE_DRAG} (step))",
    ]


def test_buffer_allocated_per_call_is_foreign(sim: Stepper) -> None:
    owned = buffers_of(sim, root="sim")
    with trace_launches() as a:
        sim.step()
    with trace_launches() as b:
        sim.step(scratch_per_call=True)
    foreign = b.foreign_pointers(owned)
    assert [(r.kernel, r.arg_name(k)) for r, k, _ in foreign] == [
        ("tests.warp_programs.scale", "x"),
        ("tests.warp_programs.scale", "y"),
        ("tests.warp_programs.square_sum", "x"),
    ]
    # named after its allocation (the statement that made it), as every view names it; before: "x -> 0x55..."
    offender = r"scale argument x -> Stepper\.step\.speed \(test_testing_api\.py:\d+\) \(from "
    with pytest.raises(AssertionError, match=r"(?s)3 pointer\(s\) outside.*" + offender):
        assert_pointers_within(b, owned)
    entries = a.diff_entries(b, buffers=owned)
    assert [(e.index_a, [(f.field, f.name, f.before, f.after) for f in e.fields]) for e in entries] == [
        (1, [("buffer", "x", ("sim.speed", 0), "<foreign>"), ("buffer", "y", ("sim.speed", 0), "<foreign>")]),
        (2, [("buffer", "x", ("sim.speed", 0), "<foreign>")]),
    ]


def test_ownership_labels_come_from_own_through_capture(sim: Stepper) -> None:
    launchtrace.own(sim, "sim")
    try:
        with trace_launches() as a:
            sim.step()
        with trace_launches() as b:
            sim.step(scratch_per_call=True)
    finally:
        launchtrace.disown("sim")
    assert [(buf.name, buf.owner, buf.offset) for buf in a[0].buffers] == [("pos", "sim.pos", 0), ("vel", "sim.vel", 0)]
    assert a.foreign_pointers() == []  # buffers=None: the owners recorded at capture decide
    scale_rec = b[1]
    assert [(buf.owner, buf.foreign) for buf in scale_rec.buffers] == [(None, True), (None, True)]
    assert len(b.foreign_pointers()) == 3
    # Without a BufferSet the diff uses the recorded owners, so run-to-run pointers never show up.
    assert a.diff(b) and all("<foreign>" not in line for line in a.diff(a))


def test_freed_owned_buffer_then_reused_address(warp_cpu) -> None:
    """A record made while the owned array lived keeps its label; a new unowned array at the reused address
    is foreign. The arrays are carved out of one pool (as Warp's CUDA mempool or a user's arena hands out
    freed blocks again), so the address is reused for sure instead of at the whim of malloc."""
    keeper = wpp.Sim(n=8)
    pool = wp.zeros(2 * N_BIG, dtype=float, device=DEVICE)
    launchtrace.own(keeper, "keeper")
    holder = type("Holder", (), {})()
    holder.buf = wp.array(ptr=pool.ptr, dtype=float, shape=(N_BIG,), device=DEVICE)
    launchtrace.own(holder, "gen")
    try:
        with trace_launches() as before:
            wp.launch(wpp.scale, dim=N_BIG, inputs=[holder.buf, holder.buf, 2.0])
        gone = weakref.ref(holder.buf)
        del holder
        gc.collect()
        assert gone() is None
        reused = wp.array(ptr=pool.ptr, dtype=float, shape=(N_BIG,), device=DEVICE)
        with trace_launches() as after:
            wp.launch(wpp.scale, dim=N_BIG, inputs=[reused, reused, 2.0])
    finally:
        launchtrace.disown("keeper")
        launchtrace.disown("gen")
    assert before[0].buffers[0].owner == "gen.buf"
    assert after[0].arrays[0][1] == before[0].arrays[0][1] == pool.ptr
    assert (after[0].buffers[0].owner, after[0].buffers[0].foreign) == (None, True)


def test_trace_launches_instruments_only_when_needed_and_restores(warp_cpu) -> None:
    assert not capture.is_instrumented()
    with trace_launches() as outer:
        assert capture.is_instrumented()
        with trace_launches() as inner:
            wp.launch(wpp.scale, dim=4, inputs=[wp.zeros(4, dtype=float), wp.zeros(4, dtype=float), 1.0])
        assert capture.is_instrumented()
    assert not capture.is_instrumented()
    assert len(inner) == 1 and len(outer) == 1
    capture.instrument()
    try:
        with trace_launches():
            pass
        assert capture.is_instrumented()  # it was instrumented before: left so
    finally:
        capture.uninstrument()


def test_internal_records_only_with_include_warp(sim: Stepper) -> None:
    with trace_launches() as plain:
        wp.clone(sim.pos)
    with trace_launches(include_warp=True) as everything:
        wp.clone(sim.pos)
    assert all(not r.internal for r in plain)
    assert any(r.internal for r in everything) and len(everything) > len(plain)


def test_only_the_current_thread_and_scopes_are_recorded(sim: Stepper) -> None:
    other = Stepper(n=16)
    other.step()

    def elsewhere() -> None:
        other.step()

    with trace_launches() as trace:
        with launchtrace.scope("step", n=1):
            sim.step()
        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
    assert len(trace) == 3
    (scope,) = trace.scopes.values()
    assert scope.name == "step" and scope.end_ns >= scope.start_ns > 0
    assert all(r.scope_id == scope.id for r in trace)


def test_results_identical_with_and_without_trace(warp_cpu) -> None:
    a, b = wpp.Sim(n=100, seed=3), wpp.Sim(n=100, seed=3)
    for _ in range(3):
        a.step()
    with trace_launches():
        for _ in range(3):
            b.step()
    np.testing.assert_array_equal(a.result(), b.result())


# -- traces rebuilt from data (no capture) ------------------------------------------------------------------


def built(kernels: list[str], ptr: int = 0x1000) -> LaunchTrace:
    site = Site("sim.py", 10, "step", "sim")
    records = [
        LaunchRecord("launch", k, (8,), None, ((0, ptr),), ((1, 0.5),), site, params=("x", "s")) for k in kernels
    ]
    return LaunchTrace.from_data(TraceData(records))


def test_from_data_compares_like_a_live_trace() -> None:
    a, b = built(["m.a", "m.b"]), built(["m.a", "m.x", "m.b"])
    owned = BufferSet().add_range(0x1000, 64, "buf")
    assert a.kernels() == ["m.a", "m.b"] and len(a) == 2 and a[1].kernel == "m.b"
    assert a.diff(b, buffers=owned) == ["2 launches/copies vs 3", "#1 inserted m.x dim=(8,) (from sim.py:10 (step))"]
    assert a.same_topology(built(["m.a", "m.b"], ptr=0x1010), buffers=BufferSet().add_range(0x1000, 64, "buf")) is False
    assert a.foreign_pointers(owned) == [] and len(a.foreign_pointers(BufferSet())) == 2
    assert a.foreign_pointers(BufferSet(), ignore=BufferSet().add_range(0x1000, 8, "tmp")) == []
    assert a.topology(BufferSet(), ignore=BufferSet().add_range(0x1000, 8, "t"))[0][3] == ((0, "<allocated>"),)


def test_diff_limit_and_summary() -> None:
    a = built(["m.a"] * 10)
    b = built(["m.b"] * 10)
    lines = a.diff(b, limit=3)
    assert len(lines) == 4 and lines[-1] == "... and 7 more"
    assert lines[0] == "#0 m.a (from sim.py:10 (step)): kernel m.a -> m.b"


def test_assert_pointers_within_names_at_most_eight_offenders() -> None:
    trace = built(["m.k"] * 12)
    with pytest.raises(AssertionError) as info:
        assert_pointers_within(trace, BufferSet())
    text = str(info.value)
    assert text.startswith("12 pointer(s) outside the allowed buffers:")
    assert text.count("m.k argument x -> 0x1000 (from sim.py:10 (step))") == 8 and "... and 4 more" in text


def test_block_that_raises_keeps_its_records_and_restores_instrumentation(sim: Stepper) -> None:
    trace = trace_launches()
    with pytest.raises(RuntimeError, match="boom"), trace:
        sim.step()
        raise RuntimeError("boom")
    assert len(trace) == 3 and not capture.is_instrumented()
    with pytest.raises(RuntimeError, match="already recording"), trace:
        trace.__enter__()
    assert not capture.is_instrumented()


def test_trace_rebuilt_from_spans_has_the_live_fingerprint(sim: Stepper) -> None:
    """Live trace -> the exporter's SpanBuilder (folding the 6 repeated steps into a summary span) -> rebuild
    -> LaunchTrace.from_data: the same topology and fingerprint as the live trace."""
    from launchtrace.capture import bus
    from launchtrace.export.config import ExportConfig
    from launchtrace.export.spanbuilder import SpanBuilder
    from launchtrace.sources.rebuild import rebuild

    launchtrace.own(sim, "sim")
    try:
        with trace_launches() as live:
            sub = bus.subscribe(thread=threading.get_ident())
            with launchtrace.scope("rollout"):
                for _ in range(6):
                    sim.step()
            sim.step(drag=True)
            sub.close()
    finally:
        launchtrace.disown("sim")
    builder = SpanBuilder(ExportConfig.resolve(env={}, fold="always"), resource=(("service.name", "t"),))
    spans = builder.feed(sub.drain()) + builder.flush()
    assert len(spans) < len(live)  # folding did happen
    records = sorted(rebuild(spans).records(), key=lambda r: r.seq)
    stored = LaunchTrace.from_data(TraceData(records))
    assert len(live) == 22 and stored.kernels() == live.kernels()
    assert stored.fingerprint() == live.fingerprint()
    assert stored.same_topology(live) and stored.diff(live) == []
    assert stored[0].buffers[0].owner == "sim.pos"
