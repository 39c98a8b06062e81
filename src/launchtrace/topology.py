"""Launch topology: comparable keys, stable fingerprints, alignment, diffs and repeated sequences.

A CUDA graph replays the launches it recorded, so a capturable hot path must issue the same launches, in the
same order, with the same dimensions, buffers and scalar arguments, on every call. This module turns records
into keys that say exactly that (:func:`topology_key`), hashes a whole sequence into a digest that is stable
across runs and machines (:func:`fingerprint`), aligns two sequences so that one inserted launch is reported
as one insertion (:func:`align`, :func:`diff_records`), and finds consecutive repetitions
(:func:`find_repeats`) for folding summary spans and drawing "repeated Nx" clusters. Pure functions over
:class:`~launchtrace.model.LaunchRecord`; no OTel, no files.

Example::

    from launchtrace.topology import diff_records, format_entry
    for entry in diff_records(first.records, second.records, buffers=owned):
        print(format_entry(entry))  # "#7 sim.integrate (from sim.py:31 (step)): scalar dt 0.01 -> 0.02"
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Hashable, Iterable, Sequence
from enum import Enum
from typing import Any, Protocol

from launchtrace.allocations import identity_of
from launchtrace.model import BufferArg, LaunchRecord, TextEnum

__all__ = [
    "ALLOCATED",
    "FOREIGN",
    "AllocRef",
    "Change",
    "ChangeKind",
    "DiffEntry",
    "FieldChange",
    "Locator",
    "align",
    "captured_graphs",
    "diff_records",
    "find_repeats",
    "fingerprint",
    "format_entry",
    "format_value",
    "plain_value",
    "replays",
    "resolve_pointer",
    "slotless",
    "topology_key",
    "topology_keys",
]

FOREIGN = "<foreign>"
ALLOCATED = "<allocated>"


# -- graph capture ---------------------------------------------------------------------------------------------


def captured_graphs(records: Iterable[LaunchRecord]) -> dict[int, list[LaunchRecord]]:
    """The records captured into each graph, by graph id, in capture order (``seq``).

    A captured record (``captured=True``) did not run when it was issued: each graph launch record of the same
    ``graph_id`` ran all of them once, with the same buffers. ``records`` may come from several traces (a graph
    captured in one step and replayed in later ones): graph ids are unique across processes.

    Example::

        graphs = captured_graphs(rec for trace in load_traces("run.jsonl") for rec in trace)
        [r.kernel for r in graphs[replay.graph_id]]  # what one replay ran
    """
    out: dict[int, list[LaunchRecord]] = {}
    for rec in records:
        if rec.captured and rec.graph_id is not None and rec.op != "graph_launch":
            out.setdefault(rec.graph_id, []).append(rec)
    for group in out.values():
        group.sort(key=lambda r: r.seq)
    return out


def replays(records: Iterable[LaunchRecord], graph_id: int | None = None) -> list[LaunchRecord]:
    """The graph launch records (of ``graph_id``, or of every graph), in the order they ran."""
    found = [r for r in records if r.op == "graph_launch" and (graph_id is None or r.graph_id == graph_id)]
    return sorted(found, key=lambda r: r.seq)


class AllocRef(tuple):
    """An unowned buffer by its allocation identity: ``(identity, offset)``, e.g. ``("State.x#1", 0)`` (see
    :mod:`launchtrace.allocations`). A tuple, so it compares, hashes, prints and fingerprints like an owner's
    ``(label, offset)``; its own type, so that analyses tell an allocation from an owner."""

    __slots__ = ()

    def __new__(cls, identity: str, offset: int = 0) -> AllocRef:
        return tuple.__new__(cls, (identity, offset))

    @property
    def identity(self) -> str:
        return self[0]


def slotless(identity: str) -> str:
    """An allocation identity without its slots (``"State.x#2.grad"`` -> ``"State.x.grad"``): the site's name,
    the same for every allocation the site makes."""
    if "#" not in identity:
        return identity
    return ".".join(part.split("#", 1)[0] if "#" in part else part for part in identity.split("."))


class Locator(Protocol):
    """Anything with ``locate(ptr) -> (label, offset) | None``, e.g. an ownership ``BufferSet``."""

    def locate(self, ptr: int) -> tuple[str, int] | None: ...


# ---------------------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------------------


def resolve_pointer(
    record: LaunchRecord,
    key: Any,
    ptr: int,
    buffers: Locator | None = None,
    ignore: Locator | None = None,
    raw: bool = True,
    buf: BufferArg | None = None,
) -> Any:
    """What an array argument stands for in a topology: ``(label, offset)``, ``"<foreign>"``,
    ``"<allocated>"``, ``0`` for a null array, an :class:`AllocRef` for an unowned buffer whose allocation the
    capture saw, or (``raw=True`` and nothing else known) the raw pointer.
    ``buf``: the argument's :class:`~launchtrace.model.BufferArg` when the caller has it at hand."""
    if type(ptr) is AllocRef:  # already resolved (launchtrace.analysis.segments.unowned_by_order)
        return ptr
    if not ptr:
        return 0
    if ignore is not None and ignore.locate(ptr) is not None:
        return ALLOCATED
    if buffers is not None:
        loc = buffers.locate(ptr)
        return (loc[0], loc[1]) if loc is not None else FOREIGN
    if buf is None and record.buffers:
        buf = record.buffer(key)
    if buf is not None:
        if buf.owner is not None:
            return (buf.owner, buf.offset or 0)
        if buf.alloc is not None:
            return AllocRef(identity_of(buf.alloc), buf.offset or 0)
    return ptr if raw else FOREIGN


