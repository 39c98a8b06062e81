"""One scope occurrence (a step) of one run, as the fleet analyses see it.

A trace is cut into steps by the one rule every command uses (:func:`launchtrace.steps.occurrences`, through
:func:`launchtrace.analysis.segments.segments`): each occurrence of a top-level scope is one step. For each
step this module computes what baselines keep and alerts compare: its topology fingerprint (unowned
buffers by allocation identity, else by the order they first appear in, as the diff compares them, so equal
steps of two processes have equal fingerprints), its record count, its foreign buffers, its duration, and per
kernel and per position the time spent.

Example::

    from launchtrace.analysis.fleet.occurrences import occurrences_of
    for occ in occurrences_of(trace, group_by=("service.version", "host.name")):
        print(occ.group, occ.scope, occ.fingerprint[:12], occ.launches)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat as _repeat
from typing import Any

from launchtrace import folds as fold_rules
from launchtrace.analysis.segments import RenamedRecords, segments, unowned_by_order
from launchtrace.analysis.unscoped import LoopIterations, is_unscoped
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.sources.rebuild import TRACE_ID
from launchtrace.steps import RUN_KEYS, run_id
from launchtrace.topology import topology_key

__all__ = [
    "MAX_POSITIONS",
    "RUN_KEYS",
    "Occurrence",
    "Samples",
    "iteration_times",
    "loop_iterations",
    "occurrences_of",
    "run_key",
    "step_times",
    "topology_digest",
]

MAX_POSITIONS = 256
"""Positions of a step timed one by one (the rest count only in the kernel and scope totals)."""


def run_key(attributes: dict[str, Any]) -> str:
    """The run (process) a trace came from, as a string: :func:`launchtrace.steps.run_id` (the one rule)."""
    return run_id(attributes)


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def topology_digest(records: Sequence[LaunchRecord], *, scalars: bool = True) -> str:
    """A SHA-256 hex digest of ``records``' topology keys as ``launchtrace diff`` compares them (call
    :func:`~launchtrace.analysis.diff.unowned_by_order` first); a record with ``repeat`` n counts n times."""
    digest = hashlib.sha256()
    lines: dict[tuple, bytes] = {}
    for r in records:
        key = topology_key(r, scalars=scalars)
        line = lines.get(key)
        if line is None:
            line = lines[key] = json.dumps(_plain(key), separators=(",", ":")).encode() + b"\n"
        digest.update(line * max(1, int(r.repeat or 1)))
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True, slots=True)
class Occurrence:
    """One step. ``records``: in issue order, unowned buffers replaced by their order (as the diff sees them).

    ``kernel_ns``: per ``(kernel, op)`` the summed host duration in the step, and ``kernel_samples`` the
    launches behind it as ``(duration, count)`` (count > 1: a folded record standing for repetitions);
    ``position_ns``: per ``(position, kernel)`` the duration (first :data:`MAX_POSITIONS`).
    """

    group: tuple[str, ...]
    service: str
    run: str
    trace_id: str
    index: int  # segment index within the trace: with trace_id, orders representatives
    scope: str
    start_ns: int
    duration_ns: int
    fingerprint: str
    launches: int
    foreign_buffers: int
    records: tuple[LaunchRecord, ...]
    kernel_ns: dict[tuple[str, str], int]
    kernel_samples: dict[tuple[str, str], list[tuple[int, int]]]
    position_ns: dict[tuple[int, str], int]
    parts: tuple[StepTimes, ...] = ()  # work outside every scope: each loop iteration's times (its latency steps)


KernelKey = tuple[str, str]
StepTimes = tuple[int, int, dict[KernelKey, int], dict[KernelKey, list[tuple[int, int]]], dict[tuple[int, str], int]]
Launch = tuple[str, str, int, int, int]  # (kernel, op, repeat, start_ns, end_ns)


def loop_iterations(records: Sequence[LaunchRecord]) -> tuple[int, ...]:
    """Each record's loop iteration in a run of work outside every scope (one root's: an iteration never spans
    roots, so a step with the same records is cut alike wherever it came), by
    :meth:`launchtrace.analysis.unscoped.LoopIterations.root`."""
    return tuple(it for _, it, _ in LoopIterations().root(records))


def iteration_times(launches: Sequence[Launch], iterations: Sequence[int]) -> tuple[StepTimes, ...]:
    """:func:`step_times` of each loop iteration (``iterations``: each launch's, as :func:`loop_iterations`
    gives them, never decreasing), in order. An iteration has no clock of its own: its duration is its launches'
    time (as ``launchtrace diff`` times it), not the wall time from its first launch to its last, which holds
    whatever the program did between them (uploads from NumPy, Python) and moves with the machine's load."""
    out, begin = [], 0
    for end in range(1, len(launches) + 1):
        if end == len(launches) or iterations[end] != iterations[begin]:
            start, _wall, kernel_ns, kernel_samples, position_ns = step_times(launches[begin:end])
            if kernel_ns:  # a part with no timed launch is no step
                out.append((start, sum(kernel_ns.values()), kernel_ns, kernel_samples, position_ns))
            begin = end
    return tuple(out)


