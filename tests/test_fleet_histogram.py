"""The exponential histogram of baselines and metrics: OpenTelemetry's buckets, order-free, exactly mergeable."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace.histogram import MAX_SCALE, ExpHistogram, index_at

values = st.lists(st.integers(min_value=0, max_value=10**12), max_size=300)


def built(vs: list[int], max_size: int = 160) -> ExpHistogram:
    h = ExpHistogram(max_size)
    for v in vs:
        h.add(v)
    return h


@settings(max_examples=150, deadline=None)
@given(values, st.integers(min_value=0, max_value=300), st.sampled_from([4, 20, 160]))
def test_merge_of_parts_equals_the_whole_in_any_order(vs: list[int], cut: int, max_size: int) -> None:
    whole = built(vs, max_size)
    a, b = built(vs[:cut], max_size), built(vs[cut:], max_size)
    a.merge(b)
    assert a == whole
    assert built(sorted(vs, reverse=True), max_size) == whole
    assert whole.count == len(vs) and whole.sum == sum(vs)
    if whole.buckets:
        assert max(whole.buckets) - min(whole.buckets) < max_size


@given(st.integers(min_value=1, max_value=10**12))
def test_each_value_lies_in_its_bucket(v: int) -> None:
    for scale in (0, 3, 8):
        i = index_at(v, MAX_SCALE) >> (MAX_SCALE - scale)
        base = 2.0 ** (2.0**-scale)
        assert base**i <= v * (1 + 1e-9) and v <= base ** (i + 1) * (1 + 1e-9)


def test_powers_of_two_close_their_bucket() -> None:
    assert index_at(1024, 0) == 9 and index_at(1025, 0) == 10 and index_at(1023, 0) == 9


def test_quantile_within_the_bucket_error() -> None:
    h = built(list(range(1000, 3001)))
    assert abs(h.quantile(0.5) - 2000) / 2000 < 0.03
    assert math.isnan(ExpHistogram().quantile(0.5))
