"""Online folding of consecutive repeats of an identical record sequence (periods 1..8) into one run.

A simulation loop issues the same few launches thousands of times; one span each would swamp Jaeger (slow
past about 2,000 spans in a trace) and Tempo (5 MB per trace). A :class:`Folder` sits on the records of one
parent span in order and hands back :class:`Single` records and :class:`FoldedRun` groups: the sequence's
first instance (the full topology, once), the repetition count and per-position duration statistics.

"Identical" means every field of the record except its times, sequence number and scope: kernel, dims,
pointers (so ping-pong buffers repeat with period 2), owners, scalars, site, ... A record with an error
never folds. The decision at each position looks ``lookahead`` records ahead and takes the period that
covers the most records (ties: the shorter period); a run that reaches the end of the lookahead stays open
and later records are matched against it one by one, so memory stays bounded whatever the run's length.

Example::

    folder = Folder()
    groups = [g for rec in records for g in folder.push(rec)] + folder.flush()
    # e.g. [Single(rec0), FoldedRun(sequence=(a, b), count=5000, ...), Single(rec_last)]
"""

from __future__ import annotations

import dataclasses
import operator
import random
from typing import Any

from launchtrace.model import DeviceTime, LaunchRecord

__all__ = ["DurationStats", "FoldedRun", "Folder", "Single", "fold_key"]

MAX_PERIOD = 8
LOOKAHEAD = 64
_EXACT_SAMPLES = 4096  # p50 is exact up to this many repetitions, a reservoir estimate beyond
_MAX_INTERNED = 1 << 16


@dataclasses.dataclass(frozen=True, slots=True)
class Single:
    """One record passed through unfolded (``key``: its fold key id, for callers that cache by it)."""

    record: LaunchRecord
    key: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class DurationStats:
    """Duration statistics of one position of a folded sequence over its repetitions (nanoseconds)."""

    count: int
    min: int
    mean: int
    max: int
    p50: int


@dataclasses.dataclass(frozen=True, slots=True)
class FoldedRun:
    """``count`` consecutive repetitions of ``sequence`` (its first instance)."""

    sequence: tuple[LaunchRecord, ...]
    count: int
    stats: tuple[DurationStats, ...]
    start_ns: int
    end_ns: int
    last_seq: int = 0
    device_stats: tuple[DurationStats | None, ...] = ()  # per position, where its launches had device times

    @property
    def period(self) -> int:
        return len(self.sequence)

    @property
    def launches(self) -> int:
        return self.count * len(self.sequence)


_RECORD_FIELDS = operator.attrgetter(
    "op", "kernel", "dim", "stream", "arrays", "scalars", "params", "block_dim", "max_blocks", "device", "thread",
    "thread_name", "graph_id", "captured", "adjoint", "api", "internal", "repeat", "module_hash",
)  # fmt: skip
_BUFFER_FIELDS = operator.attrgetter(
    "key", "name", "ptr", "shape", "dtype", "nbytes", "owner", "offset", "foreign", "access", "alloc"
)
_SITE_FIELDS = operator.attrgetter("file", "line", "function", "module")


def fold_key(rec: LaunchRecord) -> Any:
    """What must be equal for two records to fold together: all but times, seq and scope.

    Value statistics are part of it: launches whose outputs differ are not repetitions of one another, so each
    keeps its own span. Device times are not, like host times: they differ at every launch, and a folded run
    keeps their statistics per position (:attr:`FoldedRun.device_stats`).

    Plain tuples built by ``operator.attrgetter`` (C code), not the dataclasses themselves: hashing and
    comparing a record's ``BufferArg`` and ``Site`` objects runs their Python-level ``__hash__``/``__eq__``.
    """
    if rec.error is not None:
        return object()  # unique: never equal to another
    site = rec.site
    return (
        _RECORD_FIELDS(rec),
        repr(rec.scalars),  # 1, 1.0 and True (and 0.0, -0.0) are equal in Python, not in a span
        tuple(p for p in rec.probes if type(p) is not DeviceTime) if rec.probes else (),
        tuple(map(_BUFFER_FIELDS, rec.buffers)),
        _SITE_FIELDS(site) if site is not None else None,
    )


