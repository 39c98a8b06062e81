"""tinygrad frontend: every kernel execution and copy tinygrad runs becomes a record of the same model as Warp's.

Where: tinygrad 0.14 executes every call of a schedule (``Tensor.realize``, ``TinyJit`` replays, the jit's
input copies, ``.numpy()``'s copy-out, BEAM timing runs) through ``realize.pm_exec.rewrite(call, ctx)``, looked
up on every call. :func:`install` puts a wrapper there as an *instance* attribute (whatever was there before,
someone else's wrapper included, is what it calls, and :func:`uninstall` puts exactly that back).

When: :func:`launchtrace.instrument` calls :func:`install`. If ``tinygrad.engine.realize`` is already imported
it is patched at once; if tinygrad is only importable, a meta-path finder patches it right after the program
imports it (tinygrad is never imported on the program's behalf); if tinygrad is not installed nothing happens.

Hot path (the launching thread): time the original call, find the user's frame, and queue one raw event holding
*references* (the call UOp, the context's input UOps, a copy of the variable values): about 3 us. Decoding
(kernel name, launch dims, buffers, roles, offsets, owners: 19-49 us in place) happens in the materializer, off
the launching thread, by :func:`decode_event`, which each ``bus.FRAMEWORK`` event names. The queued
references keep the call's buffers alive until the event is decoded and no longer; nothing long-lived is keyed
by a raw address (the per-call cache is a ``WeakKeyDictionary`` on the call UOp).

Kinds of work (``LaunchRecord.api``): ``tinygrad.realize`` (user work: ``Tensor.realize`` and what triggers it,
uploads included), ``tinygrad.TinyJit`` (a jit replay), ``tinygrad.internal`` (``update_stats=False``: the
copy-out of ``.numpy()``, ``Buffer(initial_value=...)``; ``internal=True``), ``tinygrad.beam`` (BEAM timing
runs, ``ctx.cache is False``; left out unless :func:`configure` ``(record_beam=True)`` or
``LAUNCHTRACE_TINYGRAD_BEAM=1``). A graph runner's batch (``CUSTOM_FUNCTION "graph"``: CUDA, Metal, NULL, ...)
is a scope of kind ``"graph"`` whose records are its kernels; tinygrad times only the whole batch, so each
kernel carries the batch's start and end and the scope says ``timing="per batch"``.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.util
import logging
import os
import sys
import threading
import weakref
from time import time_ns
from typing import Any

from launchtrace.capture import bus
from launchtrace.capture.hotpath import _warn_once, emit_scope_begin, emit_scope_end, is_library_code
from launchtrace.capture.materialize import _copy_launch, _site, make_buffer_arg, make_launch_record
from launchtrace.capture.state import THREAD_NAMES, _local
from launchtrace.model import BufferArg, LaunchRecord, Op

__all__ = ["configure", "decode_event", "install", "is_patched", "uninstall"]

_log = logging.getLogger("launchtrace.capture")

REALIZE, JIT, INTERNAL, BEAM, GRAPH = (
    "tinygrad.realize",
    "tinygrad.TinyJit",
    "tinygrad.internal",
    "tinygrad.beam",
    "tinygrad.graph",
)
COPY_KERNEL = "tinygrad.copy"
GRAPH_SCOPE = "tinygrad.graph"

_lock = threading.RLock()
_record_beam = os.environ.get("LAUNCHTRACE_TINYGRAD_BEAM", "").strip() not in ("", "0")
_patch: _Patch | None = None
_finder: _PatchOnImport | None = None
_wanted = False  # install() was called and uninstall() not yet


def configure(record_beam: bool | None = None) -> None:
    """Record BEAM search timing runs too (off by default: they are tinygrad's tuning, not the program's work)."""
    global _record_beam
    if record_beam is not None:
        _record_beam = bool(record_beam)


def is_patched() -> bool:
    """Whether tinygrad's executor is wrapped now."""
    return _patch is not None


# -- installing ---------------------------------------------------------------------------------------------


