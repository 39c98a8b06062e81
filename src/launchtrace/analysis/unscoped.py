"""Work outside every scope, cut for the topology diff by its content, not by where the exporter cut it.

Why: the exporter puts records that are under no scope into synthetic ``launchtrace.step`` roots, one open per
thread, closed after ``step_max_spans`` records or ``step_window_s`` seconds. Where the window closes depends on
time (a cold kernel cache, a slower machine, a sleep in the program), so two runs of an unchanged program cut the
same launches into different ``<no scope>`` occurrences, and a diff that pairs occurrences by number reported
launches inserted and removed: a zero-code program that launches every few milliseconds for a few seconds, or
one whose first step compiled for a second, failed the topology gate against itself.

The topology diff therefore reads each thread's unscoped records as one stream, in the order they were issued,
and cuts it again where its content says (:class:`UnscopedChunks`): a chunk ends before the stream's *anchor*
(the call of one kernel at one site, the one met most often in the stream's first ``min_len`` records; the
first of them on a tie) once it holds ``min_len`` records, and in any case at ``max_len``. Two runs that issue
the same unscoped work get the same chunks however their roots were cut; in a program that repeats a loop, a
launch inserted in one chunk leaves the next chunks aligned.

The timing cuts the same stream finer, into the loop's iterations (:class:`LoopIterations`): a new iteration
begins at a call (one kernel at one site on the same arrays) already met in the iteration being filled. A
zero-code program with no timer (``for i in range(n): wp.launch(a, ...); wp.launch(b, ...)``) then has a step
per iteration, as a timed one has, and its kernels get verdicts from one run each; where the exporter cut its
roots does not matter here either. Nothing needs holding back: the cut depends only on the records before it.
A loop body that makes one call twice (a tinygrad jit call whose arena hands one kernel the same buffers in
its forward and backward parts) is cut there too: each pass is then two steps, the same two in every run.

A thread's stream is named :data:`~launchtrace.steps.NO_SCOPE`, with the thread's name after it for any thread
but the main one (``<no scope> (Thread-2 (worker))``), so two threads' unscoped work is never paired with each
other's. The workers of one pool (``ThreadPoolExecutor-1_0``, ``ThreadPoolExecutor-1_1``: ``<prefix>_<k>``, as
``concurrent.futures`` names them) are one stream, ``<no scope> (ThreadPoolExecutor-1)``, and each of its chunks
is compared in a fixed order of its content (:func:`content_order`): which idle worker takes a task, and which
of two workers launches first, changes from run to run, and an unchanged program that submitted a kernel per
task to a pool failed the topology gate against itself (``<no scope> (ThreadPoolExecutor-1_1) #0 (only in A):
24 -> 0 records``). Within a pool's chunk the order of launches is then not compared, only what ran.

Example::

    chunks = UnscopedChunks()
    for seg in segs:                      # in the one rule's order
        begun, done = chunks.feed(seg.records)
    done += chunks.finish()
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from launchtrace.model import LaunchRecord
from launchtrace.steps import NO_SCOPE, Occurrence

__all__ = [
    "CHUNK_MAX",
    "CHUNK_MIN",
    "LoopIterations",
    "UnscopedChunks",
    "content_order",
    "is_unscoped",
    "keyed_segments",
    "stream_name",
]

CHUNK_MIN = 1024
"""Records a chunk holds at least before it may end at the anchor."""
CHUNK_MAX = 4096
"""Records a chunk holds at most (the bound on what the streamed diff keeps per thread and side)."""

Key = tuple[str, int]
"""A segment's key in the diff: its name and its number."""


_POOL_WORKER = re.compile(r"(.+)_\d+")


def stream_name(rec: LaunchRecord) -> str:
    """The name of the unscoped stream ``rec`` belongs to: its thread's, or its pool's (see the module docstring)."""
    name = rec.thread_name
    if name in ("", "MainThread"):
        return NO_SCOPE
    pool = _POOL_WORKER.fullmatch(name)
    return f"{NO_SCOPE} ({pool.group(1) if pool else name})"


def content_order(records: Sequence[LaunchRecord]) -> tuple[LaunchRecord, ...]:
    """``records`` in an order fixed by what they are (kind, kernel, call site, dims, scalars, buffers by name),
    not by when a worker issued them."""

    def key(r: LaunchRecord) -> tuple:
        names = tuple((str(b.key), b.owner or b.alloc or "") for b in r.buffers)
        return (str(r.op), r.kernel, r.site.file, r.site.line, repr(r.dim), repr(r.scalars), names)

    return tuple(sorted(records, key=key))


def is_unscoped(seg: Occurrence) -> bool:
    """Whether ``seg`` is a run of records under no scope (not a scope's occurrence, not an inferred step)."""
    return seg.scope_id is None and seg.name == NO_SCOPE


class _Stream:
    """One thread's unscoped records: the chunk being filled and how the next cut is found."""

    __slots__ = ("anchor", "chunk", "counts", "index", "pooled", "seen")

    def __init__(self, pooled: bool = False) -> None:
        self.pooled = pooled  # a pool's workers: its chunks are compared in content order
        self.chunk: list[LaunchRecord] = []
        self.index = 0  # the number of the chunk being filled
        self.counts: dict[Any, int] | None = {}  # anchor candidates until the anchor is chosen
        self.anchor: Any = None
        self.seen = 0


def _chunk(s: _Stream) -> tuple[LaunchRecord, ...]:
    return content_order(s.chunk) if s.pooled else tuple(s.chunk)


