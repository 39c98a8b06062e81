"""Large inputs read in bounded memory: each trace's spans once, exact totals of all of them, and a sample.

``report`` and ``chrome-trace`` draw every launch, so on a file of a million spans they cannot show each one
(a 5 GB JSON, a page no browser opens). They read the input with :class:`Scan` instead of loading it whole:

- :meth:`Scan.traces` yields each trace's raw spans as soon as the trace is complete, from the
  :class:`~launchtrace.sources.each.Traces` it is handed, and :class:`Totals` counts every one of them
  exactly from the raw spans, without rebuilding: traces, spans, device operations, the time range, per step
  name (the root span's name) count / total / min / max duration, per (op, kernel) operations and time;
- the command rebuilds (:meth:`Scan.rebuilt`, the slow part: about 30 us a span) only what it shows in full;
- :class:`Slowest` keeps the raw spans of the slowest left-out trace of each step name (at most
  :data:`MAX_NAMES` names), to be shown in full at the end.

State is bounded by the number of distinct step names and kernels (each capped at :data:`MAX_NAMES`, the rest
counted under :data:`OTHER`) and by one trace's spans per kept sample, never by the input's length.

Example::

    scan = Scan(Traces(["big.jsonl"]))
    for where, spans, step in scan.traces():
        if want_in_full(spans):
            traces = scan.rebuilt(where, spans)
    print(scan.totals.spans, scan.totals.steps["step"].count)
"""

from __future__ import annotations

import dataclasses
import operator
import random
from array import array
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from launchtrace import conventions as C
from launchtrace.model import TraceData
from launchtrace.spans import SpanData

if TYPE_CHECKING:
    from launchtrace.sources.each import Traces

__all__ = [
    "MAX_NAMES",
    "NO_ROOT",
    "OTHER",
    "Scan",
    "Slowest",
    "Step",
    "StepTotal",
    "Totals",
    "cut",
    "root_of",
    "step_of",
]

MAX_NAMES = 1000  # distinct step names and (op, kernel) pairs counted one by one; the rest under OTHER
OTHER = "<other names>"
NO_ROOT = "<no root>"

_start = operator.attrgetter("start_ns")
_end = operator.attrgetter("end_ns")


def root_of(spans: Sequence[SpanData]) -> SpanData | None:
    """The trace's root span (no parent), or ``None`` when it has none (a trace cut by the reader)."""
    for span in spans:
        if span.parent_span_id is None:
            return span
    return None


def cut(spans: Sequence[SpanData], limit: int) -> list[SpanData]:
    """At most ``limit`` spans of one trace: its roots and the first others (a trace too large to show whole;
    the rest is counted, never drawn)."""
    roots = [s for s in spans if s.parent_span_id is None][:limit]
    others = [s for s in spans if s.parent_span_id is not None][: max(0, limit - len(roots))]
    return roots + others


def step_of(spans: Sequence[SpanData]) -> tuple[str, int, int]:
    """``(name, start_ns, duration_ns)`` of the step a trace is: its root span (else the spans' extent)."""
    root = root_of(spans)
    if root is not None:
        return root.name, root.start_ns, max(0, root.end_ns - root.start_ns)
    start = min((s.start_ns for s in spans), default=0)
    return NO_ROOT, start, max(0, max((s.end_ns for s in spans), default=0) - start)


class Step(NamedTuple):
    """One trace as :meth:`Totals.add` counted it: its step name, start, duration, device operations, spans."""

    name: str
    start_ns: int
    duration_ns: int
    operations: int
    spans: int


@dataclasses.dataclass(slots=True)
class StepTotal:
    """Exact figures of every occurrence of one step name."""

    count: int = 0
    total_ns: int = 0
    min_ns: int = 0
    max_ns: int = 0

    def add(self, duration_ns: int) -> None:
        self.min_ns = duration_ns if not self.count else min(self.min_ns, duration_ns)
        self.max_ns = max(self.max_ns, duration_ns)
        self.count += 1
        self.total_ns += duration_ns


@dataclasses.dataclass(slots=True)
class KernelTotal:
    """Exact figures of one (op, kernel): ``operations`` counts a summary span's repetitions."""

    spans: int = 0
    operations: int = 0
    total_ns: int = 0


def _capped(table: dict, key, make):
    entry = table.get(key)
    if entry is None:
        if len(table) >= MAX_NAMES:
            key = (OTHER, OTHER) if isinstance(key, tuple) else OTHER
            entry = table.get(key)
        if entry is None:
            entry = table[key] = make()
    return entry


