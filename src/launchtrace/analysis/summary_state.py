"""What ``launchtrace summary`` prints, built one trace at a time with bounded state.

``summary`` used to hold every trace (1.46 GB for a 2 GB file); :class:`SummaryState` takes each trace as
:class:`launchtrace.sources.each.Traces` gives it and keeps only what the output needs, exactly:

- counts and totals as sums (traces, records, per kernel, per module load, per graph replay);
- 8 bytes per launch (its duration) and per step and kernel (its total), for exact percentiles;
- 25 bytes per scope occurrence (duration, trace, place, kind): the scope rows' order and warm-up follow the
  trace order, which a stream only knows at the end (traces arrive as their roots end);
- per run, 28 bytes per top-level scope occurrence (start, trace, place, name) for step inference and the step
  clock, and each occurrence's per-kernel totals while every one of the run's top-level scopes is a timer
  (only then can steps be inferred);
- the first :data:`BAD_KEEP` non-finite findings (``--value-stats``) in issue order, and exact counts of all;
- one count per distinct failed call (kernel or scope, site, error; :mod:`launchtrace.analysis.failures`).

One wide trace's records may come read back from a temporary file (``Traces(..., spill=True)``,
:mod:`launchtrace.sources.spill`): :meth:`SummaryState.add` then takes them in one pass, a chunk at a time, and
its steps are cut without lists (:func:`launchtrace.steps.occurrences`), so no list of them is made.

So memory grows by a few bytes per launch, not by the trace objects (about 2 KB per span), and the figures are
the ones the list-based functions (:func:`~launchtrace.analysis.stats.kernel_stats`,
:func:`~launchtrace.analysis.stats.scope_stats`, :func:`~launchtrace.steps.infer_steps`, ...) give: they share
the code that adds one trace.

Example::

    state = SummaryState()
    for key, trace in Traces(["run.jsonl"]):
        state.add(key, trace)
    result = state.result()
"""

from __future__ import annotations

import dataclasses
import itertools
from array import array
from collections.abc import Iterable, Iterator, Sequence

from launchtrace.analysis.failures import Failure, FailureTable
from launchtrace.analysis.loads import Loads, LoadTable
from launchtrace.analysis.replays import ReplayTable
from launchtrace.analysis.stats import (
    KernelStats,
    KernelTable,
    ScopeStats,
    ScopeTable,
    add_step_values,
    step_record_totals,
)
from launchtrace.analysis.values import BadValues, StepClock, trace_non_finite
from launchtrace.model import LaunchRecord, ScopeKind, TraceData
from launchtrace.sources.each import TraceKey
from launchtrace.steps import Occurrence, inferred_how, occurrences, repeating_unit, run_key, timer_thread

__all__ = ["BAD_KEEP", "Inferred", "SummaryResult", "SummaryState"]

BAD_KEEP = 10_000
"""Non-finite findings kept (the first in issue order); their counts stay exact."""
_TIMER = ScopeKind.TIMER.value
PASS_CHUNK = 4096
"""Records of a spilled trace handed to the tables at a time (:meth:`SummaryState._add_spilled`)."""


def _chunks(records: Iterable[LaunchRecord], size: int) -> Iterator[list[LaunchRecord]]:
    it = iter(records)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


@dataclasses.dataclass(frozen=True, slots=True)
class Inferred:
    """One run's inferred steps: the ``unit`` of timer names, how many ``steps``, the sentence ``how``."""

    unit: tuple[str, ...]
    steps: int
    how: str


@dataclasses.dataclass(frozen=True, slots=True)
class SummaryResult:
    """Everything ``summary`` prints. ``bad``: the first :data:`BAD_KEEP` non-finite findings (steps set);
    ``bad_total`` / ``bad_launches``: all of them, and the launches behind them; ``bad_kernels``: every kernel
    with one, in order of its first."""

    traces: int
    records: int
    kernels: list[KernelStats]
    scopes: list[ScopeStats]
    loads: Loads
    inferred: list[Inferred]
    bad: list[BadValues]
    bad_total: int
    bad_launches: int
    bad_kernels: list[str]
    clock_how: str
    failed: list[Failure] = dataclasses.field(default_factory=list)
    failed_total: int = 0
    # outermost scope name -> its load time (in the warm-up, after it, loads after it): loads.LoadTable.split
    load_split: dict[str, tuple[int, int, int]] = dataclasses.field(default_factory=dict)
    wall_ns: int = 0  # each run's first to last recorded time, summed over runs
    runs: int = 0


