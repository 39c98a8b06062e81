"""The OpenTelemetry exponential histogram over integer nanoseconds, exactly mergeable.

Bucket ``i`` at scale ``s`` holds the values in ``(base**i, base**(i+1)]`` with ``base = 2**(2**-s)``: the
OpenTelemetry data model's buckets (``ExponentialHistogramDataPoint``), about 2% relative error at 160 buckets
over a 1000x range. Values <= 0 go to ``zero_count``.

Every index is computed once at :data:`MAX_SCALE` and shifted down to the histogram's scale, so the scale and
buckets a set of values ends up in do not depend on the order they came in nor on how they were split: a
histogram of the whole equals the merge of histograms of its parts, bucket for bucket (``sum`` is an integer
for the same reason). The scale drops only as far as needed to keep the buckets within ``max_size``.

Example::

    from launchtrace.histogram import ExpHistogram
    h = ExpHistogram()
    for ns in (1200, 1300, 5000):
        h.add(ns)
    print(h.count, h.scale, round(h.quantile(0.5)))
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["DEFAULT_MAX_SIZE", "MAX_SCALE", "ExpHistogram", "index_at"]

MAX_SCALE = 20
DEFAULT_MAX_SIZE = 160
_TWO_MAX_SCALE = 2.0**MAX_SCALE


def index_at(value: int, scale: int = MAX_SCALE) -> int:
    """The bucket index of ``value`` (> 0) at ``scale``; exact for powers of two (which close their bucket)."""
    if value & (value - 1) == 0:  # a power of two: the upper boundary of bucket exp * 2**scale - 1
        return ((value.bit_length() - 1) << scale) - 1 if scale >= 0 else ((value.bit_length() - 1) >> -scale) - 1
    return math.ceil(math.log2(value) * 2.0**scale) - 1


class ExpHistogram:
    """A mergeable duration distribution: ``count``, integer ``sum`` / ``min`` / ``max``, ``zero_count`` and
    the positive buckets (``buckets``: index at ``scale`` -> count)."""

    __slots__ = ("_hi", "_lo", "buckets", "count", "max", "max_size", "min", "scale", "sum", "zero_count")

    def __init__(self, max_size: int = DEFAULT_MAX_SIZE) -> None:
        if max_size < 2:
            raise ValueError(f"max_size must be at least 2, got {max_size}")
        self.max_size = max_size
        self.scale = MAX_SCALE
        self.buckets: dict[int, int] = {}
        self.count = self.sum = self.zero_count = 0
        self.min = self.max = 0
        self._lo = self._hi = 0  # lowest and highest bucket index while there are buckets

    def add(self, value: int, count: int = 1) -> None:
        """Add ``count`` samples of ``value`` nanoseconds."""
        value = int(value)
        if self.count:
            if value < self.min:
                self.min = value
            elif value > self.max:
                self.max = value
        else:
            self.min = self.max = value
        self.count += count
        self.sum += value * count
        if value <= 0:
            self.zero_count += count
            return
        if value & (value - 1):
            index = (math.ceil(math.log2(value) * _TWO_MAX_SCALE) - 1) >> (MAX_SCALE - self.scale)
        else:
            index = index_at(value) >> (MAX_SCALE - self.scale)
        buckets = self.buckets
        if not buckets:
            self._lo = self._hi = index
        elif index < self._lo:
            self._lo = index
        elif index > self._hi:
            self._hi = index
        buckets[index] = buckets.get(index, 0) + count
        if self._hi - self._lo >= self.max_size:
            self._fit()

    def extend(self, values: Iterable[int]) -> None:
        for v in values:
            self.add(v)

    def _downscale(self, by: int) -> None:
        if by <= 0:
            return
        merged: dict[int, int] = {}
        for index, n in self.buckets.items():
            merged[index >> by] = merged.get(index >> by, 0) + n
        self.buckets = merged
        self.scale -= by
        self._lo, self._hi = self._lo >> by, self._hi >> by

    def _fit(self) -> None:
        if len(self.buckets) < 2:
            if self.buckets:
                self._lo = self._hi = next(iter(self.buckets))
            return
        lo, hi = self._lo, self._hi = min(self.buckets), max(self.buckets)
        by = 0
        while (hi >> by) - (lo >> by) + 1 > self.max_size:
            by += 1
        self._downscale(by)

    def merge(self, other: ExpHistogram) -> None:
        """Add ``other``'s samples (exact: equal to having added them here)."""
        if other.count == 0:
            return
        if self.count == 0:
            self.min, self.max = other.min, other.max
        else:
            self.min, self.max = min(self.min, other.min), max(self.max, other.max)
        self.count += other.count
        self.sum += other.sum
        self.zero_count += other.zero_count
        self.max_size = min(self.max_size, other.max_size)
        scale = min(self.scale, other.scale)
        self._downscale(self.scale - scale)
        for index, n in other.buckets.items():
            key = index >> (other.scale - scale)
            self.buckets[key] = self.buckets.get(key, 0) + n
        self._fit()

    def quantile(self, q: float) -> float:
        """An estimate of quantile ``q`` (0..1): the geometric middle of the bucket it falls in, clamped to
        ``min`` / ``max``; NaN when empty."""
        if self.count == 0:
            return math.nan
        rank = q * (self.count - 1)
        seen = self.zero_count
        if rank < seen:
            return 0.0
        base = 2.0 ** (2.0**-self.scale)
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if rank < seen:
                middle = base ** (index + 0.5)
                return float(min(max(middle, self.min), self.max))
        return float(self.max)

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else math.nan

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExpHistogram):
            return NotImplemented
        fields = ("scale", "count", "sum", "min", "max", "zero_count", "buckets")
        return all(getattr(self, f) == getattr(other, f) for f in fields)

    def __repr__(self) -> str:
        return f"ExpHistogram(count={self.count}, scale={self.scale}, buckets={len(self.buckets)})"
