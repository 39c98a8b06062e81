"""Chrome Trace Event JSON (the format Perfetto and chrome://tracing open) from traces.

Laid out to sit beside an Nsight Systems or PyTorch profiler trace of the same run in Perfetto:

- one process per run, with the run's real ``process.pid`` (named ``<service> (pid N)``);
- one thread track per host thread (named as Python names it) and one track per CUDA stream
  (``cuda:0 stream 0x...``), threads first;
- scopes and the work under them as complete (``"ph": "X"``) events on their thread's track, so they nest;
- timestamps in absolute microseconds since the Unix epoch (``ts``), as the profilers write theirs, so the
  tracks line up on one time axis (a double holds them to about 0.25 us);
- a folded run (see :mod:`launchtrace.render.timeline`) as one event spanning its summary, named with its count
  and marked ``"folded": true`` in ``args``, never as invented per-launch events.

A large input is written as it is read (:func:`sampled_chunks`): traces in full, in the order they complete,
until the next would pass ``max_events`` complete events (metadata events come on top); from there on each
trace is left out and counted, except the first occurrence of each step name (root span name) and, at the end,
of the left-out occurrences of each step name the slowest and the one whose duration is nearest the name's
median (found by a second read of the files, the reader's time alone; the median is of a 1,001-step uniform
sample past that many occurrences). Each sampled event is marked ``"launchtrace.sample"`` in ``args``; samples
have their own budget of ``max_events`` events. The top-level ``otherData.launchtrace`` object holds the exact
totals of the whole input (traces, spans, device operations, per step name count / total / min / max ns) and
what was left out, and a global instant event at the first left-out trace says so on the timeline. A trace of
more than :data:`MAX_TRACE_SPANS` spans (or one that alone would pass what is left of a budget) is shown cut to
its first spans, the rest counted, with a marker of its own. Memory holds one trace at a time (at most
:data:`MAX_TRACE_SPANS` of its spans rebuilt, its events written in pieces) plus the kept samples and the
duration samples.

Example::

    import itertools
import itertools
import json
    from launchtrace.render.chrome_trace import chrome_trace
    json.dump(chrome_trace(traces), open("trace.json", "w"))
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from typing import Any

from launchtrace.analysis.bounded import Medians, Scan, Slowest, Step, Totals, cut
from launchtrace.model import TraceData
from launchtrace.render.timeline import timeline_items
from launchtrace.steps import run_key

__all__ = ["DEFAULT_MAX_EVENTS", "Layout", "chrome_trace", "sampled_chunks"]

DEFAULT_MAX_EVENTS = 500_000  # about 220 MB of JSON at ~450 bytes an event
SAMPLE = "launchtrace.sample"
BATCH = 4096  # events dumped at once
MAX_TRACE_SPANS = 50_000  # one trace rebuilt and laid out takes about 4.7 KB a span: a larger one is shown cut


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


class Layout:
    """Processes and tracks handed out as traces come: one process per run (its pid, unless two runs share
    one), a track per thread and per stream, threads first; metadata events go out with the first event that
    needs them."""

    def __init__(self) -> None:
        self._runs: dict[tuple, tuple[int, dict[tuple[str, str], int]]] = {}
        self._used_pids: set[int] = set()
        self.first_pid = 0

    def _run(self, trace: TraceData, events: list[dict[str, Any]]) -> tuple[int, dict[tuple[str, str], int]]:
        key = run_key(trace)
        known = self._runs.get(key)
        if known is not None:
            return known
        r = len(self._runs)
        attrs = trace.attributes
        try:
            run_pid: int | None = int(attrs.get("process.pid"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            run_pid = None
        pid = run_pid if run_pid is not None and run_pid not in self._used_pids else 1_000_000 + r
        self._used_pids.add(pid)
        name = str(attrs.get("service.name") or "launchtrace")
        events.append(_meta("process_name", pid, 0, {"name": f"{name} (pid {run_pid})" if run_pid else name}))
        events.append(_meta("process_sort_index", pid, 0, {"sort_index": r}))
        self._runs[key] = known = (pid, {})
        if r == 0:
            self.first_pid = pid
        return known

    def events(self, trace: TraceData, sample: str = "") -> list[dict[str, Any]]:
        """The events of one trace (and the metadata of the process and tracks it is the first to use);
        ``sample``: why a sampled trace is there, put in each event's ``args``."""
        return list(self.iter_events(trace, sample))

    def iter_events(self, trace: TraceData, sample: str = "") -> Iterator[dict[str, Any]]:
        """:meth:`events` one at a time, for a trace too large to hold all its events at once."""
        meta: list[dict[str, Any]] = []
        pid, tids = self._run(trace, meta)
        items = timeline_items([trace])
        new = sorted({(it.lane_kind, it.lane) for it in items} - tids.keys(), key=lambda k: (k[0] != "thread", k[1]))
        for kind, lane in new:
            tid = tids[(kind, lane)] = len(tids) + 1
            meta.append(_meta("thread_name", pid, tid, {"name": lane}))
            # threads above streams, each in first-seen order, however the traces interleave them
            meta.append(
                _meta("thread_sort_index", pid, tid, {"sort_index": tid - 1 + (0 if kind == "thread" else 1 << 20)})
            )
        yield from meta
        for it in items:
            args = dict(it.details)
            if it.kind == "fold":
                args["folded"] = True
                args["count"] = it.count
            if sample:
                args[SAMPLE] = sample
            yield {
                "ph": "X",
                "name": it.name,
                "cat": it.kind,
                "pid": pid,
                "tid": tids[(it.lane_kind, it.lane)],
                "ts": it.start_ns / 1000.0,
                "dur": max(it.end_ns - it.start_ns, 0) / 1000.0,
                "args": args,
            }


