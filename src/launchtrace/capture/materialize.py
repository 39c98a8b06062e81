"""Raw capture tuples -> :class:`LaunchRecord` / :class:`ScopeRecord`, off the hot path.

Names (``"<module>.<key>"``), parameter labels (``kernel.adj.args[i].label``), read/write access (what Warp's
code generator recorded in ``adj.args[i].is_read / is_write``, else the kernel's syntax tree
(:mod:`launchtrace.capture.access`), else the inputs/outputs split), owners (the owner
registry as it stood at the record's sequence number) and NaN normalisation all happen here, so the launching
thread only paid for copying plain values.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import re
from collections.abc import Callable
from typing import Any

from launchtrace import native
from launchtrace.allocations import ALLOCATIONS
from launchtrace.capture import bus, probes
from launchtrace.capture.access import kernel_access
from launchtrace.capture.graphcontent import GraphContents
from launchtrace.capture.hotpath import ARR, FLAT, HANDLES, STRUCT, is_internal_entry, is_warp_code
from launchtrace.capture.objects import HANDLE_NAMES
from launchtrace.capture.state import THREAD_NAMES, graphs_begun
from launchtrace.fastinit import slot_constructor, slot_copier
from launchtrace.model import UNKNOWN_SITE, BufferArg, LaunchRecord, Op, ScopeRecord, Site
from launchtrace.ownership import OWNERS
from launchtrace.rawevent import (
    A_PARENT,
    APP_SPAN,
    F_DECODE,
    FRAMEWORK,
    KIND,
    N_RECORD,
    P_RECORD,
    P_RESULTS,
    PROBED,
    R_CALLER,
    R_CODE,
    R_DEVICE,
    R_DIM,
    R_ENTRY,
    R_ERROR,
    R_GRAPH,
    R_KERNEL,
    R_LINE,
    R_MODULE,
    R_N_INPUTS,
    R_PAYLOAD,
    R_SCOPE,
    R_T0,
    R_T1,
    R_VALUES,
    RECORD,
    S_REMOTE_PARENT,
    SCOPE_BEGIN,
    SCOPE_END,
    SEQ,
    TID,
    check_compiled,
)

__all__ = ["Materializer", "materialize"]

_log = logging.getLogger("launchtrace.capture")

COPY_PARAMS = ("dest", "src", "dest_offset", "src_offset", "count")
FILL_PARAMS = ("array", "value")

_COPY_APIS = {
    "clone": "wp.clone",
    "assign": "wp.array.assign",
    "to": "wp.array.to",
    "numpy": "wp.array.numpy",
    "contiguous": "wp.array.contiguous",
    "__init__": "wp.array",
    "_init_from_data": "wp.array",
    "_init_from_array": "wp.array",
}


_UNIQUE_TAIL = re.compile(r"_([0-9a-f]{8})$")


def kernel_name(kernel: Any) -> str:
    """``module.key``, as Warp names a kernel; for one defined inside a function, the function's own dotted name
    (``__main__.make.<locals>.axpy``, where Warp's key reads ``make__locals__axpy``), and for one made with
    ``module="unique"``, whose module Warp names after the key and the kernel's hash, the hash after a ``#``
    (``__main__.make.<locals>.axpy#fb888011``): the code reads as it was written, and each instance a factory
    makes keeps a name of its own. A kernel that closes over variables of its factory (``factor`` in
    ``make_scaler(factor)``) is one kernel per value in one module: each gets Warp's hash of that kernel after a
    ``#`` too (``__main__.make_scaler.<locals>.scale_k#6a1aefd7``; before, ``make_scaler(0.5)`` and
    ``make_scaler(2.0)`` were one name, and a changed factor diffed as equal)."""
    module = getattr(getattr(kernel, "module", None), "name", None)
    key = getattr(kernel, "key", None) or getattr(kernel, "__name__", repr(kernel))
    func = getattr(kernel, "func", None)
    qualname, home = getattr(func, "__qualname__", None), getattr(func, "__module__", None)
    named_after_func = (
        isinstance(qualname, str)
        and isinstance(home, str)
        and isinstance(module, str)
        and key == re.sub("[^0-9a-zA-Z_]+", "", qualname.replace(".", "__"))  # Warp's key for the function
    )
    if named_after_func:
        unique = _UNIQUE_TAIL.search(module) if module.startswith(f"{key}_") else None
        if unique is not None:
            return f"{home}.{qualname}#{unique.group(1)}"
        if module == home:
            return f"{home}.{qualname}{_closure_hash(kernel, func)}"
    return f"{module}.{key}" if module else str(key)


def _closure_hash(kernel: Any, func: Any) -> str:
    """``#<Warp's hash of the kernel>`` for a kernel whose function closes over variables, else ``""`` (also
    while its module is not built yet: :func:`_kernel_info` asks again)."""
    if not getattr(func, "__closure__", None):
        return ""
    try:
        tail = _UNIQUE_TAIL.search(kernel.get_mangled_name())
    except Exception:  # no hash before the module is built (a launch that raised before it)
        return ""
    return f"#{tail.group(1)}" if tail else ""


def _pending(kernel: Any, name: str) -> bool:
    """Whether ``name`` still lacks the closure hash the kernel will have once its module is built."""
    return "#" not in name and bool(getattr(getattr(kernel, "func", None), "__closure__", None))


class _KernelInfo:
    __slots__ = ("access", "checked_in", "name", "params", "pending", "syntax")

    def __init__(self, kernel: Any) -> None:
        self.name = kernel_name(kernel)
        self.pending = _pending(kernel, self.name)
        args = getattr(getattr(kernel, "adj", None), "args", None) or ()
        self.params = tuple(str(getattr(a, "label", i)) for i, a in enumerate(args))
        self.access = None
        self.checked_in = -1  # the drain (Materializer.run) in which the code generator last had nothing
        self.syntax = kernel_access(kernel)  # {"x": "r", "p.pos": "w"} from the kernel's AST, or None

    def access_of(self, kernel: Any, run: int = -1) -> tuple | None:
        """Per parameter ``"r"``/``"w"``/``"rw"``/``""`` from the code generator, once it has run.

        A kernel loaded from Warp's cache never runs the code generator, so "nothing yet" is asked again
        only once per drain ``run`` (the answer is read at drain time either way)."""
        if self.access is None and (run < 0 or run != self.checked_in):
            self.checked_in = run
            args = getattr(getattr(kernel, "adj", None), "args", None) or ()
            flags = [(bool(getattr(a, "is_read", False)), bool(getattr(a, "is_write", False))) for a in args]
            if any(r or w for r, w in flags):
                self.access = tuple(("r" if r else "") + ("w" if w else "") for r, w in flags)
        return self.access


_kernels: dict[int, tuple[Any, _KernelInfo]] = {}


LAUNCH_FIELDS = (
    "op",
    "kernel",
    "dim",
    "stream",
    "arrays",
    "scalars",
    "site",
    "params",
    "buffers",
    "block_dim",
    "max_blocks",
    "device",
    "thread",
    "thread_name",
    "start_ns",
    "end_ns",
    "scope_id",
    "graph_id",
    "captured",
    "adjoint",
    "api",
    "internal",
    "error",
    "seq",
)
"""The fields :func:`make_launch_record` takes, in its positional order."""

make_launch_record: Callable[..., LaunchRecord] = slot_constructor(LaunchRecord, LAUNCH_FIELDS)
_copy_launch: Callable[..., LaunchRecord] = slot_copier(
    LaunchRecord, ("start_ns", "end_ns", "scope_id", "seq", "template")
)
_make_site: Callable[..., Site] = slot_constructor(Site, ("file", "line", "function", "module"))
make_buffer_arg: Callable[..., BufferArg] = slot_constructor(
    BufferArg, ("key", "name", "ptr", "shape", "dtype", "nbytes", "owner", "offset", "foreign", "access", "alloc")
)


def _kernel_info(kernel: Any) -> _KernelInfo:
    hit = _kernels.get(id(kernel))
    if hit is None or hit[0] is not kernel or (hit[1].pending and not _pending(kernel, kernel_name(kernel))):
        hit = (kernel, _KernelInfo(kernel))
        _kernels[id(kernel)] = hit
    return hit[1]


_sites: dict[tuple, tuple[Any, Site]] = {}


def _site(code: Any, line: int, module: str) -> Site:
    key = (id(code), line)  # by id, checked with ``is``: hashing a code object is slow (see hotpath)
    hit = _sites.get(key)
    if hit is None or hit[0] is not code:
        if len(_sites) > 100_000:
            _sites.clear()
        hit = _sites[key] = (code, _make_site(code.co_filename, int(line), code.co_name, module or ""))
    return hit[1]


def _normalise(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, tuple):
        return tuple(_normalise(v) for v in value)
    return value


def _dim(dim: Any) -> tuple:
    if isinstance(dim, int):
        return (int(dim),)
    try:
        return tuple(int(d) for d in dim)
    except TypeError:
        return (repr(dim),)


def _buffer_arg(
    make: Callable[..., BufferArg],
    key: Any,
    name: str,
    ptr: int,
    shape: Any,
    dtype: Any,
    nbytes: Any,
    owner: Any,
    offset: Any,
    foreign: bool,
    access: str,
    alloc: str | None = None,
) -> BufferArg:
    """One array argument's :class:`BufferArg` from the captured fields, by ``make`` (the class itself on the
    general path, its fast :data:`make_buffer_arg` on the interned ones: the general path stays the reference)."""
    return make(
        key, name, ptr, tuple(shape or ()), _dtype_name(dtype), int(nbytes), owner, offset, foreign, access, alloc
    )


class _Labels:
    """The owner registry and the allocation registry as one source of answers for the launch templates
    (:meth:`Materializer._launch_flat`): its version moves when either one's does."""

    __slots__ = ("_owners_seq", "_owners_version")

    def __init__(self) -> None:
        self._owners_version: Any = None
        self._owners_seq = 0

    def changed(self) -> tuple[int, int]:
        return (OWNERS.changed(), ALLOCATIONS.changed())

    def version_dicts(self) -> tuple[dict, dict]:
        """Where :meth:`changed`'s two ticks live (each registry's ``_version``, what its ``changed()`` returns):
        the compiled template hits (``_fastmat.c``) read them per event there instead of calling back into Python."""
        return (vars(OWNERS), vars(ALLOCATIONS))

    def last_change_seq(self) -> int:
        # The owner registry's answer walks its entries: asked again only when it changed, not at every
        # allocation (which moves this object's version far more often than own() does).
        version = OWNERS.changed()
        if version != self._owners_version:
            self._owners_seq = OWNERS.last_change_seq()
            self._owners_version = version
        return max(self._owners_seq, ALLOCATIONS.last_change_seq())


