"""The compiled tinygrad hook (``launchtrace.capture._tinyhook``) against the Python hook it stands in for, on
tinygrad's CPU device: the same raw events and the same records for the same program (``LAUNCHTRACE_PURE_PYTHON=1``
installs the Python one), a failing call recorded and re-raised unchanged by both, the compiled hook's queued
events outside the cycle collector until drained, and a user's buffer alive only until its event is decoded."""

# ruff: noqa: E402  (tinygrad reads its environment at import: tp.configure_env() runs before the imports below)

from __future__ import annotations

import dataclasses
import gc
import weakref

import pytest

import tinygrad_programs as tp

tp.configure_env("CPU")
tinygrad = pytest.importorskip("tinygrad")

from tinygrad import Tensor, TinyJit, Variable
from tinygrad.engine import realize

import launchtrace
from launchtrace import native
from launchtrace.capture import _fastlaunch, bus, tinygrad_decode
from launchtrace.capture import tinygrad as tg_capture
from launchtrace.capture.materialize import materialize

COMPILED = native.load("launchtrace.capture._tinyhook")
pytestmark = pytest.mark.skipif(COMPILED is None, reason="launchtrace.capture._tinyhook is not built here")


@pytest.fixture
def use_hook(monkeypatch):
    """``use_hook(pure)``: instrument with the Python hook (``pure``) or the compiled one; returns the hook."""
    was = tg_capture.is_patched()

    def install(pure: bool):
        launchtrace.uninstrument()
        if pure:
            monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
        else:
            monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
        launchtrace.instrument()
        hook = realize.pm_exec.__dict__["rewrite"]
        assert isinstance(hook, COMPILED.Hook) != pure
        return hook

    yield install
    launchtrace.uninstrument()
    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    if was:
        launchtrace.instrument()


def _workload():
    """A program of every kind of call: upload, elementwise, reduction, matmul, copy-out, a symbolic kernel and
    jit replays of an MLP step (warmed up, so both hooks see the same captured calls)."""
    _model, _opt, step = tp.make_training(seed=5)
    x, y = tp.batch()
    ones = Tensor.ones(10).contiguous().realize()
    for _ in range(3):
        step(x, y)

    def run() -> None:
        with launchtrace.scope("program"):
            a = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
            b = (a * 2 + 1).realize()
            b.sum().realize()
            (Tensor.ones(4, 8).contiguous() @ Tensor.ones(8, 3).contiguous()).realize()
            b.numpy()
            for n in (3, 7):
                ones[: Variable("n", 1, 10).bind(n)].contiguous().realize()
            for i in range(3):
                with launchtrace.scope("step", i=i):
                    step(x, y)

    return run


def _capture(run) -> list:
    sub = bus.subscribe()
    try:
        run()
    finally:
        sub.close()
    return sub.drain_raw()


def _comparable(rec):
    """A record without what differs between two runs of one program: times, sequence numbers, scope ids, and
    (outside the jit's arena) the addresses tinygrad's allocator happens to give."""
    jit = rec.api == "tinygrad.TinyJit"
    buffers = rec.buffers if jit else tuple(dataclasses.replace(b, ptr=0) for b in rec.buffers)
    return dataclasses.replace(
        rec, start_ns=0, end_ns=0, seq=0, scope_id=None, template=None, buffers=buffers,
        arrays=rec.arrays if jit else (),
    )  # fmt: skip


def _run_fields(run) -> tuple:
    return (run.api, run.code, run.lasti, run.module, run.var_vals, run.st, tuple(map(id, run.inputs)))


def test_both_hooks_queue_the_same_events_and_records(use_hook):
    run = _workload()
    use_hook(pure=False)
    compiled = _capture(run)
    use_hook(pure=True)
    python = _capture(run)
    assert len(compiled) == len(python) > 60
    framework = [(c, p) for c, p in zip(compiled, python) if c[0] == bus.FRAMEWORK]
    assert len(framework) > 50 and [c[0] for c in compiled] == [p[0] for p in python]
    for c, p in framework:
        assert len(c) == len(p) == 10 and c[3] is p[3] and c[2] == p[2] and c[9] == p[9] is None
        assert c[6] <= c[7] and p[6] <= p[7]
        assert _run_fields(c[5]) == _run_fields(p[5])
    replays = [(c, p) for c, p in framework if c[5].api == "tinygrad.TinyJit"]
    assert len(replays) >= 3 * 13 and all(c[4] is p[4] for c, p in replays)  # the same captured calls
    seen = []
    for raw in (compiled, python):
        items = materialize(raw)
        scopes = {r.id: (r.name, r.attributes) for kind, r in items if kind == "scope_begin"}
        seen.append([(_comparable(r), scopes.get(r.scope_id)) for kind, r in items if kind == "record"])
    assert len(seen[0]) == len(framework) and seen[0] == seen[1]
    assert sum(scope is not None and scope[0] == "step" for _, scope in seen[0]) >= 3 * 13


