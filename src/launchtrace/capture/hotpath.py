"""The hot path: what a patched Warp entry point does on every call.

One generic wrapper (:func:`wrap`) serves every entry point; what differs per entry point is only how its
arguments become a payload, which is a small extractor function looked up in a table. The wrapper's job is
budgeted in microseconds, against a CPU ``wp.launch`` of a few tens of them (figures: ``docs/capture.md``):

1. cheap exit first: nobody subscribed, or already inside a recorded call on this thread (``wp.clone`` calls
   ``wp.copy``: one record) -> call through;
2. call the original, timing it with ``time.time_ns``;
3. find the emitting site (first frame outside ``warp`` and ``launchtrace``, cached per code object) and the
   Warp entry point it called (the outermost Warp frame: a user's ``wp.launch_tiled`` is user work, the fill
   inside ``wp.zeros`` is Warp's own, see :func:`is_internal_entry`);
4. turn the arguments into plain values (pointers, shapes, dtypes, scalars: never a reference to a user's
   array) and queue one event (:func:`launchtrace.rawevent.record_event`) for every subscriber.

Everything else (names, parameter labels, owners, ``LaunchRecord`` objects) happens in
:mod:`launchtrace.capture.materialize`, off the hot path. A failure inside steps 3-4 is logged once and never
reaches the user's program.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from time import time_ns
from typing import Any

from launchtrace.capture import bus
from launchtrace.capture.patching import wraps_like
from launchtrace.capture.state import _local, next_scope_id
from launchtrace.rawevent import record_event

__all__ = [
    "ARR",
    "FLAT",
    "HANDLES",
    "STRUCT",
    "emit_scope_begin",
    "emit_scope_end",
    "is_internal_entry",
    "is_library_code",
    "is_warp_code",
    "set_public_entries",
    "wrap",
]

_log = logging.getLogger("launchtrace.capture")

ARR = object()  # marks an array argument in a payload: (ARR, ptr, shape, dtype, capacity, device, indexed)
STRUCT = object()  # marks a flattened wp.struct argument: (STRUCT, ((field, value), ...))
FLAT = object()  # in a record's payload slot: a launch written flat (see launchtrace.capture.warp.wrap_launch)

HANDLES: dict[int, Any] = {}
"""``id(obj) -> obj`` for the kernels, dtypes and devices a flat launch event names by id.

Why: a queued event that refers to a kernel, dtype or ``Device`` object stays tracked by Python's cyclic garbage
collector, and thousands of queued events trigger full collections that cost the launching thread more per
launch than the rest of the recording (``docs/capture.md``, "How it stays cheap"). Events made only of ints, strings,
code objects and tuples of those are untracked by the collector at its first pass. The objects named here are long-lived
(modules' kernels, Warp's dtypes, the runtime's devices) and are kept alive, so an id is never reused for another
object."""

_LIB_PREFIXES: tuple[str, ...] = ()
# Caches per code object are keyed by id(code) and hold the code object itself, checked with ``is``: hashing a
# code object hashes its constants and names every time (dearer the longer the function: docs/capture.md),
# and the hot path asks once per launch. Holding the code keeps its id from being reused.
_LIB_CACHE: dict[int, tuple[Any, bool]] = {}
_USER_MODULE: dict[int, tuple[Any, str]] = {}  # id(code) outside Warp/launchtrace -> (code, module name)
_failures_logged: set[str] = set()


def set_library_prefixes(warp_dir: str, ours: str, exempt: tuple[str, ...] = ()) -> None:
    """Where "library" code lives: Warp's folder and ours, except ``exempt`` folders (our bundled demo is user
    code). Sites skip library frames; a record is ``internal`` when Warp's own code issued it."""
    global _LIB_PREFIXES, _WARP_PREFIX, _EXEMPT
    _LIB_PREFIXES = (warp_dir, ours)
    _WARP_PREFIX = warp_dir
    _EXEMPT = exempt
    _LIB_CACHE.clear()
    _WARP_CACHE.clear()
    _INTERNAL_CACHE.clear()
    _USER_MODULE.clear()


