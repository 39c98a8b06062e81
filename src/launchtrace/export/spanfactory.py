"""A faster constructor for :class:`~launchtrace.spans.SpanData`, the span builder's hottest line.

``SpanData`` is a frozen dataclass with 23 fields; its generated ``__init__`` sets each one through
``object.__setattr__`` looked up anew per field, which costs more than everything else the builder does
for a record together. :func:`make_span` is :func:`launchtrace.fastinit.slot_constructor` for the fields the
builder passes (the others get the dataclass's own defaults, so a field added to ``SpanData`` later is picked
up without a change here). ``tests/test_spanbuilder.py`` and ``tests/test_fastinit.py`` check that it equals
``SpanData(...)`` field for field.

Example::

    from launchtrace.export.spanfactory import make_span
    span = make_span(trace_id, span_id, None, "wp.copy", 1, 2, attrs, 0, "", (), (), resource, "launchtrace", "0.1.0")
"""

from __future__ import annotations

from collections.abc import Callable

from launchtrace.fastinit import slot_constructor
from launchtrace.spans import SpanData

__all__ = ["PASSED", "make_span"]

PASSED = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "start_ns",
    "end_ns",
    "attributes",
    "status_code",
    "status_message",
    "events",
    "links",
    "resource",
    "scope_name",
    "scope_version",
)
"""The fields :func:`make_span` takes, in its positional order; the others get their defaults."""


make_span: Callable[..., SpanData] = slot_constructor(SpanData, PASSED)