class Totals:
    """Exact counts over every span read, from the raw spans (see the module docstring)."""

    def __init__(self) -> None:
        self.traces = 0
        self.spans = 0
        self.operations = 0  # device operations: launches, copies, fills (a summary span's repetitions counted)
        self.dropped = 0  # spans the exporter's budget left out, as the traces say
        self.start_ns = 0
        self.end_ns = 0
        self.steps: dict[str, StepTotal] = {}
        self.kernels: dict[tuple[str, str], KernelTotal] = {}
        # what the report's header lists, from every span (each set at most MAX_NAMES long)
        self.pids: dict[str, None] = {}
        self.threads: set[object] = set()
        self.devices: set[str] = set()

    def add(self, spans: Sequence[SpanData]) -> Step:
        """Count one trace's spans; returns what it is (:class:`Step`)."""
        self.traces += 1
        self.spans += len(spans)
        starts = [t for t in map(_start, spans) if t]
        if starts:
            first = min(starts)
            self.start_ns = first if not self.start_ns else min(self.start_ns, first)
        if spans:
            self.end_ns = max(self.end_ns, max(map(_end, spans)))
        kernels = self.kernels
        operations = 0
        # this trace's threads and devices, added to the totals' at the end (in order if they would pass the cap)
        threads: set[object] = set()
        devices: set[str] = set()
        layouts, first_key = _LAYOUTS, _first
        for span in spans:  # the per-span work: where the wanted attributes are (once per layout), then a few lookups
            attrs = span.attributes
            names = tuple(map(first_key, attrs))
            layout = layouts.get(names)
            if layout is None:
                layout = _layout(names)
            op_at, kernel_at, thread_at, device_at, fold_at, repeat_at, dropped_at = layout
            if thread_at is not None:
                thread = attrs[thread_at][1]
                if thread is not None:
                    threads.add(thread)
            op = attrs[op_at][1] if op_at is not None else None
            if op is None:
                if dropped_at is not None:
                    self.dropped += _int(attrs[dropped_at][1])
                continue
            key = (op, (attrs[kernel_at][1] if kernel_at is not None else None) or span.name)
            row = kernels.get(key)
            if row is None:
                row = _capped(kernels, (str(key[0]), str(key[1])), KernelTotal)
            n = 1
            if fold_at is not None or repeat_at is not None:
                n = (
                    (_int(attrs[fold_at][1]) if fold_at is not None else 0)
                    or (_int(attrs[repeat_at][1]) if repeat_at is not None else 0)
                    or 1
                )
            row.spans += 1
            row.operations += n
            duration = span.end_ns - span.start_ns
            if duration > 0:
                row.total_ns += duration
            operations += n
            if device_at is not None:
                device = attrs[device_at][1]
                if device:
                    devices.add(device if type(device) is str else str(device))  # as written: 1 and True are two
        self.operations += operations
        if threads or devices:
            self._add_names(spans, threads, devices)
        if spans and len(self.pids) < MAX_NAMES:
            pid = dict(spans[0].resource).get("process.pid")
            if pid not in (None, ""):
                self.pids[str(pid)] = None
        name, step_start, duration = step_of(spans)
        _capped(self.steps, name, StepTotal).add(duration)
        return Step(name, step_start, duration, operations, len(spans))

    def _add_names(self, spans: Sequence[SpanData], threads: set[object], devices: set[str]) -> None:
        """One trace's threads and devices into the totals' sets: all of them while the sets stay within
        :data:`MAX_NAMES`, else span by span in order until full (what counting them one at a time keeps)."""
        threads, devices = threads - self.threads, devices - self.devices  # the new ones: a trace's size of work
        if len(self.threads) + len(threads) <= MAX_NAMES and len(self.devices) + len(devices) <= MAX_NAMES:
            self.threads |= threads
            self.devices |= devices
            return
        for span in spans:
            attrs = dict(span.attributes)
            thread = attrs.get(C.THREAD_ID)
            if thread is not None and thread not in self.threads and len(self.threads) < MAX_NAMES:
                self.threads.add(thread)
            device = attrs.get(C.DEVICE)
            on = attrs.get(C.OP) is not None  # a record span: the only ones whose device counts
            if on and device and device not in self.devices and len(self.devices) < MAX_NAMES:
                self.devices.add(str(device))


_first = operator.itemgetter(0)
# attribute names in order -> where the ones Totals reads are (the last of a repeated name, as a dict keeps it);
# a call site's spans share their names, so this is worked out once per call site, not per span
_LAYOUTS: dict[tuple[str, ...], tuple[int | None, ...]] = {}


def _layout(names: tuple[str, ...]) -> tuple[int | None, ...]:
    at = {name: i for i, name in enumerate(names)}.get
    layout = (
        at(C.OP),
        at(C.KERNEL),
        at(C.THREAD_ID),
        at(C.DEVICE),
        at(C.FOLD_LAUNCHES),
        at(C.REPEAT),
        at(C.DROPPED_SPANS),
    )
    if len(_LAYOUTS) >= 4096:
        _LAYOUTS.clear()
    _LAYOUTS[names] = layout
    return layout


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


