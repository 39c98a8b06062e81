"""tinygrad frontend: every kernel execution and copy tinygrad runs becomes a record of the same model as Warp's.

Where: tinygrad 0.14 executes every call of a schedule (``Tensor.realize``, ``TinyJit`` replays, the jit's
input copies, ``.numpy()``'s copy-out, BEAM timing runs) through ``realize.pm_exec.rewrite(call, ctx)``, looked
up on every call. :func:`install` puts a wrapper there as an *instance* attribute (whatever was there before,
someone else's wrapper included, is what it calls, and :func:`uninstall` puts exactly that back).

When: :func:`launchtrace.instrument` calls :func:`install`. If ``tinygrad.engine.realize`` is already imported
it is patched at once; if tinygrad is only importable, a meta-path finder patches it right after the program
imports it (tinygrad is never imported on the program's behalf); if tinygrad is not installed nothing happens.

Hot path (the launching thread): time the original call and queue one raw event holding *references*: the call
UOp and a :class:`_Run` shared by every call of one ``run_linear`` (its input UOps, a copy of the variable values,
the kind of work, the user's frame, found once per run): a small fraction of what decoding costs (figures:
``docs/tinygrad.md``, ``benchmarks/bench_tinygrad.py``).
Decoding (kernel name, launch dims, buffers, roles, offsets, owners) happens in the materializer, off the
launching thread, by :func:`launchtrace.capture.tinygrad_decode.decode_event`, which each
``rawevent.FRAMEWORK`` event names. The queued references keep the call's buffers alive until the event is
decoded and no longer (the hook itself holds a run only while its context, one ``run_linear``'s, lives);
nothing long-lived is keyed by a raw address (the per-call cache is a ``WeakKeyDictionary`` on the call UOp).

Kinds of work (``LaunchRecord.api``): ``tinygrad.realize`` (user work: ``Tensor.realize`` and what triggers it,
uploads included), ``tinygrad.TinyJit`` (a jit replay), ``tinygrad.internal`` (``update_stats=False``: the
copy-out of ``.numpy()``, ``Buffer(initial_value=...)``; ``internal=True``), ``tinygrad.beam`` (BEAM timing
runs, ``ctx.cache is False``; left out unless :func:`configure` ``(record_beam=True)`` or
``LAUNCHTRACE_TINYGRAD_BEAM=1``). A graph runner's batch (``CUSTOM_FUNCTION "graph"``: CUDA, Metal, NULL, ...)
is a scope of kind ``"graph"`` whose records are its kernels; tinygrad times only the whole batch, so each
kernel carries the batch's start and end and the scope says ``timing="per batch"``.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import itertools
import logging
import os
import sys
import threading
import weakref
from time import time_ns
from typing import Any, NamedTuple

from launchtrace.capture import bus
from launchtrace.capture.hotpath import _warn_once, emit_scope_begin, emit_scope_end, is_library_code
from launchtrace.capture.state import _local
from launchtrace.capture.tinygrad_decode import BEAM, GRAPH, INTERNAL, JIT, REALIZE, decode_event
from launchtrace.rawevent import FRAMEWORK

__all__ = ["configure", "install", "is_patched", "uninstall"]

_log = logging.getLogger("launchtrace.capture")

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


def _patching_exec(loader: Any) -> None:
    """Make this (per-spec) loader patch the module right after running it; the loader stays tinygrad's own, so
    ``module.__loader__`` (``get_source``, resources) is untouched."""
    run = loader.exec_module

    def exec_module(module: Any) -> None:
        run(module)
        try:
            _patch_now(module)
        except Exception:
            _warn_once("tinygrad install")

    loader.exec_module = exec_module


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
                    try:
                        _patching_exec(spec.loader)
                    except (AttributeError, TypeError):  # a loader without instance attributes: no patch
                        _warn_once("tinygrad install")
                return spec
        return None


def _patch_now(realize: Any) -> None:
    global _patch, _finder
    with _lock:
        if _patch is None and _wanted:
            _setup_paths(realize)
            _patch = _Patch(realize)
        if _finder is not None:  # done: the import hook is not needed any more
            try:
                sys.meta_path.remove(_finder)
            except ValueError:
                pass
            _finder = None


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


def _skip_new(code: Any) -> tuple[Any, bool]:
    """Remember whether frames of ``code`` are passed over when looking for the user's call site."""
    name = code.co_filename
    skip = name.startswith(_TG_PREFIX) or name == _CONTEXTLIB or is_library_code(code)
    if len(_SITE_CACHE) > 100_000:
        _SITE_CACHE.clear()
    hit = _SITE_CACHE[id(code)] = (code, skip)
    return hit