LABELS = _Labels()


def alloc_of(cache: dict, ptr: int, seq: int, kernel: str, param: str) -> tuple[str | None, int | None]:
    """``(allocation label, byte offset)`` of an unowned ``ptr`` at ``seq``, or ``(None, None)``.

    ``cache`` (``ptr -> (allocation, offset)``) answers without a search while the allocation it holds is
    live at ``seq``: live allocations never overlap, so that one is the answer. ``kernel`` / ``param``: the
    use, which names an allocation its statement does not (first use wins; ``kernel`` empty: Warp's own work,
    such as the fill inside ``wp.zeros``, which names nothing)."""
    hit = cache.get(ptr)
    if hit is None or not hit[0].born <= seq < hit[0].died:
        hit = ALLOCATIONS.locate(ptr, seq)
        if hit is None:
            return None, None
        if len(cache) >= Materializer.max_interned:
            cache.clear()
        cache[ptr] = hit
    entry, offset = hit
    label = entry.label_text
    if label is None:
        label = ALLOCATIONS.label(entry, kernel.rpartition(".")[2], param, keep=bool(kernel))
    return label, offset


def _dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "__name__", dtype))


def _device_name(device: Any) -> str:
    if device is None:
        return ""
    return str(getattr(device, "alias", device))


_fastmat = native.load("launchtrace.capture._fastmat")  # Materializer.run's template hits, compiled, or None
if _fastmat is not None:
    check_compiled(_fastmat)


