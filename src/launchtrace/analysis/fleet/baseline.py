"""Fleet baselines: what each group (build, host) normally launches per scope and how long it takes.

:class:`BaselineBuilder` takes traces one at a time (memory grows with groups, scopes, kernels, topologies and
runs, never with traces or steps) and produces a ``launchtrace.v1.Baseline`` message; :func:`merge` combines
two baselines into the one that would have been built from both inputs at once. Merging is exact because every
part is order-free: counts add; histograms are :class:`~.histogram.ExpHistogram` (exact merge); the per-run
step values kept for the run-level test are the earliest :data:`MAX_STEPS_PER_RUN` steps of each run and the
:data:`MAX_RUNS` runs of lowest key hash; the representative of a topology is its occurrence of lowest
(trace id, position). The one bound that is not split-proof: past :data:`MAX_TOPOLOGIES` distinct topologies
in one scope, the lowest fingerprints are kept and the rest only counted (``other_steps``).

A trace is the unit of input: a trace split between two inputs would count as two.

Example::

    from launchtrace.analysis.fleet.baseline import BaselineBuilder, merge
    builder = BaselineBuilder(group_by=("service.version", "host.name"))
    for trace in traces:
        builder.add(trace)
    base = builder.to_proto()
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Sequence

from launchtrace import __version__
from launchtrace.analysis.fleet.fast import Known, PlainStep, Signatures, read_step
from launchtrace.analysis.fleet.occurrences import Occurrence, iteration_times, occurrences_of, run_key, step_times
from launchtrace.analysis.fleet.records import records_into, records_to_proto
from launchtrace.histogram import DEFAULT_MAX_SIZE, ExpHistogram
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.sources.rebuild import TRACE_ID
from launchtrace.sources.stream import TraceStream
from launchtrace.v1 import baseline_pb2 as pb

__all__ = [
    "MAGIC",
    "MAX_RUNS",
    "MAX_STEPS_PER_RUN",
    "MAX_TOPOLOGIES",
    "SCHEMA_VERSION",
    "SPLICE_AT",
    "BaselineBuilder",
    "GroupAcc",
    "LatencyAcc",
    "ScopeAcc",
    "Spliced",
    "merge",
]

MAGIC = "launchtrace.baseline"
SCHEMA_VERSION = 1
MAX_RUNS = 64
MAX_STEPS_PER_RUN = 256
MAX_TOPOLOGIES = 256
SPLICE_AT = 4096
"""Records of a representative beyond which :meth:`BaselineBuilder.to_proto` leaves it out of the message when
asked to, for the writer to splice in as bytes (``launchtrace.baselines.write_baseline``): one step of a million
launches was 1.3 GB of messages."""
_SLACK = 32  # step values a run may hold beyond max_steps before they are cut back


Spliced = dict[tuple[int, ...], Sequence[LaunchRecord]]
"""Representatives left out of a baseline message, by (group, scope, topology) index (see ``to_proto``)."""


def key_hash(run: str) -> int:
    """What chooses the runs whose step values are kept: the first 8 bytes of SHA-256 of the run key."""
    return int.from_bytes(hashlib.sha256(run.encode()).digest()[:8], "big")


@dataclasses.dataclass
class RunAcc:
    """One run's steps: how many, and (while the run is among the kept ones) the earliest step values."""

    hash: int
    steps: int = 0
    values: list[tuple[int, int]] | None = dataclasses.field(default_factory=list)  # (start, ns); None: dropped


