"""Waiting for a pause in the launches without the GIL (``launchtrace.capture._fastlaunch.wait_for_pause``).

The export worker waits for the program to stop launching before it builds spans. It used to look every 20 ms
from Python, and each look took the GIL from the launching thread (1-2 ms of its time per look). Now it waits
in C on a condition variable: these tests check each way the wait ends (a pause, its deadline, a wake, a queue
past half full), that a wake between taking the token and waiting is never lost, and that the worker really
stays away during a burst of real launches while exporting every span afterwards.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from launchtrace import native
from launchtrace.capture import bus

_fastlaunch = native.load("launchtrace.capture._fastlaunch")  # raises under LAUNCHTRACE_REQUIRE_NATIVE when missing
pytestmark = pytest.mark.skipif(_fastlaunch is None, reason="the compiled wrapper is not built (or pure Python)")


def _in_thread(fn):  # type: ignore[no-untyped-def]
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    return t, out


def test_a_pause_ends_the_wait_and_activity_keeps_it_going() -> None:
    _fastlaunch.touch()
    t0 = time.monotonic()
    assert _fastlaunch.wait_for_pause(0.05, 5.0, _fastlaunch.wake_count()) == "pause"
    assert 0.03 <= time.monotonic() - t0 < 4.0  # about one gap after the last event
    stop = threading.Event()

    def keep_launching() -> None:
        while not stop.is_set():
            _fastlaunch.touch()
            time.sleep(0.005)

    t = threading.Thread(target=keep_launching)
    t.start()
    try:
        t0 = time.monotonic()
        assert _fastlaunch.wait_for_pause(0.1, 0.4, _fastlaunch.wake_count()) == "timeout"  # no 0.1 s gap came
        assert time.monotonic() - t0 >= 0.35
    finally:
        stop.set()
        t.join()


def test_wake_ends_the_wait_and_a_wake_before_it_is_not_lost() -> None:
    _fastlaunch.touch()
    token = _fastlaunch.wake_count()
    t, out = _in_thread(lambda: _fastlaunch.wait_for_pause(30.0, 30.0, token))
    time.sleep(0.05)
    t0 = time.monotonic()
    _fastlaunch.wake()
    t.join(5.0)
    assert out == ["woken"] and time.monotonic() - t0 < 2.0
    stale = _fastlaunch.wake_count()
    _fastlaunch.wake()  # between the token and the wait: the wait must not start
    assert _fastlaunch.wait_for_pause(30.0, 30.0, stale) == "woken"


def test_bad_arguments_are_refused() -> None:
    for gap, timeout in ((0.0, 1.0), (1.0, -1.0), (float("nan"), 1.0), (1e9, 1.0)):
        with pytest.raises(ValueError):
            _fastlaunch.wait_for_pause(gap, timeout, 0)


def test_a_queue_passing_half_full_wakes_the_waiter(warp_cpu, instrumented) -> None:
    """Through the compiled wrapper and through the Python paths (a scope's events go through bus.offer)."""
    import launchtrace
    import warp_programs as p

    wp = warp_cpu
    x = wp.zeros(8, dtype=float, device=p.DEVICE)
    for use_scopes in (False, True):
        with bus.subscribe(capacity=40) as sub:
            _fastlaunch.touch()
            token = _fastlaunch.wake_count()
            t, out = _in_thread(lambda: _fastlaunch.wait_for_pause(30.0, 30.0, token))  # noqa: B023
            time.sleep(0.05)
            assert out == []
            for _ in range(25):  # past 20 events
                if use_scopes:
                    with launchtrace.scope("s"):
                        pass
                else:
                    wp.launch(p.scale, dim=8, inputs=[x, x, 1.0], device=p.DEVICE)
            t.join(5.0)
            assert out == ["woken"], use_scopes
            assert len(sub.queue) > 20


class _CountingWaiter:
    """The compiled waiter, noting when each wait returned (the worker then takes the GIL)."""

    def __init__(self) -> None:
        self.returns: list[float] = []

    def wake_count(self) -> int:
        return _fastlaunch.wake_count()

    def wake(self) -> None:
        _fastlaunch.wake()

    def wait_for_pause(self, *args: float) -> str:
        why = _fastlaunch.wait_for_pause(*args)
        _gap_s, timeout_s, _token, *first_s = args
        if first_s != [timeout_s]:  # a wait for a pause; not a rest between chunks (a fixed time, woken early)
            self.returns.append(time.monotonic())
        return why


def _looks_during_a_burst(tmp_path: Path, sim, compiled_waiter: bool) -> int:
    """How often the export worker took the GIL to look at the queue during a 1 s burst of launches; checks it
    then exports every span by itself (no flush)."""
    from launchtrace.export import pipeline as pipeline_module
    from launchtrace.export.config import ExportConfig
    from launchtrace.export.pipeline import ExportPipeline

    waiter = _CountingWaiter()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline_module, "_pause_waiter", lambda: waiter if compiled_waiter else None)
        path = tmp_path / f"s{compiled_waiter}.jsonl"
        pipeline = ExportPipeline(ExportConfig.resolve(file_path=str(path), fold=False, export_interval_s=0.02))
        looks = waiter.returns
        real = pipeline._wait_for_pause
        mp.setattr(pipeline, "_wait_for_pause", lambda *a: looks.append(time.monotonic()) or real(*a))
        pipeline.start()
        try:
            steps, t0 = 0, time.monotonic()
            while time.monotonic() - t0 < 1.0:
                sim.step()
                steps += 1
            during = sum(1 for t in looks if t0 < t < t0 + 1.0)
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline and pipeline.stats().exported < steps * 5:
                time.sleep(0.05)
            stats = pipeline.stats()  # no flush asked: the worker exported after the burst by itself
            assert stats.exported >= steps * 5 and stats.exported == stats.built  # launches + synthetic roots
            assert stats.dropped_queue == stats.dropped_sink == 0
        finally:
            pipeline.stop()
    return during


def test_the_worker_stays_away_during_a_burst_and_exports_everything_after(
    tmp_path: Path, instrumented, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the compiled waiter the worker takes the GIL during a burst only when the program stalls for over
    20 ms (0-2 times here), not every 20 ms as when it waits from Python (10-15 times per second here, each
    costing the launching thread 1-2 ms). Both measured here, on the same machine, one after the other."""
    import warp._src.context as ctx

    import warp_programs

    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)  # launches through the compiled wrapper
    instrumented.uninstrument()
    instrumented.instrument()
    assert type(ctx.launch) is _fastlaunch.Launcher
    sim = warp_programs.Sim()
    sim.step()
    python_looks = _looks_during_a_burst(tmp_path, sim, compiled_waiter=False)
    compiled_looks = _looks_during_a_burst(tmp_path, sim, compiled_waiter=True)
    assert python_looks >= 5, python_looks  # the Python waiter does look every 20 ms or so
    assert compiled_looks * 2 <= python_looks, (compiled_looks, python_looks)
