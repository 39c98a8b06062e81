"""Aligned diff of two traces (or two sets of traces) with a timing comparison.

Records are cut into *segments*: each occurrence of a scope (``scope="step"``: every scope named ``step``,
outermost ones only; by default every top-level scope, Warp's own internal timers skipped), plus each run of
records outside any scope. Segments are matched by scope name and occurrence number, counted across the
whole set of traces in order; each matched pair is aligned with :func:`launchtrace.topology.diff_records`,
so one inserted launch is one ``inserted`` entry and a changed one names the fields (kernel, dims, a buffer by
owner label and offset, a scalar by parameter name, stream, site). A segment on one side only is wholly
inserted or removed.

Timing compares host durations per kernel, and per position inside a scope (``"step #3 sim.integrate"``),
with the Mann-Whitney U test of :mod:`launchtrace.analysis.stats`: a group is ``slower`` / ``faster`` only
with enough samples on both sides, a small p-value and a p50 change large enough to matter.

Example::

    from launchtrace.analysis.diff import diff_traces
    result = diff_traces([before], [after], ignore_streams=True)
    print(result.equal, result.counts)
    for seg in result.segments:
        for entry in seg.entries:
            print(seg.name, seg.occurrence, entry.kind, entry.record.kernel)
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from launchtrace.analysis.stats import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_CHANGE,
    DEFAULT_MIN_SAMPLES,
    TimingChange,
    compare_timings,
)
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.topology import ChangeKind, DiffEntry, diff_records

__all__ = ["NO_SCOPE", "Segment", "SegmentDiff", "TraceDiff", "diff_traces", "segments"]

NO_SCOPE = "<no scope>"


@dataclasses.dataclass(frozen=True, slots=True)
class Segment:
    """One occurrence of a scope (or one run of unscoped records): ``name``, ``occurrence`` (0-based, across
    the set of traces), ``trace`` (index in the set) and its ``records`` in issue order."""

    name: str
    occurrence: int
    trace: int
    records: tuple[LaunchRecord, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentDiff:
    """The diff of one matched pair of segments. ``entries`` index into each segment's records
    (``index_a`` / ``index_b``); ``count_a`` / ``count_b`` are the segments' record counts (0: absent)."""

    name: str
    occurrence: int
    count_a: int
    count_b: int
    entries: tuple[DiffEntry, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class TraceDiff:
    """The result of :func:`diff_traces`. ``timing``: one :class:`TimingChange` per kernel;
    ``position_timing``: one per (scope, position, kernel) for scopes that occur more than once."""

    segments: tuple[SegmentDiff, ...]
    timing: tuple[TimingChange, ...]
    position_timing: tuple[TimingChange, ...]
    options: tuple[tuple[str, object], ...]

    @property
    def equal(self) -> bool:
        """Whether the topologies are the same (timing never makes two traces unequal)."""
        return not any(seg.entries for seg in self.segments)

    @property
    def counts(self) -> dict[str, int]:
        """``{"inserted": n, "removed": n, "changed": n}``."""
        out = {str(k): 0 for k in ChangeKind}
        for seg in self.segments:
            for e in seg.entries:
                out[str(e.kind)] += 1
        return out


def _top_scope(trace: TraceData, scope_id: int | None, wanted: str | None) -> int | None:
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
    """Cut ``traces`` into :class:`Segment` s (see the module docstring). With ``scope``, records outside
    every scope of that name are left out.

    Example::

        for seg in segments([trace], scope="step"):
            print(seg.name, seg.occurrence, len(seg.records))
    """
    out: list[Segment] = []
    occurrences: dict[str, int] = {}
    for t, trace in enumerate(traces):
        current: tuple[int | None, list[LaunchRecord]] | None = None
        cut: list[tuple[int | None, list[LaunchRecord]]] = []
        tops: dict[int | None, int | None] = {}
        for rec in trace.records:
            sid = rec.scope_id
            top = tops[sid] if sid in tops else tops.setdefault(sid, _top_scope(trace, sid, scope))
            if top is None and scope is not None:
                continue
            if current is None or current[0] != top:
                current = (top, [])
                cut.append(current)
            current[1].append(rec)
        for top, recs in cut:
            name = trace.scopes[top].name if top is not None else NO_SCOPE
            k = occurrences.get(name, 0)
            occurrences[name] = k + 1
            out.append(Segment(name, k, t, tuple(recs)))
    return out


def unowned_by_order(records: Sequence[LaunchRecord]) -> tuple[LaunchRecord, ...]:
    """``records`` with the pointer of every unowned array argument replaced by ``"<unowned #k>"``, ``k`` the
    order in which that pointer first appears in ``records`` (owned arguments and null arrays unchanged).

    What stays comparable across processes: which launches share an unowned buffer, not where the allocator
    put it. Two runs of one program give equal sequences; a launch that now writes another buffer does not.
    """
    names: dict[int, str] = {}
    out = []
    for rec in records:
        bufs = rec.buffers
        aligned = len(bufs) == len(rec.arrays)  # the usual case: one BufferArg per array, in the same order
        arrays = []
        changed = False
        for i, (key, ptr) in enumerate(rec.arrays):
            buf = bufs[i] if aligned else rec.buffer(key)
            if ptr and (buf is None or buf.owner is None):
                name = names.get(ptr)
                if name is None:
                    name = names[ptr] = f"<unowned #{len(names)}>"
                arrays.append((key, name))
                changed = True
            else:
                arrays.append((key, ptr))
        out.append(dataclasses.replace(rec, arrays=tuple(arrays)) if changed else rec)
    return tuple(out)


def _durations(segs: Sequence[Segment]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Duration samples per kernel and per (scope, position, kernel) of scopes seen more than once."""
    per_kernel: dict[str, list[float]] = {}
    per_position: dict = {}  # (scope, position, kernel) -> samples; named once at the end
    counts = Counter(s.name for s in segs)
    for seg in segs:
        by_position = counts[seg.name] > 1 and seg.name != NO_SCOPE
        for pos, rec in enumerate(seg.records):
            if rec.repeat > 1 or rec.end_ns <= 0:
                continue  # folded summaries and untimed records carry no per-call sample
            duration = float(max(0, rec.end_ns - rec.start_ns))
            per_kernel.setdefault(rec.kernel, []).append(duration)
            if by_position:
                per_position.setdefault((seg.name, pos, rec.kernel), []).append(duration)
    return per_kernel, {f"{name} #{pos} {kernel}": v for (name, pos, kernel), v in per_position.items()}


def diff_traces(
    a: Sequence[TraceData] | TraceData,
    b: Sequence[TraceData] | TraceData,
    *,
    scope: str | None = None,
    ignore_scalars: bool = False,
    ignore_streams: bool = False,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    alpha: float = DEFAULT_ALPHA,
    min_change: float = DEFAULT_MIN_CHANGE,
    raw_pointers: bool = False,
) -> TraceDiff:
    """Diff trace set ``a`` (before) against ``b`` (after); see the module docstring.

    Unowned buffers are compared by the order they first appear in in each segment (:func:`unowned_by_order`):
    two runs allocate at other addresses, so their raw pointers say nothing; ``raw_pointers=True`` compares the
    addresses themselves (two segments of one process).

    Example::

        result = diff_traces(before, after, scope="step", ignore_scalars=True)
        if not result.equal:
            print(result.counts)
    """
    a = [a] if isinstance(a, TraceData) else list(a)
    b = [b] if isinstance(b, TraceData) else list(b)
    seg_a, seg_b = segments(a, scope), segments(b, scope)
    by_key_b = {(s.name, s.occurrence): s for s in seg_b}
    keys = list(dict.fromkeys([(s.name, s.occurrence) for s in seg_a] + [(s.name, s.occurrence) for s in seg_b]))
    by_key_a = {(s.name, s.occurrence): s for s in seg_a}
    out = []
    for key in keys:
        sa, sb = by_key_a.get(key), by_key_b.get(key)
        ra = sa.records if sa else ()
        rb = sb.records if sb else ()
        if not raw_pointers:
            ra, rb = unowned_by_order(ra), unowned_by_order(rb)
        entries = diff_records(ra, rb, scalars=not ignore_scalars, streams=not ignore_streams)
        out.append(SegmentDiff(key[0], key[1], len(ra), len(rb), tuple(entries)))
    kernel_a, pos_a = _durations(seg_a)
    kernel_b, pos_b = _durations(seg_b)
    opts = {"min_samples": min_samples, "alpha": alpha, "min_change": min_change}
    return TraceDiff(
        segments=tuple(out),
        timing=tuple(compare_timings(kernel_a, kernel_b, **opts)),
        position_timing=tuple(compare_timings(pos_a, pos_b, **opts)),
        options=(
            ("scope", scope),
            ("ignore_scalars", ignore_scalars),
            ("ignore_streams", ignore_streams),
            ("raw_pointers", raw_pointers),
            ("min_samples", min_samples),
            ("alpha", alpha),
            ("min_change", min_change),
        ),
    )
