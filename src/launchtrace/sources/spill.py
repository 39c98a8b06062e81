"""Records written out to an anonymous temporary file and read back in order: one wide trace in bounded memory.

A :class:`~launchtrace.sources.wide.WideTrace` of a million launches held a million records (about 470 bytes
each) until its root, which comes last, was read (issue 25). Past :data:`SPILL_AT` records it writes them out
here in chunks of :data:`CHUNK`, and the rebuilt trace's ``records`` is a :class:`SpilledRecords`: a sequence
that reads its chunks back each time it is iterated (a reader that passes over a trace's records several times
reads the file several times), holding one chunk of each run at a time.

Encoding: a record is written as the index of a *base* record (the first one met with the same objects in its
fields that are shared between launches of one call: kernel, site, parameters, buffers, ...; compared by
identity) and the values of its other fields (times, sequence number, dims, arrays, scalars: ``marshal``, which
keeps ``1``, ``True`` and ``1.0`` apart and writes every float exactly); it is read back as a copy of its base
with those values (:func:`~launchtrace.fastinit.slot_copier`). A record whose values ``marshal`` cannot write,
or met once :data:`MAX_BASES` bases are held, is pickled instead (slower, the same record; one that pickle
cannot write either is kept in memory). The wide benchmark's records cost 88 bytes each on disk (17.6 MB for
200,000; a trace cut into several steps writes each step's records once more).

The file is a :func:`tempfile.TemporaryFile`: it has no name (on Linux it is unlinked when made), so it is gone
when it is closed, when the last :class:`SpillFile` holding it is let go, or when the process ends however it
ends.

Example::

    spill = SpillFile()
    chunks = spill.write_all([0, 1], [rec_a, rec_b])     # a number of the caller's with each record
    for chunk in chunks:
        numbers, records = spill.read(chunk)
"""

from __future__ import annotations

import marshal
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, NamedTuple

from launchtrace.errors import UserError
from launchtrace.fastinit import slot_copier
from launchtrace.model import LaunchRecord

__all__ = ["CHUNK", "MAX_BASES", "MAX_RUNS", "SPILL_AT", "Chunk", "PartWriter", "SpillFile", "SpilledRecords"]

SPILL_AT = 65_536
"""Records a wide trace holds before it writes them out (about 30 MB of records)."""
CHUNK = 4096
"""Records in one chunk of the file: what a reader holds of each run at a time."""
MAX_BASES = 4096
"""Base records a :class:`SpillFile` keeps (distinct calls); a record that needs another one is pickled."""
MAX_RUNS = 16
"""Sorted runs of one level a wide trace keeps before it merges them into one run of the next level (a merge
holds a chunk of each run it reads)."""

# the fields of a record of its own (the rest are shared by the launches of one call)
_VALUES = (
    "dim", "arrays", "scalars", "stream", "block_dim", "max_blocks", "thread", "start_ns", "end_ns", "scope_id",
    "graph_id", "captured", "adjoint", "internal", "seq", "repeat", "graph_replay", "graph_launches",
)  # fmt: skip
_SHARED = tuple(f for f in LaunchRecord.__slots__ if f not in _VALUES)  # compared by identity
_values = operator.attrgetter(*_VALUES)
_shared = operator.attrgetter(*_SHARED)
_copy = slot_copier(LaunchRecord, _VALUES)
_with_scope = slot_copier(LaunchRecord, ("scope_id",))
_SCOPE = _VALUES.index("scope_id")
_ZEROS = [0] * CHUNK


class Chunk(NamedTuple):
    """Where one chunk lies in the file: its offset, its size in bytes and how many records it holds."""

    offset: int
    size: int
    count: int