class _Patch:
    """One wrapping of ``pm_exec.rewrite``: what was in the instance dict before, and our wrapper."""

    def __init__(self, realize: Any) -> None:
        self.pm = realize.pm_exec
        self.had = "rewrite" in self.pm.__dict__
        self.saved = self.pm.__dict__.get("rewrite")
        self.wrapper = _make_hook(self.pm.rewrite, realize)
        self.pm.rewrite = self.wrapper

    def restore(self) -> None:
        current = self.pm.__dict__.get("rewrite")
        if current is not self.wrapper:
            _log.warning("launchtrace: tinygrad's pm_exec.rewrite was rebound by someone else; leaving it")
            return
        if self.had:
            self.pm.rewrite = self.saved
        else:
            del self.pm.rewrite


class _Loader(importlib.abc.Loader):
    """Runs the real loader of ``tinygrad.engine.realize``, then patches the fresh module."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        try:
            _patch_now(module)
        except Exception:
            _warn_once("tinygrad install")


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches tinygrad when the program imports it, so instrumenting never imports tinygrad itself."""

    target = "tinygrad.engine.realize"

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.target:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def _patch_now(realize: Any) -> None:
    global _patch
    with _lock:
        if _patch is None and _wanted:
            _setup_paths(realize)
            _patch = _Patch(realize)


def install() -> None:
    """Patch tinygrad now if it is imported, else when it is imported (if it is installed at all)."""
    global _finder, _wanted
    with _lock:
        _wanted = True
        realize = sys.modules.get("tinygrad.engine.realize")
        if realize is not None and hasattr(realize, "pm_exec"):
            _patch_now(realize)
            return
        if _finder is None and importlib.util.find_spec("tinygrad") is not None:
            _finder = _PatchOnImport()
            sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Undo :func:`install` exactly (the import hook too)."""
    global _patch, _finder, _wanted
    with _lock:
        _wanted = False
        if _finder is not None:
            try:
                sys.meta_path.remove(_finder)
            except ValueError:
                pass
            _finder = None
        if _patch is not None:
            _patch.restore()
            _patch = None


# -- the hot path -------------------------------------------------------------------------------------------

_TG_PREFIX = ""
_CONTEXTLIB = os.path.normcase(os.path.abspath(__import__("contextlib").__file__))
_SITE_CACHE: dict[int, tuple[Any, bool]] = {}  # id(code) -> (code, skip?): the code is kept, so ids stay unique


def _setup_paths(realize: Any) -> None:
    global _TG_PREFIX
    _TG_PREFIX = os.path.dirname(os.path.dirname(os.path.abspath(realize.__file__))) + os.sep
    _SITE_CACHE.clear()


def _skip(code: Any) -> bool:
    hit = _SITE_CACHE.get(id(code))
    if hit is None or hit[0] is not code:
        name = code.co_filename
        skip = name.startswith(_TG_PREFIX) or name == _CONTEXTLIB or is_library_code(code)
        if len(_SITE_CACHE) > 100_000:
            _SITE_CACHE.clear()
        hit = _SITE_CACHE[id(code)] = (code, skip)
    return hit[1]


def _user_frame(frame: Any) -> Any:
    f = frame
    while f is not None and _skip(f.f_code):
        f = f.f_back
    return f or frame


def _queue(event: tuple) -> None:
    for sub in bus._subs:  # bus.offer, inlined
        q = sub.queue
        n = len(q)
        if n < sub.capacity:
            q.append(event)
            if n == sub.capacity // 2 and bus.wake_consumers is not None:
                bus.wake_consumers()
        else:
            sub.full(event)
    if bus.touch_activity is not None:
        bus.touch_activity()


class _Run:
    """What the calls of one ``run_linear`` (one ``ExecContext``) share: its inputs and variable values, the kind
    of work, the user's call site. Queued events hold it; the hook only a weak reference, so the inputs (the
    user's buffers) live until the last of its events is decoded and no longer."""

    __slots__ = ("__weakref__", "api", "code", "inputs", "line", "module", "var_vals")

    def __init__(self, inputs: tuple, var_vals: Any, api: str, code: Any, line: int, module: str) -> None:
        self.inputs, self.var_vals, self.api = inputs, var_vals, api
        self.code, self.line, self.module = code, line, module