_runs = itertools.count()
_device_names: dict[int, tuple[Any, str]] = {}


def _device_name_cached(device: Any) -> str:
    hit = _device_names.get(id(device))
    if hit is None or hit[0] is not device:
        hit = _device_names[id(device)] = (device, _device_name(device))
    return hit[1]


class _LaunchLayout:
    """What stays the same between launches of one kernel with one argument layout: parameter names and the
    access mode of each position, resolved once exactly as :class:`_Args` would per record."""

    __slots__ = ("modes", "names")

    def __init__(self, info: _KernelInfo, access: tuple | None, n_values: int, n_inputs: int) -> None:
        params, syntax = info.params, info.syntax
        self.names = tuple(params[i] if i < len(params) else str(i) for i in range(n_values))
        modes = []
        for i, name in enumerate(self.names):
            if access is not None and i < len(access):
                modes.append(access[i])
            elif syntax is not None:
                modes.append(syntax.get(name) or syntax.get(name.split(".")[0], ""))
            elif n_inputs >= 0:
                modes.append("r" if i < n_inputs else "w")
            else:
                modes.append("")
        self.modes = tuple(modes)


class Materializer:
    """Turns one subscription's raw events into records; remembers open scopes between drains.

    Repeated launches take a fast path (:meth:`_launch`): the per-kernel layout is computed once, and equal
    array arguments (same position, pointer, shape, dtype, size and owner answer) share one frozen
    :class:`BufferArg`, so a repeated launch only looks up owners and fills pointers, scalars and times.
    """

    max_interned = 8192  # distinct array arguments (and owner answers) remembered: a few MB at most

    def __init__(self) -> None:
        self.open_scopes: dict[int, ScopeRecord] = {}
        self._layouts: dict[tuple, _LaunchLayout] = {}
        self._interned: dict[tuple, tuple[BufferArg, tuple]] = {}
        self._apis: dict[int, tuple[Any, str]] = {}  # id(caller code) -> (code, api)
        self._run = -1
        self._owners_version = -1  # the owner registry's version the cached answers belong to
        self._owners_since = 0  # its last change seq: cached answers hold for records at or after it
        self._owners_cache: dict[int, tuple] = {}  # ptr -> (owner, offset, foreign)
        self._allocs_cache: dict[int, tuple] = {}  # ptr -> (Allocation, offset): see alloc_of
        self._templates: dict[tuple, tuple] = {}  # see _launch_flat: key -> (record, code, caller)
        self._templates_version: Any = -1
        self._templates_since = 0
        self._load_ends: dict[int, list[int]] = {}  # thread -> [end of a module load its next record may
        # contain, drains left to wait for that record]
        self._loaded = False  # a module load ended in this drain
        self._graphs = GraphContents()  # each replay's fingerprint of its graph (launchtrace.capture.graphcontent)

    def _intern_buffer(
        self,
        bkey: tuple,
        layout: Any,
        ptr: int,
        shape: Any,
        dtype: Any,
        nbytes: int,
        owner: Any,
        offset: Any,
        foreign: bool,
        alloc: str | None = None,
    ) -> tuple:
        """The ``(BufferArg, (index, ptr))`` entry for array argument ``bkey[1]`` of ``layout``, built and
        interned under ``bkey`` (an intern miss of :meth:`_launch` or :meth:`_launch_flat_built`)."""
        interned = self._interned
        if len(interned) >= self.max_interned:
            interned.clear()
        i = bkey[1]
        buf = _buffer_arg(
            make_buffer_arg, i, layout.names[i], ptr, shape, dtype, nbytes, owner, offset, foreign, layout.modes[i],
            alloc,
        )  # fmt: skip
        entry = interned[bkey] = (buf, (i, ptr))
        return entry

    def _owner_of(self, registry: Any, ptr: int, seq: int) -> tuple:
        """``(owner, offset, foreign)`` of ``ptr`` at ``seq``, as ``registry.locate`` / ``any_at`` answer.

        Between two changes of the registry the answer for a pointer is the same for every record at or after
        the registry's last change, so it is cached per pointer for those records (a look-up is a search that
        grows with the owned buffers, once per array argument); older records and any change go to the
        registry."""
        version = registry.changed()
        if version != self._owners_version:
            self._owners_version = version
            self._owners_since = registry.last_change_seq()
            self._owners_cache.clear()
        cacheable = seq >= self._owners_since
        if cacheable:
            hit = self._owners_cache.get(ptr)
            if hit is not None:
                return hit
        found = registry.locate(ptr, seq)
        answer = (*found, False) if found is not None else (None, None, bool(registry.any_at(seq)))
        if cacheable:
            if len(self._owners_cache) >= self.max_interned:
                self._owners_cache.clear()
            self._owners_cache[ptr] = answer
        return answer

    def run(self, raw: list[tuple]) -> list[tuple[str, object]]:
        self._run = next(_runs)
        self._templates.clear()  # access modes may have become known since the last drain
        out: list[tuple[str, object]] = []
        hits = _fastmat.template_hits if _fastmat is not None and type(raw) is list else None
        labels = LABELS.version_dicts() if hits is not None else None
        i, n = 0, len(raw)
        while i < n:
            if hits is not None:  # the run of template hits from here, compiled (_launch_flat's hits)
                try:
                    i = hits(
                        raw, i, out, self._templates, labels, self._templates_version, self._templates_since,
                        THREAD_NAMES, _copy_launch, RECORD, FLAT,
                    )  # fmt: skip
                except TypeError:  # wrong arguments (raised before appending anything): the Python path
                    hits = None
                if i >= n:
                    break
            event = raw[i]
            i += 1
            kind = event[KIND]
            try:
                if kind == RECORD:
                    out.append(("record", self.record(event)))
                elif kind == SCOPE_BEGIN:
                    out.append(("scope_begin", self.scope_begin(event)))
                elif kind == SCOPE_END:
                    out.append(("scope_end", self.scope_end(event)))
                elif kind == PROBED:
                    out.append(("record", self.probed(event)))
                elif kind == APP_SPAN:  # (thread, the application's active span or None)
                    out.append(("app_span", (event[TID], event[A_PARENT])))
                elif kind == FRAMEWORK:  # tinygrad (launchtrace.capture.tinygrad): its own layout and decoder
                    out.append(("record", event[F_DECODE](event)))
            except Exception:
                _log.warning("launchtrace: could not materialise a capture event; skipped", exc_info=True)
        if self._load_ends or self._loaded:
            self._loaded = False
            _start_after_loads(out, self._load_ends)
        if graphs_begun[0]:
            self._graphs.feed(out)
        return out

    _probe_run = -1  # the drain whose wait deadline for device timing is _probe_deadline
    _probe_deadline = 0.0

    def probed(self, e: tuple) -> LaunchRecord:
        """A record measured by :mod:`launchtrace.capture.probes`: its record, plus the measurements (device
        timing waits for the CUDA events at most until one deadline per drain, then goes without)."""
        if self._probe_run != self._run:
            self._probe_run, self._probe_deadline = self._run, probes.wait_deadline()
        return probes.attach(self.record(e[P_RECORD]), e[P_RESULTS], self._probe_deadline)

    # -- scopes ------------------------------------------------------------------------------------------------

    def scope_begin(self, e: tuple) -> ScopeRecord:
        _, seq, tid, sid, parent, name, kind, attrs, t0, site, internal = e[:S_REMOTE_PARENT]
        scope = ScopeRecord(
            id=sid,
            name=name,
            kind=kind,
            parent_id=parent,
            attributes=tuple((str(k), _normalise(v)) for k, v in attrs),
            thread=tid,
            thread_name=THREAD_NAMES.get(tid, ""),
            start_ns=t0,
            internal=bool(internal),
            site=_site(*site[:3]) if site else None,
            seq=seq,
            remote_parent=e[S_REMOTE_PARENT] if len(e) > S_REMOTE_PARENT else None,
        )
        self.open_scopes[sid] = scope
        return scope

    def scope_end(self, e: tuple) -> ScopeRecord:
        _, seq, tid, sid, t1, error = e[:6]
        begun = self.open_scopes.pop(sid, None)
        if begun is None:  # subscribed after it began
            begun = ScopeRecord(id=sid, name="<unknown>", kind="user", thread=tid, start_ns=t1, seq=seq)
        if begun.kind == "load":  # the launch it ran inside starts where it ended (_start_after_loads)
            self._loaded = True
        if len(e) > 6:  # attributes known only at the end (a module load's result)
            extra = tuple((str(k), _normalise(v)) for k, v in e[6])
            return dataclasses.replace(begun, end_ns=t1, error=error, attributes=begun.attributes + extra)
        return dataclasses.replace(begun, end_ns=t1, error=error)  # the begin, ended

    # -- records -----------------------------------------------------------------------------------------------

    def record(self, e: tuple) -> LaunchRecord:
        if e[R_PAYLOAD] is FLAT:
            rec = self._launch_flat(e)
            if rec is not None:
                return rec
            e = unflatten(e)
        if e[R_ENTRY] == "launch" and not e[R_PAYLOAD][9]:  # a launch without adjoint arrays: the fast path
            rec = self._launch(e)
            if rec is not None:
                return rec
        _, seq, tid, kind, payload, code, line, module, caller, t0, t1, scope, graph, error = e
        site = _site(code, line, module) if code is not None else UNKNOWN_SITE
        internal = is_internal_entry(caller) if caller is not None else False
        common = dict(
            site=site,
            thread=tid,
            thread_name=THREAD_NAMES.get(tid, ""),
            start_ns=t0,
            end_ns=t1,
            scope_id=scope,
            internal=internal,
            error=error,
            seq=seq,
        )
        if graph is not None and kind != "graph_launch":
            common.update(graph_id=graph, captured=True)
        return _BUILDERS[kind](payload, seq, caller, common)

    def _launch(self, e: tuple) -> LaunchRecord | None:
        """:func:`_build_launch` for the common case, or ``None`` (struct arguments, unhashable values) to
        take the general path. Same record, field for field (tested against the general path)."""
        _, seq, tid, _kind, payload, code, line, module, caller, t0, t1, scope, graph, error = e
        kernel, dim, values, n_inputs, device, stream, block_dim, max_blocks, adjoint, _adj = payload
        info = _kernel_info(kernel)
        access = info.access_of(kernel, self._run)
        n_values = len(values)
        lkey = (info, n_values, n_inputs, access)
        layout = self._layouts.get(lkey)
        if layout is None:
            layout = self._layouts[lkey] = _LaunchLayout(info, access, n_values, n_inputs)
        registry = OWNERS
        interned = self._interned
        arrays: list[tuple] = []
        scalars: list[tuple] = []
        buffers: list[BufferArg] = []
        arg_device = ""
        for i, v in enumerate(values):
            t = type(v)
            if t is tuple and v:
                head = v[0]
                if head is ARR:
                    _, ptr, shape, dtype, nbytes, dev, _indexed = v
                    owner = offset = alloc = None
                    foreign = False
                    if ptr:
                        owner, offset, foreign = self._owner_of(registry, ptr, seq)
                        if owner is None:
                            alloc, offset = alloc_of(self._allocs_cache, ptr, seq, info.name, layout.names[i])
                    if not arg_device and dev is not None:
                        arg_device = _device_name_cached(dev)
                    bkey = (layout, i, ptr, shape, dtype, nbytes, owner, offset, foreign, alloc)
                    try:
                        entry = interned.get(bkey)
                    except TypeError:  # an unhashable shape or dtype: the general path
                        return None
                    if entry is None:
                        entry = self._intern_buffer(
                            bkey, layout, ptr, shape, dtype, nbytes, owner, offset, foreign, alloc
                        )
                    arrays.append(entry[1])
                    buffers.append(entry[0])
                    continue
                if head is STRUCT:
                    return None
            if t is int and v in HANDLE_NAMES:  # a Mesh / HashGrid / ... handle: the object's name
                scalars.append((i, HANDLE_NAMES.get(v, v)))
            elif t is int or t is str or t is bool or v is None:
                scalars.append((i, v))
            else:
                scalars.append((i, _normalise(v)))
        return self._record_of(
            info,
            dim,
            stream,
            arrays,
            scalars,
            code,
            line,
            module,
            caller,
            buffers,
            block_dim,
            max_blocks,
            device,
            arg_device,
            tid,
            t0,
            t1,
            scope,
            graph,
            adjoint,
            error,
            seq,
        )

    def _record_of(
        self,
        info: _KernelInfo,
        dim: Any,
        stream: Any,
        arrays: list,
        scalars: list,
        code: Any,
        line: int,
        module: str,
        caller: Any,
        buffers: list,
        block_dim: Any,
        max_blocks: Any,
        device: Any,
        arg_device: str,
        tid: int,
        t0: int,
        t1: int,
        scope: Any,
        graph: Any,
        adjoint: bool,
        error: Any,
        seq: int,
    ) -> LaunchRecord:
        """The ``LaunchRecord`` both fast paths end in (the flat one passes no stream, block_dim or adjoint)."""
        api = self._apis.get(id(caller))
        if api is None or api[0] is not caller:
            api = self._apis[id(caller)] = (caller, _launch_api(caller))
        return make_launch_record(
            "launch",
            info.name,
            (dim,) if type(dim) is int else _dim(dim),
            stream,
            tuple(arrays),
            tuple(scalars),
            _site(code, line, module) if code is not None else UNKNOWN_SITE,
            info.params,
            tuple(buffers),
            block_dim,
            int(max_blocks or 0),
            (_device_name_cached(device) if device is not None else "") or arg_device,
            tid,
            THREAD_NAMES.get(tid, ""),
            t0,
            t1,
            scope,
            graph,
            graph is not None,
            adjoint,
            api[1],
            is_internal_entry(caller) if caller is not None else False,
            error,
            seq,
        )

    def _launch_flat(self, e: tuple) -> LaunchRecord | None:
        """:meth:`_launch_flat_built` through this drain's launch templates.

        A launch equal to an earlier one of the same drain in everything but its sequence number, times and
        scope (same thread, call site, kernel, dims, device, array pointers / shapes / dtypes / sizes, scalar
        values *and types*) is a copy of that record with those four changed, and points to it as its
        ``template`` (the span builder then reuses the template's fold key). Exact by construction:

        - the key holds every other part of the event, and each value's type (``1``, ``1.0`` and ``True`` are
          equal in Python but not in a span); a float zero never enters the cache (``0.0 == -0.0``);
        - owner and allocation answers: templates are dropped when the owner registry or the allocation
          registry changes (:data:`LABELS`), and used only for events at or after their last change (as
          :meth:`_owner_of` caches answers);
        - access modes can become known between drains (Warp's code generator ran): templates last one drain;
        - code objects are keyed by identity and kept, so a reused ``id`` cannot match.
        """
        tail = e[R_GRAPH:]  # graph, error, kernel, dim, n_inputs, device, arguments...
        if e[R_ERROR] is not None:  # an error: unique, and rare
            return self._launch_flat_built(e)
        seq = e[SEQ]
        version = LABELS.changed()
        if version != self._templates_version:
            self._templates_version = version
            self._templates_since = LABELS.last_change_seq()
            self._templates.clear()
        if seq < self._templates_since:
            return self._launch_flat_built(e)
        code, caller, tid = e[R_CODE], e[R_CALLER], e[TID]
        key = (tid, id(code), e[R_LINE], e[R_MODULE], id(caller), *tail, *map(type, tail))
        templates = self._templates
        try:
            hit = templates.get(key)
        except TypeError:  # an unhashable part (``dim=[4]``, a list): no template, the record all the same
            return self._launch_flat_built(e)
        if hit is not None:
            proto = hit[0]
            if hit[1] is code and hit[2] is caller and proto.thread_name == THREAD_NAMES.get(tid, ""):
                return _copy_launch(proto, e[R_T0], e[R_T1], e[R_SCOPE], seq, proto)
        rec = self._launch_flat_built(e)
        if rec is not None and not any(type(v) is float and v == 0.0 for v in tail):
            if len(templates) >= self.max_interned:
                templates.clear()
            templates[key] = (rec, code, caller)
        return rec

    def _launch_flat_built(self, e: tuple) -> LaunchRecord | None:
        """:meth:`_launch` straight from a flat event (no nested payload rebuilt), or ``None``."""
        handles = HANDLES
        flat = e[R_VALUES:]
        kernel = handles[e[R_KERNEL]]
        n_inputs = e[R_N_INPUTS]
        info = _kernel_info(kernel)
        access = info.access_of(kernel, self._run)
        n_values = len(flat) - 5 * flat.count(ARR)  # holds only plain scalars, ARR marks and array fields
        lkey = (info, n_values, n_inputs, access)
        layout = self._layouts.get(lkey)
        if layout is None:
            layout = self._layouts[lkey] = _LaunchLayout(info, access, n_values, n_inputs)
        seq = e[SEQ]
        registry = OWNERS
        interned = self._interned
        arrays: list[tuple] = []
        scalars: list[tuple] = []
        buffers: list[BufferArg] = []
        arg_device = ""
        i = j = 0
        n = len(flat)
        while j < n:
            v = flat[j]
            if v is ARR:
                ptr, shape, dtype_id, nbytes, device_id = flat[j + 1 : j + 6]
                j += 6
                owner = offset = alloc = None
                foreign = False
                if ptr:
                    owner, offset, foreign = self._owner_of(registry, ptr, seq)
                    if owner is None:
                        alloc, offset = alloc_of(self._allocs_cache, ptr, seq, info.name, layout.names[i])
                if not arg_device:
                    arg_device = _device_name_cached(handles[device_id])
                bkey = (layout, i, ptr, shape, dtype_id, nbytes, owner, offset, foreign, alloc)
                entry = interned.get(bkey)
                if entry is None:
                    dtype = handles[dtype_id]
                    entry = self._intern_buffer(bkey, layout, ptr, shape, dtype, nbytes, owner, offset, foreign, alloc)
                arrays.append(entry[1])
                buffers.append(entry[0])
            else:
                j += 1
                t = type(v)
                if t is int and v in HANDLE_NAMES:  # a Mesh / HashGrid / ... handle: the object's name
                    scalars.append((i, HANDLE_NAMES.get(v, v)))
                elif t is int or t is str or t is bool or v is None:
                    scalars.append((i, v))
                else:
                    scalars.append((i, _normalise(v)))
            i += 1
        _, seq, tid, _kind, _flat, code, line, module, caller, t0, t1, scope, graph, error = e[:N_RECORD]
        dim, device = e[R_DIM], e[R_DEVICE]
        if type(device) is int:  # a Device, by id
            device = handles[device]
        return self._record_of(
            info,
            dim,
            None,
            arrays,
            scalars,
            code,
            line,
            module,
            caller,
            buffers,
            None,
            0,
            device,
            arg_device,
            tid,
            t0,
            t1,
            scope,
            graph,
            False,
            error,
            seq,
        )


