"""Record the device work a call emits, and compare it across calls (the seed's ``testing`` API).

:func:`trace_launches` records every piece of device work issued in a block by the current thread (launches,
copies, fills, primitives, graph replays; Warp's own internal calls left out unless ``include_warp=True``)
as a :class:`LaunchTrace` of :class:`LaunchRecord`. Two properties of a capturable hot path follow:

- **static topology** (:meth:`LaunchTrace.diff`, :func:`assert_same_topology`): a CUDA graph replays the
  launches it recorded, so two calls with the same inputs must emit the same launches, in the same order, with
  the same dimensions, buffers and scalar arguments. The diff aligns the two sequences, so one inserted launch
  is one insertion (with its call site), and a changed argument is named by its kernel parameter name;
- **owned buffers** (:meth:`LaunchTrace.foreign_pointers`, :func:`assert_pointers_within`): every pointer
  must fall inside a buffer the producer owns (collected with :func:`buffers_of`); a buffer allocated per
  call breaks a recorded graph.

Example (on the CPU)::

    from launchtrace.testing import assert_pointers_within, assert_same_topology, buffers_of, trace_launches
    sim = Simulation(device="cpu")
    with trace_launches() as first:
        sim.step()
    with trace_launches() as second:
        sim.step()
    owned = buffers_of(sim, root="sim")
    assert_same_topology(first, second, buffers=owned)
    assert_pointers_within(first, owned)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypedDict

from launchtrace import topology as _topo
from launchtrace.model import LaunchRecord, ScopeRecord, TraceData
from launchtrace.ownership import BufferSet, buffers_of

__all__ = [
    "BufferSet",
    "KeyOptions",
    "LaunchRecord",
    "LaunchTrace",
    "assert_pointers_within",
    "assert_same_topology",
    "buffers_of",
    "trace_launches",
]

_instrument_lock = threading.Lock()
_instrument_users = 0  # open trace_launches blocks that rely on the instrumentation they switched on
_we_instrumented = False


def _acquire_instrumentation() -> None:
    global _instrument_users, _we_instrumented
    from launchtrace import capture

    with _instrument_lock:
        if _instrument_users == 0:
            _we_instrumented = bool(capture.instrument())
        _instrument_users += 1


def _release_instrumentation() -> None:
    global _instrument_users, _we_instrumented
    from launchtrace import capture

    with _instrument_lock:
        _instrument_users -= 1
        if _instrument_users == 0 and _we_instrumented:
            capture.uninstrument()
            _we_instrumented = False


if TYPE_CHECKING:
    from typing_extensions import Unpack


class KeyOptions(TypedDict, total=False):
    """The keywords of every method here that compares topologies, beside ``buffers`` (see
    :meth:`LaunchTrace.topology`): ``scalars`` (default True), ``streams`` (False), ``ignore`` (())."""

    scalars: bool
    streams: bool
    ignore: Iterable[Any] | BufferSet


def _key_options(
    buffers: BufferSet | None = None,
    *,
    scalars: bool = True,
    streams: bool = False,
    ignore: Iterable[Any] | BufferSet = (),
) -> dict[str, Any]:
    """The options of :func:`launchtrace.topology.topology_key` that ``buffers`` and :class:`KeyOptions` ask
    for: the one place their defaults are set; another keyword is a ``TypeError``, as a signature would make it."""
    return {"buffers": buffers, "scalars": scalars, "streams": streams, "ignore": _ignore_set(ignore)}


def _ignore_set(ignore: Any) -> BufferSet | None:
    """``ignore`` as a BufferSet: a BufferSet as is, an iterable of arrays as their ranges, empty as None."""
    if ignore is None or isinstance(ignore, BufferSet):
        return ignore
    out = BufferSet()
    for array in ignore:
        out.add(array, _topo.ALLOCATED)
    return out if len(out) else None


class LaunchTrace:
    """The device work recorded in a :func:`trace_launches` block (or rebuilt from spans: :meth:`from_data`).

    A sequence of :class:`LaunchRecord` (``len``, iteration, indexing); ``scopes`` maps scope ids to their
    :class:`~launchtrace.model.ScopeRecord`. Records Warp emits internally (e.g. the copy inside ``wp.clone``)
    are left out unless ``include_warp=True``.

    Example::

        with trace_launches() as trace:
            sim.step()
        trace.kernels()  # ["sim.integrate", "sim.apply_drag"]
    """

    def __init__(
        self,
        records: Iterable[LaunchRecord] = (),
        scopes: dict[int, ScopeRecord] | None = None,
        *,
        include_warp: bool = False,
    ) -> None:
        self.include_warp = bool(include_warp)
        self.records: list[LaunchRecord] = list(records)
        self.scopes: dict[int, ScopeRecord] = dict(scopes or {})
        self.dropped = 0
        self._sub: Any = None

    @classmethod
    def from_data(cls, data: TraceData, *, include_warp: bool = True) -> LaunchTrace:
        """A trace over the records and scopes of a :class:`~launchtrace.model.TraceData` (e.g. rebuilt from
        spans), so the same comparisons work on live and stored traces."""
        records = [r for r in data.records if include_warp or not r.internal]
        return cls(records, data.scopes, include_warp=include_warp)

    # -- recording -----------------------------------------------------------------------------------
    def __enter__(self) -> LaunchTrace:
        if self._sub is not None:
            raise RuntimeError("this LaunchTrace is already recording")
        from launchtrace.capture import bus
        from launchtrace.capture.state import tstate

        self.records, self.scopes, self.dropped = [], {}, 0
        _acquire_instrumentation()
        self._sub = bus.subscribe(thread=tstate().tid)
        return self

    def __exit__(self, *exc: object) -> None:
        sub, self._sub = self._sub, None
        try:
            sub.close()
            for kind, item in sub.drain():
                if kind == "record":
                    if self.include_warp or not item.internal:
                        self.records.append(item)
                elif kind in ("scope_begin", "scope_end"):  # the end carries the finished scope
                    self.scopes[item.id] = item
            self.dropped = sub.dropped
        finally:
            _release_instrumentation()

    # -- sequence ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[LaunchRecord]:
        return iter(self.records)

    def __getitem__(self, i: Any) -> Any:
        return self.records[i]

    def __repr__(self) -> str:
        return f"LaunchTrace({len(self.records)} records)"

    def kernels(self) -> list[str]:
        """The kernel (or ``"wp.copy"``, ``"wp.fill"``, ...) of every record, in order."""
        return [r.kernel for r in self.records]

    def to_data(self) -> TraceData:
        """The records and scopes as a :class:`~launchtrace.model.TraceData`."""
        return TraceData(list(self.records), dict(self.scopes))

    # -- graph capture -------------------------------------------------------------------------------
    def captured_graph(self, graph_id: int) -> list[LaunchRecord]:
        """The records captured into graph ``graph_id`` in this trace (``captured=True``: they did not run
        then; each replay runs them all), in capture order. Empty when the capture is not in this trace; Warp's
        own captured work (a ``warp.sparse`` product) only with ``include_warp=True``, while a replay's
        ``graph_launches`` counts it either way."""
        return _topo.captured_graphs(self.records).get(graph_id, [])

    def replays(self, graph_id: int | None = None) -> list[LaunchRecord]:
        """The ``wp.capture_launch`` records (of ``graph_id``, or of every graph) in this trace, in order;
        each has ``graph_replay`` (1, 2, ... per graph and process) and ``graph_launches`` (what it ran)."""
        return _topo.replays(self.records, graph_id)

    # -- topology ------------------------------------------------------------------------------------
    def topology(self, buffers: BufferSet | None = None, **how: Unpack[KeyOptions]) -> list[tuple]:
        """One comparable key per record: ``(op, kernel, dim, arrays[, scalars][, stream])``.

        With ``buffers``, a pointer inside one of them becomes ``(label, offset)`` and any other
        ``"<foreign>"``; without, the owner recorded at capture (see :func:`launchtrace.own`) or the raw
        pointer. Pointers inside ``ignore`` (arrays, or a BufferSet: e.g. buffers allocated during the call
        and reported elsewhere) become ``"<allocated>"``.
        """
        return _topo.topology_keys(self.records, **_key_options(buffers, **how))

    def fingerprint(self, buffers: BufferSet | None = None, **how: Unpack[KeyOptions]) -> str:
        """A hex digest of the topology, stable across runs and machines (no raw pointers, no times)."""
        return _topo.fingerprint(self.records, **_key_options(buffers, **how))

    def diff_entries(
        self, other: LaunchTrace, *, buffers: BufferSet | None = None, **how: Unpack[KeyOptions]
    ) -> list[_topo.DiffEntry]:
        """The aligned differences as :class:`~launchtrace.topology.DiffEntry` objects."""
        return _topo.diff_records(self.records, other.records, **_key_options(buffers, **how))

    def diff(
        self, other: LaunchTrace, *, buffers: BufferSet | None = None, limit: int = 5, **how: Unpack[KeyOptions]
    ) -> list[str]:
        """Human-readable differences between this trace and ``other`` (``[]`` when their topologies are
        identical; see :meth:`topology`): a count line when the lengths differ, then up to ``limit`` aligned
        differences such as ``#12 inserted sim.apply_drag dim=(64,) (from sim.py:40 (step))`` or
        ``#7 sim.integrate (from sim.py:31 (step)): scalar dt 0.01 -> 0.02``."""
        entries = self.diff_entries(other, buffers=buffers, **how)
        out: list[str] = []
        if len(self.records) != len(other.records):
            out.append(f"{len(self.records)} launches/copies vs {len(other.records)}")
        if not entries and out:
            return out
        out += [_topo.format_entry(e) for e in entries[:limit]]
        if len(entries) > limit:
            out.append(f"... and {len(entries) - limit} more")
        return out

    def same_topology(self, other: LaunchTrace, **kwargs: Any) -> bool:
        """Whether :meth:`diff` finds no difference."""
        return not self.diff(other, **kwargs)

    # -- pointers ------------------------------------------------------------------------------------
    def foreign_pointers(
        self, buffers: BufferSet | None = None, *, ignore: Iterable[Any] | BufferSet = ()
    ) -> list[tuple[LaunchRecord, Any, int]]:
        """``(record, argument key, pointer)`` of every non-null pointer outside ``buffers`` and ``ignore``.

        With ``buffers=None``, the owners recorded at capture decide: a pointer no :func:`launchtrace.own`
        label covered is foreign.
        """
        extra = _ignore_set(ignore)
        out = []
        for r in self.records:
            for key, ptr in r.arrays:
                if not ptr or (extra is not None and extra.locate(ptr) is not None):
                    continue
                if buffers is not None:
                    inside = buffers.locate(ptr) is not None
                else:
                    buf = r.buffer(key)
                    inside = buf is not None and buf.owner is not None
                if not inside:
                    out.append((r, key, ptr))
        return out