def _kind_of(ctx: Any) -> str | None:
    """The ``api`` of the work a context runs, or ``None`` when it is not recorded (BEAM runs, unless asked)."""
    if ctx.cache is False:
        return BEAM if _record_beam else None
    if not ctx.update_stats:
        return INTERNAL
    return JIT if ctx.jit else REALIZE


def _new_run(ctx: Any, frame: Any, api: str) -> _Run:
    f = _user_frame(frame)
    vv = ctx.var_vals
    return _Run(ctx.input_uops, dict(vv) if vv else None, api, f.f_code, f.f_lineno, f.f_globals.get("__name__", ""))


def _make_hook(inner: Any, realize: Any) -> Any:
    """The wrapper of ``pm_exec.rewrite``; ``inner`` is what was there (bound method or someone's wrapper).

    One event per kernel or copy: ``(FRAMEWORK, seq, tid, decode, call, run, t0, t1, scope, error)``, a single
    tuple (the cycle collector's cost grows with the tracked objects queued), sharing one :class:`_Run` per
    ``run_linear``; the context's run is found again through weak references (the context, the run)."""
    from tinygrad.uop.ops import Ops

    program, copy, custom = Ops.PROGRAM, Ops.COPY, Ops.CUSTOM_FUNCTION
    framework, next_seq = bus.FRAMEWORK, bus.next_seq
    local = _local
    decode = decode_event
    last: list = [None]  # (weak reference to the context, weak reference to its run): one slot, set at once,
    # so a thread never pairs its context with another thread's run

    def rewrite(call: Any, ctx: Any = None) -> Any:
        subs = bus._subs
        if not subs or ctx is None:
            return inner(call, ctx)
        ast = call.src[0]
        op = ast.op
        if op is not program and op is not copy:
            if op is custom and ast.arg == "graph":
                return _run_graph(inner, call, ctx)
            return inner(call, ctx)
        run = None
        pair = last[0]
        if pair is not None and pair[0]() is ctx:
            run = pair[1]()
        if run is None:
            try:
                api = _kind_of(ctx)
                if api is None:
                    return inner(call, ctx)
                run = _new_run(ctx, sys._getframe(1), api)
                last[0] = (weakref.ref(ctx), weakref.ref(run))
            except Exception:
                _warn_once("tinygrad")
                return inner(call, ctx)
        st = local.st
        t0 = time_ns()
        try:
            result = inner(call, ctx)
        except BaseException as exc:
            stack = st.stack
            error = f"{type(exc).__name__}: {exc}"
            _queue(
                (framework, next_seq(), st.tid, decode, call, run, t0, time_ns(), stack[-1] if stack else None, error)
            )
            raise
        t1 = time_ns()
        stack = st.stack
        event = (framework, next_seq(), st.tid, decode, call, run, t0, t1, stack[-1] if stack else None, None)
        for sub in subs:  # bus.offer, inlined
            q = sub.queue
            n = len(q)
            if n < sub.capacity:
                q.append(event)
                if n == sub.capacity // 2 and bus.wake_consumers is not None:
                    bus.wake_consumers()
            else:
                sub.full(event)
        if bus.touch_activity is not None:
            bus.touch_activity()
        return result

    def _run_graph(inner: Any, call: Any, ctx: Any) -> Any:
        """A graph runner's batch: a ``graph`` scope around one record per kernel it ran (timed per batch)."""
        try:
            api = _kind_of(ctx)
            if api is None:
                return inner(call, ctx)
            f = _user_frame(sys._getframe(2))
            inner_calls = call.src[0].src[0].src
            device = call.src[0].device
            attrs = (
                ("timing", "per batch"),
                ("kernels", len(inner_calls)),
                ("device", device if isinstance(device, str) else ",".join(device)),
            )
            vv = ctx.var_vals
            run = _Run(
                ctx.input_uops, dict(vv) if vv else None, GRAPH, f.f_code, f.f_lineno, f.f_globals.get("__name__", "")
            )
            sid = emit_scope_begin(GRAPH_SCOPE, "graph", attrs, False, f)
        except Exception:
            _warn_once("tinygrad graph")
            return inner(call, ctx)
        error: BaseException | None = None
        t0 = time_ns()
        try:
            return inner(call, ctx)
        except BaseException as exc:
            error = exc
            raise
        finally:
            t1 = time_ns()
            try:
                st = local.st
                err = None if error is None else f"{type(error).__name__}: {error}"
                for kcall in inner_calls:
                    kop = kcall.src[0].op
                    if kop is program or kop is copy:
                        _queue((framework, next_seq(), st.tid, decode, kcall, run, t0, t1, sid, err))
            except Exception:
                _warn_once("tinygrad graph")
            emit_scope_end(sid, error)

    rewrite.__wrapped__ = inner  # type: ignore[attr-defined]
    rewrite.__name__ = "rewrite"
    rewrite.__qualname__ = "PatternMatcher.rewrite"
    return rewrite


