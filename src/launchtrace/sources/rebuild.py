"""Spans -> records: rebuild one :class:`~launchtrace.model.TraceData` per trace, the inverse of the exporter.

Whatever the spans came from (our JSON Lines file, Jaeger, Tempo), the analyses want records and scopes
back. Record spans become :class:`~launchtrace.model.LaunchRecord` objects equal to the captured ones; scope
spans become :class:`~launchtrace.model.ScopeRecord` objects with their nesting; a folded summary span is
expanded into its repetitions (each with the mean duration of its position, laid out from the span's
start, and marked with a :class:`~launchtrace.model.Fold` naming the summary and its recorded statistics, so
no consumer takes the laid-out times for measured ones); synthetic step roots are not scopes (their records
have no scope, as when captured). Spans that launchtrace did not write (another instrumentation in the same
trace) are skipped and counted.

Only :mod:`launchtrace.conventions` is needed: no OpenTelemetry SDK, no export machinery.

Example::

    from launchtrace.sources.rebuild import rebuild
    result = rebuild(spans)
    for trace_id, data in result.traces.items():
        print(trace_id, len(data.records), data.scope_path(data.records[0].scope_id))
    print(result.skipped, result.warnings)
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from launchtrace import conventions as C
from launchtrace.fastinit import slot_constructor, slot_copier
from launchtrace.model import (
    UNKNOWN_SITE,
    BufferArg,
    DeviceTime,
    Fold,
    LaunchRecord,
    ScopeKind,
    ScopeRecord,
    Site,
    TraceData,
    ValueStats,
)
from launchtrace.spans import STATUS_ERROR, SpanData

__all__ = ["MAX_EXPANDED", "TRACE_ID", "RebuildResult", "rebuild", "scope_traces"]

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
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    traces: dict[str, TraceData] = {}
    skipped = malformed = 0
    warnings: list[str] = []
    for trace_id, members in by_trace.items():
        with _gc_paused():
            builder = _TraceRebuilder(trace_id.hex(), members, expand, warnings)
            data = builder.build()
        skipped += builder.skipped
        malformed += builder.malformed
        if data is not None:
            traces[trace_id.hex()] = data
    return RebuildResult(traces, skipped, warnings, malformed)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic collector paused while one trace is rebuilt: its records, scopes and their tuples all stay
    alive (no cycles to find), and with a large heap (one trace of 100,000 launches) the collector's full runs
    made the rebuild superlinear (9.2 s against 6.2 s paused for 100,000 children, 2.7 against 2.3 for 25,000).
    Left as it was found."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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


class _TraceRebuilder:
    """Rebuilds one trace from its spans."""

    def __init__(self, trace_hex: str, spans: list[SpanData], expand: bool, warnings: list[str]) -> None:
        self.trace_hex = trace_hex
        self.expand = expand
        self.warnings = warnings
        self.skipped = 0
        self.malformed = 0
        self.spans: dict[bytes, SpanData] = {}
        # a span's attributes as a dict, made when it is read and kept only for spans that others look up (their
        # parents, a few scope spans): keeping every launch's (1-2 KB each) made one trace of 100,000 launches
        # hold them all at once
        self.attrs: dict[bytes, dict[str, Any]] = {}
        for span in spans:
            if span.span_id in self.spans:
                self._warn(f"duplicate span id {span.span_id.hex()}: kept the first")
                continue
            self.spans[span.span_id] = span
        self._scope_of: dict[bytes, int | None] = {}

    def _warn(self, message: str) -> None:
        self.warnings.append(f"trace {self.trace_hex}: {message}")

    def build(self) -> TraceData | None:
        keyed: list[tuple[tuple[int, int], LaunchRecord]] = []
        scopes: dict[int, ScopeRecord] = {}
        attributes: dict[str, Any] = {}
        ours = 0
        for span_id, span in self.spans.items():
            d = self.attrs.get(span_id)
            if d is None:
                d = dict(span.attributes)
            try:
                ours += self._take(span, d, keyed, scopes, attributes)
            except (ValueError, TypeError, KeyError, OverflowError) as exc:  # our names, unreadable values
                ours += 1
                self.malformed += 1
                reason = " ".join(str(exc).split())[:200]
                self._warn(f"span {span_id.hex()} ({span.name!r}): unreadable launchtrace attributes ({reason})")
        if not ours:
            return None
        keyed.sort(key=lambda item: item[0])
        first = next(iter(self.spans.values()))
        attrs = {**dict(first.resource), **attributes, TRACE_ID: self.trace_hex}
        return TraceData([rec for _, rec in keyed], scopes, attrs)

    def _take(self, span: SpanData, d: dict[str, Any], keyed: list, scopes: dict, attributes: dict) -> int:
        """Add what ``span`` holds; 1 when it is one of ours, 0 when skipped as someone else's."""
        if C.FOLD_COUNT in d:  # first: a summary span also carries its first launch's launchtrace.op
            keyed.extend(self._expand(span, d))
        elif C.OP in d:
            rec = _record(d, span.start_ns, span.end_ns, _error(span), self._parent_scope(span, d))
            keyed.append(((rec.seq, 0), rec))
        elif C.SCOPE_KIND in d:
            if span.parent_span_id is None or span.parent_span_id not in self.spans:
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
                self._warn(f"span {span.span_id.hex()}: parent {parent.hex()} is missing")
                break
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
        return ScopeRecord(
            id=_int(d[C.SCOPE_ID]),
            name=span.name,
            kind=str(d[C.SCOPE_KIND]),
            parent_id=self._parent_scope(span, d),
            attributes=user,
            start_ns=span.start_ns,
            end_ns=0 if incomplete else span.end_ns,
            error=_error(span),
            internal=bool(d.get(C.SCOPE_INTERNAL, False)),
            site=_site(d),
            seq=_int(d.get(C.SEQ, 0)),
            **_table_fields(d, _THREAD_TABLE),
        )

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


