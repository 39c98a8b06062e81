"""Runs and steps: which traces came from one process, and which scope occurrence to look at.

A program's spans arrive as many traces (one per outermost scope occurrence, and one per thread's unscoped
work), but a *run* is one process: the traces of one :func:`launchtrace.steps.run_key` (the one rule every
command uses: file, then ``service.instance.id``, else ``host.name`` and ``process.pid``).
:func:`merge_run` puts all of a run's records on one time axis in the process-wide issue order (``seq``), so
analyses see every thread at once (a race between a writer thread and a reader thread is two traces until
then).

A *step* is one occurrence of an outermost scope (:class:`launchtrace.steps.Occurrence`, cut and numbered by
:func:`launchtrace.steps.occurrences`, as ``diff`` and the fleet cut them). :func:`occurrences` lists them; the
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
from typing import TYPE_CHECKING, TypedDict

from launchtrace import folds as fold_rules
from launchtrace.analysis.replays import captured_graphs
from launchtrace.errors import UserError
from launchtrace.model import TraceData
from launchtrace.sources.rebuild import TRACE_ID
from launchtrace.steps import NO_SCOPE, STEP_ROOT, Occurrence, run_key
from launchtrace.steps import occurrences as _occurrences

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "Choice",
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


def group_runs(traces: Sequence[TraceData]) -> list[Run]:
    """``traces`` grouped by process, runs in first-seen order, traces kept in their order."""
    groups: dict[tuple, list[TraceData]] = {}
    for trace in traces:
        groups.setdefault(run_key(trace), []).append(trace)
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


def occurrences(traces: Sequence[TraceData], scope: str | None = None) -> list[Occurrence]:
    """Every occurrence of the scope named ``scope``; with ``None`` every step of the run: the one rule of
    :func:`launchtrace.steps.occurrences` (records under no scope form ``<no scope>`` steps), so the report and
    the diff number the same file the same way."""
    return _occurrences(traces, scope)


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
        key = (occ.name, tuple((topology_key(r, raw=False), fold_rules.launches(r)) for r in records))
        groups.setdefault(key, []).append(occ)
    return list(groups.values())


def shape_groups(occs: Sequence[Occurrence]) -> list[list[Occurrence]]:
    """``occs`` grouped as :func:`topology_groups` does, but with launch dims and scalar values left out: the
    steps of a program whose particle count grows every frame differ in every frame, yet launch the same kernels
    on the same buffers (``graph`` draws one picture per shape when the topologies are many)."""
    from launchtrace.analysis.segments import unowned_by_order
    from launchtrace.topology import topology_key

    groups: dict[tuple, list[Occurrence]] = {}
    for occ in occs:
        records = unowned_by_order(occ.data.records)
        keys = [(topology_key(r, raw=False, scalars=False), fold_rules.launches(r)) for r in records]
        shape = tuple((key[:2] + key[3:], launches) for key, launches in keys)  # (op, kernel, arrays): no dim
        groups.setdefault((occ.name, shape), []).append(occ)
    return list(groups.values())


def common_scope(occs: Sequence[Occurrence]) -> str | None:
    """The most common occurrence name (a tie with the synthetic step root goes to the named scope)."""
    counts = Counter(o.name for o in occs)
    if not counts:
        return None
    best = max(counts.values())
    names = [n for n, c in counts.items() if c == best]
    named = [n for n in names if n not in (NO_SCOPE, STEP_ROOT)]  # a tie with unscoped work: the named scope
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


class Choice(TypedDict, total=False):
    """The keywords of :func:`select` (what ``--scope``, ``--trace`` and ``--occurrence`` name), as
    :func:`views` passes them on; one left out or None chooses nothing."""

    scope: str | None
    trace: str | None
    occurrence: str | int | None


def views(traces: Sequence[TraceData], **choice: Unpack[Choice]) -> list[View]:
    """With no choice made, one :class:`View` per run: every thread of the process merged (:func:`merge_run`);
    else one per occurrence :func:`select` picks, run by run.

    Example::

        for view in views(traces, scope="step", occurrence="slowest"):
            flow = build_dataflow(view.data, view.graphs)
    """
    out = []
    chosen = any(value is not None for value in choice.values())
    for run in group_runs(traces):
        graphs = captured_graphs(run.traces)
        if not chosen:
            out.append(View(run.label, merge_run(run.traces), run, graphs))
            continue
        try:
            picked = select(run.traces, **choice)
        except UserError:
            if len(traces) == len(run.traces):
                raise
            continue  # another run may hold it
        out.extend(View(f"{run.label}: {o.name} #{o.index}", o.data, run, graphs, o) for o in picked)
    if chosen and not out:
        select(traces, **choice)  # raises the error naming what is missing
    return out
