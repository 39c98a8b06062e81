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

A kernel's row in a timed step is judged finer (:data:`WAITED`): a Warp CPU launch holds the GIL while its
kernel runs, so a launch whose interval holds another thread's whole unscoped launch waited for that kernel.
What a one-run verdict compares is the row's ``quantile`` step (p10); while fewer than ``1 - quantile`` of its
steps hold such a wait in each run, that step is one without a wait, and the verdict stands. Measured on the
zoo (``docs/diff.md``): the unchanged pairs that read ``faster`` had waits in 98-100 % of one run's steps; the
programs whose timed kernel does not move between runs (``pool_light``, ``pool_inside``) in 0-25 % of their
unchanged runs' steps. The step's own row (its time between launches too) and an unscoped stream's rows keep
the step-level signal.

The signal is kept per run as extents: one per trace, thread and kind (in a step or not), one per step, one
per step and kernel (the extent of that kernel's launches in the step, and whether it held another thread's
launch), each thread's unscoped launches of its latest trace, and of each earlier trace its first start and
earliest end. Feed a run trace by trace, each trace before its steps (as a streamed diff reads them): a step's
kernel extent meets the unscoped launches of the traces after its own when those come (the steps seen so far are
marked), and those of the traces before it when it comes: the latest trace of each thread launch by launch, an
earlier one by its summary, exact for a step that began before that trace (a step that began inside an earlier
trace of a thread that has sent a newer one since, a step longer than that thread's roots, is judged on the
latest only). Listed and streamed, a run is fed in the same order, so they agree; a streamed diff
(:mod:`launchtrace.analysis.diff_stream`) keeps as much as the steps' own figures, never a launch each across
traces.

Example::

    seen = Concurrency()
    for trace in run:
        seen.add_trace(trace)
        for seg in steps_of(trace):
            seen.add_step(seg)
    seen.shares()        # {"iteration": 0.98, "<no scope> (ThreadPoolExecutor-1)": 1.0,
                         #  ("iteration", "__main__.fill_k"): 0.05}
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Mapping, Sequence

from launchtrace.analysis.segments import Segment
from launchtrace.analysis.unscoped import is_unscoped, stream_name
from launchtrace.conventions import kernel_title
from launchtrace.model import TraceData

__all__ = ["CONCURRENT_SHARE", "COUNT_TIMED_THREADS", "WAITED", "Concurrency", "run_shares", "side_shares"]

CONCURRENT_SHARE = 0.2
"""A step name whose steps (or unscoped pieces) are overlapped by other threads' unscoped launches this often, in
either run, gets no one-run verdict. Set above the odd overlap of a one-off upload at a thread's start (one step
in sixty) and far below the shares measured where threads do run beside the steps (0.9-1.0 in the zoo)."""

COUNT_TIMED_THREADS = False
"""Whether a timed step counts other threads' launches inside their own steps too (an unscoped stream always
does). Off: measured, counting them cost every one-run detection of the zoo's ``workers`` and prevented no false
alarm there (``docs/diff.md``; ``benchmarks/zoo_verdicts.py --count-timed-threads`` measures it on)."""


WAITED = True
"""Whether a kernel's row in a timed step is judged by its own launches' waits (the share of its steps in which
they held another thread's whole unscoped launch, against ``1 - quantile``) instead of by its step's overlap.
On: measured, it found the slowed kernel of ``pool_light`` and ``pool_inside`` one run each again with no false
alarm more (``docs/diff.md``; ``benchmarks/zoo_verdicts.py --step-overlap`` measures it off)."""


class _Kernel:
    """One step name's and kernel's entries, per thread in the order their steps began: extents and waits."""

    __slots__ = ("ends", "starts", "waited")

    def __init__(self) -> None:
        self.starts: array = array("q")
        self.ends: array = array("q")
        self.waited: bytearray = bytearray()


