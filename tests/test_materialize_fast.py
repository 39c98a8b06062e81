"""The materializer's fast launch path builds exactly the records the general path builds.

Real Warp kernels on the CPU device, captured through the real bus; the same raw events are materialised twice,
once as shipped and once with the fast path switched off (``Materializer._launch`` returning ``None`` sends every
launch through the general builder), and the records must be equal field for field.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from launchtrace.capture import bus
from launchtrace.capture.materialize import (
    LAUNCH_FIELDS,
    Materializer,
    make_buffer_arg,
    make_launch_record,
)
from launchtrace.model import BufferArg, LaunchRecord, Site


def _raw_events(wp, tests_programs, owned: bool) -> list[tuple]:
    import launchtrace

    p = tests_programs
    x = wp.array(np.arange(8, dtype=np.float32), dtype=float, device=p.DEVICE)
    y = wp.zeros(8, dtype=float, device=p.DEVICE)
    pos = wp.zeros(4, dtype=wp.vec3, device=p.DEVICE)
    vel = wp.zeros(4, dtype=wp.vec3, device=p.DEVICE)
    parts = p.Particles()
    parts.pos = pos
    parts.mass = 2.0
    if owned:
        launchtrace.own({"x": x}, "sim")
    with bus.subscribe() as sub:
        for s in (0.5, 0.5, float("nan"), np.float32(2.0), 3):
            wp.launch(p.scale, dim=8, inputs=[x, y, s], device=p.DEVICE)
        wp.launch(p.scale, dim=(8,), inputs=[x], outputs=[y, 1.0])
        wp.launch(p.scale, 4, [x[2:6], y[0:4], 1.5])  # slices: other pointers and shapes
        wp.launch(p.integrate, dim=4, inputs=[pos, vel, wp.vec3(0.0, -9.8, 0.0), 0.01], device=p.DEVICE)
        wp.launch(p.drift, dim=4, inputs=[parts, 0.1], device=p.DEVICE)  # a struct: the general path
        for _ in range(2):  # dims as a list: unhashable, so no launch template (these were once dropped)
            wp.launch(p.scale, dim=[8], inputs=[x, y, 0.5], device=p.DEVICE)
        with pytest.raises(RuntimeError):
            wp.launch(p.scale, dim=8, inputs=[x, y, "not a float"], device=p.DEVICE)
        raw = sub.drain_raw()
    if owned:
        launchtrace.disown("sim")
    return raw


@pytest.fixture
def programs(warp_cpu):
    from tests import warp_programs

    return warp_programs


@pytest.mark.parametrize("owned", [False, True])
def test_fast_path_equals_general_path(instrumented, warp_cpu, programs, monkeypatch, owned):
    raw = _raw_events(warp_cpu, programs, owned)
    assert sum(1 for e in raw if e[0] == bus.RECORD) == 12
    fast = Materializer().run(raw)
    monkeypatch.setattr(Materializer, "_launch", lambda self, e: None)
    monkeypatch.setattr(Materializer, "_launch_flat", lambda self, e: None)
    general = Materializer().run(raw)
    assert len(fast) == len(general) == len(raw)
    for (kind_a, a), (kind_b, b) in zip(fast, general):
        assert kind_a == kind_b
        assert a == b
    records = [r for k, r in fast if k == "record"]
    assert records[2].scalars[0] == (2, "nan")
    assert records[-1].error is not None
    assert [r.dim for r in records[-3:-1]] == [(8,), (8,)]
    if owned:
        assert records[0].buffers[0].owner == "sim['x']"
        assert records[0].buffers[1].foreign is True
    # equal repeated arguments share one frozen BufferArg
    assert records[0].buffers[0] is records[1].buffers[0]


def test_generated_constructors_equal_the_dataclass():
    site = Site("f.py", 3, "main", "m")
    values = dict(
        op="launch",
        kernel="m.k",
        dim=(4,),
        stream=None,
        arrays=((0, 16),),
        scalars=((1, 0.5),),
        site=site,
        params=("x", "s"),
        buffers=(),
        block_dim=256,
        max_blocks=0,
        device="cpu",
        thread=7,
        thread_name="MainThread",
        start_ns=1,
        end_ns=2,
        scope_id=None,
        graph_id=3,
        captured=True,
        adjoint=False,
        api="wp.launch",
        internal=False,
        error="ValueError: x",
        seq=9,
    )
    assert tuple(values) == LAUNCH_FIELDS
    made = make_launch_record(*values.values())
    assert type(made) is LaunchRecord
    assert made == LaunchRecord(**values)
    assert made.repeat == 1 and made.module_hash == ""
    buf = make_buffer_arg(0, "x", 16, (4,), "float32", 16, "sim.x", 0, False, "r", None)
    assert buf == BufferArg(0, "x", 16, (4,), "float32", 16, "sim.x", 0, False, "r")
    made_alloc = make_buffer_arg(0, "x", 16, (4,), "float32", 16, None, 8, False, "r", "State.x (s.py:4)")
    assert made_alloc == BufferArg(0, "x", 16, (4,), "float32", 16, None, 8, False, "r", "State.x (s.py:4)")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.kernel = "other"  # type: ignore[misc]


def test_flat_launch_events_equal_the_nested_payload(instrumented, warp_cpu, programs):
    """``wp.launch``'s flat event (kernel, dtypes, devices by id) materialises to the same record as the
    generic wrapper's nested ``extract_launch`` payload for the same call."""
    import gc

    from launchtrace.capture.hotpath import FLAT, wrap
    from launchtrace.capture.warp import extract_launch, fix_tape_caller

    wp, p = warp_cpu, programs
    generic = wrap(wp.launch.__wrapped__, "launch", extract_launch, post=fix_tape_caller)
    x = wp.array(np.arange(8, dtype=np.float32), dtype=float, device=p.DEVICE)
    y = wp.zeros(8, dtype=float, device=p.DEVICE)
    pos = wp.zeros(4, dtype=wp.vec3, device=p.DEVICE)
    calls = [
        ((p.scale,), dict(dim=8, inputs=[x, y, 0.5], device=p.DEVICE)),
        ((p.scale, 8, [x], [y, float("nan")]), {}),
        ((p.scale, 8), dict(inputs=(x, y, True), outputs=[])),
        ((p.scale,), dict(dim=4, inputs=[x[2:6], y[0:4], 7])),  # a slice is still a plain wp.array
        ((p.integrate,), dict(dim=4, inputs=[pos, pos, wp.vec3(1.0, 2.0, 3.0), 0.5])),  # not flat: a vec3
        ((p.scale,), dict(dim=8, inputs=[x, y, 2.0], device=wp.get_device(p.DEVICE))),  # a Device, by id
        ((p.scale,), dict(dim=8, inputs=[x, y, 2.0], stream=None)),  # not flat: another keyword
    ]
    with bus.subscribe() as sub:
        for args, kwargs in calls:
            wp.launch(*args, **kwargs)
            generic(*args, **kwargs)
        raw = sub.drain_raw()
    flat_taken = [e[4] is FLAT for e in raw[::2]]
    assert flat_taken == [True, True, True, True, False, True, False]
    assert all(e[4] is not FLAT for e in raw[1::2])
    gc.collect()
    gc.collect()  # a tuple is untracked once what it holds is: nested ones take a pass per level
    assert not any(gc.is_tracked(e) for e, taken in zip(raw[::2], flat_taken) if taken)  # what it is for
    records = [r for _, r in Materializer().run(raw)]
    for flat, nested in zip(records[::2], records[1::2]):
        same_call = dict(seq=flat.seq, start_ns=flat.start_ns, end_ns=flat.end_ns, site=flat.site)
        assert flat.site.line + 1 == nested.site.line
        assert flat == dataclasses.replace(nested, **same_call)


