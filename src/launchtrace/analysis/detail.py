"""The report's reading of a large input: the first spans in full (the detail), exact totals of all of them.

:func:`read_detail` reads a source one trace at a time (:class:`~launchtrace.sources.bytrace.TraceSpans`, handed
in, through :class:`~launchtrace.analysis.bounded.Scan`)
and rebuilds traces, in the order they complete, while their spans fit in ``detail_spans``; every later trace is
only counted (:class:`~launchtrace.analysis.bounded.Totals`), given a point on the step chart
(:class:`~launchtrace.analysis.bounded.StepPoints`) and offered as the slowest of its step name
(:class:`~launchtrace.analysis.bounded.Slowest`, rebuilt at the end). Memory: the detail's traces, the slowest
of each name (together at most ``2 * detail_spans`` spans), at most ``max_points`` chart points and one entry per
step name and kernel, whatever the input's length.

An input that fits in ``detail_spans`` is read in full and :attr:`Detail.large` is false: the report is the
same page it was before the limit existed.

Example::

    detail = read_detail(TraceSpans(["big.jsonl"]), detail_spans=20_000)
    print(len(detail.traces), detail.left_traces, detail.totals.spans)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from launchtrace.analysis.bounded import Scan, Slowest, Step, StepPoints, Totals, cut
from launchtrace.model import TraceData
from launchtrace.sources.each import first_time

if TYPE_CHECKING:
    from launchtrace.sources.bytrace import TraceSpans

__all__ = ["DEFAULT_DETAIL_SPANS", "MAX_POINTS", "Detail", "read_detail"]

DEFAULT_DETAIL_SPANS = 10_000
MAX_POINTS = 20_000


@dataclasses.dataclass
class Detail:
    """``traces``: the detail, in file then run order; ``slowest``: (step, its index among its name's steps, its
    traces) of each step name's slowest left-out occurrence; ``points``: the step chart's (n-th step, name,
    index, start ns, duration ns); ``stride``: the chart shows every stride-th step (and the slowest of each
    name)."""

    traces: list[TraceData]
    totals: Totals
    detail_spans: int
    left_traces: int = 0
    left_spans: int = 0
    left_operations: int = 0
    cut_spans: int = 0  # of those left out: spans of the first trace, too large to show whole, past its cut
    slowest: list[tuple[Step, int, list[TraceData]]] = dataclasses.field(default_factory=list)
    points: list[tuple[int, str, int, int, int]] = dataclasses.field(default_factory=list)
    stride: int = 1

    @property
    def large(self) -> bool:
        return self.left_traces > 0 or self.cut_spans > 0


def read_detail(source: TraceSpans, detail_spans: int = DEFAULT_DETAIL_SPANS, max_points: int = MAX_POINTS) -> Detail:
    """See the module docstring; ``source`` gives each trace's spans. Raises :class:`UserError` when the input
    holds no launchtrace trace."""
    scan = Scan(source)
    order = {str(f): k for k, f in enumerate(scan.files)}
    detail = Detail([], scan.totals, detail_spans)
    slowest = Slowest(detail_spans)
    points = StepPoints(max_points)
    indexes: dict[str, int] = {}  # step name -> index of the slowest left-out step kept
    held = 0
    for where, spans, step in scan.traces():
        index = points.add(step)
        if held + step.spans <= detail_spans and not detail.left_traces:
            held += step.spans
            detail.traces.extend(scan.rebuilt(where, spans))
            continue
        if not detail.traces and not detail.left_traces:  # a first trace larger than the detail: its first spans
            shown = cut(spans, detail_spans)
            detail.traces.extend(scan.rebuilt(where, shown))
            kept = {id(s) for s in shown}
            rest = Totals()
            rest.add([s for s in spans if id(s) not in kept])
            detail.cut_spans = detail.left_spans = rest.spans
            detail.left_operations = rest.operations
            held = detail_spans  # nothing more fits
            continue
        detail.left_traces += 1
        detail.left_spans += step.spans
        detail.left_operations += step.operations
        if slowest.offer(step, where, spans):
            indexes[step.name] = index
    if not detail.traces:
        raise source.nothing_read()
    detail.traces.sort(key=lambda t: (order.get(str(t.attributes.get("source")), 0), first_time(t)))
    detail.slowest = [(s, indexes[s.name], scan.rebuilt(where, spans)) for s, where, spans in slowest.taken()]
    detail.points = points.result()
    detail.stride = points.stride
    return detail
