"""Buffer identity that survives address reuse, and names without ``own()`` (issues 22 and 23).

Real Warp kernels on the CPU device; the run-level checks are real ``launchtrace run`` subprocesses of
``tests/identity_programs.py`` (no launchtrace call in the programs), diffed and checked with the real commands.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import launchtrace
from launchtrace import rawevent
from launchtrace.allocations import ALLOCATIONS, AllocationRegistry, identity_of
from launchtrace.analysis.segments import segments, unowned_by_order
from launchtrace.analysis.static import Reason, check_static
from launchtrace.capture import bus
from launchtrace.capture.materialize import Materializer
from launchtrace.export.spanattrs import record_attributes
from launchtrace.sources.loading import load_traces
from launchtrace.sources.rebuild import _record
from launchtrace.testing import trace_launches
from launchtrace.topology import AllocRef, topology_key

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "identity_programs.py"
N = 16


@pytest.fixture
def prog(instrumented):
    sys.path.insert(0, str(HERE))
    try:
        import identity_programs

        yield identity_programs
    finally:
        sys.path.remove(str(HERE))


def _labels(trace) -> list[list[str]]:
    return [[b.label for b in r.buffers] for r in trace.to_data().records if not r.internal]


# -- in process: what an allocation is called ----------------------------------------------------------------


class Holder:
    def __init__(self, wp) -> None:
        self.x = wp.zeros(N, dtype=float, device="cpu", requires_grad=True)
        self.xs = [wp.zeros(N, dtype=float, device="cpu") for _ in range(2)]


def make_buffer(wp):
    return wp.zeros(N, dtype=float, device="cpu")


def test_statement_names_class_attributes_gradients_factories_and_views(prog, warp_cpu) -> None:
    wp = warp_cpu
    with trace_launches() as trace:
        h = Holder(wp)
        made = make_buffer(wp)
        wp.launch(prog.scale, dim=N, inputs=[h.x, 2.0], outputs=[made], device="cpu")
        wp.launch(prog.scale, dim=N, inputs=[h.x.grad, 2.0], outputs=[h.xs[1]], device="cpu")
        wp.launch(prog.scale, dim=N - 2, inputs=[h.x[2:], 2.0], outputs=[h.xs[0]], device="cpu")
    labels = [[identity_of(x) for x in row] for row in _labels(trace)]
    assert labels[0] == ["Holder.x", "test_statement_names_class_attributes_gradients_factories_and_views.made"]
    assert labels[1] == ["Holder.x.grad", "Holder.xs#1"]
    assert labels[2][0] == "Holder.x+8" and labels[2][1] == "Holder.xs"
    line = Holder.__init__.__code__.co_firstlineno + 1
    assert _labels(trace)[0][0].endswith(f"(test_identity.py:{line})")  # the site: the statement's file and line


def test_several_allocations_on_one_line_are_named_by_their_own_targets(prog, warp_cpu) -> None:
    """``a, b = f(), g()`` and ``c = f(); d = g()`` name each array after its own target (they were ``(a, b)``
    and ``(a, b)#1``, ``d`` and ``d#1``); a second live copy of the line's arrays is ``a#1``, ``b#1``."""
    wp = warp_cpu
    with trace_launches() as trace:
        a, b = wp.zeros(N, dtype=float, device="cpu"), wp.zeros(N, dtype=float, device="cpu")
        c = wp.zeros(N, dtype=float, device="cpu"); d = wp.zeros(N, dtype=float, device="cpu")  # fmt: skip  # noqa: E702
        kept = []
        for _ in range(2):
            e, f = wp.zeros(N, dtype=float, device="cpu"), wp.zeros(N, dtype=float, device="cpu")
            kept.append((e, f))
            wp.launch(prog.scale, dim=N, inputs=[e, 2.0], outputs=[f], device="cpu")
        wp.launch(prog.scale, dim=N, inputs=[a, 2.0], outputs=[b], device="cpu")
        wp.launch(prog.scale, dim=N, inputs=[c, 2.0], outputs=[d], device="cpu")
    here = "test_several_allocations_on_one_line_are_named_by_their_own_targets"
    labels = [[identity_of(x) for x in row] for row in _labels(trace)]
    assert labels == [
        [f"{here}.e", f"{here}.f"],
        [f"{here}.e#1", f"{here}.f#1"],
        [f"{here}.a", f"{here}.b"],
        [f"{here}.c", f"{here}.d"],
    ]


def test_line_targets_only_where_each_allocation_is_one_call(tmp_path: Path) -> None:
    from launchtrace.allocsite import line_targets

    source = tmp_path / "shapes.py"
    source.write_text("a, b = f(), g()\nc = f(); d = g()\nx, y = 5, f()\np, q = f(g()), h()\nr = f()\ns, t = pair()\n")
    name = str(source)
    assert [line_targets(name, n) for n in range(1, 7)] == [("a", "b"), ("c", "d"), ("y",), (), (), ()]


def test_an_inline_allocation_is_named_by_its_first_kernel_parameter(prog, warp_cpu) -> None:
    wp = warp_cpu
    x = wp.ones(N, dtype=float, device="cpu")
    with trace_launches() as trace:
        wp.launch(prog.scale, dim=N, inputs=[x, 2.0], outputs=[wp.zeros(N, dtype=float, device="cpu")], device="cpu")
    x_label, out = _labels(trace)[0]
    assert identity_of(out) == "test_an_inline_allocation_is_named_by_its_first_kernel_parameter:scale.y"
    assert identity_of(x_label) == "test_an_inline_allocation_is_named_by_its_first_kernel_parameter.x"


def test_own_labels_win(prog, warp_cpu) -> None:
    wp = warp_cpu
    h = Holder(wp)
    launchtrace.own(h, "h")
    try:
        with trace_launches() as trace:
            wp.launch(prog.scale, dim=N, inputs=[h.x, 2.0], outputs=[h.xs[0]], device="cpu")
        buf = trace.to_data().records[0].buffers[0]
        assert (buf.owner, buf.alloc, buf.label) == ("h.x", None, "h.x")
    finally:
        launchtrace.disown("h")


def _step(wp, prog, x, out, keep: list | None) -> None:
    with launchtrace.scope("step"):
        tmp = wp.empty(N, dtype=float, device="cpu")
        wp.launch(prog.scale, dim=N, inputs=[x, 2.0], outputs=[tmp], device="cpu")
        wp.launch(prog.scale, dim=N, inputs=[tmp, 0.5], outputs=[out], device="cpu")
        if keep is not None:
            keep.append(tmp)


def test_an_address_freed_and_reused_is_a_new_identity_and_a_temporary_stays_one(prog, warp_cpu) -> None:
    """A temporary freed at the end of each step and allocated again: its address may or may not come back
    (here another allocation takes it in between), its identity is the statement's, every step; an array
    allocated by another statement at the freed address is another buffer."""
    wp = warp_cpu
    x = wp.ones(N, dtype=float, device="cpu")
    out = wp.zeros(N, dtype=float, device="cpu")
    held = []
    with trace_launches() as trace:
        for k in range(4):
            _step(wp, prog, x, out, None)
            if k == 1:
                held.append(wp.empty(N, dtype=float, device="cpu"))  # likely takes the freed temporary's address
                wp.launch(prog.scale, dim=N, inputs=[x, 1.0], outputs=[held[-1]], device="cpu")
    data = trace.to_data()
    tmp_ptrs = [r.arrays[1][1] for r in data.records if r.buffers[1].alloc and "_step.tmp" in r.buffers[1].alloc]
    other = next(r for r in data.records if r.buffers[1].alloc and ".held[]" in r.buffers[1].alloc)
    assert len(tmp_ptrs) == 4
    if other.arrays[1][1] in tmp_ptrs:  # the allocator did reuse the address: the names still differ
        assert identity_of(other.buffers[1].alloc) != "_step.tmp"
    keys = {topology_key(r)[3][1][1] for r in data.records if r.kernel.endswith("scale") and r.dim == (N,)}
    assert AllocRef("_step.tmp", 0) in keys
    report = check_static([data], "step")
    assert report.static, report.findings


def test_a_kept_allocation_per_step_is_still_allocated_per_call(prog, warp_cpu) -> None:
    wp = warp_cpu
    x = wp.ones(N, dtype=float, device="cpu")
    out = wp.zeros(N, dtype=float, device="cpu")
    keep: list = []
    with trace_launches() as trace:
        for _ in range(4):
            _step(wp, prog, x, out, keep)
    report = check_static([trace.to_data()], "step")
    assert not report.static
    found = {(f.reason, f.name) for f in report.findings}
    assert (Reason.ALLOCATED, "y") in found and (Reason.ALLOCATED, "x") in found
    example = next(f.example for f in report.findings if f.reason == Reason.ALLOCATED)
    assert example == "_step.tmp -> _step.tmp#1"


def test_alternating_temporaries_are_static(prog, warp_cpu) -> None:
    """``tmp = wp.empty(n)`` in a loop: the new array is allocated before the old one is dropped, so the two
    alternate (slots 0, 1, 0, 1): no allocation per call, the scope is static."""
    wp = warp_cpu
    x = wp.ones(N, dtype=float, device="cpu")
    with trace_launches() as trace:
        for _ in range(4):
            with launchtrace.scope("step"):
                tmp = wp.empty(N, dtype=float, device="cpu")
                wp.launch(prog.scale, dim=N, inputs=[x, 2.0], outputs=[tmp], device="cpu")
    del tmp
    data = trace.to_data()
    assert [identity_of(r.buffers[1].alloc) for r in data.records][:2] == [
        "test_alternating_temporaries_are_static.tmp",
        "test_alternating_temporaries_are_static.tmp#1",
    ]
    assert check_static([data], "step").static
    steps = segments([data], "step")  # as the diff and the fleet cut and compare them
    assert len({tuple(map(topology_key, unowned_by_order(s.records))) for s in steps}) == 1


def test_identity_survives_export_and_rebuild(prog, warp_cpu) -> None:
    wp = warp_cpu
    with trace_launches() as trace:
        h = Holder(wp)
        wp.launch(prog.scale, dim=N - 4, inputs=[h.x, 2.0], outputs=[h.xs[0][4:]], device="cpu")
    rec = trace.to_data().records[-1]
    back = _record(dict(record_attributes(rec)), rec.start_ns, rec.end_ns, None, None)
    assert back.buffers == rec.buffers
    assert topology_key(back) == topology_key(rec)
    assert back.buffers[1].label.startswith("Holder.xs+16 (")


def test_dead_allocations_are_pruned(prog, warp_cpu) -> None:
    wp = warp_cpu
    before = len(ALLOCATIONS)
    for _ in range(50):
        wp.empty(N, dtype=float, device="cpu")
    gc.collect()
    grace, ALLOCATIONS.grace_s = ALLOCATIONS.grace_s, 0.0
    try:
        ALLOCATIONS.prune()
    finally:
        ALLOCATIONS.grace_s = grace
    assert len(ALLOCATIONS) <= before


# -- launchtrace run: runs of unchanged programs ----------------------------------------------------------------


def _run(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / f"{name}.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(PROGRAMS), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launchtrace", *args], capture_output=True, text=True, timeout=300)