class Concurrency:
    """One run's steps and other threads' launch extents (see the module docstring)."""

    def __init__(self) -> None:
        self._free: dict[int, list[tuple[int, int]]] = {}  # thread -> extents of its unscoped launches
        self._timed: dict[int, list[tuple[int, int]]] = {}  # thread -> extents of its launches in steps
        self._steps: dict[str, array] = {}  # step name -> (thread, start, end) triples
        self._loose: set[str] = set()  # the step names that are unscoped streams
        self._held: dict[int, tuple[list[int], list[int]]] = {}  # thread -> its latest trace's unscoped launches
        # thread -> (first start, earliest end) per trace, indexed as _inside_index does, kept as traces come
        self._earlier: dict[int, tuple[list[int], list[int]]] = {}
        self._kernels: dict[tuple[str, str], dict[int, _Kernel]] = {}  # (step name, kernel) -> thread -> entries

    def add_trace(self, trace: TraceData) -> None:
        """The trace's launches, one extent per thread and kind (unscoped: also the pieces of its stream)."""
        free: dict[int, list] = {}
        timed: dict[int, list] = {}
        launches: dict[int, list[tuple[int, int]]] = {}
        for rec in trace.records:
            if rec.end_ns > 0 and rec.scope_id is None:
                launches.setdefault(rec.thread, []).append((rec.start_ns, rec.end_ns))
        for thread, spans in launches.items():
            self._held[thread] = held = _inside_index(spans)
            _insert(self._earlier.setdefault(thread, ([], [])), held[0][0], held[1][0])
            self._mark(thread, spans)
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
        kernels: dict[tuple, list[int]] = {}
        for rec in seg.records:
            start, end = rec.start_ns, rec.end_ns
            if end <= 0:
                continue
            e = kernels.get((rec.kernel, rec.adjoint))
            if e is None:
                kernels[(rec.kernel, rec.adjoint)] = [start, end]
            else:
                if start < e[0]:
                    e[0] = start
                if end > e[1]:
                    e[1] = end
        others = [t for t in self._held if t != thread]
        for (kernel, adjoint), (start, end) in kernels.items():
            held = any(self._holds(other, start, end) for other in others) if others else False
            key = (seg.name, kernel_title(kernel, adjoint))
            per = self._kernels.get(key)
            if per is None:
                per = self._kernels[key] = {}
            entries = per.get(thread)
            if entries is None:
                entries = per[thread] = _Kernel()
            if not entries.starts or entries.starts[-1] <= start:  # in start order: the feed order, mostly
                entries.starts.append(start)
                entries.ends.append(end)
                entries.waited.append(held)
            else:
                i = bisect.bisect_right(entries.starts, start)
                entries.starts.insert(i, start)
                entries.ends.insert(i, end)
                entries.waited.insert(i, held)

    def _holds(self, thread: int, start: int, end: int) -> bool:
        """Whether ``[start, end]`` holds one of ``thread``'s unscoped launches seen so far whole (see the module
        docstring for what an earlier trace's summary can tell)."""
        if _holds(self._held[thread], start, end):
            return True
        return _holds(self._earlier[thread], start, end)

    def _mark(self, thread: int, spans: list[tuple[int, int]]) -> None:
        """Mark the steps seen so far whose kernel extent holds one of ``thread``'s unscoped launches whole: on
        another thread, a kernel's extents in successive steps follow each other, so only the last one that
        began before the launch can hold it."""
        for per in self._kernels.values():
            for other, entries in per.items():
                if other == thread or not entries.starts:
                    continue
                for start, end in spans:
                    i = bisect.bisect_right(entries.starts, start) - 1
                    if i >= 0 and entries.ends[i] >= end:
                        entries.waited[i] = 1

    def _piece(self, name: str, thread: int, start: int, end: int) -> None:
        a = self._steps.get(name)
        if a is None:
            a = self._steps[name] = array("q")
        a.extend((thread, start, end))

    def shares(self) -> dict:
        """Per step name, the share of its steps (pieces) that another thread's launches overlap: its unscoped
        ones, and for an unscoped stream's pieces (or with :data:`COUNT_TIMED_THREADS`) its timed ones too. Per
        ``(step name, kernel)`` of a timed step, the share of its steps in which the kernel's launches (their
        extent in the step) held another thread's unscoped launch whole: waited for its kernel (:data:`WAITED`)."""
        free, timed = _index(self._free), _index(self._timed)
        out: dict = {}
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
        for key, per in self._kernels.items():
            steps = sum(len(e.waited) for e in per.values())
            out[key] = sum(sum(e.waited) for e in per.values()) / steps if steps else 0.0
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


def _inside_index(spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Launches' starts in order and the earliest end among the launches from each on."""
    spans = sorted(spans)
    least = [0] * len(spans)
    low = None
    for i in range(len(spans) - 1, -1, -1):
        e = spans[i][1]
        low = e if low is None or e < low else low
        least[i] = low
    return [s for s, _ in spans], least


def _insert(index: tuple[list[int], list[int]], start: int, end: int) -> None:
    """``(start, end)`` added to an :func:`_inside_index` in place: traces come mostly in time order, so this is
    an append and a look at the entry before it (rebuilding the index for every trace was quadratic in a run's
    traces)."""
    starts, least = index
    at = bisect.bisect_right(starts, start)
    starts.insert(at, start)
    least.insert(at, end if at == len(least) else min(end, least[at]))
    for i in range(at - 1, -1, -1):  # the earliest end from each earlier entry on: lowered where this one is lower
        if least[i] <= end:
            break
        least[i] = end


def _holds(index: tuple[list[int], list[int]], start: int, end: int) -> bool:
    """Whether ``[start, end]`` holds one of the indexed launches whole (one starting in it that ends in it)."""
    starts, least = index
    k = bisect.bisect_left(starts, start)
    return k < len(starts) and least[k] <= end


def run_shares(traces: Sequence[TraceData], segs: Sequence[Segment]) -> dict:
    """:meth:`Concurrency.shares` of one run, given its traces and its steps as the diff cuts them (each trace's
    steps after it, as a streamed diff feeds them)."""
    seen = Concurrency()
    by_trace: dict[int, list[Segment]] = {}
    for seg in segs:
        by_trace.setdefault(seg.trace, []).append(seg)
    for t, trace in enumerate(traces):
        seen.add_trace(trace)
        for seg in by_trace.pop(t, ()):
            seen.add_step(seg)
    for rest in by_trace.values():  # none where the steps came from these traces
        for seg in rest:
            seen.add_step(seg)
    return seen.shares()


def side_shares(runs: Sequence[Mapping]) -> dict:
    """A side's share per step name (and per step name and kernel): the largest over its runs."""
    out: dict = {}
    for shares in runs:
        for name, share in shares.items():
            out[name] = max(out.get(name, 0.0), share)
    return out
