"""Runs and steps: which traces came from one process, and which scope occurrence to look at.

A program's spans arrive as many traces (one per outermost scope occurrence, and one per thread's unscoped
work), but a *run* is one process: every trace whose resource says the same ``service.instance.id``,
``process.pid`` and ``host.name``. :func:`merge_run` puts all of a run's records on one time axis in the
process-wide issue order (``seq``), so analyses see every thread at once (a race between a writer thread and
a reader thread is two traces until then).

A *step* is one occurrence of a scope (:class:`Occurrence`). :func:`occurrences` lists them; the
*representative* step is the occurrence of median duration of the run's most common outermost scope (so the
demo's 60 ``step`` occurrences win over its one allocation step); :func:`select` turns the command line's
``--scope NAME``, ``--trace ID`` and ``--occurrence N|median|slowest`` into the occurrences to show, the one
place every command asks.

Example::

    from launchtrace.analysis.runs import group_runs, merge_run, representative
    for run in group_runs(traces):
        whole = merge_run(run.traces)          # every thread of the process, one TraceData
        step = representative(run.traces)      # median occurrence of the most common scope
        print(run.label, len(whole), step.name, step.index, step.duration_ns)
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from launchtrace.analysis.replays import captured_graphs
from launchtrace.errors import UserError
from launchtrace.model import TraceData
from launchtrace.sources.rebuild import TRACE_ID

__all__ = [
    "Occurrence",
    "Run",
    "View",
    "common_scope",
    "group_runs",
    "merge_run",
    "occurrences",
    "pick",
    "representative",
    "select",
    "topology_groups",
    "trace_label",
    "views",
]

_RUN_KEYS = ("service.instance.id", "process.pid", "host.name")
_STEP_ROOT = "launchtrace.step"  # the synthetic root of unscoped work (allocation, worker threads)


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """The traces of one process, in the order they ran, and its resource attributes."""

    key: tuple
    traces: tuple[TraceData, ...]

    @property
    def attributes(self) -> dict:
        return dict(self.traces[0].attributes) if self.traces else {}

    @property
    def pid(self) -> int | None:
        try:
            return int(self.attributes.get("process.pid"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None

    @property
    def label(self) -> str:
        attrs = self.attributes
        name = str(attrs.get("service.name") or "run")
        pid = attrs.get("process.pid")
        host = attrs.get("host.name")
        return name + (f" pid {pid}" if pid not in (None, "") else "") + (f" on {host}" if host else "")


def _run_key(trace: TraceData) -> tuple:
    key = tuple(str(trace.attributes.get(k, "")) for k in _RUN_KEYS)
    return key if any(key) else ("source", str(trace.attributes.get("source", "")))


def group_runs(traces: Sequence[TraceData]) -> list[Run]:
    """``traces`` grouped by process, runs in first-seen order, traces kept in their order."""
    groups: dict[tuple, list[TraceData]] = {}
    for trace in traces:
        groups.setdefault(_run_key(trace), []).append(trace)
    return [Run(key, tuple(members)) for key, members in groups.items()]


def merge_run(traces: Sequence[TraceData]) -> TraceData:
    """One :class:`TraceData` of every record and scope of ``traces`` (one process), in issue order.

    Scope ids are process-wide, so the scopes of several traces merge without renumbering; records are
    ordered by their process-wide sequence number, then start time.
    """
    if len(traces) == 1:
        return traces[0]
    records = sorted((r for t in traces for r in t.records), key=lambda r: (r.seq, r.start_ns))
    scopes = {sid: s for t in traces for sid, s in t.scopes.items()}
    attrs = dict(traces[0].attributes) if traces else {}
    attrs.pop(TRACE_ID, None)
    attrs["traces"] = len(traces)
    return TraceData(records, scopes, attrs)


def trace_label(trace: TraceData) -> str:
    """The trace id of a rebuilt trace, else its root's name."""
    return str(trace.attributes.get(TRACE_ID) or trace.attributes.get("root") or "trace")


@dataclasses.dataclass(frozen=True, slots=True)
class Occurrence:
    """One occurrence of a scope: ``name``, ``index`` (0-based among that name's occurrences in the run),
    ``trace`` (index of its trace in the list given), and ``data`` (its records and scopes)."""

    name: str
    index: int
    trace: int
    start_ns: int
    end_ns: int
    data: TraceData

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