def _arrays(record: LaunchRecord, buffers: Locator | None, ignore: Locator | None, raw: bool) -> tuple:
    arrays = record.arrays
    bufs = record.buffers
    if buffers is not None or ignore is not None or type(arrays) is not tuple or type(bufs) is not tuple:
        return _resolved(record, arrays, bufs, buffers, ignore, raw)
    # with no locator the answer is the arrays' and buffers' alone: a call site's rebuilt launches share both
    # tuples, so it is worked out once per pair (kept with them, so an id is never another tuple's)
    seen = _SEEN_ARRAYS.get((id(arrays), id(bufs), raw))
    if seen is not None and seen[0] is arrays and seen[1] is bufs:
        return seen[2]
    out = _resolved(record, arrays, bufs, None, None, raw)
    if len(_SEEN_ARRAYS) >= 4096:
        _SEEN_ARRAYS.clear()
    _SEEN_ARRAYS[(id(arrays), id(bufs), raw)] = (arrays, bufs, out)
    return out


_SEEN_ARRAYS: dict[tuple[int, int, bool], tuple[tuple, tuple, tuple]] = {}


def _resolved(
    record: LaunchRecord, arrays: tuple, bufs: tuple, buffers: Locator | None, ignore: Locator | None, raw: bool
) -> tuple:
    if buffers is None and ignore is None and raw and not any(b.owner or b.alloc for b in bufs):
        return tuple(arrays)  # nothing to resolve: (key, pointer) as recorded (a null array is already 0)
    if len(bufs) == len(arrays):  # the usual case: one BufferArg per array, in the same order
        return tuple((k, resolve_pointer(record, k, p, buffers, ignore, raw, b)) for (k, p), b in zip(arrays, bufs))
    return tuple((k, resolve_pointer(record, k, p, buffers, ignore, raw)) for k, p in arrays)


