"""Who owns a device pointer: buffer sets, reachability, and the process-wide owner registry.

A raw pointer says nothing across runs or machines; ``("gen.state.x", 128)`` does. Three pieces give pointers
their names:

- :class:`BufferSet`: address ranges with labels, queried with :meth:`BufferSet.locate` (innermost range wins
  when ranges overlap, e.g. a view inside its parent).
- :func:`buffers_of`: every ``wp.array`` reachable from some objects (attributes, ``__slots__``, dataclass and
  ``wp.struct`` fields, mappings, sequences, closures, bound methods), labelled by the path that reached it.
- :func:`own` / :func:`disown` and the singleton :data:`OWNERS`: a registry the capture layer asks, when it
  turns raw events into records, which label covered a pointer at the event's sequence number. Entries hold
  only a weak reference to their array and end when the array dies, so a freed address that gets reused by a
  new, unowned array is not mislabelled, while a record made before the free still resolves to the old label.

Example::

    import launchtrace
    sim = Simulation(device="cpu")
    launchtrace.own(sim, "sim")          # every array reachable from sim is labelled "sim.<path>"
    launchtrace.ownership.OWNERS.locate(sim.x.ptr + 8, launchtrace.rawevent.next_seq())
    # -> ("sim.x", 8)
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
import sys
import threading
import time
import types
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import warp as wp

from launchtrace import rawevent

__all__ = ["OWNERS", "BufferSet", "OwnerRegistry", "array_extent", "buffers_of", "disown", "own", "walk_arrays"]

_log = logging.getLogger(__name__)

_NEVER = 1 << 62  # "still alive" as a sequence number


# ---------------------------------------------------------------------------------------------------------
# Address ranges
# ---------------------------------------------------------------------------------------------------------


def _is_warp_module(module: str) -> bool:
    return module == "warp" or module.startswith("warp.")


def array_extent(array: Any) -> tuple[int, int]:
    """``(pointer, bytes)`` of the memory an array spans (``(0, 0)`` for a null array).

    A contiguous array spans its ``capacity``; a strided view spans from its first to its last element (its
    ``capacity`` is its parent's, which would reach past the parent's end).
    """
    ptr = int(getattr(array, "ptr", 0) or 0)
    if not ptr:
        return 0, 0
    item = int(wp.types.type_size_in_bytes(array.dtype))
    if getattr(array, "is_contiguous", True):
        size = int(getattr(array, "capacity", 0) or 0) or int(array.size) * item
    else:
        size = item + sum((n - 1) * abs(s) for n, s in zip(array.shape, array.strides) if n > 0)
    return ptr, max(size, 1)


def _default_label(array: Any) -> str:
    return f"<{getattr(array.dtype, '__name__', array.dtype)}[{array.shape}]>"


class BufferSet:
    """A set of device buffers (address ranges with labels) that pointers can be checked against.

    Build one with :func:`buffers_of`, or :meth:`add` arrays yourself. :meth:`locate` is a binary search plus
    a short backward scan bounded by the longest range, so it stays fast with thousands of buffers.

    Example::

        owned = BufferSet().add(x, "x").add(v, "v")
        owned.locate(x.ptr + 4)  # ("x", 4)
        v.ptr in owned           # True
    """

    __slots__ = ("_ends", "_labels", "_longest", "_orders", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []  # sorted
        self._ends: list[int] = []
        self._labels: list[str] = []
        self._orders: list[int] = []  # insertion order: breaks ties between ranges of equal size
        self._longest = 0

    def add(self, array: Any, label: str = "") -> BufferSet:
        """Add ``array``'s address range (a null array is ignored); returns the set itself."""
        ptr, size = array_extent(array)
        if ptr:
            self.add_range(ptr, size, label or _default_label(array))
        return self

    def add_range(self, ptr: int, nbytes: int, label: str) -> BufferSet:
        """Add the range ``[ptr, ptr + nbytes)`` under ``label``; returns the set itself."""
        ptr, nbytes = int(ptr), max(int(nbytes), 1)
        i = bisect.bisect_right(self._starts, ptr)
        self._starts.insert(i, ptr)
        self._ends.insert(i, ptr + nbytes)
        self._labels.insert(i, label)
        self._orders.insert(i, len(self._orders))
        self._longest = max(self._longest, nbytes)
        return self

    def update(self, other: BufferSet) -> BufferSet:
        """Add every range of ``other``; returns the set itself."""
        for start, end, label in other.ranges():
            self.add_range(start, end - start, label)
        return self

    def locate(self, ptr: int) -> tuple[str, int] | None:
        """``(label, byte offset)`` of the buffer holding ``ptr`` (the innermost one when buffers overlap,
        the one added last among ranges of equal size), or ``None``."""
        ptr = int(ptr)
        starts, ends, orders = self._starts, self._ends, self._orders
        i = bisect.bisect_right(starts, ptr)
        floor = ptr - self._longest
        best = -1
        best_size = 0
        while i > 0:
            i -= 1
            start = starts[i]
            if start < floor:
                break
            if ptr < ends[i]:
                size = ends[i] - start
                if best < 0 or size < best_size or (size == best_size and orders[i] > orders[best]):
                    best, best_size = i, size
        return None if best < 0 else (self._labels[best], ptr - starts[best])

    def ranges(self) -> list[tuple[int, int, str]]:
        """``(start, end, label)`` of every buffer, in address order."""
        return list(zip(self._starts, self._ends, self._labels))

    def labels(self) -> list[str]:
        """The label of every buffer in the set, in address order."""
        return list(self._labels)

    def __contains__(self, ptr: object) -> bool:
        return isinstance(ptr, (int, np.integer)) and self.locate(int(ptr)) is not None

    def __len__(self) -> int:
        return len(self._starts)

    def __bool__(self) -> bool:
        return True  # an empty set is still a set to check against (``if buffers:`` must not skip it)

    def __repr__(self) -> str:
        return f"BufferSet({len(self)} buffers)"