def unflatten(e: tuple) -> tuple:
    """A flat launch event (``wrap_launch``'s common case) as the nested event ``extract_launch`` would give:
    ``(..., (kernel, dim, values, n_inputs, device, None, None, 0, False, ()), ...)`` with arrays as
    ``(ARR, ptr, shape, dtype, capacity, device, False)``."""
    handles = HANDLES
    values: list[Any] = []
    flat = e[R_VALUES:]
    i, n = 0, len(flat)
    while i < n:
        v = flat[i]
        if v is ARR:
            values.append(
                (ARR, flat[i + 1], flat[i + 2], handles[flat[i + 3]], flat[i + 4], handles[flat[i + 5]], False)
            )
            i += 6
        else:
            values.append(v)
            i += 1
    device = e[R_DEVICE]
    if type(device) is int:  # a Device, by id
        device = handles[device]
    payload = (handles[e[R_KERNEL]], e[R_DIM], tuple(values), e[R_N_INPUTS], device, None, None, 0, False, ())
    return (*e[:R_PAYLOAD], payload, *e[R_CODE:N_RECORD])


class _Args:
    """Accumulates the ``arrays`` / ``scalars`` / ``buffers`` of one record."""

    __slots__ = ("arrays", "buffers", "device", "kernel", "params", "registry", "scalars", "seq")

    def __init__(self, params: tuple, seq: int, kernel: str = "") -> None:
        self.params = params
        self.seq = seq
        self.kernel = kernel  # names an allocation by its first use (alloc_of)
        self.arrays: list[tuple] = []
        self.scalars: list[tuple] = []
        self.buffers: list[BufferArg] = []
        self.device: str = ""
        self.registry = OWNERS

    def name(self, key: Any) -> str:
        if isinstance(key, int):
            return self.params[key] if key < len(self.params) else str(key)
        text = str(key)
        if text.startswith("adj:"):  # "adj:3", or "adj:3.pos" for a field of a struct argument's adjoint
            inner = text[4:]
            return "adj_" + self.name(int(inner) if inner.isdigit() else inner)
        head, _, rest = text.partition(".")
        try:
            base = self.params[int(head)]
        except (ValueError, IndexError):
            return text
        return f"{base}.{rest}"

    def add(self, key: Any, value: Any, access: str | None = "", syntax: dict | None = None) -> None:
        """Add one argument; ``access`` ``None`` means: look the argument's name up in ``syntax``."""
        if type(value) is tuple and value and value[0] is ARR:
            _, ptr, shape, dtype, nbytes, device, _indexed = value
            owner = offset = alloc = None
            foreign = False
            registry = self.registry
            name = self.name(key)
            if ptr:
                hit = registry.locate(ptr, self.seq)
                if hit is not None:
                    owner, offset = hit
                else:
                    foreign = bool(registry.any_at(self.seq))
                    alloc, offset = alloc_of({}, ptr, self.seq, self.kernel, name)
            if not self.device and device is not None:
                self.device = _device_name(device)
            if access is None:
                access = (syntax or {}).get(name) or (syntax or {}).get(name.split(".")[0], "")
            self.arrays.append((key, ptr))
            self.buffers.append(
                _buffer_arg(BufferArg, key, name, ptr, shape, dtype, nbytes, owner, offset, foreign, access, alloc)
            )
        elif type(value) is tuple and value and value[0] is STRUCT:
            for field, inner in value[1]:
                self.add(f"{key}.{field}", inner, access, syntax)
        else:
            handle = HANDLE_NAMES.get(value) if type(value) is int else None  # a Mesh / HashGrid / ...: its name
            self.scalars.append((key, handle or _normalise(value)))