def test_owner_answers_cached_across_registry_changes_equal_the_registry(instrumented, warp_cpu, programs, monkeypatch):
    """One drain holding launches before and after own, a death, an address reused by a new array and a
    disown: the materializer's per-pointer owner cache answers as the registry does at each record's seq."""
    import gc

    import launchtrace

    wp, p = warp_cpu, programs
    y = wp.zeros(8, dtype=float, device=p.DEVICE)
    with bus.subscribe() as sub:
        x = wp.zeros(8, dtype=float, device=p.DEVICE)
        for _ in range(2):
            wp.launch(p.scale, dim=8, inputs=[x, y, 1.0])  # nothing owned yet
        launchtrace.own({"x": x}, "a")
        for _ in range(2):
            wp.launch(p.scale, dim=8, inputs=[x, y, 1.0])  # x owned, y foreign
        old_ptr = x.ptr
        del x
        gc.collect()  # its label ends with it
        for _ in range(20):  # the allocator tends to hand the address out again
            x = wp.zeros(8, dtype=float, device=p.DEVICE)
            if x.ptr == old_ptr:
                break
        wp.launch(p.scale, dim=8, inputs=[x, y, 1.0])
        launchtrace.own({"x2": x}, "b")
        for _ in range(2):
            wp.launch(p.scale, dim=8, inputs=[x, y, 1.0])
        launchtrace.disown("b")
        wp.launch(p.scale, dim=8, inputs=[x, y, 1.0])
        raw = sub.drain_raw()
    fast = [r for _, r in Materializer().run(raw)]
    monkeypatch.setattr(Materializer, "_launch", lambda self, e: None)
    monkeypatch.setattr(Materializer, "_launch_flat", lambda self, e: None)
    general = [r for _, r in Materializer().run(raw)]
    assert fast == general
    owners = [(r.buffers[0].owner, r.buffers[1].foreign) for r in fast if r.op == "launch"]
    assert owners[:4] == [(None, False), (None, False), ("a['x']", True), ("a['x']", True)]
    assert owners[4][0] is None and owners[5:7] == [("b['x2']", True)] * 2 and owners[7][0] is None