def _a_kernel_call():
    """A real jit replay's kernel call and its context, as tinygrad passes them to ``pm_exec.rewrite``."""
    seen = []
    original = realize.pm_exec.rewrite

    def grab(call, ctx=None):
        seen.append((call, ctx))
        return original(call, ctx)

    a = Tensor.ones(16).contiguous().realize()

    @TinyJit
    def add(t):
        return (t * 5).realize()

    realize.pm_exec.rewrite = grab
    try:
        for _ in range(3):
            add(a)
    finally:
        del realize.pm_exec.rewrite
    return seen[-1]


def test_a_failing_call_is_recorded_and_re_raised_unchanged_by_both(use_hook):
    use_hook(pure=False)
    launchtrace.uninstrument()
    call, ctx = _a_kernel_call()
    error = ValueError("no memory for you")

    def failing(c, x=None):
        raise error

    events = []
    for pure in (False, True):
        launchtrace.instrument()  # the capture state (scopes) as a program has it
        hook = tg_capture._make_hook(failing, realize) if not pure else tg_capture._make_python_hook(failing, realize)
        assert isinstance(hook, COMPILED.Hook) != pure
        sub = bus.subscribe()
        try:
            with pytest.raises(ValueError) as caught:
                hook(call, ctx)
        finally:
            sub.close()
        assert caught.value is error
        (event,) = sub.drain_raw()
        events.append(event)
        launchtrace.uninstrument()
    assert [e[9] for e in events] == ["ValueError: no memory for you"] * 2
    assert events[0][4] is events[1][4] is call


def test_keyword_calls_go_through_the_python_hook(use_hook):
    use_hook(pure=False)
    launchtrace.uninstrument()
    call, ctx = _a_kernel_call()
    launchtrace.instrument()
    hook = tg_capture._make_hook(lambda c, ctx=None: "done", realize)
    sub = bus.subscribe()
    try:
        assert hook(call, ctx=ctx) == "done" and hook(call, ctx) == "done" and hook(call) == "done"
    finally:
        sub.close()
    events = sub.drain_raw()
    assert len(events) == 2
    runs = [e[5] for e in events]  # one context's runs (each hook keeps its own): the same call site and inputs
    fields = [_run_fields(r) for r in runs]
    assert fields[0][:2] + fields[0][3:] == fields[1][:2] + fields[1][3:]
    assert len({tinygrad_decode.line_at(r.code, r.lasti) for r in runs}) == 1


def test_queued_events_stay_out_of_the_cycle_collector_until_drained(use_hook):
    """The Python hook's queued tuples are objects the collector tracks (one per kernel, alive until drained);
    the compiled hook's events are not: a jitted step adds no more to the collector's count than a few objects
    per step (its run and the weak references to it), and the drained events are tracked tuples again."""
    _model, _opt, step = tp.make_training(seed=2)
    x, y = tp.batch()
    for _ in range(3):
        step(x, y)
    grown = {}
    for side in ("bare", "python", "compiled"):
        launchtrace.uninstrument()
        if side != "bare":
            use_hook(pure=side == "python")
        sub = bus.subscribe()
        step(x, y)  # the hook's first context: its caches
        sub.drain_raw()
        gc.collect()
        gc.disable()
        try:
            before = gc.get_count()[0]
            for _ in range(4):
                step(x, y)
            grown[side] = gc.get_count()[0] - before
            queued = list(sub.queue)
        finally:
            gc.enable()
            sub.close()
        if side == "compiled":
            assert len(queued) >= 4 * 13 and all(type(e) is _fastlaunch.Event for e in queued)
            assert not any(gc.is_tracked(e) for e in queued)
            drained = sub.drain_raw()
            assert all(type(e) is tuple and gc.is_tracked(e) for e in drained)
        elif side == "python":
            assert len(queued) >= 4 * 13 and all(type(e) is tuple and gc.is_tracked(e) for e in queued)
        del queued
        sub.drain_raw()
    kernels = 4 * 13
    assert grown["python"] - grown["bare"] >= kernels, grown
    assert grown["compiled"] - grown["bare"] <= 4 * 4, grown


def test_the_compiled_hooks_events_keep_a_buffer_alive_only_until_decoded(use_hook):
    use_hook(pure=False)
    sub = bus.subscribe()
    try:
        t = (Tensor.ones(32).contiguous() * 7).realize()
    finally:
        sub.close()
    ref = weakref.ref(t.uop.base.realized)
    del t
    gc.collect()
    assert ref() is not None  # the queued event refers to the call, so to the buffer: it can be decoded
    assert type(sub.queue[-1]) is _fastlaunch.Event
    records = [item for kind, item in sub.drain() if kind == "record"]
    assert records and records[-1].buffers[0].ptr
    del records
    gc.collect()
    assert ref() is None  # decoded: nothing of ours holds it, the compiled hook's weak references included


def test_uninstrument_restores_exactly_with_the_compiled_hook(use_hook):
    launchtrace.uninstrument()
    before = dict(realize.pm_exec.__dict__)
    hook = use_hook(pure=False)
    assert hook.__wrapped__ == type(realize.pm_exec).rewrite.__get__(realize.pm_exec) and hook.__name__ == "rewrite"
    launchtrace.uninstrument()
    assert realize.pm_exec.__dict__ == before and "rewrite" not in realize.pm_exec.__dict__
