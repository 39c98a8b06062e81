"""Capture with real Warp kernels on the CPU device: every entry point recorded exactly once, fields right.

Warp's own ``wp.config.print_launches`` log line (one per ``wp.launch`` that executes) is the independent
oracle for "exactly once" where it applies.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
import pytest
import warp as wp
import warp.fem as fem
from tests import warp_programs as wpp

import launchtrace
from launchtrace.capture import bus


def records(sub: bus.Subscription) -> list:
    return [item for kind, item in sub.drain() if kind == "record"]


def launches(sub: bus.Subscription) -> list:
    return [r for r in records(sub) if r.op == "launch"]


@pytest.fixture(params=["compiled", "python"])
def sub(request, warp_cpu, monkeypatch):
    """A subscription with Warp instrumented, once through the compiled ``wp.launch`` wrapper and once through
    the Python one (``LAUNCHTRACE_PURE_PYTHON``): the Python wrapper is the reference, and what runs where no C
    compiler was available at install."""
    import launchtrace.capture as capture

    if request.param == "python":
        monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    capture.instrument()
    import warp._src.context as ctx

    assert (type(ctx.launch).__name__ == "Launcher") == (request.param == "compiled")
    s = bus.subscribe()
    yield s
    s.close()
    capture.uninstrument()


@pytest.fixture
def launch_log():
    log = wpp.LaunchLog()
    wp.set_logger(log)
    wp.config.print_launches = True
    yield log
    wp.config.print_launches = False
    wp.set_logger(None)


def test_launch_record_fields(sub):
    x = wp.array(np.arange(8, dtype=np.float32), device="cpu")
    y = wp.zeros(8, dtype=float, device="cpu")
    line = sys._getframe().f_lineno + 1
    wp.launch(wpp.scale, dim=8, inputs=[x, y, 2.5])
    (rec,) = [r for r in records(sub) if r.op == "launch"]
    assert rec.kernel == "tests.warp_programs.scale"
    assert rec.dim == (8,)
    assert rec.stream is None
    assert rec.arrays == ((0, x.ptr), (1, y.ptr))
    assert rec.scalars == ((2, 2.5),)
    assert rec.params == ("x", "y", "s")
    assert [b.name for b in rec.buffers] == ["x", "y"]
    assert rec.buffers[0].shape == (8,) and rec.buffers[0].dtype == "float32" and rec.buffers[0].nbytes == 32
    assert rec.device == "cpu"
    assert rec.site.file == __file__ and rec.site.line == line and rec.site.function == "test_launch_record_fields"
    assert rec.api == "wp.launch" and not rec.internal and rec.ok
    assert rec.thread == threading.get_ident()
    assert 0 < rec.start_ns <= rec.end_ns
    assert rec.nbytes == 64
    np.testing.assert_allclose(y.numpy(), np.arange(8) * 2.5)


def test_struct_fields_flattened_and_nan_normalised(sub):
    p = wpp.Particles()
    p.pos = wp.zeros(4, dtype=wp.vec3, device="cpu")
    p.mass = 2.0
    wp.launch(wpp.drift, dim=4, inputs=[p, float("nan")])
    (rec,) = launches(sub)
    assert rec.arrays == (("0.pos", p.pos.ptr),)
    assert rec.scalars == (("0.mass", 2.0), (1, "nan"))
    assert rec.arg_name("0.pos") == "p.pos"
    assert rec.buffers[0].name == "p.pos"


def test_vector_scalars_become_tuples(sub):
    sim = wpp.Sim(n=4)
    wp.launch(wpp.integrate, dim=4, inputs=[sim.pos, sim.vel, wp.vec3(1.0, 2.0, 3.0), 0.5])
    (rec,) = launches(sub)
    assert rec.scalars == ((2, (1.0, 2.0, 3.0)), (3, 0.5))


def test_each_launch_recorded_once_against_warps_own_log(sub, launch_log):
    sim = wpp.Sim(n=16)
    sub.drain()
    for _ in range(5):
        sim.step()
    recs = records(sub)
    launched = [r.kernel.rsplit(".", 1)[1] for r in recs if r.op == "launch"]
    assert launched == launch_log.kernels
    assert len(launched) == 15
    assert [r.op for r in recs[:5]] == ["copy", "launch", "fill", "launch", "launch"]


def test_copies_fills_and_funnels(sub):
    a = wp.array(np.arange(6, dtype=np.float32), device="cpu")
    b = wp.zeros(6, dtype=float, device="cpu")
    sub.drain()
    wp.copy(b, a, dest_offset=1, src_offset=2, count=3)
    c = wp.clone(a)
    b.assign(a)
    b.fill_(7.0)
    b.zero_()
    idx = wp.array(np.array([0, 2], dtype=np.int32), device="cpu")
    wp.indexedarray(b, [idx]).fill_(3.0)
    recs = records(sub)
    by_api = [(r.op, r.kernel, r.api) for r in recs]
    assert by_api[0] == ("copy", "wp.copy", "wp.copy")
    assert recs[0].scalars == ((2, 1), (3, 2), (4, 3)) and recs[0].dim == (3,)
    assert recs[0].arrays == ((0, b.ptr), (1, a.ptr))
    assert ("copy", "wp.copy", "wp.clone") in by_api
    assert next(r for r in recs if r.api == "wp.clone").arrays == ((0, c.ptr), (1, a.ptr))
    assert ("copy", "wp.array.assign", "wp.array.assign") in by_api
    fills = [r for r in recs if r.op == "fill"]
    assert [(f.kernel, f.scalars[-1][1]) for f in fills[-3:]] == [("wp.fill", 7.0), ("wp.zero", 0), ("wp.fill", 3.0)]
    assert fills[-1].arrays == ((0, b.ptr),)  # an indexed array's data
    # Every record's site is this test, including the copies Warp makes on our behalf.
    assert {r.site.function for r in recs} == {"test_copies_fills_and_funnels"}
    np.testing.assert_allclose(b.numpy(), [3, 0, 3, 0, 0, 0])


def test_launch_tiled_and_recorded_command(sub, launch_log):
    x = wp.array(np.arange(4, dtype=np.float32), device="cpu")
    y = wp.zeros(4, dtype=float, device="cpu")
    wp.launch_tiled(wpp.tiled_copy, dim=[4], inputs=[x, y], block_dim=1)
    cmd = wp.launch(wpp.scale, dim=4, inputs=[x, y, 3.0], record_cmd=True)
    assert launches(sub)[-1].api == "wp.launch_tiled"
    cmd.launch()
    cmd.launch()
    recs = records(sub)
    assert [r.api for r in recs] == ["wp.Launch.launch", "wp.Launch.launch"]
    assert recs[0].kernel == "tests.warp_programs.scale" and recs[0].dim == (4,)
    assert recs[0].scalars == ((2, 3.0),)
    np.testing.assert_allclose(y.numpy(), np.arange(4) * 3.0)


def test_graph_capture_and_replay_on_cpu(sub):
    x = wp.array(np.ones(4, dtype=np.float32), device="cpu")
    y = wp.zeros(4, dtype=float, device="cpu")
    sub.drain()
    with wp.ScopedCapture(device="cpu") as capture:
        wp.launch(wpp.scale, dim=4, inputs=[x, y, 2.0])
        wp.launch(wpp.scale, dim=4, inputs=[y, x, 3.0])
    np.testing.assert_allclose(y.numpy(), 0.0)  # captured work does not run at capture time
    wp.capture_launch(capture.graph)
    wp.capture_launch(capture.graph)
    recs = records(sub)
    captured = [r for r in recs if r.captured]
    replays = [r for r in recs if r.op == "graph_launch"]
    assert len(captured) == 2 and len(replays) == 2
    assert {r.graph_id for r in captured} == {replays[0].graph_id} == {replays[1].graph_id}
    assert replays[0].graph_id is not None
    np.testing.assert_allclose(x.numpy(), 36.0)


def test_tape_backward_and_caller_metadata(sub):
    x = wp.array(np.arange(4, dtype=np.float32), device="cpu", requires_grad=True)
    y = wp.zeros(4, dtype=float, device="cpu", requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(wpp.scale, dim=4, inputs=[x, y, 2.0])
    caller = tape.launches[-1][-1]["caller"]
    assert caller["file"] == __file__ and caller["func"] == "test_tape_backward_and_caller_metadata"
    tape.backward(grads={y: wp.ones(4, dtype=float, device="cpu")})
    np.testing.assert_allclose(x.grad.numpy(), 2.0)
    adjoint = [r for r in records(sub) if r.adjoint]
    assert len(adjoint) == 1
    assert adjoint[0].api == "wp.Tape.backward" and adjoint[0].kernel == "tests.warp_programs.scale"
    assert {b.name for b in adjoint[0].buffers} == {"x", "y", "adj_x", "adj_y"}


def test_scopes_nest_timers_tape_and_user(sub):
    x = wp.zeros(4, dtype=float, device="cpu")
    tape = wp.Tape()
    with launchtrace.scope("step", step=3):
        with wp.ScopedTimer("outer", print=False):
            with wp.ScopedTimer("inner", print=False):
                wp.launch(wpp.scale, dim=4, inputs=[x, x, 1.0])
        with tape:
            tape.record_scope_begin("taped")
            wp.launch(wpp.scale, dim=4, inputs=[x, x, 1.0])
            tape.record_scope_end()
            with wp.ScopedTimer("timer-with-tape", print=False):
                wp.launch(wpp.scale, dim=4, inputs=[x, x, 1.0])
    events = sub.drain()
    begins = {item.id: item for kind, item in events if kind == "scope_begin"}
    ends = {item.id: item for kind, item in events if kind == "scope_end"}
    assert begins.keys() == ends.keys()
    names = {s.name: s for s in ends.values() if not s.internal}
    assert set(names) == {"step", "outer", "inner", "taped", "timer-with-tape"}
    assert names["step"].kind == "user" and names["step"].attributes == (("step", 3),)
    assert names["inner"].parent_id == names["outer"].id and names["outer"].parent_id == names["step"].id
    assert names["taped"].kind == "tape" and names["taped"].parent_id == names["step"].id
    assert names["timer-with-tape"].kind == "timer"
    recs = [item for kind, item in events if kind == "record" and item.op == "launch"]
    assert [r.scope_id for r in recs] == [names["inner"].id, names["taped"].id, names["timer-with-tape"].id]
    assert all(s.end_ns >= s.start_ns > 0 for s in ends.values())


def test_scope_closes_when_block_raises(sub):
    x = wp.zeros(2, dtype=float, device="cpu")
    with pytest.raises(ZeroDivisionError):
        with launchtrace.scope("fails"):
            with wp.ScopedTimer("timer", print=False):
                wp.launch(wpp.scale, dim=2, inputs=[x, x, 1.0])
                raise ZeroDivisionError("boom")
    ends = [item for kind, item in sub.drain() if kind == "scope_end"]
    assert [(s.name, s.error) for s in ends] == [
        ("timer", "ZeroDivisionError: boom"),
        ("fails", "ZeroDivisionError: boom"),
    ]
    from launchtrace.capture.state import current_scope

    assert current_scope() is None


def test_scope_as_decorator_gives_each_call_its_own_scope(sub):
    x = wp.zeros(2, dtype=float, device="cpu")

    @launchtrace.scope("decorated", kind="unit")
    def step():
        wp.launch(wpp.scale, dim=2, inputs=[x, x, 1.0])

    step()
    step()
    events = sub.drain()
    scopes = [item for kind, item in events if kind == "scope_end"]
    recs = [item for kind, item in events if kind == "record" and item.op == "launch"]
    assert [s.name for s in scopes] == ["decorated", "decorated"]
    assert scopes[0].id != scopes[1].id
    assert [r.scope_id for r in recs] == [scopes[0].id, scopes[1].id]


def test_warp_exception_reaches_caller_unchanged_and_record_says_failed(sub):
    x = wp.zeros(4, dtype=float, device="cpu")
    with pytest.raises(Exception) as bare:
        launchtrace.uninstrument()
        try:
            wp.launch(wpp.scale, dim=4, inputs=[x, "not a float", 1.0])
        finally:
            launchtrace.instrument()
    with pytest.raises(type(bare.value)) as patched:
        wp.launch(wpp.scale, dim=4, inputs=[x, "not a float", 1.0])
    assert str(patched.value) == str(bare.value)
    (rec,) = launches(sub)
    assert not rec.ok and rec.error.startswith(type(bare.value).__name__)


def test_numerical_results_identical_with_and_without_instrumentation(warp_cpu):
    def run() -> np.ndarray:
        sim = wpp.Sim(n=32, seed=1)
        for _ in range(10):
            sim.step()
        return sim.result()

    launchtrace.uninstrument()
    bare = run()
    launchtrace.instrument()
    with bus.subscribe() as s:
        observed = run()
        assert sum(1 for r in s.drain_raw() if r[3] == "launch") == 30
    launchtrace.uninstrument()
    np.testing.assert_array_equal(bare, observed)


def test_uninstrument_restores_every_patched_name(warp_cpu):
    import sys

    import warp._src.context as ctx
    import warp._src.tape as tape_mod
    import warp._src.types as wtypes
    import warp._src.utils as wutils
    import warp.fem  # noqa: F401  (holds its own bindings of array_scan & co.)

    def snapshot() -> dict:
        names = {}
        for modname, module in list(sys.modules.items()):
            if modname.startswith("warp") and hasattr(module, "__dict__"):
                for k, v in list(vars(module).items()):
                    if callable(v):
                        names[(modname, k)] = v
        for cls in (ctx.Launch, wtypes.array, wtypes.noncontiguous_array_base, wutils.ScopedTimer, tape_mod.Tape):
            for k, v in vars(cls).items():
                names[(cls.__name__, k)] = v
        core = ctx.runtime.core
        for k in ("wp_bsr_transpose_host", "wp_bsr_matrix_from_triplets_host"):
            names[("core", k)] = getattr(core, k)
        return names

    launchtrace.uninstrument()
    before = snapshot()
    assert launchtrace.instrument() is True
    during = snapshot()
    changed = {k for k in before if before[k] is not during.get(k)}
    assert ("warp", "launch") in changed and ("warp._src.context", "copy") in changed
    assert ("warp._src.fem.utils", "array_scan") in changed  # a name bound early by another module
    assert ("Launch", "launch") in changed and ("core", "wp_bsr_transpose_host") in changed
    assert launchtrace.instrument() is False  # idempotent
    assert launchtrace.uninstrument() is True
    after = snapshot()
    assert all(after[k] is before[k] for k in before)
    assert launchtrace.uninstrument() is False  # a no-op when not instrumented
    # instrument -> uninstrument -> instrument works again
    assert launchtrace.instrument() is True
    assert wp.launch is not before[("warp", "launch")]
    launchtrace.uninstrument()


def test_eight_threads_every_launch_once_in_the_right_scope(sub):
    per_thread = 40
    arrays = [wp.zeros(4, dtype=float, device="cpu") for _ in range(8)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            with launchtrace.scope(f"thread-{i}"):
                for k in range(per_thread):
                    with launchtrace.scope("inner", k=k):
                        wp.launch(wpp.scale, dim=4, inputs=[arrays[i], arrays[i], float(i)])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,), name=f"w{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    events = sub.drain()
    scopes = {item.id: item for kind, item in events if kind == "scope_end"}
    recs = [item for kind, item in events if kind == "record" and item.op == "launch"]
    assert len(recs) == 8 * per_thread
    assert len({r.seq for r in recs}) == len(recs)
    for r in recs:
        inner = scopes[r.scope_id]
        outer = scopes[inner.parent_id]
        i = int(outer.name.split("-")[1])
        assert inner.name == "inner" and inner.thread == r.thread == outer.thread
        assert r.scalars == ((2, float(i)),) and r.arrays[0][1] == arrays[i].ptr
        assert r.thread_name == f"w{i}"


def test_bounded_queue_counts_drops_exactly(instrumented):
    x = wp.zeros(1, dtype=float, device="cpu")
    with bus.subscribe(capacity=10) as small:
        for _ in range(25):
            wp.launch(wpp.scale, dim=1, inputs=[x, x, 1.0])
        assert small.pending() == 10 and small.dropped == 15
        assert len(small.drain()) == 10


def test_primitives_and_sparse_products(sub):
    import warp.sparse as sparse

    values = wp.array(np.arange(8, dtype=np.int32), device="cpu")
    out = wp.zeros(8, dtype=wp.int32, device="cpu")
    wp.utils.array_scan(values, out, inclusive=True)
    total = wp.utils.array_sum(wp.array(np.ones(5, dtype=np.float32), device="cpu"))
    assert out.numpy()[-1] == 28 and math.isclose(float(total), 5.0)
    recs = records(sub)
    prims = [r for r in recs if r.op == "primitive"]
    assert [p.kernel for p in prims] == ["warp.utils.array_scan", "warp.utils.array_sum"]
    assert prims[0].arrays[:2] == ((0, values.ptr), (1, out.ptr))
    assert prims[0].scalars == ((2, True),) and prims[0].params[:3] == ("in_array", "out_array", "inclusive")

    rows = wp.array(np.array([0, 1, 2], dtype=np.int32), device="cpu")
    cols = wp.array(np.array([0, 1, 2], dtype=np.int32), device="cpu")
    vals = wp.array(np.array([1.0, 2.0, 3.0], dtype=np.float32), device="cpu")
    records(sub)
    a = sparse.bsr_from_triplets(3, 3, rows, cols, vals)
    xv = wp.array(np.ones(3, dtype=np.float32), device="cpu")
    y = sparse.bsr_mv(a, xv)
    np.testing.assert_allclose(y.numpy(), [1.0, 2.0, 3.0])
    recs = records(sub)
    assert any(r.kernel == "warp.sparse.wp_bsr_matrix_from_triplets_host" for r in recs)
    sparse_launches = [r for r in recs if r.op == "launch"]
    assert len(sparse_launches) == 2 and all(r.internal for r in sparse_launches)
    assert "bsr_mv_kernel" in sparse_launches[-1].kernel
    assert all(r.site.function == "test_primitives_and_sparse_products" for r in recs)


def test_fem_integration_recorded(sub, launch_log):
    geo = fem.Grid2D(res=wp.vec2i(4))
    space = fem.make_polynomial_space(geo, degree=1)
    domain = fem.Cells(geo)
    test = fem.make_test(space, domain=domain)
    trial = fem.make_trial(space, domain=domain)
    matrix = fem.integrate(_mass_form, fields={"u": trial, "v": test})
    assert matrix.nrow == 25
    recs = records(sub)
    launched = [r.kernel for r in recs if r.op == "launch"]
    assert launched and launch_log.matches(launched), (launched, launch_log.kernels)  # fem: module="unique"
    assert any(r.op == "primitive" for r in recs)
    assert all(r.site.file == __file__ for r in recs)


@fem.integrand
def _mass_form(s: fem.Sample, u: fem.Field, v: fem.Field):
    return u(s) * v(s)


def test_access_comes_from_the_kernel_not_the_inputs_outputs_split(sub):
    """Programs pass written arrays in ``inputs=``; the record must still say which arguments are written."""
    sim = wpp.Sim(n=4)
    sim.step()
    p = wpp.Particles()
    p.pos = wp.zeros(4, dtype=wp.vec3, device="cpu")
    wp.launch(wpp.drift, dim=4, inputs=[p, 0.1])
    access = {r.kernel.rsplit(".", 1)[1]: {b.name: b.access for b in r.buffers} for r in launches(sub)}
    assert access["integrate"] == {"pos": "rw", "vel": "rw"}
    assert access["scale"] == {"x": "r", "y": "w"}
    assert access["square_sum"] == {"x": "r", "out": "rw"}  # an atomic add reads and writes
    assert access["drift"] == {"p.pos": "rw"}


def test_kernel_access_rules():
    from launchtrace.capture.access import kernel_access

    assert kernel_access(wpp.scale) == {"x": "r", "y": "w"}
    assert kernel_access(wpp.tiled_copy) == {"x": "r", "y": "w"}
    assert kernel_access(object()) is None
    # part of an element written: a struct field, a vector component (v[i][1] += s reads it too)
    assert kernel_access(wpp.element_parts) == {"b": "w", "v": "rw", "idx": "r"}
    # an array handed to a @wp.func takes that function's access (followed two calls deep here)
    assert kernel_access(wpp.through_funcs) == {"offsets": "r", "out": "w"}


def test_bsr_mv_offsets_are_read_not_written(sub):
    """``warp.sparse.bsr_mv`` hands ``A_offsets`` to a ``@wp.func`` that only reads it: recorded as read,
    and the product is still right (the kernel really ran)."""
    import numpy as np
    import warp.sparse as sparse

    a = sparse.bsr_from_triplets(
        3,
        3,
        wp.array([0, 1, 2], dtype=int, device="cpu"),
        wp.array([0, 1, 2], dtype=int, device="cpu"),
        wp.array([2.0, 3.0, 4.0], dtype=float, device="cpu"),
    )
    x = wp.array([1.0, 1.0, 1.0], dtype=float, device="cpu")
    y = sparse.bsr_mv(a, x)
    assert np.allclose(y.numpy(), [2.0, 3.0, 4.0])
    (rec,) = [r for r in launches(sub) if "bsr_mv" in r.kernel]
    access = {buf.name: buf.access for buf in rec.buffers}
    assert access["A_offsets"] == "r" and access["A_columns"] == "r" and access["x"] == "r"
    assert "w" in access["y"]


def test_writes_to_parts_of_elements_really_happen_and_are_recorded(sub):
    """The kernel behind the rule above runs, writes what the rule says, and its record says so."""
    import numpy as np

    b = wp.zeros(3, dtype=wpp.Body, device="cpu")
    v = wp.zeros(3, dtype=wp.vec3, device="cpu")
    idx = wp.array([2, 0, 1], dtype=int, device="cpu")
    wp.launch(wpp.element_parts, dim=3, inputs=[b, v, idx, 2.0], device="cpu")
    assert np.allclose(v.numpy(), [[2.0, 2.0, 0.0]] * 3)
    assert [e["mass"] for e in b.numpy()] == [2.0, 2.0, 2.0]
    (rec,) = [r for r in launches(sub) if r.kernel.endswith("element_parts")]
    assert {buf.name: buf.access for buf in rec.buffers} == {"b": "w", "v": "rw", "idx": "r"}


def test_a_full_queue_waits_for_its_consumer_then_gives_up_once(instrumented):
    """Back-pressure: with ``wait_s`` a full queue lets a draining consumer make room instead of dropping; with
    no consumer the launching thread waits once, then drops (counted) without waiting per event."""
    import time

    x = wp.zeros(1, dtype=float, device="cpu")
    with bus.subscribe(capacity=8, wait_s=0.5) as sub:
        stop = threading.Event()
        drained: list = []

        def consume() -> None:
            while not stop.is_set():
                drained.extend(sub.drain_raw())
                time.sleep(0.002)

        consumer = threading.Thread(target=consume)
        consumer.start()
        for _ in range(200):
            wp.launch(wpp.scale, dim=1, inputs=[x, x, 1.0])
        stop.set()
        consumer.join()
        drained.extend(sub.drain_raw())
        assert sub.dropped == 0 and len(drained) == 200 and sub.waits > 0

    with bus.subscribe(capacity=4, wait_s=0.2) as stuck:
        for _ in range(50):
            wp.launch(wpp.scale, dim=1, inputs=[x, x, 1.0])
        assert stuck.waits == 1 and stuck.dropped == 46 and stuck.pending() == 4  # one wait, not one per drop
