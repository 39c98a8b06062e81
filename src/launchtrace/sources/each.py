"""The traces :func:`~launchtrace.sources.loading.load_traces` would return, one at a time, for commands whose
memory must stay flat in the input (``summary``, ``dataflow``, ``diff``).

Files and folders are streamed (:class:`~launchtrace.sources.stream.TraceStream`): at most one trace is rebuilt
at a time, and the spans of traces whose root has not been read yet wait (at most
:data:`~launchtrace.sources.stream.MAX_OPEN` traces). A backend source (``jaeger+URL``, ``tempo+URL``) is read
as ``load_traces`` reads it: its answer is bounded by ``--limit``.

Each trace comes with its :class:`TraceKey`: ``load_traces`` orders a file's traces by their first time, a
stream gives them as their roots end; readers that need that order sort by the key at the end (exactly the
order ``load_traces`` gives) instead of holding the traces. Every trace carries the ``source`` and trace id
attributes ``load_traces`` sets, and a source that holds no launchtrace trace raises the same ``UserError``.
Spans of a trace that come after its root has been read (not what launchtrace's exporter or ``pull`` write: a
root ends last) are left out, and a warning says how many, as the fleet commands say it.

Example::

    for key, trace in each_trace(["run.jsonl"]):
        ...
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from launchtrace.errors import UserError
from launchtrace.model import TraceData

__all__ = ["TraceKey", "each_trace", "first_time", "load_streamed"]

_log = logging.getLogger(__name__)


class TraceKey(NamedTuple):
    """Where a trace stands in ``load_traces``' order: its source's position among those given, its first
    time, and the order it arrived in (ties)."""

    source: int
    first_ns: int
    arrival: int


def first_time(trace: TraceData) -> int:
    """The earliest non-zero start of a trace's records and scopes (``load_traces``' sort key)."""
    first = 0
    for item in trace.records:
        if item.start_ns and (not first or item.start_ns < first):
            first = item.start_ns
    for item in trace.scopes.values():
        if item.start_ns and (not first or item.start_ns < first):
            first = item.start_ns
    return first


def each_trace(specs: str | os.PathLike | Sequence[str | os.PathLike]) -> Iterator[tuple[TraceKey, TraceData]]:
    """Every trace of ``specs`` (as :func:`~launchtrace.sources.loading.load_traces` takes them) with its
    :class:`TraceKey`, one at a time."""
    from launchtrace.sources.named import parse_backend
    from launchtrace.sources.stream import trace_files

    specs = [specs] if isinstance(specs, (str, os.PathLike)) else list(specs)
    arrival = 0
    source = 0
    for one in specs:
        backend = parse_backend(one) if isinstance(one, str) else None
        if backend is not None:
            from launchtrace.sources.loading import load_traces

            for trace in load_traces([one]):  # a backend answer is bounded by --limit
                yield TraceKey(source, first_time(trace), arrival), trace
                arrival += 1
            source += 1
            continue
        for path in trace_files(one):
            for trace in _file_traces(path):
                yield TraceKey(source, first_time(trace), arrival), trace
                arrival += 1
            source += 1


def load_streamed(specs: str | os.PathLike | Sequence[str | os.PathLike]) -> list[TraceData]:
    """What :func:`~launchtrace.sources.loading.load_traces` returns, read through the stream: the spans of one
    trace at a time are held while it is rebuilt, never the whole file's (for commands that need every trace,
    ``dataflow`` and ``diff``: the rebuilt traces stay, the spans do not)."""
    pairs = list(each_trace(specs))
    pairs.sort(key=lambda pair: pair[0])
    return [trace for _, trace in pairs]


def _file_traces(path: os.PathLike) -> Iterator[TraceData]:
    from launchtrace.sources.stream import TraceStream

    where = str(path)
    stream = TraceStream.from_paths([path])
    found = 0
    for trace in stream:
        trace.attributes.setdefault("source", where)
        found += 1
        yield trace
    log = stream.log
    first = next((str(p) for p in log.problems), "")
    if not found:
        raise UserError(f"{where}: no launchtrace spans in this source" + (f" ({first})" if first else ""))
    if log.errors:
        _log.warning("%s: %d problem(s) while reading, first: %s", where, log.errors, first)
    if stream.late_spans:  # a whole-file read would have put them in their trace: say they are not counted
        _log.warning("%s: %d spans arrived after their trace's root and were left out", where, stream.late_spans)