def _span_of(data: TraceData) -> tuple[int, int]:
    starts = [s.start_ns for s in data.scopes.values() if s.start_ns] + [r.start_ns for r in data.records]
    ends = [s.end_ns for s in data.scopes.values() if s.end_ns] + [r.end_ns for r in data.records]
    return min(starts, default=0), max(ends, default=0)


def _partition(trace: TraceData, scope: str | None) -> list[TraceData]:
    """``trace`` cut into one :class:`TraceData` per outermost scope (named ``scope``, or any), each with the
    records and scopes under it, in one pass (a scope nested in another of the same name belongs to the outer)."""
    top: dict[int | None, int | None] = {None: None}

    def top_of(sid: int | None) -> int | None:
        chain = []
        found: int | None = None
        while sid is not None and sid not in top:
            chain.append(sid)
            scope_rec = trace.scopes.get(sid)
            if scope_rec is None or scope_rec.parent_id == sid or len(chain) > len(trace.scopes):
                sid = None
                break
            sid = scope_rec.parent_id
        found = top.get(sid)
        for sid in reversed(chain):  # outermost first: an outer match wins
            scope_rec = trace.scopes.get(sid)
            if found is None and scope_rec is not None and (scope is None or scope_rec.name == scope):
                found = sid
            top[sid] = found
        return found

    parts: dict[int, TraceData] = {}
    for sid in sorted(trace.scopes, key=lambda k: (trace.scopes[k].seq, k)):
        root = top_of(sid)
        if root is not None and root not in parts:
            attrs = {**trace.attributes, "scope_id": root, "scope_name": trace.scopes[root].name}
            parts[root] = TraceData([], {}, attrs)
        if root is not None:
            parts[root].scopes[sid] = trace.scopes[sid]
    for rec in trace.records:
        root = top_of(rec.scope_id)
        if root is not None:
            parts[root].records.append(rec)
    return list(parts.values())


def occurrences(traces: Sequence[TraceData], scope: str | None = None) -> list[Occurrence]:
    """Every occurrence of the scope named ``scope``; with ``None`` each trace's outermost scopes (a trace's
    unscoped work counts as one occurrence named after its root), numbered per name in run order."""
    found: list[tuple[int, int, str, int, TraceData]] = []
    for t, trace in enumerate(traces):
        parts = _partition(trace, scope)
        if scope is None:
            loose = [r for r in trace.records if r.scope_id not in trace.scopes]
            if loose or not parts:
                parts.append(TraceData(loose, {}, {**trace.attributes, "scope_name": trace.attributes.get("root")}))
        for part in parts:
            name = str(part.attributes.get("scope_name") or trace_label(trace))
            sid = part.attributes.get("scope_id")
            if sid in part.scopes and part.scopes[sid].end_ns:
                start, end = part.scopes[sid].start_ns, part.scopes[sid].end_ns
            else:
                start, end = _span_of(part)
            found.append((start, t, name, end, part))
    found.sort(key=lambda item: (item[0], item[1]))
    counts: Counter[str] = Counter()
    out = []
    for start, t, name, end, part in found:
        out.append(Occurrence(name, counts[name], t, start, end, part))
        counts[name] += 1
    return out


def topology_groups(occs: Sequence[Occurrence]) -> list[list[Occurrence]]:
    """``occs`` grouped by name and launch topology (as :func:`launchtrace.topology.topology_key` with owners,
    unowned buffers as the diff compares them (:func:`~launchtrace.analysis.segments.unowned_by_order`), not raw
    pointers; a folded record's repetition count is part of its key, never expanded), in first-seen order:
    identical steps fall in one group."""
    from launchtrace.analysis.segments import unowned_by_order
    from launchtrace.topology import topology_key

    groups: dict[tuple, list[Occurrence]] = {}
    for occ in occs:
        records = unowned_by_order(occ.data.records)
        key = (occ.name, tuple((topology_key(r, raw=False), max(1, r.repeat)) for r in records))
        groups.setdefault(key, []).append(occ)
    return list(groups.values())


def common_scope(occs: Sequence[Occurrence]) -> str | None:
    """The most common occurrence name (a tie with the synthetic step root goes to the named scope)."""
    counts = Counter(o.name for o in occs)
    if not counts:
        return None
    best = max(counts.values())
    names = [n for n, c in counts.items() if c == best]
    named = [n for n in names if n != _STEP_ROOT]  # a tie with the synthetic root goes to the named scope
    return (named or names)[0]