def chrome_trace(traces: Sequence[TraceData]) -> dict[str, Any]:
    """The Chrome trace object (``{"traceEvents": [...], "displayTimeUnit": "ns"}``) of ``traces``, all of them."""
    layout = Layout()
    return {"traceEvents": [e for t in traces for e in layout.events(t)], "displayTimeUnit": "ns"}


def _dump_all(events: list[dict[str, Any]]) -> str:
    """The events of one trace on one line, without the list's brackets (one ``json.dumps`` call a trace)."""
    return json.dumps(events, ensure_ascii=False, allow_nan=False, separators=(",", ":"))[1:-1]


def sampled_chunks(scan: Scan, max_events: int = DEFAULT_MAX_EVENTS) -> Iterator[str]:
    """The Chrome trace JSON of everything ``scan`` reads, in pieces, sampled past ``max_events`` events (see
    the module docstring). Raises :class:`UserError` when the input holds no launchtrace trace."""
    layout = Layout()
    budget = _Budget(max_events)
    seen: dict[str, int] = {}  # step name -> the n-th trace that was its first occurrence
    slowest = Slowest(min(max_events, MAX_TRACE_SPANS))  # raw spans held for the slowest samples, in all
    medians = Medians()
    yield '{"displayTimeUnit":"ns","traceEvents":[\n'
    for n, (where, spans, step) in enumerate(scan.traces()):
        medians.add(step.name, step.duration_ns)
        fits = min(step.spans, MAX_TRACE_SPANS)  # a larger trace is shown cut (the first of all, or of its name)
        full = budget.first_left is None and budget.written + fits <= max_events
        first_of_name = step.name not in seen and budget.sampled < max_events
        seen.setdefault(step.name, n)
        if not full and not first_of_name:
            budget.leave(n, step)
            if step.spans <= MAX_TRACE_SPANS:
                slowest.offer(step, where, spans)
            continue
        shown, why = spans, ""
        if not full:
            why = f"first occurrence of {step.name}"
        room = min(MAX_TRACE_SPANS, max_events - (budget.written if full else budget.sampled))
        if step.spans > room:  # too large to hold rebuilt (or for the samples' budget): its first spans
            shown = cut(spans, room)
            budget.cut(spans, shown)
            why = (why + ", " if why else "") + f"cut to {len(shown):,} of its {step.spans:,} spans"
        yield from budget.write(layout, scan.rebuilt(where, shown), why, sample=not full)
    if not scan.totals.traces or not (budget.written or budget.sampled or budget.left_traces):
        raise scan.source.nothing_read()
    kept: list[dict[str, Any]] = []
    shown_steps: set[tuple[str, int]] = set()
    for step, where, spans in slowest.taken():
        why = f"slowest left-out occurrence of {step.name} ({step.duration_ns / 1e6:.3f} ms)"
        if budget.take_back(step):
            kept.append({"step": step.name, "start_ns": step.start_ns, "duration_ns": step.duration_ns})
            shown_steps.add((step.name, step.start_ns))
            yield from budget.write(layout, scan.rebuilt(where, spans), why, sample=True)
    medians_kept: list[dict[str, Any]] = []
    if budget.first_left is not None:
        # a second read of the files (the reader's time, no rebuilding) for the left-out occurrence of each step
        # name whose duration is nearest its median
        nearest: dict[str, tuple[int, int, str, list]] = {}  # name -> (distance, n, where, spans)
        for n, (where, spans, step) in enumerate(scan.again()):
            median = medians.median(step.name)
            if median is None or n < budget.first_left or seen.get(step.name) == n:
                continue
            if (step.name, step.start_ns) in shown_steps or step.spans > min(max_events, MAX_TRACE_SPANS):
                continue
            distance = abs(step.duration_ns - median)
            held = nearest.get(step.name)
            if held is None or distance < held[0]:
                nearest[step.name] = (distance, n, where, spans)
        for name, (_, _n, where, spans) in sorted(nearest.items(), key=lambda kv: kv[1][1]):
            step = Totals().add(spans)  # its operations, to take back from those left out
            median = medians.median(name)
            how = "median" if medians.exact(name) else f"median of a {medians.size:,}-step sample"
            why = f"left-out occurrence of {name} nearest its {how} ({(median or 0) / 1e6:.3f} ms)"
            if budget.take_back(step):
                medians_kept.append({"step": name, "start_ns": step.start_ns, "duration_ns": step.duration_ns})
                yield from budget.write(layout, scan.rebuilt(where, spans), why, sample=True)
    info = _info(scan, budget, kept, medians_kept)
    if budget.first_left is not None:
        note = (
            f"launchtrace: {budget.left_traces:,} traces ({budget.left_spans:,} spans) from here on left out past "
            f"--max-events {max_events:,}; exact totals in otherData.launchtrace"
        )
        at = budget.first_left_ns / 1000.0
        yield budget.chunk([{"ph": "i", "s": "g", "name": note, "pid": layout.first_pid, "tid": 0, "ts": at}])
    if budget.cut_traces:
        note = (
            f"launchtrace: {budget.cut_traces:,} trace(s) too large to show whole (over {MAX_TRACE_SPANS:,} spans, "
            "or past --max-events) shown cut to their first spans; exact totals in otherData.launchtrace"
        )
        at = budget.cut_at_ns / 1000.0
        yield budget.chunk([{"ph": "i", "s": "g", "name": note, "pid": layout.first_pid, "tid": 0, "ts": at}])
    yield '\n],\n"otherData":{"launchtrace":' + json.dumps(info, ensure_ascii=False, allow_nan=False) + "}}\n"


