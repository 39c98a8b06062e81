"""Graph replays: what each ``wp.capture_launch`` ran.

While a CUDA graph is captured, Warp's launches are recorded (``captured=True``, ``graph_id=G``) but do not
execute; each ``wp.capture_launch`` of the graph is one ``graph_launch`` record with ``graph_id=G`` that runs
all of them. Capture and replays often sit in different traces (capture in a setup step, replays in later
steps), so the catalogue of captured launches is built over a run's traces.

- :func:`captured_graphs`: graph id -> its captured records, in issue order;
- :func:`replay_buffers`: the buffers a replay touches, with the access each has over the whole graph (read
  when some captured launch reads it, written when some writes it), for the dataflow;
- :func:`expand_replay`: the captured launches a replay ran, one record each, placed at the replay (its thread,
  stream and time; ``captured`` stays True so nobody takes their times for measured ones);
- :func:`with_replay_counts`: per-kernel rows counting what the replays ran (captured launches x replays)
  instead of the captured records.

Example::

    from launchtrace.analysis.replays import captured_graphs, replay_buffers
    graphs = captured_graphs(run_traces)
    for rec in trace.records:
        if rec.op == "graph_launch":
            print(rec.graph_id, len(graphs.get(rec.graph_id, ())), "launches per replay")
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from launchtrace import folds as fold_rules
from launchtrace.analysis.access import access_mode
from launchtrace.model import BufferArg, LaunchRecord, Op, TraceData

__all__ = [
    "Graphs",
    "ReplayTable",
    "captured_graphs",
    "expand_replay",
    "replay_buffers",
    "replay_counts",
    "with_replay_counts",
]

Graphs = Mapping[int, Sequence[LaunchRecord]]


def _records(traces: Iterable[TraceData] | TraceData) -> Iterable[LaunchRecord]:
    if isinstance(traces, TraceData):
        return traces.records
    return (r for t in traces for r in t.records)


def captured_graphs(traces: Iterable[TraceData] | TraceData) -> dict[int, tuple[LaunchRecord, ...]]:
    """Graph id -> the records captured into it, in issue order (``seq``)."""
    out: dict[int, list[LaunchRecord]] = {}
    for rec in _records(traces):
        if rec.captured and rec.graph_id is not None and rec.op != Op.GRAPH_LAUNCH:
            out.setdefault(rec.graph_id, []).append(rec)
    return {g: tuple(sorted(recs, key=lambda r: r.seq)) for g, recs in out.items()}


def replay_counts(traces: Iterable[TraceData] | TraceData) -> Counter[int]:
    """Graph id -> how many times it was replayed (``graph_launch`` records, folded ones by their count)."""
    counts: Counter[int] = Counter()
    for rec in _records(traces):
        if rec.op == Op.GRAPH_LAUNCH and rec.graph_id is not None and not rec.captured:
            counts[rec.graph_id] += fold_rules.launches(rec)
    return counts


def _mode(rec: LaunchRecord, buf: BufferArg) -> str:
    return access_mode(rec, buf)[0]


def replay_buffers(replay: LaunchRecord, graphs: Graphs) -> tuple[BufferArg, ...]:
    """The buffers ``replay`` touches: one :class:`BufferArg` per distinct buffer of its graph's launches,
    named ``<kernel>.<parameter>`` after the first launch that touches it, ``access`` the union over the graph.
    Empty when the graph's capture is not among the traces given."""
    merged: dict[tuple, tuple[BufferArg, set[str]]] = {}
    for rec in graphs.get(replay.graph_id, ()) if replay.graph_id is not None else ():
        for buf in rec.buffers or tuple(BufferArg(k, rec.arg_name(k), p) for k, p in rec.arrays):
            where: tuple[Any, ...] = (
                ("owner", buf.owner, buf.offset, buf.nbytes) if buf.owner is not None else ("ptr", buf.ptr, buf.nbytes)
            )
            if buf.owner is None and not buf.ptr:
                continue
            if where not in merged:
                name = f"{rec.kernel.rsplit('.', 1)[-1]}.{buf.name or rec.arg_name(buf.key)}"
                merged[where] = (dataclasses.replace(buf, key=f"graph.{len(merged)}", name=name), set())
            merged[where][1].update(_mode(rec, buf))
    out = []
    for buf, modes in merged.values():
        out.append(dataclasses.replace(buf, access="rw" if modes >= {"r", "w"} else "w" if "w" in modes else "r"))
    return tuple(out)