def step_times(launches: Iterable[tuple[str, str, int, int, int]], new_samples: Callable[[], Any] = list) -> StepTimes:
    """``(start, duration, kernel_ns, kernel_samples, position_ns)`` of a step (see :class:`Occurrence`) from its
    launches in issue order as ``(kernel, op, repeat, start_ns, end_ns)``; untimed ones (``end_ns <= 0``) only
    hold their position. Shared by the record path and the span fast path (:mod:`.fast`); ``new_samples``: what
    holds a kernel's ``(duration, count)`` pairs (:class:`Samples` for a spilled step)."""
    kernel_ns: dict[tuple[str, str], int] = {}
    kernel_samples: dict[tuple[str, str], list[tuple[int, int]]] = {}
    position_ns: dict[tuple[int, str], int] = {}
    start = end = 0
    timed = False
    for pos, (kernel, op, repeat, s, e) in enumerate(launches):
        if e <= 0:
            continue
        if not timed:
            start, end, timed = s, e, True
        else:
            start, end = min(start, s), max(end, e)
        key = (kernel, op)
        n = max(1, repeat)
        one = max(0, e - s)
        d = one * n
        kernel_ns[key] = kernel_ns.get(key, 0) + d
        samples = kernel_samples.get(key)
        if samples is None:
            samples = kernel_samples[key] = new_samples()
        samples.append((one, n))
        if pos < MAX_POSITIONS:
            position_ns[(pos, kernel)] = d
    return start, max(0, end - start), kernel_ns, kernel_samples, position_ns


def occurrences_of(trace: TraceData, group_by: Sequence[str], *, scalars: bool = True) -> Iterator[Occurrence]:
    """Every step of ``trace`` (see the module docstring)."""
    attrs = trace.attributes
    group = tuple(str(attrs.get(k, "")) for k in group_by)
    service = str(attrs.get("service.name", ""))
    run = run_key(attrs)
    trace_id = str(attrs.get(TRACE_ID, ""))
    for index, seg in enumerate(segments([trace])):
        raw = seg.records
        if not raw:
            continue
        if isinstance(raw, (list, tuple)) or is_unscoped(seg):
            raw = tuple(raw)  # (work outside every scope: its loop iterations are cut from the whole list)
            records: Sequence[LaunchRecord] = unowned_by_order(raw)
            launches = [(r.kernel, str(r.op), r.repeat, r.start_ns, r.end_ns) for r in raw]
            times = step_times(launches)
            parts = iteration_times(launches, loop_iterations(records)) if is_unscoped(seg) else ()
            count = sum(fold_rules.launches(r) for r in raw)
            # by allocation where known: two temporaries at one reused address are two buffers, in every run
            foreign = {b.alloc or b.ptr for r in raw for b in r.buffers if b.foreign and b.ptr}
        else:  # a spilled step (launchtrace.sources.spill): read, never held
            records = RenamedRecords(raw)  # renamed again whenever read
            times, count, foreign = _spilled_times(raw)
            parts = ()
        start, duration, kernel_ns, kernel_samples, position_ns = times
        yield Occurrence(
            group=group,
            service=service,
            run=run,
            trace_id=trace_id,
            index=index,
            scope=seg.name,
            start_ns=start,
            duration_ns=duration,
            fingerprint=topology_digest(records, scalars=scalars),
            launches=count,
            foreign_buffers=len(foreign),
            records=records,  # type: ignore[arg-type]  # a spilled step's: iterated only, as a tuple would be
            kernel_ns=kernel_ns,
            kernel_samples=kernel_samples,
            position_ns=position_ns,
            parts=parts,
        )


class Samples:
    """One kernel's ``(duration, count)`` samples of a spilled step (see :class:`Occurrence`) as arrays: 8 bytes
    a launch (16 once a launch stands for several) instead of a tuple's 64, iterated as the list's pairs."""

    __slots__ = ("counts", "durations")

    def __init__(self) -> None:
        self.durations = array("q")
        self.counts: array | None = None  # None while every count is 1

    def append(self, pair: tuple[int, int]) -> None:
        duration, count = pair
        if count != 1 and self.counts is None:
            self.counts = array("q", [1]) * len(self.durations)
        self.durations.append(duration)
        if self.counts is not None:
            self.counts.append(count)

    def __len__(self) -> int:
        return len(self.durations)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.durations, _repeat(1) if self.counts is None else self.counts)


def _spilled_times(raw: Iterable[LaunchRecord]) -> tuple[StepTimes, int, set]:
    """:func:`step_times`, the launch count and the foreign buffers of a spilled step's records (read back from its
    file each time they are iterated) in one pass, the samples as :class:`Samples`."""
    count = 0
    foreign: set = set()

    def launches() -> Iterator[Launch]:
        nonlocal count
        for r in raw:
            count += fold_rules.launches(r)
            for b in r.buffers:
                if b.foreign and b.ptr:
                    foreign.add(b.alloc or b.ptr)
            yield r.kernel, str(r.op), r.repeat, r.start_ns, r.end_ns

    times = step_times(launches(), Samples)
    return times, count, foreign