class _Run:
    """One run's named top-level occurrences (arrays, 28 bytes each) and, while all are timers, their
    per-kernel totals."""

    __slots__ = (
        "all_timers",
        "first_ns",
        "last_ns",
        "locals",
        "names",
        "ordinals",
        "starts",
        "thread",
        "totals",
        "traces",
    )

    def __init__(self) -> None:
        self.first_ns = 0  # the run's first and last recorded times (its traced wall time)
        self.last_ns = 0
        self.starts = array("q")
        self.ordinals = array("q")
        self.locals = array("l")
        self.names = array("l")
        self.traces = array("q")  # the ordinals of the run's traces (its place among runs)
        self.all_timers = True  # and all on one thread (launchtrace.steps.infer_steps)
        self.thread: tuple | None = None  # the thread of the timers seen so far
        self.totals: list[dict[str, float]] | None = []


def _widen(run: _Run, trace: TraceData) -> None:
    """Stretch the run's first and last recorded times over ``trace`` (records and scopes; unset times left out)."""
    starts = [r.start_ns for r in trace.records if r.start_ns > 0]
    starts += [s.start_ns for s in trace.scopes.values() if s.start_ns > 0]
    ends = [r.end_ns for r in trace.records] + [s.end_ns for s in trace.scopes.values()]
    _stretch(run, min(starts) if starts else None, max(ends) if ends else None)


def _times(times: list, items: Iterable) -> None:
    """``times`` (the lowest non-zero start and the highest end so far, None: none yet) stretched over ``items``
    (records or scopes): :func:`_widen` a part at a time."""
    first, last = times
    for item in items:
        start, end = item.start_ns, item.end_ns
        if start > 0 and (first is None or start < first):
            first = start
        if last is None or end > last:
            last = end
    times[:] = first, last


def _stretch(run: _Run, first: int | None, last: int | None) -> None:
    if first is not None:
        run.first_ns = first if not run.first_ns else min(run.first_ns, first)
    if last is not None:
        run.last_ns = max(run.last_ns, last)