def test_springs_under_run_names_nine_in_ten_array_arguments(tmp_path: Path, warp_cpu) -> None:
    """Issue 23's shape (classes owning arrays, a Tape, ScopedTimers, no launchtrace call): every array argument
    of the user's launches and of their adjoints is named, not a pointer."""
    traces = load_traces(_run(tmp_path, "springs", "springs", "2"))
    args = [b for t in traces for r in t.records if r.adjoint or not r.internal for b in r.buffers if b.ptr]
    named = [b for b in args if not b.label.startswith("0x")]
    assert len(args) > 100 and len(named) >= 0.9 * len(args), (len(named), len(args))
    identities = {identity_of(b.alloc) for b in args}
    assert {"State.x", "State.x#4", "State.x.grad", "State.v.grad", "Trainer.loss", "Model.target"} <= identities


def test_temporaries_runs_diff_equal_and_are_static(tmp_path: Path, warp_cpu) -> None:
    """Temporaries freed and allocated again every step, in a random order of frees (so the allocator's
    address reuse differs run to run): fresh runs diff as topology-equal, and the step is static."""
    runs = [_run(tmp_path, f"t{i}", "temporaries", "5") for i in range(4)]
    reused = 0
    for path in runs:
        data = load_traces(path)
        by_ptr: dict[int, set] = {}
        for t in data:
            for r in t.records:
                for b in r.buffers:
                    if b.alloc:
                        by_ptr.setdefault(b.ptr, set()).add(identity_of(b.alloc))
        reused += sum(len(v) > 1 for v in by_ptr.values())
    assert reused > 0  # some address did serve two allocations: the check below is not vacuous
    for a, b in ((0, 1), (2, 3), (1, 2)):
        proc = _cli("diff", str(runs[a]), str(runs[b]))
        assert proc.returncode == 0 and "topology: equal" in proc.stdout, proc.stdout + proc.stderr
    proc = _cli("check-static", str(runs[0]), "--scope", "step")
    assert proc.returncode == 0 and "static (same topology every time)" in proc.stdout, proc.stdout


