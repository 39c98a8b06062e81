"""Warp interposition: which entry points are patched, and how each one's arguments become a payload.

Patched (Warp 1.19; see ``shared/notes/warp-internals.md``):

- kernel launches: ``warp._src.context.launch`` (every binding: ``wp.launch``, ``from warp import launch``;
  ``launch_tiled`` and ``Tape.backward``'s adjoint launches go through it) and ``wp.Launch.launch``;
- copies: ``warp._src.context.copy`` (``wp.clone``, ``array.assign``, ``array.to``, ``array.numpy()`` of a device
  array and ``wp.array(data=...)`` funnel into it);
- fills: ``array.fill_`` / ``zero_`` and the ``noncontiguous_array_base`` versions (indexed arrays);
- graphs: ``capture_begin`` / ``capture_end`` (bookkeeping: work issued in between is recorded as captured and
  tied to the graph, and counted) and ``capture_launch`` (a graph launch record with its replay ordinal and the
  graph's record count);
- native primitives: ``array_scan``, ``radix_sort_pairs``, ``segmented_sort_pairs``, ``runlength_encode``,
  ``array_sum``, ``array_inner`` (every binding, fem's and optim's included) and the ``wp_bsr_*`` natives that
  ``warp.sparse`` calls through ``runtime.core``;
- scopes: ``ScopedTimer.__enter__`` / ``__exit__`` (Warp's module-load timer becomes a ``warp.module.load``
  scope), ``Tape.record_scope_begin`` / ``record_scope_end``, and ``Tape.__enter__`` / ``__exit__`` /
  ``backward`` (``tape.forward`` / ``tape.backward`` where no scope covers them: ``capture.tapeload``);
- allocations: ``array._init_new`` (every Warp allocation of array memory: ``wp.empty/zeros/full/clone``,
  ``wp.array(data)``, gradients) and ``array._alloc_grad`` (which array a gradient belongs to), noted in
  :data:`launchtrace.allocations.ALLOCATIONS` so that unowned buffers get a run-stable identity;
- geometry objects: ``Mesh`` / ``HashGrid`` / ``Bvh`` / ``Volume.__init__`` name each object where it was made,
  so that its ``uint64`` handle, passed to a kernel, is recorded by that name (:mod:`launchtrace.capture.objects`).
"""

from __future__ import annotations

import inspect
import os
import sys
import weakref
from collections.abc import Callable
from time import time_ns
from typing import Any

from launchtrace import native
from launchtrace import rawevent as ev
from launchtrace.allocations import ALLOCATIONS, grad_parent, set_grad_parent
from launchtrace.capture import bus, probes, tapeload
from launchtrace.capture import materialize as _materialize  # noqa: F401  (registers the bus's materialiser)
from launchtrace.capture.hotpath import (
    _LIB_CACHE,
    _USER_MODULE,
    ARR,
    FLAT,
    HANDLES,
    STRUCT,
    _append,
    _warn_once,
    emit_scope_begin,
    emit_scope_end,
    find_site,
    is_library_code,
    is_warp_code,
    set_library_prefixes,
    set_public_entries,
    wrap,
)
from launchtrace.capture.objects import OBJECT_CLASSES, wrap_object_init
from launchtrace.capture.patching import PatchSet, wraps_like
from launchtrace.capture.state import _local, next_graph_id, tstate

__all__ = ["graph_id_of", "patch_warp"]

PRIMITIVES = (
    "array_scan",
    "radix_sort_pairs",
    "segmented_sort_pairs",
    "runlength_encode",
    "array_sum",
    "array_inner",
)
SPARSE_NATIVES = (
    "wp_bsr_matrix_from_triplets_host",
    "wp_bsr_matrix_from_triplets_device",
    "wp_bsr_transpose_host",
    "wp_bsr_transpose_device",
    "wp_bsr_compress_inplace_host",
    "wp_bsr_compress_inplace_device",
)

_GRAPHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""``wp.Graph`` -> ``[graph id, records captured into it (None: nothing recorded them), replays so far]``."""
_PROBES = False  # a measurement (value statistics, device timing) is on: see launchtrace.capture.probes


def _set_probes(on: bool) -> None:
    global _PROBES
    _PROBES = on


probes.on_flag(_set_probes)
_PLAIN = frozenset((int, float, bool, str, type(None)))


def graph_id_of(graph: Any) -> int | None:
    """The launchtrace id of a captured ``wp.Graph`` (``None`` if it was captured while not instrumented)."""
    info = _graph_info(graph)
    return None if info is None else info[0]


def _graph_info(graph: Any) -> list | None:
    try:
        return _GRAPHS.get(graph)
    except TypeError:
        return None


# -- argument values -------------------------------------------------------------------------------------------


def _setup_types() -> None:
    global _array_type, _noncontig_type, _struct_instance_type, _ctx, _device_type
    import warp._src.codegen as codegen
    import warp._src.context as ctx
    import warp._src.types as wtypes

    _ctx = ctx

    _array_type = wtypes.array
    _noncontig_type = wtypes.noncontiguous_array_base
    _device_type = ctx.Device
    _struct_instance_type = codegen.StructInstance


_ctx: Any = None
_array_type: Any = None
_noncontig_type: Any = None
_device_type: Any = None
_struct_instance_type: Any = None


def arg_value(v: Any) -> Any:
    """A kernel argument as plain data: an array becomes ``(ARR, ptr, shape, dtype, bytes, device, indexed)``."""
    t = type(v)
    if t is _array_type:
        return (ARR, v.ptr or 0, v.shape, v.dtype, v.capacity or 0, v.device, False)
    if t in _PLAIN:
        return v
    return _arg_value_slow(v)


def _arg_value_slow(v: Any, depth: int = 0) -> Any:
    if isinstance(v, _array_type):
        return (ARR, v.ptr or 0, v.shape, v.dtype, v.capacity or 0, v.device, False)
    if isinstance(v, _noncontig_type):
        data = getattr(v, "data", None)
        if isinstance(data, _array_type):
            return (ARR, data.ptr or 0, v.shape, v.dtype, data.capacity or 0, data.device, True)
        return f"<{type(v).__name__}>"
    if isinstance(v, _struct_instance_type) and depth < 8:
        fields = getattr(getattr(type(v), "_cls", None), "vars", None) or {}
        return (STRUCT, tuple((name, _arg_value_slow(getattr(v, name, None), depth + 1)) for name in fields))
    return scalar_value(v)


def scalar_value(v: Any) -> Any:
    """A non-array argument as a comparable plain value (vectors and matrices become tuples)."""
    if type(v) in _PLAIN:
        return v
    item = getattr(v, "item", None)  # numpy scalars
    if callable(item) and not hasattr(v, "__len__"):
        try:
            return scalar_value(item())
        except (TypeError, ValueError):
            pass
    inner = getattr(v, "value", None)  # wp.float32(1.0), wp.uint32(7), ...
    if isinstance(inner, (bool, int, float)):
        return inner
    try:
        return tuple(scalar_value(x) for x in v)
    except TypeError:
        return f"<{type(v).__name__}>"


def _stream_handle(stream: Any) -> int | None:
    if stream is None:
        return None
    handle = getattr(stream, "cuda_stream", None)
    return int(handle or 0) if handle is not None else None


# -- extractors: (args, kwargs, result) -> payload --------------------------------------------------------------


def _arg(args: tuple, kwargs: dict, i: int, name: str, default: Any = None) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


_BASIC_LAUNCH_KEYS = frozenset(("kernel", "dim", "inputs", "outputs", "record_tape"))
_FLAT_LAUNCH_KEYS = _BASIC_LAUNCH_KEYS | {"device"}


def extract_launch(args: tuple, kwargs: dict, result: Any) -> tuple | None:
    """Payload of a ``wp.launch``: hand-inlined for the common call shapes (this runs on every launch)."""
    if result is not None:  # record_cmd=True: a wp.Launch, run later by Launch.launch
        return None
    n = len(args)
    get = kwargs.get
    kernel = args[0] if n else get("kernel")
    dim = args[1] if n > 1 else get("dim")
    inputs = (args[2] if n > 2 else get("inputs")) or ()
    outputs = (args[3] if n > 3 else get("outputs")) or ()
    array_type, plain = _array_type, _PLAIN
    values = []
    append = values.append
    for v in inputs:  # arg_value(), inlined (a comprehension costs a frame on 3.11)
        t = type(v)
        if t is array_type:
            append((ARR, v.ptr or 0, v.shape, v.dtype, v.capacity or 0, v.device, False))
        elif t in plain:
            append(v)
        else:
            append(_arg_value_slow(v))
    for v in outputs:
        append(arg_value(v))
    if n <= 4 and _BASIC_LAUNCH_KEYS.issuperset(kwargs):
        return (kernel, dim, tuple(values), len(inputs), None, None, None, 0, False, ())
    adjoint = bool(_arg(args, kwargs, 8, "adjoint", False))
    adj = ()
    if adjoint:
        adj_values = list(_arg(args, kwargs, 4, "adj_inputs") or ()) + list(_arg(args, kwargs, 5, "adj_outputs") or ())
        adj = tuple(arg_value(v) for v in adj_values)
    return (
        kernel,
        dim,
        tuple(values),
        len(inputs),
        _arg(args, kwargs, 6, "device"),
        _stream_handle(_arg(args, kwargs, 7, "stream")),
        _arg(args, kwargs, 12, "block_dim"),
        _arg(args, kwargs, 11, "max_blocks", 0),
        adjoint,
        adj,
    )


def wrap_launch(original: Callable) -> Callable:
    """The ``wp.launch`` wrapper: :func:`launchtrace.capture.hotpath.wrap` specialised and inlined.

    Every launch pays for this function, so it avoids the generic wrapper's extra calls (extractor, site
    lookup, append) on the common path: user code calling ``wp.launch`` directly with the usual arguments.
    It behaves exactly like ``wrap(original, "launch", extract_launch, post=fix_tape_caller)``; the capture
    tests run through it.
    """
    user_module = _USER_MODULE
    next_seq = bus.next_seq
    record = bus.RECORD
    handles = HANDLES
    flat_keys = _FLAT_LAUNCH_KEYS
    plain = _PLAIN
    offer, record_event = bus.offer, ev.record_event
    probed = probes.wrap_launch(original, extract_launch, fix_tape_caller)

    def launch(*args: Any, **kwargs: Any) -> Any:
        st = _local.st
        subs = bus._subs
        if st.busy or not subs:
            result = original(*args, **kwargs)
            if _ctx.runtime.tape is not None:
                fix_tape_caller(args, kwargs, result, sys._getframe(1))
            return result
        if _PROBES:
            return probed(*args, **kwargs)
        st.busy = True
        t0 = time_ns()
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            st.busy = False
            _record_failed_launch(exc, t0, sys._getframe(1), *args, **kwargs)
            raise
        t1 = time_ns()
        st.busy = False
        if result is not None:  # record_cmd=True: nothing ran yet
            return result
        try:
            frame = sys._getframe(1)
            if _ctx.runtime.tape is not None:
                fix_tape_caller(args, kwargs, result, frame)
            code = frame.f_code
            hit = user_module.get(id(code))
            if hit is not None and hit[0] is code:
                module, line, caller = hit[1], frame.f_lineno, code
            else:
                code, line, module, caller = find_site(frame)
            stack = st.stack
            seq = next_seq()
            event = None
            n = len(args)
            if n <= 4 and flat_keys.issuperset(kwargs):
                # The common call: written flat, kernel / dtype / device by id (see hotpath.HANDLES), so the
                # queued event holds no object the garbage collector must keep visiting. Anything but plain
                # arrays and plain scalars takes the nested payload of extract_launch below.
                get = kwargs.get
                kernel = args[0] if n else get("kernel")
                inputs = (args[2] if n > 2 else get("inputs")) or ()
                outputs = (args[3] if n > 3 else get("outputs")) or ()
                kid = id(kernel)
                if kid not in handles:
                    handles[kid] = kernel
                device = get("device")
                simple = True
                if device is not None and type(device) is not str:  # a Device: by id; else not flat
                    if type(device) is _device_type:
                        device_id = device = id(device)
                        if device_id not in handles:
                            handles[device_id] = kwargs["device"]
                    else:
                        simple = False
                flat = [  # launchtrace.rawevent.RECORD_FIELDS, then the values from R_VALUES on
                    record, seq, st.tid, "launch", FLAT, code, line, module, caller, t0, t1,
                    stack[-1] if stack else None, st.capture_graph, None,
                    kid, args[1] if n > 1 else get("dim"), len(inputs), device,
                ]  # fmt: skip
                append = flat.append
                for group in (inputs, outputs) if simple else ():
                    for v in group:
                        t = type(v)
                        if t is _array_type:
                            dtype, device = v.dtype, v.device
                            did, vid = id(dtype), id(device)
                            if did not in handles:
                                handles[did] = dtype
                            if vid not in handles:
                                handles[vid] = device
                            flat += (ARR, v.ptr or 0, v.shape, did, v.capacity or 0, vid)
                        elif t in plain:
                            append(v)
                        else:
                            simple = False
                            break
                if simple:
                    event = tuple(flat)
            if event is None:
                scope = stack[-1] if stack else None
                payload = extract_launch(args, kwargs, None)
                site = (code, line, module, caller)
                event = record_event(seq, st.tid, "launch", payload, site, t0, t1, scope, st.capture_graph, None)
            offer(event)
        except Exception:
            _warn_once("launch")
        return result

    wrapper = wraps_like(original, launch)
    return _compiled_launch(original, wrapper) or wrapper


def _compiled_launch(original: Callable, fallback: Callable) -> Callable | None:
    """The compiled form of :func:`wrap_launch`'s wrapper (``launchtrace.capture._fastlaunch``, built by
    ``pip install`` where a C compiler is available), or ``None``: not built, or ``LAUNCHTRACE_PURE_PYTHON`` set.

    It takes the common call itself, at a fraction of this wrapper's cost (``docs/capture.md``, "How it stays
    cheap"), and hands every other call, before running
    it, to ``fallback``, the Python wrapper above, which stays the reference.
    """
    _fastlaunch = native.load("launchtrace.capture._fastlaunch")
    if _fastlaunch is None:
        return None
    ev.check_compiled(_fastlaunch)
    fast = _fastlaunch.Launcher(
        original, fallback, _local, bus, sys.modules[__name__], _ctx, bus.next_seq, _USER_MODULE, HANDLES,
        _array_type, _device_type, find_site, _record_failed_launch, _warn_once, bus.RECORD, ARR, FLAT,
    )  # fmt: skip
    return wraps_like(original, fast)


def _record_failed_launch(error: BaseException, t0: int, frame: Any, /, *args: Any, **kwargs: Any) -> None:
    try:
        payload = extract_launch(args, kwargs, None)
        _append("launch", payload, frame, t0, time_ns(), error)
    except Exception:
        _warn_once("launch")


def extract_launch_cmd(args: tuple, kwargs: dict, result: Any) -> tuple:
    cmd = args[0]
    bounds = getattr(cmd, "bounds", None)
    values = tuple(arg_value(v) for v in (getattr(cmd, "fwd_args", None) or ()))
    return (
        cmd.kernel,
        getattr(bounds, "shape", bounds),
        values,
        -1,
        getattr(cmd, "device", None),
        _stream_handle(_arg(args, kwargs, 1, "stream")),
        getattr(cmd, "block_dim", None),
        getattr(cmd, "max_blocks", 0),
        bool(getattr(cmd, "adjoint", False)),
        (),
    )


def extract_copy(args: tuple, kwargs: dict, result: Any) -> tuple:
    dest = _arg(args, kwargs, 0, "dest")
    src = _arg(args, kwargs, 1, "src")
    return (
        arg_value(dest),
        arg_value(src),
        int(_arg(args, kwargs, 2, "dest_offset", 0) or 0),
        int(_arg(args, kwargs, 3, "src_offset", 0) or 0),
        int(_arg(args, kwargs, 4, "count", 0) or 0),
        _stream_handle(_arg(args, kwargs, 5, "stream")),
        int(getattr(dest, "size", 0) or 0),
    )


def extract_fill(args: tuple, kwargs: dict, result: Any) -> tuple:
    arr = args[0]
    value = _arg(args, kwargs, 1, "value", 0)
    return (arg_value(arr), scalar_value(value), int(getattr(arr, "size", 0) or 0))


def extract_zero(args: tuple, kwargs: dict, result: Any) -> tuple:
    arr = args[0]
    return (arg_value(arr), 0, int(getattr(arr, "size", 0) or 0))


def extract_graph_launch(args: tuple, kwargs: dict, result: Any) -> tuple:
    """``(graph id, stream, device, replay ordinal, records captured)`` of a ``wp.capture_launch``."""
    graph = _arg(args, kwargs, 0, "graph")
    info = _graph_info(graph) or (None, None, 0)
    stream = _stream_handle(_arg(args, kwargs, 1, "stream"))
    return (info[0], stream, getattr(graph, "device", None), info[2], info[1])


def make_primitive_extractor(name: str, function: Callable) -> Callable:
    """An extractor that binds a primitive's arguments by parameter name (computed once, not per call)."""
    try:
        params = tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        params = ()

    def extract(args: tuple, kwargs: dict, result: Any) -> tuple:
        named = list(zip(params, args))
        named.extend(kwargs.items())
        return (name, tuple(n for n, _ in named), tuple(arg_value(v) for _, v in named))

    return extract


