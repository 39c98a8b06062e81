"""Turning what a user names on the command line into :class:`~launchtrace.model.TraceData` objects.

Every analyzer command (``diff``, ``check-static``, ``dataflow``, ``graph``, ``report``, ``chrome-trace``,
``summary``) calls :func:`load_traces` for its inputs: a trace file in any format
:mod:`launchtrace.sources.files` reads (OTLP JSON Lines from the file sink, OTLP/JSON, OTLP protobuf,
Jaeger and Tempo JSON as written by ``launchtrace pull``), or a folder of them. The spans are rebuilt into
traces by :func:`launchtrace.sources.rebuild.rebuild`. :func:`trace_from_events` does the same for a live capture
(events drained from :mod:`launchtrace.capture.bus`).

Example::

    from launchtrace.sources.loading import load_traces
    traces = load_traces("run.otlp.jsonl")  # one TraceData per outermost scope occurrence, in run order
    print(len(traces), "traces,", sum(len(t) for t in traces), "records")
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from launchtrace.errors import UserError
from launchtrace.model import LaunchRecord, ScopeRecord, TraceData

__all__ = ["load_traces", "trace_from_events"]

_log = logging.getLogger(__name__)


def _first_time(trace: TraceData) -> int:
    times = [r.start_ns for r in trace.records] + [s.start_ns for s in trace.scopes.values()]
    return min((t for t in times if t), default=0)


def _traces_of_file(path: Path) -> list[TraceData]:
    from launchtrace.sources.files import read_spans

    return _traces_of(read_spans(path), str(path))  # read_spans raises UserError naming the file


def _traces_of(result, where: str) -> list[TraceData]:
    """The rebuilt traces of one source's :class:`~launchtrace.sources.report.ReadResult`."""
    from launchtrace.sources.rebuild import TRACE_ID, rebuild

    first = next((str(p) for p in result.problems), "")
    rebuilt = rebuild(result.spans)
    if not rebuilt.traces:
        raise UserError(f"{where}: no launchtrace spans in this source" + (f" ({first})" if first else ""))
    if result.errors:
        _log.warning("%s: %d problem(s) while reading, first: %s", where, result.errors, first)
    traces = []
    for trace_id, data in rebuilt.traces.items():
        data.attributes.setdefault(TRACE_ID, trace_id)
        data.attributes.setdefault("source", where)
        traces.append(data)
    traces.sort(key=_first_time)  # one trace per outermost scope: keep them in the order they ran
    return traces


def load_traces(spec: str | os.PathLike | Sequence[str | os.PathLike]) -> list[TraceData]:
    """Every trace in ``spec`` (a file, a folder, a backend URL such as ``jaeger+http://host:16686?service=sim``,
    or a list of those: :mod:`launchtrace.sources.named`), in the order given, then trace order.

    Raises :class:`~launchtrace.errors.UserError` naming the file when it is missing, unreadable or holds
    no trace.

    Example::

        before = load_traces(["run1.jsonl", "run2.jsonl"])
    """
    from launchtrace.sources.named import parse_backend, read_backend
    from launchtrace.sources.stream import trace_files

    specs = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    out: list[TraceData] = []
    for one in specs:
        backend = parse_backend(one) if isinstance(one, str) else None
        if backend is not None:
            out.extend(_traces_of(read_backend(backend), str(backend)))
            continue
        for path in trace_files(one):
            out.extend(_traces_of_file(path))
    return out


def trace_from_events(events: Iterable[tuple[str, object]]) -> TraceData:
    """A :class:`TraceData` from ``(kind, item)`` pairs as :meth:`Subscription.drain` returns them.

    Example::

        sub = bus.subscribe(); run(); trace = trace_from_events(sub.drain())
    """
    trace = TraceData()
    for kind, item in events:
        if kind == "record" and isinstance(item, LaunchRecord):
            trace.records.append(item)
        elif kind in ("scope_begin", "scope_end") and isinstance(item, ScopeRecord):
            trace.scopes[item.id] = item  # the end event carries the finished scope
    return trace