# ---------------------------------------------------------------------------------------------------------
# Reachability
# ---------------------------------------------------------------------------------------------------------

_SKIP_TYPES = (
    str,
    bytes,
    bytearray,
    memoryview,
    int,
    float,
    complex,
    bool,
    type(None),
    type,
    range,
    types.ModuleType,
    types.BuiltinFunctionType,
    types.CodeType,
    types.FrameType,
    np.ndarray,
    np.generic,
)


def _struct_fields(value: Any) -> list[str] | None:
    """The field names of a ``wp.struct`` instance, else ``None``."""
    cls = type(value)
    fields = getattr(getattr(cls, "_cls", None), "vars", None)
    if isinstance(fields, Mapping) and _is_warp_module(getattr(cls, "__module__", "") or ""):
        return list(fields)
    return None


def _attributes(obj: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        attrs.update(d)
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            if f.name not in attrs and hasattr(obj, f.name):
                attrs[f.name] = getattr(obj, f.name)
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ()) or ()
        for slot in (slots,) if isinstance(slots, str) else slots:
            if isinstance(slot, str) and slot not in attrs and slot not in ("__dict__", "__weakref__"):
                try:
                    attrs[slot] = getattr(obj, slot)
                except AttributeError:
                    continue
    return attrs


def walk_arrays(objects: Sequence[Any], roots: Sequence[str], max_depth: int = 10) -> Iterator[tuple[str, Any]]:
    """``(path, array)`` of each distinct ``wp.array`` reachable from ``objects`` (see :func:`buffers_of`)."""
    seen: set[int] = set()
    stack: list[tuple[Any, str, int]] = [(o, r, 0) for o, r in reversed(list(zip(objects, roots)))]
    while stack:
        obj, path, depth = stack.pop()
        if isinstance(obj, wp.array):
            if id(obj) not in seen:
                seen.add(id(obj))
                yield path, obj
                grad = obj.grad  # the adjoint launches, tape.zero() and the optimizers write it
                if isinstance(grad, wp.array) and id(grad) not in seen:
                    stack.append((grad, f"{path}.grad", depth))
            continue
        if depth > max_depth or isinstance(obj, _SKIP_TYPES) or id(obj) in seen:
            continue
        seen.add(id(obj))
        children = _children(obj, path)
        stack.extend((child, p, depth + 1) for child, p in reversed(children))