def _int(value: Any) -> int:
    """An int attribute as readers deliver it (int, integral float, or a decimal string)."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return int(str(value))


def _tuple(value: Any) -> tuple:
    """An array attribute; Jaeger's classic API turns arrays into JSON strings, so those are parsed back."""
    if type(value) is tuple:
        return value
    if isinstance(value, tuple | list):
        return tuple(value)
    if isinstance(value, str) and value.startswith("["):
        try:
            parsed = json.loads(value)
        except ValueError:
            return (value,)
        return tuple(parsed) if isinstance(parsed, list) else (value,)
    return () if value is None else (value,)


def _error(span: SpanData) -> str | None:
    if span.status_code != STATUS_ERROR:
        return None
    if span.status_message:
        return span.status_message
    for event in span.events:
        if event.name == C.EVENT_EXCEPTION:
            a = dict(event.attributes)
            return f"{a.get(C.EXCEPTION_TYPE, 'Exception')}: {a.get(C.EXCEPTION_MESSAGE, '')}"
    return "Exception: (no message)"


def _site(d: Mapping[str, Any]) -> Site | None:
    """A scope's call site (``None`` when no file is named); a record's is read by :meth:`_Layout._site`."""
    keys = _site_keys(d)
    if keys is None:
        return None
    file_key, line_key, module_key, pair_key, stable_key = keys
    module = None if module_key is None else d[module_key]
    function_key = pair_key if module is not None else stable_key
    file = d[file_key]
    if file is None:
        return None
    line = 0 if line_key is None else d[line_key]
    return _site_of(file, line, module, "" if function_key is None else d[function_key])


def _site_of(file: Any, line: Any, module: Any, function: Any) -> Site:
    """The site of these attribute values: with a module, the deprecated pair (function and module apart), else
    the stable name ``"module.function"``."""
    if module is not None:
        return _shared_site(str(file), _int(line), str(function), str(module))
    module, _, function = str(function).rpartition(".")
    return _shared_site(str(file), _int(line), function, module)


@lru_cache(maxsize=8192)
def _shared_site(file: str, line: int, function: str, module: str) -> Site:
    """One Site object per distinct call site (a program has few), as capture shares them."""
    return Site(file, line, function, module)


