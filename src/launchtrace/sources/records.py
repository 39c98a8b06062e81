"""One :class:`~launchtrace.model.LaunchRecord` from the attributes of its span, for :mod:`launchtrace.sources.rebuild`.

Reading a launch span's 30-odd attributes back into a record was most of the time every analyzer command spent
(about 19 us a span, issue 25): labels worked out, ``launchtrace.arg.<label>.<field>`` names joined, every value
converted, a frozen dataclass built through keywords. Most of that is the same for every span of a call site,
so it is done once per *layout* (:class:`_Layout`: the attribute names in order and the argument lists), and a
call site's launches that repeat every value but their own (seq, times, scalars, measurements) share one kept
record, copied with those. Every cache is keyed so that values equal but read differently (``1 == True``,
``(1,) == (True,)``) are never mixed up, and values are converted in the order they always were, so a malformed
span fails with the same message (``tests/test_rebuild_cache.py``).

Example::

    from launchtrace.sources.records import record_from_attributes
    rec = record_from_attributes(dict(span.attributes), span.start_ns, span.end_ns, None, None)
"""

from __future__ import annotations

import json
import marshal
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from launchtrace import conventions as C
from launchtrace.fastinit import slot_constructor, slot_copier
from launchtrace.model import UNKNOWN_SITE, BufferArg, DeviceTime, LaunchRecord, Site, ValueStats

__all__ = ["record_from_attributes", "seen_launch", "seen_record", "shared_scalars"]


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


def _flat(value: Any) -> bool:
    """Whether ``value`` is a tuple that :func:`_scalar` gives back as it is (a vector: no list or tuple in it),
    so the tuple itself can be kept: making an equal one was a tenth of rebuilding a launch with a vector."""
    if type(value) is not tuple:
        return False
    return _PLAIN.issuperset(map(type, value)) or not any(isinstance(x, list | tuple) for x in value)


_PLAIN = frozenset((float, int, bool, str, type(None)))
"""Types that are no list or tuple: a vector of these is flat without looking at each element's classes."""


def _scalar(value: Any) -> Any:
    """A scalar argument; a vector or matrix one comes back from Jaeger's classic API as a JSON string (Warp
    has no string scalars, so such a string is always that)."""
    if isinstance(value, str) and value.startswith("["):
        try:
            return _value(json.loads(value))
        except ValueError:
            return value
    return _value(value)


def record_from_attributes(
    d: Mapping[str, Any], start: int, end: int, error: str | None, scope_id: int | None, span: tuple | None = None
) -> LaunchRecord:
    """A record from the attributes of its span (or of a folded position's event). ``span``: the span's name and
    attributes as read (``d`` is their dict), for :func:`seen_launch` to recognise the spans that repeat it."""
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
    rec = layout.reuse(d, start, end, error, scope_id)
    if span is not None:
        _remember(span, d, layout)
    return rec


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

    __slots__ = ("arrays", "cacheable", "fixed", "hits", "make", "measured", "misses", "own", "params", "scalars")
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
        # every name :meth:`_own` reads (kept beside it: the spans of a :class:`_Seen` may differ only in these)
        own = [C.DEVICE_TIME_START, C.DEVICE_TIME_END, *(n for _, measured in self.measured for n in measured)]
        self.own = frozenset([*own, *(name for _, name in self.scalars), C.SEQ])

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
        scalars, seq, probes = self._own(d)
        return _reused(base, scalars, start, end, scope_id, error, seq, probes)

    def _own(self, d: Mapping[str, Any]) -> tuple[tuple, int, tuple]:
        """The values a span does not share with the other spans of its call site: its scalar arguments, seq
        and measurements (device time, then value statistics in argument order). :meth:`record` and
        :meth:`reuse` both read them here, so a bad one fails the same way on either path."""
        get = d.get
        start_ns = get(_DEVICE_TIME_START)
        probes: tuple = ()
        if start_ns is not None or self.measured:
            found = [] if start_ns is None else [DeviceTime(_int(start_ns), _int(get(C.DEVICE_TIME_END, start_ns)))]
            for key, measured in self.measured:
                found.append(_value_stats(d, key, *measured))
            probes = tuple(found)
        scalars = []
        for key, name in self.scalars:
            value = get(name)
            kind = type(value)
            if kind is not float and kind is not int and kind is not bool and not _flat(value):
                value = _scalar(value)
            scalars.append((key, value))
        return tuple(scalars), _seq(get(_SEQ, 0)), probes

    def record(
        self, d: Mapping[str, Any], start: int, end: int, error: str | None, scope_id: int | None
    ) -> LaunchRecord:
        get = d.get
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
            _measured,
        ) in self.arrays:
            ptr = get(n_ptr, 0)
            if type(ptr) is not int:
                ptr = _int(ptr)
            arrays.append((key, ptr))
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
        scalars, seq, probes = self._own(d)
        fields = [read(d[key]) for key, read in self.table]  # every field that is one attribute of its own
        if self.streamless:
            fields.append(None)
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
            seq,
            probes,
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


