"""Each trace's raw spans from files and folders, one trace at a time, as often as a command reads them.

:class:`TraceSpans` reads each file with its own :class:`~launchtrace.sources.stream.TraceStream` (so a trace
never spans two files and each trace can be keyed by its file, as
:func:`~launchtrace.sources.loading.load_traces` keys it) and yields ``(file, spans)`` per complete trace,
without rebuilding. Iterating again reads the files again, in the same order, for a command that must see the
whole input before it chooses (``chrome-trace``'s median samples). :meth:`TraceSpans.rebuilt` rebuilds one
trace the way ``load_traces`` does (``source`` and the trace id set). Problems met while reading are logged
once per file, as warnings.

Example::

    source = TraceSpans(["big.jsonl"])
    for where, spans in source:
        if len(spans) < 100:
            traces = source.rebuilt(where, spans)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from launchtrace.errors import UserError
from launchtrace.model import TraceData
from launchtrace.spans import SpanData

__all__ = ["TraceSpans"]

_log = logging.getLogger(__name__)


class TraceSpans:
    """The traces of ``specs`` (files and folders), one ``(file, spans)`` at a time; ``late_spans`` and
    ``problems`` count what the first read met."""

    def __init__(self, specs: Iterable[str | os.PathLike[str]]) -> None:
        from launchtrace.sources.stream import trace_files

        self.files: list[Path] = [f for spec in specs for f in trace_files(spec)]
        self.problems = 0
        self.late_spans = 0
        self.first_problem = ""  # the first problem met, for an error that says why nothing was read
        self._reads = 0

    def __iter__(self) -> Iterator[tuple[str, list[SpanData]]]:
        from launchtrace.sources.stream import TraceStream

        first = self._reads == 0
        self._reads += 1
        for path in self.files:
            stream = TraceStream.from_paths([path])
            where = str(path)
            for spans in stream.span_lists():
                yield where, spans
            if first:
                self.late_spans += stream.late_spans
                if stream.log.count:
                    self.problems += stream.log.count
                    self.first_problem = self.first_problem or str(stream.log.problems[0])
                    _log.warning("%s: %s", where, stream.log.summary())

    def nothing_read(self) -> UserError:
        """The error for an input that held no launchtrace trace, naming it and the first problem met."""
        names = ", ".join(map(str, self.files))
        why = f" ({self.first_problem})" if self.first_problem else ""
        return UserError(f"{names}: no launchtrace spans in this source{why}")

    @staticmethod
    def rebuilt(where: str, spans: list[SpanData]) -> list[TraceData]:
        """The traces of one trace's spans, with ``source`` and the trace id set as ``load_traces`` sets them."""
        from launchtrace.sources.rebuild import TRACE_ID, rebuild

        out = []
        for trace_id, data in rebuild(spans).traces.items():
            data.attributes.setdefault(TRACE_ID, trace_id)
            data.attributes.setdefault("source", where)
            out.append(data)
        return out