@lru_cache(maxsize=8192)
def _arg_names(label: str) -> tuple[str, ...]:
    """The attribute names of array argument ``label``, in :data:`conventions.ARG_FIELDS` order."""
    return tuple(C.arg_attr(label, field) for field in C.ARG_FIELDS)


def _strings(value: Any) -> tuple[str, ...]:
    items = _tuple(value)
    if all(type(x) is str for x in items):
        return items
    return tuple(str(x) for x in items)


def _ints(value: Any) -> tuple[int, ...]:
    items = _tuple(value)
    if all(type(x) is int for x in items):
        return items
    return tuple(_int(x) for x in items)


def _value(value: Any) -> Any:
    return tuple(_value(v) for v in value) if isinstance(value, list | tuple) else value


def _scalar(value: Any) -> Any:
    """A scalar argument; a vector or matrix one comes back from Jaeger's classic API as a JSON string (Warp
    has no string scalars, so such a string is always that)."""
    if isinstance(value, str) and value.startswith("["):
        try:
            return _value(json.loads(value))
        except ValueError:
            return value
    return _value(value)


def _record(d: Mapping[str, Any], start: int, end: int, error: str | None, scope_id: int | None) -> LaunchRecord:
    """A record from the attributes of its span (or of a folded position's event)."""
    try:
        key: tuple | None = (tuple(d), d.get(C.PARAMS), d.get(C.ARRAY_KEYS), d.get(C.SCALAR_KEYS))
        layout = _LAYOUTS.get(key)
    except TypeError:  # an unhashable value (a list) where the argument lists are: read without the cache
        key = layout = None
    if layout is None:
        layout = _Layout(d)
        if key is not None and layout.cacheable:
            if len(_LAYOUTS) >= _MAX_CACHED:
                _LAYOUTS.clear()
                _RECORDS.clear()
            _LAYOUTS[key] = layout
    if layout.fixed is None:
        return layout.record(d, start, end, error, scope_id)
    return layout.reuse(d, start, end, error, scope_id)