def _children(obj: Any, path: str) -> list[tuple[Any, str]]:
    """The objects one level below ``obj`` that :func:`walk_arrays` enters, with their paths."""
    fields = _struct_fields(obj)
    if fields is not None:
        return [(getattr(obj, name, None), f"{path}.{name}") for name in fields]
    module = getattr(type(obj), "__module__", "") or ""
    if module.startswith(_OPTIM_MODULES):  # Adam's moments m / v, SGD's momentum b: not the params themselves
        return [(v, f"{path}.{k}") for k, v in _attributes(obj).items() if k not in _OPTIM_SKIP]
    if _is_warp_module(module) or module.startswith(("torch", "tinygrad")):  # tinygrad: tinygrad_ownership.py
        data = getattr(obj, "data", None)  # wp.indexedarray: enter its data array only
        return [(data, f"{path}.data")] if isinstance(data, wp.array) else []
    if isinstance(obj, types.MethodType):
        return [(obj.__self__, f"{path}.__self__")]
    if isinstance(obj, types.FunctionType):
        out = []
        for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
            try:
                out.append((cell.cell_contents, f"{path}.<{name}>"))
            except ValueError:  # an empty cell
                continue
        return out
    if isinstance(obj, Mapping):
        return [(v, f"{path}[{k!r}]") for k, v in list(obj.items())]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [(v, f"{path}[{i}]") for i, v in enumerate(list(obj))]
    return [(v, f"{path}.{k}") for k, v in _attributes(obj).items()]


_OPTIM_MODULES = ("warp._src.optim.", "warp.optim.")
_OPTIM_SKIP = frozenset(("params",))
"""A Warp optimizer's ``params`` are the arrays it updates: the user's, owned (and labelled) with the problem
they belong to, so an optimizer's walk leaves them out (a later ``own`` would otherwise relabel them)."""


def _roots(objects: tuple, root: str | Sequence[str] | None) -> list[str]:
    if isinstance(root, str):
        return [root] if len(objects) == 1 else [f"{root}{i}" for i in range(len(objects))]
    if root is None:
        return [f"obj{i}" for i in range(len(objects))]
    roots = list(root)
    if len(roots) != len(objects):
        raise ValueError(f"root: {len(roots)} labels for {len(objects)} objects")
    return roots


def buffers_of(*objects: Any, root: str | Sequence[str] | None = None, max_depth: int = 10) -> BufferSet:
    """Every ``wp.array`` reachable from ``objects``, labelled by the path that reached it.

    Reached through attributes (``__dict__`` and ``__slots__``), dataclass fields, ``wp.struct`` fields,
    mappings, sequences, the variables a function closes over and the object a bound method is bound to, up to
    ``max_depth`` levels. Warp objects other than arrays and structs (devices, streams, graphs, kernels; a
    ``wp.indexedarray`` contributes its ``.data``), modules, types, a function's globals and numpy data are
    not entered.

    ``root``: the label prefix of each object (one string for one object; ``"<root><i>"`` for several; a
    sequence gives one per object; default ``"obj0"``, ``"obj1"``, ...).

    Example::

        owned = buffers_of(sim, root="sim")
        owned.labels()  # ["sim.x", "sim.v", "sim.params.gravity", ...] in address order
    """
    out = BufferSet()
    for path, array in walk_arrays(objects, _roots(objects, root), max_depth):
        out.add(array, path)
    return out


# ---------------------------------------------------------------------------------------------------------
# The owner registry
# ---------------------------------------------------------------------------------------------------------


class _Entry:
    """One owned array: its label, live in sequence numbers ``[born, died)``."""

    __slots__ = ("__weakref__", "born", "died", "died_at", "group", "label", "range", "ref")

    def __init__(self, label: str, group: _Group, born: int, rng: _Range) -> None:
        self.label, self.group, self.born, self.range = label, group, born, rng
        self.died = _NEVER
        self.died_at = 0.0  # time.monotonic() of the death, for the pruning grace period
        self.ref: weakref.ref | None = None

    def end_now(self, seq: int | None = None) -> bool:
        # Runs in weakref callbacks (any thread, possibly inside GC): plain attribute stores only, no lock.
        if self.died != _NEVER:
            return False
        registry = self.group.registry
        registry._version = next(_versions)  # before and after: a reader caching answers sees a change begin
        self.died = rawevent.next_seq() if seq is None else seq
        self.died_at = time.monotonic()
        self.range.dirty = True
        registry._changed = next(_ticks)
        registry._version = next(_versions)
        return True