def test_interned_arguments_stay_bounded(instrumented, warp_cpu, programs):
    """New arrays on every launch: the interning tables are cleared at their bound, records stay right."""
    wp, p = warp_cpu, programs
    keep = []
    with bus.subscribe() as sub:
        for i in range(12):
            x = wp.full(8, float(i), dtype=float, device=p.DEVICE)
            keep.append(x)  # distinct live pointers
            wp.launch(p.scale, dim=8, inputs=[x, x, 1.0])
        raw = [e for e in sub.drain_raw() if e[3] == "launch"]
    m = Materializer()
    m.max_interned = 4
    records = [r for _, r in m.run(raw)]
    assert len(m._interned) <= 4 and len(m._owners_cache) <= 4
    assert [r.buffers[0].ptr for r in records] == [x.ptr for x in keep]


def test_launch_templates_are_exact_copies(instrumented, warp_cpu, programs, monkeypatch):
    """A launch equal to an earlier one of the same drain is a copy of that record (the template path); the
    copy is exact where Python's equality is not: ``1``, ``1.0`` and ``True`` differ in a span, and so do
    ``0.0`` and ``-0.0``. Each record is compared by ``repr`` with the general path's (``==`` would not see
    those differences), and the copies name their template."""
    wp, p = warp_cpu, programs
    x = wp.array(np.arange(8, dtype=np.float32), dtype=float, device=p.DEVICE)
    y = wp.zeros(8, dtype=float, device=p.DEVICE)
    values = [2.5, 2.5, 1, 1.0, True, 1, 0.0, -0.0, -0.0, 0.0, 1.0]
    with bus.subscribe() as sub:
        for s in values:
            wp.launch(p.scale, dim=8, inputs=[x, y, s], device=p.DEVICE)
        raw = sub.drain_raw()
    fast = [r for _, r in Materializer().run(raw)]
    monkeypatch.setattr(Materializer, "_launch", lambda self, e: None)
    monkeypatch.setattr(Materializer, "_launch_flat", lambda self, e: None)
    general = [r for _, r in Materializer().run(raw)]
    assert [repr(r) for r in fast] == [repr(r) for r in general]
    assert [repr(r.scalars[0][1]) for r in fast] == [repr(v) for v in values]
    # copied: the second 2.5, the second int 1, the last 1.0 (a float zero is never a template)
    assert [r.template is not None for r in fast] == [False, True, False, False, False, True] + [False] * 4 + [True]
    assert fast[1].template is fast[0] and fast[10].template is fast[3]
    assert [(r.seq, r.start_ns, r.end_ns) for r in fast] == [(r.seq, r.start_ns, r.end_ns) for r in general]


