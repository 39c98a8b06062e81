"""The record model: what one piece of device work and one scope look like.

Everything in launchtrace speaks this model. Capture produces it from a live Warp program, the exporter turns
it into spans, the sources rebuild it from spans pulled back out of files, Jaeger or Tempo, and every analysis
and renderer consumes it. Records are frozen and hold no reference to a user's array: only pointers, shapes,
dtype names and sizes.

Example::

    from launchtrace.model import LaunchRecord, Site
    site = Site("sim.py", 42, "step", "sim")
    rec = LaunchRecord("launch", "sim.integrate", (1024,), None, ((0, 0x7F00),), ((1, 0.01),), site)
    print(rec)  # launch sim.integrate dim=(1024,) from sim.py:42 (step)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from enum import Enum
from typing import Any

__all__ = [
    "HOST_DATA",
    "HOST_DATA_APIS",
    "ArgKey",
    "BufferArg",
    "DeviceTime",
    "Fold",
    "LaunchRecord",
    "Op",
    "ScopeKind",
    "ScopeRecord",
    "Site",
    "TextEnum",
    "TraceData",
    "ValueStats",
]

ArgKey = "int | str"
"""An argument key: the positional index of a kernel argument (``3``), or ``"3.field"`` for a field of a
``wp.struct`` argument."""


class TextEnum(str, Enum):
    """An enum whose members are their text: ``str(Op.LAUNCH)`` and ``f"{Op.LAUNCH}"`` give ``launch``, as
    written in spans, JSON and reports (a plain ``str`` enum prints ``Op.LAUNCH``)."""

    def __str__(self) -> str:
        return self.value


class Op(TextEnum):
    """The kind of device work a record stands for."""

    LAUNCH = "launch"  # a kernel launch (wp.launch, launch_tiled, Launch.launch, adjoint launches)
    COPY = "copy"  # wp.copy and everything that funnels into it
    FILL = "fill"  # array.fill_ / array.zero_
    GRAPH_LAUNCH = "graph_launch"  # wp.capture_launch: a replay of a captured graph
    PRIMITIVE = "primitive"  # native primitives: array_scan, radix_sort_pairs, bsr products, ...


class ScopeKind(TextEnum):
    """Where a scope came from."""

    TAPE = "tape"  # wp.Tape.record_scope_begin / end called directly
    TIMER = "timer"  # wp.ScopedTimer
    USER = "user"  # launchtrace.scope(...)
    STEP = "step"  # a synthetic root for launches outside any scope (export only)
    LOAD = "load"  # Warp compiling or loading a module (warp.module.load): host time, never a launch's


@dataclasses.dataclass(frozen=True, slots=True)
class Site:
    """The code that emitted a piece of device work: the first frame outside ``warp`` and ``launchtrace``."""

    file: str
    line: int
    function: str
    module: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.function})"


UNKNOWN_SITE = Site("<unknown>", 0, "<unknown>", "")

HOST_DATA_APIS = frozenset({"wp.array", "wp.array.numpy"})
"""The copies whose unowned side is the program's host data (``wp.array(numpy_array)``, ``array.numpy()``)."""
HOST_DATA = "<host data>"
"""What the program's own host memory is called: the same in ``diff`` and in every view (no address)."""


@dataclasses.dataclass(frozen=True, slots=True)
class BufferArg:
    """One array argument of a record, as the device saw it.

    ``owner`` / ``offset`` come from the owner registry (:func:`launchtrace.own`) at the time of the call:
    ``owner`` is ``None`` when no registry entry covered the pointer (``foreign`` then tells whether any owner
    was registered at all, so an unowned pointer in a program that labels its buffers stands out).
    ``access`` is ``"r"``, ``"w"`` or ``"rw"`` where known (Warp's input/output split refined by what the code
    generator knows), else ``""``.
    ``alloc``: for an unowned pointer inside an allocation the capture saw, that allocation's label
    (``"State.x#1 (springs.py:41)"``, see :mod:`launchtrace.allocations`), and ``offset`` the byte offset in it;
    ``None`` otherwise (owned, or allocated before capture began, or memory Warp did not allocate).
    """

    key: Any  # int | str, see ArgKey
    name: str
    ptr: int
    shape: tuple = ()
    dtype: str = ""
    nbytes: int = 0
    owner: str | None = None
    offset: int | None = None
    foreign: bool = False
    access: str = ""
    alloc: str | None = None

    @property
    def label(self) -> str:
        """What to call the buffer: the owner label, else the allocation label, else the pointer in hex
        (``"+<offset>"`` appended for an offset inside the buffer)."""
        name = self.owner if self.owner is not None else self.alloc
        if name is None:
            return f"0x{self.ptr:x}" if self.ptr else "null"
        if not self.offset:
            return name
        if self.owner is None:  # "State.x (springs.py:41)" -> "State.x+16 (springs.py:41)"
            head, sep, tail = name.rpartition(" (")
            if sep:
                return f"{head}+{self.offset} ({tail}"
        return f"{name}+{self.offset}"