def expand_replay(replay: LaunchRecord, graphs: Graphs) -> list[LaunchRecord]:
    """The launches ``replay`` ran, each on the replay's thread, stream and time span (a graph's launches are
    not timed one by one), with ``captured`` and ``graph_id`` kept."""
    out = []
    for rec in graphs.get(replay.graph_id, ()) if replay.graph_id is not None else ():
        out.append(
            dataclasses.replace(
                rec,
                thread=replay.thread,
                thread_name=replay.thread_name,
                stream=replay.stream if replay.stream is not None else rec.stream,
                start_ns=replay.start_ns,
                end_ns=replay.end_ns,
                scope_id=replay.scope_id,
                seq=replay.seq,
                repeat=fold_rules.launches(replay),
            )
        )
    return out


class ReplayTable:
    """What :func:`with_replay_counts` needs, fed one trace at a time: per graph, its replays and the launches
    captured into it per (kernel, op). A capture and its replays may sit in different traces."""

    def __init__(self) -> None:
        self.replays: Counter[int] = Counter()
        self.captured: dict[int, Counter[tuple[str, str]]] = {}

    def add(self, trace: TraceData) -> None:
        for rec in trace.records:
            if rec.graph_id is None:
                continue
            if rec.op == Op.GRAPH_LAUNCH:
                if not rec.captured:
                    self.replays[rec.graph_id] += fold_rules.launches(rec)
            elif rec.captured:
                self.captured.setdefault(rec.graph_id, Counter())[(rec.kernel, str(rec.op))] += fold_rules.launches(rec)

    def apply(self, rows: Sequence[Any]) -> list[Any]:
        """``rows`` with each captured kernel's ``count`` replaced by what ran (see :func:`with_replay_counts`)."""
        captured: Counter[tuple[str, str]] = Counter()
        ran: Counter[tuple[str, str]] = Counter()
        for graph, counts in self.captured.items():
            for key, n in counts.items():
                captured[key] += n
                ran[key] += n * self.replays.get(graph, 0)
        out = []
        for row in rows:
            key = (row.kernel, str(row.op))
            if key in captured:
                only_captured = row.count == captured[key]
                row = dataclasses.replace(row, count=row.count - captured[key] + ran[key])
                if only_captured and hasattr(row, "replayed"):
                    row = dataclasses.replace(row, **_NOT_TIMED)
            out.append(row)
        return out


_NAN = math.nan
_NOT_TIMED = {
    "total_ns": 0,
    "mean_ns": _NAN,
    "p50_ns": _NAN,
    "p95_ns": _NAN,
    "max_ns": _NAN,
    "p50_from_summaries": False,
    "max_from_summaries": False,
    "steps": 0,
    "step_p50_ns": _NAN,
    "step_p95_ns": _NAN,
    "step_max_ns": _NAN,
    "replayed": True,
}
"""A kernel row whose every record was captured: its records' times are those of the capture calls, when it did
not run (a row read ``count 30, total 0.561 ms, mean 560.9 us``: one capture call's time over 30 replayed runs).
Graph replays are timed as a whole, in ``wp.capture_launch``'s row."""


def with_replay_counts(rows: Sequence[Any], traces: Iterable[TraceData] | TraceData) -> list[Any]:
    """Per-kernel rows (anything with ``kernel``, ``op`` and ``count``, e.g. ``KernelStats``) with each captured
    kernel's ``count`` replaced by what ran: its captured records times their graph's replays (a graph
    captured and never replayed ran nothing). Rows of work that was never captured are returned as they are.

    Example::

        rows = with_replay_counts(kernel_stats(traces), traces)
    """
    table = ReplayTable()
    for trace in [traces] if isinstance(traces, TraceData) else traces:
        table.add(trace)
    return table.apply(rows)
