"""The compiled tinygrad hook (``capture/_fastlaunch.c``'s ``TinyHook``) against the Python hook it hands every
uncommon call to, on tinygrad's CPU device: the same raw events and records for the same program
(``LAUNCHTRACE_PURE_PYTHON=1`` installs the Python hook alone), a failing call recorded and re-raised unchanged,
the Python hook entered once per ``run_linear`` rather than once per kernel, queued events outside the cycle
collector, and a user's buffer alive only until its event is decoded."""

# ruff: noqa: E402  (tinygrad reads its environment at import: tp.configure_env() runs before the imports below)

from __future__ import annotations

import dataclasses
import gc
import sys
import weakref

import pytest

import tinygrad_programs as tp

tp.configure_env("CPU")
tinygrad = pytest.importorskip("tinygrad")

from tinygrad import Tensor, Variable
from tinygrad.engine import realize

import launchtrace
from launchtrace import native
from launchtrace.capture import bus
from launchtrace.capture import tinygrad as tg_capture
from launchtrace.capture.materialize import materialize

FAST = native.load("launchtrace.capture._fastlaunch")
pytestmark = pytest.mark.skipif(FAST is None, reason="launchtrace.capture._fastlaunch is not built here")


@pytest.fixture
def use_hook(monkeypatch):
    """``use_hook(pure)``: instrument with the Python hook alone (``pure``) or the compiled one; returns it."""
    was = tg_capture.is_patched()

    def install(pure: bool):
        launchtrace.uninstrument()
        if pure:
            monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
        else:
            monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
        launchtrace.instrument()
        hook = realize.pm_exec.__dict__["rewrite"]
        assert isinstance(hook, FAST.TinyHook) != pure
        return hook

    yield install
    launchtrace.uninstrument()
    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    if was:
        launchtrace.instrument()


def _workload():
    """Every kind of call: upload, elementwise, reduction, matmul, copy-out, a symbolic kernel and jit replays of
    an MLP step (warmed up, so both hooks see the same captured calls)."""
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
    return (run.api, run.code, run.lasti, run.module, run.var_vals, run.tid, tuple(map(id, run.inputs)))


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
    seqs = [c[1] for c in compiled]
    assert seqs == sorted(set(seqs))
    seen = []
    for raw in (compiled, python):
        items = materialize(raw)
        scopes = {r.id: (r.name, r.attributes) for kind, r in items if kind == "scope_begin"}
        seen.append([(_comparable(r), scopes.get(r.scope_id)) for kind, r in items if kind == "record"])
    assert len(seen[0]) == len(framework) and seen[0] == seen[1]
    assert sum(scope is not None and scope[0] == "step" for _, scope in seen[0]) >= 3 * 13


def _python_hook_calls(fn) -> dict:
    """How many times each function of the Python hook (``capture/tinygrad.py``) is entered while ``fn`` runs."""
    calls: dict = {}

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename == tg_capture.__file__:
            calls[code.co_name] = calls.get(code.co_name, 0) + 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def test_the_compiled_hook_takes_every_kernel_and_every_run_without_python(use_hook):
    """The point of compiling it: on a jit replay nothing enters the Python hook: a new ``run_linear``'s run is
    made in C (the user's frame walked, the context read, the run made and remembered), and its context's end is
    handled in C too. With the Python hook alone, ``rewrite`` runs for every kernel and ``begin`` for every run."""
    _model, _opt, step = tp.make_training(seed=3)
    x, y = tp.batch()
    for _ in range(3):
        step(x, y)
    entered = {}
    for pure in (True, False):
        use_hook(pure=pure)
        sub = bus.subscribe()
        try:
            step(x, y)
            entered[pure] = _python_hook_calls(lambda: [step(x, y) for _ in range(4)])
        finally:
            sub.close()
        kernels = sum(e[0] == bus.FRAMEWORK for e in sub.drain_raw()) // 5
        assert kernels >= 13
    assert entered[True]["rewrite"] >= 4 * kernels and entered[True]["find"] == entered[True]["begin"] >= 4
    assert set(entered[False]) <= {"_skip_new"}, entered  # _skip_new: a code seen for the first time


def test_a_failing_call_is_recorded_and_re_raised_unchanged_by_both(use_hook):
    """The compiled hook takes the second call (the first finds the run, in Python): both are recorded as failed
    and re-raise the very exception."""
    use_hook(pure=False)
    launchtrace.uninstrument()
    call, ctx = tp.a_kernel_call()
    error = ValueError("no memory for you")

    def failing(c, x=None):
        raise error

    launchtrace.instrument()
    hook = tg_capture._make_hook(failing, realize)
    assert isinstance(hook, FAST.TinyHook)
    sub = bus.subscribe()
    try:
        for _ in range(2):
            with pytest.raises(ValueError) as caught:
                hook(call, ctx)
            assert caught.value is error
    finally:
        sub.close()
    events = sub.drain_raw()
    assert [e[9] for e in events] == ["ValueError: no memory for you"] * 2
    assert events[0][4] is events[1][4] is call and events[0][5] is events[1][5]


