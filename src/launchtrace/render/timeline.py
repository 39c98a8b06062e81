"""The timeline walk shared by the Chrome trace and the HTML report: one row per thread and per stream.

Scopes go on the row of the host thread that opened them (nested by depth); launches, copies and fills go on
the row of their stream when one was given, else on their thread's row under the scopes that enclose them.
A run of records rebuilt from one folded summary span is one ``"fold"`` item spanning the summary, labelled
with its count (``apply_forces, integrate, collide_ground x4``), never one invented bar per repetition: the
per-launch times were not recorded. Every string stays raw here: each renderer escapes for its own output.

Example::

    from launchtrace.render.timeline import timeline_items
    for item in timeline_items([trace]):
        print(item.lane, item.name, item.start_ns, item.end_ns, item.count)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from launchtrace.conventions import kernel_title
from launchtrace.model import LaunchRecord, ScopeRecord, TraceData

__all__ = ["TimelineItem", "lane_name", "lane_of_record", "record_details", "scope_details", "timeline_items"]


@dataclasses.dataclass(frozen=True, slots=True)
class TimelineItem:
    """One bar: ``trace`` (index of the trace), ``lane`` (row name), ``lane_kind`` (``"thread"`` or
    ``"stream"``), ``thread`` (the host thread's ident), ``kind`` (``"scope"``, an op, or ``"fold"``),
    ``name``, ``start_ns`` / ``end_ns`` (ns since the epoch), ``depth`` (scope nesting: a scope's own depth; a
    record one below its innermost scope), ``details`` (``(key, value)`` string pairs shown on hover),
    ``record`` (index in the trace or -1), ``count`` (device operations the bar stands for: a fold's
    repetitions x period)."""

    trace: int
    lane: str
    kind: str
    name: str
    start_ns: int
    end_ns: int
    depth: int
    details: tuple[tuple[str, str], ...]
    record: int = -1
    lane_kind: str = "thread"
    thread: int = 0
    count: int = 1


def lane_name(rec: LaunchRecord) -> str:
    """The row a record is drawn on."""
    if rec.stream is not None:
        return f"{rec.device or 'device'} stream 0x{rec.stream:x}"
    return f"thread {rec.thread_name or rec.thread}"


def lane_of_record(rec: LaunchRecord) -> str:
    """``"stream"`` or ``"thread"``: the kind of row :func:`lane_name` names."""
    return "stream" if rec.stream is not None else "thread"


def record_details(rec: LaunchRecord) -> tuple[tuple[str, str], ...]:
    """Hover details of a record, as strings."""
    rows = [
        ("op", str(rec.op)),
        ("kernel", rec.kernel),
        ("dim", str(tuple(rec.dim))),
        ("duration", f"{rec.duration_ns / 1000:.1f} us"),
        ("device", rec.device),
        ("stream", "" if rec.stream is None else f"0x{rec.stream:x}"),
        ("thread", rec.thread_name or str(rec.thread)),
        ("site", str(rec.site)),
    ]
    rows.extend(_buffer_rows(rec))
    for key, value in rec.scalars:
        rows.append((f"arg {rec.arg_name(key)}", repr(value)))
    if rec.captured:
        rows.append(("captured", f"into graph {rec.graph_id}: runs at each replay, not here"))
    elif rec.graph_id is not None:
        rows.append(("graph", f"replays graph {rec.graph_id}"))
    if rec.repeat > 1:
        rows.append(("repeat", str(rec.repeat)))
    if rec.error:
        rows.append(("error", rec.error))
    return tuple([row for row in rows if row[1] != ""])


def _buffer_rows(rec: LaunchRecord) -> list[tuple[str, str]]:
    """The array arguments' rows of :func:`record_details`: they depend on the buffers and the parameter names
    only, which a call site's rebuilt launches share (the same tuples), so they are made once per pair (kept
    with the tuples, so an id is never another's). A copy of host data names its host side after its own call
    site (:meth:`LaunchRecord.buffer_label`), so its rows are made for it alone."""
    bufs, params = rec.buffers, rec.params
    if rec.copies_host_data:
        return _rows_of(rec)
    key = (id(bufs), id(params))
    known = _BUFFER_ROWS.get(key)
    if known is not None and known[0] is bufs and known[1] is params:
        return known[2]
    rows = _rows_of(rec)
    if type(bufs) is tuple and type(params) is tuple:  # immutable: the rows stay right
        if len(_BUFFER_ROWS) >= 4096:
            _BUFFER_ROWS.clear()
        _BUFFER_ROWS[key] = (bufs, params, rows)
    return rows


_BUFFER_ROWS: dict[tuple[int, int], tuple[tuple, tuple, list[tuple[str, str]]]] = {}


def _rows_of(rec: LaunchRecord) -> list[tuple[str, str]]:
    """One row per array argument: its name, then what it is called by every view (owner (+offset), else the
    allocation's name, else ``<host data> (site)`` for a copy's host side, else the pointer), dtype, shape and
    access."""
    label = rec.buffer_label
    return [
        (f"arg {b.name or rec.arg_name(b.key)}", f"{label(b)} {b.dtype}{list(b.shape)} {b.access}") for b in rec.buffers
    ]


def scope_details(scope: ScopeRecord) -> tuple[tuple[str, str], ...]:
    rows = [
        ("scope", scope.name),
        ("kind", str(scope.kind)),
        ("duration", f"{scope.duration_ns / 1000:.1f} us"),
        ("thread", scope.thread_name or str(scope.thread)),
    ]
    if scope.site is not None:
        rows.append(("site", str(scope.site)))
    rows.extend((str(k), str(v)) for k, v in scope.attributes)
    if scope.error:
        rows.append(("error", scope.error))
    return tuple(rows)


def _fold_item(t: int, depth: int, recs: list[tuple[int, LaunchRecord]]) -> TimelineItem:
    """One bar for the records of one folded summary span (``recs``: (index, record) of its repetitions)."""
    first = recs[0][1]
    fold = first.fold
    assert fold is not None
    kernels = list(dict.fromkeys(kernel_title(r.kernel, r.adjoint).rsplit(".", 1)[-1] for _, r in recs[: fold.period]))
    details: list[tuple[str, str]] = [
        ("folded", f"{fold.count} repetitions of {fold.period} record(s), {fold.count * fold.period} in all"),
        ("times", "from the summary span: per-launch times were not recorded"),
        ("duration", f"{(fold.end_ns - fold.start_ns) / 1000:.1f} us (the whole fold)"),
        ("site", str(first.site)),
    ]
    seen: set[int] = set()
    for _, r in recs:
        f = r.fold
        if f is None or f.position in seen:
            continue
        seen.add(f.position)
        args = ", ".join(f"{b.name or r.arg_name(b.key)}={r.buffer_label(b)}" for b in r.buffers)
        details.append(
            (
                f"#{f.position} {r.kernel}",
                f"mean {f.mean_ns / 1000:.1f} us, min {f.min_ns / 1000:.1f}, max {f.max_ns / 1000:.1f}"
                + (f"; {args}" if args else ""),
            )
        )
    return TimelineItem(
        t,
        lane_name(first),
        "fold",
        f"{', '.join(kernels)} x{fold.count}",
        fold.start_ns,
        fold.end_ns,
        depth if first.stream is None else 0,
        tuple(details),
        recs[0][0],
        lane_of_record(first),
        first.thread,
        fold.count * fold.period,
    )


def _details(rec: LaunchRecord, memo: dict[int, tuple[LaunchRecord, tuple]]) -> tuple:
    known = memo.get(id(rec))
    if known is not None and known[0] is rec:
        return known[1]
    found = record_details(rec)
    memo[id(rec)] = (rec, found)
    return found


def timeline_items(
    traces: Sequence[TraceData], details: dict[int, tuple[LaunchRecord, tuple]] | None = None
) -> list[TimelineItem]:
    """Every scope and record of ``traces`` as a :class:`TimelineItem` (folds as one each), in start order
    per trace. ``details``: :func:`record_details` already worked out, by the record's id (with the record, so
    an id is only ever its own), shared by a caller that lays out the same records in several views (the
    report's steps and its whole run)."""
    items: list[TimelineItem] = []
    memo: dict[int, tuple[LaunchRecord, tuple]] = {} if details is None else details
    for t, trace in enumerate(traces):
        depths: dict[int | None, int] = {None: -1}
        for scope in trace.scopes.values():
            depth = len(trace.scope_path(scope.id)) - 1
            depths[scope.id] = depth
            end = scope.end_ns or max([scope.start_ns, *(r.end_ns for r in trace.records)])
            lane = f"thread {scope.thread_name or scope.thread}"
            details = scope_details(scope)
            items.append(
                TimelineItem(
                    t, lane, "scope", scope.name, scope.start_ns, end, depth, details, -1, "thread", scope.thread
                )
            )
        folds: dict[str, tuple[int, list[tuple[int, LaunchRecord]]]] = {}
        for i, rec in enumerate(trace.records):
            known = depths.get(rec.scope_id)  # (a default argument would walk the scope path every time)
            depth = (known if known is not None else len(trace.scope_path(rec.scope_id)) - 1) + 1
            if rec.fold is not None:
                folds.setdefault(rec.fold.span_id, (depth, []))[1].append((i, rec))
                continue
            items.append(
                TimelineItem(
                    t,
                    lane_name(rec),
                    str(rec.op),
                    kernel_title(rec.kernel, rec.adjoint),
                    rec.start_ns,
                    rec.end_ns,
                    depth if rec.stream is None else 0,
                    _details(rec, memo),
                    i,
                    lane_of_record(rec),
                    rec.thread,
                    max(1, rec.repeat),
                )
            )
        items.extend(_fold_item(t, depth, recs) for depth, recs in folds.values())
    items.sort(key=lambda it: (it.trace, it.start_ns, it.kind != "scope", it.depth))
    return items