class _Layout:
    """What the attribute names of a record's span and its argument lists decide, worked out once for all the
    spans that share them (the spans of one call site have the same names in the same order): the arguments'
    keys, labels and attribute names, which optional attributes are there, where the call site is read from,
    and the constructor for the fields present. :meth:`record` then only reads and converts the values, in the
    order (and so with the errors) of the reading it replaced.

    The cache key is the attribute names in order with the raw ``launchtrace.params`` / ``array_keys`` /
    ``scalar_keys`` values; a layout is cached only when those are strings or tuples of strings (``None`` when
    absent), because a value such as ``(1,)`` equals ``(True,)`` and ``(1.0,)`` but is read as another label.

    Most spans of a call site also repeat every value but their own (seq, times, scalar arguments,
    measurements): :meth:`reuse` keeps one record per distinct tuple of the other values (``fixed``) and gives
    it the span's own. Those other values are all read through ``str`` / ``int`` / ``bool`` / an int tuple,
    where equal values read the same, except a ``str()`` of a non-string (``1 == True``, but ``"1"`` is not
    ``"True"``): a record is kept only when those values (``text_at``) are strings or ``None``. A layout whose
    values differ span to span (fresh pointers every launch) stops trying after a few hundred misses.
    """

    __slots__ = ("arrays", "cacheable", "fixed", "hits", "make", "measured", "misses", "params", "scalars")
    __slots__ += ("site", "streamless", "table", "text_at")

    def __init__(self, d: Mapping[str, Any]) -> None:
        raw = (d.get(C.PARAMS), d.get(C.ARRAY_KEYS), d.get(C.SCALAR_KEYS))
        self.cacheable = all(_plain_strings(v) for v in raw)
        self.params = _strings(d.get(C.PARAMS, ()))
        array_keys = _strings(d.get(C.ARRAY_KEYS, ()))
        scalar_keys = _strings(d.get(C.SCALAR_KEYS, ()))
        array_labels, scalar_labels = C.arg_labels(self.params, array_keys, scalar_keys)
        arrays = []
        for text, label in zip(array_keys, array_labels):
            names = _arg_names(label)
            stats = _stats_names(label)
            measured = stats if stats[0] in d or stats[4] in d else None  # mean, skipped
            arrays.append((C.decode_key(text), label, *names, measured))
        self.arrays = tuple(arrays)
        self.scalars = tuple(
            (C.decode_key(text), C.scalar_attr(label)) for text, label in zip(scalar_keys, scalar_labels)
        )
        self.table = tuple((key, read) for key, field, read in _RECORD_TABLE if key in d)
        present = tuple(field for key, field, _ in _RECORD_TABLE if key in d)
        self.streamless = "stream" not in present  # a field without a default: passed as None
        self.make = _record_maker((*present, "stream") if self.streamless else present)
        self.site = _site_keys(d)
        self.measured = tuple((a[0], a[-1]) for a in arrays if a[-1] is not None)
        self.hits = self.misses = 0
        texts = [C.OP, C.KERNEL, *(n for a in arrays for n in (a[3], a[6], a[9], a[10], a[11]))]  # owner dtype..
        texts += [key for key, _, read in _RECORD_TABLE if read is str]
        texts += [] if self.site is None else [self.site[0], *self.site[2:]]  # file, module, function
        others = [C.DIM, C.GRAPH_REPLAY, *(n for a in arrays for n in (a[2], a[4], a[5], a[7], a[8]))]  # ptr..
        others += [key for key, _, read in _RECORD_TABLE if read is not str]
        others += [] if self.site is None else [self.site[1]]  # line
        fixed = [k for k in dict.fromkeys(texts + others) if k is not None and k in d]
        self.text_at = tuple(i for i, k in enumerate(fixed) if k in texts)
        fixed += fixed[:1] if len(fixed) == 1 else []  # one name: itemgetter would give the value, not a tuple
        self.fixed = operator.itemgetter(*fixed) if self.cacheable and C.OP in d else None

    def reuse(
        self, d: Mapping[str, Any], start: int, end: int, error: str | None, scope_id: int | None
    ) -> LaunchRecord:
        """:meth:`record`, from a kept record with the same fixed values where there is one."""
        assert self.fixed is not None
        try:
            fixed = self.fixed(d)
            base = _RECORDS.get((self, fixed))
        except TypeError:  # an unhashable value
            return self.record(d, start, end, error, scope_id)
        if base is None:
            rec = self.record(d, start, end, error, scope_id)
            if all(type(fixed[i]) in _STR_OR_NONE for i in self.text_at):
                if len(_RECORDS) >= _MAX_RECORDS:
                    _RECORDS.clear()
                _RECORDS[(self, fixed)] = rec
            self.misses += 1
            if self.misses >= _GIVE_UP and self.misses > self.hits:
                self.fixed = None
            return rec
        self.hits += 1
        # the span's own values, read in record()'s order (so a bad one fails as it would there)
        get = d.get
        start_ns = get(C.DEVICE_TIME_START)
        probes: list = [] if start_ns is None else [DeviceTime(_int(start_ns), _int(get(C.DEVICE_TIME_END, start_ns)))]
        for key, measured in self.measured:
            probes.append(_value_stats(d, key, *measured))
        seq = get(C.SEQ, 0)
        return _reused(
            base,
            self._scalars(d),
            start,
            end,
            scope_id,
            error,
            seq if type(seq) is int else _int(seq),
            tuple(probes),
        )

    def _scalars(self, d: Mapping[str, Any]) -> tuple:
        scalars = []
        get = d.get
        for key, name in self.scalars:
            value = get(name)
            kind = type(value)
            scalars.append((key, value if kind is float or kind is int or kind is bool else _scalar(value)))
        return tuple(scalars)

    def record(
        self, d: Mapping[str, Any], start: int, end: int, error: str | None, scope_id: int | None
    ) -> LaunchRecord:
        get = d.get
        start_ns = get(C.DEVICE_TIME_START)
        probes: list = [] if start_ns is None else [DeviceTime(_int(start_ns), _int(get(C.DEVICE_TIME_END, start_ns)))]
        arrays = []
        buffers = []
        for (
            key,
            label,
            n_ptr,
            n_owner,
            n_offset,
            n_shape,
            n_dtype,
            n_bytes,
            n_foreign,
            n_access,
            n_name,
            n_alloc,
            measured,
        ) in self.arrays:
            ptr = get(n_ptr, 0)
            if type(ptr) is not int:
                ptr = _int(ptr)
            arrays.append((key, ptr))
            if measured is not None:
                probes.append(_value_stats(d, key, *measured))
            shape = get(n_shape)
            if shape is None:
                continue
            offset = get(n_offset)
            owner = get(n_owner)
            alloc = get(n_alloc)
            nbytes = get(n_bytes, 0)
            buffers.append(
                _new_buffer(
                    key,
                    str(get(n_name, label)),
                    ptr,
                    _ints_shared(shape),
                    str(get(n_dtype, "")),
                    nbytes if type(nbytes) is int else _int(nbytes),
                    None if owner is None else str(owner),
                    None if offset is None else offset if type(offset) is int else _int(offset),
                    bool(get(n_foreign, False)),
                    str(get(n_access, "")),
                    None if alloc is None else str(alloc),
                )
            )
        scalars = self._scalars(d)
        fields = [read(d[key]) for key, read in self.table]  # every field that is one attribute of its own
        if self.streamless:
            fields.append(None)
        seq = get(C.SEQ, 0)
        return self.make(
            str(d[C.OP]),
            str(get(C.KERNEL, "")),
            _ints_shared(get(C.DIM, ())),
            tuple(arrays),
            scalars,
            self._site(d),
            self.params,
            tuple(buffers) if len(buffers) == len(arrays) else (),
            start,
            end,
            scope_id,
            error,
            seq if type(seq) is int else _int(seq),
            tuple(probes),
            _int(get(C.GRAPH_REPLAY, 0)),
            *fields,
        )

    def _site(self, d: Mapping[str, Any]) -> Site:
        """The record's call site: the attributes ``_site_keys`` chose, one :class:`Site` per distinct value."""
        if self.site is None:
            return UNKNOWN_SITE
        file_key, line_key, module_key, pair_key, stable_key = self.site
        file = d[file_key]
        if file is None:
            return UNKNOWN_SITE
        module = None if module_key is None else d[module_key]
        function_key = pair_key if module is not None else stable_key
        raw = (file, 0 if line_key is None else d[line_key], module, "" if function_key is None else d[function_key])
        try:
            site = _SITES.get(raw)
        except TypeError:  # unhashable values: read them without the cache
            return _site_of(*raw)
        if site is None:
            site = _site_of(*raw)
            if type(raw[0]) is str and type(raw[1]) is int and type(raw[2]) in _STR_OR_NONE and type(raw[3]) is str:
                if len(_SITES) >= _MAX_CACHED:
                    _SITES.clear()
                _SITES[raw] = site  # plain values only: 1 == True == 1.0, but str(True) is not str(1)
        return site


