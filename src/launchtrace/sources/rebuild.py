"""Spans -> records: rebuild one :class:`~launchtrace.model.TraceData` per trace, the inverse of the exporter.

Whatever the spans came from (our JSON Lines file, Jaeger, Tempo), the analyses want records and scopes
back. Record spans become :class:`~launchtrace.model.LaunchRecord` objects equal to the captured ones; scope
spans become :class:`~launchtrace.model.ScopeRecord` objects with their nesting; a folded summary span is
expanded into its repetitions (each with the mean duration of its position, laid out from the span's
start, and marked with a :class:`~launchtrace.model.Fold` naming the summary and its recorded statistics, so
no consumer takes the laid-out times for measured ones); synthetic step roots are not scopes (their records
have no scope, as when captured). Spans that launchtrace did not write (another instrumentation in the same
trace) are skipped and counted.

Only :mod:`launchtrace.conventions` is needed: no OpenTelemetry SDK, no export machinery. One record from its
span's attributes is :mod:`launchtrace.sources.records`' job.

Example::

    from launchtrace.sources.rebuild import rebuild
    result = rebuild(spans)
    for trace_id, data in result.traces.items():
        print(trace_id, len(data.records), data.scope_path(data.records[0].scope_id))
    print(result.skipped, result.warnings)
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from launchtrace import conventions as C
from launchtrace.fastinit import slot_constructor, slot_copier
from launchtrace.gcpause import collector_paused
from launchtrace.model import Fold, LaunchRecord, ScopeKind, ScopeRecord, TraceData
from launchtrace.sources.records import _THREAD_TABLE, _int, _site, _table_fields, _tuple
from launchtrace.sources.records import record_from_attributes as _record
from launchtrace.sources.records import seen_launch as _seen
from launchtrace.sources.records import seen_record as _seen_record
from launchtrace.spans import STATUS_ERROR, SpanData

__all__ = [
    "MAX_EXPANDED",
    "TRACE_ID",
    "RebuildResult",
    "TraceRebuilder",
    "rebuild",
    "records_in_order",
    "scope_traces",
    "span_error",
]

MAX_EXPANDED = 10_000_000
"""A summary span standing for more records than this is not expanded (one record per position with
``repeat`` set instead), so a corrupt or hostile count cannot exhaust memory."""
TRACE_ID = "trace_id"
"""Key of the trace id (hex) in :attr:`TraceData.attributes` of a rebuilt trace."""
ROOT_NAME = "root"
STEP = str(ScopeKind.STEP)


@dataclasses.dataclass(frozen=True, slots=True)
class RebuildResult:
    """Rebuilt traces by trace id (hex), spans skipped as not ours, and what was odd (one line each)."""

    traces: dict[str, TraceData]
    skipped: int = 0
    warnings: list[str] = dataclasses.field(default_factory=list)
    malformed: int = 0  # spans of ours whose values could not be read (each also has a warning)

    def records(self) -> list[LaunchRecord]:
        """Every rebuilt record, trace after trace."""
        return [r for data in self.traces.values() for r in data.records]


def rebuild(spans: Iterable[SpanData], *, expand: bool = True) -> RebuildResult:
    """Group ``spans`` by trace and rebuild each; ``expand=False`` keeps one record per folded position,
    with ``repeat`` set to the repetition count, instead of expanding the repetitions."""
    by_trace: dict[bytes, list[SpanData]] = {}
    if type(spans) is list and len(set(map(_trace_id, spans))) == 1:  # one trace (a stream's list): as it is
        by_trace[spans[0].trace_id] = spans
    else:
        for span in spans:
            by_trace.setdefault(span.trace_id, []).append(span)
    traces: dict[str, TraceData] = {}
    skipped = malformed = 0
    warnings: list[str] = []
    for trace_id, members in by_trace.items():
        # a trace's records, scopes and tuples all stay alive: the collector's runs made one trace of 100,000
        # launches superlinear (9.2 s against 6.2 s paused)
        with collector_paused():
            builder = TraceRebuilder(trace_id.hex(), members, expand, warnings)
            data = builder.build()
        skipped += builder.skipped
        malformed += builder.malformed
        if data is not None:
            traces[trace_id.hex()] = data
    return RebuildResult(traces, skipped, warnings, malformed)


def scope_traces(data: TraceData, name: str | None = None) -> list[TraceData]:
    """One :class:`TraceData` per scope instance (of that ``name``, or every scope): its records and scopes."""
    children: dict[int | None, list[int]] = {}
    for scope in data.scopes.values():
        children.setdefault(scope.parent_id, []).append(scope.id)
    out = []
    for scope in sorted(data.scopes.values(), key=lambda s: (s.seq, s.id)):
        if name is not None and scope.name != name:
            continue
        inside = {scope.id}
        stack = [scope.id]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in inside:
                    inside.add(child)
                    stack.append(child)
        records = [r for r in data.records if r.scope_id in inside]
        scopes = {sid: data.scopes[sid] for sid in data.scopes if sid in inside}
        attrs = {**data.attributes, "scope_id": scope.id, "scope_name": scope.name}
        out.append(TraceData(records, scopes, attrs))
    return out


class TraceRebuilder:
    """Rebuilds one trace from its spans (:mod:`launchtrace.sources.wide` builds on it for a trace too wide to
    hold as spans, so both read a launch by the same code)."""

    def __init__(self, trace_hex: str, spans: list[SpanData], expand: bool, warnings: list[str]) -> None:
        self.trace_hex = trace_hex
        self.expand = expand
        self.warnings = warnings
        self.skipped = 0
        self.malformed = 0
        # a span's attributes as a dict, made when it is read and kept only for spans that others look up (their
        # parents, a few scope spans): keeping every launch's (1-2 KB each) made one trace of 100,000 launches
        # hold them all at once
        self.attrs: dict[bytes, dict[str, Any]] = {}
        self.spans: dict[bytes, SpanData] = dict(zip(map(_span_id, spans), spans))
        if len(self.spans) != len(spans):  # an id twice: the first is kept, and each other one said
            self.spans = {}
            for span in spans:
                if span.span_id in self.spans:
                    self._warn(f"duplicate span id {span.span_id.hex()}: kept the first")
                    continue
                self.spans[span.span_id] = span
        self._scope_of: dict[bytes, int | None] = {}

    def _warn(self, message: str) -> None:
        self.warnings.append(f"trace {self.trace_hex}: {message}")

    def build(self) -> TraceData | None:
        # a launch's record goes to `plain` (its sort key is (seq, 0)); an expanded summary's, with its own key,
        # to `keyed`, after the number of plain records read before it: a pair of tuples per launch was about
        # 110 bytes a record at the peak of one trace of 100,000 launches (issue 25)
        plain: list[LaunchRecord] = []
        keyed: list[tuple[tuple[int, int], LaunchRecord, int]] = []
        scopes: dict[int, ScopeRecord] = {}
        attributes: dict[str, Any] = {}
        ours = 0
        attrs_of, scope_of, append = self.attrs.get, self._scope_of, plain.append
        op, fold_count, joined = C.OP, C.FOLD_COUNT, C.SCOPE_JOINED
        for span_id, span in self.spans.items():
            raw = span.attributes
            seen = _seen(span.name, raw)
            if seen is not None:  # a launch that repeats an earlier one in all but its own values: no dict made
                try:
                    pattern, own = seen
                    parent = span.parent_span_id
                    if parent in scope_of and not pattern.flags.get(joined):  # as for a launch below
                        scope_id = scope_of[parent]
                    else:
                        scope_id = self._parent_scope(span, pattern.flags)
                    error = None if span.status_code != STATUS_ERROR else span_error(span)
                    append(_seen_record(pattern, own, span.start_ns, span.end_ns, error, scope_id))
                    ours += 1
                except (ValueError, TypeError, KeyError, OverflowError) as exc:
                    ours += 1
                    self._malformed(span_id, span, exc)
                continue
            d = attrs_of(span_id)
            if d is None:
                d = dict(raw)
            try:
                if op in d and fold_count not in d:  # a launch: _take's second case, inline (most spans are)
                    parent = span.parent_span_id
                    if parent in scope_of and not d.get(joined):  # _parent_scope's first answer
                        scope_id = scope_of[parent]
                    else:
                        scope_id = self._parent_scope(span, d)
                    error = None if span.status_code != STATUS_ERROR else span_error(span)
                    append(_record(d, span.start_ns, span.end_ns, error, scope_id, (span.name, raw)))
                    ours += 1
                else:
                    ours += self._take(span, d, plain, keyed, scopes, attributes)
            except (ValueError, TypeError, KeyError, OverflowError) as exc:  # our names, unreadable values
                ours += 1
                self._malformed(span_id, span, exc)
        if not ours:
            return None
        first = next(iter(self.spans.values()))
        attrs = {**dict(first.resource), **attributes, TRACE_ID: self.trace_hex}
        return TraceData(records_in_order(plain, keyed), scopes, attrs)

    def _malformed(self, span_id: bytes, span: SpanData, exc: Exception) -> None:
        self.malformed += 1
        reason = " ".join(str(exc).split())[:200]
        self._warn(f"span {span_id.hex()} ({span.name!r}): unreadable launchtrace attributes ({reason})")

    def _take(self, span: SpanData, d: dict[str, Any], plain: list, keyed: list, scopes: dict, attributes: dict) -> int:
        """Add what ``span`` holds; 1 when it is one of ours, 0 when skipped as someone else's."""
        if C.FOLD_COUNT in d:  # first: a summary span also carries its first launch's launchtrace.op
            at = len(plain)
            keyed.extend((key, rec, at) for key, rec in self._expand(span, d))
        elif C.OP in d:
            plain.append(_record(d, span.start_ns, span.end_ns, span_error(span), self._parent_scope(span, d)))
        elif C.SCOPE_KIND in d:
            if span.parent_span_id is None or not self._known(span.parent_span_id):
                attributes.setdefault(ROOT_NAME, span.name)
            if d[C.SCOPE_KIND] == STEP:
                attributes[C.STEP_INDEX] = d.get(C.STEP_INDEX, 0)
                return 1
            scope = self._scope(span, d)
            if scope is not None:
                scopes[scope.id] = scope
        elif span.name == C.DROPPED_SPAN_NAME and C.DROPPED_SPANS in d:
            attributes[C.DROPPED_SPANS] = d[C.DROPPED_SPANS]
            self._warn(f"{d[C.DROPPED_SPANS]} spans were left out by the span budget")
        else:
            self.skipped += 1
            return 0
        return 1

    def _attrs_of(self, span_id: bytes) -> dict[str, Any]:
        """The attributes of a span another one looks up (a parent), as a dict, made once."""
        d = self.attrs.get(span_id)
        if d is None:
            d = self.attrs[span_id] = dict(self.spans[span_id].attributes)
        return d

    def _parent_scope(self, span: SpanData, own: dict[str, Any] | None = None) -> int | None:
        """The scope id of the nearest scope span above ``span`` (foreign spans in between are skipped);
        ``own``: its attributes, when the caller has them as a dict."""
        parent = span.parent_span_id
        if own is None:
            own = self._attrs_of(span.span_id)
        if own.get(C.SCOPE_JOINED):  # its parent is the application's span
            return None
        return self._scope_above(parent, span.span_id)

    def _scope_above(self, parent: bytes | None, span_id: bytes) -> int | None:
        """The scope id of the nearest scope span at or above ``parent`` (the parent of span ``span_id``, which
        is not joined to the application's span): the same for every span under ``parent``."""
        seen: list[bytes] = []
        seen_set: set[bytes] = set()
        result: int | None = None
        while parent is not None:
            if parent in self._scope_of:
                result = self._scope_of[parent]
                break
            if parent in seen_set:
                self._warn(f"parent cycle through span {parent.hex()}")
                break
            seen.append(parent)
            seen_set.add(parent)
            above = self.spans.get(parent)
            if above is None:
                taken = self._taken_launch(parent)
                if taken is None:
                    self._warn(f"span {span_id.hex()}: parent {parent.hex()} is missing")
                    break
                joined, parent = taken  # a launch span read into its record already: no scope, maybe joined
                if joined:
                    break
                continue
            d = self._attrs_of(parent)
            if C.SCOPE_KIND in d and d[C.SCOPE_KIND] != STEP and C.SCOPE_ID in d:
                result = _int(d[C.SCOPE_ID])
                break
            if d.get(C.SCOPE_JOINED):  # a joined step root: above it is the application's span
                break
            parent = above.parent_span_id
        for sid in seen:
            self._scope_of[sid] = result
        return result

    def _taken_launch(self, span_id: bytes) -> tuple[bool, bytes | None] | None:
        """For a span that was read into its record before the trace was rebuilt (:mod:`.wide`): whether it is
        joined to the application's span, and its parent; ``None`` for any other id (here: every id)."""
        return None

    def _known(self, span_id: bytes) -> bool:
        """Whether ``span_id`` is a span of the trace."""
        return span_id in self.spans

    def _scope(self, span: SpanData, d: dict[str, Any]) -> ScopeRecord | None:
        if C.SCOPE_ID not in d:
            self._warn(f"scope span {span.span_id.hex()} ({span.name!r}) has no {C.SCOPE_ID}: skipped")
            return None
        incomplete = bool(d.get(C.SCOPE_INCOMPLETE, False))
        if incomplete:
            self._warn(f"scope {span.name!r} was still open when exported")
        keys = _tuple(d.get(C.SCOPE_ATTRIBUTE_KEYS, ()))
        user = tuple((k, d.get(C.scope_user_attr(k))) for k in keys)
        user += tuple((k, d[k]) for k in C.LOAD_ATTRIBUTES if k in d)  # a module load's (issue 23)
        fields = (  # read in the order ScopeRecord(...)'s keywords were, so a bad value fails the same way
            _int(d[C.SCOPE_ID]),
            span.name,
            str(d[C.SCOPE_KIND]),
            self._parent_scope(span, d),
            user,
            span.start_ns,
            0 if incomplete else span.end_ns,
            span_error(span),
            bool(d.get(C.SCOPE_INTERNAL, False)),
            _site(d),
            _int(d.get(C.SEQ, 0)),
        )
        threads = _table_fields(d, _THREAD_TABLE)
        return _scope_maker(tuple(threads))(*fields, *threads.values())

    def _expand(self, span: SpanData, d: dict[str, Any]) -> list[tuple[tuple[int, int], LaunchRecord]]:
        count, period = _int(d[C.FOLD_COUNT]), _int(d.get(C.FOLD_PERIOD, 0))
        events = [(dict(e.attributes), e.time_ns) for e in span.events if e.name == C.EVENT_FOLD_POSITION]
        events.sort(key=lambda item: _int(item[0].get(C.FOLD_POSITION, 0)))
        positions = [a for a, _ in events]
        if not positions or len(positions) != period or count < 1:
            self._warn(f"summary span {span.span_id.hex()} holds {len(positions)} positions for period {period}")
            return []
        scope_id = self._parent_scope(span, d)
        means = [max(0, _int(p.get(C.FOLD_DURATION_MEAN, 0))) for p in positions]
        bases = [
            dataclasses.replace(_record(p, 0, 0, None, scope_id), fold=_fold(span, count, period, j, p))
            for j, p in enumerate(positions)
        ]
        anchor = bases[0].seq
        if not self.expand or count * period > MAX_EXPANDED:
            if self.expand:
                self._warn(f"summary span {span.span_id.hex()}: {count} x {period} records not expanded (repeat set)")
            out = []
            for j, (base, mean) in enumerate(zip(bases, means)):
                start = events[j][1]
                rec = dataclasses.replace(base, start_ns=start, end_ns=start + mean, repeat=base.repeat * count)
                out.append(((anchor, j), rec))
            return out
        total = count * period
        last_seq = _int(d.get(C.FOLD_SEQ_LAST, anchor + total - 1))
        busy = count * sum(means)
        gap = max(0, (span.end_ns - span.start_ns - busy) // total) if total > 1 else 0
        cursor = span.start_ns
        replays = _replay_steps(bases)
        out = []
        for k in range(total):
            j = k % period
            seq = anchor + (k * (last_seq - anchor)) // (total - 1) if total > 1 else anchor
            end = cursor + means[j]
            rec = _with_times(bases[j], cursor, end, seq)
            if replays[j] and k >= period:  # the graph's later replays: ordinals count on from the first
                rec = dataclasses.replace(rec, graph_replay=rec.graph_replay + (k // period) * replays[j])
            out.append(((anchor, k), rec))
            cursor = end + gap
        return out


_SCOPE_FIELDS = ("id", "name", "kind", "parent_id", "attributes", "start_ns", "end_ns", "error", "internal", "site")
_SCOPE_FIELDS += ("seq",)
_SCOPE_MAKERS: dict[tuple[str, ...], Callable[..., ScopeRecord]] = {}


def _scope_maker(threads: tuple[str, ...]) -> Callable[..., ScopeRecord]:
    """A positional constructor of :class:`ScopeRecord` for :meth:`TraceRebuilder._scope`'s fields and the
    thread fields present (the others keep their defaults), one per distinct set: the dataclass's own
    ``__init__`` (a ``object.__setattr__`` per field) was a tenth of rebuilding a scope span."""
    make = _SCOPE_MAKERS.get(threads)
    if make is None:
        make = _SCOPE_MAKERS[threads] = slot_constructor(ScopeRecord, _SCOPE_FIELDS + threads)
    return make


def records_in_order(
    plain: list[LaunchRecord], keyed: list[tuple[tuple[int, int], LaunchRecord, int]]
) -> list[LaunchRecord]:
    """The records of a trace sorted by their keys, ties in the order their spans were read: ``plain`` ones (key
    ``(seq, 0)``) in reading order, ``keyed`` ones (an expanded summary's) with the number of plain ones read
    before them. ``plain`` is sorted in place and returned when nothing is keyed (most traces)."""
    if not keyed:
        plain.sort(key=_seq)  # stable: ties stay in reading order
        return plain
    items: list[tuple[tuple[int, int], LaunchRecord]] = []
    at = 0
    for key, rec, before in keyed:  # back into reading order
        items.extend(((r.seq, 0), r) for r in plain[at:before])
        at = max(at, before)
        items.append((key, rec))
    items.extend(((r.seq, 0), r) for r in plain[at:])
    items.sort(key=lambda item: item[0])
    return [rec for _, rec in items]


_seq = operator.attrgetter("seq")
_trace_id = operator.attrgetter("trace_id")
_span_id = operator.attrgetter("span_id")


def _replay_steps(bases: list[LaunchRecord]) -> list[int]:
    """Per position of a folded sequence: how far a graph replay's ordinal advances per repetition (the number
    of positions replaying that graph), or 0 for a position that is no replay."""
    counts: dict[int | None, int] = {}
    for rec in bases:
        if rec.graph_replay:
            counts[rec.graph_id] = counts.get(rec.graph_id, 0) + 1
    return [counts[rec.graph_id] if rec.graph_replay else 0 for rec in bases]


def _fold(span: SpanData, count: int, period: int, position: int, d: Mapping[str, Any]) -> Fold:
    """Where an expanded record came from: the summary span and its position's recorded statistics."""
    stat = {k: max(0, _int(d.get(k, 0))) for k in _FOLD_STATS}
    return Fold(
        span.span_id.hex(),
        count,
        period,
        position,
        span.start_ns,
        span.end_ns,
        stat[C.FOLD_DURATION_MIN],
        stat[C.FOLD_DURATION_MEAN],
        stat[C.FOLD_DURATION_MAX],
        stat[C.FOLD_DURATION_P50],
    )


_FOLD_STATS = (C.FOLD_DURATION_MIN, C.FOLD_DURATION_MEAN, C.FOLD_DURATION_MAX, C.FOLD_DURATION_P50)

_with_times: Callable[[LaunchRecord, int, int, int], LaunchRecord] = slot_copier(
    LaunchRecord, ("start_ns", "end_ns", "seq")
)
"""``dataclasses.replace(base, start_ns=start, end_ns=end, seq=seq)``, several times faster: an expanded summary
makes one record per repetition (``test_rebuild`` checks the two agree)."""


def span_error(span: SpanData) -> str | None:
    """The error a span with an error status records: its status message, else its exception event's message."""
    if span.status_code != STATUS_ERROR:
        return None
    if span.status_message:
        return span.status_message
    for event in span.events:
        if event.name == C.EVENT_EXCEPTION:
            a = dict(event.attributes)
            return f"{a.get(C.EXCEPTION_TYPE, 'Exception')}: {a.get(C.EXCEPTION_MESSAGE, '')}"
    return "Exception: (no message)"