class _Seen:
    """A launch span read through :meth:`_Layout.reuse` with a kept record (``base``), as a pattern for the spans
    that repeat it: the same attribute names in the same order and values equal at every position but those of
    the names :meth:`_Layout._own` reads (``own_at``). Such a span's dict would find the same layout and the same
    kept record (its key is its names and values, all equal here), so its record is ``base`` with its own values,
    read from them alone by the same :meth:`_Layout._own`. Checking that costs two tuple comparisons, not the
    dict of 30-odd attributes and the two keys built from it (:func:`seen_launch`).

    Its own values but seq are mostly those of the span before (a call site's scalar arguments): when their
    pairs are the very objects :meth:`_Layout._own` last read for this pattern (``last``), what it made of them
    is taken again and only seq is read (the compiled reader gives a repeated attribute text the same pair)."""

    __slots__ = ("attributes", "base", "fixed", "fixed_at", "flags", "last", "layout", "own_at", "own_names")
    __slots__ += ("rest_at", "seq_at", "shared")

    def __init__(self, attributes: tuple, d: Mapping[str, Any], layout: _Layout, base: LaunchRecord) -> None:
        names = [k for k, _ in attributes]
        own = [i for i, name in enumerate(names) if name in layout.own]
        fixed = [i for i in range(len(names)) if i not in own]
        self.attributes = attributes
        self.shared = frozenset(fixed)
        self.fixed_at = _pairs_at(fixed)
        self.own_at = _pairs_at(own)
        rest = [i for i in own if names[i] != _SEQ]
        self.rest_at = _pairs_at(rest)
        self.seq_at = names.index(_SEQ) if _SEQ in names else None
        self.last: tuple[tuple, tuple, tuple] | None = None  # the pairs but seq, and _own's scalars and probes
        self.fixed = self.fixed_at(attributes)
        self.own_names = tuple(names[i] for i in own)  # in order: the dict of a span that repeats it has them so
        self.layout = layout
        self.base = base
        # what rebuild reads of a launch span beside its record (its own values never include these)
        self.flags = {C.SCOPE_JOINED: d[C.SCOPE_JOINED]} if C.SCOPE_JOINED in d else {}


class _Patterns:
    """The :class:`_Seen` of one span name and attribute count, and how often they were of use. Where there are
    several (a double buffer's two states), they are found by the pair at one position where they differ
    (``probe``), so a span is compared with the one it may repeat, not with each in turn."""

    __slots__ = ("by_probe", "hits", "misses", "probe", "seen")

    def __init__(self) -> None:
        self.seen: list[_Seen] = []
        self.hits = self.misses = 0
        self.probe: int | None = None
        self.by_probe: dict[tuple, list[_Seen]] = {}

    def add(self, seen: _Seen) -> None:
        if len(self.seen) >= _MAX_SEEN:
            del self.seen[0]
        self.seen.append(seen)
        self.probe, self.by_probe = None, {}
        if len(self.seen) < 2:
            return
        shared = frozenset.intersection(*(s.shared for s in self.seen))  # a compared position in each
        first = self.seen[0].attributes
        try:
            for i in sorted(shared):
                if any(s.attributes[i] != first[i] for s in self.seen):
                    for s in self.seen:
                        self.by_probe.setdefault(s.attributes[i], []).append(s)
                    self.probe = i
                    return
        except (TypeError, ValueError):  # a value there that cannot be a key or be compared: each in turn
            self.probe, self.by_probe = None, {}


def seen_launch(name: str, attributes: tuple) -> tuple[_Seen, tuple] | None:
    """For a span that repeats an earlier launch span in all but its own values (:class:`_Seen`): that one's
    pattern and this span's own values as :meth:`_Layout._own` reads them (scalars, seq, probes); else ``None``,
    and the span is read from its dict (:func:`record_from_attributes`), which also says what is wrong with an
    own value that cannot be read. Spans whose values keep changing stop being looked for after a few hundred
    misses, as :meth:`_Layout.reuse` stops keeping their records."""
    try:
        patterns = _PATTERNS.get((name, len(attributes)))
        if patterns is None or not patterns.seen:
            return None
        probe = patterns.probe
        for seen in patterns.seen if probe is None else patterns.by_probe.get(attributes[probe], _NONE):
            fixed = seen.fixed_at(attributes)
            if fixed != seen.fixed:
                continue
            rest, last, at = seen.rest_at(attributes), seen.last, seen.seq_at
            if last is not None and at is not None and all(map(operator.is_, rest, last[0])):
                pair = attributes[at]  # the other own names are where they were: the very pairs
                if len(pair) != 2 or pair[0] != _SEQ:
                    return None
                own = (last[1], _seq(pair[1]), last[2])
            else:
                values = dict(seen.own_at(attributes))
                if tuple(values) != seen.own_names:  # every name where it was, each once
                    continue
                own = seen.layout._own(values)
                seen.last = (rest, own[0], own[2])
            patterns.hits += 1
            seen.layout.hits += 1
            # the latest span's pairs (equal ones): the compiled reader gives the next spans the same pair
            # objects where it can, and a pair compared with itself is equal at once
            seen.fixed = fixed
            return seen, own
    # not pairs, values that cannot be compared or be a key, an own value that cannot be read: the dict's reading
    # gives the answer (or the error) it always gave
    except (TypeError, ValueError, KeyError, IndexError, OverflowError):
        return None
    patterns.misses += 1
    if patterns.misses >= _GIVE_UP and patterns.misses > patterns.hits:
        patterns.seen = []  # and none are added again
    return None