def _user_frame(frame: Any) -> Any:
    """The innermost frame outside tinygrad, contextlib and launchtrace (the loop inlines the per-code cache:
    this runs once per ``run_linear``, through four or five of tinygrad's frames on a jit replay)."""
    f = frame
    get = _SITE_CACHE.get
    while f is not None:
        code = f.f_code
        hit = get(id(code))
        if hit is None or hit[0] is not code:
            hit = _skip_new(code)
        if not hit[1]:
            return f
        f = f.f_back
    return frame


class _Run(NamedTuple):
    """What the calls of one ``run_linear`` (one ``ExecContext``) share: its inputs and variable values, the kind
    of work, the user's call site, the launching thread's id and scope stack. Queued events hold it, and the
    hook while its context lives (the context's ``run_linear``), so the inputs (the user's buffers) live until
    the last of its events is decoded and no longer.

    A tuple, in this order, so that the compiled hook makes it (and reads ``stack`` and ``tid``) by position.

    The call site is the frame's code and *instruction offset* (``f_lasti``), not its line: ``f_lineno`` scans
    the code's line table from its start (about 11,000 instructions for a call late in a long function or
    module, most of the recorder's cost on a one-kernel jit call, ``benchmarks/bench_tinygrad.py --callgrind``);
    the decoder turns the offset into the line (:func:`launchtrace.capture.tinygrad_decode.line_at`)."""

    inputs: tuple
    var_vals: dict | None
    api: str
    stack: list
    tid: int
    code: Any
    lasti: int
    module: str


_CONTEXT_NAMES = ("cache", "update_stats", "jit", "var_vals", "input_uops", "__name__")
"""What the compiled hook reads of a context (the first five) and of the frame's globals (the last)."""


def _new_run(inputs: tuple, var_vals: Any, api: str, frame: Any, st: Any) -> _Run:
    """A :class:`_Run` (made without the named tuple's ``__new__``: once per ``run_linear``, a cost on every jit
    call)."""
    code, lasti, module = frame.f_code, frame.f_lasti, frame.f_globals.get("__name__", "")
    return _make(_Run, (inputs, var_vals, api, st.stack, st.tid, code, lasti, module))


_make = tuple.__new__


def _kind_of(ctx: Any) -> str | None:
    """The ``api`` of the work a context runs, or ``None`` when it is not recorded (BEAM runs, unless asked)."""
    if ctx.cache is False:
        return BEAM if _record_beam else None
    if not ctx.update_stats:
        return INTERNAL
    return JIT if ctx.jit else REALIZE


def _as_tuple(*items: Any) -> tuple:
    return items


def _compiled() -> Any:
    """``capture/_fastlaunch`` where it is built and pure Python was not asked for, else ``None``."""
    from launchtrace import native

    return native.load("launchtrace.capture._fastlaunch")


TOUCH_NS = 2_000_000
"""How often the hot path tells a consumer waiting for a pause in the launches that they go on
(``bus.touch_activity``, a clock read of its own): every 2 ms of launching rather than every kernel; the export
worker waits for a 20 ms gap (``export.pipeline.BUSY_GAP_S``)."""


def _nothing() -> None:
    """Returns None: the stand-in for a missing ``touch`` and for a weak reference that has died (what
    :func:`_make_python_hook`'s cell holds before its first run and after its context dies)."""
    return None


def _seq_iterator(next_seq: Any) -> Any:
    """An iterator giving ``next_seq()``'s numbers: the ``itertools.count`` behind it where it is one
    (``next(count)`` is a plain C call; calling ``count.__next__`` goes through a method-wrapper, about 300
    instructions more a kernel), else an iterator calling it."""
    count = getattr(next_seq, "__self__", None)
    if type(count) is itertools.count and next_seq == count.__next__:
        return count
    return iter(next_seq, object())


