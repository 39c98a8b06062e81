"""``launchtrace diff`` streamed: both sides read one trace at a time, each step diffed as soon as its partner has
been read, and the timing kept as per-step numbers, so memory stays flat in the input.

:func:`diff_streamed` gives exactly :func:`launchtrace.analysis.diff.diff_traces` over ``load_traces`` of each
side, or None when it cannot vouch for that, and the caller then diffs the lists:

- a side of several runs (runs are paired k-th with k-th, and the side with fewer repeats its last: that needs
  the whole run kept), or a backend source;
- steps of one name that arrive out of their start order (the occurrence numbers that pair the sides follow
  start order; a stream gives traces as their roots end, so a trace of unscoped work that ends last but holds
  the first ``<no scope>`` step is fine, two interleaved ones are not);
- a zero-code run whose steps are inferred (:func:`launchtrace.steps.infer_steps`: each repetition of the
  top-level timers is one step, made of several traces).

What is held: the steps of one side not yet matched by the other (the sides are read in turn, so in a diff of
two runs of one program a few), each thread's unscoped records of the chunk being filled (at most
:data:`~launchtrace.analysis.unscoped.CHUNK_MAX`), one :class:`~launchtrace.analysis.diff.SegmentDiff` per step
(its entries only where the steps differ), the per-step numbers of the timing (8 bytes per step and group) and
what ``summary`` keeps for the step clock of the non-finite findings (:mod:`launchtrace.analysis.summary_state`),
and for the signal of other threads launching beside the steps one extent per step, one per step and kernel,
one per trace and thread of unscoped launches, and each thread's unscoped launches of its latest trace
(:mod:`launchtrace.analysis.contention`).

Example::

    result, bad = diff_streamed(["a.jsonl"], ["b.jsonl"], scope=None) or fallback()
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

from launchtrace.analysis.contention import Concurrency
from launchtrace.analysis.diff import (
    DiffSettings,
    GroupKey,
    SegmentDiff,
    TraceDiff,
    segment_diff,
    series_of_runs,
    step_series,
    timing_of_series,
)
from launchtrace.analysis.summary_state import SummaryState
from launchtrace.analysis.unscoped import LoopIterations, UnscopedChunks, is_unscoped
from launchtrace.analysis.values import BadValues, became_non_finite_of
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.sources.each import TraceKey, Traces
from launchtrace.steps import occurrences, run_key

__all__ = ["diff_streamed"]


class _NotInOrder(Exception):
    """The stream cannot give the list's answer: the caller diffs the lists."""


class _Series:
    """One group's value per step, 16 bytes a step (``step_series``' ``{occurrence: ns}`` as two arrays); steps
    come in order (the stream declines otherwise), so a step met again adds to the last."""

    __slots__ = ("occs", "values")

    def __init__(self) -> None:
        self.occs = array("q")
        self.values = array("d")

    def add(self, occ: int, ns: float) -> None:
        if self.occs and self.occs[-1] == occ:
            self.values[-1] += ns
        else:
            self.occs.append(occ)
            self.values.append(0.0 + ns)

    def items(self) -> Iterator[tuple[int, float]]:
        return zip(self.occs, self.values)


