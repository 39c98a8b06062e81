"""Readers that bring spans back: OTLP files, Jaeger (api_v3 and classic JSON), Tempo (JSON, protobuf, search).

Every reader returns a :class:`~launchtrace.sources.report.ReadResult`: the spans (as
:class:`~launchtrace.spans.SpanData`) and the problems found, each naming its file:line, URL or trace / span
id. Bad data never raises, except in strict mode; an unreachable backend or a missing file raises
:class:`~launchtrace.errors.UserError`.

Example::

    from launchtrace.sources import read_spans
    result = read_spans("spans.jsonl")
    for trace_id, spans in result.traces().items():
        ...
"""

from launchtrace.sources.files import SpanFile, read_spans
from launchtrace.sources.report import ProblemLog, ReadResult

__all__ = ["ProblemLog", "ReadResult", "SpanFile", "read_spans"]