def _anchor_key(rec: LaunchRecord) -> tuple:
    return (rec.op, rec.kernel, rec.site)


def _call_key(rec: LaunchRecord) -> tuple:
    """A call as :class:`LoopIterations` tells calls apart: its op, kernel and site, and each array by what it
    is (owner and offset, else allocation and offset, else pointer). The arrays matter where one line launches
    one kernel on several buffers per iteration: a tinygrad jit call replays all its kernels from the line that
    calls it, an optimizer updates each parameter with one kernel."""
    arrays = tuple(
        (b.owner, b.offset) if b.owner is not None else (b.alloc, b.offset) if b.alloc is not None else b.ptr
        for b in rec.buffers
    )
    return (rec.op, rec.kernel, rec.site, arrays)


class UnscopedChunks:
    """Unscoped records cut into chunks by content, per thread (see the module docstring). Feed the segments'
    records in the one rule's order (a thread's roots never overlap, so that is the order they were issued in)."""

    def __init__(self, min_len: int = CHUNK_MIN, max_len: int = CHUNK_MAX) -> None:
        if not 1 <= min_len < max_len:
            raise ValueError("need 1 <= min_len < max_len")
        self.min_len = min_len
        self.max_len = max_len
        self._streams: dict[str, _Stream] = {}

    def feed(self, records: Iterable[LaunchRecord]) -> tuple[list[Key], list[tuple[Key, tuple[LaunchRecord, ...]]]]:
        """Take some records: the keys of the chunks they begin, in order, and the chunks they complete."""
        begun: list[Key] = []
        done: list[tuple[Key, tuple[LaunchRecord, ...]]] = []
        for rec in records:
            name = stream_name(rec)
            s = self._streams.get(name)
            if s is None:
                s = self._streams[name] = _Stream(pooled=_POOL_WORKER.fullmatch(rec.thread_name) is not None)
            key = _anchor_key(rec)
            n = len(s.chunk)
            if n >= self.max_len or (n >= self.min_len and key == s.anchor):
                done.append(((name, s.index), _chunk(s)))
                s.chunk = []
                s.index += 1
            if not s.chunk:
                begun.append((name, s.index))
            s.chunk.append(rec)
            if s.counts is not None:
                s.counts[key] = s.counts.get(key, 0) + 1
                s.seen += 1
                if s.seen == self.min_len:
                    s.anchor = max(s.counts, key=s.counts.__getitem__)  # the first met of the most frequent
                    s.counts = None
        return begun, done

    def finish(self) -> list[tuple[Key, tuple[LaunchRecord, ...]]]:
        """The chunks still being filled (once every record has been fed)."""
        out = [((name, s.index), _chunk(s)) for name, s in self._streams.items() if s.chunk]
        self._streams.clear()
        return out


class LoopIterations:
    """Each thread's (a pool's workers: the pool's) unscoped records numbered by the loop iteration they belong
    to, for the timing (see the module docstring): :meth:`of` gives a record's stream (its step name) and
    iteration. A record begins the next iteration when its call (:func:`_call_key`) was met already in the one
    being filled, or when that one holds ``max_len`` distinct calls (a program whose every launch is a new
    kernel). Two runs that issue the same records cut them alike; setup before the loop joins the first
    iteration, which the warm-up rule usually leaves out. State: the calls of each thread's current iteration
    (at most ``max_len``)."""

    def __init__(self, max_len: int = CHUNK_MAX) -> None:
        self.max_len = max_len
        self._streams: dict[str, tuple[list[int], set]] = {}

    def root(self, records: Sequence[LaunchRecord]) -> list[tuple[str, int, bool]]:
        """:meth:`of` each of one exporter root's records (one step of the one rule), the iterations left open by
        the roots before closed first: an iteration never spans roots, as a step never spans traces, so every
        reader (a streamed one taking a trace at a time, the fleet's fast path remembering a root's cut) cuts
        alike. A root cut in the middle of a loop pass leaves two short iterations, once a root."""
        for name in {stream_name(r) for r in records}:
            s = self._streams.get(name)
            if s is not None and s[1]:
                s[0][0] += 1
                s[1].clear()
        return [self.of(r) for r in records]

    def of(self, rec: LaunchRecord) -> tuple[str, int, bool]:
        """``(stream name, iteration number, whether rec begins it)``; call in the order the records were
        issued."""
        name = stream_name(rec)
        s = self._streams.get(name)
        if s is None:
            s = self._streams[name] = ([0], set())
        number, calls = s
        key = _call_key(rec)
        if key in calls or len(calls) >= self.max_len:
            number[0] += 1
            calls.clear()
        begins = not calls
        calls.add(key)
        return name, number[0], begins


def keyed_segments(segs: Sequence[Occurrence]) -> dict[Key, tuple[LaunchRecord, ...]]:
    """The records the topology diff pairs, by key, in the order the diff lists them: each scope occurrence (and
    inferred step) as itself, and the unscoped records in chunks, each placed where its first record was."""
    chunks = UnscopedChunks()
    out: dict[Key, tuple[LaunchRecord, ...]] = {}
    for seg in segs:
        if is_unscoped(seg):
            begun, done = chunks.feed(seg.records)
            for key in begun:
                out[key] = ()
            out.update(done)
        else:
            out[(seg.name, seg.occurrence)] = seg.records
    out.update(chunks.finish())
    return out
