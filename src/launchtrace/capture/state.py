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

__all__ = ["THREAD_NAMES", "ThreadState", "current_scope", "next_graph_id", "next_scope_id", "tstate"]

next_scope_id: Callable[[], int] = itertools.count(1).__next__
_graph_counter: Callable[[], int] = itertools.count(1).__next__
_graph_prefix = secrets.randbits(30) << 32


def next_graph_id() -> int:
    """A new graph id, unique across processes (a random 30-bit prefix per process, a counter below it; below
    2**62, so an OpenTelemetry int attribute): the replay of a graph in one trace names the captured records
    of another trace, or of another process writing to the same file, without ambiguity."""
    return _graph_prefix | (_graph_counter() & 0xFFFF_FFFF)


def _new_graph_prefix() -> None:
    global _graph_prefix
    _graph_prefix = secrets.randbits(30) << 32


if hasattr(os, "register_at_fork"):  # a forked child's new graphs must not take ids its parent also gives out
    os.register_at_fork(after_in_child=_new_graph_prefix)

THREAD_NAMES: dict[int, str] = {}
"""Thread id -> name of every thread that touched the capture state (ids can be reused: last name wins)."""


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
        self.tid = threading.get_ident()
        THREAD_NAMES[self.tid] = threading.current_thread().name


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
