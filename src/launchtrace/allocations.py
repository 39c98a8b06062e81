"""Where each array was allocated: a buffer identity that is the same in every run of a program.

A raw pointer is no identity: the allocator hands a freed address to the next array, and which array gets which
address changes from run to run. What does not change is the program: an array allocated by the statement
``self.x = wp.zeros(n)`` in ``State.__init__`` is ``State.x`` in every run. The capture layer reports each Warp
allocation here (:meth:`AllocationRegistry.allocated`, from ``array._init_new``, the one place Warp allocates
array memory), and the materializer asks, for an unowned pointer at a sequence number, which allocation held
it (:meth:`AllocationRegistry.locate`). An allocation's identity is made of:

- its *site*: the first frame outside Warp and launchtrace (file, line), and the frame that called it, so that a
  factory (``def make(n): return wp.zeros(n)``) called from two places gives two identities;
- its *slot* at that statement: the smallest number not held by a live allocation of the same statement (code
  and line, whoever called it: two ``State`` objects alive at once are ``State.x`` and ``State.x#1``). A temporary freed
  and allocated again every step keeps slot 0 (it plays the same part every time, wherever the allocator put
  it); an allocation kept alive per step takes 0, 1, 2, ... (a real per-call allocation stays visible);
- its *name*, read lazily from the allocating statement (:mod:`launchtrace.allocsite`): ``State.x`` for
  ``self.x = ...`` in a method of ``State``, ``Trainer.step.tmp`` for a local, the caller's target for a
  factory, else the first kernel parameter it was passed as; a gradient allocated by Warp for an array is
  ``<that array's name>.grad``.

:meth:`AllocationRegistry.label` gives ``"State.x#1 (springs.py:41)"``: the identity (``State.x#1``: what
topology comparisons use, free of line numbers so that an edit above it does not rename it) and the site.

Entries hold no reference to their array (a weak one with a callback notes the death); dead ones are pruned
once no pending event can refer to them, as the owner registry does.

Example::

    from launchtrace.allocations import ALLOCATIONS
    hit = ALLOCATIONS.locate(x.ptr, rawevent.next_seq())
    ALLOCATIONS.label(hit[0], "integrate", "x")  # "State.x (springs.py:41)"
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
import os
import threading
import time
import weakref
from typing import Any

from launchtrace import rawevent

__all__ = ["ALLOCATIONS", "AllocSite", "Allocation", "AllocationRegistry", "SlotPool", "grad_parent", "identity_of"]

_NEVER = 1 << 62
_ticks = itertools.count(1)


class SlotPool:
    """The slots of one allocating statement (code and line): the smallest number no live allocation made by
    it holds. Shared by every :class:`AllocSite` of that statement, whoever called it, so that two live arrays
    allocated by one statement (two ``State`` objects: ``self.x = ...`` ran twice) never share a name."""

    __slots__ = ("code", "free", "lock", "next")

    def __init__(self, code: Any) -> None:
        self.code = code  # kept alive: its id is part of the pool's key
        self.free: list[int] = []  # a heap of released slots
        self.next = 0
        self.lock = threading.Lock()

    def take(self) -> int:
        with self.lock:
            if self.free:
                return heapq.heappop(self.free)
            slot = self.next
            self.next += 1
            return slot

    def release(self, slot: int) -> None:
        # Runs in a weakref callback (any thread, possibly inside the collector): no lock, one C call.
        heapq.heappush(self.free, slot)


class AllocSite:
    """One allocating place: the user frame's code and line, and its caller's (``None`` at the top level): the
    caller names what a factory's ``return wp.zeros(n)`` allocates. Slots come from the statement's
    :class:`SlotPool`."""

    __slots__ = ("back_code", "back_line", "code", "line", "name", "pool")

    def __init__(self, code: Any, line: int, back_code: Any, back_line: int, pool: SlotPool) -> None:
        self.code, self.line, self.back_code, self.back_line = code, line, back_code, back_line
        self.pool = pool
        self.name: str | None = None  # computed on first use (allocsite), "" when none is found

    def take(self) -> int:
        return self.pool.take()

    def release(self, slot: int) -> None:
        heapq.heappush(self.pool.free, slot)  # as SlotPool.release, one call less in a weakref callback


class Allocation:
    """One Warp allocation: ``[start, end)`` live in sequence numbers ``[born, died)``."""

    __slots__ = ("born", "died", "died_at", "end", "label_text", "parent", "site", "slot", "start")

    def __init__(self, start: int, end: int, born: int, site: AllocSite | None, slot: int, parent: Any) -> None:
        self.start, self.end, self.born = start, end, born
        self.site, self.slot, self.parent = site, slot, parent
        self.died = _NEVER
        self.died_at = 0.0
        self.label_text: str | None = None

    def live_at(self, seq: int) -> bool:
        return self.born <= seq < self.died


_grad_of = threading.local()


def grad_parent() -> Any:
    """The array whose gradient is being allocated on this thread (``array._alloc_grad``), else ``None``."""
    return getattr(_grad_of, "array", None)


def set_grad_parent(array: Any) -> Any:
    """Mark gradient allocation for ``array`` on this thread; returns the previous mark (restore it after)."""
    previous = getattr(_grad_of, "array", None)
    _grad_of.array = array
    return previous


class AllocationRegistry:
    """Warp allocations over time, asked by pointer and sequence number (see the module docstring).

    Writers (allocations) hold a lock; readers (:meth:`locate`) never do: an exact start is a dict look-up,
    an interior pointer (a view with an offset) a binary search over the starts, rebuilt lazily after new ones.
    """

    prune_every = 1024  # allocations between pruning passes
    grace_s = 5.0  # a dead entry is kept at least this long (events drained but not yet materialised)
    max_sites = 100_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_start: dict[int, list[Allocation]] = {}
        self._starts: list[int] = []
        self._starts_dirty = False
        self._longest = 0
        self._sites: dict[tuple, AllocSite] = {}
        self._pools: dict[tuple, SlotPool] = {}  # (id(code), line) -> the statement's slots
        self._refs: dict[int, tuple[weakref.ref, Allocation]] = {}  # id(weak ref to the array) -> (it, entry)
        self._dead: list[Allocation] = []  # died, not yet pruned
        self._version = 0
        self._last_seq = 0
        self._since_prune = 0

    # -- writing -------------------------------------------------------------------------------------
    def allocated(self, array: Any, ptr: int, nbytes: int, site: AllocSite | None, parent: Any = None) -> None:
        """Note a new allocation of ``array`` at ``[ptr, ptr + nbytes)`` made at ``site`` (``parent``: the
        array it is the gradient of, whose allocation then names it)."""
        parent_entry = None
        if parent is not None:
            pptr = getattr(parent, "ptr", 0) or 0
            parent_entry = self._live_exact(pptr) if pptr else None
        slot = site.take() if site is not None and parent_entry is None else 0
        try:
            ref = weakref.ref(array, self._died)
        except TypeError:
            if site is not None and parent_entry is None:
                site.release(slot)
            return
        end = ptr + max(int(nbytes), 1)
        with self._lock:
            self._version = next(_ticks)
            seq = rawevent.next_seq()
            entry = Allocation(ptr, end, seq, site, slot, parent_entry)
            self._refs[id(ref)] = (ref, entry)
            found = self._by_start.get(ptr)
            if found is None:
                self._by_start[ptr] = [entry]
                self._starts_dirty = True
            else:
                found.append(entry)
            if end - ptr > self._longest:
                self._longest = end - ptr
            self._last_seq = seq
            self._since_prune += 1
            self._version = next(_ticks)
        if self._since_prune >= self.prune_every:
            self.prune()

    def _died(self, ref: weakref.ref) -> None:
        """An array died (a weakref callback: any thread, possibly inside the collector; plain stores and
        single C calls only, no lock)."""
        held = self._refs.pop(id(ref), None)
        if held is None:
            return
        entry = held[1]
        self._version = next(_ticks)  # before and after: a reader caching answers sees a change begin
        entry.died = self._last_seq = rawevent.next_seq()
        entry.died_at = time.monotonic()
        if entry.site is not None and entry.parent is None:
            entry.site.release(entry.slot)
        self._dead.append(entry)
        self._version = next(_ticks)

    def site(self, code: Any, line: int, back_code: Any, back_line: int) -> AllocSite:
        """The :class:`AllocSite` of these frames (one object per distinct place, code objects kept alive so
        that their ids are not reused)."""
        key = (id(code), line, id(back_code), back_line)
        hit = self._sites.get(key)
        if hit is None or hit.code is not code or hit.back_code is not back_code:
            if len(self._sites) >= self.max_sites:
                self._sites.clear()
                # pools whose statement still has live allocations stay: a new pool would hand out their slots again
                self._pools = {k: p for k, p in self._pools.items() if p.next > len(p.free)}
            pool_key = (id(code), line)
            pool = self._pools.get(pool_key)
            if pool is None or pool.code is not code:
                pool = self._pools[pool_key] = SlotPool(code)
            hit = self._sites[key] = AllocSite(code, line, back_code, back_line, pool)
        return hit

    def clear(self) -> None:
        """Forget everything (tests)."""
        with self._lock:
            self._version = next(_ticks)
            self._by_start = {}
            self._starts = []
            self._sites = {}
            self._pools = {}
            self._refs = {}
            self._dead = []
            self._version = next(_ticks)

    # -- reading -------------------------------------------------------------------------------------
    def changed(self) -> int:
        """A tick that moves on every allocation and every death (before and after the change)."""
        return self._version

    def last_change_seq(self) -> int:
        """The sequence number of the latest allocation or death: between two moves of :meth:`changed`,
        :meth:`locate` answers the same for every ``seq`` at or after it."""
        return self._last_seq

    def _live_exact(self, ptr: int) -> Allocation | None:
        found = self._by_start.get(ptr)
        if found:
            for e in reversed(found):
                if e.died == _NEVER:
                    return e
        return None

    def locate(self, ptr: int, seq: int) -> tuple[Allocation, int] | None:
        """``(allocation, byte offset)`` of the allocation that held ``ptr`` at ``seq``, else ``None``.
        Thread-safe and lock-free."""
        found = self._by_start.get(ptr)
        if found:
            e = _live_in(found, seq)
            if e is not None:
                return e, 0
        if not self._by_start:
            return None
        starts = self._sorted_starts()
        i = bisect.bisect_right(starts, ptr)
        floor = ptr - self._longest
        by_start = self._by_start
        while i > 0:
            i -= 1
            start = starts[i]
            if start < floor:
                break
            entries = by_start.get(start)
            e = _live_in(entries, seq) if entries else None
            if e is not None and ptr < e.end:
                return e, ptr - start
        return None

    def _sorted_starts(self) -> list[int]:
        if self._starts_dirty:
            self._starts_dirty = False  # before reading: a new start meanwhile sets it again
            self._starts = sorted(self._by_start)
        return self._starts

    def __len__(self) -> int:
        return sum(len(v) for v in list(self._by_start.values()))

    # -- naming --------------------------------------------------------------------------------------
    def label(self, entry: Allocation, kernel: str = "", param: str = "", keep: bool = True) -> str:
        """``"<identity> (<file>:<line>)"`` of ``entry``; ``kernel`` / ``param``: the use it is being labelled
        for (names an allocation whose statement assigns it to nothing). Computed once per entry; with
        ``keep=False`` (a use that names nothing: Warp's own fill inside ``wp.zeros``) a label that depends on
        the use is not kept, so the first real use still names it."""
        text = entry.label_text
        if text is None:
            from launchtrace.allocsite import label_of, names_itself  # the source reading: only once asked

            text = label_of(entry, kernel, param)
            if keep or names_itself(entry):
                entry.label_text = text
        return text

    # -- pruning -------------------------------------------------------------------------------------
    def prune(self) -> int:
        """Drop dead entries no pending record can refer to; returns how many were dropped. Visits only the
        entries that died since (``_dead``), not every live one."""
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            self._since_prune = 0
            horizon = rawevent.oldest_pending()
            cutoff = time.monotonic() - self.grace_s
            n = len(self._dead)
            dead = self._dead[:n]
            del self._dead[:n]  # one C call: a death noted meanwhile (appended) stays for the next pass
            kept: list[Allocation] = []
            gone: dict[int, set[int]] = {}
            for e in dead:
                if e.died < horizon and e.died_at < cutoff:
                    gone.setdefault(e.start, set()).add(id(e))
                else:
                    kept.append(e)
            self._dead.extend(kept)
            if not gone:
                return 0
            self._version = next(_ticks)
            by_start = self._by_start
            for start, ids in gone.items():
                entries = by_start.get(start)
                if entries is None:
                    continue
                left = [e for e in entries if id(e) not in ids]  # a new list: readers keep a consistent one
                if left:
                    by_start[start] = left
                else:
                    del by_start[start]
                    self._starts_dirty = True
            self._version = next(_ticks)
            return sum(map(len, gone.values()))
        finally:
            self._lock.release()


_born = operator.attrgetter("born")


def _live_in(entries: list[Allocation], seq: int) -> Allocation | None:
    """The entry of one start address live at ``seq``: the last one born at or before it, if not yet dead.
    One address holds one allocation at a time, so no earlier one can be (a binary search, however often the
    allocator handed the address out again)."""
    last = entries[-1]
    if last.born <= seq:  # the common case: the latest allocation at this address
        return last if seq < last.died else None
    j = bisect.bisect_right(entries, seq, key=_born)
    if j == 0:
        return None
    e = entries[j - 1]
    return e if seq < e.died else None


def identity_of(label: str | None) -> str | None:
    """The identity part of an allocation label (``"State.x#1 (springs.py:41)"`` -> ``"State.x#1"``): what
    topology comparisons use, so that moving the statement to another line does not rename the buffer."""
    if label is None:
        return None
    head, sep, tail = label.rpartition(" (")
    return head if sep and tail.endswith(")") else label


ALLOCATIONS = AllocationRegistry()
"""The process-wide allocation registry the capture layer fills and the materializer asks."""


def _locks_after_fork() -> None:
    """A forked child gets fresh locks: one held by another thread of the parent at the fork is never released
    in the child, and the child's first allocation would wait on it forever."""
    ALLOCATIONS._lock = threading.Lock()
    for pool in list(ALLOCATIONS._pools.values()):
        pool.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_locks_after_fork)