# -- decoding (off the launching thread) ---------------------------------------------------------------------


class _Static:
    """What one call UOp always says: kind, name, parameter names, slots and their roles, variables; and the
    last decoded body (see :func:`decode_event`)."""

    __slots__ = (
        "fast", "info", "kernel", "last", "names", "op", "roles", "slots", "sources", "static_dims", "var_names",
    )  # fmt: skip

    def __init__(self, call: Any, realize: Any) -> None:
        from tinygrad.uop.ops import Ops

        ast = call.src[0]
        outs, ins = realize.get_call_outs_ins(call)
        if ast.op is Ops.PROGRAM:
            info = ast.arg
            self.op = Op.LAUNCH.value
            self.info = info
            self.kernel = str(info.function_name)
            self.slots = tuple(info.globals)
            self.var_names = tuple(str(v.expr) for v in info.vars)
            dims = info.global_size, info.local_size
            self.static_dims = (
                info.launch_dims({}) if all(type(d) is int for d in (*dims[0], *(dims[1] or ()))) else None
            )
        else:
            self.op = Op.COPY.value
            self.info = None
            self.kernel = COPY_KERNEL
            self.slots = (0, 1)
            self.var_names = ()
            self.static_dims = None
        self.roles = tuple(("r" if s in ins else "") + ("w" if s in outs else "") for s in self.slots)
        if self.op == Op.COPY.value:
            self.names: tuple = ("dest", "src", "dest_device", "src_device")
        else:
            self.names = (*(f"data{s}" for s in self.slots), *self.var_names, "local_size")
        self.last: _Body | None = None
        self.fast: _Template | None = None
        # per slot: ("param", input index) for a plain jit input, ("fixed", weakref to its Buffer) for a buffer
        # the call names itself (arena views, parameters), None: resolve through tinygrad on every decode
        self.sources: list[tuple | None] | None = None

    def resolve(self, call: Any, inputs: tuple, realize: Any) -> list:
        """The Buffer (or MultiBuffer) of every slot, as ``realize.resolve_params`` resolves it, cheaply."""
        sources = self.sources
        if sources is None:
            sources = self.sources = _sources(call, realize)
        out = []
        resolved = None
        for i, src in enumerate(sources):
            buf = None
            if src is not None:
                buf = inputs[src[1]].buffer if src[0] == "param" else src[1]()
            if buf is None:
                if resolved is None:
                    resolved = realize.resolve_params(call, inputs)
                buf = resolved[self.slots[i]].buffer
            out.append(buf)
        return out


def _sources(call: Any, realize: Any) -> list[tuple | None]:
    from tinygrad.uop.ops import Ops

    args = realize.get_call_arg_uops(call)
    ast = call.src[0]
    slots = tuple(ast.arg.globals) if ast.op is Ops.PROGRAM else (0, 1)
    out: list[tuple | None] = []
    for slot in slots:
        arg = args[slot]
        if arg.op is Ops.PARAM and type(arg.arg.slot) is int:
            out.append(("param", arg.arg.slot))
        elif arg.op is Ops.BUFFER or (arg.op is not Ops.PARAM and not any(u.op is Ops.PARAM for u in arg.toposort())):
            try:
                out.append(("fixed", weakref.ref(arg.buffer)))
            except TypeError:
                out.append(None)
        else:
            out.append(None)
    return out


