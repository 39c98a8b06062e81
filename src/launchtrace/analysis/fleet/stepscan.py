"""A plain step's signature and times straight from its spans, and blocks of known steps folded at once.

The Python reference of the compiled ``launchtrace.analysis.fleet._stepscan`` (what runs without a compiler or
with ``LAUNCHTRACE_PURE_PYTHON=1``; ``tests/test_fleet_stepscan.py`` compares the two on generated and hostile
input). :class:`Scanner` ``.scan(spans)`` gives ``None`` (not a step it can vouch for) or ``(root index,
signature, times)``:

- the signature is int64 codes (native byte order): the number of record spans, then per record span in issue
  order (by sequence number, then span order) its attribute count and one code per attribute: the id of the
  ``(key, value)`` pair, ``-2 * id(key)`` for a :data:`~.fast.VOLATILE` attribute (its value only checked to be
  an ``int``), ``-2 * id(key) - 1`` for a pointer (a key ending in ``.ptr`` with an ``int`` value); then each
  pointer's rank in the order pointer values first appear (``-1``: null). Ids come from :class:`Interner`:
  values equal *with equal types* (``1``, ``1.0`` and ``True`` apart; ``-0.0`` and ``0.0`` apart; NaN and
  dicts never) share one id, and an id is never given to another value. So two equal signatures mean equal
  attribute keys in the same order, equal values of every other attribute and pointers repeating alike:
  everything :func:`.fast.read_step`'s signature holds, once the keys taken for pointers here are checked to
  be the ones its plan takes (``verify=True`` returns them: :func:`.fast.pointers_match`).
- the times are int64 ``(start_ns, end_ns)`` per record span in that order.

A trace is declined when a span has a :data:`~.fast.REFUSE` key (a folded summary, a nested scope), and
unless it has one root, every other span is its child, no span has the error status, all
spans share one resource tuple (the same object), span ids are 8 distinct bytes and every number read fits
int64.

:func:`fold` turns a block of steps of one known signature into what a baseline accumulates: per step its
start and duration, per kernel its total, per position its duration, and for each the histogram part
(:meth:`~.histogram.ExpHistogram.add_indexed`), with the bucket indices ``ExpHistogram.add`` computes.

Example::

    scanner = scanner_for()                  # compiled where built
    found = scanner.scan(spans)              # None, or (root, signature, times)
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from launchtrace import conventions as C
from launchtrace import native
from launchtrace.analysis.fleet.fast import REFUSE, VOLATILE
from launchtrace.histogram import MAX_SCALE, index_at
from launchtrace.spans import STATUS_ERROR, SpanData

__all__ = [
    "INTERN_LIMIT",
    "Interner",
    "Scanner",
    "bucket_index",
    "encode_values_for",
    "fold",
    "fold_for",
    "native_fast_path",
    "scanner_for",
]

ROOT_REFUSE = frozenset((C.OP, C.FOLD_COUNT))
"""Root attributes that make the root a record or a summary: its rebuild then reads its times and events."""
ROOT_INTS = VOLATILE | {C.SCOPE_ID}
"""Root attributes the rebuild reads only as ints (an int never fails) into what the baseline never takes."""
RESERVED_PREFIXES: tuple[str, ...] = C._RESERVED_PREFIXES
"""launchtrace's attribute namespaces: a user's scope attribute is never written under them
(:func:`launchtrace.conventions.scope_user_attr`), and the rebuild reads nothing else of a root but user
attributes, which it keeps without reading."""
INTERN_LIMIT = 1 << 16
"""Values an :class:`Interner` remembers before it starts afresh (with new ids: old signatures just miss)."""
INTERN_BYTES = 1 << 24
"""About the bytes of values an :class:`Interner` holds before it starts afresh (16 MiB)."""
MAX_VALUE_BYTES = 1 << 16
"""A value bigger than this (64 KiB of text) gets no id: a trace holding one goes the straightforward way."""
_INT64 = (-(1 << 63), (1 << 63) - 1)
_PLAIN_TYPES = (str, int, bool, bytes, type(None))


def _typed(value: Any) -> Any:
    """``value`` with its types spelled out, or ``None`` for what no signature may hold."""
    t = type(value)
    if t is tuple:
        items = tuple(map(_typed, value))
        return None if None in items else (tuple, items)
    if t in _PLAIN_TYPES:
        return (t, value)
    if t is float:
        return None if value != value else (float, value.hex())
    return None  # a dict (kvlist), a list, anything else


def _size(value: Any) -> int:
    t = type(value)
    if t is str or t is bytes:
        return 64 + len(value)
    if t is tuple:
        return 64 + sum(map(_size, value))
    return 32


class Interner:
    """Ids for values, equal only for values equal with equal types; ``0`` for values no signature holds (and
    for those over :data:`MAX_VALUE_BYTES`). Bounded: past :data:`INTERN_LIMIT` values or
    :data:`INTERN_BYTES`, it starts afresh (ids are never reused, so earlier signatures only stop matching)."""

    def __init__(self, limit: int = INTERN_LIMIT, max_bytes: int = INTERN_BYTES) -> None:
        self.ids: dict[Any, int] = {}
        self.next = 1
        self.limit = limit
        self.max_bytes = max_bytes
        self.bytes = 0

    def __call__(self, value: Any) -> int:
        key = _typed(value)
        if key is None:
            return 0
        found = self.ids.get(key)
        if found is None:
            size = _size(value)
            if size > MAX_VALUE_BYTES:
                return 0
            if len(self.ids) >= self.limit or self.bytes + size > self.max_bytes:
                self.ids.clear()
                self.bytes = 0
            found = self.ids[key] = self.next
            self.next += 1
            self.bytes += size
        return found


def _int64(value: Any) -> int | None:
    if type(value) is not int or not _INT64[0] <= value <= _INT64[1]:
        return None
    return value


class Scanner:
    """The Python reference of the compiled ``Scanner`` (see the module docstring)."""

    def __init__(
        self,
        span_class: type,
        intern: Callable[[Any], int],
        volatile: frozenset,
        seq_key: str,
        refuse: frozenset,
        root_refuse: frozenset,
        root_ints: frozenset,
        reserved: tuple[str, ...],
    ) -> None:
        self.span_class = span_class
        self.intern = intern
        self.volatile = volatile
        self.seq_key = seq_key
        self.refuse = refuse
        self.root_refuse = root_refuse
        self.root_ints = root_ints
        self.reserved = reserved

    def scan(self, spans: Sequence[SpanData], verify: bool = False) -> tuple | None:
        if type(spans) is not list or len(spans) < 2:
            return None
        root = -1
        resource = None
        for i, span in enumerate(spans):
            if type(span) is not self.span_class:
                return None
            if span.parent_span_id is None:
                if root >= 0:
                    return None
                root = i
            if resource is not None and span.resource is not resource:
                return None
            resource = span.resource
            code = _int64(span.status_code)
            if code is None or code == STATUS_ERROR:
                return None
        if root < 0:
            return None
        root_id = spans[root].span_id
        if type(root_id) is not bytes:
            return None
        seen_ids: set[bytes] = set()
        rows = []
        checked: list[list[int]] = []
        for i, span in enumerate(spans):
            sid = span.span_id
            if type(sid) is not bytes or len(sid) != 8 or sid in seen_ids:
                return None
            seen_ids.add(sid)
            if i == root:
                continue
            if type(span.parent_span_id) is not bytes or span.parent_span_id != root_id:
                return None
            attrs = span.attributes
            if type(attrs) is not tuple or not attrs:
                return None
            start, end = _int64(span.start_ns), _int64(span.end_ns)
            if start is None or end is None:
                return None
            seq = 0
            codes = [len(attrs)]
            pointers = []
            indices: list[int] = []
            for a, pair in enumerate(attrs):
                kid = self._key_id(pair, self.refuse)
                if kid == 0:
                    return None
                key, value = pair
                if key in self.volatile:
                    if type(value) is not int:
                        return None
                    if key == self.seq_key:
                        seq = _int64(value)
                        if seq is None:
                            return None
                    codes.append(-2 * kid)
                    indices.append(-1 - a)
                elif len(key) >= 4 and key.endswith(".ptr") and type(value) is int:
                    if _int64(value) is None:
                        return None
                    codes.append(-2 * kid - 1)
                    pointers.append(value)
                    indices.append(a)
                else:
                    pid = self.intern(pair)
                    if pid <= 0:
                        return None
                    codes.append(pid)
            rows.append((seq, i, codes, pointers, start, end))
            checked.append(indices)
        rows.sort(key=lambda row: (row[0], row[1]))
        out = array("q", [len(rows)])
        for row in rows:
            out.extend(row[2])
        ranks: dict[int, int] = {}
        for row in rows:
            for p in row[3]:
                out.append(-1 if p == 0 else ranks.setdefault(p, len(ranks)))
        times = array("q", [t for row in rows for t in row[4:6]])
        code = self.root_code(spans[root])
        if code is None:
            return None
        if verify:
            return root, out.tobytes(), times.tobytes(), code, checked
        return root, out.tobytes(), times.tobytes(), code

    def root_code(self, root: SpanData) -> bytes | None:
        """The root's code: its name's and resource's ids, then per attribute the pair's id, except for a user's
        attribute (a key outside launchtrace's namespaces: ``-2 * id(key) - 1``, its value only kept by the
        rebuild, never read) and an int of :data:`ROOT_INTS` (``-2 * id(key)``: read as an int, what it is
        changes nothing the baseline takes from the root); ``None`` for a root with a :data:`ROOT_REFUSE` key."""
        name, attrs = root.name, root.attributes
        if type(name) is not str or type(attrs) is not tuple:
            return None
        ids = [self.intern(name), self.intern(root.resource)]
        if min(ids) <= 0:
            return None
        out = array("q", [*ids, len(attrs)])
        for pair in attrs:
            kid = self._key_id(pair, self.root_refuse)
            if kid == 0:
                return None
            key, value = pair
            if not key.startswith(self.reserved):
                out.append(-2 * kid - 1)
            elif key in self.root_ints and type(value) is int:
                out.append(-2 * kid)
            else:
                pid = self.intern(pair)
                if pid <= 0:
                    return None
                out.append(pid)
        return out.tobytes()

    def _key_id(self, pair: Any, refuse: frozenset) -> int:
        """The id of an attribute's key (interned); 0 when the attribute is not a ``(str, value)`` pair, its key
        cannot be interned, or the key is in ``refuse`` (the span or root is then refused)."""
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str:
            return 0
        key = pair[0]
        kid = self.intern(key)
        return 0 if kid <= 0 or key in refuse else kid

    def table_size(self) -> int:
        return 0


def bucket_index(value: int) -> int:
    """The histogram bucket index of ``value`` (> 0) at :data:`~.histogram.MAX_SCALE`, as ``ExpHistogram.add``."""
    if value & (value - 1):
        return math.ceil(math.log2(value) * 2.0**MAX_SCALE) - 1
    return index_at(value)


def _part(values: Sequence[int], weights: Sequence[int] | None = None) -> tuple | None:
    buckets: dict[int, int] = {}
    count = total = zeros = 0
    for i, v in enumerate(values):
        w = 1 if weights is None else weights[i]
        count += w
        total += v * w
        if v <= 0:
            zeros += w
        else:
            b = bucket_index(v)
            buckets[b] = buckets.get(b, 0) + w
    if not (_INT64[0] <= total <= _INT64[1]) or count > _INT64[1]:
        return None
    low, high = (min(values), max(values)) if values else (0, 0)
    return buckets, count, total, low, high, zeros


def fold(times: bytes, launches: int, repeats: bytes, kernel_of: bytes, kernels: int, positions: int) -> tuple | None:
    """A block of steps of one signature: ``times`` int64 ``(start, end)`` per launch, step after step;
    ``repeats`` and ``kernel_of`` int64 per launch. ``None`` when a launch has no end time or a number leaves
    int64 (then each step goes the one-by-one way). Returns ``(starts, durations, duration part, [(totals,
    part) per kernel], [(values, part) per position < positions])``."""
    t, rep, kof = array("q"), array("q"), array("q")
    t.frombytes(times)
    rep.frombytes(repeats)
    kof.frombytes(kernel_of)
    L = launches
    if L <= 0 or kernels <= 0 or not 0 <= positions <= L or len(t) % (2 * L) or len(rep) != L or len(kof) != L:
        raise ValueError("fold: inconsistent sizes")
    if any(r < 1 for r in rep) or any(not 0 <= k < kernels for k in kof):
        raise ValueError("fold: repeat < 1 or kernel index out of range")
    R = len(t) // (2 * L)
    starts, durations = [], []
    totals = [[0] * R for _ in range(kernels)]
    pos = [[0] * R for _ in range(L)]
    samples: list[tuple[list[int], list[int]]] = [([], []) for _ in range(kernels)]
    lo, hi = _INT64
    for r in range(R):
        row = t[r * 2 * L : (r + 1) * 2 * L]
        s0, e0 = min(row[0::2]), max(row[1::2])
        for j in range(L):
            s, e = row[2 * j], row[2 * j + 1]
            if e <= 0:
                return None
            one = e - s
            if not lo <= one <= hi:
                return None
            one = max(0, one)
            d = one * rep[j]
            if d > hi:
                return None
            pos[j][r] = d
            k = kof[j]
            totals[k][r] += d
            if totals[k][r] > hi:
                return None
        span = e0 - s0
        if span > hi:
            return None
        starts.append(s0)
        durations.append(max(0, span))
    for r in range(R):
        row = t[r * 2 * L : (r + 1) * 2 * L]
        for j in range(L):
            samples[kof[j]][0].append(max(0, row[2 * j + 1] - row[2 * j]))
            samples[kof[j]][1].append(rep[j])
    parts = [_part(durations)]
    kernel_parts = [_part(v, w) for v, w in samples]
    position_parts = [_part(pos[p]) for p in range(positions)]
    if any(p is None for p in (*parts, *kernel_parts, *position_parts)):
        return None
    return (
        starts,
        durations,
        parts[0],
        [(totals[k], kernel_parts[k]) for k in range(kernels)],
        [(pos[p], position_parts[p]) for p in range(positions)],
    )


def _compiled() -> Any:
    return native.load("launchtrace.analysis.fleet._stepscan")


def native_fast_path() -> bool:
    """Whether the compiled scanner is there (the Python one is the reference, slower than :mod:`.fast`)."""
    return _compiled() is not None


def scanner_for(span_class: type = SpanData, intern: Callable[[Any], int] | None = None, *, python: bool = False):
    """A scanner: the compiled one where built (unless ``python``), else :class:`Scanner`."""
    module = None if python else _compiled()
    cls = Scanner if module is None else module.Scanner
    intern = intern if intern is not None else Interner()
    return cls(span_class, intern, VOLATILE, C.SEQ, REFUSE, ROOT_REFUSE, ROOT_INTS, RESERVED_PREFIXES)


def encode_values_for() -> Callable[[list], bytes | None] | None:
    """The compiled encoder of ``RunSteps.values`` (``None`` where not built: add them one by one)."""
    module = _compiled()
    return None if module is None else module.encode_step_values


def fold_for(*, python: bool = False) -> Callable[..., tuple | None]:
    """:func:`fold`, compiled where built (unless ``python``)."""
    module = None if python else _compiled()
    return fold if module is None else module.fold
