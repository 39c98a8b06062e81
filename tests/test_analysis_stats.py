"""Timing statistics: the hand-written Mann-Whitney U against SciPy's, percentiles against NumPy's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace.analysis.stats import kernel_stats, mann_whitney_u, percentiles
from launchtrace.model import LaunchRecord, Site, TraceData

scipy_stats = pytest.importorskip("scipy.stats", reason="scipy (test extra) checks the hand-written test")

samples = st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(samples, samples)
def test_mann_whitney_matches_scipy_asymptotic(a: list[int], b: list[int]) -> None:
    u, p = mann_whitney_u(a, b)
    if len(set(a) | set(b)) == 1:  # every value equal: SciPy returns NaN, we return "no evidence"
        assert p == 1.0
        return
    ref = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
    assert u == pytest.approx(float(ref.statistic))
    assert p == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-12)


def test_mann_whitney_on_continuous_samples() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.lognormal(3.0, 0.3, 200), rng.lognormal(3.1, 0.3, 150)
    ref = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
    assert mann_whitney_u(a, b) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-9)


def test_empty_sides_give_no_evidence() -> None:
    assert mann_whitney_u([], [1, 2]) == (0.0, 1.0)


@given(st.lists(st.floats(min_value=0, max_value=1e9), min_size=1, max_size=50))
def test_percentiles_match_numpy(values: list[float]) -> None:
    assert percentiles(values) == pytest.approx(tuple(np.percentile(values, [50, 95])))
    assert all(math.isnan(v) for v in percentiles([]))


def test_kernel_stats_counts_and_orders_by_total_time() -> None:
    site = Site("p.py", 1, "f")
    recs = [LaunchRecord("launch", "m.a", (1,), None, (), (), site, start_ns=0, end_ns=10) for _ in range(3)]
    recs += [LaunchRecord("launch", "m.b", (1,), None, (), (), site, start_ns=0, end_ns=100, repeat=5)]
    rows = kernel_stats([TraceData(recs)])
    # a record standing for 5 repetitions (``repeat``, no recorded statistics) lasts its duration each time
    assert [(r.kernel, r.count, r.total_ns, r.p50_ns) for r in rows] == [("m.b", 5, 500, 100.0), ("m.a", 3, 30, 10.0)]
    assert rows[0].folded == 5 and rows[0].p50_from_summaries and math.isnan(rows[0].p95_ns)
    assert rows[1].folded == 0 and rows[1].p95_ns == 10.0 and not rows[1].max_from_summaries