class LatencyAcc:
    """A duration distribution with sample / step / run counts and per-run step values (see the module doc)."""

    def __init__(self, max_runs: int = MAX_RUNS, max_steps: int = MAX_STEPS_PER_RUN) -> None:
        self.histogram = ExpHistogram(DEFAULT_MAX_SIZE)
        self.samples = 0
        self.steps = 0
        self.runs: dict[str, RunAcc] = {}
        self.max_runs, self.max_steps = max_runs, max_steps
        self._cutoff: int | None = None  # hashes above it are known not to be kept

    def add_step(self, run: str, start_ns: int, step_value: int, samples: Iterable[tuple[int, int]]) -> None:
        """One step of ``run``: its aggregate ``step_value`` and ``(duration, count)`` samples for the histogram."""
        for value, count in samples:
            self.histogram.add(value, count)
            self.samples += count
        self._step(run, start_ns, step_value)

    def add_one(self, run: str, start_ns: int, value: int) -> None:
        """``add_step(run, start_ns, value, [(value, 1)])``, without the list: most steps' values are one sample."""
        self.histogram.add(value, 1)
        self.samples += 1
        self._step(run, start_ns, value)

    def _step(self, run: str, start_ns: int, step_value: int) -> None:
        self.steps += 1
        acc = self.runs.get(run)
        if acc is None:
            h = key_hash(run)
            acc = self.runs[run] = RunAcc(h, values=None if self._cutoff is not None and h > self._cutoff else [])
            self._prune()
        acc.steps += 1
        if acc.values is not None:
            acc.values.append((start_ns, step_value))
            if len(acc.values) > self.max_steps + _SLACK:  # keep the earliest max_steps (sorted now and then)
                acc.values = sorted(acc.values)[: self.max_steps]

    def _prune(self) -> None:
        kept = [a for a in self.runs.values() if a.values is not None]
        if len(kept) <= 2 * self.max_runs:
            return
        kept.sort(key=lambda a: a.hash)
        for a in kept[self.max_runs :]:
            a.values = None
        self._cutoff = kept[self.max_runs - 1].hash

    def finish(self) -> None:
        kept = sorted((a for a in self.runs.values() if a.values is not None), key=lambda a: a.hash)
        for a in kept[self.max_runs :]:
            a.values = None
        for a in kept[: self.max_runs]:
            a.values = sorted(a.values or [])[: self.max_steps]

    def merge(self, other: LatencyAcc) -> None:
        self.histogram.merge(other.histogram)
        self.samples += other.samples
        self.steps += other.steps
        for run, b in other.runs.items():
            a = self.runs.get(run)
            if a is None:
                self.runs[run] = RunAcc(b.hash, b.steps, None if b.values is None else list(b.values))
                continue
            a.steps += b.steps
            a.values = None if a.values is None or b.values is None else a.values + b.values
        self.finish()

    def run_values(self) -> dict[str, list[int]]:
        """Kept runs' step values in step order, by run key."""
        self.finish()
        return {run: [v for _, v in a.values] for run, a in sorted(self.runs.items()) if a.values}

    # -- proto
    def to_proto(self, msg: pb.Latency | None = None) -> pb.Latency:
        """The message; with ``msg`` (a parent's empty field), filled in place: no copy into the parent."""
        self.finish()
        h = self.histogram
        if msg is None:
            msg = pb.Latency()
        msg.SetInParent()  # present even when every field is zero, as a copied-in message is
        msg.samples, msg.steps, msg.runs = self.samples, self.steps, len(self.runs)
        hist = msg.histogram
        hist.scale, hist.count, hist.sum, hist.min, hist.max, hist.zero_count = (
            h.scale,
            h.count,
            h.sum,
            h.min,
            h.max,
            h.zero_count,
        )
        if h.buckets:
            lo, hi = min(h.buckets), max(h.buckets)
            hist.offset = lo
            hist.bucket_counts.extend(h.buckets.get(i, 0) for i in range(lo, hi + 1))
        for run, a in sorted(self.runs.items(), key=lambda item: (item[1].hash, item[0])):
            entry = msg.per_run.add(run=run, key_hash=a.hash, steps=a.steps)
            for start, value in a.values or ():
                entry.values.add(start_unix_nano=start, value=value)
        return msg

    @classmethod
    def from_proto(cls, msg: pb.Latency, limits: pb.Limits) -> LatencyAcc:
        acc = cls(limits.max_runs or MAX_RUNS, limits.max_steps_per_run or MAX_STEPS_PER_RUN)
        h, m = acc.histogram, msg.histogram
        h.max_size = limits.max_histogram_buckets or DEFAULT_MAX_SIZE
        h.scale, h.count, h.sum, h.min, h.max, h.zero_count = m.scale, m.count, m.sum, m.min, m.max, m.zero_count
        h.buckets = {m.offset + i: n for i, n in enumerate(m.bucket_counts) if n}
        h._fit()  # sets the index range the buckets span
        acc.samples, acc.steps = msg.samples, msg.steps
        for entry in msg.per_run:
            values = [(v.start_unix_nano, v.value) for v in entry.values]
            acc.runs[entry.run] = RunAcc(entry.key_hash, entry.steps, values if values else None)
        return acc