class _Range:
    """Every entry ever registered for one address range ``[start, end)``, in the order they were born.

    An address reused by the allocator gets a new entry in the same range, so a look-up finds the entry live
    at a sequence number by binary search over the births, and ``pmax`` (the running maximum of the deaths,
    recomputed lazily after a death) stops the walk back as soon as nothing older can still be live.
    """

    __slots__ = ("borns", "dirty", "end", "entries", "pmax", "start")

    def __init__(self, start: int, end: int, entries: list[_Entry] | None = None) -> None:
        self.start, self.end = start, end
        self.entries: list[_Entry] = entries or []  # appended under the registry lock; readers tolerate it
        self.borns: list[int] = [e.born for e in self.entries]
        self.pmax: list[int] = []
        self.dirty = True

    def add(self, entry: _Entry) -> None:
        self.entries.append(entry)  # entries first: a reader bounds itself by the shorter list
        self.borns.append(entry.born)
        self.dirty = True

    def _prefix_max(self) -> list[int]:
        self.dirty = False  # before reading: a death meanwhile sets it again
        out, top = [], 0
        for e in list(self.entries):
            top = max(top, e.died)
            out.append(top)
        self.pmax = out
        return out

    def live_at(self, seq: int) -> _Entry | None:
        """The latest-born entry live at ``seq``, or ``None``."""
        entries, borns = self.entries, self.borns
        n = min(len(entries), len(borns))
        if n:
            last = entries[n - 1]  # the common case: the latest registration, still live
            if last.born <= seq < last.died:
                return last
        j = bisect.bisect_right(borns, seq, 0, n) - 1
        if j < 0:
            return None
        pmax = self.pmax
        if self.dirty or len(pmax) <= j:
            pmax = self._prefix_max()
        while j >= 0 and pmax[j] > seq:  # some entry at or before j is still live at seq
            e = entries[j]
            if e.died > seq:
                return e
            j -= 1
        return None


class _Group:
    """One :func:`own` call: live from its call until :func:`disown` or the death of its last array."""

    __slots__ = ("born", "disowned", "entries", "label", "registry")

    def __init__(self, label: str, born: int, registry: OwnerRegistry) -> None:
        self.label, self.born, self.registry = label, born, registry
        self.disowned = _NEVER
        self.entries: list[_Entry] = []

    def end(self) -> int:
        if self.disowned != _NEVER or not self.entries:
            return self.disowned
        return max(e.died for e in self.entries)


_ticks = itertools.count(1)
_versions = itertools.count(1)  # registry versions for readers that cache answers (see OwnerRegistry.changed)


def _entry_died(entry_ref: weakref.ref) -> Any:
    def callback(_array_ref: weakref.ref) -> None:
        entry = entry_ref()
        if entry is not None:
            entry.end_now()

    return callback


@dataclasses.dataclass(frozen=True)
class _Snapshot:
    """The address ranges in start order, swapped in whole so readers never lock."""

    starts: tuple[int, ...] = ()
    ranges: tuple[_Range, ...] = ()
    longest: int = 0


