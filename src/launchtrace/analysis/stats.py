"""Timing statistics: percentiles, the Mann-Whitney U test, per-kernel tables.

The significance test is the two-sided Mann-Whitney U test with the normal approximation, average ranks for
ties, the tie-corrected variance and a continuity correction of 0.5 -- exactly SciPy's
``mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")``, hand-written here so the analyzer does
not pull in SciPy (a 35 MB wheel) at run time; ``tests/test_analysis_stats.py`` checks it against SciPy.
Timing samples are large-ish and continuous, where the approximation is good; below ``min_samples`` per side
no verdict is given at all.

Example::

    from launchtrace.analysis.stats import mann_whitney_u
    u, p = mann_whitney_u([10, 11, 12, 13], [20, 21, 22, 23])
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from enum import Enum

import numpy as np

from launchtrace.analysis.verdicts import mann_whitney_u
from launchtrace.model import TraceData

__all__ = [
    "KernelStats",
    "TimingChange",
    "Verdict",
    "compare_timings",
    "kernel_stats",
    "mann_whitney_u",
    "percentiles",
]

DEFAULT_MIN_SAMPLES = 8
DEFAULT_ALPHA = 0.01
DEFAULT_MIN_CHANGE = 0.05  # a significant change smaller than 5 % of p50 is not worth a line


class Verdict(str, Enum):
    """What a timing comparison concluded."""

    SLOWER = "slower"
    FASTER = "faster"
    SAME = "same"  # not significant, or too small to matter
    TOO_FEW = "too few samples"
    ONLY_A = "only in A"
    ONLY_B = "only in B"

    def __str__(self) -> str:
        return self.value


def percentiles(values: Sequence[float], qs: Iterable[float] = (50, 95)) -> tuple[float, ...]:
    """Linear-interpolated percentiles (NumPy's default); NaN for an empty sample."""
    if len(values) == 0:
        return tuple(math.nan for _ in qs)
    return tuple(float(v) for v in np.percentile(np.asarray(values, dtype=float), list(qs)))


@dataclasses.dataclass(frozen=True, slots=True)
class KernelStats:
    """One row of the per-kernel table. Columns: ``kernel``, ``op``, ``count`` (records), ``total_ns``,
    ``mean_ns``, ``p50_ns``, ``p95_ns``, ``max_ns`` (host duration per call), ``nbytes`` (total bytes of the
    array arguments)."""

    kernel: str
    op: str
    count: int
    total_ns: int
    mean_ns: float
    p50_ns: float
    p95_ns: float
    max_ns: int
    nbytes: int


def kernel_stats(traces: Iterable[TraceData]) -> list[KernelStats]:
    """Per-kernel counts and durations over ``traces``, the largest total time first.

    Example::

        for row in kernel_stats([trace]):
            print(row.kernel, row.count, row.p50_ns)
    """
    groups: dict[tuple[str, str], list] = {}
    for trace in traces:
        for rec in trace.records:
            groups.setdefault((rec.kernel, str(rec.op)), []).append(rec)
    rows = []
    for (kernel, op), recs in groups.items():
        durations = [r.duration_ns for r in recs]
        count = sum(r.repeat for r in recs)
        p50, p95 = percentiles(durations)
        rows.append(
            KernelStats(
                kernel=kernel,
                op=op,
                count=count,
                total_ns=sum(durations),
                mean_ns=sum(durations) / len(durations),
                p50_ns=p50,
                p95_ns=p95,
                max_ns=max(durations),
                nbytes=sum(r.nbytes for r in recs),
            )
        )
    rows.sort(key=lambda r: (-r.total_ns, r.kernel))
    return rows


@dataclasses.dataclass(frozen=True, slots=True)
class TimingChange:
    """One row of a timing comparison. Columns: ``group`` (a kernel, or ``"<scope path> #<position>
    <kernel>"``), ``count_a`` / ``count_b`` (samples), ``p50_a`` / ``p95_a`` / ``p50_b`` / ``p95_b``
    (nanoseconds, NaN when absent), ``change`` (relative change of p50, ``0.10`` = 10 % slower in B),
    ``p_value`` (two-sided Mann-Whitney U, 1.0 when not tested) and ``verdict``."""

    group: str
    count_a: int
    count_b: int
    p50_a: float
    p95_a: float
    p50_b: float
    p95_b: float
    change: float
    p_value: float
    verdict: Verdict


def _verdict(
    a: Sequence[float],
    b: Sequence[float],
    change: float,
    p: float,
    min_samples: int,
    alpha: float,
    min_change: float,
) -> Verdict:
    if not a:
        return Verdict.ONLY_B
    if not b:
        return Verdict.ONLY_A
    if len(a) < min_samples or len(b) < min_samples:
        return Verdict.TOO_FEW
    if p < alpha and abs(change) >= min_change:
        return Verdict.SLOWER if change > 0 else Verdict.FASTER
    return Verdict.SAME


def compare_timings(
    groups_a: dict[str, list[float]],
    groups_b: dict[str, list[float]],
    *,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    alpha: float = DEFAULT_ALPHA,
    min_change: float = DEFAULT_MIN_CHANGE,
) -> list[TimingChange]:
    """Compare duration samples group by group (the union of both sides' groups, in first-seen order).

    A group is reported ``slower`` / ``faster`` only with at least ``min_samples`` on each side, a p-value
    under ``alpha`` and a p50 change of at least ``min_change``.

    Example::

        rows = compare_timings({"k": [10.0] * 20}, {"k": [20.0] * 20})
        assert rows[0].verdict == Verdict.SLOWER
    """
    out = []
    for group in dict.fromkeys([*groups_a, *groups_b]):
        a, b = groups_a.get(group, []), groups_b.get(group, [])
        p50a, p95a = percentiles(a)
        p50b, p95b = percentiles(b)
        change = (p50b - p50a) / p50a if a and b and p50a > 0 else (0.0 if a and b else math.nan)
        p = mann_whitney_u(a, b)[1] if a and b else 1.0
        verdict = _verdict(a, b, change, p, min_samples, alpha, min_change)
        out.append(TimingChange(group, len(a), len(b), p50a, p95a, p50b, p95b, change, p, verdict))
    return out
