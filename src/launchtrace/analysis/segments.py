"""Traces cut into segments (each occurrence of a scope, or a run of records outside every scope), and what
tells one run from another: the part of :mod:`launchtrace.analysis.diff` that the fleet commands need too.
Both are views of the one rule in :mod:`launchtrace.steps` (a segment is a step that holds records).

Its own module so that ``baseline build`` and ``alert``, which cut traces exactly as ``launchtrace diff`` does,
do not import the diff's alignment and timing statistics at start-up. :mod:`launchtrace.analysis.diff` exports
these names as well.

Example::

    from launchtrace.analysis.segments import segments
    for seg in segments([trace], scope="step"):
        print(seg.name, seg.occurrence, len(seg.records))
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from launchtrace.allocations import identity_of
from launchtrace.fastinit import slot_copier
from launchtrace.model import HOST_DATA, HOST_DATA_APIS, LaunchRecord, TraceData
from launchtrace.steps import NO_SCOPE, Occurrence, occurrences, run_key, split_runs
from launchtrace.topology import AllocRef, slotless

__all__ = [
    "HOST_DATA",
    "HOST_DATA_APIS",
    "NO_SCOPE",
    "RenamedRecords",
    "Segment",
    "renamed_by_order",
    "run_key",
    "segments",
    "split_runs",
    "step_occurrences",
    "top_scope",
    "unowned_by_order",
]

Segment = Occurrence
"""A step as the diff compares it: :class:`launchtrace.steps.Occurrence` (``occurrence`` is its ``index``)."""


def top_scope(trace: TraceData, scope_id: int | None, wanted: str | None) -> int | None:
    """The scope a record belongs to for segmenting: the outermost non-internal scope (named ``wanted``)."""
    found = None
    seen: set[int] = set()
    while scope_id is not None and scope_id in trace.scopes and scope_id not in seen:
        seen.add(scope_id)
        scope = trace.scopes[scope_id]
        if not scope.internal and (wanted is None or scope.name == wanted):
            found = scope_id
        scope_id = scope.parent_id
    return found


def segments(traces: Sequence[TraceData], scope: str | None = None) -> list[Segment]:
    """The steps of ``traces`` that hold records, cut and numbered by the one rule
    (:func:`launchtrace.steps.occurrences`; a step with no records is skipped, the others keep their number).
    With ``scope``, records outside every scope of that name are left out.

    Example::

        for seg in segments([trace], scope="step"):
            print(seg.name, seg.occurrence, len(seg.records))
    """
    return [occ for occ in occurrences(traces, scope) if occ.records]


def step_occurrences(traces: Sequence[TraceData], segs: Sequence[Segment]) -> Iterator[tuple[Segment, int, bool]]:
    """Each segment of ``segs`` that times a step, with the step's occurrence among the steps of its name and
    whether the segment begins that occurrence: a scope whose records were cut in two is one step, a scope still
    open when exported is none, an unscoped run without a timed record none; an inferred step (a zero-code run's
    repeating timers) always is one. The one count :func:`launchtrace.analysis.diff.step_series` and the kernel
    totals of ``summary`` and ``report`` (:func:`launchtrace.analysis.stats.add_step_values`) both take."""
    counts: dict[str, int] = {}
    occurrence_of: dict[tuple[int, int], int] = {}
    for seg in segs:
        if seg.scope_id is not None and (seg.trace, seg.scope_id) in occurrence_of:
            yield seg, occurrence_of[(seg.trace, seg.scope_id)], False
            continue
        if not (seg.scope_id is None and seg.scopes and seg.source is not None):  # not an inferred step
            if seg.scope_id is not None:
                if traces[seg.trace].scopes[seg.scope_id].end_ns <= 0:
                    continue  # still open when exported
            elif not any(r.end_ns > 0 for r in seg.records):
                continue
        occ = counts.get(seg.name, 0)
        counts[seg.name] = occ + 1
        if seg.scope_id is not None:
            occurrence_of[(seg.trace, seg.scope_id)] = occ
        yield seg, occ, True


def unowned_by_order(records: Sequence[LaunchRecord]) -> tuple[LaunchRecord, ...]:
    """``records`` with every unowned array argument made comparable across processes (owned arguments and
    null arrays unchanged):

    - one whose allocation the capture saw (``BufferArg.alloc``) becomes an
      :class:`~launchtrace.topology.AllocRef` of its site's name (``"State.x"``,
      :func:`~launchtrace.topology.slotless`), ``#k`` appended for the k-th distinct allocation of that site
      met in ``records`` (k > 0);
    - the program's own host memory that ``wp.array(numpy_array)`` copies from, or ``array.numpy()`` copies into
      (a copy issued by one of :data:`HOST_DATA_APIS`, the pointer unowned and not allocated by Warp), becomes
      ``"<host data>"`` (:data:`~launchtrace.model.HOST_DATA`, as every view calls it): a temporary NumPy
      buffer whose address the C allocator may hand out again for a later temporary, or not, from one run to
      the next;
    - any other pointer becomes ``"<unowned #k>"``, ``k`` the order in which it first appears in ``records``.

    What stays comparable across processes: which launches share an unowned buffer and where the program
    allocated it, not where the allocator put it, nor whether it reused a freed address. Two runs of one program
    give equal sequences; a launch that now writes another buffer does not.
    """
    return tuple(renamed_by_order(records))


MADE_MAX = 65_536
"""Calls :func:`renamed_by_order` remembers when it compares them by value (records read back from a file)."""


def renamed_by_order(records: Iterable[LaunchRecord], *, by_value: bool = False) -> Iterator[LaunchRecord]:
    """:func:`unowned_by_order`'s records one at a time. ``by_value``: a call met again is told by the
    ``marshal`` bytes of its arrays (records read back from a spill file share no ``arrays`` tuple, and their
    ids are reused once they are let go), and at most :data:`MADE_MAX` are remembered: working one out again
    gives the same names (a pointer or allocation is named the first time it is met)."""
    names: dict[int, str] = {}
    sites: dict[str, dict[str, int]] = {}  # site name -> allocation identity -> order met in
    # a call site's launches share their arrays and buffers tuples, and a pair met again (by a copy of host data
    # or not, as before) names nothing new (its pointers and allocations were named the first time): its arrays
    # are worked out once per call
    made: dict[tuple[Any, int, bool], tuple[Any, tuple, tuple | None]] = {}
    for rec in records:
        bufs = rec.buffers
        host = rec.copies_host_data
        if by_value:
            try:
                call: Any = marshal.dumps(rec.arrays)
            except ValueError:  # not marshalled (a pickled record's): worked out, not remembered
                call = None
            if len(made) >= MADE_MAX:
                made.clear()
        else:
            call = id(rec.arrays)
        known = made.get((call, id(bufs), host))
        if known is not None and (by_value or known[0] is rec.arrays) and known[1] is bufs:
            yield rec if known[2] is None else _with_arrays(rec, known[2])
            continue
        aligned = len(bufs) == len(rec.arrays)  # the usual case: one BufferArg per array, in the same order
        arrays = []
        changed = False
        for i, (key, ptr) in enumerate(rec.arrays):
            buf = bufs[i] if aligned else rec.buffer(key)
            if ptr and buf is not None and buf.owner is None and buf.alloc is not None:
                arrays.append((key, _by_site(sites, buf.alloc, buf.offset or 0)))
                changed = True
            elif ptr and (buf is None or buf.owner is None) and host:
                arrays.append((key, HOST_DATA))
                changed = True
            elif ptr and (buf is None or buf.owner is None):
                name = names.get(ptr)
                if name is None:
                    name = names[ptr] = f"<unowned #{len(names)}>"
                arrays.append((key, name))
                changed = True
            else:
                arrays.append((key, ptr))
        if call is not None:  # holds bufs (and, by identity, the arrays): their ids stay theirs
            made[(call, id(bufs), host)] = (rec.arrays, bufs, tuple(arrays) if changed else None)
        yield _with_arrays(rec, tuple(arrays)) if changed else rec


class RenamedRecords:
    """:func:`unowned_by_order` of records that are no list (a spilled step's,
    :class:`~launchtrace.sources.spill.SpilledRecords`): worked out again each time it is iterated, so that a
    step of a million launches is never held; ``len()`` and truth as the records'."""

    __slots__ = ("raw",)

    def __init__(self, raw: Sequence[LaunchRecord]) -> None:
        self.raw = raw

    def __len__(self) -> int:
        return len(self.raw)

    def __bool__(self) -> bool:
        return bool(self.raw)

    def __iter__(self) -> Iterator[LaunchRecord]:
        return renamed_by_order(self.raw, by_value=True)


_with_arrays: Callable[[LaunchRecord, tuple], LaunchRecord] = slot_copier(LaunchRecord, ("arrays",))
"""``dataclasses.replace(rec, arrays=...)`` through the rebuild's copier (:mod:`launchtrace.fastinit`)."""


def _by_site(sites: dict[str, dict[str, int]], alloc: str, offset: int) -> AllocRef:
    identity = identity_of(alloc) or alloc
    base = slotless(identity)
    seen = sites.setdefault(base, {})
    k = seen.setdefault(identity, len(seen))
    return AllocRef(base if k == 0 else f"{base}#{k}", offset)