class OwnerRegistry:
    """Labels of owned arrays over time, asked by sequence number.

    Writers (:meth:`own`, :meth:`disown`, pruning) hold a lock; a new address range swaps in a new immutable
    snapshot of the sorted ranges, a reused one just gets one more entry. Readers (:meth:`locate`,
    :meth:`any_at`) never lock. An array's death is noted by a weakref callback that only stores the current
    sequence number; dead entries stay queryable for records made before the death and are pruned lazily once
    no open bus subscription can still deliver such a record.

    Example::

        reg = OwnerRegistry()
        reg.own(sim, "sim")
        reg.locate(sim.x.ptr, rawevent.next_seq())  # ("sim.x", 0)
    """

    prune_every = 256  # changes between pruning passes
    grace_s = 5.0  # a dead entry is kept at least this long (covers events drained but not yet materialised)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snap = _Snapshot()
        self._by_extent: dict[tuple[int, int], _Range] = {}
        self._groups: list[_Group] = []
        self._changed = 0
        self._last_change_seq = 0  # see last_change_seq(): only grows (pruned entries stay counted)
        self._version = 0  # see changed(): moves before and after every change
        self._intervals: tuple[tuple[int, int], ...] = ()
        self._intervals_at = -1
        self._pruned_at = 0

    # -- writing -------------------------------------------------------------------------------------
    def own(self, obj: Any, label: str, max_depth: int = 10) -> BufferSet:
        """Label every ``wp.array`` reachable from ``obj`` as ``"<label><path>"`` from now until the array
        dies or :meth:`disown`; returns those buffers as a :class:`BufferSet`."""
        if not isinstance(label, str) or not label:
            raise ValueError(f"label must be a non-empty string, got {label!r}")
        found = list(walk_arrays((obj,), (label,), max_depth))
        owned = BufferSet()
        with self._lock:
            self._version = next(_versions)  # before and after (see changed())
            group = _Group(label, rawevent.next_seq(), self)
            new_ranges = False
            for path, array in found:
                ptr, size = array_extent(array)
                if not ptr:
                    continue
                owned.add_range(ptr, size, path)
                rng = self._by_extent.get((ptr, ptr + size))
                if rng is None:
                    rng = self._by_extent[(ptr, ptr + size)] = _Range(ptr, ptr + size)
                    new_ranges = True
                elif any(e.died == _NEVER and e.label == path and e.ref() is array for e in rng.entries[-8:]):
                    continue  # owned already under the same label
                entry = _Entry(path, group, group.born, rng)
                try:
                    entry.ref = weakref.ref(array, _entry_died(weakref.ref(entry)))
                except TypeError:
                    _log.warning("ownership: %s cannot be weakly referenced; not registered", path)
                    continue
                group.entries.append(entry)
                rng.add(entry)
            self._groups.append(group)
            if new_ranges:
                self._install()
            self._changed = next(_ticks)
            self._version = next(_versions)
        if not len(owned):
            cls = type(obj)
            _log.warning(
                "launchtrace.own(<%s.%s>, %r): no wp.array with memory is reachable from it (within %d levels); "
                "nothing labelled",
                cls.__module__,
                cls.__qualname__,
                label,
                max_depth,
            )
        return owned

    def disown(self, obj_or_label: Any) -> int:
        """End the labels of every array reachable from ``obj`` (or registered under root ``label``);
        returns how many entries ended."""
        with self._lock:
            self._version = next(_versions)  # before and after (see changed())
            now = rawevent.next_seq()
            ended = 0
            if isinstance(obj_or_label, str):
                for group in self._groups:
                    if group.label == obj_or_label and group.disowned == _NEVER:
                        group.disowned = now
                        ended += sum(e.end_now(now) for e in group.entries)
            else:
                for _, array in walk_arrays((obj_or_label,), ("",)):
                    ptr, size = array_extent(array)
                    rng = self._by_extent.get((ptr, ptr + size))
                    if rng is not None:
                        ended += sum(e.end_now(now) for e in rng.entries if e.ref is not None and e.ref() is array)
            self._changed = next(_ticks)
            self._version = next(_versions)
            return ended

    def clear(self) -> None:
        """Forget everything (tests)."""
        with self._lock:
            self._version = next(_versions)
            self._groups = []
            self._by_extent = {}
            self._install()
            self._changed = next(_ticks)
            self._version = next(_versions)

    def _install(self) -> None:
        ranges = sorted(self._by_extent.values(), key=lambda r: (r.start, r.end))
        self._snap = _Snapshot(
            tuple(r.start for r in ranges), tuple(ranges), max((r.end - r.start for r in ranges), default=0)
        )

    # -- reading -------------------------------------------------------------------------------------
    def changed(self) -> int:
        """A tick that moves whenever the registry changes (own, disown, an array's death, pruning), before
        and after the change, so a reader that caches answers (the materializer) can tell it must drop them."""
        return self._version

    def last_change_seq(self) -> int:
        """The largest sequence number at which a registration began or ended so far. Between two moves of
        :meth:`changed`, :meth:`locate` and :meth:`any_at` answer the same for every ``seq`` at or after it."""
        with self._lock:
            top = self._last_change_seq
            for group in self._groups:
                top = max(top, group.born)
                if group.disowned != _NEVER:
                    top = max(top, group.disowned)
                for e in group.entries:
                    if e.died != _NEVER and e.died > top:
                        top = e.died
            self._last_change_seq = top
            return top

    def locate(self, ptr: int, seq: int) -> tuple[str, int] | None:
        """``(label, byte offset)`` of the innermost entry holding ``ptr`` that was live at ``seq`` (the one
        registered last among equal ranges), else ``None``. Thread-safe and lock-free."""
        snap = self._snap
        if not snap.ranges:
            return None
        if self._changed - self._pruned_at >= self.prune_every:
            self.prune()
        starts, ranges = snap.starts, snap.ranges
        i = bisect.bisect_right(starts, ptr)
        floor = ptr - snap.longest
        best: _Entry | None = None
        best_size = 0
        while i > 0:
            i -= 1
            rng = ranges[i]
            if rng.start < floor:
                break
            if ptr >= rng.end:
                continue
            size = rng.end - rng.start
            if best is not None and size > best_size:
                continue
            entries = rng.entries
            e = entries[-1] if entries else None  # inlined fast path: the latest registration, still live
            if e is None or not (e.born <= seq < e.died):
                e = rng.live_at(seq)
            if e is not None and (best is None or size < best_size or e.born > best.born):
                best, best_size = e, size
        return None if best is None else (best.label, ptr - best.range.start)

    def any_at(self, seq: int) -> bool:
        """Whether any :func:`own` registration was live at ``seq`` (tells a foreign pointer from a program
        that labels nothing)."""
        if not self._groups:
            return False
        intervals = self._intervals
        if self._intervals_at != self._changed:
            intervals = self._merge_intervals()
        i = bisect.bisect_right(intervals, (seq, _NEVER + 1))
        return i > 0 and seq < intervals[i - 1][1]

    def _merge_intervals(self) -> tuple[tuple[int, int], ...]:
        at = self._changed
        spans = sorted((g.born, g.end()) for g in list(self._groups))
        merged: list[list[int]] = []
        for born, end in spans:
            if end <= born:
                continue
            if merged and born <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([born, end])
        intervals = tuple((a, b) for a, b in merged)
        self._intervals, self._intervals_at = intervals, at
        return intervals

    def __len__(self) -> int:
        """Entries currently kept (live and not yet pruned dead ones)."""
        return sum(len(r.entries) for r in self._snap.ranges)

    def live_labels(self) -> list[str]:
        """Labels of the entries whose arrays are alive and owned now, in address order."""
        return [e.label for r in self._snap.ranges for e in list(r.entries) if e.died == _NEVER]

    # -- pruning -------------------------------------------------------------------------------------
    def prune(self) -> int:
        """Drop dead entries no pending record can refer to; returns how many were dropped."""
        if not self._lock.acquire(blocking=False):
            return 0  # another thread is writing or pruning
        try:
            self._pruned_at = self._changed
            horizon = rawevent.oldest_pending()
            cutoff = time.monotonic() - self.grace_s
            dropped = 0
            by_extent: dict[tuple[int, int], _Range] = {}
            for extent, rng in self._by_extent.items():
                keep = [e for e in rng.entries if not (e.died < horizon and e.died_at < cutoff)]
                dropped += len(rng.entries) - len(keep)
                if len(keep) == len(rng.entries):
                    by_extent[extent] = rng
                elif keep:  # a new range object: readers holding the old one keep consistent lists
                    fresh = by_extent[extent] = _Range(rng.start, rng.end, keep)
                    for e in keep:
                        e.range = fresh
            if dropped:
                self._by_extent = by_extent
                self._install()
                self._groups = [g for g in self._groups if not _group_gone(g, horizon, cutoff)]
                self._changed = next(_ticks)
                self._version = next(_versions)
                self._pruned_at = self._changed
            return dropped
        finally:
            self._lock.release()