class _Side:
    """One side's steps, numbered as the one rule numbers them, and its timing numbers."""

    def __init__(self, name: str, scope: str | None) -> None:
        self.name = name
        self.scope = scope
        self.run: tuple | None = None
        self.counts: dict[str, int] = {}  # occurrences of each name so far (the next one's number)
        self.last: dict[str, tuple[int, int]] = {}  # each name's last start and the trace it was in
        self.order: dict[tuple[str, int], tuple] = {}  # step key -> its place in the one rule's order
        self.step_count: dict[str, int] = {}  # timed steps of each name so far (step_series' numbering)
        self.steps: dict[str, list[float]] = {}
        self.values: dict[GroupKey, _Series] = {}
        self.launches: dict[GroupKey, list[int]] = {}
        self.first: dict = {}  # a name or group -> its first place (the order step_series would insert it in)
        self.clock = SummaryState(figures=False)
        self.chunks = UnscopedChunks()
        self.loops = LoopIterations()  # the timing's iterations of unscoped work, numbered through the run
        self.concurrency = Concurrency()  # other threads beside the steps (analysis/contention.py)

    def add(self, key: TraceKey, trace: TraceData) -> list[tuple[tuple[str, int], tuple[LaunchRecord, ...]]]:
        """Take one trace; its steps that hold records, as ``((name, number), records)``."""
        rk = run_key(trace)
        if self.run is None:
            self.run = rk
        elif rk != self.run:
            raise _NotInOrder(f"side {self.name} holds several runs")
        occs = occurrences(trace, self.scope)
        self.clock.add(key, trace, occs if self.scope is None else None)  # the same cut when no scope is asked
        self.concurrency.add_trace(trace)
        out = []
        seen: dict[str, int] = {}
        for local, occ in enumerate(occs):
            number = self.counts.get(occ.name, 0) + occ.index
            seen[occ.name] = max(seen.get(occ.name, 0), occ.index + 1)
            last = self.last.get(occ.name)
            if last is not None and (occ.start_ns < last[0] or (occ.start_ns == last[0] and last[1] != key.arrival)):
                raise _NotInOrder(f"side {self.name}: steps of {occ.name!r} out of their start order")
            self.last[occ.name] = (occ.start_ns, key.arrival)
            if not occ.records:
                continue  # a step with no records is no segment; it keeps its number
            place = (occ.start_ns, key, local)
            if is_unscoped(occ):  # the topology diff takes unscoped work in chunks by content (unscoped.py)
                begun, done = self.chunks.feed(occ.records)
                for step in begun:
                    self.order[step] = place
                out += done
            else:
                self.order[(occ.name, number)] = place
                out.append(((occ.name, number), occ.records))
                self.concurrency.add_step(occ)
            self._timing(trace, occ, place)
        for name, n in seen.items():
            self.counts[name] = self.counts.get(name, 0) + n
        return out

    def _timing(self, trace: TraceData, occ, place: tuple) -> None:
        """This step's numbers, as :func:`step_series` over the whole side would give them."""
        steps, values, launches = step_series([trace], self.scope, [occ], self.loops)
        if is_unscoped(occ):  # numbered by iteration through the run (LoopIterations), not per call
            offset = 0
            steps = {}  # each iteration's time is its step group's sum: series() takes it from there
        else:
            offset = self.step_count.get(occ.name, 0)
        for name, durations in steps.items():
            if ("step", name) not in self.first or place < self.first[("step", name)]:
                self.first[("step", name)] = place
            self.steps.setdefault(name, []).extend(durations)
            self.step_count[name] = offset + len(durations)
        for i, (group, per) in enumerate(values.items()):
            here = (*place, i)
            if group not in self.first or here < self.first[group]:
                self.first[group] = here
            mine = self.values.get(group)
            if mine is None:
                mine = self.values[group] = _Series()
            for occ_index, ns in per.items():
                mine.add(offset + occ_index, ns)
        for group, (n, folded) in launches.items():
            c = self.launches.setdefault(group, [0, 0])
            c[0] += n
            c[1] += folded

    def series(self) -> tuple[dict, dict, dict]:
        """The side's :func:`step_series` answer, its groups in the order the list would have inserted them."""
        names = sorted(self.steps, key=lambda name: self.first[("step", name)])
        groups = sorted(self.values, key=lambda group: self.first[group])
        steps = {name: self.steps[name] for name in names}
        for kind, step, name in groups:  # unscoped iterations: no step list of their own
            if kind == "scope" and step == name and step not in steps:
                steps[step] = list(self.values[(kind, step, name)].values)
        return (
            steps,
            {group: self.values[group] for group in groups},
            {group: self.launches[group] for group in groups if group in self.launches},
        )


def _in_turn(a: Iterator, b: Iterator) -> Iterator[tuple[int, tuple]]:
    """``(0, item)`` / ``(1, item)`` from ``a`` and ``b`` in turn, then the rest of the longer one."""
    sources = [(0, a), (1, b)]
    while sources:
        for entry in list(sources):
            side, it = entry
            item = next(it, None)
            if item is None:
                sources.remove(entry)
            else:
                yield side, item


def diff_streamed(inputs: tuple[Traces, Traces], **options: Any) -> tuple[TraceDiff, list[BadValues]] | None:
    """``diff_traces`` of the two ``inputs`` (A, B) with the same keyword options (a :class:`DiffSettings`), and
    what became non-finite in B, streamed; None where the stream cannot give the lists' answer (see the module
    docstring)."""
    from launchtrace.sources.named import parse_backend

    settings = DiffSettings(**options)
    scope = settings.scope
    if any(isinstance(s, str) and parse_backend(s) is not None for one in inputs for s in one.specs):
        return None
    sides = (_Side("A", scope), _Side("B", scope))
    pending: tuple[dict, dict] = ({}, {})
    diffs: dict[tuple[str, int], SegmentDiff] = {}
    flags = settings.topology_flags()

    def match(side: int, step: tuple[str, int], records: tuple[LaunchRecord, ...]) -> None:
        other = pending[1 - side].pop(step, None)
        if other is None:
            pending[side][step] = records
            return
        ra, rb = (records, other) if side == 0 else (other, records)
        diffs[step] = segment_diff(step, ra, rb, 0, **flags)

    try:
        for side, (key, trace) in _in_turn(iter(inputs[0]), iter(inputs[1])):
            for step, records in sides[side].add(key, trace):
                match(side, step, records)
    except _NotInOrder:
        return None
    for side in (0, 1):
        for step, records in sides[side].chunks.finish():
            match(side, step, records)
    if scope is None and (sides[0].clock.infers() or sides[1].clock.infers()):
        return None  # a zero-code run's steps are repetitions of timers in several traces: the lists cut them
    for step, records in pending[0].items():
        diffs[step] = segment_diff(step, records, (), 0, **flags)
    for step, records in pending[1].items():
        diffs[step] = segment_diff(step, (), records, 0, **flags)
    order_a, order_b = sides[0].order, sides[1].order
    keys = sorted(diffs, key=lambda k: (0, order_a[k]) if k in order_a else (1, order_b[k]))
    opts = settings.verdict_options()
    shares = (sides[0].concurrency.shares(), sides[1].concurrency.shares())
    rows, warm, drifts = timing_of_series(
        series_of_runs([sides[0].series()], "A"),
        series_of_runs([sides[1].series()], "B"),
        opts,
        settings.absolute,
        shares,
    )
    result = TraceDiff(
        segments=tuple(diffs[k] for k in keys),
        timing=tuple(rows),
        options=settings.options(),
        warmup=tuple(warm),
        runs_a=1,
        runs_b=1,
        drift=tuple(drifts),
    )
    bad = became_non_finite_of(sides[0].clock.result().bad, sides[1].clock.result().bad)
    return result, bad
