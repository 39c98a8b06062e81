"""The tinygrad hook's edges on tinygrad's CPU device: a failing call recorded and re-raised unchanged, keyword
calls, and an exact restore on uninstrument. (The hook is Python only: the compiled hook it once had saved about
1.9 % of a jitted MLP step's instructions, a gain no user would notice; docs/tinygrad.md, "Cost".)"""

# ruff: noqa: E402  (tinygrad reads its environment at import: tp.configure_env() runs before the imports below)

from __future__ import annotations

import pytest

import tinygrad_programs as tp

tp.configure_env("CPU")
tinygrad = pytest.importorskip("tinygrad")

from tinygrad import Tensor, TinyJit
from tinygrad.engine import realize

import launchtrace
from launchtrace.capture import bus, tinygrad_decode
from launchtrace.capture import tinygrad as tg_capture


@pytest.fixture
def clean():
    """Uninstrumented for the test; instrumented again afterwards if it was before."""
    was = tg_capture.is_patched()
    launchtrace.uninstrument()
    yield
    launchtrace.uninstrument()
    if was:
        launchtrace.instrument()


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


def _run_fields(run) -> tuple:
    return (run.api, run.code, run.lasti, run.module, run.var_vals, run.st, tuple(map(id, run.inputs)))


def test_a_failing_call_is_recorded_and_re_raised_unchanged(clean):
    call, ctx = _a_kernel_call()
    error = ValueError("no memory for you")

    def failing(c, x=None):
        raise error

    launchtrace.instrument()  # the capture state (scopes) as a program has it
    hook = tg_capture._make_hook(failing, realize)
    sub = bus.subscribe()
    try:
        with pytest.raises(ValueError) as caught:
            hook(call, ctx)
    finally:
        sub.close()
    assert caught.value is error
    (event,) = sub.drain_raw()
    assert event[9] == "ValueError: no memory for you"
    assert event[4] is call


def test_keyword_calls_are_recorded_like_positional_ones(clean):
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
    runs = [e[5] for e in events]  # one context's runs: the same call site and inputs
    fields = [_run_fields(r) for r in runs]
    assert fields[0][:2] + fields[0][3:] == fields[1][:2] + fields[1][3:]
    assert len({tinygrad_decode.line_at(r.code, r.lasti) for r in runs}) == 1


def test_uninstrument_restores_exactly(clean):
    before = dict(realize.pm_exec.__dict__)
    launchtrace.instrument()
    hook = realize.pm_exec.__dict__["rewrite"]
    assert hook.__wrapped__ == type(realize.pm_exec).rewrite.__get__(realize.pm_exec)
    launchtrace.uninstrument()
    assert realize.pm_exec.__dict__ == before and "rewrite" not in realize.pm_exec.__dict__
