"""The raw capture event's one layout (``launchtrace.rawevent``, ``capture/_rawevent.h``) against what is queued.

The Python names and the compiled parts' table must agree (checked at load, and here), and the events the
wrappers really queue for real Warp launches on the CPU must hold at each named position what the name says.
"""

from __future__ import annotations

import sys
import types

import pytest

from launchtrace import rawevent as ev
from launchtrace.capture import bus
from launchtrace.capture.hotpath import ARR, FLAT, HANDLES


def test_every_record_field_has_its_constant_at_its_position():
    for i, name in enumerate(ev.RECORD_FIELDS):
        constant = name.upper() if name in ("kind", "seq", "tid") else f"R_{name.upper()}"
        assert getattr(ev, constant) == i, name
    assert ev.RECORD_FIELDS.index("kernel") == ev.N_RECORD and len(ev.RECORD_FIELDS) == ev.R_VALUES


@pytest.mark.parametrize("name", ["launchtrace.capture._fastlaunch", "launchtrace.capture._fastmat"])
def test_the_compiled_parts_publish_the_same_layout(name):
    module = pytest.importorskip(name)
    assert module.RECORD_FIELDS == ev.RECORD_FIELDS
    assert ev.check_compiled(module) is module


def test_a_compiled_part_built_for_another_layout_is_refused_by_name():
    other = types.ModuleType("launchtrace.capture._stale")
    swapped = list(ev.RECORD_FIELDS)
    swapped[9], swapped[10] = swapped[10], swapped[9]
    other.RECORD_FIELDS = tuple(swapped)  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match=r"_stale .*field 9: 't1' there, 't0' in launchtrace.rawevent"):
        ev.check_compiled(other)
    with pytest.raises(RuntimeError, match="field 0"):
        ev.check_compiled(types.ModuleType("launchtrace.capture._old"))  # built before the table existed


@pytest.mark.parametrize("pure", [False, True])
def test_queued_launch_and_copy_events_hold_what_their_names_say(warp_cpu, instrumented, monkeypatch, pure):
    import warp_programs as p

    wp = warp_cpu
    if pure:  # the Python wrapper, as instrument() makes it under LAUNCHTRACE_PURE_PYTHON
        monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
        instrumented.uninstrument()
        instrumented.instrument()
    x = wp.zeros(8, dtype=float, device="cpu")
    y = wp.zeros(8, dtype=float, device="cpu")
    here = sys._getframe().f_code
    with bus.subscribe() as sub:
        wp.launch(p.scale, dim=8, inputs=[x, y, 2.5], device="cpu")
        launch_line = sys._getframe().f_lineno - 1
        wp.copy(y, x)
        copy_line = sys._getframe().f_lineno - 1
    launch, copy = [e for e in sub.drain_raw() if e[ev.KIND] == ev.RECORD]
    assert launch[ev.SEQ] < copy[ev.SEQ] and launch[ev.TID] == copy[ev.TID]
    assert (launch[ev.R_ENTRY], launch[ev.R_PAYLOAD]) == ("launch", FLAT)
    assert (launch[ev.R_CODE], launch[ev.R_LINE], launch[ev.R_MODULE]) == (here, launch_line, __name__)
    assert 0 < launch[ev.R_T0] <= launch[ev.R_T1] and launch[ev.R_ERROR] is None
    assert (launch[ev.R_SCOPE], launch[ev.R_GRAPH]) == (None, None)
    assert HANDLES[launch[ev.R_KERNEL]] is p.scale and launch[ev.R_DIM] == 8 and launch[ev.R_N_INPUTS] == 3
    assert launch[ev.R_DEVICE] == "cpu"
    values = launch[ev.R_VALUES :]
    assert values[0] is ARR and values[6] is ARR  # each array: the mark, then 5 fields
    assert values[1] == x.ptr and values[7] == y.ptr and values[-1] == 2.5
    assert copy[ev.R_ENTRY] == "copy" and len(copy) == ev.N_RECORD and copy[ev.R_PAYLOAD] is not FLAT
    assert (copy[ev.R_CODE], copy[ev.R_LINE]) == (here, copy_line)


def test_scope_events_hold_what_their_names_say(instrumented):
    with bus.subscribe() as sub:
        with instrumented.scope("step", i=3):
            pass
    begin, end = sub.drain_raw()
    assert (begin[ev.KIND], end[ev.KIND]) == (ev.SCOPE_BEGIN, ev.SCOPE_END)
    assert begin[ev.S_ID] == end[ev.S_ID] and begin[ev.S_NAME] == "step" and begin[ev.S_PARENT] is None
    assert begin[ev.S_T0] <= end[ev.E_T1] and end[ev.E_ERROR] is None
    assert dict(begin[ev.S_ATTRS]) == {"i": 3}


def test_oldest_pending_follows_the_bus_subscriptions_queues():
    """The owner registry's horizon: an event still queued holds it back until drained or its queue closes."""
    first = bus.subscribe()
    try:
        start = ev.next_seq()
        first.queue.append((ev.APP_SPAN, start, 0, None))  # as bus.offer queues it
        assert ev.oldest_pending() == start
        with bus.subscribe() as second:
            second.queue.append((ev.APP_SPAN, start - 1, 0, None))
            assert ev.oldest_pending() == start - 1
        assert ev.oldest_pending() == start  # closed: its queue no longer counts
        first.drain_raw()
        assert ev.oldest_pending() > start
    finally:
        first.close()


def test_ownership_imports_only_the_bottom_module():
    """Imports point down: the owner registry takes the clock from rawevent, not from the capture layer."""
    import subprocess

    code = "import sys, launchtrace.ownership; print(sorted(m for m in sys.modules if m.startswith('launchtrace')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # launchtrace._lazy is the package's own lazy-attribute helper (launchtrace/__init__.py), not a layer
    assert out.strip() == "['launchtrace', 'launchtrace._lazy', 'launchtrace.ownership', 'launchtrace.rawevent']"