class SummaryState:
    """``summary``'s figures over traces added one at a time (see the module docstring)."""

    def __init__(self, *, figures: bool = True) -> None:
        self.figures = figures  # False: only the counts, the step clock and the non-finite findings (diff)
        self.traces = 0
        self.records = 0
        self.kernels = KernelTable()
        self.scopes = ScopeTable()
        self.loads = LoadTable()
        self.replays = ReplayTable()
        self.per_step: dict[str, array] = {}
        self.runs: dict[tuple, _Run] = {}
        self._names: dict[str, int] = {}
        self._sources = array("q")
        self._firsts = array("q")
        self._bad: list[tuple[tuple[int, int], BadValues]] = []
        self.bad_total = 0
        self.bad_launches = 0
        self._bad_kernels: dict[str, tuple[int, int]] = {}
        self.failures = FailureTable()

    def add(self, key: TraceKey, trace: TraceData, occs: list[Occurrence] | None = None) -> None:
        """Take one trace (``key``: its place in ``load_traces``' order); ``occs``: ``occurrences(trace)`` where
        the caller cut it already (``diff``'s sides)."""
        ordinal = self.traces
        self.traces += 1
        self.records += len(trace)
        self._sources.append(key.source)
        self._firsts.append(key.first_ns)
        spilled = type(trace.records) is not list  # one wide trace's, read from a file each time: fewer passes
        if spilled:
            self._add_spilled(trace, ordinal)
        elif self.figures:
            self.kernels.add(trace)
            self.scopes.add(trace, ordinal)
            self.loads.add(trace, ordinal)
            self.replays.add(trace)
            self.failures.add(trace)
        if occs is None:
            occs = occurrences(trace)  # cut once: the step values and the runs' occurrences share it
        if self.figures:
            per_step: dict[str, list[float]] = {}
            add_step_values(per_step, [trace], [occ for occ in occs if occ.records])  # a step never spans traces
            for name, values in per_step.items():
                self.per_step.setdefault(name, array("d")).extend(values)
        self._add_occurrences(trace, ordinal, occs, widen=not spilled)
        if not spilled:
            self._add_bad(trace)

    def _add_spilled(self, trace: TraceData, ordinal: int) -> None:
        """What :meth:`add` takes from each record (the tables, the run's times, the non-finite findings), in one
        pass over a spilled trace's records, :data:`PASS_CHUNK` at a time, instead of a pass each: every
        pass reads the temporary file (``launchtrace.sources.spill``). Each table gets the records in order and
        sums as it would over the whole list; the scopes after the last record, as :meth:`add` does."""
        run = self.runs.get(run_key(trace))
        if run is None:
            run = self.runs[run_key(trace)] = _Run()
        seen: set = set()
        found: list = []
        times = [None, None]
        for chunk in _chunks(trace.records, PASS_CHUNK):
            part = TraceData(chunk, trace.scopes, trace.attributes)
            if self.figures:
                self.kernels.add_records(chunk, seen)
                self.replays.add(part)
                self.failures.add_records(chunk)
            _times(times, chunk)
            found += trace_non_finite(part)
        if self.figures:
            self.scopes.add(trace, ordinal)
            self.loads.add(trace, ordinal)
            self.failures.add_scopes(trace)
        _times(times, trace.scopes.values())
        _stretch(run, *times)
        self._take_bad(found)

    def _add_occurrences(self, trace: TraceData, ordinal: int, occs: list[Occurrence], widen: bool = True) -> None:
        run = self.runs.get(run_key(trace))
        if run is None:
            run = self.runs[run_key(trace)] = _Run()
        run.traces.append(ordinal)
        if widen:
            _widen(run, trace)
        for local, occ in enumerate(occs):
            if occ.scope_id is None:
                continue
            run.starts.append(occ.start_ns)
            run.ordinals.append(ordinal)
            run.locals.append(local)
            run.names.append(self._names.setdefault(occ.name, len(self._names)))
            sc = trace.scopes.get(occ.scope_id)
            if run.all_timers and sc is not None and sc.thread:
                if run.thread is None:
                    run.thread = timer_thread(sc)
                elif timer_thread(sc) != run.thread:  # two threads' timers: no steps are inferred
                    sc = None
            if run.all_timers and (sc is None or sc.kind != _TIMER):
                run.all_timers = False
                run.totals = None  # no steps can be inferred in this run: its totals are not needed
            if run.totals is not None:
                run.totals.append(step_record_totals(occ.records))

    def _add_bad(self, trace: TraceData) -> None:
        self._take_bad(trace_non_finite(trace))

    def _take_bad(self, found: list) -> None:
        if not found:
            return
        self.bad_total += len(found)
        self.bad_launches += len({id(bad.record) for _, bad in found})
        for key, bad in found:
            if bad.kernel not in self._bad_kernels or key < self._bad_kernels[bad.kernel]:
                self._bad_kernels[bad.kernel] = key
        self._bad.extend(found)
        if len(self._bad) > 2 * BAD_KEEP:
            self._bad.sort(key=lambda item: item[0])
            del self._bad[BAD_KEEP:]

    def infers(self) -> bool:
        """Whether steps are inferred in some run (a zero-code run: its top-level timers repeat)."""
        rank, names = self._rank(), list(self._names)
        return any(self._infer(run, self._ordered(run, rank), names) is not None for run in self.runs.values())

    # -- the result
    def _rank(self) -> list[int]:
        """Each trace ordinal's place in ``load_traces``' order (source, first time, arrival)."""
        sources, firsts = self._sources, self._firsts
        order = sorted(range(self.traces), key=lambda i: (sources[i], firsts[i]))  # stable: then arrival
        rank = [0] * self.traces
        for place, ordinal in enumerate(order):
            rank[ordinal] = place
        return rank

    def result(self) -> SummaryResult:
        rank = self._rank()
        names = list(self._names)
        runs = sorted(self.runs.values(), key=lambda r: min(rank[t] for t in r.traces))
        ordered = [(run, self._ordered(run, rank)) for run in runs]
        inferred: list[Inferred] = []
        steps_per_kernel: dict[str, list[float]] | None = None
        clock_steps: tuple[int, ...] | None = None
        for run, order in ordered:
            found = self._infer(run, order, names)
            if found is None:
                continue
            start, period, count = found
            unit = tuple(names[run.names[i]] for i in order[start : start + period])
            first = names[run.names[order[start]]]
            index = sum(1 for i in order[:start] if names[run.names[i]] == first)
            inferred.append(Inferred(unit, count, inferred_how(unit, count, index)))
            steps_per_kernel = steps_per_kernel or {}
            assert run.totals is not None
            for k in range(count):
                totals: dict[str, float] = {}
                for i in order[start + k * period : start + (k + 1) * period]:
                    for title, ns in run.totals[i].items():
                        totals[title] = totals.get(title, 0.0) + ns
                for title, ns in totals.items():
                    steps_per_kernel.setdefault(title, []).append(ns)
            if len(self.runs) == 1:
                clock_steps = tuple(run.starts[order[start + k * period]] for k in range(count))
        per_step = steps_per_kernel if steps_per_kernel is not None else self.per_step
        kernels = self.replays.apply(self.kernels.rows(per_step))  # count what each capture_launch ran
        clock = self._clock(ordered, rank, names, clock_steps, inferred)
        self._bad.sort(key=lambda item: item[0])
        del self._bad[BAD_KEEP:]
        bad = [dataclasses.replace(b, step=clock.step(b.record.start_ns)) for _, b in self._bad]
        kernels_bad = sorted(self._bad_kernels, key=lambda k: self._bad_kernels[k])
        scopes = self.scopes.rows(rank)
        return SummaryResult(
            self.traces,
            self.records,
            kernels,
            scopes,
            self.loads.loads(rank),
            inferred,
            bad,
            self.bad_total,
            self.bad_launches,
            kernels_bad,
            clock.how,
            self.failures.rows(),
            self.failures.total,
            self.loads.split(rank, self.scopes.warmup_until),
            self.wall_ns(),
            len(self.runs),
        )

    def wall_ns(self) -> int:
        """The traced wall time: each run's first to last recorded time, summed over runs."""
        return sum(max(0, run.last_ns - run.first_ns) for run in self.runs.values())

    @staticmethod
    def _ordered(run: _Run, rank: Sequence[int]) -> list[int]:
        """The run's named occurrences in the one rule's order: start, then trace order, then place."""
        starts, ordinals, places = run.starts, run.ordinals, run.locals
        return sorted(range(len(starts)), key=lambda i: (starts[i], rank[ordinals[i]], places[i]))

    @staticmethod
    def _infer(run: _Run, order: Sequence[int], names: list[str]) -> tuple[int, int, int] | None:
        if not run.all_timers or run.totals is None:
            return None
        return repeating_unit([names[run.names[i]] for i in order])

    def _clock(
        self,
        ordered: list[tuple[_Run, list[int]]],
        rank: Sequence[int],
        names: list[str],
        inferred_starts: tuple[int, ...] | None,
        inferred: list[Inferred],
    ) -> StepClock:
        """:func:`launchtrace.analysis.values.step_clock` of every trace together."""
        if inferred_starts is not None:
            only = inferred[0]
            return StepClock("+".join(only.unit), inferred_starts, only.how)
        best: tuple | None = None
        for run, order in ordered:
            if order:
                i = order[0]
                key = (run.starts[i], int(rank[run.ordinals[i]]), run.locals[i])
                if best is None or key < best[0]:
                    best = (key, run.names[i])
        if best is None:
            return StepClock(None, ())
        code = best[1]
        starts = sorted(run.starts[i] for run, _ in ordered for i in range(len(run.starts)) if run.names[i] == code)
        return StepClock(names[code], tuple(starts))
