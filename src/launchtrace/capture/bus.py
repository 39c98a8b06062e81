"""The capture bus: how raw capture events reach the consumers (a ``trace_launches`` block, the exporter).

The hot path appends one raw tuple per event to the queue of every open :class:`Subscription` and does nothing
else; turning raw tuples into :class:`~launchtrace.model.LaunchRecord` / :class:`~launchtrace.model.ScopeRecord`
objects (names, parameter labels, owners) happens when a consumer calls :meth:`Subscription.drain`, off the
launching thread for the exporter.

Every event carries a process-wide sequence number. A subscription's queue is bounded; when it overflows the
oldest events are discarded, and the gaps in the sequence numbers a subscription sees tell it exactly how many
it lost, without a counter on the hot path.

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

__all__ = ["DEFAULT_CAPACITY", "Subscription", "next_seq", "subscribe", "subscriptions"]

DEFAULT_CAPACITY = 1_000_000

# The raw event kinds (first element of a raw tuple).
RECORD = 0
SCOPE_BEGIN = 1
SCOPE_END = 2

next_seq: Callable[[], int] = itertools.count(1).__next__
"""The next process-wide sequence number (thread-safe under the GIL)."""

_lock = threading.Lock()
# The deques the hot path appends to. Replaced (never mutated) under _lock, so the hot path can iterate a
# snapshot without locking.
_queues: tuple[deque, ...] = ()
_subs: list[Subscription] = []

EventKinds = {RECORD: "record", SCOPE_BEGIN: "scope_begin", SCOPE_END: "scope_end"}


def queues() -> tuple[deque, ...]:
    """The queues the hot path appends to (read once per event)."""
    return _queues


class Subscription:
    """A bounded queue of capture events from :func:`subscribe` until :meth:`close`.

    ``thread``: only events emitted by that thread id (``None``: every thread).
    ``drain()`` returns ``(kind, item)`` pairs in emission order, ``kind`` one of ``"record"``,
    ``"scope_begin"``, ``"scope_end"``; ``dropped`` counts events lost to overflow so far.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, thread: int | None = None) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity!r}")
        self.queue: deque = deque(maxlen=capacity)
        self.thread = thread
        self.start_seq = next_seq()
        self.dropped = 0
        self._last_seq = self.start_seq
        self._pending_gaps: set[int] = set()
        self.closed = False

    def drain_raw(self, max_items: int | None = None) -> list[tuple]:
        """Take the raw tuples queued so far (oldest first), counting those lost to overflow."""
        q = self.queue
        n = len(q) if max_items is None else min(max_items, len(q))
        out = []
        popleft = q.popleft
        for _ in range(n):
            try:
                out.append(popleft())
            except IndexError:  # pragma: no cover - raced with a concurrent drain
                break
        if out and q.maxlen is not None:
            self._count_gaps(out)
        return out

    def _count_gaps(self, raw: list[tuple]) -> None:
        # raw[i][1] is the event's seq. Threads may append slightly out of order, so a missing seq is only
        # counted as dropped once the queue has overflowed (otherwise nothing can have been discarded).
        if len(self.queue) + len(raw) < (self.queue.maxlen or 0) and not self._overflowed():
            self._last_seq = max(self._last_seq, max(r[1] for r in raw))
            return
        seqs = sorted(r[1] for r in raw)
        lo = self._last_seq
        expected = seqs[-1] - lo
        self.dropped += max(0, expected - len(seqs))
        self._last_seq = seqs[-1]

    def _overflowed(self) -> bool:
        return False

    def drain(self, max_items: int | None = None) -> list[tuple[str, object]]:
        """Materialised events: ``("record", LaunchRecord)``, ``("scope_begin"|"scope_end", ScopeRecord)``."""
        from launchtrace.capture.materialize import materialize

        raw = self.drain_raw(max_items)
        if self.thread is not None:
            raw = [r for r in raw if r[2] == self.thread]
        return materialize(raw)

    def close(self) -> None:
        """Stop receiving events (queued ones can still be drained)."""
        global _queues
        with _lock:
            if self in _subs:
                _subs.remove(self)
            _queues = tuple(s.queue for s in _subs)
        self.closed = True

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def subscribe(capacity: int = DEFAULT_CAPACITY, thread: int | None = None) -> Subscription:
    """Open a subscription: every capture event from now on is queued for it until it is closed."""
    global _queues
    sub = Subscription(capacity, thread)
    with _lock:
        _subs.append(sub)
        _queues = tuple(s.queue for s in _subs)
    return sub


def subscriptions() -> list[Subscription]:
    """The open subscriptions (a copy)."""
    with _lock:
        return list(_subs)