def seen_record(seen: _Seen, own: tuple, start: int, end: int, error: str | None, scope_id: int | None):
    """The record of a span :func:`seen_launch` recognised (``own``: its own values, read)."""
    scalars, seq, probes = own
    return _reused(seen.base, scalars, start, end, scope_id, error, seq, probes)


def _remember(span: tuple[str, tuple], d: Mapping[str, Any], layout: _Layout) -> None:
    """Keep a :class:`_Seen` of this span (at most :data:`_MAX_SEEN` per name and length) when :meth:`_Layout.reuse`
    kept a record for its values and its names are each there once (else its dict would not be its attributes
    position for position)."""
    name, attributes = span
    if len(d) != len(attributes) or layout.fixed is None:
        return
    key = (name, len(attributes))
    try:
        base = _RECORDS.get((layout, layout.fixed(d)))
        patterns = _PATTERNS.get(key)
    except TypeError:  # an unhashable value or name
        return
    if base is None:
        return
    if patterns is None:
        if len(_PATTERNS) >= _MAX_NAMES:
            _PATTERNS.clear()
        patterns = _PATTERNS[key] = _Patterns()
    elif not patterns.seen and patterns.misses:  # given up on
        return
    patterns.add(_Seen(attributes, d, layout, base))


def _no_pairs(attributes: tuple) -> tuple:
    return ()


def _pairs_at(positions: list[int]) -> Callable[[tuple], tuple]:
    """The pairs at ``positions`` of an attributes tuple, as a tuple: a slice where they follow each other (the
    own values are mostly the last attributes, so the others are the first ones), else one ``itemgetter``."""
    if not positions:
        return _no_pairs
    if positions == list(range(positions[0], positions[-1] + 1)):
        return operator.itemgetter(slice(positions[0], positions[-1] + 1))
    return operator.itemgetter(*positions, *positions[:1])  # one position: a tuple, not the pair itself


_NONE: list[_Seen] = []


_MAX_SEEN = 4
"""Patterns kept per span name and attribute count (a call site's launches alternate among a few, such as a
double buffer's two states)."""
_MAX_NAMES = 512
"""Span names and attribute counts with patterns before they start over: at most 2,048 patterns, about 3.7 KB
each (their pairs and what ``_own`` last read), so under 8 MB."""
_PATTERNS: dict[tuple[str, int], _Patterns] = {}
_DEVICE_TIME_START, _SEQ = C.DEVICE_TIME_START, C.SEQ


def _seq(value: Any) -> int:
    return value if type(value) is int else _int(value)


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
_SCALARS: dict[bytes, tuple] = {}
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


def shared_scalars(scalars: tuple) -> tuple:
    """``scalars``, or an earlier tuple that reads exactly the same: a call site's launches mostly pass the same
    scalars, and a tuple of them with its pairs, vectors and floats is about 340 bytes a record, most of what a
    rebuilt trace of one million launches would hold apart from the records (issue 25). Only the wide trace's
    reader (:mod:`launchtrace.sources.wide`) asks: a trace of a few hundred launches is let go before it matters,
    and the check is 3-5 % of a rebuild.

    "Exactly" is ``marshal``'s bytes (version 2, no references): the same types all the way down (``1 == True ==
    1.0`` differ there) and floats bit for bit (``0.0 == -0.0`` differ). A tuple holding a NaN is never shared: it
    equals no copy of itself, and two records' scalars would compare equal once they shared one."""
    if not scalars:
        return scalars
    try:
        key = marshal.dumps(scalars, 2)
    except ValueError:  # a value marshal cannot write
        return scalars
    shared = _SCALARS.get(key)
    if shared is not None:
        return shared
    if marshal.loads(key) == scalars:  # fresh copies: a NaN inside compares unequal
        if len(_SCALARS) >= _MAX_CACHED:
            _SCALARS.clear()
        _SCALARS[key] = scalars
    return scalars


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
