"""A trace too wide to hold as spans: its launch spans read into records as they arrive, for the streamed commands.

A stream (:class:`~launchtrace.sources.stream.TraceStream`) holds a trace's spans until its root is read, and the
root of a step ends last. One step of a million launches was a million spans held (about 810 bytes each) and then
a million records (about 450 bytes each) beside them: ``summary`` and ``baseline build`` needed gigabytes (issue 25).
Once an open trace holds more than :data:`WIDE_AT` spans, the stream moves it into a :class:`WideTrace`: from then
on each *plain launch span* (``launchtrace.op`` set; no fold summary, no scope) is read into its record at once and
let go; what the rebuild still needs of it is kept in arrays (its span id, parent, whether it is joined to the
application's span, a hash of the span for telling identical duplicates from different ones): about 21 bytes.
Every other span (scopes, fold summaries, foreign spans) is kept as it is. The records get their scopes when the
trace is complete (a launch's scope depends only on the spans above it), in the rebuild's own code
(:class:`~launchtrace.sources.rebuild.TraceRebuilder`), and come out in the order the rebuild gives them.

With ``spill=True`` (a reader that only iterates a trace's records: ``summary``), the records are written out
(:mod:`launchtrace.sources.spill`) each time :data:`~launchtrace.sources.spill.SPILL_AT` of them are held, as a
run sorted by sequence number (ties in reading order), and the rebuilt trace's ``records`` is a
:class:`_MergedRecords`: the runs (and the raw spans' records) merged by the rebuild's key each time it is
iterated, each launch given its scope as it is read. What stays per launch is the 21 bytes above until the
rebuild, then its parent index and joined flag (5 bytes) for as long as the records are read.

So :meth:`WideTrace.rebuild` gives the trace that :func:`~launchtrace.sources.rebuild.rebuild` of its spans gives,
after the same structure check the stream runs (duplicate span ids: the first kept; parent cycles skipped; the
problems logged as :func:`~launchtrace.sources.structure.check_structure` words them): ``tests/test_wide.py``
checks both on real files with every trace made wide, and with duplicates and cycles mixed in. Two things are not
the same: the rebuild's warnings (no streamed reader shows them) are not made, and an identical duplicate of a
launch span is told from a different one by a 64-bit hash of the span instead of by comparing the spans (a
different one with an equal hash would be dropped without a logged problem; it is dropped either way). A trace
that needs the whole check (no root, or a span id twice) holds a small stand-in per launch while it runs.

Example::

    wide = WideTrace(trace_id, spans, log)     # the spans read so far; problems go to log
    wide.extend(more_spans)
    result = wide.rebuild()                    # a RebuildResult of the one trace
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
import operator
from array import array
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from launchtrace import conventions as C
from launchtrace.fastinit import slot_copier
from launchtrace.gcpause import collector_paused
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.sources import spill as _spill
from launchtrace.sources.rebuild import TRACE_ID, RebuildResult, TraceRebuilder, records_in_order, span_error
from launchtrace.sources.records import record_from_attributes as _record
from launchtrace.sources.records import shared_scalars
from launchtrace.sources.report import ProblemLog
from launchtrace.sources.spill import Chunk, SpilledRecords, SpillFile, merged
from launchtrace.spans import STATUS_ERROR, Attributes, SpanData

__all__ = ["WIDE_AT", "WideTrace"]

_log = logging.getLogger(__name__)

WIDE_AT = 4096
"""Spans of one open trace beyond which it is held as a :class:`WideTrace` (a step of launchtrace's exporter has
tens to hundreds; below this, a trace's spans cost at most a few MB)."""

_with_scope = slot_copier(LaunchRecord, ("scope_id",))
_with_scalars = slot_copier(LaunchRecord, ("scalars",))
_OTHER_FIELDS = operator.attrgetter(*(f.name for f in dataclasses.fields(SpanData) if f.name != "resource"))


def _hash(value: object) -> int:
    try:
        return hash(value)
    except TypeError:
        return hash(repr(value))


_OP, _FOLD_COUNT, _SCOPE_KIND, _SCOPE_JOINED = C.OP, C.FOLD_COUNT, C.SCOPE_KIND, C.SCOPE_JOINED
_item_seq = lambda item: item[1].seq  # noqa: E731
_start = operator.attrgetter("start_ns")
_seq_of = operator.attrgetter("seq")
_NEVER = 2**63
_SEARCHES = 64
_BUCKETS = 251


class WideTrace:
    """One trace's spans as they are read (see the module docstring). ``len()``: the spans taken."""

    def __init__(
        self, trace_id: bytes, spans: Iterable[SpanData] = (), log: ProblemLog | None = None, *, spill: bool = False
    ) -> None:
        self.trace_id = trace_id
        self.spills = spill  # write the records out past SPILL_AT (the rebuilt trace's records then no list)
        self.log = log  # where the structure check's problems go (the stream's)
        self.taken = 0
        self.has_root = False
        self.raw: list[SpanData] = []  # the spans kept as they are, in reading order
        self.raw_at = array("q")  # each one's place in the reading order
        # per launch span read into its record: the record (scope not set; None: unreadable), its id, a hash of
        # the span, its parent (an index into `parent_ids`), and whether it is joined to the application's span
        self.records: list[LaunchRecord | None] = []  # those not written out yet (the later ones)
        self.spill: SpillFile | None = None  # past SPILL_AT records: the earlier ones, in runs sorted by seq
        self.runs: list[list[Chunk]] = []
        self.run_seqs: list[tuple[int, int]] = []  # each run's first and last sequence number
        self.run_levels: list[int] = []  # each run's level: how many merges made it (_compact)
        self.first_start = _NEVER  # the lowest non-zero start of the records written out
        self.unreadable = array("q")  # the launches whose records could not be read (None), when written out
        self.ids = bytearray()  # 8 bytes each, big-endian
        self.digests = array("q")
        self.parents = array("I")
        self.joined = bytearray()
        self.parent_ids: list[bytes | None] = []
        self._parent_index: dict[bytes | None, int] = {}
        self.resources: list[tuple[int, Attributes]] = []  # (launch index, resource) where it changes
        self._resource_hash = 0  # of the last one
        self.extend(spans)

    def __len__(self) -> int:
        return self.taken

    def extend(self, spans: Iterable[SpanData]) -> None:
        # the records all stay alive until the trace is complete: the collector's runs would find nothing, as in
        # the rebuild (collector_paused); the loop's names are bound once a chunk (a few hundred spans)
        records, ids, digests, parents, joined = self.records, self.ids, self.digests, self.parents, self.joined
        parent_index, resources = self._parent_index, self.resources
        with collector_paused():
            for span in spans:
                self.taken += 1
                parent = span.parent_span_id
                if parent is None:
                    self.has_root = True
                d = dict(span.attributes)
                span_id = span.span_id
                if _OP not in d or _FOLD_COUNT in d or _SCOPE_KIND in d or len(span_id) != 8:
                    self.raw.append(span)
                    self.raw_at.append(self.taken - 1)
                    continue
                error = None if span.status_code != STATUS_ERROR else span_error(span)
                try:
                    rec: LaunchRecord | None = _record(d, span.start_ns, span.end_ns, error, None)
                except (ValueError, TypeError, KeyError, OverflowError):  # as the rebuild counts it: ours, no record
                    rec = None
                else:
                    scalars = rec.scalars
                    shared = shared_scalars(scalars)
                    if shared is not scalars:  # an earlier launch's, read exactly alike: 340 bytes less
                        rec = _with_scalars(rec, shared)
                resource = span.resource
                if not resources or resources[-1][1] is not resource:
                    resources.append((len(digests), resource))
                    self._resource_hash = _hash(resource)
                try:  # what SpanData's == compares; the resource (one object for many spans) hashed once
                    digest = hash((_OTHER_FIELDS(span), self._resource_hash))
                except TypeError:  # a map-valued attribute
                    digest = hash(repr(span))
                index = parent_index.get(parent)
                if index is None:
                    index = parent_index[parent] = len(self.parent_ids)
                    self.parent_ids.append(parent)
                records.append(rec)
                ids += span_id
                digests.append(digest)
                parents.append(index)
                joined.append(1 if d.get(_SCOPE_JOINED) else 0)
                if self.spills and len(records) >= _spill.SPILL_AT:
                    self._spill_records()

    @property
    def launches(self) -> int:
        """The launch spans read into records so far."""
        return len(self.digests)

    def _spill_records(self) -> None:
        """Write the records held out as one run sorted by sequence number (ties in reading order)."""
        if self.spill is None:
            spill = SpillFile()
            try:
                spill.open()
            except OSError as exc:  # no temporary file: the records stay in memory, as without spilling
                self.spills = False
                _log.warning("no temporary file for a wide trace's records (%s): they are held in memory", exc)
                return
            self.spill = spill
        records = self.records
        first = self.launches - len(records)
        items = []
        for i, rec in enumerate(records, first):
            if rec is None:
                self.unreadable.append(i)
            else:
                items.append((i, rec))
        items.sort(key=_item_seq)  # stable
        numbers = [i for i, _ in items]
        ordered = [rec for _, rec in items]
        del items
        chunks = self.spill.write_all(numbers, ordered)
        if ordered:
            self.runs.append(chunks)
            self.run_seqs.append((ordered[0].seq, ordered[-1].seq))
            self.run_levels.append(0)
            self.first_start = min(self.first_start, min(filter(None, map(_start, ordered)), default=_NEVER))
        records.clear()
        self._compact()

    def _compact(self) -> None:
        """Past :data:`~launchtrace.sources.spill.MAX_RUNS` runs of one level, those runs as one of the next
        (one after another where each begins after the one before ends; else merged by ``(seq, reading
        order)`` into a new run in the file): a reader merges fewer than ``MAX_RUNS`` runs a level, so it holds
        as many chunks, however many records were written (each merged record is written once a level)."""
        most = _spill.MAX_RUNS
        levels = self.run_levels
        while len(levels) >= most and len(set(levels[-most:])) == 1:
            runs, seqs, level = self.runs[-most:], self.run_seqs[-most:], levels[-1] + 1
            if all(a[1] <= b[0] for a, b in itertools.pairwise(seqs)):
                run = [chunk for one in runs for chunk in one]
            else:
                run = self._merged_run(runs)
            del self.runs[-most:], self.run_seqs[-most:], levels[-most:]
            self.runs.append(run)
            self.run_seqs.append((min(s[0] for s in seqs), max(s[1] for s in seqs)))
            levels.append(level)

    def _merged_run(self, runs: list[list[Chunk]]) -> list[Chunk]:
        """``runs`` merged into one new run of the file (the old ones' chunks are left where they are)."""
        assert self.spill is not None
        spill = self.spill

        def pairs(run: list[Chunk]) -> Iterator[tuple[tuple[int, int], tuple[int, LaunchRecord]]]:
            for chunk in run:
                numbers, records = spill.read(chunk)
                yield from zip(zip(map(_seq_of, records), numbers), zip(numbers, records))

        out: list[Chunk] = []
        numbers: list[int] = []
        records: list[LaunchRecord] = []
        for _, (i, rec) in merged(list(map(pairs, runs))):
            numbers.append(i)
            records.append(rec)
            if len(records) >= _spill.CHUNK:
                out.append(spill.write(numbers, records))
                numbers, records = [], []
        if records:
            out.append(spill.write(numbers, records))
        return out

    # -- when the trace is complete
    def rebuild(self, *, expand: bool = True) -> RebuildResult:
        """The trace rebuilt, after the stream's structure check (its problems added to ``log``)."""
        plan = self._checked(self.log)
        warnings: list[str] = []
        with collector_paused():
            builder = _WideRebuilder(self, plan, expand, warnings)
            data = builder.build()
        self.ids, self.digests = bytearray(), array("q")  # the build's alone (a spilled trace's records need not)
        traces = {} if data is None else {self.trace_id.hex(): data}
        return RebuildResult(traces, builder.skipped, warnings, builder.malformed)

    def _checked(self, log: ProblemLog | None) -> _Plan:
        """What the stream's structure check keeps (the raw spans kept are left in ``raw``), with its problems
        added to ``log``."""
        raw_ids = [s.span_id for s in self.raw]
        if self.has_root and len(set(raw_ids)) == len(raw_ids) and self._launch_ids_distinct(raw_ids):
            before = [at - n for n, at in enumerate(self.raw_at)]
            at_first = self.raw and (not self.launches or self.raw_at[0] == 0)
            first = self.raw[0].resource if at_first else self.resource(0)
            return _Plan(None, before, first)
        from launchtrace.sources.structure import check_structure

        stand_ins = self._in_reading_order()
        kept_spans, problems = check_structure(stand_ins)
        for problem in problems:
            if problem.skipped and log is not None:
                log.add(problem)
        alive = {id(s) for s in kept_spans}
        launches = bytearray(self.launches)
        raw: list[SpanData] = []
        before: list[int] = []
        first: Attributes | None = None
        count = 0  # kept launches so far
        for s in stand_ins:
            if id(s) not in alive:
                continue
            if type(s) is _Launch:
                launches[s.index] = 1
                count += 1
                if first is None:
                    first = self.resource(s.index)
            else:
                raw.append(s)
                before.append(count)
                if first is None:
                    first = s.resource
        self.raw = raw
        return _Plan(launches, before, first if first is not None else ())

    def _launch_ids_distinct(self, raw_ids: list[bytes]) -> bool:
        """Whether no two launches share a span id, nor a launch a raw span's: the ids as numbers in
        :data:`_BUCKETS` arrays by their remainder (every byte of an id counts in it: a program's ids may share
        their first bytes), each sorted in turn: 8 bytes a launch while it runs, and a sorted list of a 251st of
        them (sorting all at once was 40 bytes a launch: 40 MB at a million) (no NumPy: ``summary`` imports
        none)."""
        buckets = [array("Q") for _ in range(_BUCKETS)]
        with memoryview(self.ids) as view, view.cast("Q") as numbers:  # native order: only equality matters
            appends = [b.append for b in buckets]
            for n in numbers:
                appends[n % _BUCKETS](n)
        raw: list[list[int]] = [[] for _ in range(_BUCKETS)]
        for span_id in raw_ids:
            if len(span_id) == 8:
                n = array("Q", span_id)[0]
                raw[n % _BUCKETS].append(n)
        for bucket, others in zip(buckets, raw):
            ordered = sorted(bucket)
            if any(map(operator.eq, ordered, itertools.islice(ordered, 1, None))):
                return False
            for n in others:
                at = bisect.bisect_left(ordered, n)
                if at < len(ordered) and ordered[at] == n:
                    return False
        return True

    def _in_reading_order(self) -> list:
        """Every span taken, in reading order: the raw ones as they are, each launch as a :class:`_Launch`."""
        out: list = []
        launch = 0
        for span, at in zip(self.raw, self.raw_at):
            while len(out) < at:
                out.append(self._launch(launch))
                launch += 1
            out.append(span)
        while launch < self.launches:
            out.append(self._launch(launch))
            launch += 1
        return out

    def _launch(self, i: int) -> _Launch:
        return _Launch(self.trace_id, self.span_id(i), self.parent_ids[self.parents[i]], self.digests[i], i)

    def span_id(self, launch: int) -> bytes:
        """The span id of the ``launch``-th launch read into its record."""
        return bytes(self.ids[8 * launch : 8 * launch + 8])

    def resource(self, launch: int) -> Attributes:
        """The resource of the ``launch``-th launch read into its record."""
        at = bisect.bisect_right(self.resources, launch, key=lambda item: item[0]) - 1
        return self.resources[at][1]


class _Plan(NamedTuple):
    """What the structure check kept: the launches (a byte each, 1: kept; ``None``: all), per raw span kept how many
    kept launches were read before it, and the resource of the first span kept."""

    launches: bytearray | None
    before: list[int]
    first_resource: Attributes


class _Launch:
    """A launch span read into its record, as :func:`~launchtrace.sources.structure.check_structure` sees it:
    equal to another when their hashes are (see the module docstring)."""

    __slots__ = ("digest", "index", "parent_span_id", "span_id", "trace_id")

    def __init__(self, trace_id: bytes, span_id: bytes, parent: bytes | None, digest: int, index: int) -> None:
        self.trace_id, self.span_id, self.parent_span_id, self.digest, self.index = (
            trace_id,
            span_id,
            parent,
            digest,
            index,
        )

    def __eq__(self, other: object) -> bool:
        return type(other) is _Launch and other.digest == self.digest

    __hash__ = None  # type: ignore[assignment]


class _WideRebuilder(TraceRebuilder):
    """:class:`TraceRebuilder` over a :class:`WideTrace`: the raw spans rebuilt as ever, the launches' records
    given their scopes and put in the rebuild's order among the raw spans' records."""

    def __init__(self, wide: WideTrace, plan: _Plan, expand: bool, warnings: list[str]) -> None:
        super().__init__(wide.trace_id.hex(), wide.raw, expand, warnings)
        self.wide = wide
        self.plan = plan
        self._found: dict[bytes, int] = {}  # span ids looked up (a few: parents that are no raw span)
        self._index: dict[bytes, int] | None = None  # every kept launch's, once many were looked up

    def _launch_at(self, span_id: bytes) -> int:
        """The index of the kept launch of id ``span_id``, or -1: a few ids are searched for in the ids' bytes,
        and past :data:`_SEARCHES` of them (a trace whose launches hang under many missing parents) every kept
        launch is put in a dict once."""
        if len(span_id) != 8:
            return -1
        if self._index is not None:
            return self._index.get(span_id, -1)
        at = self._found.get(span_id)
        if at is not None:
            return at
        if len(self._found) >= _SEARCHES:
            wide, kept = self.wide, self.plan.launches
            index: dict[bytes, int] = {}
            for i in range(len(wide.ids) // 8):  # (not wide.records: given to the rebuild by now)
                if kept is None or kept[i]:
                    index.setdefault(wide.span_id(i), i)
            self._index = index
            return index.get(span_id, -1)
        at = self._found[span_id] = self._search(span_id)
        return at

    def _search(self, span_id: bytes) -> int:
        ids, kept = self.wide.ids, self.plan.launches
        at = ids.find(span_id)
        while at >= 0:
            if at % 8 == 0 and (kept is None or kept[at // 8]):
                return at // 8
            at = ids.find(span_id, at + 1)
        return -1

    def _taken_launch(self, span_id: bytes) -> tuple[bool, bytes | None] | None:
        i = self._launch_at(span_id)
        if i < 0:
            return None
        wide = self.wide
        return bool(wide.joined[i]), wide.parent_ids[wide.parents[i]]

    def _known(self, span_id: bytes) -> bool:
        return span_id in self.spans or self._launch_at(span_id) >= 0

    def build(self) -> TraceData | None:
        if self.wide.spill is not None:
            return self._build_spilled()
        launches = self._scoped_launches()
        plain: list[LaunchRecord] = []
        keyed: list = []
        scopes: dict = {}
        attributes: dict = {}
        ours = len(launches)
        op, fold_count = C.OP, C.FOLD_COUNT
        placed = 0  # launches placed so far
        for (span_id, span), before in zip(self.spans.items(), self.plan.before):
            plain.extend(r for r in launches[placed:before] if r is not None)
            placed = max(placed, before)
            d = self.attrs.get(span_id)
            if d is None:
                d = dict(span.attributes)
            try:  # the rebuild's own loop (TraceRebuilder.build), less its inline shortcut
                if op in d and fold_count not in d:
                    error = None if span.status_code != STATUS_ERROR else span_error(span)
                    plain.append(_record(d, span.start_ns, span.end_ns, error, self._parent_scope(span, d)))
                    ours += 1
                else:
                    ours += self._take(span, d, plain, keyed, scopes, attributes)
            except (ValueError, TypeError, KeyError, OverflowError):
                ours += 1
                self.malformed += 1
        plain.extend(r for r in launches[placed:] if r is not None)
        self.malformed += sum(1 for r in launches if r is None)
        if not ours:
            return None
        attrs = {**dict(self.plan.first_resource), **attributes, TRACE_ID: self.trace_hex}
        return TraceData(records_in_order(plain, keyed), scopes, attrs)

    def _scoped_launches(self) -> list[LaunchRecord | None]:
        """The kept launches' records in reading order, each with its scope (each record is replaced by its copy
        in the wide trace's list, which is then let go: no second list of them is held)."""
        wide, kept = self.wide, self.plan.launches
        records, wide.records = wide.records, []
        scope_of: dict[int, int | None] = {}
        for i, rec in enumerate(records):
            if rec is None or wide.joined[i] or (kept is not None and not kept[i]):
                continue
            p = wide.parents[i]
            scope = scope_of.get(p, scope_of)
            if scope is scope_of:
                scope = scope_of[p] = self._scope_above(wide.parent_ids[p], wide.span_id(i))
            if scope is not None:
                records[i] = _with_scope(rec, scope)
        if kept is not None:
            records = [r for r, keep in zip(records, kept) if keep]
        return records

    def _build_spilled(self) -> TraceData | None:
        """:meth:`build` of a trace whose records were written out (:mod:`launchtrace.sources.spill`): the same
        records in the same order, as :class:`_MergedRecords` (read back from the file each time they are
        iterated) instead of a list. Each record's place: its key in the rebuild's sort (``(seq, 0)``, an expanded
        summary's own), then its place in the reading order (a raw span's records after the launches read
        before it)."""
        wide, kept = self.wide, self.plan.launches
        if wide.records:
            wide._spill_records()
        unreadable = set(wide.unreadable)
        scope_of: dict[int, int | None] = {}
        for i in range(wide.launches):  # the scopes, asked in the order _scoped_launches asks (its warnings')
            if i in unreadable or wide.joined[i] or (kept is not None and not kept[i]):
                continue
            p = wide.parents[i]
            if p not in scope_of:
                scope_of[p] = self._scope_above(wide.parent_ids[p], wide.span_id(i))
        count = wide.launches if kept is None else kept.count(1)
        ours = count
        self.malformed += sum(1 for i in unreadable if kept is None or kept[i])
        count -= sum(1 for i in unreadable if kept is None or kept[i])
        raw: list[tuple[tuple[int, int, int, int], LaunchRecord]] = []
        scopes: dict = {}
        attributes: dict = {}
        op, fold_count = C.OP, C.FOLD_COUNT
        for (span_id, span), before in zip(self.spans.items(), self.plan.before):
            d = self.attrs.get(span_id)
            if d is None:
                d = dict(span.attributes)
            try:
                if op in d and fold_count not in d:
                    error = None if span.status_code != STATUS_ERROR else span_error(span)
                    rec = _record(d, span.start_ns, span.end_ns, error, self._parent_scope(span, d))
                    raw.append(((rec.seq, 0, before, 0), rec))
                    ours += 1
                else:
                    plain: list[LaunchRecord] = []
                    keyed: list = []
                    ours += self._take(span, d, plain, keyed, scopes, attributes)
                    raw.extend(((r.seq, 0, before, 0), r) for r in plain)
                    raw.extend(((key[0], key[1], before, 0), r) for key, r, _ in keyed)
            except (ValueError, TypeError, KeyError, OverflowError):
                ours += 1
                self.malformed += 1
        if not ours:
            return None
        raw.sort(key=_first)  # stable: ties in reading order
        count += len(raw)
        records = _MergedRecords(
            wide.spill,
            wide.runs,
            raw,
            count,
            kept,
            wide.joined,
            wide.parents,
            scope_of,
            wide.run_seqs,
            wide.first_start,
        )
        attrs = {**dict(self.plan.first_resource), **attributes, TRACE_ID: self.trace_hex}
        return TraceData(records, scopes, attrs)  # type: ignore[arg-type]


_first = operator.itemgetter(0)


class _MergedRecords(SpilledRecords):
    """A spilled wide trace's records in the rebuild's order: its sorted runs of launches and its raw spans'
    records merged by key, each launch given its scope as it is read. Iterated as often as wanted."""

    __slots__ = ("first_start", "in_order", "joined", "kept", "one_scope", "parents", "raw", "runs", "scope_of")

    def __init__(
        self,
        spill: SpillFile,
        runs: list[list[Chunk]],
        raw: list,
        count: int,
        kept: bytearray | None,
        joined: bytearray,
        parents: array,
        scope_of: dict[int, int | None],
        seqs: list[tuple[int, int]],
        first_start: int,
    ) -> None:
        self.spill, self.runs, self.raw, self.count = spill, runs, raw, count
        self.chunks: list[Chunk] = []
        self.kept, self.joined, self.parents, self.scope_of = kept, joined, parents, scope_of
        first = min(filter(None, (r.start_ns for _, r in raw)), default=_NEVER)
        first = min(first, first_start)
        # the lowest non-zero start (0: none), where no launch was left out by the structure check
        self.first_start = None if kept is not None else (0 if first == _NEVER else first)
        distinct = set(scope_of.values())
        self.one_scope = (distinct.pop(),) if len(distinct) == 1 and not joined.count(1) else ()
        self.in_order = all(a[1] <= b[0] for a, b in itertools.pairwise(seqs))

    def _launches(self, run: list[Chunk], keyed: bool = False) -> Iterator[Iterable]:
        """One run's kept launches with their scopes, a chunk at a time; ``keyed``: as ``(key, record)`` pairs for
        the merge."""
        kept, joined, parents, scope_of, spill = self.kept, self.joined, self.parents, self.scope_of, self.spill

        def scopes(numbers: list[int]) -> list[int | None]:
            if self.one_scope:  # every launch has the one scope (one parent, none joined): most wide traces
                return [self.one_scope[0]] * len(numbers)
            return [None if joined[i] else scope_of.get(parents[i]) for i in numbers]

        for chunk in run:
            numbers, records = spill.read(chunk, scopes)
            if kept is not None:
                records = [r for r, i in zip(records, numbers) if kept[i]]
                numbers = [i for i in numbers if kept[i]]
            if keyed:
                yield zip([(r.seq, 0, i, 1) for r, i in zip(records, numbers)], records)
            else:
                yield records

    def scope_ids(self) -> set[int | None] | None:
        """Every record's scope id, where known without reading them (every launch in one scope); else None."""
        if not self.one_scope:
            return None
        return {self.one_scope[0], *(r.scope_id for _, r in self.raw)}

    def __iter__(self) -> Iterator[LaunchRecord]:
        if not self.raw and self.in_order:  # each run's launches come after the one before's: one after another
            return itertools.chain.from_iterable(itertools.chain.from_iterable(map(self._launches, self.runs)))
        return self._merged()

    def _merged(self) -> Iterator[LaunchRecord]:
        chained = (itertools.chain.from_iterable(self._launches(run, True)) for run in self.runs)
        # in order: the launches one after another, merged with the raw spans' records only
        runs = [itertools.chain.from_iterable(chained)] if self.in_order else list(chained)
        if self.raw:
            runs.append(iter(self.raw))
        for _, rec in merged(runs):
            yield rec