def _make_hook(inner: Any, realize: Any) -> Any:
    """The wrapper of ``pm_exec.rewrite``; ``inner`` is what was there (bound method or someone's wrapper).

    One event per kernel or copy: ``(FRAMEWORK, seq, tid, decode, call, run, t0, t1, scope, error)``, sharing
    one :class:`_Run` per ``run_linear``, found again through a weak reference to its context (the run is let go
    when the context dies): per kernel the hook checks the call's kind, times the call and queues the event;
    everything constant over a run (kind of work, call site, thread, its scope stack) was found at the run's
    first kernel.

    Where ``capture/_fastlaunch.c`` is built (and ``LAUNCHTRACE_PURE_PYTHON`` is not set) the hook is its
    ``TinyHook`` (from Python 3.11): it takes every kernel or copy (for a new ``run_linear``'s first it walks to
    the user's frame and makes the run as ``begin`` below does, and remembers it with its own weak reference, whose
    callback it is) and hands every other call to ``rewrite`` below (a context it does not make a run for, BEAM's
    for one, too), the whole hook where nothing is compiled; the event is its ``Event``, which the
    cycle collector does not walk while it waits in the queue (a tuple without the compiled module). Cost of
    each: ``docs/tinygrad.md``, "Cost"."""
    from tinygrad.uop.ops import Ops, UOp

    program, copy, custom = Ops.PROGRAM, Ops.COPY, Ops.CUSTOM_FUNCTION
    compiled = _compiled()
    framework, offer, pack, decode = FRAMEWORK, bus.offer, getattr(compiled, "event", _as_tuple), decode_event
    next_seq = bus.next_seq
    seqs = _seq_iterator(next_seq)
    local, make, ref = _local, _make, weakref.ref
    empty = (_nothing, None)
    cell: list = [empty]  # [(weak reference to the context, its run)], set at once, so a thread never pairs its
    # context with another thread's run; emptied when the context dies (forget)
    touch, wake = bus.touch_activity or _nothing, bus.wake_consumers
    # The one open subscription (the exporter's, in a program), read by the hot path without bus.offer's loop:
    # the _subs tuple it was found in, its queue, capacity and half (where the consumer is woken; -1: never).
    # Four cells rather than one tuple (160 instructions a kernel less): a thread that reads them while another
    # thread's subscription change rewrites them can queue one event to the new subscription's queue instead
    # of the one just closed, and no event is lost or doubled.
    one_subs: tuple | None = None
    one_queue: Any = None
    one_capacity, one_half = 0, -1
    touch_after = 0  # wall-clock ns after which the next event touch()es: every TOUCH_NS while launching

    def rewrite(call: Any, ctx: Any = None) -> Any:
        nonlocal touch_after
        pair = cell[0]
        run = pair[1] if pair[0]() is ctx is not None else None
        subs = bus._subs
        if not subs:
            return inner(call, ctx)
        op = call.src[0].op
        if op is not program and op is not copy:
            return other(call, ctx, op)
        if run is None:
            if ctx is None:
                return inner(call, ctx)
            run = find(ctx)
            if run is None:
                return inner(call, ctx)
        t0 = time_ns()
        try:
            result = inner(call, ctx)
        except BaseException as exc:
            failed(call, run, t0, exc)
            raise
        t1 = time_ns()
        stack = run.stack
        event = pack(framework, next(seqs), run.tid, decode, call, run, t0, t1, stack[-1] if stack else None, None)
        if subs is one_subs:
            q = one_queue
            n = len(q)
            if n < one_capacity:
                q.append(event)
                if n == one_half:
                    wake()
            else:
                subs[0].full(event)
            if t1 > touch_after:
                touch_after = t1 + TOUCH_NS
                touch()
        else:
            put(subs, event)
        return result

    def find(ctx: Any) -> _Run | None:
        """A context's run, found at its first kernel or copy (remembered until the context dies); ``None``: not
        recorded."""
        try:
            frame = _user_frame(sys._getframe(2))
        except Exception:
            _warn_once("tinygrad")
            return None
        return begin(ctx, frame)

    def begin(ctx: Any, frame: Any) -> _Run | None:
        """:func:`find` once the user's frame is found: :func:`_kind_of` and :func:`_new_run` inlined (once per
        ``run_linear``: most of a one-kernel jit call's recording). The compiled hook makes the same run in C
        (``tiny_begin`` in ``capture/_fastlaunch.c``; ``tests/test_tinygrad_compiled.py`` compares them)."""
        try:
            if ctx.cache is False:
                if not _record_beam:
                    return None
                api = BEAM
            elif not ctx.update_stats:
                api = INTERNAL
            else:
                api = JIT if ctx.jit else REALIZE
            vv = ctx.var_vals
            st = local.st
            run = make(
                _Run,
                (
                    ctx.input_uops,
                    dict(vv) if vv else None,
                    api,
                    st.stack,
                    st.tid,
                    frame.f_code,
                    frame.f_lasti,
                    frame.f_globals.get("__name__", ""),
                ),
            )
            cell[0] = (ref(ctx, died), run)
        except Exception:
            _warn_once("tinygrad")
            return None
        return run

    def forget(dead: Any) -> None:
        """The context of the remembered run died (its ``run_linear`` ended): the run is no longer held here."""
        if cell[0][0] is dead:
            cell[0] = empty

    def put(subs: tuple, event: Any) -> None:
        """``bus.offer`` (every subscription, the consumer told), then remember a single subscription."""
        nonlocal one_subs, one_queue, one_capacity, one_half
        offer(event)
        if len(subs) == 1:
            sub = subs[0]
            one_queue, one_capacity = sub.queue, sub.capacity
            one_half = sub.capacity // 2 if wake is not None else -1
            one_subs = subs
        else:
            one_subs = None

    def failed(call: Any, run: _Run, t0: int, exc: BaseException) -> None:
        try:
            queue(call, run, t0, time_ns(), f"{type(exc).__name__}: {exc}")
        except Exception:
            _warn_once("tinygrad")

    def queue(call: Any, run: _Run, t0: int, t1: int, error: str | None) -> None:
        stack = run.stack
        offer(pack(framework, next_seq(), run.tid, decode, call, run, t0, t1, stack[-1] if stack else None, error))

    def other(call: Any, ctx: Any, op: Any) -> Any:
        if op is custom and call.src[0].arg == "graph":
            return _run_graph(inner, call, ctx)
        return inner(call, ctx)

    def _run_graph(inner: Any, call: Any, ctx: Any) -> Any:
        """A graph runner's batch: a ``graph`` scope around one record per kernel it ran (timed per batch)."""
        try:
            api = _kind_of(ctx)
            if api is None:
                return inner(call, ctx)
            f = _user_frame(sys._getframe(1))  # our own frames are passed over
            inner_calls = call.src[0].src[0].src
            device = call.src[0].device
            attrs = (
                ("timing", "per batch"),
                ("kernels", len(inner_calls)),
                ("device", device if isinstance(device, str) else ",".join(device)),
            )
            vv = ctx.var_vals
            run = _new_run(ctx.input_uops, dict(vv) if vv else None, GRAPH, f, local.st)
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
                err = None if error is None else f"{type(error).__name__}: {error}"
                for kcall in inner_calls:
                    kop = kcall.src[0].op
                    if kop is program or kop is copy:
                        offer(pack(framework, next_seq(), run.tid, decode, kcall, run, t0, t1, sid, err))
            except Exception:
                _warn_once("tinygrad graph")
            emit_scope_end(sid, error)

    hook: Any = rewrite
    died = forget  # the weak references' callback (begin's: the compiled hook remembers its own runs)
    if compiled is not None and sys.version_info >= (3, 11):  # it reads frames through 3.11's C API
        hook = compiled.TinyHook(
            inner, rewrite, bus, seqs, program, copy, framework, decode, failed, _warn_once, _SITE_CACHE,
            _skip_new, local, _Run, _CONTEXT_NAMES, (INTERNAL, JIT, REALIZE, ""), UOp,
        )  # fmt: skip
    for it in {rewrite, hook}:
        it.__wrapped__ = inner
        it.__name__ = "rewrite"
        it.__qualname__ = "PatternMatcher.rewrite"
    return hook