def topology_key(
    record: LaunchRecord,
    buffers: Locator | None = None,
    scalars: bool = True,
    streams: bool = False,
    ignore: Locator | None = None,
    *,
    raw: bool = True,
) -> tuple:
    """The seed's comparable key of one record: ``(op, kernel, dim, arrays[, scalars][, stream])``.

    Each array becomes ``(key, where)``: ``where`` is ``(label, offset)`` when ``buffers`` locates the pointer
    and ``"<foreign>"`` when it does not; ``"<allocated>"`` when ``ignore`` locates it; with ``buffers=None``
    the owner recorded at capture (``BufferArg.owner`` / ``.offset``), else the allocation's identity
    (``BufferArg.alloc``, as an :class:`AllocRef`), else the raw pointer (``"<foreign>"`` with ``raw=False``).

    Example::

        topology_key(rec, owned)  # ("launch", "sim.integrate", (64,), ((0, ("sim.x", 0)),), ((1, 0.01),))
    """
    key: tuple = (str(record.op), record.kernel, tuple(record.dim), _arrays(record, buffers, ignore, raw))
    if scalars:
        key += (tuple(record.scalars),)
    if streams:
        key += (record.stream,)
    return key


def topology_keys(records: Iterable[LaunchRecord], **options: Any) -> list[tuple]:
    """:func:`topology_key` of every record, with the same options."""
    return [topology_key(r, **options) for r in records]


def plain_value(value: Any, float_value: Callable[[float], Any]) -> Any:
    """``value`` as JSON-encodable data: ``None``, bools, ints and strings as they are, a float as ``float_value``
    writes it, tuples and lists as lists, an ``Enum`` as its value, a numpy scalar as its Python value, anything
    else ``"<its type name>"``. The topology key's form (:func:`_canonical`) and a snapshot's scalars."""
    if isinstance(value, Enum):
        value = value.value
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return float_value(value)
    if isinstance(value, (tuple, list)):
        return [plain_value(v, float_value) for v in value]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return plain_value(item(), float_value)
        except (TypeError, ValueError):
            pass
    return f"<{type(value).__name__}>"


def _float_text(value: float) -> str:
    return "nan" if value != value else repr(value)


def _canonical(value: Any) -> Any:
    """A JSON-encodable, machine-independent form of a key component (every float as its text)."""
    return plain_value(value, _float_text)


def fingerprint(
    records: Iterable[LaunchRecord],
    buffers: Locator | None = None,
    scalars: bool = True,
    streams: bool = False,
    ignore: Locator | None = None,
) -> str:
    """A SHA-256 hex digest of the topology of ``records``: equal for equal topologies, on any run or machine.

    No raw pointer enters it (a pointer no owner covers counts as ``"<foreign>"``), nor times, threads or call
    sites. A record that stands for folded repetitions (``repeat`` = n) counts as n consecutive records: exact
    for runs of one launch. A summary span of a longer unit rebuilt without expansion
    (``rebuild(expand=False)``) does not say its period on the records, so fingerprint expanded traces (the
    default) when comparing with live ones.

    Example::

        fingerprint(trace.records)  # "3f1c..." (64 hex digits)
    """
    digest = hashlib.sha256()
    lines: dict[tuple, bytes] = {}  # loops repeat their keys: encode each distinct key once
    for r in records:
        key = topology_key(r, buffers, scalars, streams, ignore, raw=False)
        line = lines.get(key)
        if line is None:
            line = lines[key] = json.dumps(_canonical(key), separators=(",", ":")).encode() + b"\n"
        digest.update(line * max(1, int(r.repeat or 1)))
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------------------
# Alignment
# ---------------------------------------------------------------------------------------------------------

Opcode = tuple[str, int, int, int, int]

SMALL = 1500  # middles up to this length on both sides go to difflib (quadratic on repetitive traces)
WHOLE = 200  # sequences up to this length on both sides are also aligned whole (see align)
WINDOW = 24  # how far the linear aligner looks ahead to resynchronise after a mismatch