def pick(occs: Sequence[Occurrence], which: str | int = "median") -> Occurrence:
    """The occurrence ``which`` names: an index into ``occs``'s own numbering, ``"median"`` (median duration;
    the earlier of two middles) or ``"slowest"``."""
    if not occs:
        raise UserError("no scope occurrence to choose from")
    if which == "slowest":
        return max(occs, key=lambda o: (o.duration_ns, -o.start_ns))
    if which == "median":
        ranked = sorted(occs, key=lambda o: (o.duration_ns, o.start_ns))
        return ranked[(len(ranked) - 1) // 2]
    try:
        index = int(which)
    except (TypeError, ValueError):
        raise UserError(f"--occurrence: expected a number, 'median' or 'slowest', got {which!r}") from None
    for o in occs:
        if o.index == index:
            return o
    raise UserError(f"--occurrence {index}: out of range (0..{len(occs) - 1} for scope {occs[0].name!r})")


def representative(traces: Sequence[TraceData], scope: str | None = None) -> Occurrence:
    """The step to show for a run: the median-duration occurrence of ``scope``, or of the most common
    outermost scope."""
    occs = occurrences(traces, scope)
    name = scope or common_scope(occs)
    return pick([o for o in occs if o.name == name], "median")


def select(
    traces: Sequence[TraceData],
    *,
    scope: str | None = None,
    trace: str | None = None,
    occurrence: str | int | None = None,
) -> list[Occurrence]:
    """What ``--scope``, ``--trace`` and ``--occurrence`` name, as occurrences (see the module docstring).

    ``trace`` (a trace id, or a unique prefix of one) narrows to that trace; ``scope`` to that scope's
    occurrences; ``occurrence`` then picks one of those (without ``scope``: of the most common outermost
    scope). Raises :class:`UserError` when nothing matches.
    """
    pool = list(traces)
    occs = occurrences(traces, scope)
    if trace is not None:
        wanted = trace.lower()
        keep = [k for k, t in enumerate(traces) if str(t.attributes.get(TRACE_ID, "")).lower().startswith(wanted)]
        if not keep:
            raise UserError(f"--trace {trace}: no such trace (of {len(traces)})")
        if len(keep) > 1:
            raise UserError(f"--trace {trace}: {len(keep)} traces start so; give more of the id")
        pool = [traces[keep[0]]]
        occs = [o for o in occs if o.trace == keep[0]]  # numbered as in the whole run
    if scope is not None and not occs:
        names = sorted({o.name for o in occurrences(pool)} | {s.name for t in pool for s in t.scopes.values()})
        raise UserError(f"--scope {scope}: no such scope (seen: {', '.join(names[:12]) or 'none'})")
    if occurrence is None:
        return occs
    name = scope or common_scope(occs)
    return [pick([o for o in occs if o.name == name], occurrence)]


@dataclasses.dataclass(frozen=True, slots=True)
class View:
    """What one command draws or analyses: a ``label`` for people, the ``data``, the run it belongs to, and
    that run's captured graphs (graph id -> captured records), so replays expand wherever the capture was."""

    label: str
    data: TraceData
    run: Run
    graphs: dict
    occurrence: Occurrence | None = None


def views(
    traces: Sequence[TraceData],
    *,
    scope: str | None = None,
    trace: str | None = None,
    occurrence: str | int | None = None,
) -> list[View]:
    """With no choice made, one :class:`View` per run: every thread of the process merged (:func:`merge_run`);
    else one per occurrence :func:`select` picks, run by run.

    Example::

        for view in views(traces, scope="step", occurrence="slowest"):
            flow = build_dataflow(view.data, view.graphs)
    """
    out = []
    chosen = scope is not None or trace is not None or occurrence is not None
    for run in group_runs(traces):
        graphs = captured_graphs(run.traces)
        if not chosen:
            out.append(View(run.label, merge_run(run.traces), run, graphs))
            continue
        try:
            picked = select(run.traces, scope=scope, trace=trace, occurrence=occurrence)
        except UserError:
            if len(traces) == len(run.traces):
                raise
            continue  # another run may hold it
        out.extend(View(f"{run.label}: {o.name} #{o.index}", o.data, run, graphs, o) for o in picked)
    if chosen and not out:
        select(traces, scope=scope, trace=trace, occurrence=occurrence)  # raises the error naming what is missing
    return out
