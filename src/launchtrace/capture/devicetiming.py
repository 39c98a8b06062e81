"""CUDA device timing of launches: pooled event pairs, polled without blocking, mapped to host wall-clock.

The launching thread only records: a start event before the launch and an end event after it, on the launch's
stream (:meth:`Timer.begin` / :meth:`Pending.end`); it never waits for the device. The export worker later asks
:meth:`Pending.resolve`, which polls ``is_complete`` (no synchronize) until a deadline, then computes
``elapsed(anchor, start)`` and ``elapsed(start, end)`` and returns the pair of events to the pool.

Mapping to wall-clock: CUDA events only give differences between events of one device. Per device, an *anchor*
event is recorded on a private, otherwise idle stream, between two host clock reads ``h0 <= h1``; the device
executes it almost at once, so its device timestamp corresponds to host time ``h1`` up to an error in
``[-(h1 - h0), d]`` (``d``: how long an idle stream takes to reach a recorded event, a few microseconds). A
launch then starts at ``h1 + elapsed(anchor, start)``. Anchors are renewed every ``anchor_period_ns`` (1 s), so
the drift between the host and device clocks adds at most that period times their rate difference.

Bounded: at most ``capacity`` event pairs per device. When all are in flight (recorded, not yet resolved), a
launch goes untimed and is counted (:attr:`Timer.untimed_pool`); so is a launch during a graph capture
(:attr:`Timer.untimed_capture`, events there would be captured too) and one whose events were not complete
by the deadline (:attr:`Timer.untimed_incomplete`). The CUDA calls go through :class:`WarpEvents`; the tests
stand a fake in for it where no CUDA device exists.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from launchtrace.model import DeviceTime

__all__ = ["ANCHOR_PERIOD_NS", "POLL_S", "POOL_PAIRS", "Anchor", "Pending", "Timer", "WarpEvents"]

POOL_PAIRS = 8192
"""Event pairs per device: launches timed at once between the launch and the export worker's resolve."""
ANCHOR_PERIOD_NS = 1_000_000_000
"""How old an anchor may get before a launch records a fresh one (bounds the clock-drift error)."""
POLL_S = 0.0005
"""Sleep between two polls of an incomplete event while the worker waits (releases the GIL)."""

_lock = threading.Lock()  # resolving one Pending from two subscribers' materializers


class WarpEvents:
    """The CUDA event operations, through Warp (``wp.Event`` raises on the CPU: never called for it)."""

    def __init__(self) -> None:
        import warp as wp

        self._wp = wp

    def new_event(self, device: Any) -> Any:
        return self._wp.Event(device, enable_timing=True)

    def new_stream(self, device: Any) -> Any:
        return self._wp.Stream(device)

    def record(self, stream: Any, event: Any) -> None:
        stream.record_event(event)

    def is_complete(self, event: Any) -> bool:
        return bool(event.is_complete)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(self._wp.get_event_elapsed_time(start, end, synchronize=False))

    def capturing(self, device: Any) -> bool:
        return bool(device.is_capturing)


class Anchor:
    """A reference event and the host time it stands for (``window_ns``: ``h1 - h0``, the error's lower side)."""

    __slots__ = ("complete", "event", "host_ns", "window_ns")

    def __init__(self, event: Any, host_ns: int, window_ns: int) -> None:
        self.event = event
        self.host_ns = host_ns
        self.window_ns = window_ns
        self.complete = False


class _DevicePool:
    """One device's idle event pairs, its anchor stream and its current anchor."""

    __slots__ = ("anchor", "created", "device", "free", "stream")

    def __init__(self, device: Any) -> None:
        self.device = device
        self.free: deque[tuple[Any, Any]] = deque()
        self.created = 0
        self.stream: Any = None
        self.anchor: Anchor | None = None