def _compress(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[list[int], list[int]]:
    ids: dict[Hashable, int] = {}
    setdefault = ids.setdefault
    return [setdefault(k, len(ids)) for k in a], [setdefault(k, len(ids)) for k in b]


def align(a_keys: Sequence[Hashable], b_keys: Sequence[Hashable]) -> list[Opcode]:
    """An alignment of two key sequences as difflib-style opcodes ``(tag, i1, i2, j1, j2)``, ``tag`` one of
    ``"equal"``, ``"insert"``, ``"delete"``, ``"replace"``.

    Keys are compressed to ints and the common prefix and suffix trimmed first. The middle goes to a linear
    aligner that, at each mismatch, takes the cheapest resynchronisation (fewest skipped keys, then longest
    agreement after it) within :data:`WINDOW` keys; a middle of at most :data:`SMALL` keys per side also goes
    to ``difflib.SequenceMatcher(autojunk=False)``, and the alignment that matches more keys wins. The linear
    path is exact for the edits traces usually differ by (a launch inserted, removed or changed, even once per
    step); a run of edits longer than :data:`WINDOW` keys comes out as a replaced range.

    Example::

        align(["a", "b", "c"], ["a", "x", "b", "c"])
        # [("equal", 0, 1, 0, 1), ("insert", 1, 1, 1, 2), ("equal", 1, 3, 2, 4)]
    """
    a, b = _compress(a_keys, b_keys)
    n, m = len(a), len(b)
    lo = 0
    while lo < n and lo < m and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < n - lo and hi < m - lo and a[n - 1 - hi] == b[m - 1 - hi]:
        hi += 1
    ops: list[Opcode] = []
    if lo:
        ops.append(("equal", 0, lo, 0, lo))
    mid_a, mid_b = a[lo : n - hi], b[lo : m - hi]
    if not mid_a or not mid_b or (len(mid_a) == 1 and len(mid_b) == 1):
        middle = [("insert" if not mid_a else "delete" if not mid_b else "replace", 0, len(mid_a), 0, len(mid_b))]
    else:
        middle = _align_linear(mid_a, mid_b)
        if len(mid_a) <= SMALL and len(mid_b) <= SMALL:
            import difflib  # here: only a diff of two different topologies needs it, not baseline build's start-up

            exact = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
            if _matched(exact) >= _matched(middle):
                middle = exact
    for tag, i1, i2, j1, j2 in middle:
        _push(ops, tag, i1 + lo, i2 + lo, j1 + lo, j2 + lo)
    if hi:
        _push(ops, "equal", n - hi, n, m - hi, m)
    if (lo or hi) and n <= WHOLE and m <= WHOLE and _matched(ops) < min(n, m):  # (all matched: none does better)
        # the trimmed prefix or suffix can be the wrong match (a=[2,1,2,1,1], b=[2,2,1,0,2,1,0,1]: the whole
        # sequences align 5 keys, prefix + middle + suffix 4, found by the property test); short sequences
        # are also aligned whole
        import difflib

        whole = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if _matched(whole) > _matched(ops):
            return whole
    return ops


def _matched(ops: list[Opcode]) -> int:
    return sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal")


def _push(ops: list[Opcode], tag: str, i1: int, i2: int, j1: int, j2: int) -> None:
    """Append an opcode, merging it into the previous one when they are of one kind and adjacent."""
    if i1 == i2 and j1 == j2:
        return
    if ops:
        ptag, pi1, pi2, pj1, pj2 = ops[-1]
        merged = {ptag, tag} <= {"insert", "delete", "replace"} and ptag != "equal" and tag != "equal"
        if (ptag == tag or merged) and pi2 == i1 and pj2 == j1:
            kind = ptag if ptag == tag else "replace"
            ops[-1] = (kind, pi1, i2, pj1, j2)
            return
    ops.append((tag, i1, i2, j1, j2))


def _agreement(a: list[int], b: list[int], i: int, j: int, cap: int = WINDOW) -> int:
    k = 0
    n, m = len(a), len(b)
    while k < cap and i + k < n and j + k < m and a[i + k] == b[j + k]:
        k += 1
    return k


def _align_linear(a: list[int], b: list[int]) -> list[Opcode]:
    """Greedy resynchronising alignment: linear in the lengths for local edits, bounded for any input."""
    ops: list[Opcode] = []
    n, m = len(a), len(b)
    i = j = 0
    while i < n and j < m:
        if a[i] == b[j]:
            k = i
            while k < n and j + (k - i) < m and a[k] == b[j + (k - i)]:
                k += 1
            _push(ops, "equal", i, k, j, j + (k - i))
            j += k - i
            i = k
            continue
        best = None  # (skip_a, skip_b)
        for cost in range(1, WINDOW + 1):
            best_run = 0
            for da in range(cost + 1):
                db = cost - da
                if i + da < n and j + db < m and a[i + da] == b[j + db]:
                    run = _agreement(a, b, i + da, j + db)
                    if run > best_run:
                        best, best_run = (da, db), run
            if best is not None:
                break
        if best is None:  # nothing within the window: replace a window's worth and move on
            da = db = min(WINDOW, n - i, m - j)
        else:
            da, db = best
        common = min(da, db)
        if common:
            _push(ops, "replace", i, i + common, j, j + common)
        if da > common:
            _push(ops, "delete", i + common, i + da, j + common, j + common)
        if db > common:
            _push(ops, "insert", i + da, i + da, j + common, j + db)
        i, j = i + da, j + db
    if i < n:
        _push(ops, "delete", i, n, j, j)
    if j < m:
        _push(ops, "insert", i, i, j, m)
    return ops


# ---------------------------------------------------------------------------------------------------------
# Diff entries
# ---------------------------------------------------------------------------------------------------------


class ChangeKind(TextEnum):
    """What happened to a record between two traces."""

    INSERTED = "inserted"  # only in the second trace
    REMOVED = "removed"  # only in the first trace
    CHANGED = "changed"  # in both, at aligned positions, with different keys
    MOVED = "moved"  # in both, the same call (equal keys) at another position: the launch order changed


@dataclasses.dataclass(frozen=True)
class FieldChange:
    """One field that differs between two aligned records.

    ``field``: ``"op"``, ``"kernel"``, ``"dim"``, ``"buffer"``, ``"scalar"``, ``"stream"``, ``"site"``,
    ``"dtype"`` (an array's element type, named by its parameter) or ``"raised"`` (``"no"`` or the exception
    type: the call raised on one side only);
    ``name``: the kernel parameter name of a buffer or scalar (``"state.x"``: a struct field), else ``""``;
    ``before`` / ``after``: the values as the topology sees them (a buffer: ``(label, offset)``,
    ``"<foreign>"``, a raw pointer or ``None`` when the argument is missing on that side).
    """

    field: str
    name: str
    before: Any
    after: Any


@dataclasses.dataclass(frozen=True)
class DiffEntry:
    """One difference between two aligned traces.

    ``index_a`` / ``index_b``: positions in each trace (``None`` on the side a record is missing from; both set
    for ``changed`` and ``moved``); ``fields``: for ``changed`` entries, what differs (``moved`` has none).
    """

    kind: ChangeKind
    index_a: int | None
    index_b: int | None
    record_a: LaunchRecord | None
    record_b: LaunchRecord | None
    fields: tuple[FieldChange, ...] = ()

    @property
    def record(self) -> LaunchRecord:
        """The record the entry is about (the second trace's for an insertion or a move: where the call is now,
        else the first's)."""
        rec = self.record_b if self.kind in (ChangeKind.INSERTED, ChangeKind.MOVED) else self.record_a
        assert rec is not None
        return rec


Change = DiffEntry
"""Alias of :class:`DiffEntry`."""


def _field_changes(
    ra: LaunchRecord, rb: LaunchRecord, ka: tuple, kb: tuple, scalars: bool, streams: bool
) -> tuple[FieldChange, ...]:
    out: list[FieldChange] = []
    if ka[0] != kb[0]:
        out.append(FieldChange("op", "", ka[0], kb[0]))
    if ra.kernel != rb.kernel:
        out.append(FieldChange("kernel", "", ra.kernel, rb.kernel))
    if ka[2] != kb[2]:
        out.append(FieldChange("dim", "", ka[2], kb[2]))
    out += _pairs_changed("buffer", ra, rb, ka[3], kb[3])
    if scalars:
        out += _pairs_changed("scalar", ra, rb, ka[4], kb[4])
    if streams and ka[-1] != kb[-1]:
        out.append(FieldChange("stream", "", ka[-1], kb[-1]))
    if ra.site != rb.site:
        out.append(FieldChange("site", "", ra.site, rb.site))
    return tuple(out) + _beyond_the_key(ra, rb)


def _beyond_the_key(ra: LaunchRecord, rb: LaunchRecord) -> tuple[FieldChange, ...]:
    """What the topology key leaves out that still makes two calls different: an array's dtype (a generic
    kernel runs another overload; the key, and every fingerprint and baseline made from it, holds no dtypes)
    and whether the call raised."""
    out: tuple[FieldChange, ...] = ()
    ba, bb = ra.buffers, rb.buffers
    if ba is not bb and ba and bb:
        dtypes = {b.key: b.dtype for b in bb if b.dtype}
        for b in ba:
            after = dtypes.get(b.key)
            if b.dtype and after and after != b.dtype:
                out += (FieldChange("dtype", b.name or ra.arg_name(b.key), b.dtype, after),)
    return out + _raised_change(ra, rb)


def _raised(record: LaunchRecord) -> str:
    """``"no"``, or the exception type the call raised (``"RuntimeError"``)."""
    return record.error.partition(":")[0] if record.error else "no"


def _raised_change(ra: LaunchRecord, rb: LaunchRecord) -> tuple[FieldChange, ...]:
    """The same call that raised on one side only (a launch passed an array of another dtype: the topology key,
    which has no dtypes, is equal, yet one side's launch ran nothing)."""
    if (ra.error is None) == (rb.error is None):
        return ()
    return (FieldChange("raised", "", _raised(ra), _raised(rb)),)


def _pairs_changed(field: str, ra: LaunchRecord, rb: LaunchRecord, pa: tuple, pb: tuple) -> list[FieldChange]:
    if pa == pb:
        return []
    da, db = dict(pa), dict(pb)
    out = []
    for k in list(da) + [k for k in db if k not in da]:
        before, after = da.get(k), db.get(k)
        if before != after or (k in da) != (k in db):
            name = ra.arg_name(k) if k in da else rb.arg_name(k)
            out.append(FieldChange(field, name, before, after))
    return out


def diff_records(
    a: Sequence[LaunchRecord],
    b: Sequence[LaunchRecord],
    buffers: Locator | None = None,
    scalars: bool = True,
    streams: bool = False,
    ignore: Locator | None = None,
) -> list[DiffEntry]:
    """The differences between two record sequences, aligned (see :func:`align`).

    Records are aligned on their full :func:`topology_key`; within each replaced range, records are paired
    again on ``(op, kernel, call site)``, then on ``(op, kernel)``, so that a launch whose dimensions,
    buffers or scalars changed is one ``changed`` entry naming the fields; a replaced range left with equal
    lengths on both sides pairs up 1:1 (a different kernel is then a ``kernel`` change). What is left over is
    ``inserted`` or ``removed``; a removed and an inserted record that are the same call (equal keys, nothing
    beside the key differs) are then one ``moved`` entry (:func:`_moves`): the order of launches changed.

    Example::

        for e in diff_records(first, second, buffers=owned):
            print(format_entry(e))
    """
    opts = {"buffers": buffers, "scalars": scalars, "streams": streams, "ignore": ignore}
    ka, kb = topology_keys(a, **opts), topology_keys(b, **opts)
    out: list[DiffEntry] = []

    def changed(i: int, j: int) -> None:
        if ka[i] != kb[j]:
            fields = _field_changes(a[i], b[j], ka[i], kb[j], scalars, streams)
            out.append(DiffEntry(ChangeKind.CHANGED, i, j, a[i], b[j], fields))

    def pair(i1: int, i2: int, j1: int, j2: int, level: int) -> None:
        if level == len(_PAIRING) or i1 == i2 or j1 == j2 or (i2 - i1 == 1 and j2 - j1 == 1):
            if i2 - i1 == j2 - j1:  # same length: pair up 1:1 (a different kernel is a kernel change)
                for i, j in zip(range(i1, i2), range(j1, j2)):
                    changed(i, j)
                return
            out.extend(DiffEntry(ChangeKind.REMOVED, i, None, a[i], None) for i in range(i1, i2))
            out.extend(DiffEntry(ChangeKind.INSERTED, None, j, None, b[j]) for j in range(j1, j2))
            return
        coarse = _PAIRING[level]
        ca = [coarse(a[i]) for i in range(i1, i2)]
        cb = [coarse(b[j]) for j in range(j1, j2)]
        for tag, ci1, ci2, cj1, cj2 in align(ca, cb):
            if tag == "equal":
                for i, j in zip(range(i1 + ci1, i1 + ci2), range(j1 + cj1, j1 + cj2)):
                    changed(i, j)
            else:
                pair(i1 + ci1, i1 + ci2, j1 + cj1, j1 + cj2, level + 1)

    for tag, i1, i2, j1, j2 in align(ka, kb):
        if tag != "equal":
            pair(i1, i2, j1, j2, 0)
            continue
        for i, j in zip(range(i1, i2), range(j1, j2)):
            beyond = _beyond_the_key(a[i], b[j])
            if beyond:
                out.append(DiffEntry(ChangeKind.CHANGED, i, j, a[i], b[j], beyond))
    return _moves(out, ka, kb)


def _moves(entries: list[DiffEntry], ka: Sequence[tuple], kb: Sequence[tuple]) -> list[DiffEntry]:
    """``entries`` with each removed record that reappears as an inserted one (the same key, nothing beside the
    key differing) made one ``moved`` entry, at the removal's place: swapping two launches otherwise reads as a
    launch added and another deleted. Several identical calls pair up in order; the rest stay as they are."""
    waiting: dict[tuple, list[int]] = {}  # key -> positions in ``entries`` of its removals, in order
    for n, e in enumerate(entries):
        if e.kind == ChangeKind.REMOVED and e.index_a is not None:
            waiting.setdefault(ka[e.index_a], []).append(n)
    if not waiting:
        return entries
    moved: dict[int, DiffEntry] = {}  # position of the removal -> the moved entry
    dropped: set[int] = set()  # positions of the insertions folded into a move
    for n, e in enumerate(entries):
        if e.kind != ChangeKind.INSERTED or e.index_b is None or e.record_b is None:
            continue
        queue = waiting.get(kb[e.index_b], [])
        for q, m in enumerate(queue):
            r = entries[m]
            if r.record_a is not None and not _beyond_the_key(r.record_a, e.record_b):
                moved[m] = DiffEntry(ChangeKind.MOVED, r.index_a, e.index_b, r.record_a, e.record_b)
                dropped.add(n)
                del queue[q]
                break
    return [moved.get(n, e) for n, e in enumerate(entries) if n not in dropped]


# Coarser and coarser identities used to pair the records of a replaced range: the same kernel from the same
# line first, then the same kernel anywhere (code moved), then position.
_PAIRING = (
    lambda r: (str(r.op), r.kernel, r.site.file, r.site.line),
    lambda r: (str(r.op), r.kernel),
)


def format_value(value: Any) -> str:
    """A short text for a topology value: ``gen.x``, ``gen.x+128``, ``0x7f00...``, ``0.01``, ``(64,)``."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int):
        return value[0] if value[1] == 0 else f"{value[0]}+{value[1]}"
    if isinstance(value, int) and not isinstance(value, bool) and value > 0xFFFF:
        return hex(value)
    if value is None:
        return "(missing)"
    return str(value)


def format_entry(entry: DiffEntry) -> str:
    """One line for a diff entry, with the call site.

    Example::

        format_entry(e)  # "#12 inserted sim.apply_drag dim=(64,) (from sim.py:40 (step))"
                         # "#3->#4 moved sim.apply_drag dim=(64,) (from sim.py:41 (step))"
                         # "#7 sim.integrate (from sim.py:31 (step)): scalar dt 0.01 -> 0.02"
    """
    rec = entry.record
    raised = f" [raised {_raised(rec)}]" if rec.error else ""
    if entry.kind == ChangeKind.INSERTED:
        return f"#{entry.index_b} inserted {rec.kernel} dim={tuple(rec.dim)}{raised} (from {rec.site})"
    if entry.kind == ChangeKind.REMOVED:
        return f"#{entry.index_a} removed {rec.kernel} dim={tuple(rec.dim)}{raised} (from {rec.site})"
    where = f"#{entry.index_a}" if entry.index_a == entry.index_b else f"#{entry.index_a}->#{entry.index_b}"
    if entry.kind == ChangeKind.MOVED:  # at one index: the calls around it moved (a reversal's middle)
        return f"{where} moved {rec.kernel} dim={tuple(rec.dim)}{raised} (from {rec.site})"
    parts = []
    for f in entry.fields:
        label = f"{f.field} {f.name}" if f.name else f.field
        parts.append(f"{label} {format_value(f.before)} -> {format_value(f.after)}")
    return f"{where} {rec.kernel} (from {rec.site}): " + ", ".join(parts)


# ---------------------------------------------------------------------------------------------------------
# Repeated sequences
# ---------------------------------------------------------------------------------------------------------


def find_repeats(keys: Sequence[Hashable], max_period: int = 8, min_count: int = 2) -> list[tuple[int, int, int]]:
    """Consecutive repetitions of an identical subsequence: ``(start, period, count)`` per run, in order.

    Greedy from left to right: at each position the period in ``1..max_period`` that covers the most keys
    (shortest period on ties) wins if it repeats at least ``min_count`` times; the scan resumes after the run.
    A ping-pong pair of launches (buffers swapped each step) has period 2. Each position is compared in C
    (list slices of ints), so a 100,000-key trace takes a fraction of a second.

    Example::

        find_repeats(["a", "b", "a", "b", "a", "b", "c"])  # [(0, 2, 3)]
    """
    if max_period < 1 or min_count < 2:
        raise ValueError(f"max_period must be >= 1 and min_count >= 2, got {max_period}, {min_count}")
    ids: dict[Hashable, int] = {}
    seq = [ids.setdefault(k, len(ids)) for k in keys]
    n = len(seq)
    out: list[tuple[int, int, int]] = []
    i = 0
    while i < n:
        best_p, best_count = 0, 1
        for p in range(1, min(max_period, (n - i) // 2) + 1):
            if seq[i + p] != seq[i] or seq[i : i + p] != seq[i + p : i + 2 * p]:
                continue
            count = 2
            unit = seq[i : i + p]
            while i + (count + 1) * p <= n and seq[i + count * p : i + (count + 1) * p] == unit:
                count += 1
            if count * p > best_count * best_p:
                best_p, best_count = p, count
        if best_p and best_count >= min_count:
            out.append((i, best_p, best_count))
            i += best_p * best_count
        else:
            i += 1
    return out