def make_native_extractor(name: str) -> Callable:
    def extract(args: tuple, kwargs: dict, result: Any) -> tuple:
        return (name, (), ())

    return extract


# -- post hooks --------------------------------------------------------------------------------------------------


def fix_tape_caller(args: tuple, kwargs: dict, result: Any, frame: Any) -> None:
    """Make Warp's Tape caller metadata name the user's line, not our wrapper (Warp reads ``f_back``)."""
    tape = _ctx.runtime.tape
    if tape is None or not tape.launches:
        return
    entry = tape.launches[-1]
    if not isinstance(entry, list) or not entry or not isinstance(entry[-1], dict):
        return
    caller = entry[-1].get("caller")
    if not isinstance(caller, dict) or os.path.normcase(os.path.abspath(caller.get("file", ""))) not in _WRAPPER_FILES:
        return
    f = frame
    while f is not None and is_library_code(f.f_code):
        f = f.f_back
    f = f or frame
    caller.update(file=f.f_code.co_filename, lineno=f.f_lineno, func=f.f_code.co_name)


_WRAPPER_FILES = frozenset(
    os.path.normcase(os.path.abspath(f))
    for f in (sys.modules["launchtrace.capture.hotpath"].__file__, __file__, probes.__file__)
)


# -- graph capture bookkeeping ----------------------------------------------------------------------------------


