"""Per-thread capture state: the open scope stack, the re-entrancy guard and the active graph capture.

One ``threading.local`` holds one plain ``__slots__`` object per thread: the hot path pays for one
thread-local lookup and then plain attribute reads, instead of a thread-local lookup (each dearer than an
attribute read) for every field. Scopes nest per thread: a record made on a thread belongs to the innermost scope open
there.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
from collections.abc import Callable

__all__ = [
    "THREAD_NAMES",
    "ThreadState",
    "current_scope",
    "next_graph_id",
    "next_scope_id",
    "thread_key",
    "tstate",
]

next_scope_id: Callable[[], int] = itertools.count(1).__next__
_graph_counter: Callable[[], int] = itertools.count(1).__next__
_graph_prefix = secrets.randbits(30) << 32


graphs_begun = [0]
"""How many graph captures began in this process: the materializer looks for graph records only once one did."""


def next_graph_id() -> int:
    """A new graph id, unique across processes (a random 30-bit prefix per process, a counter below it; below
    2**62, so an OpenTelemetry int attribute): the replay of a graph in one trace names the captured records
    of another trace, or of another process writing to the same file, without ambiguity."""
    graphs_begun[0] += 1
    return _graph_prefix | (_graph_counter() & 0xFFFF_FFFF)


def _new_graph_prefix() -> None:
    global _graph_prefix
    _graph_prefix = secrets.randbits(30) << 32


if hasattr(os, "register_at_fork"):  # a forked child's new graphs must not take ids its parent also gives out
    os.register_at_fork(after_in_child=_new_graph_prefix)

THREAD_NAMES: dict[int, str] = {}
"""Thread key (:func:`thread_key`) -> name of every thread that touched the capture state (the oldest half is let
go past :data:`THREAD_NAMES_MAX`: their events were turned into records long before)."""
THREAD_NAMES_MAX = 65_536
_REUSED: dict[int, int] = {}  # ident -> how many later threads got it (bounded with THREAD_NAMES)


def thread_key() -> int:
    """The calling thread's id in its capture events (``thread.id`` in spans): ``threading.get_ident()``, unless an
    earlier thread of this process had that ident. The C library hands an ended thread's ident to the next thread
    at once, and the ended thread's last events may still wait in the ring: under one id, they took the new
    thread's name (and its step root). The k-th later thread with an ident gets ``ident + (k << 48)`` (an ident is
    an address below 2**47 on Linux; k wraps at 32,767, so the key stays unique among recent threads and fits
    an int64)."""
    ident = threading.get_ident()
    key = ident
    if ident in THREAD_NAMES or ident in _REUSED:
        k = _REUSED.get(ident, 0) % 32_767 + 1
        _REUSED[ident] = k
        key = ident + (k << 48)
    if len(THREAD_NAMES) >= THREAD_NAMES_MAX:
        for old in list(THREAD_NAMES)[: THREAD_NAMES_MAX // 2]:
            del THREAD_NAMES[old]
        if len(_REUSED) >= THREAD_NAMES_MAX:
            _REUSED.clear()
    THREAD_NAMES[key] = threading.current_thread().name
    return key


class ThreadState:
    """One thread's capture state."""

    __slots__ = ("busy", "capture_graph", "capture_outer", "in_timer", "stack", "tape_stack", "tid")

    def __init__(self) -> None:
        self.busy = False  # inside a recorded call: nested device work belongs to it (wp.clone -> wp.copy)
        self.in_timer = 0  # inside ScopedTimer.__enter__/__exit__: its tape scope call is the same scope
        self.capture_graph: int | None = None  # id of the graph being captured on this thread
        self.capture_outer: list[int | None] = []  # enclosing captures' ids (a capture begun inside another)
        self.stack: list[int] = []  # open scope ids, innermost last
        self.tape_stack: list[int] = []  # the subset opened by Tape.record_scope_begin
        self.tid = thread_key()


class _Local(threading.local):
    def __init__(self) -> None:
        self.st = ThreadState()


_local = _Local()


def tstate() -> ThreadState:
    """This thread's :class:`ThreadState`."""
    return _local.st


def current_scope() -> int | None:
    """The id of the innermost scope open on this thread, or ``None``."""
    stack = _local.st.stack
    return stack[-1] if stack else None