class Pending:
    """One launch's recorded events until the worker resolves them into a :class:`DeviceTime` (or gives up)."""

    __slots__ = ("__weakref__", "anchor", "done", "pair", "pool", "result", "stream", "timer")

    def __init__(self, timer: Timer, pool: _DevicePool, pair: tuple[Any, Any], anchor: Anchor, stream: Any) -> None:
        self.timer = timer
        self.pool = pool
        self.pair = pair
        self.anchor = anchor
        self.stream = stream
        self.done = False
        self.result: DeviceTime | None = None

    def end(self) -> None:
        """Record the end event (launching thread, right after the launch returned)."""
        self.timer.backend.record(self.stream, self.pair[1])

    def abandon(self) -> None:
        """The launch raised or ran nothing: give the pair back without a result (not counted as untimed)."""
        with _lock:
            self._finish(None)

    def resolve(self, deadline: float) -> DeviceTime | None:
        """The device time once both events are complete, polling until ``deadline`` (``time.monotonic``);
        ``None`` when they are not complete by then (counted). The first answer is kept: a second subscriber
        gets the same one."""
        timer = self.timer
        while True:
            with _lock:
                if self.done:
                    return self.result
                if self._ready():
                    self._finish(self._measure())
                    timer.timed += 1
                    return self.result
            if time.monotonic() >= deadline:
                with _lock:
                    if not self.done:
                        self._finish(None)
                        timer.untimed_incomplete += 1
                    return self.result
            time.sleep(POLL_S)

    def _ready(self) -> bool:
        backend = self.timer.backend
        if backend.capturing(self.pool.device):  # queries are not allowed while a capture runs
            return False
        anchor = self.anchor
        if not anchor.complete:
            anchor.complete = backend.is_complete(anchor.event)
            if not anchor.complete:
                return False
        return backend.is_complete(self.pair[1])  # the end event: the start event, on the same stream, is earlier

    def _measure(self) -> DeviceTime:
        elapsed = self.timer.backend.elapsed_ms
        start, end = self.pair
        start_ns = self.anchor.host_ns + round(elapsed(self.anchor.event, start) * 1e6)
        return DeviceTime(start_ns, start_ns + round(elapsed(start, end) * 1e6))

    def _finish(self, result: DeviceTime | None) -> None:
        if self.done:
            return
        self.done = True
        self.result = result
        self.pool.free.append(self.pair)
        self.anchor = None  # an old anchor's event is freed once no pending launch refers to it

    def __del__(self) -> None:
        # Dropped unresolved (a subscription closed with events still queued): the pair goes back to the pool.
        if not self.done:
            self.done = True
            try:
                self.pool.free.append(self.pair)
            except Exception:
                pass


class Timer:
    """Event pools per device, anchors and counters; one per process (:mod:`launchtrace.capture.probes`).

    ``backend``: the CUDA event operations (:class:`WarpEvents` by default); ``clock``: host wall-clock ns.
    """

    def __init__(
        self,
        backend: Any = None,
        capacity: int = POOL_PAIRS,
        clock: Callable[[], int] = time.time_ns,
        anchor_period_ns: int = ANCHOR_PERIOD_NS,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity!r}")
        self._backend = backend
        self.capacity = capacity
        self.clock = clock
        self.anchor_period_ns = anchor_period_ns
        self._pools: dict[str, _DevicePool] = {}
        self._grow = threading.Lock()  # making pools, pairs and anchor streams (rare: not per launch)
        self.timed = 0
        self.untimed_pool = 0
        self.untimed_capture = 0
        self.untimed_incomplete = 0

    @property
    def backend(self) -> Any:
        if self._backend is None:
            self._backend = WarpEvents()
        return self._backend

    def begin(self, device: Any, stream: Any) -> Pending | None:
        """Record a start event on ``stream`` for a launch about to run on CUDA ``device`` (launching thread).

        ``None`` (the launch goes untimed) when a graph capture is active or every pair is in flight."""
        backend = self.backend
        if backend.capturing(device):
            self.untimed_capture += 1
            return None
        pool = self._pools.get(device.alias)  # Warp's Device is not hashable; its alias names it for good
        if pool is None:
            with self._grow:
                pool = self._pools.setdefault(device.alias, _DevicePool(device))
        try:
            pair = pool.free.pop()
        except IndexError:
            pair = self._new_pair(pool)
            if pair is None:
                self.untimed_pool += 1
                return None
        anchor = pool.anchor
        if anchor is None or self.clock() - anchor.host_ns > self.anchor_period_ns:
            anchor = self._new_anchor(pool)
        backend.record(stream, pair[0])
        return Pending(self, pool, pair, anchor, stream)

    def _new_pair(self, pool: _DevicePool) -> tuple[Any, Any] | None:
        """Two fresh events, or ``None`` when the pool already made ``capacity`` pairs (all in flight)."""
        with self._grow:
            if pool.created >= self.capacity:
                return None
            pool.created += 1
        return (self.backend.new_event(pool.device), self.backend.new_event(pool.device))

    def _new_anchor(self, pool: _DevicePool) -> Anchor:
        with self._grow:
            if pool.stream is None:
                pool.stream = self.backend.new_stream(pool.device)
        backend = self.backend
        event = backend.new_event(pool.device)
        h0 = self.clock()
        backend.record(pool.stream, event)
        h1 = self.clock()
        pool.anchor = Anchor(event, h1, h1 - h0)
        return pool.anchor

    def in_flight(self) -> int:
        """Event pairs recorded and not yet resolved, over all devices."""
        return sum(p.created - len(p.free) for p in self._pools.values())

    def forget_devices(self) -> None:
        """Drop every pool (a forked child: the parent's CUDA objects are not usable there). The objects are
        kept referenced, never destroyed in the child."""
        _ORPHANS.append(self._pools)
        self._pools = {}


_ORPHANS: list[Any] = []