def test_keyword_and_context_free_calls_go_through_the_python_hook(use_hook):
    use_hook(pure=False)
    launchtrace.uninstrument()
    call, ctx = tp.a_kernel_call()
    launchtrace.instrument()
    hook = tg_capture._make_hook(lambda c, ctx=None: "done", realize)
    sub = bus.subscribe()
    try:
        results = [hook(call, ctx=ctx), hook(call, ctx), hook(call, ctx), hook(call)]
    finally:
        sub.close()
    assert results == ["done"] * 4
    events = sub.drain_raw()
    assert len(events) == 3 and len({id(e[5]) for e in events[1:]}) == 1  # the positional calls share a run


def test_a_new_run_made_in_c_equals_pythons_and_unusual_contexts_go_to_python(use_hook):
    """The compiled hook makes a context's run itself: the same fields as the Python hook's (a copy of the
    variable values, not the context's dict), and it leaves to ``begin`` what it does not make: a BEAM context
    (not recorded unless asked), flags that are not bools."""
    use_hook(pure=False)
    launchtrace.uninstrument()
    call, ctx = tp.a_kernel_call()
    launchtrace.instrument()
    contexts = [
        dataclasses.replace(ctx, var_vals={"n": 3}),  # a symbolic kernel's run
        dataclasses.replace(ctx, update_stats=False),  # tinygrad's own work
        dataclasses.replace(ctx, cache=False),  # BEAM's search: not recorded
        dataclasses.replace(ctx, jit=1),  # a flag that is not a bool: begin() decides
    ]
    runs: dict = {}
    for pure in (False, True):
        hook = tg_capture._make_hook(lambda c, ctx=None: None, realize)
        sub = bus.subscribe()
        try:
            entered = _python_hook_calls(lambda: [hook(call, c) for c in contexts])  # noqa: B023
        finally:
            sub.close()
        runs[pure] = [e[5] for e in sub.drain_raw()]
        if not pure:  # the BEAM context and the odd flag went to begin, the others were made in C
            assert entered.get("begin", 0) == 2 and set(entered) <= {"begin", "_skip_new"}, entered
    assert len(runs[False]) == len(runs[True]) == 3
    assert [_run_fields(r) for r in runs[False]] == [_run_fields(r) for r in runs[True]]
    assert [r.api for r in runs[False]] == ["tinygrad.TinyJit", "tinygrad.internal", "tinygrad.TinyJit"]
    assert all(type(r) is tg_capture._Run for r in runs[False])
    assert runs[False][0].var_vals == {"n": 3} and runs[False][0].var_vals is not contexts[0].var_vals


def test_more_subscriptions_than_remembered_each_get_every_event(use_hook):
    """Past the eight subscriptions the compiled hook remembers, it queues through ``bus.offer``."""
    use_hook(pure=False)
    step = tp.make_training(seed=4)[2]
    args = tp.batch()
    for _ in range(3):
        step(*args)
    subs = [bus.subscribe() for _ in range(10)]
    try:
        step(*args)
    finally:
        for sub in subs:
            sub.close()
    drained = [[e[1] for e in sub.drain_raw()] for sub in subs]
    assert len(drained[0]) >= 13 and all(d == drained[0] for d in drained)


def test_queued_events_stay_out_of_the_cycle_collector_until_drained(use_hook):
    use_hook(pure=False)
    _model, _opt, step = tp.make_training(seed=2)
    x, y = tp.batch()
    for _ in range(3):
        step(x, y)
    sub = bus.subscribe()
    try:
        step(x, y)
        queued = [e for e in sub.queue if e[0] == bus.FRAMEWORK]
    finally:
        sub.close()
    assert len(queued) >= 13 and all(type(e) is FAST.Event and not gc.is_tracked(e) for e in queued)
    drained = [e for e in sub.drain_raw() if e[0] == bus.FRAMEWORK]
    assert len(drained) == len(queued) and all(type(e) is tuple and gc.is_tracked(e) for e in drained)


def test_the_compiled_hooks_events_keep_a_buffer_alive_only_until_decoded(use_hook):
    """A realize of three kernels: the first finds the run (Python), the compiled hook takes the other two; the
    queued events keep the result's buffer alive until decoded, and nothing of ours holds it after that."""
    use_hook(pure=False)
    sub = bus.subscribe()
    try:
        t = (((Tensor.ones(32).contiguous() * 7).contiguous() + 1).contiguous() * 2).realize()
    finally:
        sub.close()
    assert sum(e[0] == bus.FRAMEWORK for e in sub.queue) >= 3
    ref = weakref.ref(t.uop.base.realized)
    del t
    gc.collect()
    assert ref() is not None  # the queued event refers to the call, so to the buffer: it can be decoded
    records = [item for kind, item in sub.drain() if kind == "record"]
    assert len(records) >= 3 and records[-1].buffers[0].ptr
    del records
    gc.collect()
    assert ref() is None


def test_uninstrument_restores_exactly_with_the_compiled_hook(use_hook):
    launchtrace.uninstrument()
    before = dict(realize.pm_exec.__dict__)
    hook = use_hook(pure=False)
    assert hook.__wrapped__ == type(realize.pm_exec).rewrite.__get__(realize.pm_exec) and hook.__name__ == "rewrite"
    launchtrace.uninstrument()
    assert realize.pm_exec.__dict__ == before and "rewrite" not in realize.pm_exec.__dict__