_counting: dict[int, bus.Subscription] = {}  # graph id being captured -> the subscription counting its records
COUNT_CAPACITY = 100_000
"""Most events a capture's counting subscription holds (tens of MB at most, for a capture never ended); a graph
of more records gets ``graph_launches=None``, "not known"."""


def _wrap_capture_begin(original: Callable) -> Callable:
    """A new graph id for the work issued on this thread until ``capture_end``, and a private bus
    subscription for this thread that counts it (whoever else listens, or nobody: the replays say how many
    records each one ran). Captures are rare; recording during one costs nothing that matters."""

    def capture_begin(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        graph_id = next_graph_id()
        st = tstate()
        st.capture_outer.append(st.capture_graph)
        st.capture_graph = graph_id
        try:
            _counting[graph_id] = bus.subscribe(capacity=COUNT_CAPACITY, thread=st.tid)
        except Exception:
            _warn_once("capture_begin")
        return result

    return wraps_like(original, capture_begin)


def _captured_count(sub: bus.Subscription | None, graph_id: int) -> int | None:
    """Records of ``graph_id`` in ``sub``'s queue that ran without error (``None``: some were dropped)."""
    if sub is None:
        return None
    sub.close()
    count = 0
    for e in sub.drain_raw():
        if e[ev.KIND] == ev.PROBED:
            e = e[ev.P_RECORD]
        if e[ev.KIND] == ev.RECORD and e[ev.R_GRAPH] == graph_id and e[ev.R_ERROR] is None:
            count += 1
    return None if sub.dropped else count


def _wrap_capture_end(original: Callable) -> Callable:
    def capture_end(*args: Any, **kwargs: Any) -> Any:
        st = tstate()
        graph_id = st.capture_graph
        st.capture_graph = st.capture_outer.pop() if st.capture_outer else None  # back to an enclosing capture
        sub = _counting.pop(graph_id, None) if graph_id is not None else None
        try:
            graph = original(*args, **kwargs)
        finally:
            try:
                size = _captured_count(sub, graph_id) if graph_id is not None else None
            except Exception:
                size = None
                _warn_once("capture_end")
        if graph_id is not None:
            try:
                _GRAPHS[graph] = [graph_id, size, 0]
            except TypeError:
                pass
        return graph

    return wraps_like(original, capture_end)


def _counting_capture_launch(original: Callable) -> Callable:
    """``capture_launch`` counting each graph's replays (recorded or not), before the recording wrapper."""

    def capture_launch(*args: Any, **kwargs: Any) -> Any:
        info = _graph_info(_arg(args, kwargs, 0, "graph"))
        if info is not None:
            info[2] += 1
        return original(*args, **kwargs)

    return wraps_like(original, capture_launch)


# -- scopes -----------------------------------------------------------------------------------------------------


def _wrap_timer_enter(original: Callable) -> Callable:
    def __enter__(self: Any) -> Any:
        frame = sys._getframe(1)
        internal = is_warp_code(frame.f_code)
        name = getattr(self, "name", "timer")
        load = tapeload.module_load_of(str(name)) if internal else None
        if load is not None:  # Warp compiling or loading a module: its own scope, never a launch's time
            sid = emit_scope_begin(tapeload.MODULE_LOAD_SPAN, "load", load, False, frame)
            self.__dict__["_launchtrace_load"] = True
        else:
            sid = emit_scope_begin(name, "timer", (), internal, frame)
        self.__dict__["_launchtrace_scope"] = sid
        st = tstate()
        st.in_timer += 1
        try:
            return original(self)
        except BaseException as exc:
            emit_scope_end(sid, exc)
            raise
        finally:
            st.in_timer -= 1

    return wraps_like(original, __enter__)


def _wrap_timer_exit(original: Callable) -> Callable:
    def __exit__(self: Any, exc_type: Any, exc_value: Any, traceback: Any) -> Any:
        st = tstate()
        st.in_timer += 1
        try:
            return original(self, exc_type, exc_value, traceback)
        finally:
            st.in_timer -= 1
            sid = self.__dict__.pop("_launchtrace_scope", None)
            if sid is not None:
                loaded = self.__dict__.pop("_launchtrace_load", False)
                emit_scope_end(sid, exc_value, tapeload.load_result(self) if loaded else ())

    return wraps_like(original, __exit__)


def _wrap_tape_scope_begin(original: Callable) -> Callable:
    def record_scope_begin(self: Any, scope_name: Any, metadata: Any = None) -> Any:
        result = original(self, scope_name, metadata)
        st = tstate()
        if not st.in_timer:
            attrs = tuple((str(k), v) for k, v in (metadata or {}).items() if isinstance(v, (str, int, float, bool)))
            st.tape_stack.append(emit_scope_begin(scope_name, "tape", attrs, False, sys._getframe(1)))
        return result

    return wraps_like(original, record_scope_begin)


def _wrap_tape_scope_end(original: Callable) -> Callable:
    def record_scope_end(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        st = tstate()
        if not st.in_timer and st.tape_stack:
            emit_scope_end(st.tape_stack.pop())
        return result

    return wraps_like(original, record_scope_end)


# -- allocations ------------------------------------------------------------------------------------------------


def note_allocation(array: Any, frame: Any) -> None:
    """Tell the allocation registry about ``array``'s new memory, allocated from ``frame``'s call chain: the
    site is the first frame outside Warp and launchtrace, with its caller (see :mod:`launchtrace.allocations`)."""
    ptr = array.ptr
    if not ptr:
        return
    library = _LIB_CACHE  # is_library_code's cache, read inline: this runs on every allocation
    f = frame
    while f is not None:
        code = f.f_code
        hit = library.get(id(code))
        if hit is None or hit[0] is not code:
            if not is_library_code(code):
                break
        elif not hit[1]:
            break
        f = f.f_back
    site = None
    if f is not None:
        back = f.f_back
        if back is not None and not is_library_code(back.f_code):
            site = ALLOCATIONS.site(f.f_code, f.f_lineno, back.f_code, back.f_lineno)
        else:
            site = ALLOCATIONS.site(f.f_code, f.f_lineno, None, 0)
    ALLOCATIONS.allocated(array, ptr, array.capacity or 0, site, grad_parent())


def _wrap_init_new(original: Callable) -> Callable:
    """``array._init_new`` noting each allocation (a failure to note it is logged once, never raised)."""

    def _init_new(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        try:
            note_allocation(self, sys._getframe(1))
        except Exception:
            _warn_once("allocation")
        return result

    return wraps_like(original, _init_new)


def _wrap_alloc_grad(original: Callable) -> Callable:
    """``array._alloc_grad`` marking the allocation inside it as the gradient of ``self``."""

    def _alloc_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        previous = set_grad_parent(self)
        try:
            return original(self, *args, **kwargs)
        finally:
            set_grad_parent(previous)

    return wraps_like(original, _alloc_grad)


# -- the patch table --------------------------------------------------------------------------------------------

PUBLIC_ENTRIES = (
    "launch",
    "launch_tiled",
    "Launch.launch",
    "copy",
    "capture_launch",
    "capture_if",
    "capture_while",
)
"""Warp's public device-work entry points in ``warp._src.context`` besides the arrays' ``assign`` / ``fill_`` /
``zero_`` and the :data:`PRIMITIVES`: called from user code they are user work, whatever other entry point
Warp implements them with (``launchtrace.capture.hotpath.is_internal_entry``)."""


def _public_entries(ctx: Any, wtypes: Any, wutils: Any) -> list[Any]:
    found = []
    for dotted in PUBLIC_ENTRIES:
        owner: Any = ctx
        for part in dotted.split("."):
            owner = getattr(owner, part, None)
        found.append(owner)
    for cls in (wtypes.array, wtypes.noncontiguous_array_base):
        found.extend(cls.__dict__.get(name) for name in ("assign", "fill_", "zero_"))
    found.extend(getattr(wutils, name, None) for name in PRIMITIVES)
    return [f for f in found if f is not None]


def patch_warp() -> PatchSet:
    """Patch every entry point listed in the module docstring; returns what to restore."""
    import warp
    import warp._src.context as ctx
    import warp._src.tape as tape_mod
    import warp._src.types as wtypes
    import warp._src.utils as wutils

    warp.init()
    _setup_types()
    warp_dir = os.path.dirname(os.path.abspath(warp.__file__)) + os.sep
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    set_library_prefixes(warp_dir, ours, exempt=(os.path.join(ours, "demo") + os.sep,))

    set_public_entries(_public_entries(ctx, wtypes, wutils))
    patches = PatchSet()
    everywhere: dict[int, tuple[Any, Any]] = {}

    def rebind(owner: Any, name: str, wrapper: Callable) -> None:
        original = getattr(owner, name)
        everywhere[id(original)] = (original, wrapper)
        patches.wrappers[id(wrapper)] = original

    rebind(ctx, "launch", wrap_launch(ctx.launch))
    rebind(ctx, "copy", wrap(ctx.copy, "copy", extract_copy))
    replays = _counting_capture_launch(ctx.capture_launch)
    rebind(ctx, "capture_launch", wrap(replays, "graph_launch", extract_graph_launch))
    rebind(ctx, "capture_begin", _wrap_capture_begin(ctx.capture_begin))
    rebind(ctx, "capture_end", _wrap_capture_end(ctx.capture_end))
    for name in PRIMITIVES:
        function = getattr(wutils, name, None)
        if function is not None:
            extractor = make_primitive_extractor(f"warp.utils.{name}", function)
            rebind(wutils, name, wrap(function, "primitive", extractor))
    patches.rebind_everywhere(everywhere)

    patches.set_attr(ctx.Launch, "launch", wrap(ctx.Launch.launch, "launch_cmd", extract_launch_cmd))
    for cls in (wtypes.array, wtypes.noncontiguous_array_base):
        patches.set_attr(cls, "fill_", wrap(cls.__dict__["fill_"], "fill", extract_fill))
        patches.set_attr(cls, "zero_", wrap(cls.__dict__["zero_"], "zero", extract_zero))
    for name, wrapper in (("_init_new", _wrap_init_new), ("_alloc_grad", _wrap_alloc_grad)):
        if callable(wtypes.array.__dict__.get(name)):
            patches.set_attr(wtypes.array, name, wrapper(wtypes.array.__dict__[name]))
    for name in OBJECT_CLASSES:
        cls = getattr(wtypes, name, None)
        if cls is not None and callable(cls.__dict__.get("__init__")):
            patches.set_attr(cls, "__init__", wrap_object_init(cls.__dict__["__init__"]))
    patches.set_attr(wutils.ScopedTimer, "__enter__", _wrap_timer_enter(wutils.ScopedTimer.__dict__["__enter__"]))
    patches.set_attr(wutils.ScopedTimer, "__exit__", _wrap_timer_exit(wutils.ScopedTimer.__dict__["__exit__"]))
    patches.set_attr(tape_mod.Tape, "record_scope_begin", _wrap_tape_scope_begin(tape_mod.Tape.record_scope_begin))
    patches.set_attr(tape_mod.Tape, "record_scope_end", _wrap_tape_scope_end(tape_mod.Tape.record_scope_end))
    patches.set_attr(tape_mod.Tape, "__enter__", tapeload.wrap_tape_enter(tape_mod.Tape.__dict__["__enter__"]))
    patches.set_attr(tape_mod.Tape, "__exit__", tapeload.wrap_tape_exit(tape_mod.Tape.__dict__["__exit__"]))
    patches.set_attr(tape_mod.Tape, "backward", tapeload.wrap_tape_backward(tape_mod.Tape.__dict__["backward"]))

    core = getattr(ctx.runtime, "core", None)
    for name in SPARSE_NATIVES:
        native = getattr(core, name, None) if core is not None else None
        if native is not None:
            patches.set_attr(core, name, wrap(native, "primitive", make_native_extractor(f"warp.sparse.{name}")))
    return patches
