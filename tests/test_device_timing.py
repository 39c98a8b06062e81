"""device_timing: the event pool, the polling and the wall-clock mapping; real CUDA events in the GPU-only tests.

This machine has no CUDA device, so the CPU tests drive :class:`launchtrace.capture.devicetiming.Timer` with
:class:`FakeEvents`, a fake of the CUDA event operations with a simulated device clock. The ``gpu`` tests use
real ``wp.Event`` objects on ``cuda:0`` with real kernels; they are skipped here.
"""

from __future__ import annotations

import gc
import itertools
import time

import numpy as np
import pytest
import warp as wp

from launchtrace import conventions as C
from launchtrace.capture import bus, probes
from launchtrace.capture import warp as capture_warp
from launchtrace.capture.devicetiming import Pending, Timer
from launchtrace.capture.materialize import Materializer
from launchtrace.export.spanattrs import record_attributes
from launchtrace.model import DeviceTime, LaunchRecord, Site
from launchtrace.testing import trace_launches

wp.config.quiet = True

DEVICE_OFFSET_NS = 987_654_321_000  # the fake device clock's unknown offset from the host clock


class FakeClock:
    """Host wall-clock in ns, moved by the test; each read advances 1 ns (a clock read takes time)."""

    def __init__(self, start: int = 1_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1
        return self.now


class FakeDevice:
    def __init__(self, alias: str = "cuda:0") -> None:
        self.alias = alias
        self.is_cuda = True
        self.is_capturing = False


class FakeStream:
    def __init__(self) -> None:
        self.busy_until = 0  # device time when the work queued so far is done


class FakeEvent:
    def __init__(self) -> None:
        self.t: int | None = None  # device time the event is reached; None: never recorded


class FakeEvents:
    """A fake of the CUDA event operations (no CUDA device here): a device clock ``DEVICE_OFFSET_NS`` ahead of the
    host clock, streams that run queued work in order, events reached when their stream gets to them."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.created = 0
        self.queries = 0
        self.complete_after: int | None = None  # report "not complete" for this many queries first

    def device_now(self) -> int:
        return self.clock.now + DEVICE_OFFSET_NS

    def new_event(self, device: FakeDevice) -> FakeEvent:
        self.created += 1
        return FakeEvent()

    def new_stream(self, device: FakeDevice) -> FakeStream:
        return FakeStream()

    def record(self, stream: FakeStream, event: FakeEvent) -> None:
        event.t = max(self.device_now(), stream.busy_until)

    def run(self, stream: FakeStream, duration_ns: int) -> None:
        """A kernel of ``duration_ns`` queued on ``stream`` now."""
        stream.busy_until = max(self.device_now(), stream.busy_until) + duration_ns

    def is_complete(self, event: FakeEvent) -> bool:
        self.queries += 1
        if self.complete_after is not None:
            self.complete_after -= 1
            if self.complete_after >= 0:
                return False
        return event.t is not None and event.t <= self.device_now()

    def elapsed_ms(self, start: FakeEvent, end: FakeEvent) -> float:
        assert start.t is not None and end.t is not None
        return (end.t - start.t) / 1e6

    def capturing(self, device: FakeDevice) -> bool:
        return device.is_capturing


@pytest.fixture
def fake():
    clock = FakeClock()
    events = FakeEvents(clock)
    timer = Timer(events, capacity=4, clock=clock, anchor_period_ns=1_000_000_000)
    return clock, events, timer, FakeDevice(), FakeStream()


def _launch(events: FakeEvents, timer: Timer, device: FakeDevice, stream: FakeStream, duration_ns: int) -> Pending:
    pending = timer.begin(device, stream)
    assert pending is not None
    events.run(stream, duration_ns)
    pending.end()
    return pending


FAR = float("inf")  # a deadline never reached


def test_device_times_map_back_to_the_host_clock(fake):
    clock, events, timer, device, stream = fake
    clock.now = 5_000_000
    host_issue = clock.now
    pending = _launch(events, timer, device, stream, 40_000)
    clock.now += 100_000  # the device is done
    result = pending.resolve(FAR)
    window = pending.pool.anchor.window_ns  # the mapping's error bound on this side
    assert result.duration_ns == 40_000  # the events' elapsed time, exact
    assert abs(result.start_ns - host_issue) <= window + 2  # the device started at once: an idle stream
    assert result.end_ns == result.start_ns + 40_000
    assert timer.timed == 1


def test_a_launch_queued_behind_others_starts_when_the_device_gets_to_it(fake):
    clock, events, timer, device, stream = fake
    events.run(stream, 2_000_000)  # 2 ms of earlier work on the stream
    issued = clock.now
    pending = _launch(events, timer, device, stream, 10_000)
    clock.now += 3_000_000
    result = pending.resolve(FAR)
    assert result.start_ns - issued == pytest.approx(2_000_000, abs=10)
    assert result.duration_ns == 10_000


def test_the_pool_is_bounded_and_launches_past_it_go_untimed_counted(fake):
    clock, events, timer, device, stream = fake
    pendings = [_launch(events, timer, device, stream, 1000) for _ in range(4)]
    assert timer.begin(device, stream) is None and timer.untimed_pool == 1
    created = events.created
    clock.now += 1_000_000
    assert pendings[0].resolve(FAR) is not None
    assert timer.in_flight() == 3
    again = timer.begin(device, stream)  # the pair resolved is reused: no new event made
    assert again is not None and events.created == created
    assert again.pair is pendings[0].pair


def test_a_record_whose_events_are_not_complete_goes_out_without_device_time(fake):
    _clock, events, timer, device, stream = fake
    pending = _launch(events, timer, device, stream, 5_000_000)  # still running: the clock does not move
    assert pending.resolve(time.monotonic() - 1.0) is None  # a deadline already past: no wait
    assert timer.untimed_incomplete == 1 and timer.timed == 0
    assert timer.in_flight() == 0  # its pair went back to the pool
    assert pending.resolve(FAR) is None  # the answer stays


def test_the_worker_polls_until_the_events_complete(fake):
    clock, events, timer, device, stream = fake
    pending = _launch(events, timer, device, stream, 1000)
    clock.now += 10_000
    events.complete_after = 3  # the first three queries say "not yet"
    result = pending.resolve(FAR)
    assert result is not None and result.duration_ns == 1000
    assert events.queries >= 4  # it polled, without blocking on the device


def test_no_query_is_made_while_a_graph_capture_runs(fake):
    clock, events, timer, device, stream = fake
    pending = _launch(events, timer, device, stream, 1000)
    clock.now += 10_000
    device.is_capturing = True
    queries = events.queries
    assert pending.resolve(time.monotonic() + 0.01) is None
    assert events.queries == queries  # is_complete is not allowed during a capture: never asked
    assert timer.begin(device, stream) is None and timer.untimed_capture == 1


def test_anchors_are_renewed_after_their_period_and_old_launches_keep_theirs(fake):
    clock, events, timer, device, stream = fake
    first = _launch(events, timer, device, stream, 1000)
    clock.now += 2_000_000_000  # two seconds later
    issued = clock.now
    second = _launch(events, timer, device, stream, 1000)
    assert second.anchor is not first.anchor
    clock.now += 10_000
    a, b = first.resolve(FAR), second.resolve(FAR)
    assert b.start_ns - a.start_ns == pytest.approx(2_000_000_000, abs=10)
    assert abs(b.start_ns - issued) <= 10


def test_two_subscribers_get_the_same_answer_and_the_pair_returns_once(fake):
    clock, events, timer, device, stream = fake
    pending = _launch(events, timer, device, stream, 1000)
    clock.now += 10_000
    assert pending.resolve(FAR) is pending.resolve(FAR)
    pool = pending.pool
    assert len(pool.free) == 1 and timer.timed == 1


def test_abandoned_and_dropped_pendings_give_their_pair_back(fake):
    _clock, events, timer, device, stream = fake
    failed = timer.begin(device, stream)
    failed.abandon()  # the launch raised
    assert timer.in_flight() == 0 and timer.untimed_incomplete == 0
    dropped = _launch(events, timer, device, stream, 1000)
    assert timer.in_flight() == 1
    del dropped  # a subscription closed with the event still queued
    gc.collect()
    assert timer.in_flight() == 0


def test_attach_puts_the_device_time_on_the_record_or_leaves_it_out(fake):
    clock, events, timer, device, stream = fake
    done = _launch(events, timer, device, stream, 7000)
    clock.now += 100_000
    late = _launch(events, timer, device, stream, 10**9)
    rec = LaunchRecord("launch", "m.k", (4,), None, (), (), Site("f.py", 1, "f"))
    timed = probes.attach(rec, (done,), FAR)
    assert timed.probes == (done.result,) and timed.probes[0].duration_ns == 7000
    assert probes.attach(rec, (late,), time.monotonic() - 1).probes == ()


def test_span_attributes_of_a_device_time():
    rec = LaunchRecord("launch", "m.k", (4,), None, (), (), Site("f.py", 1, "f"), probes=(DeviceTime(100, 350),))
    attrs = dict(record_attributes(rec))
    assert (attrs[C.DEVICE_TIME_START], attrs[C.DEVICE_TIME_END], attrs[C.DEVICE_TIME_DURATION]) == (100, 350, 250)


@wp.kernel
def axpy(x: wp.array(dtype=float), a: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


def test_the_materializer_resolves_measured_events(instrumented, fake):
    """A real CPU launch's raw event, wrapped as the probes wrap it, with a pending timing of the fake."""
    clock, events, timer, device, stream = fake
    x = wp.ones(8, dtype=float)
    y = wp.zeros(8, dtype=float)
    with bus.subscribe() as sub:
        wp.launch(axpy, dim=8, inputs=[x, 2.0, y])
    raw = [e for e in sub.drain_raw() if e[0] == bus.RECORD and e[3] == "launch"]
    (event,) = raw
    pending = _launch(events, timer, device, stream, 3000)
    clock.now += 10_000
    wrapped = (bus.PROBED, event[1], event[2], event, (pending,))
    ((_kind, rec),) = [item for item in Materializer().run([wrapped]) if item[0] == "record"]
    assert rec.kernel.endswith("axpy") and rec.probes == (DeviceTime(pending.result.start_ns, pending.result.end_ns),)
    assert rec.probes[0].duration_ns == 3000


def test_on_the_cpu_nothing_is_timed_and_launches_go_back_to_the_fast_path(instrumented):
    """Real CPU launches: host time is exact there, so device timing measures nothing and steps aside."""
    probes.configure(device_timing=True)
    try:
        assert capture_warp._PROBES is True
        x = wp.ones(8, dtype=float)
        y = wp.zeros(8, dtype=float)
        with trace_launches() as trace:
            for _ in range(3):
                wp.launch(axpy, dim=8, inputs=[x, 2.0, y])
        assert [r.probes for r in trace] == [(), (), ()]
        np.testing.assert_array_equal(y.numpy(), np.full(8, 6.0, dtype=np.float32))
        assert capture_warp._PROBES is False  # no CUDA device: the flag went back down after one launch
        assert probes.stats().timed == 0
    finally:
        probes.configure(device_timing=False)


def test_wp_event_raises_on_the_cpu_so_cpu_launches_never_make_one(warp_cpu):
    with pytest.raises(RuntimeError):
        wp.Event("cpu", enable_timing=True)


# -- GPU only: real CUDA events ------------------------------------------------------------------------------


@wp.kernel
def busy(y: wp.array(dtype=float), rounds: int):
    i = wp.tid()
    v = y[i]
    for _ in range(rounds):
        v = v * 0.999 + 0.001
    y[i] = v


def _cuda_or_skip() -> str:
    if not wp.is_cuda_available():
        pytest.skip("no CUDA device")
    return "cuda:0"


@pytest.mark.gpu
def test_real_device_times_fall_in_the_host_window_and_are_positive(instrumented):
    """Needs a CUDA device (skipped here): real kernels, real wp.Event pairs, mapped to the host clock."""
    device = _cuda_or_skip()
    y = wp.zeros(1 << 20, dtype=float, device=device)
    wp.launch(busy, dim=y.shape, inputs=[y, 1], device=device)  # compile and load first
    wp.synchronize_device(device)
    probes.configure(device_timing=True)
    try:
        with trace_launches() as trace:
            before = time.time_ns()
            for _ in range(5):
                wp.launch(busy, dim=y.shape, inputs=[y, 2000], device=device)
            wp.synchronize_device(device)
            after = time.time_ns()
    finally:
        probes.configure(device_timing=False)
    times = [r.probes[0] for r in trace]
    assert all(isinstance(t, DeviceTime) for t in times)
    slack = 1_000_000  # 1 ms: far above the anchor's error bound (a few us)
    for rec, t in zip(trace, times):
        assert t.duration_ns > 0
        assert before - slack <= t.start_ns < t.end_ns <= after + slack
        assert t.start_ns >= rec.start_ns - slack  # the device cannot start before the host issued it
    for a, b in itertools.pairwise(times):  # one stream: in order, not overlapping
        assert a.end_ns <= b.start_ns + slack


@pytest.mark.gpu
def test_real_pool_exhaustion_and_reuse(warp_cpu):
    """Needs a CUDA device (skipped here): a Timer of two real event pairs."""
    device = wp.get_device(_cuda_or_skip())
    timer = Timer(capacity=2)
    stream = device.stream
    pendings = [timer.begin(device, stream) for _ in range(3)]
    assert pendings[2] is None and timer.untimed_pool == 1
    for p in pendings[:2]:
        p.end()
    wp.synchronize_device(device)
    results = [p.resolve(time.monotonic() + 1.0) for p in pendings[:2]]
    assert all(r is not None and r.duration_ns >= 0 for r in results)
    assert timer.in_flight() == 0 and timer.begin(device, stream) is not None


@pytest.mark.gpu
def test_real_device_times_and_value_stats_reach_the_exported_spans(warp_cpu, tmp_path):
    """Needs a CUDA device (skipped here): both measurements on cuda:0 through the file sink."""
    from launchtrace import export
    from launchtrace.sources.files import read_spans

    device = _cuda_or_skip()
    y = wp.zeros(4096, dtype=float, device=device)
    path = tmp_path / "gpu.jsonl"
    export.start_export(file_path=str(path), device_timing=True, value_stats=True, truncate=True)
    try:
        for _ in range(3):
            wp.launch(busy, dim=y.shape, inputs=[y, 100], device=device)
    finally:
        export.stop_export()
    spans = [s for s in read_spans(str(path)).spans if s.name.endswith("busy")]
    assert len(spans) == 3  # values differ each launch: nothing folds
    for s in spans:
        assert s.attribute(C.DEVICE_TIME_DURATION) > 0
        assert s.attribute(C.DEVICE_TIME_START) <= s.attribute(C.DEVICE_TIME_END)
    assert spans[-1].attribute(C.arg_stats_attr("y", "mean")) == pytest.approx(float(y.numpy().mean()))
