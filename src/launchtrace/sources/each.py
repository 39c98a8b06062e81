"""The traces :func:`~launchtrace.sources.loading.load_traces` would return, one at a time and as often as a
command reads them, for the commands whose memory must stay flat in the input (``summary``, ``dataflow``,
``diff``, ``report``, ``chrome-trace``).

:class:`Traces` reads each file with its own :class:`~launchtrace.sources.stream.TraceStream` (a trace never
spans two files), so at most one trace is rebuilt at a time and the spans of traces whose root has not been read
yet wait (at most :data:`~launchtrace.sources.stream.MAX_OPEN` traces). Iterating gives each rebuilt trace with
its :class:`TraceKey`; :meth:`Traces.spans` gives each trace's raw spans with its file instead, for a command
that rebuilds only what it shows (:meth:`Traces.rebuilt`). Iterating again reads the files again, in the same
order (``dataflow``'s second pass, ``chrome-trace``'s median samples). A backend source (``jaeger+URL``,
``tempo+URL``) is read as ``load_traces`` reads it: its answer is bounded by ``--limit``.

Each trace comes with its :class:`TraceKey`: ``load_traces`` orders a file's traces by their first time, a
stream gives them as their roots end; readers that need that order sort by the key at the end (exactly the
order ``load_traces`` gives) instead of holding the traces. Every trace carries the ``source`` and trace id
attributes ``load_traces`` sets. A file that holds no launchtrace trace raises the same ``UserError`` when its
traces are rebuilt (:meth:`Traces.nothing_read` for a raw read, which cannot tell before rebuilding). Problems
met while reading, and spans of a trace that come after its root has been read (not what launchtrace's exporter
or ``pull`` write: a root ends last; they are left out), are logged once per file on the first read, as the fleet
commands log them.

Example::

    for key, trace in Traces(["run.jsonl"]):
        ...
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from launchtrace.errors import UserError
from launchtrace.model import TraceData
from launchtrace.sources.wide import WideTrace
from launchtrace.spans import SpanData

__all__ = ["TraceKey", "Traces", "first_time"]

_log = logging.getLogger(__name__)


class TraceKey(NamedTuple):
    """Where a trace stands in ``load_traces``' order: its source's position among those given (each file
    and each backend counts as one), its first time, and the order it arrived in (ties)."""

    source: int
    first_ns: int
    arrival: int


def first_time(trace: TraceData) -> int:
    """The earliest non-zero start of a trace's records and scopes (``load_traces``' sort key)."""
    first = getattr(trace.records, "first_start", None)  # a spilled trace's, kept as it was written
    if first is None:
        first = 0
        for item in trace.records:
            if item.start_ns and (not first or item.start_ns < first):
                first = item.start_ns
    for item in trace.scopes.values():
        if item.start_ns and (not first or item.start_ns < first):
            first = item.start_ns
    return first


class Traces:
    """The traces of ``specs`` (as :func:`~launchtrace.sources.loading.load_traces` takes them), one at a time,
    each time they are iterated; ``late_spans`` and ``problems`` count what the first read met."""

    def __init__(self, specs: str | os.PathLike | Sequence[str | os.PathLike], *, spill: bool = False) -> None:
        self.specs = [specs] if isinstance(specs, (str, os.PathLike)) else list(specs)
        # ``spill``: a wide trace's records may come as a SpilledRecords (iterable, not a list): for readers that
        # only iterate them (``summary``), so that one trace of a million launches needs no list of them
        self.spill = spill
        self.problems = 0
        self.late_spans = 0
        self.first_problem = ""  # the first problem met, for an error that says why nothing was read
        self._sources: list[Path | str] | None = None
        self._read: set[str] = set()  # files read once: what they met is counted and logged
        # per file read through once: whether each of its span lists gave a trace (1 byte a trace), so that
        # :meth:`only` can rebuild just the traces it is asked for
        self._made: dict[str, bytearray] = {}

    def sources(self) -> list[Path | str]:
        """Each file of the specs (a folder's, sorted), or a backend spec as given."""
        if self._sources is None:
            from launchtrace.sources.named import parse_backend
            from launchtrace.sources.stream import trace_files

            found: list[Path | str] = []
            for one in self.specs:
                if isinstance(one, str) and parse_backend(one) is not None:
                    found.append(one)
                else:
                    found.extend(trace_files(one))
            self._sources = found
        return self._sources

    @property
    def files(self) -> list[Path]:
        return [s for s in self.sources() if isinstance(s, Path)]

    def __iter__(self) -> Iterator[tuple[TraceKey, TraceData]]:
        arrival = 0
        for source, one in enumerate(self.sources()):
            if isinstance(one, str):
                from launchtrace.sources.loading import load_traces

                traces: Iterator[TraceData] = iter(load_traces([one]))  # a backend answer is bounded by --limit
            else:
                traces = self._file_traces(one)
            for trace in traces:
                yield TraceKey(source, first_time(trace), arrival), trace
                arrival += 1

    def only(self, wanted: set[int]) -> Iterator[tuple[int, TraceData]]:
        """``(arrival, trace)`` of the traces whose arrival (:class:`TraceKey`) is in ``wanted``, in input order,
        rebuilding only those: the other traces' spans are read and let go (``dataflow``'s reader of late traces,
        which rebuilt the whole input again to find them). Needs every file iterated through once before (else
        it reads as iterating does)."""
        files = self.sources()
        if len(self.files) != len(files) or any(str(path) not in self._made for path in self.files):
            yield from ((key.arrival, trace) for key, trace in self if key.arrival in wanted)
            return
        arrival = 0
        for path in self.files:
            where = str(path)
            made = self._made[where]
            for i, spans in enumerate(self._file_spans(path)):  # as spans: most are let go unread
                if i < len(made) and made[i]:
                    if arrival in wanted:
                        yield from ((arrival, trace) for trace in _rebuilt(where, spans))
                    arrival += made[i]

    def in_order(self) -> list[TraceData]:
        """What :func:`~launchtrace.sources.loading.load_traces` returns, read through the stream: the spans of
        one trace at a time are held while it is rebuilt, never the whole file's (for commands that need every
        trace: the rebuilt traces stay, the spans do not)."""
        return [trace for _, trace in sorted(self, key=lambda pair: pair[0])]

    def spans(self) -> Iterator[tuple[str, list[SpanData]]]:
        """``(file, spans)`` of each trace of the files, not rebuilt (backend sources are not read here)."""
        for path in self.files:
            where = str(path)
            yield from ((where, spans) for spans in self._file_spans(path))

    @staticmethod
    def rebuilt(where: str, spans: list[SpanData]) -> list[TraceData]:
        """The traces of one trace's spans, with ``source`` and the trace id set as ``load_traces`` sets them."""
        return list(_rebuilt(where, spans))

    def nothing_read(self) -> UserError:
        """The error for an input that held no launchtrace trace, naming it and the first problem met."""
        names = ", ".join(map(str, self.files))
        why = f" ({self.first_problem})" if self.first_problem else ""
        return UserError(f"{names}: no launchtrace spans in this source{why}")

    def _file_traces(self, path: Path) -> Iterator[TraceData]:
        where = str(path)
        found = 0

        def check(first: str) -> None:
            if not found:
                raise UserError(f"{where}: no launchtrace spans in this source" + (f" ({first})" if first else ""))

        made = bytearray() if where not in self._made else None  # the first read through: what each list gave
        for spans in self._file_spans(path, check, wide=True):
            before = found
            for trace in _rebuilt(where, spans):
                found += 1
                yield trace
            if made is not None:
                if found - before > 1:  # a list holds one trace's spans; if not, only() reads as iterating does
                    made = None
                else:
                    made.append(found - before)
        if made is not None:
            self._made[where] = made

    def _file_spans(
        self, path: Path, check: Callable[[str], None] | None = None, *, wide: bool = False
    ) -> Iterator[list[SpanData] | WideTrace]:
        """One file's traces' spans; at its end ``check`` is given the file's first problem (it may raise),
        then what the read met is counted and logged, on the first read only. ``wide``: a trace too wide to hold
        as spans comes as a :class:`~launchtrace.sources.wide.WideTrace` (for readers that only rebuild)."""
        from launchtrace.sources.stream import TraceStream

        where = str(path)
        stream = TraceStream.from_paths([path])
        stream.spill = wide and self.spill
        yield from stream.span_lists(wide=wide)
        log = stream.log
        first = str(log.problems[0]) if log.problems else ""
        if check is not None:
            check(first)
        if where in self._read:
            return
        self._read.add(where)
        self.late_spans += stream.late_spans
        self.problems += log.count
        self.first_problem = self.first_problem or first
        if log.errors:
            _log.warning("%s: %d problem(s) while reading, first: %s", where, log.errors, first)
        if stream.late_spans:  # a whole-file read would have put them in their trace: say they are not counted
            _log.warning("%s: %d spans arrived after their trace's root and were left out", where, stream.late_spans)


def _rebuilt(where: str, spans: list[SpanData] | WideTrace) -> Iterator[TraceData]:
    """:meth:`Traces.rebuilt`'s traces one at a time (``summary``, ``dataflow`` and ``diff`` hold one: about 12 MB
    less peak than a list for ``diff`` of the 100 MB file against itself)."""
    from launchtrace.sources.rebuild import TRACE_ID, rebuild

    # no name for the result: a generator frame holding it kept dataflow's peak 9 MB higher on a 40 MB file
    for trace_id, data in (spans.rebuild() if type(spans) is WideTrace else rebuild(spans)).traces.items():
        data.attributes.setdefault(TRACE_ID, trace_id)
        data.attributes.setdefault("source", where)
        yield data