class _Body:
    """The decoded fields of one call that depend only on its buffers, variable values, kind and owners:
    reused while all of those are the same (a jit replay; a call repeated on the same buffers)."""

    __slots__ = ("api", "arrays", "buffers", "device", "dim", "key", "refs", "scalars")

    def __init__(self, key: tuple, refs: tuple, api: str, arrays: tuple, buffers: tuple, scalars: tuple,
                 dim: tuple, device: str) -> None:  # fmt: skip
        self.key, self.refs, self.api = key, refs, api
        self.arrays, self.buffers, self.scalars, self.dim, self.device = arrays, buffers, scalars, dim, device


class _Template:
    """A decoded record of one call and everything it was made from, held weakly: a later event of the same call
    whose inputs, buffers (and their memory), variable values, kind, site, thread and owner answers are all the
    same is a copy of it with its own times, scope and sequence number (a jit replay: most events)."""

    __slots__ = ("api", "buf_refs", "code", "in_force", "input_refs", "line", "proto", "raw_refs", "tid", "var_vals",
                 "version")  # fmt: skip

    def __init__(self, proto: LaunchRecord, run: _Run, static: _Static, bufs: list, version: int, in_force: int):
        self.proto, self.api, self.code, self.line, self.tid = proto, run.api, run.code, run.line, proto.thread
        self.var_vals = run.var_vals
        self.version, self.in_force = version, in_force
        self.input_refs = tuple(
            (src[1], weakref.ref(run.inputs[src[1]])) for src in static.sources or () if src[0] == "param"
        )
        self.buf_refs = tuple(weakref.ref(b) for b in bufs)
        raws = []
        for b in bufs:
            base = b._base or b
            raw = base._bufs.get(base.device)
            raws.append(None if raw is None else weakref.ref(raw))
        self.raw_refs = tuple(raws)

    def matches(self, run: _Run, tid: int, version: int, in_force: int) -> bool:
        if (
            run.api != self.api or run.code is not self.code or run.line != self.line or tid != self.tid
            or version != self.version or in_force != self.in_force or run.var_vals != self.var_vals
            or THREAD_NAMES.get(tid, "") != self.proto.thread_name
        ):  # fmt: skip
            return False
        inputs = run.inputs
        for i, ref in self.input_refs:
            if i >= len(inputs) or inputs[i] is not ref():
                return False
        for bref, rref in zip(self.buf_refs, self.raw_refs):
            b = bref()
            if b is None:
                return False
            base = b._base or b
            raw = base._bufs.get(base.device)
            if (raw is not rref()) if rref is not None else (raw is not None):
                return False
        return True


_statics: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _static(call: Any, realize: Any) -> _Static:
    try:
        hit = _statics.get(call)
    except TypeError:
        return _Static(call, realize)
    if hit is None:
        hit = _Static(call, realize)
        try:
            _statics[call] = hit
        except TypeError:
            pass
    return hit


def _address(raw: Any) -> int:
    """The host-visible address of an allocator's raw buffer (0 where it has none, e.g. the NULL device)."""
    va = getattr(raw, "va_addr", None)
    if isinstance(va, int):
        return va
    if isinstance(raw, memoryview):
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(raw))
        except (TypeError, ValueError):
            return 0
    value = getattr(raw, "value", None)  # ctypes pointers (c_void_p and friends)
    return value if isinstance(value, int) else 0


def _view_address(buf: Any) -> int:
    """Where a tinygrad ``Buffer`` (or view: its base's memory plus its byte offset) starts; 0 if unallocated."""
    base = buf._base or buf
    raw = base._bufs.get(base.device)
    addr = _address(raw) if raw is not None else 0
    return addr + int(buf.offset or 0) if addr else 0


def _dtype(dtype: Any) -> str:
    name = getattr(dtype, "name", None)
    return str(name) if name else str(dtype)


_realize: Any = None
_owners: Any = None


def _parts(static: _Static, bufs: list) -> list[tuple[Any, Any, str]]:
    """``(key, Buffer, name)`` of every buffer argument (a MultiBuffer: one per device, keys ``"i.j"``)."""
    out = []
    for i, buf in enumerate(bufs):
        shards = getattr(buf, "bufs", None)
        if shards is None:
            out.append((i, buf, static.names[i]))
        else:
            out.extend((f"{i}.{j}", part, f"{static.names[i]}.{j}") for j, part in enumerate(shards))
    return out