def test_launch_templates_last_one_drain(instrumented, warp_cpu, programs):
    """Templates are dropped at each drain (access modes can become known between drains), so a record is never
    a copy of one from an earlier drain."""
    wp, p = warp_cpu, programs
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    materializer = Materializer()
    drains = []
    with bus.subscribe() as sub:
        for n in (1, 2):
            for _ in range(n):
                wp.launch(p.scale, dim=8, inputs=[x, x, 2.0], device=p.DEVICE)  # one call site
            drains.append([r for _, r in materializer.run(sub.drain_raw())])
    first, second = drains
    assert first[0].template is None and second[0].template is None
    assert second[1].template is second[0]


def _long_run(wp, p) -> tuple[list[tuple], tuple]:
    """Repeated launches (template hits), with the owner registry changing in the middle of the run and a
    launch from another thread name, so that hits, misses and dropped templates all occur in one drain."""
    import threading

    import launchtrace

    x = wp.array(np.arange(8, dtype=np.float32), dtype=float, device=p.DEVICE)
    y = wp.zeros(8, dtype=float, device=p.DEVICE)
    with bus.subscribe() as sub:
        for i in range(20):
            wp.launch(p.scale, dim=8, inputs=[x, y, 0.5], device=p.DEVICE)
            if i == 7:
                launchtrace.own({"x": x}, "sim")  # the registry moves: templates are dropped, owners differ
            if i == 12:
                worker = threading.Thread(target=wp.launch, args=(p.scale,), kwargs=dict(dim=8, inputs=[x, y, 0.5]))
                worker.start()
                worker.join()
        raw = sub.drain_raw()
    # "sim" stays owned and the arrays alive: a later change (a disown, an owned array's death) would make every
    # record older than the registry's last change, and none of them would take a template
    return raw, (x, y)


def test_compiled_template_hits_equal_the_python_path(instrumented, warp_cpu, programs, monkeypatch):
    """``launchtrace.capture._fastmat`` (where built) materialises the same records as ``_launch_flat``'s
    Python template hits, field for field, templates included."""
    from launchtrace import native
    from launchtrace.capture import materialize

    assert (materialize._fastmat is None) == (native.load("launchtrace.capture._fastmat") is None)
    import launchtrace

    raw, _alive = _long_run(warp_cpu, programs)
    try:
        compiled = Materializer().run(raw)
        monkeypatch.setattr(materialize, "_fastmat", None)
        python = Materializer().run(raw)
    finally:
        launchtrace.disown("sim")
    assert len(compiled) == len(python) == len(raw)
    for (kind_a, a), (kind_b, b) in zip(compiled, python):
        assert kind_a == kind_b and a == b
        if kind_a == "record":
            assert (a.template is None) == (b.template is None)
            assert a.template is None or a.template == b.template
    records = [r for k, r in compiled if k == "record"]
    assert [r.buffers[0].owner for r in records[:8]] == [None] * 8
    assert {r.buffers[0].owner for r in records[8:]} == {"sim['x']"}
    assert len({r.thread_name for r in records}) == 2
    # no template for: the 8 records older than the registry's last change (owners may differ), the first one
    # after it, and the other thread's launch; every other record is a hit
    assert sum(r.template is not None for r in records) == len(records) - 8 - 1 - 1


def test_compiled_template_hits_stop_at_what_they_cannot_take():
    """Wrong arguments raise before anything is appended; other events are left to the Python path."""
    from launchtrace.capture import materialize

    hits = materialize._fastmat.template_hits if materialize._fastmat is not None else None
    if hits is None:
        pytest.skip("launchtrace.capture._fastmat is not built here (no C compiler at install)")
    out: list = []
    with pytest.raises(TypeError):
        hits((), 0, out, {}, None, 0, 0, {}, materialize._copy_launch, bus.RECORD, object())
    raw = [("not", "an", "event"), (bus.RECORD,) * 20]
    assert hits(raw, 0, out, {}, None, 0, 0, {}, materialize._copy_launch, bus.RECORD, object()) == 0
    assert hits(raw, 1, out, {}, None, 0, 0, {}, materialize._copy_launch, bus.RECORD, object()) == 1
    assert out == []
