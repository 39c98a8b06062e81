"""The compiled ``wp.launch`` wrapper (``launchtrace.capture._fastlaunch``) against the Python one it stands in for.

For every call shape, each wrapper runs the same launch from the same line; the raw events they queue must be
equal item for item (the sequence number and the host times aside), the launches must have run once each, and a
launch that raises must raise the same way and be recorded as failed by both. Calls the compiled wrapper does not
take itself (a struct or vector argument, a stream, a recorded command, an active Tape) go through the Python
wrapper, so those are checked too. Every other capture test runs through the compiled wrapper when it is built.
"""

from __future__ import annotations

import numpy as np
import pytest

from launchtrace.capture import bus
from launchtrace.capture import warp as capture_warp

# the items of a raw event that differ between two calls of the same launch: sequence number, host start and end
_PER_CALL = (1, 9, 10)


def _comparable(event: tuple) -> tuple:
    return tuple(item for i, item in enumerate(event) if i not in _PER_CALL)


@pytest.fixture
def wrappers(instrumented, monkeypatch):
    """(compiled, python): two wrappers of Warp's own launch, made the way instrument() makes them."""
    import warp._src.context as ctx

    original = ctx.launch.__wrapped__
    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    compiled = capture_warp.wrap_launch(original)
    monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
    python = capture_warp.wrap_launch(original)
    return compiled, python


def test_the_compiled_wrapper_is_built_and_in_place(instrumented, monkeypatch):
    """``pip install`` builds it wherever a C compiler is (CI's machines have gcc): a silent build failure
    would leave every launch on the slower Python wrapper, so this says so."""
    import warp._src.context as ctx

    import launchtrace.capture as capture
    from launchtrace.capture import _fastlaunch

    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    capture.uninstrument()
    capture.instrument()
    assert type(ctx.launch) is _fastlaunch.Launcher
    assert ctx.launch.__wrapped__.__name__ == "launch" and ctx.launch.__name__ == "launch"


def test_pure_python_setting_gives_the_python_wrapper(wrappers):
    compiled, python = wrappers
    assert type(compiled).__name__ == "Launcher" and type(python).__name__ == "function"


def test_both_wrappers_queue_equal_events_for_every_call_shape(warp_cpu, wrappers):
    import warp_programs as p

    wp = warp_cpu
    compiled, python = wrappers
    x = wp.array(np.arange(8, dtype=np.float32), dtype=float, device=p.DEVICE)
    y = wp.zeros(8, dtype=float, device=p.DEVICE)
    pos = wp.zeros(4, dtype=wp.vec3, device=p.DEVICE)
    parts = p.Particles()
    parts.pos = pos
    calls = [
        ((p.scale,), dict(dim=8, inputs=[x, y, 0.5], device=p.DEVICE)),
        ((p.scale, 8, [x], [y, 2]), {}),  # positional, an int scalar
        ((p.scale, 8), dict(inputs=(x, y, True), outputs=[])),
        ((p.scale,), dict(dim=4, inputs=[x[2:6], y[0:4], float("nan")])),
        ((p.scale,), dict(dim=8, inputs=[x, y, 2.0], device=wp.get_device(p.DEVICE))),  # a Device, by id
        ((p.scale,), dict(dim=8, inputs=[x, y, 2.0], stream=None)),  # another keyword: the Python wrapper
        ((p.integrate,), dict(dim=4, inputs=[pos, pos, wp.vec3(1.0, 2.0, 3.0), 0.5])),  # a vector
        ((p.drift,), dict(dim=4, inputs=[parts, 0.1])),  # a struct
        ((p.scale,), dict(dim=8, inputs=[x, y, 1.0], record_cmd=True)),  # a command: nothing ran yet
    ]
    for args, kwargs in calls:
        with bus.subscribe() as sub:
            results = [f(*args, **kwargs) for f in (compiled, python)]  # one line: the same call site
            raw = [e for e in sub.drain_raw() if e[0] == bus.RECORD]  # not Warp's "Module load" timer
        assert (results[0] is None) == (results[1] is None)
        if results[0] is not None:  # record_cmd: a wp.Launch each, nothing queued until it is launched
            assert raw == []
            continue
        assert len(raw) == 2, (args, kwargs)
        assert _comparable(raw[0]) == _comparable(raw[1]), (args, kwargs)
        assert raw[0][1] < raw[1][1] and raw[0][9] <= raw[0][10] <= raw[1][9]


def test_under_a_tape_and_without_listeners_the_launch_runs_once(warp_cpu, wrappers):
    import warp_programs as p

    wp = warp_cpu
    compiled, _ = wrappers
    x = wp.array(np.ones(8, dtype=np.float32), dtype=float, device=p.DEVICE, requires_grad=True)
    y = wp.zeros(8, dtype=float, device=p.DEVICE, requires_grad=True)
    compiled(p.scale, dim=8, inputs=[x, y, 3.0], device=p.DEVICE)  # nobody listens: just the launch
    assert np.allclose(y.numpy(), 3.0)
    tape = wp.Tape()
    with bus.subscribe() as sub, tape:
        compiled(p.scale, dim=8, inputs=[x, y, 2.0], device=p.DEVICE)  # a Tape: the Python wrapper's path
        raw = [e for e in sub.drain_raw() if e[0] == bus.RECORD]
    assert np.allclose(y.numpy(), 2.0) and len(raw) == 1 and len(tape.launches) == 1


def test_a_launch_that_raises_raises_unchanged_and_is_recorded_as_failed(warp_cpu, wrappers):
    import warp_programs as p

    wp = warp_cpu
    compiled, python = wrappers
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    errors, events = [], []
    for f in (compiled, python):
        calls = (((p.scale, 8, [x, x, "not a float"]), {}), ((p.scale,), {"dim": 8, "inputs": [x, x, "?"]}))
        for args, kwargs in calls:
            with bus.subscribe() as sub:
                with pytest.raises(RuntimeError) as info:
                    f(*args, **kwargs)  # positional only, and with keywords
                errors.append(str(info.value))
                events.extend(e for e in sub.drain_raw() if e[0] == bus.RECORD)
    assert errors[:2] == errors[2:]
    assert len(events) == 4 and all(e[13] is not None for e in events)  # the error slot
    assert [_comparable(e)[4:] for e in events[:2]] == [_comparable(e)[4:] for e in events[2:]]  # but the site


def test_call_sites_keep_their_own_lines(warp_cpu, wrappers):
    """The compiled wrapper remembers the line of the last call site (code object and instruction): launches
    from other lines of the same function, and from the same line again, each get their own line number."""
    import warp_programs as p

    wp = warp_cpu
    compiled, _ = wrappers
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    y = wp.zeros(8, dtype=float, device=p.DEVICE)
    expected = []
    with bus.subscribe() as sub:
        for _ in range(2):
            compiled(p.scale, dim=8, inputs=[x, y, 1.0], device=p.DEVICE)
            expected.append(_line_of_previous_statement())
            compiled(p.scale, dim=8, inputs=[x, y, 1.0], device=p.DEVICE)
            expected.append(_line_of_previous_statement())
        raw = sub.drain_raw()
    assert [e[6] for e in raw if e[0] == bus.RECORD] == expected
    assert expected[0] != expected[1] and expected[0] == expected[2]


def _line_of_previous_statement() -> int:
    """The line just above the caller's current line (where the caller's launch was)."""
    import sys

    return sys._getframe(1).f_lineno - 1