def test_a_real_per_step_allocation_is_reported(tmp_path: Path, warp_cpu) -> None:
    path = _run(tmp_path, "keep", "temporaries", "keep", "4")
    proc = _cli("check-static", str(path), "--scope", "step")
    assert proc.returncode == 1, proc.stdout
    assert "buffer allocated per call" in proc.stdout and "temporaries.grown" in proc.stdout, proc.stdout


def test_one_launch_site_on_arrays_of_two_statements_names_each_by_its_statement(prog, warp_cpu) -> None:
    """One call site, one kernel, arrays of two statements allocated and freed in turn (addresses recycled):
    each record names its own statement's array (one drain, as the export worker materialises them)."""
    wp = warp_cpu
    x = wp.ones(N, dtype=float, device="cpu")

    def into(y) -> None:
        wp.launch(prog.scale, dim=N, inputs=[x, 2.0], outputs=[y], device="cpu")

    sub = bus.subscribe(capacity=1000)
    try:
        for _ in range(20):
            first = wp.empty(N, dtype=float, device="cpu")
            into(first)
            del first
            second = wp.empty(N, dtype=float, device="cpu")  # the allocator may hand it the address just freed
            into(second)
            del second
        raw = sub.drain_raw()
    finally:
        sub.close()
    records = [r for kind, r in Materializer().run(list(raw)) if kind == "record"]  # one drain: templates live
    seen = [(r.arrays[1][1], identity_of(r.buffers[1].alloc).rsplit(".", 1)[1]) for r in records]
    assert [name for _, name in seen] == ["first", "second"] * 20
    # Whether the allocator did hand one statement's address to the other varies (glibc's aligned allocations):
    # test_an_address_reused_by_another_statement_is_another_allocation makes it happen for sure.


