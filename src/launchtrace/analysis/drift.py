"""Run-level drift: did a whole run (or a whole host) run slower or faster in every kernel at once?

A noisy neighbour or a CPU frequency change slows every kernel of a process by the same factor. Per kernel, that
looks exactly like a regression of each kernel, and neither the relative floors nor the step-spread rule of
:mod:`launchtrace.analysis.verdicts` notices it (every step slows evenly). So before kernels are judged, each run's
overall **speed factor** is estimated against a reference: the median, over the run's kernels, of the ratio of
the kernel's ``quantile`` step to the reference's. The median ignores the few kernels a real code change touches
(one slowed kernel of 22 does not move it), and the factor is only taken as drift when it is plain:

- at least :data:`MIN_KERNELS` kernels to judge from (with one or two, a kernel change and a whole-run change
  look the same, and nothing is assumed);
- the factor is at least :data:`DRIFT_THRESHOLD` away from 1;
- at least :data:`AGREEMENT` of the kernels moved with it, and every one of them when there are fewer than
  :data:`ALL_BELOW` (two changed kernels of three are not "every kernel"): each one's ratio within half the
  factor's own distance from 1 (on the log scale: ``|log r - log f| <= |log f| / 2``; for 1.42x, between 1.19x
  and 1.69x). Kernels slowed by different amounts (a code change touching several kernels) are not one factor.

Kernel and scope verdicts are then judged on the run's values divided by its factor (relative to the run), and
the drift itself is reported as its own finding. Pure: plain floats in, a :class:`Drift` out.

Example::

    from launchtrace.analysis.drift import speed_factor
    ref = {"a": 1.0, "b": 2.0, "c": 0.5, "d": 4.0}
    run = {"a": 1.42, "b": 2.85, "c": 0.71, "d": 5.6}
    d = speed_factor(ref, run)
    print(d.applies, f"{d.factor:.2f}")   # True 1.42
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

__all__ = ["AGREEMENT", "ALL_BELOW", "DRIFT_THRESHOLD", "MIN_KERNELS", "NO_DRIFT", "Drift", "speed_factor"]

DRIFT_THRESHOLD = 0.10
"""A whole run moved by less than this is not called drift (and its values are left as they are)."""
MIN_KERNELS = 3
"""Kernels needed to tell a whole-run change from a kernel change."""
AGREEMENT = 0.75
"""The share of kernels that must have moved with the factor (within half its distance from 1, log scale)."""
ALL_BELOW = 5
"""With fewer kernels than this, all of them must have moved with the factor."""


@dataclasses.dataclass(frozen=True, slots=True)
class Drift:
    """A run's speed factor against its reference. ``factor``: the median ratio over its kernels (1.42: the
    run took 1.42x as long); ``kernels``: how many kernels it rests on; ``agreeing``: how many moved with it;
    ``applies``: plain enough to be drift (see the module docstring); ``lowest`` / ``highest``: the lowest and
    highest kernel ratio, for the evidence."""

    factor: float
    kernels: int
    agreeing: int
    applies: bool
    lowest: float = math.nan
    highest: float = math.nan

    @property
    def used(self) -> float:
        """The factor to divide the run's values by: ``factor`` when it applies, else 1."""
        return self.factor if self.applies else 1.0

    def describe(self, who: str) -> str:
        """``run B1 ran 1.42x slower in every kernel (22 of 22 moved together, 1.38x .. 1.47x)``."""
        way = "slower" if self.factor > 1 else "faster"
        times = self.factor if self.factor > 1 else 1.0 / self.factor
        return (
            f"{who} ran {times:.2f}x {way} in every kernel ({self.agreeing} of {self.kernels} kernels moved "
            f"together, {self.lowest:.2f}x .. {self.highest:.2f}x)"
        )


NO_DRIFT = Drift(1.0, 0, 0, False)


def speed_factor(
    reference: Mapping[str, float],
    run: Mapping[str, float],
    *,
    threshold: float = DRIFT_THRESHOLD,
    min_kernels: int = MIN_KERNELS,
    agreement: float = AGREEMENT,
) -> Drift:
    """The speed factor of ``run`` against ``reference``, each a per-kernel level (e.g. its p10 step, any unit,
    positive); kernels in only one of them, or not positive, are left out. See the module docstring.

    Example::

        speed_factor({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 1.0, "b": 1.0, "c": 3.0}).applies  # False
    """
    logs = sorted(
        math.log(run[k] / reference[k])
        for k in reference
        if k in run and reference[k] > 0 and run[k] > 0 and math.isfinite(reference[k]) and math.isfinite(run[k])
    )
    n = len(logs)
    if n == 0:
        return NO_DRIFT
    mid = n // 2
    median = logs[mid] if n % 2 else (logs[mid - 1] + logs[mid]) / 2.0
    agreeing = sum(1 for x in logs if abs(x - median) <= abs(median) / 2.0)
    needed = n if n < ALL_BELOW else math.ceil(agreement * n)
    applies = n >= min_kernels and abs(median) >= math.log1p(threshold) and agreeing >= needed
    return Drift(math.exp(median), n, agreeing, applies, math.exp(logs[0]), math.exp(logs[-1]))