def _build_launch(payload: tuple, seq: int, caller: Any, common: dict) -> LaunchRecord:
    kernel, dim, values, n_inputs, device, stream, block_dim, max_blocks, adjoint, adj = payload
    info = _kernel_info(kernel)
    access = info.access_of(kernel)
    syntax = info.syntax
    args = _Args(info.params, seq, info.name)
    for i, value in enumerate(values):
        if access is not None and i < len(access):  # Warp's code generator tracked it: best
            mode = access[i]
        elif syntax is not None:  # the kernel's syntax tree; per struct field in _Args.add
            mode = None
        elif n_inputs >= 0:  # Warp's inputs / outputs split
            mode = "r" if i < n_inputs else "w"
        else:
            mode = ""
        args.add(i, value, mode, syntax)
    for i, value in enumerate(adj):
        if type(value) is tuple and value and value[0] in (ARR, STRUCT):  # adjoint scalars are zeros
            args.add(f"adj:{i}", value, "rw")
    api = "wp.Launch.launch" if common.pop("_cmd", False) else _launch_api(caller)
    return LaunchRecord(
        Op.LAUNCH.value,
        info.name,
        _dim(dim),
        stream,
        tuple(args.arrays),
        tuple(args.scalars),
        params=info.params,
        buffers=tuple(args.buffers),
        block_dim=block_dim,
        max_blocks=int(max_blocks or 0),
        device=_device_name(device) or args.device,
        adjoint=adjoint,
        api=api,
        **common,
    )


