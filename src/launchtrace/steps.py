"""Runs and steps: the one rule every reading command uses to say which run a trace came from and how a run is
cut into steps.

A *run* is one process's traces in one source. :func:`run_key` tells runs apart: the file a trace was read from
(two files written by one process are two runs of its capture; a backend query has no file), and in it
``service.instance.id`` when the resource has one, else ``host.name`` and ``process.pid`` (a file written by
``launchtrace collect`` holds several processes).

A *step* is one :class:`Occurrence` of an outermost scope (:func:`occurrences`):

- the records of a trace belong to their outermost scope that is not internal (Warp's own timers such as
  "Compile x86" are never steps, nor is a ``warp.module.load`` scope, kind ``load``), named ``scope`` when one
  is asked for;
- the records under no such scope form ``<no scope>`` occurrences, one per unbroken run of them in issue order
  (a scoped record in between cuts them);
- a scope occurrence that holds no record is still a step (a timer around host work), but readers that compare
  records (``diff``, ``check-static``, the fleet) skip it without renumbering the others;
- occurrences are numbered per name in order of start time (ties: trace order, then issue order), so ``diff``,
  ``report``, ``summary``, ``alert`` and the baselines all call the same step ``step #3``.

Zero-code programs often have no enclosing scope: the top level is ``wp.ScopedTimer("simulate")``,
``wp.ScopedTimer("render")``, ... again and again, each timer its own trace. :func:`infer_steps` finds the
repeating sequence and makes each repetition one step, saying how it was inferred; :func:`default_scope` picks
the outermost repeating scope for ``check-static`` when ``--scope`` is not given.

Example::

    from launchtrace.steps import occurrences, split_runs
    for run in split_runs(traces):
        for occ in occurrences(run, scope="step"):
            print(occ.name, occ.index, occ.duration_ns, len(occ.records))
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from launchtrace.fastinit import slot_constructor
from launchtrace.model import LaunchRecord, ScopeKind, ScopeRecord, TraceData

__all__ = [
    "NO_SCOPE",
    "RUN_KEYS",
    "STEP_ROOT",
    "InferredSteps",
    "Occurrence",
    "default_scope",
    "family_path",
    "infer_steps",
    "inferred_how",
    "occurrences",
    "outermost_scopes",
    "repeating_unit",
    "run_id",
    "run_key",
    "split_runs",
    "step_family",
    "timer_thread",
]

NO_SCOPE = "<no scope>"
"""The name of records under no (non-internal) scope."""
STEP_ROOT = "launchtrace.step"
"""The synthetic root span of unscoped work (allocation, worker threads) in exported traces."""
RUN_KEYS = ("service.instance.id", "host.name", "process.pid")
"""Resource attributes that tell one run (process) from another."""


def run_key(trace_or_attributes: TraceData | Mapping[str, Any]) -> tuple[str, ...]:
    """Which run (process) a trace came from: see the module docstring. Accepts a trace or its attributes."""
    attrs = trace_or_attributes.attributes if isinstance(trace_or_attributes, TraceData) else trace_or_attributes
    source = str(attrs.get("source", ""))
    instance = attrs.get("service.instance.id")
    if instance not in (None, ""):
        host = str(attrs.get("host.name", ""))  # not needed to tell runs apart: there to name the host they ran on
        return (source, "instance", host, str(instance)) if host else (source, "instance", str(instance))
    pid = attrs.get("process.pid")
    if pid not in (None, ""):
        return (source, "pid", str(attrs.get("host.name", "")), str(pid))
    return (source,)


def run_id(trace_or_attributes: TraceData | Mapping[str, Any]) -> str:
    """:func:`run_key` as one printable string (what baselines store per run): ``instance/<host>/<id>`` (or
    ``instance/<id>`` with no ``host.name``), ``pid/<host>/<pid>`` or ``source``, prefixed with the file when the
    trace was read from one."""
    key = run_key(trace_or_attributes)
    return "/".join(key if key[0] else key[1:]) or "unknown"


def split_runs(traces: Sequence[TraceData]) -> list[list[TraceData]]:
    """``traces`` grouped by run (:func:`run_key`), runs and traces in first-seen order."""
    runs: dict[tuple, list[TraceData]] = {}
    for trace in traces:
        runs.setdefault(run_key(trace), []).append(trace)
    return list(runs.values())


@dataclasses.dataclass(frozen=True, slots=True)
class Occurrence:
    """One step: ``name`` (the scope's, or :data:`NO_SCOPE`), ``index`` (0-based among that name's occurrences in
    the traces given), ``trace`` (index of its trace), ``start_ns`` / ``end_ns`` (the scope's, else its
    records'), its ``records`` in issue order, ``scope_id`` (None for unscoped records) and the ``source``
    trace it was cut from. ``data`` is the step as a :class:`TraceData` (its records and every scope under it)."""

    name: str
    index: int
    trace: int
    start_ns: int
    end_ns: int
    records: tuple[LaunchRecord, ...]
    scope_id: int | None = None
    source: TraceData | None = dataclasses.field(default=None, compare=False, repr=False)
    scopes: tuple[int, ...] = dataclasses.field(default=(), compare=False, repr=False)

    @property
    def occurrence(self) -> int:
        """The same as ``index`` (the name the diff's segments used)."""
        return self.index

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def data(self) -> TraceData:
        """The step's records and the scopes under it, with its trace's attributes plus ``scope_id`` and
        ``scope_name``."""
        src = self.source if self.source is not None else TraceData()
        attrs = {**src.attributes, "scope_name": self.name}
        if self.scope_id is not None:
            attrs["scope_id"] = self.scope_id
        return TraceData(list(self.records), {sid: src.scopes[sid] for sid in self.scopes}, attrs)


_NUMBERED = re.compile(r"^(.*?\S)([ _:#=-]+)\d+$")


def step_family(name: str) -> str:
    """A step scope's name with a trailing counter made ``<n>``: ``wp.ScopedTimer(f"frame {i}")`` names every
    occurrence anew (``frame 0``, ``frame 1``, ...), and each would be a scope of its own that never repeats,
    so no step, diff verdict or static check. ``frame 17``, ``frame_17``, ``frame #17``, ``step: 3`` ->
    ``frame <n>``, ``frame_<n>``, ``frame #<n>``, ``step: <n>``; a number not after a space, ``_``, ``-``, ``:``,
    ``#`` or ``=`` (``layer2``) stays, and so does any other name."""
    if not name or not name[-1].isdigit():
        return name
    m = _NUMBERED.match(name)
    return f"{m.group(1)}{m.group(2)}<n>" if m else name


def family_path(path: Sequence[str]) -> tuple[str, ...]:
    """A scope path named as its step is (``("frame 17", "physics")`` -> ``("frame <n>", "physics")``): the
    first name is the step scope's, and :func:`step_family` names it."""
    return (step_family(path[0]), *path[1:]) if path else ()


def outermost_scopes(trace: TraceData, scope: str | None = None) -> dict[int, int | None]:
    """For every scope id of ``trace``: the outermost non-internal scope above it or itself (named ``scope``
    when given), or None. A scope nested in another of the same name belongs to the outer one."""
    top: dict[int, int | None] = {}
    family = step_family(scope) if scope is not None else None
    for start in trace.scopes:
        chain: list[int] = []
        sid: int | None = start
        found: int | None = None
        while sid is not None and sid in trace.scopes and sid not in top and sid not in chain:
            chain.append(sid)
            sid = trace.scopes[sid].parent_id
        if sid is not None and sid in top:
            found = top[sid]
        for cid in reversed(chain):  # outermost first: an outer match wins
            sc = trace.scopes[cid]
            if (
                found is None
                and not sc.internal
                and sc.kind != "load"
                and (family is None or step_family(sc.name) == family)
            ):
                found = cid
            top[cid] = found
    return top


def _cut(trace: TraceData, t: int, scope: str | None) -> list[tuple]:
    """``trace`` cut into steps: ``(start, trace, position, name, scope_id, records, scopes, end)`` each."""
    top = outermost_scopes(trace, scope)
    if type(trace.records) is not list and hasattr(trace.records, "parts"):
        return _cut_spilled(trace, t, scope, top)
    scoped: dict[int, list[LaunchRecord]] = {}
    first: dict[int, int] = {}
    parts: list[tuple[int | None, list[LaunchRecord], int]] = []
    loose: list[LaunchRecord] | None = None
    for pos, rec in enumerate(trace.records):
        sid = top.get(rec.scope_id) if rec.scope_id is not None else None
        if sid is None:
            if scope is not None:
                continue
            if loose is None:
                loose = []
                parts.append((None, loose, pos))
            loose.append(rec)
            continue
        loose = None
        if sid not in scoped:
            scoped[sid] = []
            first[sid] = pos
            parts.append((sid, scoped[sid], pos))
        scoped[sid].append(rec)
    under: dict[int, list[int]] = {}
    for sid, root in top.items():
        if root is not None:
            under.setdefault(root, []).append(sid)
    for root in under:
        if root not in scoped:  # a scope with no records of its own: still a step
            parts.append((root, [], len(trace.records)))
    out = []
    for sid, recs, pos in parts:
        if sid is not None:
            sc = trace.scopes[sid]
            start = sc.start_ns or (recs[0].start_ns if recs else 0)
            end = sc.end_ns or max((r.end_ns for r in recs), default=0)
            out.append((start, t, pos, step_family(sc.name), sid, recs, sorted(under.get(sid, ())), end))
        else:
            start = min((r.start_ns for r in recs), default=0)
            out.append((start, t, pos, NO_SCOPE, None, recs, [], max((r.end_ns for r in recs), default=0)))
    return out


def _cut_spilled(trace: TraceData, t: int, scope: str | None, top: dict[int, int | None]) -> list[tuple]:
    """:func:`_cut` of a trace whose records are in a temporary file (one wide trace,
    :class:`~launchtrace.sources.spill.SpilledRecords`): the same steps in one pass over the records, each
    step's records written to the file as they come (:class:`~launchtrace.sources.spill.PartWriter`) instead of
    held in lists, its first start and last end kept as they come."""
    one = _one_step(trace, t, scope, top)
    if one is not None:
        return one
    writer = trace.records.parts()  # type: ignore[attr-defined]
    virtual = scope is None  # while every record is in the one part so far: that part is the records themselves
    scoped: dict[int, int] = {}
    parts: list[list] = []  # [scope id, part, position, first start, lowest start, highest end, records]
    loose: list | None = None
    count = 0
    for pos, rec in enumerate(trace.records):
        count = pos + 1
        sid = top.get(rec.scope_id) if rec.scope_id is not None else None
        if sid is None:
            if scope is not None:
                continue
            if loose is None:
                if virtual and parts:
                    virtual = _written(trace, writer, pos)
                loose = [None, writer.part(), pos, rec.start_ns, rec.start_ns, rec.end_ns, 0]
                parts.append(loose)
            part = loose
        else:
            loose = None
            at = scoped.get(sid)
            if at is None:
                if virtual and parts:
                    virtual = _written(trace, writer, pos)
                at = scoped[sid] = len(parts)
                parts.append([sid, writer.part(), pos, rec.start_ns, rec.start_ns, rec.end_ns, 0])
            part = parts[at]
        if not virtual:
            writer.add(part[1], rec)
        if rec.start_ns < part[4]:
            part[4] = rec.start_ns
        if rec.end_ns > part[5]:
            part[5] = rec.end_ns
        part[6] += 1
    views = writer.finish()
    if virtual and parts:
        views[0] = trace.records
    under: dict[int, list[int]] = {}
    for sid, root in top.items():
        if root is not None:
            under.setdefault(root, []).append(sid)
    out = []
    for sid, part, pos, first_start, low, high, _n in parts:
        recs = views[part]
        if sid is not None:
            sc = trace.scopes[sid]
            start = sc.start_ns or first_start
            out.append((start, t, pos, step_family(sc.name), sid, recs, sorted(under.get(sid, ())), sc.end_ns or high))
        else:
            out.append((low, t, pos, NO_SCOPE, None, recs, [], high))
    for root in under:
        if root not in scoped:  # a scope with no records of its own: still a step
            sc = trace.scopes[root]
            out.append((sc.start_ns, t, count, step_family(sc.name), root, (), sorted(under.get(root, ())), sc.end_ns))
    return out


def _one_step(trace: TraceData, t: int, scope: str | None, top: dict[int, int | None]) -> list[tuple] | None:
    """:func:`_cut_spilled` without reading the records, where they say they all lie in one scope (one wide
    trace of one step: its launches under its root) and that scope has its times; else None."""
    known = getattr(trace.records, "scope_ids", lambda: None)()
    if scope is not None or known is None or len(known) != 1:
        return None
    (only,) = known
    sid = top.get(only) if only is not None else None
    if sid is None or not trace.scopes[sid].start_ns or not trace.scopes[sid].end_ns or not trace.records:
        return None
    sc = trace.scopes[sid]
    under: dict[int, list[int]] = {}
    for other, root in top.items():
        if root is not None:
            under.setdefault(root, []).append(other)
    out = [(sc.start_ns, t, 0, step_family(sc.name), sid, trace.records, sorted(under.get(sid, ())), sc.end_ns)]
    for root in under:
        if root != sid:  # a scope with no records of its own: still a step
            other = trace.scopes[root]
            out.append(
                (
                    other.start_ns,
                    t,
                    len(trace.records),
                    step_family(other.name),
                    root,
                    (),
                    sorted(under[root]),
                    other.end_ns,
                )
            )
    return out


def _written(trace: TraceData, writer: Any, count: int) -> bool:
    """The first ``count`` records of ``trace`` written to the first part (a second part begins); False."""
    for rec in itertools.islice(trace.records, count):
        writer.add(0, rec)
    return False


def occurrences(traces: Sequence[TraceData] | TraceData, scope: str | None = None) -> list[Occurrence]:
    """Every step of ``traces`` (see the module docstring), in order of start time. With ``scope``, only the
    occurrences of scopes of that name (records outside them left out)."""
    traces = [traces] if isinstance(traces, TraceData) else traces
    found = []
    for t, trace in enumerate(traces):
        found.extend(_cut(trace, t, scope))
    found.sort(key=lambda item: (item[0], item[1], item[2]))
    counts: dict[str, int] = {}  # (not a Counter: making one was a tenth of this, once per trace in summary)
    out = []
    for start, t, _pos, name, sid, recs, scopes, end in found:
        index = counts.get(name, 0)
        recs = tuple(recs) if type(recs) is list else recs  # (a spilled trace's steps stay in its file)
        out.append(_occurrence(name, index, t, start, end, recs, sid, traces[t], tuple(scopes)))
        counts[name] = index + 1
    return out


_occurrence = slot_constructor(Occurrence, tuple(f.name for f in dataclasses.fields(Occurrence)))
"""``Occurrence(...)`` with every field, positionally, without the frozen dataclass's ``object.__setattr__`` per
field (``summary`` cuts every trace: four or five occurrences each)."""


@dataclasses.dataclass(frozen=True, slots=True)
class InferredSteps:
    """Steps inferred from a repeating top-level sequence of timers: ``unit`` (the timer names of one step),
    ``steps`` (each a tuple of the occurrences in it), ``how`` (one sentence for the output)."""

    unit: tuple[str, ...]
    steps: tuple[tuple[Occurrence, ...], ...]
    how: str

    @property
    def name(self) -> str:
        return "+".join(self.unit)

    def occurrences(self) -> list[Occurrence]:
        """Each inferred step as one :class:`Occurrence` named :attr:`name`: its timers' records and scopes
        together (from their several traces), from the first one's start to the last one's end."""
        out = []
        for k, parts in enumerate(self.steps):
            first = parts[0]
            records = tuple(r for o in parts for r in o.records)
            scopes = {sid: o.source.scopes[sid] for o in parts if o.source is not None for sid in o.scopes}
            attrs = dict(first.source.attributes) if first.source is not None else {}
            source = TraceData(list(records), scopes, attrs)
            end = max(o.end_ns for o in parts)
            out.append(Occurrence(self.name, k, first.trace, first.start_ns, end, records, None, source, tuple(scopes)))
        return out


def infer_steps(occs: Sequence[Occurrence], max_period: int = 8) -> InferredSteps | None:
    """When the top level of a run (``occs`` = :func:`occurrences` of it, no ``scope``) is a repeating
    sequence of ``wp.ScopedTimer`` s with no enclosing scope, each repetition as one step; else None.

    Only a unit of two or more timers counts (a single timer repeating is already a step per occurrence), it
    must repeat at least twice, every named top-level occurrence must be a timer, and all of them on one thread:
    two threads' timers (``a.step`` on one, ``b.step`` on the other) interleave as the scheduler says, so a
    "repetition" of both would cut each run differently (the zoo's ``workers``: 66 of 96 unchanged pairs failed
    the topology gate)."""
    named = [o for o in occs if o.scope_id is not None]
    threads = set()
    for o in named:
        sc = o.source.scopes.get(o.scope_id) if o.source is not None else None
        if sc is None or sc.kind != ScopeKind.TIMER.value:
            return None
        if sc.thread:
            threads.add(timer_thread(sc))
    if len(threads) > 1:  # several threads' timers interleave as the scheduler says: no repetition to find
        return None
    found = repeating_unit([o.name for o in named], max_period)
    if found is None:
        return None
    start, period, count = found
    unit = tuple(o.name for o in named[start : start + period])
    steps = tuple(tuple(named[start + k * period : start + (k + 1) * period]) for k in range(count))
    return InferredSteps(unit, steps, inferred_how(unit, count, named[start].index))


def timer_thread(scope: ScopeRecord) -> tuple[int, str]:
    """The thread a top-level timer ran on, as :func:`infer_steps` tells threads apart (0: not recorded)."""
    return (scope.thread, scope.thread_name)


def repeating_unit(names: Sequence[str], max_period: int = 8) -> tuple[int, int, int] | None:
    """The rule of :func:`infer_steps` on the names of a run's named top-level occurrences (every one a timer),
    in order: ``(start, period, count)`` of the repetition that covers the most, or None. Kept apart so that a
    streamed reader (``summary``) applies the same rule to names alone."""
    from launchtrace.topology import find_repeats

    if len(names) < 4:
        return None
    runs = [r for r in find_repeats(names, max_period=max_period) if r[1] >= 2]
    if not runs:
        return None
    start, period, count = max(runs, key=lambda r: (r[1] * r[2], -r[0]))
    if len(set(names[start : start + period])) != period:
        return None
    return start, period, count


def inferred_how(unit: Sequence[str], count: int, first_index: int) -> str:
    """The sentence that says how steps were inferred (``first_index``: the first step's occurrence number of
    ``unit[0]``)."""
    return (
        f"steps inferred: no enclosing scope; the top-level timers {', '.join(unit)} repeat {count} times "
        f"from occurrence #{first_index} of {unit[0]!r}, each repetition one step"
    )


def default_scope(occs: Sequence[Occurrence]) -> tuple[str | None, str]:
    """The scope ``check-static`` checks when none is named: the outermost repeating one (the most common
    outermost scope name seen at least twice; the first seen on a tie), and a sentence saying so."""
    counts = Counter(o.name for o in occs if o.scope_id is not None)
    repeating = [(n, c) for n, c in counts.items() if c >= 2]
    if not repeating:
        return None, "no outermost scope repeats: name one with --scope"
    best = max(c for _, c in repeating)
    name = next(n for n, c in repeating if c == best)
    how = f"no --scope given: checking {name!r}, the outermost repeating scope ({best} occurrences)"
    others = [f"{n!r} ({c})" for n, c in repeating if n != name]
    if others:  # e.g. tape.backward beside tape.forward: a growing tape would go unseen
        more = f" and {len(others) - 3} more" if len(others) > 3 else ""
        how += f"; also repeating, not checked: {', '.join(others[:3])}{more} (name one with --scope)"
    return name, how