def test_one_statement_run_from_two_callers_gives_two_names(prog, warp_cpu) -> None:
    """``self.x = ...`` in a class built from two places (a ping-pong pair of states): both arrays are alive at
    once, so they are two buffers, ``Holder.x`` and ``Holder.x#1``, and a launch swapping them is visible."""
    wp = warp_cpu
    with trace_launches() as trace:
        a = Holder(wp)
        b = Holder(wp)
        wp.launch(prog.scale, dim=N, inputs=[a.x, 2.0], outputs=[b.x], device="cpu")
    assert [identity_of(x) for x in _labels(trace)[0]] == ["Holder.x", "Holder.x#1"]


class _Array:
    """Stands for an array in the registry tests: weakly referenceable, dies when dropped."""


def _site_a() -> None: ...


def _site_b() -> None: ...


def test_an_address_reused_by_another_statement_is_another_allocation() -> None:
    """An address freed and handed to an allocation of another statement: records before the free name the
    first, records after the second, a record in between (a use after free) neither; a view inside the second
    is the second at an offset. Deterministic: the registry is fed the addresses directly."""
    reg = AllocationRegistry()
    site_a = reg.site(_site_a.__code__, _site_a.__code__.co_firstlineno, None, 0)
    site_b = reg.site(_site_b.__code__, _site_b.__code__.co_firstlineno, None, 0)
    first = _Array()
    reg.allocated(first, 0x1000, 64, site_a)
    during_first = rawevent.next_seq()
    del first  # its weakref callback notes the death now
    between = rawevent.next_seq()
    second = _Array()
    reg.allocated(second, 0x1000, 128, site_b)
    during_second = rawevent.next_seq()
    hit_a, hit_b = reg.locate(0x1000, during_first), reg.locate(0x1000, during_second)
    assert hit_a is not None and hit_a[0].site is site_a and hit_a[1] == 0
    assert hit_b is not None and hit_b[0].site is site_b and hit_b[0] is not hit_a[0]
    assert reg.locate(0x1000, between) is None
    assert reg.locate(0x1000 + 72, during_second) == (hit_b[0], 72)  # beyond the first's end: the second's
    assert reg.locate(0x1000 + 72, during_first) is None
    assert (hit_a[0].slot, hit_b[0].slot) == (0, 0)  # two statements: each its own slots
    third = _Array()
    reg.allocated(third, 0x2000, 64, site_b)  # the second is alive: the same statement's next slot
    assert reg.locate(0x2000, rawevent.next_seq())[0].slot == 1
    del second, third


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_allocates_although_the_lock_was_held_at_the_fork(instrumented, warp_cpu) -> None:
    """A lock held by another thread of the parent at the fork is never released in the child: the registry's
    locks are made afresh there, so the child's allocations do not wait forever."""
    wp = warp_cpu
    ALLOCATIONS._lock.acquire()  # as another thread of the parent holding it at the fork
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit code 0 only if the allocation was noted
            signal.alarm(30)  # a child stuck on the lock is killed: the test fails instead of hanging
            code = 1
            try:
                keep = wp.zeros(4, dtype=float, device="cpu")
                code = 0 if ALLOCATIONS.locate(keep.ptr, rawevent.next_seq()) is not None else 3
            finally:
                os._exit(code)
    finally:
        ALLOCATIONS._lock.release()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