def _launch_api(caller: Any) -> str:
    """The public entry point a launch came through, from its entry code (``hotpath.find_site``)."""
    if caller is None or not is_warp_code(caller):  # user code called wp.launch itself
        return "wp.launch"
    name = getattr(caller, "co_name", "")
    if name == "launch_tiled":
        return "wp.launch_tiled"
    if name in ("backward", "_backward_launch") or (name and "backward" in name):
        return "wp.Tape.backward"
    return "wp.launch"


def _build_launch_cmd(payload: tuple, seq: int, caller: Any, common: dict) -> LaunchRecord:
    common["_cmd"] = True
    return _build_launch(payload, seq, caller, common)


def _build_copy(payload: tuple, seq: int, caller: Any, common: dict) -> LaunchRecord:
    dest, src, dest_offset, src_offset, count, stream, dest_size = payload
    args = _Args(COPY_PARAMS, seq, "" if common.get("internal") else "wp.copy")
    args.add(0, dest, "w")
    args.add(1, src, "r")
    args.scalars.extend(((2, dest_offset), (3, src_offset), (4, count)))
    warp_entry = caller is not None and is_warp_code(caller)
    api = _COPY_APIS.get(getattr(caller, "co_name", ""), "wp.copy") if warp_entry else "wp.copy"
    kernel = "wp.array.assign" if api == "wp.array.assign" else "wp.copy"
    return LaunchRecord(
        Op.COPY.value,
        kernel,
        (count or dest_size,),
        stream,
        tuple(args.arrays),
        tuple(args.scalars),
        params=COPY_PARAMS,
        buffers=tuple(args.buffers),
        device=args.device,
        api=api,
        **common,
    )


