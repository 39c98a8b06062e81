"""The tables' percentiles, weighted median and warm-up rule, worked out without NumPy, give NumPy's bits.

``launchtrace.analysis.stats.percentiles`` and ``_weighted_median`` follow ``np.percentile`` (linear) and an
argsort / cumsum / searchsorted median step for step, and ``verdicts.warmup_steps`` its ``np.median``, so that
``report`` and ``summary`` need not import NumPy (issue 25's speed). Equal to the bit, not approximately: the
tables print these numbers and a page must not change.
"""

from __future__ import annotations

import math
from array import array

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace.analysis import stats, verdicts


def numpy_percentiles(values, qs=(50, 95)):
    if len(values) == 0:
        return tuple(math.nan for _ in qs)
    return tuple(float(v) for v in np.percentile(np.asarray(values, dtype=float), list(qs)))


def numpy_weighted_median(values, weights):
    order = np.argsort(values, kind="mergesort")
    v = np.asarray(values, dtype=float)[order]
    w = np.cumsum(np.asarray(weights, dtype=float)[order])
    return float(v[int(np.searchsorted(w, w[-1] / 2.0))])


def same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Equal bits, NaN equal to NaN."""
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))
        for x, y in zip(a, b)
    )


durations = st.integers(min_value=0, max_value=10**12)
floats = st.floats(allow_nan=True, allow_infinity=True)
quantiles = st.lists(st.one_of(st.integers(0, 100), st.floats(0, 100)), min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(st.lists(durations, max_size=60), quantiles)
def test_percentiles_of_durations_are_numpys(values, qs) -> None:
    assert same(stats.percentiles(values, qs), numpy_percentiles(values, qs))
    assert same(stats.percentiles(array("q", values), qs), numpy_percentiles(array("q", values), qs))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(floats, st.integers(-(2**60), 2**60), st.sampled_from([0.0, -0.0, 1.5])), max_size=40))
def test_percentiles_of_any_numbers_are_numpys(values) -> None:
    assert same(stats.percentiles(values), numpy_percentiles(values))


def test_percentiles_small_samples_and_ties() -> None:
    for values in ([7], [3, 3], [1, 2], [5, 1, 5, 1, 5], list(range(21)), [0.1, 0.2, 0.7], [2**53, 1]):
        for qs in ((50, 95), (0, 100), (25, 75, 99.9)):
            assert same(stats.percentiles(values, qs), numpy_percentiles(values, qs)), (values, qs)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(durations, st.floats(0, 1e9), st.sampled_from([1, 2, 2.0, 3])),
            st.one_of(st.integers(1, 1000), st.floats(0.01, 1000)),
        ),
        min_size=1,
        max_size=50,
    )
)
def test_weighted_median_is_numpys(pairs) -> None:
    values, weights = [v for v, _ in pairs], [w for _, w in pairs]
    assert same((stats._weighted_median(values, weights),), (numpy_weighted_median(values, weights),))


def test_weighted_median_of_unusual_samples_goes_to_numpy() -> None:
    for values, weights in (([math.nan, 1.0, 2.0], [1, 1, 1]), ([1, 2**60, 3], [1, 2, 3]), ([1.0, 2.0], [math.inf, 1])):
        assert same((stats._weighted_median(values, weights),), (numpy_weighted_median(values, weights),))


def numpy_warmup_steps(step_durations, factor=1.5, spread=6.0) -> int:
    """``warmup_steps`` as it was written with NumPy."""
    d = np.asarray(step_durations, dtype=float)
    n = len(d)
    if n < 3:
        return 0
    warm = d[n // 2 :]
    warm = warm[np.isfinite(warm)]
    if len(warm) == 0:
        return 0
    ref = float(np.median(warm))
    mad = 1.4826 * float(np.median(np.abs(warm - ref)))
    threshold = max(factor * ref, ref + spread * mad)
    k = 0
    while k < n // 2 and (not math.isfinite(d[k]) or d[k] > threshold):
        k += 1
    return k


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(durations, floats, st.sampled_from([100, 101, 5000, 10**9])), max_size=30),
    st.sampled_from([1.0, 1.5, 3.0]),
    st.sampled_from([0.0, 6.0]),
)
def test_warmup_steps_are_numpys(values, factor, spread) -> None:
    assert verdicts.warmup_steps(values, factor=factor, spread=spread) == numpy_warmup_steps(values, factor, spread)


def test_the_median_is_numpys_to_the_bit() -> None:
    for values in ([1.0], [1.0, 2.0], [0.1, 0.2], [1e308, 1e308], [3.0, 1.0, 2.0, 10.0], [0.1, 0.7, 0.3]):
        assert same((verdicts._median(values),), (float(np.median(values)),)), values
