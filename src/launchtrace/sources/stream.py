"""Traces streamed one at a time from files, folders, Jaeger or Tempo, for commands that read whole fleets.

:func:`stream_traces` yields rebuilt :class:`~launchtrace.model.TraceData` objects as soon as each trace is
complete, so memory stays flat in the number of traces (``baseline build`` and ``alert`` over 10,000 traces).

- Files and folders: spans are read line by line (:class:`~launchtrace.sources.files.SpanFile`). A trace is
  complete when its root span (no parent) has been read, at the end of that line or message: launchtrace's
  exporter ends the root last and ``launchtrace pull`` writes one trace per line. At most :data:`MAX_OPEN`
  traces wait for their root (the oldest is then rebuilt as it is), and at the end of each file every open
  trace is rebuilt. Spans of a trace that was already rebuilt (a root that came early) are counted in
  ``late_spans`` and dropped. A trace of more than :data:`~launchtrace.sources.wide.WIDE_AT` spans waits as a
  :class:`~launchtrace.sources.wide.WideTrace` (its launch spans already records, about 470 bytes each instead
  of 1.3 KB as span and then record) for readers that only rebuild it (``__iter__``, ``span_lists(wide=True)``);
  with ``spill`` set (``summary``'s, through ``Traces(..., spill=True)``) its records go to a temporary file
  past :data:`~launchtrace.sources.spill.SPILL_AT` and the rebuilt trace's ``records`` are read back from it.
- Tempo: each search hit is fetched and yielded before the next is fetched. Jaeger: api_v3 answers a search
  with all hits at once (bounded by ``--limit``); they are split by trace.

``stats`` counts traces and spans and the problems met (a :class:`~launchtrace.sources.report.ProblemLog`).

Example::

    from launchtrace.sources.stream import TraceStream
    stream = TraceStream.from_paths(["fleet/"])
    for trace in stream:
        ...
    print(stream.traces, stream.spans, stream.log.summary())
"""

from __future__ import annotations

import logging
import operator
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from pathlib import Path

from launchtrace.errors import UserError
from launchtrace.model import TraceData
from launchtrace.sources import wide as _wide
from launchtrace.sources.rebuild import TRACE_ID, rebuild
from launchtrace.sources.report import ProblemLog
from launchtrace.sources.wide import WideTrace
from launchtrace.spans import SpanData

__all__ = ["MAX_OPEN", "TraceStream", "trace_files"]

MAX_OPEN = 4096
_RECENT = 65536
_trace_id = operator.attrgetter("trace_id")
_parent = operator.attrgetter("parent_span_id")
_span_id = operator.attrgetter("span_id")


def trace_files(spec: str | os.PathLike[str]) -> list[Path]:
    """The files of ``spec``: itself, or a folder's files (not hidden ones), sorted by name."""
    path = Path(spec)
    if path.is_dir():
        from launchtrace.sources.sniff import span_file_kind, what_it_looks_like

        files, skipped = [], []
        for p in sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")):
            kind = span_file_kind(str(p))
            if kind is None or kind == "empty":
                skipped.append(p)
                what = "empty" if kind == "empty" else what_it_looks_like(str(p))
                logging.getLogger(__name__).warning("%s: skipped, not a trace file (%s)", p, what)
            else:
                files.append(p)
        if not files:
            raise UserError(
                f"{path}: folder holds no trace files" + (f" ({len(skipped)} other files skipped)" if skipped else "")
            )
        return files
    if not path.exists():
        raise UserError(f"{path}: no such file")
    return [path]