def _build_fill(payload: tuple, seq: int, caller: Any, common: dict, zero: bool = False) -> LaunchRecord:
    arr, value, size = payload
    args = _Args(FILL_PARAMS, seq, "" if common.get("internal") else "wp.fill")
    args.add(0, arr, "w")
    args.scalars.append((1, _normalise(value)))
    kernel = "wp.zero" if zero else "wp.fill"
    return LaunchRecord(
        Op.FILL.value,
        kernel,
        (size,),
        None,
        tuple(args.arrays),
        tuple(args.scalars),
        params=FILL_PARAMS,
        buffers=tuple(args.buffers),
        device=args.device,
        api="wp.array.zero_" if zero else "wp.array.fill_",
        **common,
    )


def _build_zero(payload: tuple, seq: int, caller: Any, common: dict) -> LaunchRecord:
    return _build_fill(payload, seq, caller, common, zero=True)


def _build_primitive(payload: tuple, seq: int, caller: Any, common: dict) -> LaunchRecord:
    name, params, values = payload
    args = _Args(tuple(params), seq, name)
    for i, value in enumerate(values):
        args.add(i, value)
    size = max((b.shape[0] for b in args.buffers if b.shape), default=0)
    return LaunchRecord(
        Op.PRIMITIVE.value,
        name,
        (size,) if size else (),
        None,
        tuple(args.arrays),
        tuple(args.scalars),
        params=tuple(params),
        buffers=tuple(args.buffers),
        device=args.device,
        api=name,
        **common,
    )


