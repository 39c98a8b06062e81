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

import importlib
from typing import Any

_LAZY = {
    "ProblemLog": "launchtrace.sources.report",
    "ReadResult": "launchtrace.sources.report",
    "SpanFile": "launchtrace.sources.files",
    "read_spans": "launchtrace.sources.files",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'launchtrace.sources' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
