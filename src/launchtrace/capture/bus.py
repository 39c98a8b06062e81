"""The capture bus: how raw capture events reach the consumers (a ``trace_launches`` block, the exporter).

The hot path appends one raw tuple per event to the queue of every open :class:`Subscription` and does nothing
else (the compiled wrapper queues the same items in an object the cycle collector does not see, turned into the
tuple when drained); turning raw tuples into :class:`~launchtrace.model.LaunchRecord` /
:class:`~launchtrace.model.ScopeRecord` objects (names, parameter labels, owners) happens when a consumer
calls :meth:`Subscription.drain`, off the launching thread for the exporter.

Every event carries a process-wide sequence number (its order across threads). A subscription's queue is
bounded: when it is full, new events are dropped and counted exactly in :attr:`Subscription.dropped`; what was
already queued is never lost.

Example::

    from launchtrace.capture import bus
    sub = bus.subscribe()
    ...  # run Warp code under launchtrace.instrument()
    for kind, item in sub.drain():
        print(kind, item)  # "record", LaunchRecord / "scope_begin", ScopeRecord / "scope_end", ScopeRecord
    sub.close()
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from itertools import islice
from typing import Any

from launchtrace import rawevent

__all__ = ["DEFAULT_CAPACITY", "Subscription", "next_seq", "offer", "queues", "subscribe", "subscriptions"]

DEFAULT_CAPACITY = 1_000_000

# The raw event kinds (first element of a raw tuple); their layouts are named in launchtrace.rawevent.
RECORD = rawevent.RECORD
SCOPE_BEGIN = rawevent.SCOPE_BEGIN
SCOPE_END = rawevent.SCOPE_END
PROBED = rawevent.PROBED  # a record measured by launchtrace.capture.probes
APP_SPAN = rawevent.APP_SPAN  # see launchtrace.capture.appspan
FRAMEWORK = rawevent.FRAMEWORK  # another framework's record; decode(event) -> LaunchRecord

try:  # the compiled capture wrapper queues launch events outside the cycle collector; drain_raw makes them tuples
    from launchtrace.capture._fastlaunch import expand as _expand_events
    from launchtrace.capture._fastlaunch import touch as touch_activity
    from launchtrace.capture._fastlaunch import wake as wake_consumers
except ImportError:  # not built: every event is a tuple already, and the export worker watches the queue itself
    _expand_events = touch_activity = wake_consumers = None

next_seq: Callable[[], int] = rawevent.next_seq
"""The next process-wide sequence number (the clock lives in :mod:`launchtrace.rawevent`)."""

_lock = threading.Lock()
# The open subscriptions, as a tuple that is replaced (never mutated) under _lock, so the hot path iterates a
# snapshot without locking.
_subs: tuple[Subscription, ...] = ()
_materializer_factory: Callable[[], Any] | None = None


def use_materializer(factory: Callable[[], Any]) -> None:
    """Register what turns raw events into records and scopes (:class:`launchtrace.capture.materialize.
    Materializer`, at its import): a subscription makes one with ``factory()`` at its first drain."""
    global _materializer_factory
    _materializer_factory = factory


def queues() -> tuple[Subscription, ...]:
    """The open subscriptions (read once per event by the hot path; empty means "nobody listens")."""
    return _subs


def offer(event: tuple) -> None:
    """Queue ``event`` for every open subscription (:meth:`Subscription.full` where a queue is full).

    Where the compiled wrapper is built, also tell a consumer waiting for a pause in the launches that they go
    on (``touch_activity``), and wake it when a queue passes half full (``wake_consumers``); see
    ``launchtrace/capture/_fastlaunch.c``. Every Python place that queues events calls this (the compiled
    wrapper does the same in C).
    """
    for sub in _subs:
        q = sub.queue
        n = len(q)
        if n < sub.capacity:
            q.append(event)
            if n == sub.capacity // 2 and wake_consumers is not None:
                wake_consumers()
        else:
            sub.full(event)
    if touch_activity is not None:
        touch_activity()


class Subscription:
    """A bounded queue of capture events from :func:`subscribe` until :meth:`close`.

    ``thread``: only events emitted by that thread id (``None``: every thread).
    ``drain()`` returns ``(kind, item)`` pairs in emission order, ``kind`` one of ``"record"``,
    ``"scope_begin"``, ``"scope_end"``; ``dropped`` counts events refused because the queue was full.
    ``wait_s``: when the queue is full, how long the emitting thread may wait for a consumer to make room
    (sleeping, so a consumer thread gets the GIL) before the event is dropped; 0 (the default) drops at once.
    A wait that runs out is not repeated until the queue has drained to half its capacity, so a consumer that
    stopped costs the program one wait, not one per event.
    ``consumer_busy_until``: a consumer that is making room but needs longer than ``wait_s`` to do it (the
    exporter while a sink that has been answering answers its request) sets until when (``time.monotonic()``)
    a full queue waits for it. The wait ends at the later of the two.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, thread: int | None = None, wait_s: float = 0.0) -> None:
        if not isinstance(capacity, int) or capacity <= 0:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        if not 0.0 <= wait_s <= 10.0:
            raise ValueError(f"wait_s must be within [0, 10] seconds, got {wait_s!r}")
        self.queue: deque = deque()
        self.capacity = capacity
        self.thread = thread
        self.wait_s = wait_s
        self.dropped = 0
        self.waits = 0  # times the emitting thread waited for room
        self.consumer_busy_until = 0.0  # see the class docstring; set by the consumer's thread, read in full()
        self.closed = False
        self._gave_up = False
        self._materializer: Any = None

    def full(self, event: tuple) -> None:
        """The queue is full: wait up to ``wait_s`` for room (back-pressure), else drop ``event`` and count it.

        The wait lasts ``wait_s``, or on to ``consumer_busy_until`` while the consumer says it is busy making room
        (re-read as it waits: a consumer that starts its next piece of work extends it). Off the hot path: only
        called when the queue is at capacity.
        """
        q = self.queue
        if self.wait_s > 0.0 and not self._gave_up:
            self.waits += 1
            deadline = time.monotonic() + self.wait_s
            while True:
                time.sleep(0.0005)  # releases the GIL: the consumer thread runs
                if len(q) < self.capacity:
                    q.append(event)
                    return
                now = time.monotonic()
                if now >= deadline and now >= self.consumer_busy_until:
                    break
            self._gave_up = True
        self.dropped += 1

    def drain_raw(self, max_items: int | None = None) -> list[tuple]:
        """Take the raw tuples queued so far, oldest first."""
        q = self.queue
        n = len(q) if max_items is None else min(max_items, len(q))
        # all in C (no queued event is None), so no other thread runs between len() and the last popleft():
        # nothing can empty the queue under it, and no per-event Python loop on the worker (which shares the GIL)
        out = list(islice(iter(q.popleft, None), n))
        if self._gave_up and len(q) <= self.capacity // 2:
            self._gave_up = False  # the consumer is back: waiting for room is worth it again
        if _expand_events is not None:
            _expand_events(out)  # compiled events (capture/_fastlaunch.c's Event) -> the same flat tuples
        if self.thread is not None:
            thread, tid = self.thread, rawevent.TID
            out = [r for r in out if r[tid] == thread]
        return out

    def drain(self, max_items: int | None = None) -> list[tuple[str, object]]:
        """Materialised events: ``("record", LaunchRecord)``, ``("scope_begin"|"scope_end", ScopeRecord)``.

        The materialiser is :mod:`launchtrace.capture.materialize`'s, registered there when it is imported
        (:func:`use_materializer`; capturing imports it), so the queue below does not import what reads it."""
        raw = self.drain_raw(max_items)
        if self._materializer is None:
            if _materializer_factory is None:
                if not raw:
                    return []
                raise RuntimeError("launchtrace: no materialiser registered (import launchtrace.capture.materialize)")
            self._materializer = _materializer_factory()
        return self._materializer.run(raw)

    def pending(self) -> int:
        return len(self.queue)

    def close(self) -> None:
        """Stop receiving events (queued ones can still be drained)."""
        global _subs
        with _lock:
            _subs = tuple(s for s in _subs if s is not self)
            rawevent.watch_queues(s.queue for s in _subs)
        self.closed = True

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def subscribe(capacity: int = DEFAULT_CAPACITY, thread: int | None = None, wait_s: float = 0.0) -> Subscription:
    """Open a subscription: every capture event from now on is queued for it until it is closed."""
    global _subs
    sub = Subscription(capacity, thread, wait_s)
    with _lock:
        _subs = (*_subs, sub)
        rawevent.watch_queues(s.queue for s in _subs)
    return sub


def subscriptions() -> list[Subscription]:
    """The open subscriptions (a copy)."""
    return list(_subs)