_MAX_CACHED = 4096
"""Entries a rebuild cache holds before it starts over (one per call site, shape or site: a program has few)."""
_LAYOUTS: dict[tuple, _Layout] = {}
_MAX_RECORDS = 4096
"""Records kept for reuse (a few MB) before the cache starts over."""
_GIVE_UP = 256
"""Misses after which a layout that has had fewer hits stops keeping records."""
_RECORDS: dict[tuple, LaunchRecord] = {}
_reused: Callable[..., LaunchRecord] = slot_copier(
    LaunchRecord, ("scalars", "start_ns", "end_ns", "scope_id", "error", "seq", "probes")
)
_SITES: dict[tuple, Site] = {}
_SHAPES: dict[Any, tuple[int, ...]] = {}
_STR_OR_NONE = (str, type(None))
_MAKERS: dict[tuple[str, ...], Callable[..., LaunchRecord]] = {}
_COMMON = ("op", "kernel", "dim", "arrays", "scalars", "site", "params", "buffers", "start_ns", "end_ns", "scope_id")
_COMMON += ("error", "seq", "probes", "graph_replay")
_new_buffer: Callable[..., BufferArg] = slot_constructor(
    BufferArg, ("key", "name", "ptr", "shape", "dtype", "nbytes", "owner", "offset", "foreign", "access", "alloc")
)