class _Durations:
    """Running min/mean/max and a median over at most ``_EXACT_SAMPLES`` samples (reservoir beyond)."""

    __slots__ = ("count", "max", "min", "rng", "samples", "total")

    def __init__(self, first: int) -> None:
        self.count, self.total, self.min, self.max = 1, first, first, first
        self.samples = [first]
        self.rng: random.Random | None = None

    def add(self, value: int) -> None:
        self.count += 1
        self.total += value
        if value < self.min:
            self.min = value
        elif value > self.max:
            self.max = value
        if len(self.samples) < _EXACT_SAMPLES:
            self.samples.append(value)
            return
        if self.rng is None:
            self.rng = random.Random(self.count)
        slot = self.rng.randrange(self.count)
        if slot < _EXACT_SAMPLES:
            self.samples[slot] = value

    def stats(self) -> DurationStats:
        ordered = sorted(self.samples)
        mid = len(ordered) // 2
        p50 = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) // 2
        return DurationStats(self.count, self.min, round(self.total / self.count), self.max, p50)


class _OpenRun:
    """A run that may still continue: matched record by record against its sequence's keys."""

    __slots__ = (
        "count", "device", "durations", "end_ns", "keys", "last_seq", "partial", "pos", "sequence", "start_ns",
    )  # fmt: skip

    def __init__(self, keys: list[int], records: list[LaunchRecord], count: int) -> None:
        period = len(keys)
        self.keys = keys
        self.sequence = tuple(records[:period])
        self.durations = [_Durations(r.duration_ns) for r in self.sequence]
        self.device: list[_Durations | None] = [None] * period
        for i, rec in enumerate(self.sequence):
            self._add_device(i, rec)
        for i, rec in enumerate(records[period : count * period]):
            self.durations[i % period].add(rec.duration_ns)
            self._add_device(i % period, rec)
        self.count = count
        self.start_ns = records[0].start_ns
        self.end_ns = max(r.end_ns for r in records[(count - 1) * period : count * period])
        self.last_seq = records[count * period - 1].seq
        self.partial: list[tuple[int, LaunchRecord]] = []
        self.pos = 0

    def offer(self, key: int, rec: LaunchRecord) -> bool:
        if key != self.keys[self.pos]:
            return False
        self.partial.append((key, rec))
        self.pos += 1
        if self.pos == len(self.keys):
            for i, (_, r) in enumerate(self.partial):
                self.durations[i].add(r.duration_ns)
                self._add_device(i, r)
            self.end_ns = max(self.end_ns, max(r.end_ns for _, r in self.partial))
            self.last_seq = rec.seq
            self.count += 1
            self.partial, self.pos = [], 0
        return True

    def _add_device(self, position: int, rec: LaunchRecord) -> None:
        """Count ``rec``'s device time (``device_timing``) at ``position``, if it has one."""
        if not rec.probes:
            return
        for probe in rec.probes:
            if type(probe) is DeviceTime:
                stats = self.device[position]
                if stats is None:
                    self.device[position] = _Durations(probe.duration_ns)
                else:
                    stats.add(probe.duration_ns)
                return

    def result(self) -> FoldedRun:
        stats = tuple(d.stats() for d in self.durations)
        device = tuple(d.stats() if d is not None else None for d in self.device) if any(self.device) else ()
        return FoldedRun(self.sequence, self.count, stats, self.start_ns, self.end_ns, self.last_seq, device)


