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
        ((p.scale,), {"dim": 8, "".join(["inp", "uts"]): [x, y, 0.25]}),  # a keyword name made at run time
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


def test_more_subscriptions_than_remembered_each_get_every_event(warp_cpu, wrappers):
    """The compiled wrapper remembers eight subscriptions' queues; past that it queues through ``bus.offer``,
    and each subscription gets the same events as with one."""
    import warp_programs as p

    wp = warp_cpu
    compiled, _python = wrappers
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    subs = [bus.subscribe() for _ in range(10)]
    try:
        for _ in range(3):
            compiled(p.scale, dim=8, inputs=[x, x, 2.0], device=p.DEVICE)
    finally:
        for sub in subs:
            sub.close()
    drained = [[_comparable(e) for e in sub.drain_raw() if e[0] == bus.RECORD] for sub in subs]
    assert len(drained[0]) == 3 and all(d == drained[0] for d in drained)


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


# -- the queued Event: outside the cycle collector, the flat tuple when drained ----------------------------------
def test_a_queued_launch_is_an_event_outside_the_collector_and_drains_as_the_tuple(warp_cpu, wrappers):
    import gc

    import warp_programs as p
    from launchtrace.capture import _fastlaunch

    wp = warp_cpu
    compiled, _ = wrappers
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    y = wp.zeros(8, dtype=float, device=p.DEVICE)
    with bus.subscribe() as sub:
        compiled(p.scale, dim=8, inputs=[x, y, 1.0], device=p.DEVICE)
        queued = [e for e in sub.queue if e[0] == bus.RECORD]
        assert len(queued) == 1 and type(queued[0]) is _fastlaunch.Event
        event = queued[0]
        assert not gc.is_tracked(event) and not type(event).__flags__ & (1 << 14)  # no Py_TPFLAGS_HAVE_GC
        as_read = [event[i] for i in range(len(event))]  # it reads like the tuple while queued (peeking code)
        with pytest.raises(IndexError):
            event[len(event)]
        raw = [e for e in sub.drain_raw() if e[0] == bus.RECORD]
    assert [type(e) for e in raw] == [tuple] and list(raw[0]) == as_read
    assert not gc.is_tracked(raw[0])  # atomic items only: out of the collector, as the tuple always was
    # (that the drained tuple equals the Python wrapper's, item for item, is the test of every call shape above)


def test_an_event_holding_a_tracked_item_stays_the_tracked_tuple(warp_cpu, wrappers):
    """``dim`` as a list: an Event could hide a reference cycle from the collector, so this one is a tuple."""
    import gc

    import warp_programs as p

    wp = warp_cpu
    compiled, _ = wrappers
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    with bus.subscribe() as sub:
        compiled(p.scale, dim=[8], inputs=[x, x, 1.0], device=p.DEVICE)
        queued = [e for e in sub.queue if e[0] == bus.RECORD]
        assert len(queued) == 1 and type(queued[0]) is tuple and gc.is_tracked(queued[0])
        assert sub.drain(), "and it materialises"


def test_expand_replaces_only_events_in_place(warp_cpu, wrappers):
    import warp_programs as p
    from launchtrace.capture import _fastlaunch

    wp = warp_cpu
    compiled, _ = wrappers
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    with bus.subscribe() as sub:
        compiled(p.scale, dim=8, inputs=[x, x, 1.0], device=p.DEVICE)
        event = next(e for e in sub.queue if e[0] == bus.RECORD)
    items = ["other", event, (1, 2)]
    assert _fastlaunch.expand(items) is None
    assert items[0] == "other" and items[2] == (1, 2) and items[1] == tuple(event[i] for i in range(len(event)))
    with pytest.raises(TypeError):
        _fastlaunch.expand((event,))