def _record_maker(present: tuple[str, ...]) -> Callable[..., LaunchRecord]:
    """A positional constructor of :class:`LaunchRecord` for the common fields and the ``present`` table
    fields (the others keep their defaults), one per distinct set."""
    make = _MAKERS.get(present)
    if make is None:
        make = _MAKERS[present] = slot_constructor(LaunchRecord, _COMMON + present)
    return make


def _plain_strings(value: Any) -> bool:
    """Whether an argument list's raw value is a string, a tuple of strings or absent: the values that are
    equal only when they are read the same."""
    if value is None or type(value) is str:
        return True
    return type(value) is tuple and all(type(x) is str for x in value)


def _ints_shared(value: Any) -> tuple[int, ...]:
    """:func:`_ints`, once per distinct value (shapes and dims repeat): equal values read the same here (an
    int, float or bool element equal to another reads as the same int)."""
    try:
        out = _SHAPES.get(value)
    except TypeError:  # a list
        return _ints(value)
    if out is None:
        out = _ints(value)
        if len(_SHAPES) >= _MAX_CACHED:
            _SHAPES.clear()
        _SHAPES[value] = out
    return out


def _site_keys(d: Mapping[str, Any]) -> tuple[str, str | None, str | None, str | None, str | None] | None:
    """Which attributes :func:`_site_of` reads: the file's, the line's, the module's (the deprecated pair) and
    the function's for either convention (each ``None`` when absent); ``None`` when no file is named."""
    file_key = C.CODE_FILE_PATH if C.CODE_FILE_PATH in d else C.CODE_FILEPATH if C.CODE_FILEPATH in d else None
    if file_key is None:
        return None
    line_key = C.CODE_LINE_NUMBER if C.CODE_LINE_NUMBER in d else C.CODE_LINENO if C.CODE_LINENO in d else None
    module_key = C.CODE_NAMESPACE if C.CODE_NAMESPACE in d else None
    pair_key = C.CODE_FUNCTION if C.CODE_FUNCTION in d else C.CODE_FUNCTION_NAME if C.CODE_FUNCTION_NAME in d else None
    stable_key = (
        C.CODE_FUNCTION_NAME if C.CODE_FUNCTION_NAME in d else C.CODE_FUNCTION if C.CODE_FUNCTION in d else None
    )
    return file_key, line_key, module_key, pair_key, stable_key


_READ = {"int": _int, "int64": _int, "str": str, "bool": bool}
"""How each kind of :data:`launchtrace.conventions.RECORD_FIELDS` is read back (the writer's inverse)."""
_RECORD_TABLE = tuple((key, field, _READ[kind]) for key, field, kind, _ in C.RECORD_FIELDS + C.THREAD_FIELDS)
_THREAD_TABLE = tuple((key, field, _READ[kind]) for key, field, kind, _ in C.THREAD_FIELDS)


def _table_fields(d: Mapping[str, Any], table: tuple) -> dict[str, Any]:
    """The fields of ``table`` whose attribute is present (absent ones keep the record model's default,
    which is what the exporter leaves out)."""
    return {field: read(d[key]) for key, field, read in table if key in d}


@lru_cache(maxsize=8192)
def _stats_names(label: str) -> tuple[str, ...]:
    """The value-statistics attribute names of array argument ``label``, in :data:`conventions.STATS_FIELDS` order."""
    return tuple(C.arg_stats_attr(label, field) for field in C.STATS_FIELDS)


def _value_stats(d: Mapping[str, Any], key: Any, *names: str) -> ValueStats:
    n_mean, n_std, n_min, n_max, n_skipped = names
    if n_skipped in d:
        return ValueStats(key, skipped=str(d[n_skipped]))
    return ValueStats(key, _float(d.get(n_mean)), _float(d.get(n_std)), _number(d.get(n_min)), _number(d.get(n_max)))


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _number(value: Any) -> float | int | None:
    """A min / max as written: an int for integer arrays (readers may hand a decimal string), else a double."""
    if value is None or isinstance(value, float):
        return value
    return _int(value)