@dataclasses.dataclass
class TopologyAcc:
    count: int
    launches: int
    foreign_buffers: int
    rep_key: tuple[str, int]
    messages: list[pb.Record]  # the representative's records as messages (while `records` is None)
    records: Sequence[LaunchRecord] | None = None  # the representative's records not converted yet

    @property
    def representative(self) -> list[pb.Record]:
        """The representative's records as messages, made on first use: most representatives are replaced by one
        of a lower trace id before the baseline is written, and rebuilding and converting each as it came was
        most of ``baseline build``'s straightforward path."""
        if self.records is not None:
            self.messages, self.records = records_to_proto(self.records), None
        return self.messages


class ScopeAcc:
    """Everything a baseline keeps about one scope of one group."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps = 0
        self.other_steps = 0
        self.topologies: dict[str, TopologyAcc] = {}
        self.duration = LatencyAcc()
        self.kernels: dict[tuple[str, str], LatencyAcc] = {}
        self.positions: dict[tuple[int, str], LatencyAcc] = {}

    def add(self, occ: Occurrence) -> None:
        self.steps += 1
        topo = self.topologies.get(occ.fingerprint)
        rep_key = (occ.trace_id, occ.index)
        if topo is None:
            topo = TopologyAcc(0, occ.launches, occ.foreign_buffers, rep_key, [], occ.records)
            self.topologies[occ.fingerprint] = topo
            self._cap()
        elif rep_key < topo.rep_key:
            topo.rep_key, topo.messages, topo.records = rep_key, [], occ.records
        if occ.fingerprint in self.topologies:
            topo.count += 1
            topo.foreign_buffers = max(topo.foreign_buffers, occ.foreign_buffers)
        else:  # beyond MAX_TOPOLOGIES: counted only
            self.other_steps += 1
        if occ.parts:  # work outside every scope: each loop iteration is a latency step (its topology is one)
            for part in occ.parts:
                self.add_times(occ.run, *part)
        else:
            self.add_times(occ.run, occ.start_ns, occ.duration_ns, occ.kernel_ns, occ.kernel_samples, occ.position_ns)

    def add_times(
        self,
        run: str,
        start: int,
        duration: int,
        kernel_ns: dict[tuple[str, str], int],
        kernel_samples: dict[tuple[str, str], list[tuple[int, int]]],
        position_ns: dict[tuple[int, str], int],
    ) -> None:
        """The latency part of :meth:`add` (:func:`~.occurrences.step_times`' figures of one step)."""
        self.duration.add_one(run, start, duration)
        kernels, positions = self.kernels, self.positions
        for key, total in kernel_ns.items():
            acc = kernels.get(key) or kernels.setdefault(key, LatencyAcc())
            acc.add_step(run, start, total, kernel_samples[key])
        for key, ns in position_ns.items():
            acc = positions.get(key)
            if acc is None:
                acc = positions[key] = LatencyAcc()
            acc.add_one(run, start, ns)

    @staticmethod
    def latency(table: dict, key: tuple) -> LatencyAcc:
        """``table[key]`` (kernels or positions), made when missing."""
        acc = table.get(key)
        if acc is None:
            acc = table[key] = LatencyAcc()
        return acc

    def _cap(self) -> None:
        if len(self.topologies) <= MAX_TOPOLOGIES:
            return
        for fp in sorted(self.topologies)[MAX_TOPOLOGIES:]:
            self.other_steps += self.topologies.pop(fp).count

    def merge(self, other: ScopeAcc) -> None:
        self.steps += other.steps
        self.other_steps += other.other_steps
        for fp, b in other.topologies.items():
            a = self.topologies.get(fp)
            if a is None:
                self.topologies[fp] = dataclasses.replace(b, messages=list(b.representative))
            else:
                a.count += b.count
                a.foreign_buffers = max(a.foreign_buffers, b.foreign_buffers)
                if b.rep_key < a.rep_key:
                    a.rep_key, a.messages, a.records = b.rep_key, list(b.representative), None
        self._cap()
        self.duration.merge(other.duration)
        for mine, theirs in ((self.kernels, other.kernels), (self.positions, other.positions)):
            for key, b in theirs.items():
                if key in mine:
                    mine[key].merge(b)
                else:
                    mine[key] = b

    def to_proto(
        self, msg: pb.Scope | None = None, spliced: Spliced | None = None, at: tuple[int, ...] = ()
    ) -> pb.Scope:
        """The message; with ``msg`` (a parent's new entry), filled in place (see :meth:`LatencyAcc.to_proto`);
        with ``spliced``, representatives of more than :data:`SPLICE_AT` records are left out and put there
        under ``at`` + the topology's index (see :meth:`BaselineBuilder.to_proto`)."""
        if msg is None:
            msg = pb.Scope()
        msg.name, msg.steps, msg.other_steps = self.name, self.steps, self.other_steps
        for index, (fp, t) in enumerate(sorted(self.topologies.items())):
            topo = msg.topologies.add(
                fingerprint=fp,
                count=t.count,
                launches=t.launches,
                foreign_buffers=t.foreign_buffers,
                exemplar_trace_id=t.rep_key[0],
                exemplar_index=t.rep_key[1],
            )
            if t.records is not None and spliced is not None and len(t.records) > SPLICE_AT:
                spliced[(*at, index)] = t.records
            elif t.records is not None:  # made in place, never as messages apart (see records_into)
                records_into(topo.representative, t.records)
            else:
                topo.representative.extend(t.messages)
        self.duration.to_proto(msg.duration)
        for (kernel, op), acc in sorted(self.kernels.items()):
            acc.to_proto(msg.kernels.add(kernel=kernel, op=op).latency)
        for (pos, kernel), acc in sorted(self.positions.items()):
            acc.to_proto(msg.positions.add(position=pos, kernel=kernel).latency)
        return msg

    @classmethod
    def from_proto(cls, msg: pb.Scope, limits: pb.Limits) -> ScopeAcc:
        acc = cls(msg.name)
        acc.steps, acc.other_steps = msg.steps, msg.other_steps
        for t in msg.topologies:
            rep = list(t.representative)
            key = (t.exemplar_trace_id, t.exemplar_index)
            acc.topologies[t.fingerprint] = TopologyAcc(t.count, t.launches, t.foreign_buffers, key, rep)
        acc.duration = LatencyAcc.from_proto(msg.duration, limits)
        for k in msg.kernels:
            acc.kernels[(k.kernel, k.op)] = LatencyAcc.from_proto(k.latency, limits)
        for p in msg.positions:
            acc.positions[(p.position, p.kernel)] = LatencyAcc.from_proto(p.latency, limits)
        return acc


class GroupAcc:
    """One group's scopes and counts."""

    def __init__(self, values: tuple[str, ...], service: str = "") -> None:
        self.values = values
        self.service = service
        self.traces = 0
        self.runs: set[str] = set()
        self.scopes: dict[str, ScopeAcc] = {}

    def add(self, occ: Occurrence) -> None:
        self.runs.add(occ.run)
        self.service = self.service or occ.service
        scope = self.scopes.get(occ.scope) or self.scopes.setdefault(occ.scope, ScopeAcc(occ.scope))
        scope.add(occ)

    def merge(self, other: GroupAcc) -> None:
        self.traces += other.traces
        self.runs |= other.runs
        self.service = self.service or other.service
        for name, b in other.scopes.items():
            if name in self.scopes:
                self.scopes[name].merge(b)
            else:
                self.scopes[name] = b

    def to_proto(
        self, msg: pb.Group | None = None, spliced: Spliced | None = None, at: tuple[int, ...] = ()
    ) -> pb.Group:
        """The message; with ``msg`` (a parent's new entry), filled in place (see :meth:`LatencyAcc.to_proto`)."""
        if msg is None:
            msg = pb.Group()
        msg.values.extend(self.values)
        msg.service_name, msg.traces = self.service, self.traces
        msg.run_keys.extend(sorted(self.runs))
        msg.runs = len(self.runs)
        for index, name in enumerate(sorted(self.scopes)):
            self.scopes[name].to_proto(msg.scopes.add(), spliced, (*at, index))
        return msg

    @classmethod
    def from_proto(cls, msg: pb.Group, limits: pb.Limits) -> GroupAcc:
        acc = cls(tuple(msg.values), msg.service_name)
        acc.traces = msg.traces
        acc.runs = set(msg.run_keys)
        acc.scopes = {s.name: ScopeAcc.from_proto(s, limits) for s in msg.scopes}
        return acc


class BaselineBuilder:
    """Builds a baseline from traces (see the module docstring). ``scalars=False`` leaves scalar arguments out
    of the topology (programs that pass a changing time or step number)."""

    def __init__(self, group_by: Sequence[str], *, scalars: bool = True) -> None:
        if not group_by:
            raise ValueError("group_by must name at least one resource attribute")
        self.group_by = tuple(group_by)
        self.scalars = scalars
        self.groups: dict[tuple[str, ...], GroupAcc] = {}
        self.sources: list[pb.Source] = []
        self.start_ns = 0
        self.end_ns = 0
        self._signatures = Signatures()

    def add(self, trace: TraceData, step: PlainStep | None = None) -> list[Occurrence]:
        """Add one trace (one outermost scope occurrence of one run); ``step``: the same trace as read by the
        fast path, to remember what it gave. Returns its occurrences."""
        occurrences = list(occurrences_of(trace, self.group_by, scalars=self.scalars))
        group = None
        for occ in occurrences:
            group = self.groups.get(occ.group) or self.groups.setdefault(occ.group, GroupAcc(occ.group))
            group.add(occ)
            self._window(occ.start_ns, occ.start_ns + occ.duration_ns)
        if group is not None:
            group.traces += 1
        if step is not None:
            self._signatures.learn(step, occurrences)
        return occurrences

    def add_stream(self, stream: TraceStream, *, fast: bool = True) -> None:
        """Add every trace of ``stream``: plain steps whose signature is known without rebuilding their
        records (:mod:`.fast`; ``fast=False``: every trace rebuilt), the rest rebuilt. Same baseline either way."""
        for spans in stream.span_lists(wide=True):
            step = read_step(spans) if fast and type(spans) is list else None  # a WideTrace: rebuilt
            if step is not None:
                known = self._signatures.get(step)
                if known is not None and self._add_known(step, known):
                    stream.count_trace()
                    continue
            for trace in stream.rebuilt(spans):
                self.add(trace, step)

    def fast_counts(self) -> tuple[int, int]:
        """Traces the fast paths took (``hits``) and those they read but had to rebuild (``misses``)."""
        return self._signatures.hits, self._signatures.misses

    def _add_known(self, step: PlainStep, known: Known) -> bool:
        """Add a plain step of known signature; ``False`` (nothing added) when the straightforward path must take
        it: its group, scope or topology is new here, or it would become the topology's representative."""
        attrs = step.trace.attributes
        key = tuple(str(attrs.get(k, "")) for k in self.group_by)
        group = self.groups.get(key)
        scope = group.scopes.get(step.scope) if group is not None else None
        topo = scope.topologies.get(known.fingerprint) if scope is not None else None
        trace_id = str(attrs.get(TRACE_ID, ""))
        if topo is None or (trace_id, 0) < topo.rep_key:
            return False
        launches = [(k, op, repeat, s, e) for (k, op, repeat), (s, e) in zip(known.kernels, step.times)]
        start, duration, kernel_ns, kernel_samples, position_ns = step_times(launches)
        parts = iteration_times(launches, known.iterations) if known.iterations else ()
        occ = Occurrence(
            group=key,
            service=str(attrs.get("service.name", "")),
            run=run_key(attrs),
            trace_id=trace_id,
            index=0,
            scope=step.scope,
            start_ns=start,
            duration_ns=duration,
            fingerprint=known.fingerprint,
            launches=known.launches,
            foreign_buffers=known.foreign_buffers,
            records=(),  # never read: the topology's representative is not replaced (checked above)
            kernel_ns=kernel_ns,
            kernel_samples=kernel_samples,
            position_ns=position_ns,
            parts=parts,
        )
        group.add(occ)
        self._window(start, start + duration)
        group.traces += 1
        return True

    def _window(self, start: int, end: int) -> None:
        if start > 0:
            self.start_ns = start if not self.start_ns else min(self.start_ns, start)
        self.end_ns = max(self.end_ns, end)

    def add_source(self, location: str, kind: str, traces: int, spans: int) -> None:
        self.sources.append(pb.Source(location=location, kind=kind, traces=traces, spans=spans))

    def to_proto(self, spliced: Spliced | None = None) -> pb.Baseline:
        """The baseline. With ``spliced`` (an empty dict), a representative of more than :data:`SPLICE_AT`
        records is left out of its ``Topology`` and put in ``spliced`` under (group, scope, topology) index, for
        ``launchtrace.baselines.write_baseline`` to write in its place: the file is the same to the byte."""
        msg = pb.Baseline(magic=MAGIC, schema_version=SCHEMA_VERSION, launchtrace_version=__version__)
        msg.window.start_unix_nano, msg.window.end_unix_nano = self.start_ns, self.end_ns
        msg.sources.extend(self.sources)
        msg.group_by.extend(self.group_by)
        msg.limits.CopyFrom(
            pb.Limits(
                max_runs=MAX_RUNS,
                max_steps_per_run=MAX_STEPS_PER_RUN,
                max_histogram_buckets=DEFAULT_MAX_SIZE,
                ignore_scalars=not self.scalars,
            )
        )
        for index, k in enumerate(sorted(self.groups)):  # each filled in place: apart and copied in cost twice
            self.groups[k].to_proto(msg.groups.add(), spliced, (index,))
        return msg

    @classmethod
    def from_proto(cls, msg: pb.Baseline) -> BaselineBuilder:
        builder = cls(tuple(msg.group_by), scalars=not msg.limits.ignore_scalars)
        builder.groups = {tuple(g.values): GroupAcc.from_proto(g, msg.limits) for g in msg.groups}
        builder.sources = list(msg.sources)
        builder.start_ns, builder.end_ns = msg.window.start_unix_nano, msg.window.end_unix_nano
        return builder


def merge(a: pb.Baseline, b: pb.Baseline) -> pb.Baseline:
    """The baseline of both inputs at once. Raises ``ValueError`` when they were grouped or built differently."""
    if tuple(a.group_by) != tuple(b.group_by):
        raise ValueError(f"grouped differently: {','.join(a.group_by)} vs {','.join(b.group_by)}")
    if a.limits != b.limits:
        raise ValueError("built with different limits or options (ignore_scalars)")
    left, right = BaselineBuilder.from_proto(a), BaselineBuilder.from_proto(b)
    for key, group in right.groups.items():
        if key in left.groups:
            left.groups[key].merge(group)
        else:
            left.groups[key] = group
    left.sources.extend(right.sources)
    if right.start_ns:
        left._window(right.start_ns, right.end_ns)
    return left.to_proto()