class Slowest:
    """The raw spans of the slowest trace of each step name offered: at most :data:`MAX_NAMES` names and
    ``max_spans`` spans held in all (a trace that would pass that is not kept)."""

    def __init__(self, max_spans: int) -> None:
        self.max_spans = max_spans
        self.held_spans = 0
        self.kept: dict[str, tuple[Step, str, list[SpanData]]] = {}

    def offer(self, step: Step, where: str, spans: list[SpanData]) -> bool:
        """Keep ``spans`` if this is the slowest of its name so far (and it fits); ``True`` when kept."""
        held = self.kept.get(step.name)
        if held is not None and held[0].duration_ns >= step.duration_ns:
            return False
        if held is None and len(self.kept) >= MAX_NAMES:
            return False
        freed = len(held[2]) if held is not None else 0
        if self.held_spans - freed + len(spans) > self.max_spans:
            return False
        self.held_spans += len(spans) - freed
        self.kept[step.name] = (step, where, spans)
        return True

    def taken(self) -> list[tuple[Step, str, list[SpanData]]]:
        """The kept traces in the order they started; the holder lets them go."""
        out = sorted(self.kept.values(), key=lambda k: k[0].start_ns)
        self.kept.clear()
        self.held_spans = 0
        return out

    def __len__(self) -> int:
        return len(self.kept)


class Medians:
    """The median step duration of each name, from a uniform sample of at most ``size`` durations per name
    (reservoir sampling with a fixed seed: the same input gives the same answer); exact for a name with at most
    ``size`` occurrences. At most :data:`MAX_NAMES` names."""

    def __init__(self, size: int = 1001) -> None:
        self.size = size
        self.seen: dict[str, int] = {}
        self.sample: dict[str, array] = {}
        self._random = random.Random(25)

    def add(self, name: str, duration_ns: int) -> None:
        n = self.seen.get(name, 0)
        if not n and len(self.seen) >= MAX_NAMES:
            return
        self.seen[name] = n + 1
        sample = self.sample.get(name)
        if sample is None:
            sample = self.sample[name] = array("q")
        if n < self.size:
            sample.append(duration_ns)
        else:
            k = self._random.randrange(n + 1)
            if k < self.size:
                sample[k] = duration_ns

    def median(self, name: str) -> int | None:
        """The median of ``name``'s sample (the lower of two middles), or ``None`` for a name not counted."""
        sample = self.sample.get(name)
        if not sample:
            return None
        ranked = sorted(sample)
        return ranked[(len(ranked) - 1) // 2]

    def exact(self, name: str) -> bool:
        return self.seen.get(name, 0) <= self.size


class Scan:
    """Every trace of a source (:class:`~launchtrace.sources.each.Traces`, handed in), one at a time as
    raw spans, counted in :attr:`totals`."""

    def __init__(self, source: Traces) -> None:
        self.source = source
        self.files = source.files
        self.totals = Totals()

    def traces(self) -> Iterator[tuple[str, list[SpanData], Step]]:
        """``(file, spans, step)`` of each trace, counted in :attr:`totals` before it is yielded."""
        for where, spans in self.source.spans():
            yield where, spans, self.totals.add(spans)

    def again(self) -> Iterator[tuple[str, list[SpanData], Step]]:
        """The same traces in the same order once more (the source reads its files again), not counted again:
        for a choice that needs the whole input seen first (:class:`Medians`). ``step.operations`` is 0."""
        for where, spans in self.source.spans():
            name, start, duration = step_of(spans)
            yield where, spans, Step(name, start, duration, 0, len(spans))

    def rebuilt(self, where: str, spans: list[SpanData]) -> list[TraceData]:
        """One trace rebuilt (:meth:`Traces.rebuilt`): the slow part, for what is shown in full."""
        return self.source.rebuilt(where, spans)


class StepPoints:
    """Every step's point for a chart, thinned to at most ``cap``: every ``stride``-th step in run order (the
    stride doubles each time the points would pass ``cap``), plus the slowest step of each name."""

    def __init__(self, cap: int) -> None:
        self.cap = max(2, cap)
        self.stride = 1
        self.seen = 0
        self.points: list[tuple[int, str, int, int, int]] = []  # (n-th step, name, index of its name, start, ns)
        self.slowest: dict[str, tuple[int, str, int, int, int]] = {}
        self._index: dict[str, int] = {}

    def add(self, step: Step) -> int:
        """Count ``step``; returns its index among the steps of its name (as the chart's points number them)."""
        index = self._index.get(step.name, 0)
        if index or len(self._index) < MAX_NAMES:
            self._index[step.name] = index + 1
        point = (self.seen, step.name, index, step.start_ns, step.duration_ns)
        self.seen += 1
        held = self.slowest.get(step.name)
        if (held is None and len(self.slowest) < MAX_NAMES) or (held is not None and held[4] < step.duration_ns):
            self.slowest[step.name] = point
        if point[0] % self.stride:
            return index
        self.points.append(point)
        if len(self.points) > self.cap:
            self.stride *= 2
            self.points = [p for p in self.points if p[0] % self.stride == 0]
        return index

    def result(self) -> list[tuple[int, str, int, int, int]]:
        """The kept points and the slowest of each name, in run order."""
        return sorted({p[0]: p for p in (*self.points, *self.slowest.values())}.values())
