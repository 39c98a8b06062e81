"""A snapshot comparison as text: the lines of ``launchtrace diff`` (grouped, aligned, with call sites), capped.

Used by the pytest plugin's failure message and by ``launchtrace diff --snapshot``; both go through
:func:`launchtrace.render.diff_text.topology_lines`, so a snapshot mismatch reads like any other topology diff.

Example::

    from launchtrace.render.snapshot_text import as_trace_diff, mismatch_lines
    print("\\n".join(mismatch_lines(entries, name="step", count_a=5, count_b=6, limit=20)))
"""

from __future__ import annotations

from collections.abc import Sequence

from launchtrace.analysis.diff import SegmentDiff, TraceDiff
from launchtrace.render.diff_text import counts_text, plural, topology_lines
from launchtrace.render.escape import terminal
from launchtrace.topology import DiffEntry

__all__ = ["as_trace_diff", "counts_line", "mismatch_lines"]


def as_trace_diff(pairs: Sequence[tuple[str, int, int, int, Sequence[DiffEntry]]], options: tuple = ()) -> TraceDiff:
    """A :class:`~launchtrace.analysis.diff.TraceDiff` (no timing) of ``(name, occurrence, count_a, count_b,
    entries)`` comparisons, for the renderers of :mod:`launchtrace.render.diff_text`."""
    segs = tuple(SegmentDiff(name, occ, a, b, tuple(entries)) for name, occ, a, b, entries in pairs)
    return TraceDiff(segments=segs, timing=(), options=options)


def counts_line(result: TraceDiff) -> str:
    """``"topology: equal"`` or ``"topology: differs (1 inserted, 0 removed, 2 changed)"``."""
    if result.equal:
        return "topology: equal"
    return f"topology: differs ({counts_text(result.counts)})"


def mismatch_lines(entries: Sequence[DiffEntry], *, name: str, count_a: int, count_b: int, limit: int) -> list[str]:
    """The differences of one snapshot comparison: a count line, then at most ``limit`` lines of changes
    (identical changes at several positions on one line), then ``... N more`` when some were left out. Escaped
    for a terminal."""
    result = as_trace_diff([(name, 0, count_a, count_b, entries)])
    body = topology_lines(result, limit)[1:]  # the segment head: said in our own words below
    head = f"{plural(count_a, 'launch', 'launches')} in the snapshot, {count_b} now ({counts_text(result.counts)})"
    return [terminal(line) for line in [head, *body]]