def decode_event(e: tuple) -> LaunchRecord:
    """The :class:`LaunchRecord` of one raw tinygrad event (run by the materializer, off the launching thread).

    The buffer-dependent part is cached on the call (the last one decoded): it is reused when the same live
    ``Buffer`` objects (checked through weak references) sit at the same addresses, with the same variable
    values, kind of work and owner-registry version."""
    global _realize, _owners
    if _realize is None:
        _realize = sys.modules["tinygrad.engine.realize"]
        from launchtrace import tinygrad_ownership

        _owners = tinygrad_ownership.OWNERS
    _, seq, tid, _, call, run, t0, t1, scope, error = e
    var_vals, api = run.var_vals, run.api
    static = _static(call, _realize)
    owners = _owners
    if owners._pending:
        owners.adopt()
    roots = owners._roots
    in_force = sum(1 for born in roots.values() if born <= seq) if roots else 0  # later labels do not apply
    fast = static.fast
    if fast is not None and error is None and fast.matches(run, tid, owners.version, in_force):
        proto = fast.proto
        return _copy_launch(proto, t0, t1, scope, seq, proto)
    bufs = static.resolve(call, run.inputs, _realize)
    parts = _parts(static, bufs)
    addrs = tuple(_view_address(b) for _, b, _ in parts)
    key = (*addrs, tuple(var_vals.items()) if var_vals else None, api, owners.version, in_force)
    body = static.last
    if (
        body is None
        or body.key != key
        or len(body.refs) != len(parts)
        or any(r() is not p[1] for r, p in zip(body.refs, parts))
    ):
        body = static.last = _decode(static, parts, addrs, var_vals, api, seq, key, owners)
    rec = make_launch_record(
        static.op, static.kernel, body.dim, None, body.arrays, body.scalars, _site(run.code, run.line, run.module),
        static.names, body.buffers, None, 0, body.device, tid, THREAD_NAMES.get(tid, ""), t0, t1, scope, None,
        False, False, api, api in (INTERNAL, BEAM), error, seq,
    )  # fmt: skip
    sources = static.sources
    if error is None and sources is not None and all(sources) and len(parts) == len(bufs):  # no MultiBuffer
        try:
            static.fast = _Template(rec, run, static, bufs, owners.version, in_force)
        except TypeError:  # something not weakly referenceable: no template
            static.fast = None
    return rec


def _decode(
    static: _Static, parts: list, addrs: tuple, var_vals: Any, api: str, seq: int, key: tuple, owners: Any
) -> _Body:
    arrays: list[tuple] = []
    buffers: list[BufferArg] = []
    scalars: list[tuple] = []
    devices: list[str] = []
    n = len(static.slots)
    for (key_i, buf, name), ptr in zip(parts, addrs):
        i = key_i if type(key_i) is int else int(key_i.split(".")[0])
        offset = int(buf.offset or 0)
        owner, owner_offset, foreign = owners.answer(buf, seq)
        arrays.append((key_i, ptr))
        buffers.append(
            make_buffer_arg(
                key_i, name, ptr, (int(buf.size),), _dtype(buf.dtype), int(buf.nbytes), owner, owner_offset,
                foreign, static.roles[i],
            )
        )  # fmt: skip
        if offset or buf._base is not None:
            scalars.append((f"{key_i}.view_offset", offset))
        devices.append(str(buf.device))
    if static.op == Op.LAUNCH.value:
        values = var_vals or {}
        gsize, lsize = static.static_dims or static.info.launch_dims(values)
        for k, var in enumerate(static.var_names):
            scalars.append((n + k, int(values[var]) if var in values else None))
        if lsize is not None:
            scalars.append((n + len(static.var_names), tuple(int(x) for x in lsize)))
        dim = tuple(int(x) for x in gsize)
    else:
        dim = (int(buffers[0].shape[0]) if buffers else 0,)
        scalars.append((2, devices[0] if devices else ""))
        scalars.append((3, devices[-1] if len(devices) > 1 else ""))
    refs = tuple(weakref.ref(p[1]) for p in parts)
    device = devices[0] if devices else ""
    return _Body(key, refs, api, tuple(arrays), tuple(buffers), tuple(scalars), dim, device)
