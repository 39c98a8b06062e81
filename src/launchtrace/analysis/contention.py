"""Other threads launching while a step runs: a run-level signal that one run per side cannot be trusted.

Two runs of an unchanged program whose steps share the machine with work on other threads (a
``ThreadPoolExecutor``'s tasks, a producer thread) can settle into different ways of sharing the cores and the
GIL, and each run keeps its way from start to end: the steps within one run then agree closely with each other
and tell nothing of the difference between runs. A one-run verdict (``steps-one-run``) rests on exactly that
within-run agreement, so for such steps it is replaced by ``inconclusive``, asking for runs on each side (the
run-level test sees the runs differ). ``docs/diff.md`` (concurrent threads) has the measurements.

What counts: a step overlapped by launches on another thread where at least one of the two is work under no
scope (a pool's tasks, a producer: nobody's step). A timed step counts launches **under no scope** on other
threads; an unscoped stream's pieces (``<no scope> (producer)``, one per trace and thread) count any other
thread's launches. Two threads each timing their own loop (the zoo's ``workers``) do not count: they kept their
one-run verdicts honest in the measurements (no false alarm in 24 unchanged pairs, the slowed kernel found in
48 of 48 one-run pairs), and counting them would have lost every one of those (:data:`COUNT_TIMED_THREADS`).

The signal is kept per run as extents, one per trace, thread and kind (in a step or not), and one per step, so
a streamed diff (:mod:`launchtrace.analysis.diff_stream`) keeps as much as the steps, never a launch each.

Example::

    seen = Concurrency()
    for trace in run:
        seen.add_trace(trace)
    for seg in steps_of_run:
        seen.add_step(seg)
    seen.shares()        # {"iteration": 0.98, "<no scope> (ThreadPoolExecutor-1)": 1.0}
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Mapping, Sequence

from launchtrace.analysis.segments import Segment
from launchtrace.analysis.unscoped import is_unscoped, stream_name
from launchtrace.model import TraceData

__all__ = ["CONCURRENT_SHARE", "COUNT_TIMED_THREADS", "Concurrency", "run_shares", "side_shares"]

CONCURRENT_SHARE = 0.2
"""A step name whose steps (or unscoped pieces) are overlapped by other threads' unscoped launches this often, in
either run, gets no one-run verdict. Set above the odd overlap of a one-off upload at a thread's start (one step
in sixty) and far below the shares measured where threads do run beside the steps (0.9-1.0 in the zoo)."""

COUNT_TIMED_THREADS = False
"""Whether a timed step counts other threads' launches inside their own steps too (an unscoped stream always
does). Off: measured, counting them cost every one-run detection of the zoo's ``workers`` and prevented no false
alarm there (``docs/diff.md``; ``benchmarks/zoo_verdicts.py --count-timed-threads`` measures it on)."""


class Concurrency:
    """One run's steps and other threads' launch extents (see the module docstring)."""

    def __init__(self) -> None:
        self._free: dict[int, list[tuple[int, int]]] = {}  # thread -> extents of its unscoped launches
        self._timed: dict[int, list[tuple[int, int]]] = {}  # thread -> extents of its launches in steps
        self._steps: dict[str, array] = {}  # step name -> (thread, start, end) triples
        self._loose: set[str] = set()  # the step names that are unscoped streams

    def add_trace(self, trace: TraceData) -> None:
        """The trace's launches, one extent per thread and kind (unscoped: also the pieces of its stream)."""
        free: dict[int, list] = {}
        timed: dict[int, list] = {}
        for rec in trace.records:
            if rec.end_ns <= 0:
                continue
            into = free if rec.scope_id is None else timed
            s = into.get(rec.thread)
            if s is None:
                into[rec.thread] = [rec.start_ns, rec.end_ns, rec]
            else:
                s[0], s[1] = min(s[0], rec.start_ns), max(s[1], rec.end_ns)
        for thread, (start, end, rec) in free.items():
            self._free.setdefault(thread, []).append((start, end))
            name = stream_name(rec)
            self._loose.add(name)
            self._piece(name, thread, start, end)
        for thread, (start, end, _rec) in timed.items():
            self._timed.setdefault(thread, []).append((start, end))

    def add_step(self, seg: Segment) -> None:
        """One step with records (a scope's occurrence or an inferred step; unscoped work comes by its trace)."""
        if is_unscoped(seg) or not seg.records:
            return
        src = seg.source
        thread = seg.records[0].thread
        if src is not None and seg.scope_id is not None and seg.scope_id in src.scopes:
            thread = src.scopes[seg.scope_id].thread
        self._piece(seg.name, thread, seg.start_ns, seg.end_ns)

    def _piece(self, name: str, thread: int, start: int, end: int) -> None:
        a = self._steps.get(name)
        if a is None:
            a = self._steps[name] = array("q")
        a.extend((thread, start, end))

    def shares(self) -> dict[str, float]:
        """Per step name, the share of its steps (pieces) that another thread's launches overlap: its unscoped
        ones, and for an unscoped stream's pieces (or with :data:`COUNT_TIMED_THREADS`) its timed ones too."""
        free, timed = _index(self._free), _index(self._timed)
        out = {}
        for name, a in self._steps.items():
            against = free + timed if name in self._loose or COUNT_TIMED_THREADS else free
            hit = 0
            for i in range(0, len(a), 3):
                thread, start, end = a[i], a[i + 1], a[i + 2]
                for other, starts, reach in against:
                    k = bisect.bisect_left(starts, end)  # extents starting before the step ends
                    if other != thread and k and reach[k - 1] > start:
                        hit += 1
                        break
            out[name] = hit / (len(a) // 3) if a else 0.0
        return out


def _index(extents: dict[int, list[tuple[int, int]]]) -> list[tuple[int, list[int], list[int]]]:
    """Per thread, its extents' starts in order and the latest end among the extents up to each."""
    out = []
    for thread, spans in extents.items():
        spans.sort()
        reach, top = [], -1
        for _, e in spans:
            top = max(top, e)
            reach.append(top)
        out.append((thread, [s for s, _ in spans], reach))
    return out


def run_shares(traces: Sequence[TraceData], segs: Sequence[Segment]) -> dict[str, float]:
    """:meth:`Concurrency.shares` of one run, given its traces and its steps as the diff cuts them."""
    seen = Concurrency()
    for trace in traces:
        seen.add_trace(trace)
    for seg in segs:
        seen.add_step(seg)
    return seen.shares()


def side_shares(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """A side's share per step name: the largest over its runs."""
    out: dict[str, float] = {}
    for shares in runs:
        for name, share in shares.items():
            out[name] = max(out.get(name, 0.0), share)
    return out