def test_queued_launches_set_off_no_more_collections_than_bare_launches(warp_cpu, instrumented, monkeypatch):
    """Each queued tuple used to count as a young object: a collection every 700 launches (and now and then a
    full one of the whole heap) on the launching thread, 7 in 3,000 launches here against 2 for bare launches
    (Warp's own launch allocates and frees). Events count for nothing."""
    import gc

    import warp._src.context as ctx

    import warp_programs as p
    from launchtrace.capture import _fastlaunch

    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)  # this is about the compiled wrapper's events
    instrumented.uninstrument()
    instrumented.instrument()
    assert type(ctx.launch) is _fastlaunch.Launcher
    wp = warp_cpu
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    collections = []

    def count(phase: str, info: dict) -> None:
        if phase == "stop":
            collections.append(info["generation"])

    def launches() -> int:
        wp.launch(p.scale, dim=8, inputs=[x, x, 1.0], device=p.DEVICE)  # warm
        gc.collect()
        collections.clear()
        gc.callbacks.append(count)
        try:
            for _ in range(3000):
                wp.launch(p.scale, dim=8, inputs=[x, x, 1.0], device=p.DEVICE)
        finally:
            gc.callbacks.remove(count)
        return len(collections)

    instrumented.uninstrument()
    bare = launches()
    instrumented.instrument()
    with bus.subscribe(capacity=5000) as sub:
        captured = launches()
        assert len(sub.queue) >= 3000
    assert captured <= bare + 1, (bare, captured)  # the tuples made bare + 5


# -- what the compiled wrapper remembers between launches stays exact -------------------------------------------
def test_array_values_are_remembered_only_while_that_very_array_lives(warp_cpu, wrappers):
    """The wrapper remembers each array's values (ptr, shape, dtype, capacity, device) with a weak reference:
    a new array at a dead one's address, and more arrays than its 64 slots, must still be read as they are."""
    import warp_programs as p

    wp = warp_cpu
    compiled, python = wrappers
    seen: set[int] = set()
    reused = 0
    for i in range(120):
        n = 4 + i % 5
        a = wp.zeros(n, dtype=float, device=p.DEVICE)
        b = wp.zeros(n + i % 3, dtype=float, device=p.DEVICE)
        with bus.subscribe() as sub:
            _ = [f(p.scale, dim=n, inputs=[a, b, 1.0]) for f in (compiled, python)]  # one line: one call site
            raw = [e for e in sub.drain_raw() if e[0] == bus.RECORD]
        assert len(raw) == 2 and _comparable(raw[0]) == _comparable(raw[1]), i
        reused += id(a) in seen
        seen.add(id(a))
        del a, b
    assert reused > 0  # the allocator did hand a dead array's address to a new one
    arrays = [wp.zeros(3, dtype=float, device=p.DEVICE) for _ in range(150)]  # more than the 64 slots
    with bus.subscribe() as sub:
        for _ in range(2):
            for a in arrays:
                _ = [f(p.scale, dim=3, inputs=[a, arrays[0], 2.0]) for f in (compiled, python)]
        raw = [e for e in sub.drain_raw() if e[0] == bus.RECORD]
    assert len(raw) == 600
    assert all(_comparable(raw[i]) == _comparable(raw[i + 1]) for i in range(0, 600, 2))


def test_a_changed_call_site_entry_is_read_again(warp_cpu, wrappers, monkeypatch):
    """The call site's module is remembered with the user-code map's version: a change to the map (as when the
    library folders are configured again) is seen by the next launch."""
    import sys

    import warp_programs as p
    from launchtrace.capture import hotpath

    wp = warp_cpu
    compiled, _ = wrappers
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    code = sys._getframe().f_code
    with bus.subscribe() as sub:
        for step in range(4):
            if step == 2:
                monkeypatch.setitem(hotpath._USER_MODULE, id(code), (code, "renamed.module"))
            compiled(p.scale, dim=8, inputs=[x, x, 1.0], device=p.DEVICE)
        modules = [e[7] for e in sub.drain_raw() if e[0] == bus.RECORD]
    assert modules == [__name__, __name__, "renamed.module", "renamed.module"]
