"""``launchtrace dataflow``'s whole-run view streamed: every run's records in issue order without holding them.

The whole-run view (:func:`launchtrace.analysis.runs.merge_run`) puts a process's records in its issue order
(``seq``, then start), but a file's traces arrive as their roots end: the unscoped work's trace, which holds the
first records, ends last. So the input is read twice:

1. every trace is rebuilt and only its run and lowest ``seq`` are kept (16 bytes); a
   trace whose records start before an earlier trace of its run ended is "late" (the unscoped work, another
   thread's traces overlapping in time), and its records are kept while the late traces kept hold at most
   :data:`_KEEP_LATE` together (the unscoped work's traces are small);
2. the traces are read again in the same order; each run's records go into a heap and leave it, into a
   :class:`~launchtrace.analysis.dataflow.DataflowBuilder`, as soon as no trace still to come can hold an
   earlier one.

What is held: the records waiting in the heap (a few traces' worth when the traces of a run follow one another;
a late trace goes in when its first record is due: a kept one from memory, the others read ahead by a second
reader), the late traces kept, about 80 bytes per record for the critical path, the waves and the hazards'
wording, and the hazards. The input is read twice, and a third time (rebuilding only those) where late traces
were not kept. The rows the output lists (records, accesses, edges) go to a temporary
file as they are made and are read back as they are written out; those it does not list (the text output: all
but the edges of ``--edges``) are only counted.

Example::

    views = stream_dataflow(Traces(["run.jsonl"]))
"""

from __future__ import annotations

import collections
import heapq
import marshal
import tempfile
from array import array
from collections.abc import Collection, Iterator
from itertools import groupby
from typing import IO, Any

from launchtrace.analysis.dataflow import DataflowBuilder, Edge, EdgeKind, Hazard, lane_of
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.sources.each import Traces
from launchtrace.steps import run_key

__all__ = ["ROWS", "StreamedFlow", "stream_dataflow"]

ROWS = ("records", "accesses", "edges")
"""The row lists a :class:`StreamedFlow` can keep for the output."""
_KIND_TEXT = {kind: str(kind) for kind in EdgeKind}


