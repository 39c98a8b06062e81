"""Calls that raised: launches, copies and fills whose Warp call failed (a wrong dtype, a missing argument) and
scopes that an exception left.

A failed launch ran nothing on the device, yet it is a record like any other, so the kernel tables count it; a
program that catches the error goes on as if nothing happened. ``summary`` lists them, one line per kernel
(or scope), call site and error, so a user sees that the program's launches failed and where. Bounded: at most
:data:`FAILURES_KEPT` distinct lines, the rest counted.

Example::

    table = FailureTable()
    for trace in traces:
        table.add(trace)
    for f in table.rows():
        print(f.count, f.what, f.error)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from launchtrace.conventions import kernel_title
from launchtrace.model import LaunchRecord, TraceData

__all__ = ["FAILURES_KEPT", "Failure", "FailureTable"]

FAILURES_KEPT = 200
"""Distinct (what, site, error) lines kept; calls beyond them are counted in :attr:`FailureTable.others`."""

ERROR_CHARS = 240
"""An error's first line is cut to this many characters (Warp's dtype errors name whole class paths)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    """``count`` calls of ``what`` (``"launch m.k"``, ``"scope step"``) from ``site`` that raised ``error`` (the
    first line of ``"<ExceptionType>: message"``)."""

    what: str
    site: str
    error: str
    count: int


def _first_line(error: str) -> str:
    line = error.strip().splitlines()[0] if error.strip() else error
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


class FailureTable:
    """Failed records and scopes over traces added one at a time."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}
        self.total = 0
        self.others = 0

    def add(self, trace: TraceData) -> None:
        self.add_records(trace.records)
        self.add_scopes(trace)

    def add_records(self, records: Iterable[LaunchRecord]) -> None:
        """The failed ones of one trace's records (or of a part of them: :meth:`add_scopes` after the last)."""
        for rec in records:
            if rec.error is not None:
                self._count(f"{rec.op} {kernel_title(rec.kernel, rec.adjoint)}", str(rec.site), rec.error)

    def add_scopes(self, trace: TraceData) -> None:
        """The failed ones of one trace's scopes."""
        for scope in trace.scopes.values():
            if scope.error is not None:
                self._count(f"scope {scope.name}", "", scope.error)

    def _count(self, what: str, site: str, error: str) -> None:
        self.total += 1
        key = (what, site, _first_line(error))
        if key in self.counts:
            self.counts[key] += 1
        elif len(self.counts) < FAILURES_KEPT:
            self.counts[key] = 1
        else:
            self.others += 1

    def rows(self) -> list[Failure]:
        """Most frequent first; ties in the order first seen."""
        rows = [Failure(what, site, error, n) for (what, site, error), n in self.counts.items()]
        return sorted(rows, key=lambda f: -f.count)
