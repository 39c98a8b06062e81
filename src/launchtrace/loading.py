"""Turning what a user names on the command line into :class:`~launchtrace.model.TraceData` objects.

Every analyzer command (``diff``, ``check-static``, ``dataflow``, ``graph``, ``report``, ``chrome-trace``,
``summary``) calls :func:`load_traces` for its inputs: a trace file in any format
:mod:`launchtrace.sources.files` reads (OTLP JSON Lines from the file sink, OTLP/JSON, OTLP protobuf,
Jaeger and Tempo JSON as written by ``launchtrace pull``), or a folder of them. The spans are rebuilt into
traces by :func:`launchtrace.rebuild.rebuild`. :func:`trace_from_events` does the same for a live capture
(events drained from :mod:`launchtrace.capture.bus`).

Example::

    from launchtrace.loading import load_traces
    traces = load_traces("run.otlp.jsonl")
    print(len(traces), "traces,", sum(len(t) for t in traces), "records")
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from launchtrace.errors import UserError
from launchtrace.model import LaunchRecord, ScopeRecord, TraceData

__all__ = ["load_traces", "trace_from_events"]


def _files(spec: str | os.PathLike) -> list[Path]:
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise UserError(f"{path}: folder holds no trace files")
        return files
    if not path.exists():
        raise UserError(f"{path}: no such file")
    return [path]


def _traces_of_file(path: Path) -> list[TraceData]:
    from launchtrace.rebuild import rebuild
    from launchtrace.sources.files import read_spans

    try:
        spans = list(read_spans(path))
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror or exc}") from exc
    traces = list(rebuild(spans).traces)
    for t in traces:
        t.attributes.setdefault("source", str(path))
    return traces


def load_traces(spec: str | os.PathLike | Sequence[str | os.PathLike]) -> list[TraceData]:
    """Every trace in ``spec`` (a file, a folder, or a list of those), in file order then trace order.

    Raises :class:`~launchtrace.errors.UserError` naming the file when it is missing, unreadable or holds
    no trace.

    Example::

        before = load_traces(["run1.jsonl", "run2.jsonl"])
    """
    specs = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    out: list[TraceData] = []
    for one in specs:
        for path in _files(one):
            traces = _traces_of_file(path)
            if not traces:
                raise UserError(f"{path}: no launchtrace spans in this file")
            out.extend(traces)
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
