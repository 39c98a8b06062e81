"""The capture bus: how raw capture events reach the consumers (a ``trace_launches`` block, the exporter).

The hot path appends one raw tuple per event to the queue of every open :class:`Subscription` and does nothing
else; turning raw tuples into :class:`~launchtrace.model.LaunchRecord` / :class:`~launchtrace.model.ScopeRecord`
objects (names, parameter labels, owners) happens when a consumer calls :meth:`Subscription.drain`, off the
launching thread for the exporter.

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

import itertools
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_CAPACITY", "Subscription", "next_seq", "offer", "queues", "subscribe", "subscriptions"]

DEFAULT_CAPACITY = 1_000_000

# The raw event kinds (first element of a raw tuple).
RECORD = 0
SCOPE_BEGIN = 1
SCOPE_END = 2

next_seq: Callable[[], int] = itertools.count(1).__next__
"""The next process-wide sequence number (thread-safe under the GIL)."""

_lock = threading.Lock()
# The open subscriptions, as a tuple that is replaced (never mutated) under _lock, so the hot path iterates a
# snapshot without locking.
_subs: tuple[Subscription, ...] = ()

EventKinds = {RECORD: "record", SCOPE_BEGIN: "scope_begin", SCOPE_END: "scope_end"}


def queues() -> tuple[Subscription, ...]:
    """The open subscriptions (read once per event by the hot path; empty means "nobody listens")."""
    return _subs


def offer(event: tuple) -> None:
    """Queue ``event`` for every open subscription, counting it as dropped where a queue is full."""
    for sub in _subs:
        q = sub.queue
        if len(q) < sub.capacity:
            q.append(event)
        else:
            sub.dropped += 1


class Subscription:
    """A bounded queue of capture events from :func:`subscribe` until :meth:`close`.

    ``thread``: only events emitted by that thread id (``None``: every thread).
    ``drain()`` returns ``(kind, item)`` pairs in emission order, ``kind`` one of ``"record"``,
    ``"scope_begin"``, ``"scope_end"``; ``dropped`` counts events refused because the queue was full.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, thread: int | None = None) -> None:
        if not isinstance(capacity, int) or capacity <= 0:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.queue: deque = deque()
        self.capacity = capacity
        self.thread = thread
        self.dropped = 0
        self.closed = False
        self._materializer: Any = None

    def drain_raw(self, max_items: int | None = None) -> list[tuple]:
        """Take the raw tuples queued so far, oldest first."""
        q = self.queue
        n = len(q) if max_items is None else min(max_items, len(q))
        popleft = q.popleft
        out = []
        for _ in range(n):
            try:
                out.append(popleft())
            except IndexError:  # pragma: no cover - raced with a concurrent drain
                break
        if self.thread is not None:
            out = [r for r in out if r[2] == self.thread]
        return out

    def drain(self, max_items: int | None = None) -> list[tuple[str, object]]:
        """Materialised events: ``("record", LaunchRecord)``, ``("scope_begin"|"scope_end", ScopeRecord)``."""
        from launchtrace.capture.materialize import Materializer

        if self._materializer is None:
            self._materializer = Materializer()
        return self._materializer.run(self.drain_raw(max_items))

    def pending(self) -> int:
        return len(self.queue)

    def close(self) -> None:
        """Stop receiving events (queued ones can still be drained)."""
        global _subs
        with _lock:
            _subs = tuple(s for s in _subs if s is not self)
        self.closed = True

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def subscribe(capacity: int = DEFAULT_CAPACITY, thread: int | None = None) -> Subscription:
    """Open a subscription: every capture event from now on is queued for it until it is closed."""
    global _subs
    sub = Subscription(capacity, thread)
    with _lock:
        _subs = (*_subs, sub)
    return sub


def subscriptions() -> list[Subscription]:
    """The open subscriptions (a copy)."""
    return list(_subs)