def is_library_code(code: Any) -> bool:
    """Whether ``code`` lives in Warp or launchtrace (cached per code object)."""
    hit = _LIB_CACHE.get(id(code))
    if hit is None or hit[0] is not code:
        name = code.co_filename
        hit = _LIB_CACHE[id(code)] = (code, name.startswith(_LIB_PREFIXES) and not name.startswith(_EXEMPT))
    return hit[1]


def is_warp_code(code: Any) -> bool:
    """Whether ``code`` is Warp's own (its device work is "internal": wp.clone's copy, fem's launches)."""
    hit = _WARP_CACHE.get(id(code))
    if hit is None or hit[0] is not code:
        hit = _WARP_CACHE[id(code)] = (code, bool(_WARP_PREFIX) and code.co_filename.startswith(_WARP_PREFIX))
    return hit[1]


_WARP_PREFIX = ""
_EXEMPT: tuple[str, ...] = ()
_WARP_CACHE: dict[int, tuple[Any, bool]] = {}
_PUBLIC_ENTRIES: dict[int, Any] = {}  # id(code) -> code of Warp's public device-work entry points
_INTERNAL_CACHE: dict[int, tuple[Any, bool]] = {}


def set_public_entries(functions: list[Any]) -> None:
    """The Warp functions whose call from user code is user work, even where Warp implements them through
    another patched entry point (``wp.launch_tiled`` -> ``wp.launch``, ``array.assign`` -> ``wp.copy``)."""
    _PUBLIC_ENTRIES.clear()
    _INTERNAL_CACHE.clear()
    for function in functions:
        code = getattr(function, "__code__", None)
        if code is not None:
            _PUBLIC_ENTRIES[id(code)] = code


def is_internal_entry(code: Any) -> bool:
    """Whether work whose entry code (see :func:`find_site`) is ``code`` is Warp's own: the entry is Warp code
    but none of its public device-work entry points (``wp.zeros``' fill, ``wp.clone``'s copy, ``Tape.backward``,
    ``warp.fem`` / ``warp.sparse`` / ``warp.optim``)."""
    hit = _INTERNAL_CACHE.get(id(code))
    if hit is None or hit[0] is not code:
        public = _PUBLIC_ENTRIES.get(id(code)) is code
        hit = _INTERNAL_CACHE[id(code)] = (code, is_warp_code(code) and not public)
    return hit[1]


def _warn_once(what: str) -> None:
    if what not in _failures_logged:
        _failures_logged.add(what)
        _log.warning("launchtrace: capture failed in %s; the call ran normally (reported once)", what, exc_info=True)


def find_site(frame: Any) -> tuple[Any, int, str, Any]:
    """``(site code, site line, site module, entry code)`` for the frame that called a wrapper.

    The entry code is the Warp function the site called (the outermost Warp frame: ``wp.launch_tiled``,
    ``array.assign``, ``wp.clone``, ``Tape.backward``), or the immediate caller when no Warp frame lies in
    between (user code called the patched entry point itself). It names the API and decides ``internal``
    (:func:`is_internal_entry`)."""
    caller_code = frame.f_code
    hit = _USER_MODULE.get(id(caller_code))
    if hit is not None and hit[0] is caller_code:  # the common case: user code called Warp directly
        return caller_code, frame.f_lineno, hit[1], caller_code
    entry = caller_code
    f = frame
    while f is not None:
        code = f.f_code
        if not is_library_code(code):
            module = f.f_globals.get("__name__", "")
            if len(_USER_MODULE) < 100_000:
                _USER_MODULE[id(code)] = (code, module)
            return code, f.f_lineno, module, entry
        if is_warp_code(code):
            entry = code
        f = f.f_back
    return caller_code, frame.f_lineno, frame.f_globals.get("__name__", ""), caller_code