def _build_graph_launch(payload: tuple, seq: int, caller: Any, common: dict) -> LaunchRecord:
    graph_id, stream, device, replay, launches = payload
    return LaunchRecord(
        Op.GRAPH_LAUNCH.value,
        "wp.capture_launch",
        (),
        stream,
        (),
        (),
        graph_id=graph_id,
        device=_device_name(device),
        api="wp.capture_launch",
        graph_replay=int(replay or 0),
        graph_launches=launches,
        **common,
    )


_BUILDERS = {
    "launch": _build_launch,
    "launch_cmd": _build_launch_cmd,
    "copy": _build_copy,
    "fill": _build_fill,
    "zero": _build_zero,
    "primitive": _build_primitive,
    "graph_launch": _build_graph_launch,
}


def _start_after_loads(out: list[tuple[str, object]], load_ends: dict[int, int]) -> None:
    """A module load runs inside the launch that needed it (Warp loads on first use): that launch's record
    starts where the load ended, so its time is the launch's own and the load is its ``warp.module.load``
    scope's (``launchtrace.capture.tapeload``). The first record on the load's thread after the load's end
    event settles it, in this drain or a later one; only drains after a load pay for this walk, and a load no
    record follows within :data:`_LOAD_DRAINS` drains (a loader thread that ended) is forgotten."""
    for i, (kind, item) in enumerate(out):
        if kind == "scope_end" and item.kind == "load":  # type: ignore[attr-defined]
            load_ends[item.thread] = [item.end_ns, _LOAD_DRAINS]  # type: ignore[attr-defined]
        elif kind == "record" and item.thread in load_ends:  # type: ignore[attr-defined]
            end = load_ends.pop(item.thread)[0]  # type: ignore[attr-defined]
            if item.start_ns < end <= item.end_ns:  # type: ignore[attr-defined]
                out[i] = (kind, dataclasses.replace(item, start_ns=end))  # type: ignore[arg-type]
    for thread, entry in list(load_ends.items()):
        entry[1] -= 1
        if entry[1] <= 0:
            del load_ends[thread]


_LOAD_DRAINS = 4
"""How many drains a module load's end waits for its launch's record before it is forgotten."""


def materialize(raw: list[tuple], materializer: Materializer | None = None) -> list[tuple[str, object]]:
    """Materialise raw events with a fresh (or the given) :class:`Materializer`."""
    return (materializer or Materializer()).run(raw)


bus.use_materializer(Materializer)