class _Budget:
    """What :func:`sampled_chunks` wrote and left out, and the separators between its pieces."""

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.written = self.sampled = 0  # events of traces in full, and of samples (a budget of max_events)
        self.left_traces = self.left_spans = self.left_operations = 0
        self.first_left: int | None = None  # the n-th trace, the first left out: every later one is too
        self.first_left_ns = 0
        self.cut_traces = 0  # traces shown cut (too large to show whole), and where the first one starts
        self.cut_at_ns = 0
        self._sep = ""

    def leave(self, n: int, step: Step) -> None:
        self.left_traces += 1
        self.left_spans += step.spans
        self.left_operations += step.operations
        if self.first_left is None:
            self.first_left, self.first_left_ns = n, step.start_ns

    def cut(self, spans: list, shown: list) -> None:
        """A trace shown cut to ``shown``: the rest of its spans counted as left out."""
        self.cut_traces += 1
        if not self.cut_at_ns:
            self.cut_at_ns = min((x.start_ns for x in shown if x.start_ns), default=0)
        kept = {id(s) for s in shown}
        rest = Totals()
        rest.add([s for s in spans if id(s) not in kept])
        self.left_spans += rest.spans
        self.left_operations += rest.operations

    def take_back(self, step: Step) -> bool:
        """A left-out trace shown after all as a sample, if its spans (at most one complete event each) fit the
        samples' budget: no longer counted as left out."""
        if self.sampled + step.spans > self.max_events:
            return False
        self.left_traces -= 1
        self.left_spans -= step.spans
        self.left_operations -= step.operations
        return True

    def write(self, layout: Layout, traces: list[TraceData], why: str, *, sample: bool) -> Iterator[str]:
        """The events of ``traces`` in pieces of :data:`BATCH` (a large trace's events are never all held),
        counted as written in full or as samples."""
        for trace in traces:
            events = layout.iter_events(trace, why)
            while batch := list(itertools.islice(events, BATCH)):
                if sample:
                    self.sampled += len(batch)
                else:
                    self.written += len(batch)
                yield self.chunk(batch)

    def chunk(self, events: list[dict[str, Any]]) -> str:
        if not events:
            return ""
        text = self._sep + _dump_all(events)
        self._sep = ",\n"
        return text


def _info(scan: Scan, budget: _Budget, slowest: list[dict[str, Any]], medians: list[dict[str, Any]]) -> dict[str, Any]:
    """``otherData.launchtrace``: the exact totals of the input and what the file leaves out."""
    t = scan.totals
    return {
        "complete": not budget.left_spans,
        "max_events": budget.max_events,
        "events_in_full": budget.written,
        "events_sampled": budget.sampled,
        "traces_cut": budget.cut_traces,
        "totals": {
            "traces": t.traces,
            "spans": t.spans,
            "device_operations": t.operations,
            "dropped_spans": t.dropped,
            "start_ns": t.start_ns,
            "end_ns": t.end_ns,
            "steps": {
                name: {"count": s.count, "total_ns": s.total_ns, "min_ns": s.min_ns, "max_ns": s.max_ns}
                for name, s in t.steps.items()
            },
        },
        # spans and operations of traces shown cut count here too
        "left_out": {
            "traces": budget.left_traces,
            "spans": budget.left_spans,
            "device_operations": budget.left_operations,
        },
        "samples": {
            "rule": "traces in full in the order they complete until max_events; past that the first occurrence "
            "of each step name (cut to its first spans if it alone passes max_events), and of the left-out "
            "occurrences of each step name the slowest and the one nearest the name's median duration "
            "(args launchtrace.sample)",
            "slowest_left_out": slowest,
            "median_left_out": medians,
        },
    }
