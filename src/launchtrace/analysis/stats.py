"""Per-kernel and per-scope tables for ``launchtrace summary`` and the report, honest about folded data.

A record rebuilt from a summary span (folding, see :class:`launchtrace.model.Fold`) carries its position's
mean as its duration: that is not a measurement. These tables count each folded position once, with its
recorded count, min, mean, max and p50: totals and means stay exact (count x mean), the max is the recorded
one, a p50 that mixes summaries is an estimate (the count-weighted median of the recorded p50s and the measured
durations) and a per-launch p95 is not given at all where launches were folded (no summary records one); the
per-step columns (each kernel's total time per step, exact also for folded data) show the spread instead.
Every row says how many of its launches came from summaries.

The significance tests live in :mod:`launchtrace.analysis.verdicts` (pure, reusable); ``mann_whitney_u`` is
re-exported here for older callers.

Example::

    from launchtrace.analysis.stats import kernel_stats, scope_stats
    for row in kernel_stats(traces):
        print(row.kernel, row.count, row.total_ns, row.max_ns, row.folded)
    for row in scope_stats(traces):
        print(row.path, row.count, row.p50_ns)
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from launchtrace import folds as fold_rules
from launchtrace._lazy import lazy_module
from launchtrace.analysis.segments import step_occurrences
from launchtrace.analysis.unscoped import LoopIterations, is_unscoped
from launchtrace.analysis.verdicts import mann_whitney_u
from launchtrace.conventions import kernel_title
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.steps import family_path

if TYPE_CHECKING:
    from launchtrace.steps import Occurrence

np = lazy_module("numpy")  # for samples the plain arithmetic leaves to it: no table needs NumPy (0.1 s to import)

__all__ = [
    "KernelStats",
    "KernelTable",
    "ScopeStats",
    "ScopeTable",
    "add_step_values",
    "kernel_stats",
    "mann_whitney_u",
    "percentiles",
    "scope_stats",
    "step_record_totals",
]


def percentiles(values: Sequence[float], qs: Iterable[float] = (50, 95)) -> tuple[float, ...]:
    """Linear-interpolated percentiles (NumPy's default); NaN for an empty sample.

    Worked out here as ``np.percentile(np.asarray(values, dtype=float), list(qs))`` works them out, to the bit
    (the same IEEE operations in the same order: the virtual index ``(n - 1) * q / 100``, its floor and
    fraction, and NumPy's two-sided interpolation), so that a command that needs no other NumPy does not import
    it; a sample NumPy would treat specially (NaN, an infinity, a negative zero, an integer it cannot hold
    exactly) goes to NumPy itself. ``tests/test_stats_exact.py`` checks the two agree."""
    qs = list(qs)
    if len(values) == 0:
        return tuple(math.nan for _ in qs)
    ranked = sorted(map(float, values))
    if not _plain(values, ranked) or not all(0 <= q <= 100 for q in qs):  # NumPy says what is wrong with a q
        return tuple(float(v) for v in np.percentile(np.asarray(values, dtype=float), qs))
    n = len(ranked)
    out = []
    for q in qs:
        virtual = (n - 1) * (q / 100)
        if virtual >= n - 1:
            out.append(ranked[-1])
            continue
        below = math.floor(virtual)
        a, b = ranked[below], ranked[below + 1]
        gamma = virtual - below
        step = b - a
        out.append(b - step * (1 - gamma) if gamma >= 0.5 else a + step * gamma)
    return tuple(out)


_EXACT = 2**53  # integers up to this convert to float and compare as they are


def _plain(values: Sequence[float], ranked: list[float]) -> bool:
    """Whether ``ranked`` (``values`` as floats, sorted) is a sample the plain arithmetic above gives NumPy's
    answer for: finite, no negative zero, no integer beyond 2**53 and no other type than int and float."""
    if isinstance(values, array) and values.typecode in "bhilqBHILQ":
        return ranked[0] >= -_EXACT and ranked[-1] <= _EXACT
    if not all(type(v) is int or type(v) is float for v in values):
        return False
    if not (ranked[0] >= -_EXACT and ranked[-1] <= _EXACT):  # also false for NaN at either end
        return False
    if not all(map(math.isfinite, ranked)):  # a NaN sorts anywhere
        return False
    return not (ranked[0] <= 0.0 <= ranked[-1] and any(v == 0.0 and math.copysign(1.0, v) < 0 for v in ranked))


def _weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value where the cumulative weight, in value order (ties in the given order), first reaches half the
    total: NumPy's stable argsort, ``cumsum`` (a running sum, left to right) and ``searchsorted``, worked out
    here to the bit, or by NumPy for a sample :func:`_plain` does not pass."""
    if (
        values
        and weights
        and _plain(values, sorted(map(float, values)))
        and _plain(weights, sorted(map(float, weights)))
    ):
        order = sorted(range(len(values)), key=values.__getitem__)
        totals = list(accumulate(float(weights[i]) for i in order))
        return float(values[order[bisect_left(totals, totals[-1] / 2.0)]])
    order_np = np.argsort(values, kind="mergesort")
    v = np.asarray(values, dtype=float)[order_np]
    w = np.cumsum(np.asarray(weights, dtype=float)[order_np])
    return float(v[int(np.searchsorted(w, w[-1] / 2.0))])


@dataclasses.dataclass(frozen=True, slots=True)
class KernelStats:
    """One row of the per-kernel table (nanoseconds).

    Per launch: ``count`` (launches, folded ones by their recorded count), ``total_ns`` and ``mean_ns`` (exact),
    ``p50_ns`` (exact, or an estimate when ``p50_from_summaries``), ``p95_ns`` (NaN when any launch was
    folded: summaries record no p95), ``max_ns`` (``max_from_summaries``: the largest is a recorded maximum),
    ``nbytes`` (bytes of the array arguments over all launches), ``folded`` (launches rebuilt from summaries).
    Per step (the kernel's total time in each occurrence of the outermost scope holding it; exact for folded
    data too): ``steps``, ``step_p50_ns``, ``step_p95_ns``, ``step_max_ns``.
    """

    kernel: str
    op: str
    count: int
    total_ns: int
    mean_ns: float
    p50_ns: float
    p95_ns: float
    max_ns: float  # an int, NaN for a kernel that only ran in graph replays
    nbytes: int
    folded: int = 0
    p50_from_summaries: bool = False
    max_from_summaries: bool = False
    steps: int = 0
    step_p50_ns: float = math.nan
    step_p95_ns: float = math.nan
    step_max_ns: float = math.nan
    replayed: bool = False  # ran only in graph replays: count what they ran, no time of its own (replays.py)


class _Group:
    """What one kernel's launches add up to while the table is built (durations as 8-byte ints, not objects)."""

    __slots__ = ("count", "fold_max", "folded", "folds", "measured", "nbytes", "total")

    def __init__(self) -> None:
        self.count = self.folded = self.total = self.nbytes = 0
        self.fold_max = -1
        self.measured = array("q")
        self.folds: list[tuple[int, int]] = []  # (p50, count) per folded position


class KernelTable:
    """The per-kernel table fed one trace at a time (what :func:`kernel_stats` does over a list): counts and
    totals are sums, the per-launch durations are kept as 8 bytes each for exact percentiles."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], _Group] = {}
        # per (kernel, adjoint, op) of plain strings: its group, so a launch finds its row with one lookup
        self._group_of: dict[tuple[str, bool, str], _Group] = {}
        # a buffers tuple's nbytes, by its id (the tuple is kept, so the id stays its own): a call site's
        # rebuilt launches share one tuple, and summing it was a tenth of summary's time per launch
        self._nbytes: dict[int, tuple[tuple, int]] = {}

    def add(self, trace: TraceData) -> None:
        self.add_records(trace.records, set())

    def add_records(self, records: Iterable[LaunchRecord], seen: set[tuple[str, int]]) -> None:
        """:meth:`add` of one trace's records, or of a part of them (``seen``: the folded positions counted
        already in the trace, shared by its parts)."""
        groups = self.groups
        group_of = self._group_of
        nbytes_of = self._nbytes
        for rec in records:
            raw = (rec.kernel, rec.adjoint, rec.op)
            g = group_of.get(raw)
            if g is None:
                title = kernel_title(rec.kernel, rec.adjoint)  # forward and adjoint launches: two rows
                g = groups.get((title, str(rec.op)))
                if g is None:
                    g = groups[(title, str(rec.op))] = _Group()
                if type(rec.kernel) is str and type(rec.adjoint) is bool and type(rec.op) is str:
                    group_of[raw] = g  # equal values of these types read the same
            bufs = rec.buffers
            known = nbytes_of.get(id(bufs))
            if known is not None and known[0] is bufs:
                nbytes = known[1]
            else:
                nbytes = sum(b.nbytes for b in bufs)
                if len(nbytes_of) >= 4096:
                    nbytes_of.clear()
                nbytes_of[id(bufs)] = (bufs, nbytes)
            fold = rec.fold
            if fold is not None:
                g.nbytes += nbytes * fold_rules.launches(rec)
                key = (fold.span_id, fold.position)
                if key in seen:
                    continue  # another copy of a position already counted
                seen.add(key)
                share, mean, whole = fold_rules.fold_share(rec)
                launches = share if whole else share * fold.count
                g.count += launches
                g.folded += launches
                g.total += launches * mean
                g.fold_max = max(g.fold_max, fold.max_ns or mean)
                g.folds.append((fold.p50_ns or mean, launches))
            elif rec.repeat > 1:  # stands for repetitions with no statistics: its duration is all we have
                g.count += rec.repeat
                g.folded += rec.repeat
                g.total += rec.duration_ns * rec.repeat
                g.nbytes += nbytes * rec.repeat
                g.fold_max = max(g.fold_max, rec.duration_ns)
                g.folds.append((rec.duration_ns, rec.repeat))
            else:
                duration = rec.end_ns - rec.start_ns  # LaunchRecord.duration_ns, inline
                if duration < 0:
                    duration = 0
                g.count += 1
                g.total += duration
                g.nbytes += nbytes
                g.measured.append(duration)

    def rows(self, per_step: dict[str, Sequence[float]]) -> list[KernelStats]:
        """The rows, the largest total time first; ``per_step``: each kernel's total time per step."""
        rows = []
        for (kernel, op), g in self.groups.items():
            measured_max = max(g.measured, default=-1)
            if g.folds:
                p50 = _weighted_median(
                    [*g.measured, *(p for p, _ in g.folds)], [*([1] * len(g.measured)), *(n for _, n in g.folds)]
                )
                p95 = math.nan
            else:
                p50, p95 = percentiles(g.measured)
            steps = per_step.get(kernel, [])
            s50, s95 = percentiles(steps)
            rows.append(
                KernelStats(
                    kernel=kernel,
                    op=op,
                    count=g.count,
                    total_ns=g.total,
                    mean_ns=g.total / g.count if g.count else math.nan,
                    p50_ns=p50,
                    p95_ns=p95,
                    max_ns=max(measured_max, g.fold_max, 0),
                    nbytes=g.nbytes,
                    folded=g.folded,
                    p50_from_summaries=bool(g.folds),
                    max_from_summaries=g.fold_max > measured_max,
                    steps=len(steps),
                    step_p50_ns=s50,
                    step_p95_ns=s95,
                    step_max_ns=max(steps) if len(steps) else math.nan,
                )
            )
        rows.sort(key=lambda r: (-r.total_ns, r.kernel))
        return rows


def add_step_values(
    per_step: dict[str, list[float]], traces: Sequence[TraceData], segs: Sequence[Occurrence] | None = None
) -> None:
    """Add each kernel's total time per step of ``traces`` (the one rule's steps, as
    :func:`launchtrace.analysis.diff.step_series` counts them) to ``per_step``. A step never spans traces, so a
    reader may add one trace at a time and get the same values. ``segs``: the steps of ``traces`` that hold
    records, when the caller has cut them already (``summary`` cuts each trace once)."""
    if segs is None:
        from launchtrace.analysis.segments import segments

        segs = segments(traces, None)
    for (_step, name), per in _kernel_step_values(traces, segs).items():
        per_step.setdefault(name, []).extend(per.values())


def _kernel_step_values(
    traces: Sequence[TraceData], segs: Sequence[Occurrence]
) -> dict[tuple[str, str], dict[int, float]]:
    """The ``("kernel", step, title)`` groups of :func:`~launchtrace.analysis.diff.step_series`, alone: the same
    steps and occurrences (:func:`~launchtrace.analysis.segments.step_occurrences`, which both take) and the same
    sums in the same order, without the scope groups, the step durations and the counts that ``summary`` and
    ``report`` never read (they were half of ``summary``'s own time per trace). ``tests/test_summary_stream.py``
    checks it against ``step_series`` on real runs."""
    values: dict[tuple[str, str], dict[Any, float]] = {}
    for seg, occ, _first in step_occurrences(traces, segs):
        name = seg.name
        # work outside every scope: each loop iteration is a step (LoopIterations: a fresh one, as root() of the
        # timed records; it never spans roots). One pass, no list of the step's records (one wide trace's step
        # is read from a file: issue 25)
        loop = LoopIterations() if is_unscoped(seg) else None
        for rec in seg.records:
            if rec.end_ns <= 0:
                continue
            if rec.fold is None and rec.repeat <= 1:
                ns = rec.end_ns - rec.start_ns
                if ns < 0:  # max(0, ns), without the call
                    ns = 0
            else:
                ns = fold_rules.record_total(rec)[0]
            key = (name, kernel_title(rec.kernel, rec.adjoint))
            per = values.get(key)
            if per is None:
                per = values[key] = {}
            step = occ if loop is None else (occ, loop.of(rec)[1])
            per[step] = per.get(step, 0.0) + float(ns)
    return values


def step_record_totals(records: Iterable[LaunchRecord]) -> dict[str, float]:
    """Each kernel's total host time in ``records`` (one step as a caller cut it), records with no end left out."""
    totals: dict[str, float] = {}
    for rec in records:
        if rec.end_ns > 0:
            title = kernel_title(rec.kernel, rec.adjoint)
            totals[title] = totals.get(title, 0.0) + fold_rules.record_total(rec)[0]
    return totals


def kernel_stats(
    traces: Iterable[TraceData], steps: Sequence[Sequence[LaunchRecord]] | None = None
) -> list[KernelStats]:
    """Per-kernel counts and durations over ``traces``, the largest total time first (see the module
    docstring for folded positions). ``steps``: the records of each step when the caller cut them (a zero-code
    run's inferred steps, :func:`launchtrace.steps.infer_steps`), for the per-step columns; else the steps of
    the one rule (:func:`launchtrace.analysis.diff.step_series`).

    Example::

        for row in kernel_stats([trace]):
            print(row.kernel, row.count, row.p50_ns, "(estimate)" if row.p50_from_summaries else "")
    """
    traces = list(traces)
    table = KernelTable()
    for trace in traces:
        table.add(trace)
    per_step: dict[str, list[float]] = {}
    if steps is None:
        add_step_values(per_step, traces)
    else:
        for step in steps:
            for name, ns in step_record_totals(step).items():
                per_step.setdefault(name, []).append(ns)
    return table.rows(per_step)


@dataclasses.dataclass(frozen=True, slots=True)
class ScopeStats:
    """One row of the per-scope table: time per scope (a ``wp.ScopedTimer``, a Tape scope, a
    ``launchtrace.scope``), by ``path`` (``step/simulate``). ``count`` occurrences (closed ones), ``total_ns``,
    ``p50_ns`` / ``p95_ns`` / ``max_ns`` per occurrence (measured: scope spans are never folded),
    ``warmup`` leading occurrences that look like warm-up (only for outermost scopes: the first step compiles)
    and ``warmup_ns`` their total."""

    path: str
    kind: str
    count: int
    total_ns: int
    p50_ns: float
    p95_ns: float
    max_ns: int
    warmup: int = 0
    warmup_ns: int = 0


class _Path:
    """One scope path's occurrences: duration, the trace's ordinal and the place in it, the kind (a code)."""

    __slots__ = ("kinds", "ordinals", "places", "values")

    def __init__(self) -> None:
        self.values = array("q")
        self.ordinals = array("q")
        self.places = array("l")
        self.kinds = array("B")


class ScopeTable:
    """The per-scope table fed one trace at a time (what :func:`scope_stats` does over a list), 25 bytes per
    scope occurrence: the rows' order and the warm-up need the occurrences in trace order, and a stream gives
    traces as they end, so each is kept with its trace's ordinal and put in order at the end."""

    def __init__(self, *, internal: bool = False) -> None:
        self.internal = internal
        self.paths: dict[str, _Path] = {}
        self._kinds: dict[str, int] = {}
        # outermost path -> the trace place (rank) of its first occurrence after the warm-up, or after the first
        # occurrence when none looked like warm-up (set by rows(); None: there is no later one): what came in
        # traces before it belongs to the start of the run (loads.LoadTable.split)
        self.warmup_until: dict[str, int | None] = {}

    def add(self, trace: TraceData, ordinal: int) -> None:
        place = 0
        for scope in sorted(trace.scopes.values(), key=lambda s: (s.start_ns, s.seq)):
            if (scope.internal and not self.internal) or scope.end_ns <= 0 or scope.kind == "load":
                continue  # a module load is host time of its own: analysis.overview.module_loads
            path = "/".join(family_path(trace.scope_path(scope.id)))  # frame 17/physics -> frame <n>/physics
            entry = self.paths.get(path)
            if entry is None:
                entry = self.paths[path] = _Path()
            entry.values.append(scope.duration_ns)
            entry.ordinals.append(ordinal)
            entry.places.append(place)
            entry.kinds.append(self._kinds.setdefault(str(scope.kind), len(self._kinds)))
            place += 1

    def rows(self, rank: Sequence[int] | None = None) -> list[ScopeStats]:
        """The rows in first-seen order; ``rank``: each ordinal's place in trace order (None: ordinals are)."""
        from launchtrace.analysis.verdicts import warmup_steps

        kinds = list(self._kinds)
        found = []
        for path, entry in self.paths.items():
            places = entry.places
            order_of = [rank[o] for o in entry.ordinals] if rank is not None else list(entry.ordinals)
            # trace order, then place in the trace (NumPy's lexsort did this: the same order, without NumPy)
            order = sorted(range(len(order_of)), key=lambda i: (order_of[i], places[i]))
            values = [entry.values[i] for i in order]
            first = order[0]
            ranks = [int(order_of[i]) for i in order]
            found.append(((int(order_of[first]), places[first]), path, kinds[entry.kinds[first]], values, ranks))
        found.sort(key=lambda item: item[0])
        rows = []
        for _, path, kind, values, ranks in found:
            p50, p95 = percentiles(values)
            warm = warmup_steps(values) if "/" not in path else 0
            if "/" not in path:  # the first occurrence counts as warm-up here even when it did not look slow
                first_later = max(warm, 1)
                self.warmup_until[path] = ranks[first_later] if first_later < len(ranks) else None
            rows.append(
                ScopeStats(path, kind, len(values), sum(values), p50, p95, max(values), warm, sum(values[:warm]))
            )
        return rows


def scope_stats(traces: Iterable[TraceData], *, internal: bool = False) -> list[ScopeStats]:
    """Per-scope-path occurrence counts and durations over ``traces``, in first-seen order (Warp's own
    internal timers left out unless ``internal``).

    Example::

        for row in scope_stats(traces):
            print(row.path, row.count, row.p50_ns / 1e6, "ms")
    """
    table = ScopeTable(internal=internal)
    for t, trace in enumerate(traces):
        table.add(trace, t)
    return table.rows()