def trace_launches(*, include_warp: bool = False) -> LaunchTrace:
    """A :class:`LaunchTrace` to use as a context manager (it yields itself).

    Instruments Warp for the block if it was not instrumented already (and undoes that at the end), and
    records what the current thread issues. Calls Warp makes internally, such as the copy inside
    ``wp.clone``, are left out unless ``include_warp=True``::

        with trace_launches() as trace:
            sim.step()
        print(len(trace), "launches and copies")
    """
    return LaunchTrace(include_warp=include_warp)


def _offenders(trace: LaunchTrace, foreign: list[tuple[LaunchRecord, Any, int]], n: int = 8) -> str:
    lines = [
        f"{r.kernel} argument {r.arg_name(k)} -> {_pointer_name(r, k, p)} (from {r.site})" for r, k, p in foreign[:n]
    ]
    more = f"\n  ... and {len(foreign) - n} more" if len(foreign) > n else ""
    return "\n  ".join(lines) + more


def _pointer_name(rec: LaunchRecord, key: Any, ptr: int) -> str:
    """What the views call the buffer (:meth:`LaunchRecord.buffer_label`: its allocation where the capture saw
    it, ``<host data> (prog.py:23)``), the address only where nothing better is known."""
    buf = rec.buffer(key)
    return rec.buffer_label(buf) if buf is not None and buf.ptr == ptr else hex(ptr)


def assert_same_topology(
    a: LaunchTrace, b: LaunchTrace, *, buffers: BufferSet | None = None, limit: int = 5, **how: Unpack[KeyOptions]
) -> None:
    """Raise ``AssertionError`` naming the first differences when two traces differ (see
    :meth:`LaunchTrace.diff`).

    Example::

        assert_same_topology(first, second, buffers=buffers_of(sim, root="sim"))
    """
    diff = a.diff(b, buffers=buffers, limit=limit, **how)
    if diff:
        raise AssertionError("launch topology differs between the two calls:\n  " + "\n  ".join(diff))


def assert_pointers_within(
    trace: LaunchTrace, buffers: BufferSet | None = None, *, ignore: Iterable[Any] | BufferSet = ()
) -> None:
    """Raise ``AssertionError`` naming the first offenders (kernel, parameter, pointer, call site) when a
    record touches memory outside ``buffers`` (``None``: outside every :func:`launchtrace.own` label).

    Example::

        assert_pointers_within(trace, buffers_of(sim, root="sim"))
    """
    foreign = trace.foreign_pointers(buffers, ignore=ignore)
    if foreign:
        raise AssertionError(f"{len(foreign)} pointer(s) outside the allowed buffers:\n  " + _offenders(trace, foreign))