def wrap(original: Callable, kind: str, extract: Callable, post: Callable | None = None) -> Callable:
    """A recording wrapper around ``original``.

    ``extract(args, kwargs, result)`` returns the payload tuple, or ``None`` when the call issued no device work
    (``wp.launch(record_cmd=True)``). ``post(args, kwargs, result, site_frame)`` runs after every call, recorded
    or not (the Tape caller fix-up).
    """
    queues = bus.queues

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        loc = _local.st
        if loc.busy or not queues():
            if post is None:
                return original(*args, **kwargs)
            result = original(*args, **kwargs)
            post(args, kwargs, result, sys._getframe(1))
            return result
        loc.busy = True
        error = None
        result = None
        t0 = time_ns()
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            t1 = time_ns()
            loc.busy = False
            try:
                frame = sys._getframe(1)
                if post is not None and error is None:
                    post(args, kwargs, result, frame)
                payload = extract(args, kwargs, result)
                if payload is not None:
                    _append(kind, payload, frame, t0, t1, error)
            except Exception:
                _warn_once(kind)
        return result

    return wraps_like(original, wrapper)


def _append(kind: str, payload: tuple, frame: Any, t0: int, t1: int, error: BaseException | None) -> None:
    loc = _local.st
    stack = loc.stack
    site = find_site(frame)
    scope = stack[-1] if stack else None
    bus.offer(record_event(_next_seq(), loc.tid, kind, payload, site, t0, t1, scope, loc.capture_graph, error))


_next_seq = bus.next_seq


# -- scopes --------------------------------------------------------------------------------------------------


def active_span_parent() -> tuple[bytes, bytes, int] | None:
    """The OpenTelemetry span active in this context (the application's own tracing), as ``(trace_id,
    span_id, trace_flags)``; ``None`` when there is none or OpenTelemetry's API was never imported.

    Read when an outermost scope opens, never per launch: the span builder, which runs later on another
    thread, cannot see the launching thread's context."""
    trace_api = sys.modules.get("opentelemetry.trace")
    if trace_api is None:
        return None
    try:
        context = trace_api.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return context.trace_id.to_bytes(16, "big"), context.span_id.to_bytes(8, "big"), int(context.trace_flags)
    except Exception:  # a third-party context implementation: never break the scope
        _warn_once("reading the active OpenTelemetry span")
        return None


def emit_scope_begin(name: str, kind: str, attributes: tuple, internal: bool, frame: Any) -> int:
    """Open a scope on this thread (always tracked; an event only while someone listens). Returns its id."""
    sid = next_scope_id()
    loc = _local.st
    stack = loc.stack
    parent = stack[-1] if stack else None
    stack.append(sid)
    queues = bus.queues()
    if queues:
        try:
            site = find_site(frame) if frame is not None else None
            event = (
                bus.SCOPE_BEGIN,
                bus.next_seq(),
                loc.tid,
                sid,
                parent,
                str(name),
                kind,
                attributes,
                time_ns(),
                site,
                internal,
                active_span_parent() if parent is None else None,
            )
            bus.offer(event)
        except Exception:
            _warn_once("scope begin")
    return sid


def _is_clean_exit(error: BaseException) -> bool:
    """``sys.exit()`` / ``sys.exit(0)`` leaving a scope, or a generator closed inside one: not a failure."""
    if isinstance(error, SystemExit):
        return error.code is None or error.code == 0
    return isinstance(error, GeneratorExit)


def emit_scope_end(sid: int, error: BaseException | None = None, attributes: tuple = ()) -> None:
    """Close scope ``sid`` on this thread (and any scope left open inside it). ``attributes``: what became
    known only at the end (a module load's ``compiled`` / ``cached``), added to the scope's own."""
    loc = _local.st
    stack = loc.stack
    if sid not in stack:
        return
    t1 = time_ns()
    queues = bus.queues()
    if error is not None and _is_clean_exit(error):
        error = None
    while stack:
        top = stack.pop()
        if queues:
            err = None if error is None or top != sid else f"{type(error).__name__}: {error}"
            if attributes and top == sid:
                bus.offer((bus.SCOPE_END, bus.next_seq(), loc.tid, top, t1, err, attributes))
            else:
                bus.offer((bus.SCOPE_END, bus.next_seq(), loc.tid, top, t1, err))
        if top == sid:
            break
