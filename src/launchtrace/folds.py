"""What a record stands for when it is folded: the one place that reads ``repeat`` and ``fold``.

A record is one launch, unless it stands for folded repetitions: ``repeat`` > 1 (rebuilt from a summary span
with ``expand=False``, or a baseline's representative), or ``fold`` set (rebuilt from a summary span: one
expanded copy of a position, or, with ``repeat`` >= the fold's count, the whole position). Analyses ask these
functions instead of branching on the two fields themselves.

Example::

    from launchtrace.folds import launches, record_total
    n = sum(launches(r) for r in trace.records)
    ns, count, from_summaries = record_total(trace.records[0])
"""

from __future__ import annotations

from launchtrace.model import LaunchRecord

__all__ = ["fold_share", "is_folded", "launches", "record_total"]


def launches(rec: LaunchRecord) -> int:
    """How many launches ``rec`` stands for (1 for a plain record)."""
    return rec.repeat if rec.repeat > 1 else 1


def is_folded(rec: LaunchRecord) -> bool:
    """Rebuilt from a summary span (its times laid out, not measured)."""
    return rec.fold is not None


def fold_share(rec: LaunchRecord) -> tuple[int, int, bool]:
    """For a record rebuilt from a summary span: ``(launches it stands for, their mean ns, whole)``. ``whole``:
    the record stands for every repetition of its position (rebuilt with ``expand=False``, ``repeat`` set),
    else it is one expanded copy. The mean is the recorded one (the laid-out duration when none was)."""
    fold = rec.fold
    assert fold is not None
    mean = fold.mean_ns or rec.duration_ns
    whole = fold.count > 1 and rec.repeat >= fold.count
    return (rec.repeat if whole else launches(rec)), mean, whole


def record_total(rec: LaunchRecord) -> tuple[int, int, int]:
    """``(host ns, launches, launches from summaries)`` a record stands for: a record standing for a whole
    folded position (``repeat`` set) brings its recorded total (count x mean), an expanded copy its share."""
    if rec.fold is not None:
        n, mean, _whole = fold_share(rec)
        return n * mean, n, n
    n = launches(rec)
    return rec.duration_ns * n, n, n if n > 1 else 0
