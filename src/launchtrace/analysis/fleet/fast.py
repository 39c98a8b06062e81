"""The fleet baseline's fast path: a step's figures straight from its spans, without rebuilding its records.

A baseline needs, per step, only each launch's kernel, op, times and position plus the step's topology
fingerprint, launch count and foreign-buffer count. The last three depend on nothing that changes from one
repetition of a step to the next except pointers (compared by the order they first appear in) and a few
per-launch counters. So a step is reduced to its *signature*: every record span's attributes, in issue order,
less :data:`VOLATILE` (sequence number, thread id, device times) and less the raw pointers, plus the pattern
in which its pointers repeat. The first step with a new signature is rebuilt the straightforward way
(:func:`launchtrace.rebuild.rebuild`, :func:`~.occurrences.occurrences_of`) and what it gave is remembered;
later steps with that signature only read their spans' times. Two steps with equal signatures have equal
records but for pointers, sequence numbers, thread ids and times, so equal fingerprints: the fast path
cannot give another result, only the same one sooner (``tests/test_fleet_fast.py`` builds baselines of real
exported files both ways and compares them byte for byte).

A trace takes the fast path only when it is one plain step: one root scope span and under it only record
spans (no folded summaries, nested scopes, errors, foreign spans, duplicate ids), with integer counters
and pointers. Anything else, and any step whose representative a baseline must (re)take, goes the
straightforward way. At most :data:`MAX_SIGNATURES` signatures are remembered (memory stays bounded);
past that, new ones are rebuilt every time.

Example::

    signatures = Signatures(scalars=True)
    step = read_step(spans)            # None: not a plain step
    known = signatures.get(step)       # None: rebuild it (and signatures.learn(step, occurrence))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from launchtrace import conventions as C
from launchtrace.analysis.diff import NO_SCOPE
from launchtrace.analysis.fleet.occurrences import Occurrence
from launchtrace.model import TraceData
from launchtrace.rebuild import rebuild
from launchtrace.spans import STATUS_ERROR, SpanData

__all__ = ["MAX_SIGNATURES", "VOLATILE", "Known", "PlainStep", "Signatures", "read_step"]

MAX_SIGNATURES = 4096
VOLATILE = frozenset((C.SEQ, C.THREAD_ID, C.DEVICE_TIME_START, C.DEVICE_TIME_END))
"""Record-span attributes that a baseline never reads beyond their being integers."""
_REFUSE = frozenset((C.FOLD_COUNT, C.SCOPE_KIND, C.SCOPE_JOINED))
_pointer_names: dict[tuple, tuple[str, ...]] = {}


def _pointers_of(params: Any, array_keys: Any, scalar_keys: Any) -> tuple[str, ...]:
    """The pointer attribute names of a launch's array arguments (labelled as the exporter and rebuild label them)."""
    key = (params, array_keys, scalar_keys)
    names = _pointer_names.get(key)
    if names is None:
        labels, _ = C.arg_labels(tuple(params), tuple(array_keys), tuple(scalar_keys))
        names = tuple(C.arg_attr(label, "ptr") for label in labels)
        if len(_pointer_names) < MAX_SIGNATURES:
            _pointer_names[key] = names
    return names


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


def read_step(spans: Sequence[SpanData]) -> PlainStep | None:
    """``spans`` (one trace) as a :class:`PlainStep`, or ``None`` when they are anything else."""
    roots = [s for s in spans if s.parent_span_id is None]
    if len(roots) != 1 or len(spans) < 2:
        return None
    root = roots[0]
    root_id, resource = root.span_id, spans[0].resource
    rows: list[tuple[Any, int, tuple, list[int], int, int]] = []
    ids = set()
    for span in spans:
        ids.add(span.span_id)
        if span is root:
            continue
        if span.parent_span_id != root_id or span.status_code == STATUS_ERROR or span.resource != resource:
            return None
        d = dict(span.attributes)
        if C.OP not in d or not d.keys().isdisjoint(_REFUSE):
            return None
        seq = d.get(C.SEQ, 0)
        for name in VOLATILE:  # read as integers only: the rebuild would refuse anything else
            if type(d.pop(name, 0)) is not int:
                return None
        try:
            names = _pointers_of(d.get(C.PARAMS, ()), d.get(C.ARRAY_KEYS, ()), d.get(C.SCALAR_KEYS, ()))
        except (TypeError, ValueError, KeyError):
            return None
        pointers = [d.pop(name, 0) for name in names]
        if any(type(p) is not int for p in pointers):
            return None
        rows.append((seq, len(rows), tuple(d.items()), pointers, span.start_ns, span.end_ns))
    if len(ids) != len(spans):
        return None
    result = rebuild([root])
    if result.malformed or len(result.traces) != 1:
        return None
    trace = next(iter(result.traces.values()))
    if resource != root.resource:
        return None
    scope = next(iter(trace.scopes.values()), None)
    rows.sort(key=lambda row: (row[0], row[1]))  # as the rebuild orders records: by seq, then span order
    order: dict[int, int] = {}
    pattern: list[int] = []
    for row in rows:
        for ptr in row[3]:
            pattern.append(-1 if not ptr else order.setdefault(ptr, len(order)))
    name = NO_SCOPE if scope is None or scope.internal else scope.name
    signature = (name, tuple(row[2] for row in rows), tuple(pattern))
    try:
        hash(signature)
    except TypeError:  # a map-valued attribute (OTLP kvlist): not worth a signature
        return None
    return PlainStep(trace, name, signature, [(row[4], row[5]) for row in rows], list(spans))


class Signatures:
    """Signatures seen and what the straightforward path gave for them (bounded: :data:`MAX_SIGNATURES`)."""

    def __init__(self, max_size: int = MAX_SIGNATURES) -> None:
        self.known: dict[tuple, Known | None] = {}
        self.max_size = max_size
        self.hits = self.misses = 0

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
        if len(occurrences) != 1:
            return
        occ = occurrences[0]
        if occ.scope != step.scope or occ.index != 0 or len(occ.records) != len(step.times):
            return
        if any((r.start_ns, r.end_ns) != times for r, times in zip(occ.records, step.times)):
            return  # not the order the signature was read in
        kernels = tuple((r.kernel, str(r.op), r.repeat) for r in occ.records)
        self.known[step.signature] = Known(occ.fingerprint, occ.launches, occ.foreign_buffers, kernels)