@dataclasses.dataclass(frozen=True, slots=True)
class ValueStats:
    """Statistics of the values one array argument holds right after a launch wrote it (``value_stats`` on).

    Computed as Warp's ``ArrayStatsVisitor`` does: numpy's ``mean``/``std``/``min``/``max`` over every scalar of
    ``array.numpy()`` (vector and matrix components included; a NaN makes all four NaN). ``key`` is the
    argument's key, as in :attr:`LaunchRecord.arrays`. ``skipped`` says why there are no numbers:
    ``"too_large"`` (more values than ``value_stats_max_elements``), ``"dtype"`` (structs, raw bfloat16 bits),
    ``"error"`` (computing them failed; logged once).
    """

    key: Any
    mean: float | None = None
    std: float | None = None
    min: float | int | None = None
    max: float | int | None = None
    skipped: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceTime:
    """When a CUDA device ran a launch (``device_timing`` on), from two CUDA events around it.

    ``start_ns`` / ``end_ns`` are host wall-clock nanoseconds (mapped through a reference event, see
    ``docs/traces.md``); ``end_ns - start_ns`` is the events' elapsed time (resolution about 0.5 us).
    """

    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclasses.dataclass(frozen=True, slots=True)
class Fold:
    """The summary span a rebuilt record was expanded from: its times are not measured but laid out from the
    summary, so views draw the whole fold as one block (``start_ns`` .. ``end_ns``, ``count`` repetitions of
    ``period`` records) and statistics use the recorded ones of the record's ``position`` (nanoseconds; 0 when
    the span did not carry one). ``span_id`` (hex) tells one fold from the next."""

    span_id: str
    count: int
    period: int
    position: int
    start_ns: int
    end_ns: int
    min_ns: int = 0
    mean_ns: int = 0
    max_ns: int = 0
    p50_ns: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class LaunchRecord:
    """One recorded launch, copy, fill, primitive or graph launch.

    The first seven fields are those of the seed's ``LaunchRecord`` with the same meaning:

    - ``op``: ``"launch"``, ``"copy"``, ``"fill"``, ``"primitive"`` or ``"graph_launch"`` (an :class:`Op`
      value; compares equal to the plain string).
    - ``kernel``: ``"<warp module>.<kernel key>"`` for a launch, ``"wp.copy"`` / ``"wp.array.assign"`` for a
      copy, ``"wp.fill"`` / ``"wp.zero"`` for a fill, ``"warp.utils.array_scan"``-style names for primitives,
      ``"wp.capture_launch"`` for a graph launch.
    - ``dim``: the launch dimensions (a copy: ``(count or dest.size,)``; a fill: ``(size,)``).
    - ``stream``: the CUDA stream handle passed, ``None`` when none was (e.g. on the CPU).
    - ``arrays``: ``(key, pointer)`` of every array argument (inputs then outputs; a copy: dest 0, src 1).
    - ``scalars``: ``(key, value)`` of every other argument, NaN normalised to ``"nan"``.
    - ``site``: the emitting code.

    Beyond the seed: parameter names, block_dim / max_blocks, device, per-array shape / dtype / bytes / owner,
    thread, host start / end (ns since the epoch), the enclosing scope, and for captured work its graph.

    Graph capture: a record with ``captured=True`` did not run when it was issued; every ``graph_launch`` record
    of the same ``graph_id`` (unique across processes) ran all of them once. A replay carries ``graph_replay``
    (its ordinal for that graph in the process) and ``graph_launches`` (how many records the capture holds);
    :func:`launchtrace.topology.captured_graphs` maps graph ids to their captured records.
    """

    op: str
    kernel: str
    dim: tuple
    stream: int | None
    arrays: tuple
    scalars: tuple
    site: Site
    params: tuple = ()  # positional parameter names (kernel.adj.args[i].label; copy: dest, src, ...)
    buffers: tuple = ()  # BufferArg per entry of ``arrays``, same order
    block_dim: int | None = None
    max_blocks: int = 0
    device: str = ""
    thread: int = 0
    thread_name: str = ""
    start_ns: int = 0
    end_ns: int = 0
    scope_id: int | None = None
    graph_id: int | None = None  # captured work: the graph it belongs to; graph_launch: the graph replayed
    captured: bool = False  # issued while a graph capture was active (not executed at that time)
    adjoint: bool = False
    api: str = ""  # the public entry point that issued it ("wp.launch", "wp.Launch.launch", "wp.clone", ...)
    internal: bool = False  # emitted by code inside the warp package (fem, sparse, wp.clone's copy, ...)
    error: str | None = None  # "<ExceptionType>: message" when the call raised
    seq: int = 0  # process-wide order of capture events
    repeat: int = 1  # > 1 only for a record standing for folded repetitions (rebuilt from a summary span)
    module_hash: str = ""  # the compiled module's content hash, when known: tells builds apart
    probes: tuple = ()  # ValueStats / DeviceTime measured for this launch (optional, off by default)
    graph_replay: int = 0  # graph_launch: which replay of graph_id this is in the process (1, 2, ...); else 0
    graph_launches: int | None = None  # graph_launch: records captured into the graph (None: not recorded)
    # The materializer's earlier record this one was copied from (equal in all but start / end, seq and scope,
    # see capture.materialize), or None. The span builder reuses the template's fold key. Not compared.
    template: LaunchRecord | None = dataclasses.field(default=None, compare=False, repr=False)
    # Rebuilt from a folded summary span (its times laid out, not measured), or None. Not compared.
    fold: Fold | None = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.op} {self.kernel} dim={self.dim} from {self.site}"

    @property
    def ok(self) -> bool:
        """Whether the call returned normally."""
        return self.error is None

    @property
    def duration_ns(self) -> int:
        """Host wall time of the call (on the CPU device: the kernel's own run time)."""
        return max(0, self.end_ns - self.start_ns)

    @property
    def nbytes(self) -> int:
        """Bytes touched: the sum of the array arguments' sizes (a copy: the bytes moved)."""
        return sum(b.nbytes for b in self.buffers)

    def arg_name(self, key: Any) -> str:
        """The parameter name of argument ``key`` (``3`` -> ``"state"``, ``"3.pos"`` -> ``"state.pos"``)."""
        if isinstance(key, int):
            return self.params[key] if 0 <= key < len(self.params) else str(key)
        if str(key).startswith("adj:"):  # the adjoint of argument i ("adj:3"), or of a struct field ("adj:3.pos")
            inner = str(key)[4:]
            return "adj_" + self.arg_name(int(inner) if inner.isdigit() else inner)
        head, _, rest = str(key).partition(".")
        try:
            base = self.params[int(head)]
        except (ValueError, IndexError):
            return str(key)
        return f"{base}.{rest}" if rest else base

    @property
    def copies_host_data(self) -> bool:
        """Whether this is a copy whose unowned side is the program's own host memory (one of
        :data:`HOST_DATA_APIS`: ``wp.array(numpy_array)`` copies from it, ``array.numpy()`` into it)."""
        return self.op == "copy" and self.api in HOST_DATA_APIS

    def host_data(self, buf: BufferArg) -> bool:
        """Whether ``buf`` is the program's own host memory: a non-null argument of a copy of host data that
        no owner covers and Warp did not allocate (the Warp array's side is an allocation the capture saw)."""
        return bool(buf.ptr) and buf.owner is None and buf.alloc is None and self.copies_host_data

    def buffer_label(self, buf: BufferArg) -> str:
        """What every view calls argument ``buf`` of this record: :attr:`BufferArg.label` (owner, else
        allocation, else pointer), except the program's host memory (:meth:`host_data`), which is
        ``"<host data> (prog.py:23)"``: ``diff``'s name with the copy's call site, as an allocation's label
        carries its statement's, never the address of a NumPy temporary (meaningless to the reader, and
        another every step)."""
        if not self.host_data(buf):
            return buf.label
        site = self.site
        return f"{HOST_DATA} ({os.path.basename(site.file)}:{site.line})" if site.line else HOST_DATA

    def buffer(self, key: Any) -> BufferArg | None:
        """The :class:`BufferArg` of array argument ``key``, if any."""
        for b in self.buffers:
            if b.key == key:
                return b
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class ScopeRecord:
    """One scope: a ``wp.Tape`` scope, a ``wp.ScopedTimer`` or a ``launchtrace.scope``.

    ``parent_id`` nests scopes per thread. ``internal`` marks Warp's own timers ("Compile x86"), kept out of
    exports by default. ``end_ns`` is 0 while the scope is still open. ``remote_parent``: for an outermost
    scope opened inside a span of the application's own tracing, that span's ``(trace_id, span_id,
    trace_flags)`` (16 and 8 bytes, an int), else ``None``.
    """

    id: int
    name: str
    kind: str
    parent_id: int | None = None
    attributes: tuple = ()  # ((key, value), ...)
    thread: int = 0
    thread_name: str = ""
    start_ns: int = 0
    end_ns: int = 0
    error: str | None = None
    internal: bool = False
    site: Site | None = None
    seq: int = 0
    remote_parent: tuple[bytes, bytes, int] | None = None

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


@dataclasses.dataclass
class TraceData:
    """Records and scopes that belong together (one capture block, or one trace rebuilt from spans)."""

    records: list[LaunchRecord] = dataclasses.field(default_factory=list)
    scopes: dict[int, ScopeRecord] = dataclasses.field(default_factory=dict)
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)  # resource attributes, trace id, ...

    def __iter__(self) -> Iterator[LaunchRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def scope_path(self, scope_id: int | None) -> tuple[str, ...]:
        """Names of the scopes enclosing ``scope_id``, outermost first."""
        names: list[str] = []
        seen: set[int] = set()
        while scope_id is not None and scope_id in self.scopes and scope_id not in seen:
            seen.add(scope_id)
            scope = self.scopes[scope_id]
            names.append(scope.name)
            scope_id = scope.parent_id
        return tuple(reversed(names))