class Folder:
    """Folds the records of one parent span; ``enabled=False`` passes each record through as a Single."""

    def __init__(self, min_repeats: int = 2, enabled: bool = True, lookahead: int = LOOKAHEAD) -> None:
        if min_repeats < 2:
            raise ValueError(f"min_repeats must be >= 2, got {min_repeats!r}")
        self.min_repeats = min_repeats
        self.enabled = enabled
        self.lookahead = max(lookahead, 2 * MAX_PERIOD)
        self._ids: dict[Any, int] = {}
        # Undecided records from index _at on, keys and records in parallel lists (no pop(0), no re-listing).
        self._keys: list[int] = []
        self._recs: list[LaunchRecord] = []
        self._at = 0
        self._run: _OpenRun | None = None

    def __len__(self) -> int:
        """Records held back, not yet handed out (the open run's completed repetitions not counted)."""
        return len(self._keys) - self._at + (len(self._run.partial) if self._run else 0)

    def push(self, rec: LaunchRecord, key: int | None = None) -> list[Single | FoldedRun]:
        """Take the next record; returns the groups that are now decided (often none).

        ``key``: the record's fold key already interned by the caller as an int that is never reused for
        another key (the span builder does this once per record); by default the folder interns it.
        """
        if key is None:
            if len(self._ids) > _MAX_INTERNED:
                self._reintern()
            key = self._intern(fold_key(rec))
        if not self.enabled:
            return [Single(rec, key)]
        out: list[Single | FoldedRun] = []
        if self._run is not None:
            if self._run.offer(key, rec):
                return out
            self._close_run(out)
        self._keys.append(key)
        self._recs.append(rec)
        while len(self._keys) - self._at >= self.lookahead and self._run is None:
            self._decide(out, final=False)
        return out

    def flush(self) -> list[Single | FoldedRun]:
        """Hand out everything held back (the parent span is ending, or a child scope begins)."""
        out: list[Single | FoldedRun] = []
        if self._run is not None:
            self._close_run(out)
        while self._at < len(self._keys):
            self._decide(out, final=True)
        self._compact()
        self._ids.clear()
        return out

    def _intern(self, key: Any) -> int:
        ids = self._ids
        try:
            found = ids.get(key)
        except TypeError:  # an unhashable scalar: compare by repr instead
            key = repr(key)
            found = ids.get(key)
        if found is None:
            found = len(ids)
            ids[key] = found
        return found

    def _compact(self) -> None:
        if self._at:
            del self._keys[: self._at]
            del self._recs[: self._at]
            self._at = 0

    def _close_run(self, out: list) -> None:
        run = self._run
        assert run is not None
        self._run = None
        out.append(run.result())
        # An open run holds the buffer's records: the buffer is empty here; its partial repetition goes back.
        self._keys = [k for k, _ in run.partial]
        self._recs = [r for _, r in run.partial]
        self._at = 0

    def _reintern(self) -> None:
        """Forget keys no pending record uses (a loop whose scalars change every step makes many)."""
        self._ids = {}
        self._compact()
        self._keys = [self._intern(fold_key(rec)) for rec in self._recs]
        run = self._run
        if run is not None:
            run.keys = [self._intern(fold_key(rec)) for rec in run.sequence]
            run.partial = [(self._intern(fold_key(rec)), rec) for _, rec in run.partial]

    def _best_period(self) -> tuple[int, int]:
        """(period, count) covering the most undecided records from the first on; count 0 when none."""
        keys, at = self._keys, self._at
        n = len(keys) - at
        best_p, best_c, best_cover = 0, 0, 0
        for p in range(1, min(MAX_PERIOD, n // 2) + 1):
            if keys[at + p] != keys[at]:  # cheap reject: the second repetition must start like the first
                continue
            head = keys[at : at + p]
            c = 1
            while (c + 1) * p <= n and keys[at + c * p : at + (c + 1) * p] == head:
                c += 1
            if c >= self.min_repeats and c * p > best_cover:
                best_p, best_c, best_cover = p, c, c * p
        return best_p, best_c

    def _decide(self, out: list, final: bool) -> None:
        keys, recs, at = self._keys, self._recs, self._at
        p, c = self._best_period()
        if c == 0:
            out.append(Single(recs[at], keys[at]))
            self._at = at + 1
            if self._at >= self.lookahead:
                self._compact()
            return
        end = at + c * p
        tail = keys[end:]
        run = _OpenRun(keys[at : at + p], recs[at:end], c)
        if not final and len(tail) < p and tail == keys[at : at + len(tail)]:
            rest = list(zip(tail, recs[end:]))
            self._keys, self._recs, self._at = [], [], 0
            self._run = run
            for key, rec in rest:
                run.offer(key, rec)
            return
        out.append(run.result())
        self._at = end
        self._compact()