class SpillFile:
    """One anonymous temporary file of record chunks and the base records they refer to (see the module
    docstring). ``written``: the bytes written so far."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._bases: list[LaunchRecord] = []
        self._base_of: dict[tuple[int, ...], int] = {}
        self._kept: list[LaunchRecord] = []  # records neither marshal nor pickle writes (none that we read)
        self.written = 0

    def open(self) -> IO[bytes]:
        """The file, made on first use (``OSError`` where no temporary file can be made)."""
        if self._file is None:
            import tempfile  # here: summary of traces that never spill does not import it (nor pickle)

            self._file = tempfile.TemporaryFile(prefix="launchtrace-spill-")  # noqa: SIM115 (closed by close())
        return self._file

    def close(self) -> None:
        """Close (and so remove) the file; reading it afterwards fails."""
        if self._file is not None:
            self._file.close()
        self._bases.clear()
        self._base_of.clear()
        self._kept.clear()

    def _base(self, rec: LaunchRecord) -> int:
        """The index of ``rec``'s base record, or -1 (pickled) once :data:`MAX_BASES` are held."""
        key = tuple(map(id, _shared(rec)))
        base = self._base_of.get(key)
        if base is None:
            if len(self._bases) >= MAX_BASES:
                return -1
            base = self._base_of[key] = len(self._bases)
            self._bases.append(rec)  # holds the shared objects alive: their ids stay theirs
        return base

    def write(self, numbers: Sequence[int], records: Sequence[LaunchRecord]) -> Chunk:
        """Write one chunk of ``records``, each with a number of the caller's that comes back with it."""
        bases = list(map(self._base, records))
        columns = list(zip(*map(_values, records))) if records else [()] * len(_VALUES)
        pickled = {}
        if -1 in bases:
            pickled = {i: self._pickled(rec) for i, rec in enumerate(records) if bases[i] < 0}
        try:
            data = marshal.dumps((bases, list(numbers), columns, pickled))
        except ValueError:  # a value marshal does not write (an int subclass, a map): those records pickled
            for i, rec in enumerate(records):
                if i not in pickled:
                    try:
                        marshal.dumps(_values(rec))
                    except ValueError:
                        pickled[i] = self._pickled(rec)
                        bases[i] = -1
            columns = [tuple(None if i in pickled else v for i, v in enumerate(c)) for c in columns]
            data = marshal.dumps((bases, list(numbers), columns, pickled))
        file = self.open()
        offset = file.seek(0, 2)
        try:
            file.write(data)
        except OSError as exc:  # the disk filled up: say where, not a traceback
            import tempfile

            where = tempfile.gettempdir()
            raise UserError(
                f"could not write a wide trace's records to a temporary file in {where} ({exc}): free space there, "
                "or point TMPDIR at a folder with more"
            ) from exc
        self.written += len(data)
        return Chunk(offset, len(data), len(records))

    def write_all(self, numbers: Sequence[int], records: Sequence[LaunchRecord]) -> list[Chunk]:
        """``records`` (and their ``numbers``) written in chunks of :data:`CHUNK`, in order."""
        return [self.write(numbers[at : at + CHUNK], records[at : at + CHUNK]) for at in range(0, len(records), CHUNK)]

    def _pickled(self, rec: LaunchRecord) -> bytes | int:
        """``rec`` pickled, or (a value pickle cannot write either) kept here: its index among those kept."""
        import pickle

        try:
            return pickle.dumps(rec, pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            self._kept.append(rec)
            return len(self._kept) - 1

    def read(
        self, chunk: Chunk, scopes_of: Callable[[list[int]], list] | None = None
    ) -> tuple[list[int], list[LaunchRecord]]:
        """The numbers and records of one chunk, as written; ``scopes_of``: given the numbers, a scope id for
        each record instead of the one written."""
        assert self._file is not None
        self._file.seek(chunk.offset)
        bases, numbers, columns, pickled = marshal.loads(self._file.read(chunk.size))
        scopes = None
        if scopes_of is not None:
            scopes = columns[_SCOPE] = scopes_of(numbers)
        if not pickled:
            return numbers, list(map(_copy, map(self._bases.__getitem__, bases), *columns))
        import pickle

        records = []
        for i, (base, *values) in enumerate(zip(bases, *columns)):
            if base >= 0:
                records.append(_copy(self._bases[base], *values))
            else:
                data = pickled[i]
                rec = pickle.loads(data) if type(data) is bytes else self._kept[data]
                records.append(rec if scopes is None else _with_scope(rec, scopes[i]))
        return numbers, records


class SpilledRecords:
    """A trace's records as chunks of a :class:`SpillFile`, in order: iterated as often as wanted (each time from
    the file), ``len()`` and truth as a list's. Not indexable: the readers that take one only iterate."""

    __slots__ = ("chunks", "count", "spill")

    def __init__(self, spill: SpillFile, chunks: list[Chunk]) -> None:
        self.spill = spill
        self.chunks = chunks
        self.count = sum(c.count for c in chunks)

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self) -> Iterator[LaunchRecord]:
        for chunk in self.chunks:
            yield from self.spill.read(chunk)[1]

    def parts(self) -> PartWriter:
        """A writer of parts of these records (a step's) into the same file."""
        return PartWriter(self.spill)


class PartWriter:
    """Records sorted into parts (the steps a trace is cut into) written to a :class:`SpillFile` as they come:
    each part holds at most :data:`CHUNK` records before it writes them, and all of them together at most
    :data:`SPILL_AT`. :meth:`part` makes one; :meth:`finish` gives each as :class:`SpilledRecords`."""

    def __init__(self, spill: SpillFile) -> None:
        self.spill = spill
        self._parts: list[tuple[list[LaunchRecord], list[Chunk]]] = []
        self._held = 0

    def part(self) -> int:
        self._parts.append(([], []))
        return len(self._parts) - 1

    def add(self, part: int, rec: LaunchRecord) -> None:
        held, chunks = self._parts[part]
        held.append(rec)
        self._held += 1
        if len(held) >= CHUNK:
            self._flush(held, chunks)
        elif self._held >= SPILL_AT:
            for h, c in self._parts:
                if h:
                    self._flush(h, c)

    def _flush(self, held: list, chunks: list[Chunk]) -> None:
        chunks.append(self.spill.write(_ZEROS[: len(held)], held))
        self._held -= len(held)
        held.clear()

    def finish(self) -> list[SpilledRecords]:
        for held, chunks in self._parts:
            if held:
                self._flush(held, chunks)
        return [SpilledRecords(self.spill, chunks) for _, chunks in self._parts]


def merged(runs: list[Iterator[tuple[Any, LaunchRecord]]]) -> Iterator[tuple[Any, LaunchRecord]]:
    """``(key, record)`` pairs of sorted runs merged by key, ties in the order of the runs (``heapq.merge``)."""
    import heapq

    return heapq.merge(*runs, key=operator.itemgetter(0))