def _group_gone(group: _Group, horizon: int, cutoff: float) -> bool:
    return group.end() < horizon and all(e.died != _NEVER and e.died_at < cutoff for e in group.entries)


OWNERS = OwnerRegistry()
"""The process-wide owner registry the capture layer consults."""


def own(obj: Any, label: str, max_depth: int = 10) -> BufferSet:
    """Label every ``wp.array`` reachable from ``obj`` (see :func:`buffers_of`) as ``"<label>.<path>"``.

    From now on, records whose array arguments fall inside those arrays carry the label and the byte offset
    (``BufferArg.owner`` / ``.offset``); a pointer outside every owned array is marked foreign. A label ends
    when its array is garbage collected (the registry holds no strong reference) or on :func:`disown`.

    Example::

        import launchtrace
        launchtrace.own(sim, "sim")
        with launchtrace.testing.trace_launches() as trace:
            sim.step()
        trace[0].buffers[0].owner  # "sim.x"
    """
    owned = OWNERS.own(obj, label, max_depth)
    if "tinygrad" in sys.modules:  # tinygrad's tensors: their own registry (launchtrace.tinygrad_ownership)
        from launchtrace.tinygrad_ownership import OWNERS as TINYGRAD_OWNERS
        from launchtrace.tinygrad_ownership import is_tinygrad_object

        if is_tinygrad_object(obj):
            TINYGRAD_OWNERS.own(obj, label)
    return owned


def disown(obj_or_label: Any) -> int:
    """End the labels :func:`own` gave (by the object, or by its root label); returns how many ended.

    Example::

        launchtrace.disown("sim")
    """
    ended = OWNERS.disown(obj_or_label)
    if "tinygrad" in sys.modules:
        from launchtrace.tinygrad_ownership import OWNERS as TINYGRAD_OWNERS

        ended += TINYGRAD_OWNERS.disown(obj_or_label)
    return ended
