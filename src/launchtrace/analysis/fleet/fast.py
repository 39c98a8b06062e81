"""The fleet baseline's fast path: a step's figures straight from its spans, without rebuilding its records.

A baseline needs, per step, only each launch's kernel, op, times and position plus the step's topology
fingerprint, launch count and foreign-buffer count. The last three depend on nothing that changes from one
repetition of a step to the next except pointers (compared by the order they first appear in) and a few
per-launch counters. So a step is reduced to its *signature*: every record span's attributes, in issue order,
less :data:`VOLATILE` (sequence number, thread id, device times) and less the raw pointers, plus the pattern
in which its pointers repeat. The first step with a new signature is rebuilt the straightforward way
(:func:`launchtrace.sources.rebuild.rebuild`, :func:`~.occurrences.occurrences_of`) and what it gave is remembered;
later steps with that signature only read their spans' times. Two steps with equal signatures have equal
records but for pointers, sequence numbers, thread ids and times, so equal fingerprints: the fast path
cannot give another result, only the same one sooner (``tests/test_fleet_fast.py`` builds baselines of real
exported files both ways and compares them byte for byte).

A trace takes the fast path only when it is one plain step: one root scope span and under it only record
spans (no folded summaries, nested scopes, errors, foreign spans, duplicate ids), with integer counters
and pointers, and at most :data:`MAX_FAST_SPANS` spans. Anything else, and any step whose representative a
baseline must (re)take, goes the straightforward way. At most :data:`MAX_SIGNATURES` signatures, holding
:data:`MAX_REMEMBERED_LAUNCHES` launches in all, are remembered (memory stays bounded); past that, new ones are
rebuilt every time.

Example::

    signatures = Signatures(scalars=True)
    step = read_step(spans)            # None: not a plain step
    known = signatures.get(step)       # None: rebuild it (and signatures.learn(step, occurrence))
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence

from launchtrace import conventions as C
from launchtrace.analysis.fleet.occurrences import Occurrence, loop_iterations
from launchtrace.model import TraceData
from launchtrace.sources.rebuild import rebuild
from launchtrace.spans import STATUS_ERROR, SpanData
from launchtrace.steps import NO_SCOPE, occurrences

__all__ = [
    "MAX_FAST_SPANS",
    "MAX_REMEMBERED_LAUNCHES",
    "MAX_SIGNATURES",
    "VOLATILE",
    "Known",
    "PlainStep",
    "Signatures",
    "known_of",
    "read_step",
    "root_step",
]

MAX_SIGNATURES = 1024
"""Signatures remembered (each holds one step's attribute values: some tens of KiB for a 20-launch step)."""
MAX_FAST_SPANS = 65_536
"""Spans of the largest trace read for a signature: reading one costs about 660 bytes a span on top of the spans
(its rows and signature), which one trace of a million launches cannot repeat often enough to pay for (issue 25)."""
MAX_REMEMBERED_LAUNCHES = 262_144
"""Launches of all remembered signatures together (each launch's static values stay with its signature)."""
VOLATILE = frozenset((C.SEQ, C.THREAD_ID, C.DEVICE_TIME_START, C.DEVICE_TIME_END))
"""Record-span attributes that a baseline never reads beyond their being integers."""
REFUSE = frozenset((C.FOLD_COUNT, C.SCOPE_KIND, C.SCOPE_JOINED))
"""Record-span attributes that make a step no plain one (a folded summary, a nested scope, a joined root)."""
_ARGS = (C.PARAMS, C.ARRAY_KEYS, C.SCALAR_KEYS)
_INT = {int}


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class _Layout:
    """What one sequence of attribute keys says: where the argument lists are (``None``: not a plain record).
    Compared and hashed by identity: one object per key sequence, so signatures holding it compare fast."""

    args: Callable[[tuple], tuple]  # values -> (params, array_keys, scalar_keys)
    index: dict[str, int]
    plans: dict[tuple, _Plan | None]  # by argument lists


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """How to read a record span of one layout and argument lists: its static values, then its integers
    (pointers first, then :data:`VOLATILE` ones, the sequence number among them at ``seq``)."""

    static: Callable[[tuple], tuple]
    ints: Callable[[tuple], tuple]
    pointers: int
    seq: int  # index in ints(); -1: no sequence number (0, as the rebuild reads it)


_layouts: dict[tuple, _Layout | None] = {}


def _getter(indices: list[int]) -> Callable[[tuple], tuple]:
    if not indices:
        return lambda values: ()
    if len(indices) == 1:
        i = indices[0]
        return lambda values: (values[i],)
    return operator.itemgetter(*indices)


def _layout(keys: tuple) -> _Layout | None:
    if len(set(keys)) != len(keys) or C.OP not in keys or not REFUSE.isdisjoint(keys):
        return None  # a key given twice (the rebuild keeps the last), not a record span, or not a plain one
    index = {k: i for i, k in enumerate(keys)}
    where = [index.get(k, -1) for k in _ARGS]
    if min(where) >= 0:
        return _Layout(operator.itemgetter(*where), index, {})

    def args(values: tuple) -> tuple:
        return tuple(values[i] if i >= 0 else () for i in where)

    return _Layout(args, index, {})


def _plan(layout: _Layout, keys: tuple, args: tuple) -> _Plan | None:
    try:
        labels, _ = C.arg_labels(tuple(args[0]), tuple(args[1]), tuple(args[2]))
    except (TypeError, ValueError, KeyError):
        return None
    pointers = [layout.index[n] for n in (C.arg_attr(label, "ptr") for label in labels) if n in layout.index]
    volatile = [i for i, k in enumerate(keys) if k in VOLATILE]
    taken = set(pointers) | set(volatile)
    static = [i for i in range(len(keys)) if i not in taken]
    seq = layout.index.get(C.SEQ)
    ints = pointers + volatile
    return _Plan(_getter(static), _getter(ints), len(pointers), -1 if seq is None else ints.index(seq))


@dataclasses.dataclass(slots=True)
class PlainStep:
    """A trace that is one plain step: its root rebuilt alone, its record spans' times in issue order."""

    trace: TraceData  # the root only: attributes and scopes as the full rebuild gives them
    scope: str  # the segment name the step's records fall in
    signature: tuple
    times: list[tuple[int, int]]  # (start_ns, end_ns) per launch, in issue order
    spans: list[SpanData]  # all of the trace's spans, for rebuilding it when needed


@dataclasses.dataclass(frozen=True, slots=True)
class Known:
    """What the straightforward path gave for a signature."""

    fingerprint: str
    launches: int
    foreign_buffers: int
    kernels: tuple[tuple[str, str, int], ...]  # (kernel, op, repeat) per launch, in issue order
    iterations: tuple[int, ...] = ()  # work outside every scope: each launch's loop iteration (its latency steps)


_parent = operator.attrgetter("parent_span_id")
_status = operator.attrgetter("status_code")
_span_id = operator.attrgetter("span_id")


def _resource_id(span: SpanData) -> int:
    return id(span.resource)


def read_step(spans: Sequence[SpanData]) -> PlainStep | None:
    """``spans`` (one trace) as a :class:`PlainStep`, or ``None`` when they are anything else."""
    if len(spans) > MAX_FAST_SPANS:
        return None
    roots = [s for s in spans if s.parent_span_id is None]
    if len(roots) != 1 or len(spans) < 2:
        return None
    root = roots[0]
    root_id, resource = root.span_id, spans[0].resource
    rows: list[tuple[int, int, tuple, tuple, int, int]] = []
    for span in spans:
        if span is root:
            continue
        attributes = span.attributes
        if not attributes:
            return None
        keys, values = zip(*attributes)
        layout = _layouts.get(keys, _layouts)
        if layout is _layouts:
            layout = _layout(keys)
            if len(_layouts) < MAX_SIGNATURES:
                _layouts[keys] = layout
        if layout is None:
            return None
        args = layout.args(values)
        plans = layout.plans
        try:
            plan = plans.get(args, plans)
        except TypeError:  # an argument list that is no tuple
            return None
        if plan is plans:
            plan = _plan(layout, keys, args)
            if len(plans) < MAX_SIGNATURES:
                plans[args] = plan
        if plan is None:
            return None
        ints = plan.ints(values)
        if ints and not set(map(type, ints)) <= _INT:  # the rebuild would read (or refuse) what is no int
            return None
        seq = ints[plan.seq] if plan.seq >= 0 else 0
        rows.append((seq, len(rows), (layout, plan.static(values)), ints[: plan.pointers], span.start_ns, span.end_ns))
    parents = set(map(_parent, spans))
    if parents != {None, root_id} or STATUS_ERROR in set(map(_status, spans)):
        return None
    if len(set(map(_resource_id, spans))) != 1 and any(s.resource != resource for s in spans):
        return None
    ids = set(map(_span_id, spans))
    if len(ids) != len(spans):
        return None
    rooted = root_step(root)
    if rooted is None:
        return None
    trace, name = rooted
    rows.sort()  # as the rebuild orders records: by seq, then span order (the second item: never a tie)
    pointers = [p for row in rows for p in row[3]]
    order = {p: i for i, p in enumerate(dict.fromkeys(pointers))}
    order[0] = -1  # a null array: not a buffer
    pattern = tuple(map(order.__getitem__, pointers))
    signature = (name, tuple(row[2] for row in rows), pattern)
    try:
        hash(signature)
    except TypeError:  # a map-valued attribute (OTLP kvlist): not worth a signature
        return None
    return PlainStep(trace, name, signature, [(row[4], row[5]) for row in rows], list(spans))


def root_step(root: SpanData) -> tuple[TraceData, str] | None:
    """A plain step's root rebuilt alone, and the segment name its records fall in; ``None``: not one."""
    result = rebuild([root])
    if result.malformed or len(result.traces) != 1:
        return None
    trace = next(iter(result.traces.values()))
    steps = occurrences([trace])  # the one step rule, on the root alone: its records fall in this step
    return trace, steps[0].name if steps else NO_SCOPE


class Signatures:
    """Signatures seen and what the straightforward path gave for them (bounded: :data:`MAX_SIGNATURES`)."""

    def __init__(self, max_size: int = MAX_SIGNATURES) -> None:
        self.known: dict[tuple, Known | None] = {}
        self.max_size = max_size
        self.hits = self.misses = 0
        self.launches = 0  # of the remembered signatures, together (bounded by MAX_REMEMBERED_LAUNCHES)

    def get(self, step: PlainStep) -> Known | None:
        known = self.known.get(step.signature)
        if known is None:
            self.misses += 1
        else:
            self.hits += 1
        return known

    def learn(self, step: PlainStep, occurrences: list[Occurrence]) -> None:
        """Remember what the straightforward path gave for ``step`` (when it is the one step expected)."""
        if len(self.known) >= self.max_size or step.signature in self.known:
            return
        if self.launches + len(step.times) > MAX_REMEMBERED_LAUNCHES:
            return
        known = known_of(step.scope, step.times, occurrences)
        if known is not None:
            self.known[step.signature] = known
            self.launches += len(step.times)


def known_of(scope: str, times: Sequence[tuple[int, int]], occurrences: list[Occurrence]) -> Known | None:
    """What the straightforward path gave (``occurrences``) for a plain step of ``scope`` whose launches, in
    the order its signature was read in, have ``times``; ``None`` unless it is the one step expected."""
    if len(occurrences) != 1:
        return None
    occ = occurrences[0]
    if occ.scope != scope or occ.index != 0 or len(occ.records) != len(times):
        return None
    if any((r.start_ns, r.end_ns) != tuple(t) for r, t in zip(occ.records, times)):
        return None  # not the order the signature was read in
    kernels = tuple((r.kernel, str(r.op), r.repeat) for r in occ.records)
    iterations = loop_iterations(occ.records) if occ.scope == NO_SCOPE else ()
    return Known(occ.fingerprint, occ.launches, occ.foreign_buffers, kernels, iterations)
