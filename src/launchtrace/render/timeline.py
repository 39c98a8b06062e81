"""The timeline walk shared by the Chrome trace and the HTML report: one row per thread and stream.

Scopes go on the row of the host thread that opened them; launches, copies and fills go on the row of
their stream when one was given, else on their thread's row. Every string stays raw here: each renderer
escapes for its own output.

Example::

    from launchtrace.render.timeline import timeline_items
    for item in timeline_items([trace]):
        print(item.lane, item.name, item.start_ns, item.end_ns)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from launchtrace.model import LaunchRecord, ScopeRecord, TraceData

__all__ = ["TimelineItem", "lane_name", "record_details", "scope_details", "timeline_items"]


@dataclasses.dataclass(frozen=True, slots=True)
class TimelineItem:
    """One bar: ``trace`` (index of the trace), ``lane`` (row name), ``kind`` (``"scope"`` or an op),
    ``name``, ``start_ns`` / ``end_ns`` (ns since the epoch), ``depth`` (scope nesting, 0 for records),
    ``details`` (``(key, value)`` string pairs shown on hover), ``record`` (index in the trace or -1)."""

    trace: int
    lane: str
    kind: str
    name: str
    start_ns: int
    end_ns: int
    depth: int
    details: tuple[tuple[str, str], ...]
    record: int = -1


def lane_name(rec: LaunchRecord) -> str:
    """The row a record is drawn on."""
    if rec.stream is not None:
        return f"{rec.device or 'device'} stream 0x{rec.stream:x}"
    return f"thread {rec.thread_name or rec.thread}"


def record_details(rec: LaunchRecord) -> tuple[tuple[str, str], ...]:
    """Hover details of a record, as strings."""
    rows = [
        ("op", str(rec.op)),
        ("kernel", rec.kernel),
        ("dim", str(tuple(rec.dim))),
        ("duration", f"{rec.duration_ns / 1000:.1f} us"),
        ("device", rec.device),
        ("stream", "" if rec.stream is None else f"0x{rec.stream:x}"),
        ("site", str(rec.site)),
    ]
    for b in rec.buffers:
        where = b.owner + (f"+{b.offset}" if b.offset else "") if b.owner is not None else f"0x{b.ptr:x}"
        rows.append((f"arg {b.name or rec.arg_name(b.key)}", f"{where} {b.dtype}{list(b.shape)} {b.access}"))
    for key, value in rec.scalars:
        rows.append((f"arg {rec.arg_name(key)}", repr(value)))
    if rec.repeat > 1:
        rows.append(("repeat", str(rec.repeat)))
    if rec.error:
        rows.append(("error", rec.error))
    return tuple((k, v) for k, v in rows if v != "")


def scope_details(scope: ScopeRecord) -> tuple[tuple[str, str], ...]:
    rows = [
        ("scope", scope.name),
        ("kind", str(scope.kind)),
        ("duration", f"{scope.duration_ns / 1000:.1f} us"),
    ]
    rows.extend((str(k), str(v)) for k, v in scope.attributes)
    if scope.error:
        rows.append(("error", scope.error))
    return tuple(rows)


def _depth(trace: TraceData, scope: ScopeRecord) -> int:
    return len(trace.scope_path(scope.id)) - 1


def timeline_items(traces: Sequence[TraceData]) -> list[TimelineItem]:
    """Every scope and record of ``traces`` as a :class:`TimelineItem`, in start order per trace."""
    items: list[TimelineItem] = []
    for t, trace in enumerate(traces):
        for scope in trace.scopes.values():
            end = scope.end_ns or max([scope.start_ns, *(r.end_ns for r in trace.records)])
            lane = f"thread {scope.thread_name or scope.thread}"
            items.append(
                TimelineItem(
                    t,
                    lane,
                    "scope",
                    scope.name,
                    scope.start_ns,
                    end,
                    _depth(trace, scope),
                    scope_details(scope),
                )
            )
        for i, rec in enumerate(trace.records):
            items.append(
                TimelineItem(
                    t,
                    lane_name(rec),
                    str(rec.op),
                    rec.kernel,
                    rec.start_ns,
                    rec.end_ns,
                    0,
                    record_details(rec),
                    i,
                )
            )
    items.sort(key=lambda it: (it.trace, it.start_ns, it.kind != "scope", it.depth))
    return items