class _Rows:
    """Rows written to a temporary file as they come and read back in order; or, where the output does not
    list them (``keep`` false: the text output lists only edges, and those only with ``--edges``), counted.

    Rows are dicts of strings, ints and bools, written with :mod:`marshal` (read back equal, as JSON would,
    several times faster to write)."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.file: IO[bytes] | None = tempfile.TemporaryFile("w+b") if keep else None  # noqa: SIM115 (close())
        self.count = 0

    def add(self, row: Any) -> None:
        if self.file is not None:
            marshal.dump(row, self.file)
        self.count += 1

    def __iter__(self) -> Iterator[Any]:
        if self.file is None:
            raise ValueError("these rows were counted, not kept")
        self.file.flush()
        self.file.seek(0)
        for _ in range(self.count):
            yield marshal.load(self.file)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class StreamedFlow:
    """One run's dataflow as ``dataflow`` prints it: counts, the critical path, the overlap candidates and the
    hazards in memory; ``records``, ``accesses`` and ``edges`` rows in temporary files (iterate them)."""

    def __init__(self, label: str, rows: Collection[str] = ROWS) -> None:
        self.label = label
        self.builder = DataflowBuilder(None)
        self.kernels: list[str] = []
        self._kernel_codes: dict[str, int] = {}
        self.kernel = array("l")
        self.info: list[tuple] = []  # per distinct (stream, site, thread) of records: a hazard's wording
        self._info_codes: dict[tuple, int] = {}
        self._site_texts: dict[int, tuple[object, str]] = {}  # Site objects are kept, so ids stay theirs
        self.info_of = array("l")
        self.starts = array("q")
        self.ends = array("q")
        self.records = _Rows("records" in rows)
        self.accesses = _Rows("accesses" in rows)
        self.edges = _Rows("edges" in rows)
        self.edge_kinds: dict[str, int] = {}
        self.hazards: list[Hazard] = []
        self.sites: list[tuple[str, str]] = []  # (src site, dst site) per hazard
        self.waiting = 0  # the most records that waited for their turn at once

    @property
    def n(self) -> int:
        return self.builder.n

    def name(self, i: int) -> str:
        return f"#{i} {self.kernels[self.kernel[i]]}"

    def add(self, rec: LaunchRecord) -> None:
        i = self.builder.n
        accesses, edges = self.builder.add(rec)
        code = self._kernel_codes.setdefault(rec.kernel, len(self._kernel_codes))
        if code == len(self.kernels):
            self.kernels.append(rec.kernel)
        self.kernel.append(code)
        site = rec.site
        known = self._site_texts.get(id(site))  # a call site's launches share their Site: its text made once
        if known is None or known[0] is not site:
            if len(self._site_texts) >= 4096:  # bounded: a source whose every record has its own Site
                self._site_texts.clear()
            known = self._site_texts[id(site)] = (site, str(site))
        info = (rec.stream, known[1], rec.thread_name or rec.thread)
        icode = self._info_codes.setdefault(info, len(self._info_codes))
        if icode == len(self.info):
            self.info.append(info)
        self.info_of.append(icode)
        self.starts.append(rec.start_ns)
        self.ends.append(rec.end_ns)
        records, rows = self.records, self.accesses
        if records.keep:
            records.add({"index": i, "kernel": rec.kernel, "op": str(rec.op)})
        else:
            records.count += 1
        if rows.keep:
            for a in accesses:
                row = {"record": a.record, "name": a.name, "buffer": a.region.label, "mode": a.mode}
                row["inferred"] = a.inferred
                rows.add(row)
        else:
            rows.count += len(accesses)
        kinds, rows = self.edge_kinds, self.edges
        for e in edges:
            kind = _KIND_TEXT[e.kind]
            kinds[kind] = kinds.get(kind, 0) + 1
            if rows.keep:
                rows.add({"src": e.src, "dst": e.dst, "kind": kind, "buffer": e.buffer, "cross_lane": e.cross_lane})
            else:
                rows.count += 1
            if e.cross_lane:
                self._hazard(e, rec)

    def _hazard(self, e: Edge, b: LaunchRecord) -> None:
        """:func:`launchtrace.analysis.dataflow._hazards` for one edge, ``a`` from what was kept of it."""
        a_kernel = self.kernels[self.kernel[e.src]]
        a_stream, a_site, a_thread = self.info[self.info_of[e.src]]
        la_stream = self._stream_lane(e.src)
        lb = lane_of(b)
        if la_stream or lb[0] == "stream":
            reason = (
                f"{e.kind} on {e.buffer}: {a_kernel} (stream {a_stream}, {a_site}) and {b.kernel} "
                f"(stream {b.stream}, {b.site}) with no ordering between their streams in the trace"
            )
        elif self.starts[e.src] < b.end_ns and b.start_ns < self.ends[e.src]:
            reason = (
                f"{e.kind} on {e.buffer}: {a_kernel} (thread {a_thread}, {a_site}) and "
                f"{b.kernel} (thread {b.thread_name or b.thread}, {b.site}) ran at the same time"
            )
        else:
            return
        self.hazards.append(Hazard(e, reason))
        self.sites.append((a_site, str(b.site)))

    def _stream_lane(self, i: int) -> bool:
        return self.builder.lane_list[self.builder.lanes[i]][0] == "stream"

    def overlap_candidates(self) -> list[tuple[int, ...]]:
        """:meth:`launchtrace.analysis.dataflow.Dataflow.overlap_candidates` from the level and lane arrays: the
        records ordered by wave (a stable sort: then by index), one wave's lanes grouped at a time. No NumPy:
        the command needs it nowhere else, and importing it here, at the end with the run's state at its
        largest, cost more than the sort (issue 25)."""
        level = self.builder.level
        order = sorted(range(self.builder.n), key=level.__getitem__)
        lanes = self.builder.lanes
        out = []
        for _, wave in groupby(order, key=level.__getitem__):
            by_lane: dict[int, list[int]] = {}
            for i in wave:
                by_lane.setdefault(lanes[i], []).append(i)
            out.extend(tuple(group) for group in by_lane.values() if len(group) > 1)
        return out

    def close(self) -> None:
        for rows in (self.records, self.accesses, self.edges):
            rows.close()


class _Run:
    """One run while the input is read the second time: its heap of records not yet added, and its late
    traces (lowest seq, place in the input) in the order they are needed."""

    __slots__ = ("flow", "heap", "late", "later", "order", "seen", "single", "waiting")

    def __init__(self, flow: StreamedFlow, later: array, late: list[tuple[int, int]], single: bool) -> None:
        self.flow = flow
        self.heap: list[tuple] = []
        self.later = later  # after each of the run's not-late traces: the lowest seq of those still to come
        self.seen = 0  # how many of those have been read
        self.late = collections.deque(sorted(late))
        self.order = 0
        self.single = single
        self.waiting = 0  # the most records the heap held at once

    def push(self, records: list[LaunchRecord]) -> None:
        for rec in records:
            heapq.heappush(self.heap, (rec.seq, rec.start_ns, self.order, rec))
            self.order += 1
        self.waiting = max(self.waiting, len(self.heap))
        self.flow.waiting = self.waiting

    def add_below(self, bound: int) -> None:
        while self.heap and self.heap[0][0] < bound:
            self.flow.add(heapq.heappop(self.heap)[-1])


class _Ahead:
    """The late traces, fetched when they are needed: those the first read kept (``kept``), the others by a
    second reader of the input, ahead of the main one, started when the first of them is due."""

    def __init__(self, source: Traces, late: set[int], runs: dict[tuple, _Run], kept: dict[int, tuple]) -> None:
        self.source = source
        self.late = collections.deque(sorted(late))  # in input order, as a reader meets them
        self.kept = kept  # arrival -> (run key, records)
        self.rest = late - kept.keys()
        self.reader: Iterator[tuple[int, TraceData]] | None = None
        self.runs = runs
        self.fetched: set[int] = set()

    def fetch(self, arrival: int) -> None:
        """Take late traces in input order until the one at ``arrival`` is in its run's heap (late ones met on
        the way go in too, as a reader would meet them)."""
        while arrival not in self.fetched:
            at = self.late.popleft()
            kept = self.kept.pop(at, None)
            if kept is None:
                if self.reader is None:  # rebuilds the late traces not kept: the others are read past
                    self.reader = self.source.only(self.rest)
                at, trace = next(self.reader)
                kept = (run_key(trace), trace.records)
            self.runs[kept[0]].push(kept[1])
            self.fetched.add(at)

    def needed(self, run: _Run, bound: int) -> None:
        """Every late trace of ``run`` that may hold a record below ``bound``, in its heap."""
        while run.late and run.late[0][0] < bound:
            self.fetch(run.late.popleft()[1])


def stream_dataflow(source: Traces, rows: Collection[str] = ROWS) -> list[StreamedFlow] | None:
    """Each run's :class:`StreamedFlow`, runs in ``load_traces``' first-seen order; None for a backend source
    (the caller builds the views from the lists). ``rows``: which of :data:`ROWS` the output lists (the others
    are only counted)."""
    from launchtrace.analysis.runs import Run
    from launchtrace.sources.named import parse_backend

    if any(isinstance(s, str) and parse_backend(s) is not None for s in source.specs):
        return None
    # first read: each trace's run and seq range, and whether it is late (16 bytes a trace are kept)
    runs: dict[tuple, dict] = {}
    codes: dict[tuple, int] = {}
    run_of = array("l")  # per trace: its run's code
    late_ones: set[int] = set()
    kept: dict[int, tuple] = {}  # late traces' run keys and records held from the first read, up to _KEEP_LATE
    room = _KEEP_LATE
    for key, trace in source:
        rk = run_key(trace)
        info = runs.get(rk)
        if info is None:
            info = runs[rk] = {"first": key, "attrs": dict(trace.attributes), "high": None, "late": []}
            info["lows"] = array("q")  # the lowest seq of each not-late trace with records, in input order
            codes[rk] = len(codes)
        if key < info["first"]:
            info["first"], info["attrs"] = key, dict(trace.attributes)
        run_of.append(codes[rk])
        info["traces"] = info.get("traces", 0) + 1
        seqs = [r.seq for r in trace.records]
        if not seqs:
            continue
        low, high = min(seqs), max(seqs)
        if info["high"] is not None and low <= info["high"]:
            info["late"].append((low, key.arrival))
            late_ones.add(key.arrival)
            if len(trace.records) <= room:  # (the unscoped work's traces are small: no third read for them)
                kept[key.arrival] = (rk, trace.records)
                room -= len(trace.records)
        else:
            info["lows"].append(low)
        info["high"] = high if info["high"] is None else max(info["high"], high)
    ordered = sorted(runs, key=lambda rk: runs[rk]["first"])
    state: list[_Run | None] = [None] * len(codes)
    for rk in ordered:
        info = runs[rk]
        label = Run(rk, (TraceData([], {}, info["attrs"]),)).label
        lows = info["lows"]
        later = array("q", bytes(8 * len(lows)))  # the lowest seq still to come after each of them
        low_to_come = _NO_MORE
        for k in range(len(lows) - 1, -1, -1):
            later[k] = low_to_come
            low_to_come = min(low_to_come, lows[k])
        state[codes[rk]] = _Run(StreamedFlow(label, rows), later, info["late"], info["traces"] == 1)
    by_key = {rk: state[code] for rk, code in codes.items()}
    ahead = _Ahead(source, late_ones, by_key, kept)
    # second read: records into each run's builder as soon as nothing to come can precede them
    for key, trace in source:
        run = state[run_of[key.arrival]]
        assert run is not None
        if run.single:
            for rec in trace.records:  # merge_run keeps one trace's own order
                run.flow.add(rec)
            continue
        if key.arrival in late_ones or not trace.records:
            continue  # read ahead when due / nothing to add
        run.push(trace.records)
        bound = run.later[run.seen]
        run.seen += 1
        ahead.needed(run, bound)
        run.add_below(bound)
    for run in by_key.values():
        ahead.needed(run, _NO_MORE + 1)
        run.add_below(_NO_MORE + 1)
    return [by_key[rk].flow for rk in ordered]


_NO_MORE = 1 << 62
_KEEP_LATE = 16384  # records of late traces the first read holds for the second (about 400 bytes each)