class TraceStream:
    """An iterable of traces from one source; counts what it read (``traces``, ``spans``, ``late_spans``)."""

    def __init__(self, chunks: Callable[[ProblemLog], Iterator[tuple[str, list[SpanData]]]], label: str) -> None:
        self._chunks = chunks
        self.label = label
        self.log = ProblemLog()
        # a wide trace's records written to a temporary file past SPILL_AT (launchtrace.sources.spill): only for
        # readers that take a trace whose records are not a list (``summary``)
        self.spill = False
        self.traces = 0
        self.spans = 0
        self.late_spans = 0
        self.on_trace: Callable[[TraceStream], None] | None = None

    @classmethod
    def from_paths(cls, specs: Iterable[str | os.PathLike[str]]) -> TraceStream:
        files = [f for spec in specs for f in trace_files(spec)]

        def chunks(log: ProblemLog) -> Iterator[tuple[str, list[SpanData]]]:
            from launchtrace.sources.files import SpanFile

            for path in files:
                with SpanFile(path, log=log) as f:
                    yield from f.chunks()
                yield "", []  # end of file: every open trace is complete

        names = [str(s) for s in specs]
        label = ", ".join(names) if len(names) <= 3 else f"{names[0]} and {len(names) - 1} more"
        return cls(chunks, label)

    @classmethod
    def from_span_batches(cls, batches: Callable[[ProblemLog], Iterator[list[SpanData]]], label: str) -> TraceStream:
        """From a backend: each batch holds whole traces (one Tempo trace, one Jaeger search answer)."""

        def chunks(log: ProblemLog) -> Iterator[tuple[str, list[SpanData]]]:
            for batch in batches(log):
                yield label, batch
                yield "", []

        return cls(chunks, label)

    def __iter__(self) -> Iterator[TraceData]:
        for members in self.span_lists(wide=True):
            yield from self.rebuilt(members)

    def span_lists(self, *, wide: bool = False) -> Iterator[list[SpanData] | WideTrace]:
        """Each complete trace's spans, not yet rebuilt (for callers that can skip rebuilding: the fleet
        baseline's fast path); pass a list to :meth:`rebuilt` for its traces. Counts ``spans``.

        ``wide=True``: a trace of more than :data:`~launchtrace.sources.wide.WIDE_AT` spans comes as a
        :class:`~launchtrace.sources.wide.WideTrace` (its launch spans already read into records, for callers
        that only rebuild it: :meth:`rebuilt` takes it), so one trace of a million launches is never held as spans.
        """
        open_traces: OrderedDict[bytes, list[SpanData] | WideTrace] = OrderedDict()
        done: OrderedDict[bytes, None] = OrderedDict()  # recently rebuilt trace ids, to drop late spans
        for _, spans in self._chunks(self.log):
            complete: list[bytes] = []
            if not spans:  # end of a file or batch
                complete = list(open_traces)
            # runs of spans of one trace at a time: a line holds each trace's spans together, and the compiled
            # reader gives them one trace id object, so the per-span work is groupby's, in C
            for tid, run in groupby(spans, _trace_id):
                if tid in done:
                    self.late_spans += sum(1 for _ in run)
                    continue
                run = list(run)
                members = open_traces.get(tid)
                if members is None:
                    members = open_traces[tid] = run
                else:
                    members.extend(run)
                if wide and type(members) is list and len(members) > _wide.WIDE_AT:
                    open_traces[tid] = WideTrace(tid, members, self.log, spill=self.spill)
                if None in map(_parent, run):
                    complete.append(tid)
            while len(open_traces) - len(complete) > MAX_OPEN:
                oldest = next(t for t in open_traces if t not in complete)
                complete.append(oldest)
            for tid in dict.fromkeys(complete):
                members = open_traces.pop(tid, None)
                if members is None:
                    continue
                done[tid] = None
                if len(done) > _RECENT:
                    done.popitem(last=False)
                self.spans += len(members)
                yield members if type(members) is WideTrace else self._checked(members)

    def _checked(self, members: list[SpanData]) -> list[SpanData]:
        """The spans of one trace that trees can be built from: duplicate span ids and parent cycles are skipped
        and logged, as every reader of a whole file does (``sources.structure``), so a baseline or an alert never
        rests on a broken trace silently. A parent outside the trace is not reported here: a stream cuts traces
        at ``MAX_OPEN`` and time windows cut them too."""
        # the whole check costs about 3 us a span (more than the rest of a baseline build), so it runs only where
        # one of two C-speed tests says the trace may be broken: no root (a trace that is one parent cycle, or
        # whose every span is its own parent, has none), or an id twice. A cycle beside a good root is not looked
        # for here; rebuilding leaves its spans out, as before.
        if None in map(_parent, members) and len(set(map(_span_id, members))) == len(members):
            return members
        from launchtrace.sources.structure import check_structure

        kept, problems = check_structure(members)
        for problem in problems:
            if problem.skipped:
                self.log.add(problem)
        return kept

    def rebuilt(self, spans: list[SpanData] | WideTrace) -> Iterator[TraceData]:
        """The traces of one of :meth:`span_lists`' lists (or wide traces), rebuilt and counted."""
        result = spans.rebuild() if type(spans) is WideTrace else rebuild(spans)
        for trace_id, data in result.traces.items():
            data.attributes.setdefault(TRACE_ID, trace_id)
            self.count_trace()
            yield data

    def count_trace(self) -> None:
        """Count one trace taken (by :meth:`rebuilt`, or by a caller that read it without rebuilding)."""
        self.traces += 1
        if self.on_trace is not None:
            self.on_trace(self)
