"""Decoding tinygrad capture events into records, off the launching thread (see :mod:`launchtrace.capture.tinygrad`).

Per call UOp (a ``WeakKeyDictionary``: replays reuse the call objects) the static part is worked out once: kind,
name, buffer slots and their read/write roles (``ProgramInfo.outs`` / ``.ins``), variables, where each slot's
buffer comes from (a jit input, or a buffer the call names itself). Per event: the buffers (address = base +
byte offset), launch dims with the variables' values, owners (:mod:`launchtrace.tinygrad_ownership`). The call's
last record is kept as a template, with weak references to what it was made from, so a replay is a copy.
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from typing import Any

from launchtrace.capture.materialize import _copy_launch, _site, make_buffer_arg, make_launch_record
from launchtrace.capture.state import THREAD_NAMES
from launchtrace.model import BufferArg, LaunchRecord, Op

__all__ = ["BEAM", "COPY_KERNEL", "GRAPH", "INTERNAL", "JIT", "REALIZE", "decode_event", "line_at"]

REALIZE, JIT, INTERNAL, BEAM, GRAPH = (
    "tinygrad.realize",
    "tinygrad.TinyJit",
    "tinygrad.internal",
    "tinygrad.beam",
    "tinygrad.graph",
)
"""The ``api`` of a tinygrad record: the kind of work (see :mod:`launchtrace.capture.tinygrad`)."""
COPY_KERNEL = "tinygrad.copy"


_lines: dict[tuple[int, int], tuple[Any, int]] = {}  # (id(code), offset) -> (code, line); the code is kept


def line_at(code: Any, lasti: int) -> int:
    """The source line of byte offset ``lasti`` in ``code`` (what ``frame.f_lineno`` says for a frame stopped
    there), cached: the hook records the offset and leaves this table walk to the decoder."""
    key = (id(code), lasti)
    hit = _lines.get(key)
    if hit is None or hit[0] is not code:
        line = code.co_firstlineno
        for start, end, number in code.co_lines():
            if start <= lasti < end:
                if number is not None:
                    line = number
                break
        if len(_lines) > 100_000:
            _lines.clear()
        hit = _lines[key] = (code, line)
    return hit[1]


class _Static:
    """What one call UOp always says: kind, name, parameter names, slots and their roles, variables; where each
    slot's buffer comes from; and the call's last record as a template (see :func:`decode_event`)."""

    __slots__ = ("fast", "info", "kernel", "names", "op", "roles", "slots", "sources", "static_dims", "var_names")

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


class _Template:
    """A decoded record of one call and everything it was made from, held weakly: a later event of the same call
    whose inputs, buffers (and their memory), variable values, kind, site, thread and owner answers are all the
    same is a copy of it with its own times, scope and sequence number (a jit replay: most events)."""

    __slots__ = ("api", "buf_refs", "code", "in_force", "input_refs", "lasti", "proto", "raw_refs", "tid", "var_vals",
                 "version")  # fmt: skip

    def __init__(self, proto: LaunchRecord, run: Any, static: _Static, bufs: list, version: int, in_force: int):
        self.proto, self.api, self.code, self.lasti, self.tid = proto, run.api, run.code, run.lasti, proto.thread
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

    def matches(self, run: Any, tid: int, version: int, in_force: int) -> bool:
        if (
            run.api != self.api or run.code is not self.code or run.lasti != self.lasti or tid != self.tid
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

    A call's last record is its template (:class:`_Template`): an event equal to it in everything but times,
    scope and sequence number (a jit replay) is a copy of it; anything else is decoded in full."""
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
    in_force = sum(1 for born in tuple(roots.values()) if born <= seq) if roots else 0  # later labels: no
    fast = static.fast
    if fast is not None and error is None and fast.matches(run, tid, owners.version, in_force):
        proto = fast.proto
        return _copy_launch(proto, t0, t1, scope, seq, proto)
    bufs = static.resolve(call, run.inputs, _realize)
    parts = _parts(static, bufs)
    arrays, buffers, scalars, dim, device = _decode(static, parts, var_vals, seq, owners)
    site = _site(run.code, line_at(run.code, run.lasti), run.module)
    rec = make_launch_record(
        static.op, static.kernel, dim, None, arrays, scalars, site, static.names,
        buffers, None, 0, device, tid, THREAD_NAMES.get(tid, ""), t0, t1, scope, None, False, False, api,
        api in (INTERNAL, BEAM), error, seq,
    )  # fmt: skip
    sources = static.sources
    if error is None and sources is not None and all(sources) and len(parts) == len(bufs):  # no MultiBuffer
        try:
            static.fast = _Template(rec, run, static, bufs, owners.version, in_force)
        except TypeError:  # something not weakly referenceable: no template
            static.fast = None
    return rec


def _decode(static: _Static, parts: list, var_vals: Any, seq: int, owners: Any) -> tuple:
    """``(arrays, buffers, scalars, dim, device)`` of one call, in full."""
    arrays: list[tuple] = []
    buffers: list[BufferArg] = []
    scalars: list[tuple] = []
    devices: list[str] = []
    n = len(static.slots)
    for key_i, buf, name in parts:
        i = key_i if type(key_i) is int else int(key_i.split(".")[0])
        ptr = _view_address(buf)
        offset = int(buf.offset or 0)
        owner, owner_offset, foreign = owners.answer(buf, seq)
        arrays.append((key_i, ptr))
        buffers.append(
            make_buffer_arg(
                key_i, name, ptr, (int(buf.size),), _dtype(buf.dtype), int(buf.nbytes), owner, owner_offset,
                foreign, static.roles[i], None,
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
    return tuple(arrays), tuple(buffers), tuple(scalars), dim, (devices[0] if devices else "")
