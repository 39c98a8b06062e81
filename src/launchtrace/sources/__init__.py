"""Readers that bring spans back: OTLP files, Jaeger (api_v3 and classic JSON), Tempo (JSON, protobuf, search).

Every reader returns a :class:`~launchtrace.sources.report.ReadResult`: the spans (as
:class:`~launchtrace.spans.SpanData`) and the problems found, each naming its file:line, URL or trace / span
id. Bad data never raises, except in strict mode; an unreachable backend or a missing file raises
:class:`~launchtrace.errors.UserError`.

Names are imported lazily, so that a module of this package (the rebuild from spans to records, say) can be
imported without the file readers and their codecs.

Example::

    from launchtrace.sources import read_spans
    result = read_spans("spans.jsonl")
    for trace_id, spans in result.traces().items():
        ...
"""

from __future__ import annotations

from launchtrace._lazy import lazy_names

_LAZY = dict.fromkeys(("SpanFile", "read_spans"), "launchtrace.sources.files")
_LAZY.update(dict.fromkeys(("ProblemLog", "ReadResult"), "launchtrace.sources.report"))

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
