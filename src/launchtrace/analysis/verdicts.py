"""Timing verdicts that survive an A/A test: is B slower or faster than A, and what does the answer rest on?

Pure: NumPy and ``math`` only, no I/O, no launchtrace model. Its inputs are plain sequences of floats, so the
same statistics serve ``launchtrace diff`` (one kernel or scope over two sets of runs) and fleet-wide alerts
(one series per host).

**The unit of replication is a run** (one process), then a step (one scope occurrence) inside it, never a
launch: launches in one run share that run's machine state (load, clocks, caches), so treating them as
independent samples measures the machine's drift, not the program. Each input is therefore a list of runs,
each run a list of per-step aggregates (one value per step: the total time of one kernel, one position or one
scope in that step), warm-up steps already removed (:func:`warmup_steps` finds them).

Each run (or side) is summarised by its ``quantile`` step, by default the 10th percentile
(:data:`DEFAULT_QUANTILE`): interference from other processes only ever adds time, so on a shared machine the
median moves with the load while the low quantile stays with the program's own cost. What a :class:`Verdict`
rests on (``basis``):

- ``"runs"``: at least ``min_runs`` runs on each side. The comparison is Welch's t-test on the logarithms of
  the runs' quantile steps (the effect is the ratio of their geometric means, minus 1; the confidence
  interval is Welch's, at level ``1 - alpha``). Run-to-run drift is then part of the noise the test sees,
  which is what makes its false-alarm rate honest.
- ``"steps-one-run"``: fewer runs (typically one each; several are pooled). The effect is the ratio of the
  quantile steps minus 1, with a percentile-bootstrap interval and p-value over steps. Step-to-step noise
  inside one run underestimates the drift between two runs, so the verdict is ``significant`` only when the
  change also exceeds ``detectable_change``: the larger of a floor measured on real repeated runs
  (:data:`ONE_RUN_DRIFT_FLOOR`, see ``benchmarks/bench_verdicts.py`` and ``docs/diff.md``) and
  :data:`ONE_RUN_SPREAD_FACTOR` times how far a side's quantile step sits above its fastest step (a run whose
  low steps were hit by interference too cannot vouch for its low quantile), and ``min_abs_change`` relative
  to A's value (small values drift most between runs). Below it the reason says "one
  run each: a change under X% cannot be told from this run's step-to-step noise".
- ``"insufficient"``: fewer than ``min_steps`` steps on a side (or no positive values): no test.

**Four answers** (:attr:`Verdict.verdict`, one of :data:`ANSWERS`):

- ``slower`` / ``faster``: the test is significant at ``alpha`` and the change is at least ``min_change`` (one
  run per side: at least the one-run bound);
- ``same``: equivalence shown: the interval lies within +-``min_change`` (with one run per side, the steps'
  interval widened by the one-run bound, since the steps cannot see the drift between runs: at the default 5 %
  one run per side is never enough to say ``same``);
- ``inconclusive``: anything else (too few steps, too few runs, an interval reaching past +-``min_change``);
  the reason says why and :attr:`Verdict.decide` what would decide it ("3 runs per side would tell a 21 %
  change; about 9 would decide this one"), from the runs' own spread, or with one run per side from
  :data:`RUN_DRIFT_SD`.

The bootstrap p-value counts resamples that cross "no change"; when none does it cannot resolve below
``1 / (resamples + 1)`` (about 0.0005), so its tail is then extrapolated from the normal distribution fitted to the
resampled log ratios: a multiple-comparison correction over many tests (the fleet's) must not be made
impossible by that floor.

Example::

    from launchtrace.analysis.verdicts import compare_runs, warmup_steps

    steps = [912.0, 2.1, 2.0, 2.2, 2.1, 2.0, 2.3, 2.1]      # ms per step; the first one compiled kernels
    skip = warmup_steps(steps)                               # 1
    a = [steps[skip:]]                                       # one run
    b = [[3.1, 3.0, 3.2, 3.1, 3.3, 3.0, 3.1]]                # one run of the changed program
    v = compare_runs(a, b)
    print(v.verdict, f"{v.effect:+.0%}", v.basis, v.reason)
    # slower +50% steps-one-run one run each: p10 step +50.0% (99% CI +42.9% .. +55.0%), bootstrap over
    # steps p=4.3e-76 (no resample crossed: normal tail), beyond the 25% one run can tell from drift

    v = compare_runs([[2.0, 2.1], [2.2, 2.1], [2.0, 2.0]], [[3.0, 3.1], [3.2, 3.1], [2.9, 3.0]])
    print(v.basis, v.verdict, v.p_value)                     # runs slower 0.000121...
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from launchtrace._lazy import lazy_module

np = lazy_module("numpy")  # only some functions need it: importing this module stays cheap (baseline build)

__all__ = [
    "ANSWERS",
    "DEFAULT_ALPHA",
    "DEFAULT_MIN_CHANGE",
    "DEFAULT_MIN_RUNS",
    "DEFAULT_MIN_STEPS",
    "DEFAULT_QUANTILE",
    "ONE_RUN_DRIFT_FLOOR",
    "ONE_RUN_SPREAD_FACTOR",
    "RUN_DRIFT_SD",
    "Verdict",
    "compare_runs",
    "mann_whitney_u",
    "runs_to_tell",
    "student_t_ppf",
    "student_t_sf",
    "warmup_steps",
    "welch_t_test",
]

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_CHANGE = 0.05  # a significant change under 5 % is not worth a line
DEFAULT_MIN_RUNS = 3  # runs per side before the run-level test
DEFAULT_MIN_STEPS = 5  # steps per side (after warm-up) before any verdict
ONE_RUN_DRIFT_FLOOR = 0.25
"""With one run per side, a change under this fraction is never called. Two runs of the same program on a noisy
shared machine moved a millisecond kernel's p10 step by up to 10 % (its median by up to 130 %;
``benchmarks/bench_verdicts.py``, figures in ``docs/diff.md``): 25 % leaves a margin and still finds a 1.5x
slower kernel."""
ONE_RUN_SPREAD_FACTOR = 3.0
"""With one run per side, the detectable change is at least this many times how far a side's ``quantile`` step
sits above its fastest step (``q / min - 1``): when even the low steps of a run were slowed by interference,
its low quantile moves between runs too, and one run cannot vouch for it. (With many steps the minimum sits
lower, so the bound can only grow: conservative, never a false alarm more. A reference at a quantile, tried,
let a run with only a few quiet steps through.)"""
DEFAULT_QUANTILE = 0.1
"""Which step summarises a run: the 10th percentile. On a shared machine interference (another process taking
the core, a page fault, a scheduler tick) only ever adds time, and on the 2-core machines these figures come
from most steps of a long kernel are hit some of the time: the median moves with the load, the low quantile
stays with the program's own cost (``docs/diff.md`` has the measurements). ``quantile=0.5`` compares medians."""
_BOOTSTRAP = 2000
_BATCH_VALUES = 2_000_000  # resampled values held at once (16 MB of indices)
_RADIX_RANKS = 1 << 16  # the longest series whose resamples' ranks are sorted as 16-bit ints (else counted)
_WORK_VALUES = 40_000_000  # resampled values in all, per side (a few seconds)
_TINY_P = 1e-300  # an extrapolated tail is never exactly 0 (steps with no spread at all still give 0)
_SEED = 20261201  # a fixed seed: the same inputs always give the same interval

Direction = str  # "slower" | "faster" | "none"
Basis = str  # "runs" | "steps-one-run" | "insufficient"
Answer = str  # "slower" | "faster" | "same" | "inconclusive"
ANSWERS = ("slower", "faster", "same", "inconclusive")
RUN_DRIFT_SD = 0.05
"""The run-to-run spread (standard deviation of the log p10 step) assumed when one run per side cannot measure
it, only to say how many runs would decide an inconclusive row. Quiet zoo runs spread less (the ``timers``
program's three runs per side: 0.6-1.0 %, ``docs/diff.md``); 5 % leaves room for noisier programs and machines,
so the advice errs towards more runs."""
_MAX_RUNS_ADVICE = 100


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`compare_runs` concluded about B against A.

    ``effect``: relative change of B against A (``0.5``: B takes 1.5x as long; NaN when not computable).
    ``ci_low`` / ``ci_high``: its confidence interval at level ``1 - alpha`` (NaN when none). ``p_value``: of
    the test used, or None when none ran. ``significant``: the change is real and large enough to report;
    ``direction`` is then ``"slower"`` or ``"faster"``, else ``"none"``. ``verdict``: ``slower``, ``faster``,
    ``same`` or ``inconclusive`` (see the module docstring); ``decide``: for ``inconclusive``, what would decide
    it, else ``""``. ``basis``: ``"runs"``,
    ``"steps-one-run"`` or ``"insufficient"`` (see the module docstring). ``n_runs_*`` / ``n_steps_*``: what
    each side held. ``detectable_change``: the smallest change this comparison can tell from noise (one run per
    side), else None. ``reason``: one line for people.
    """

    effect: float
    ci_low: float
    ci_high: float
    p_value: float | None
    significant: bool
    direction: Direction
    basis: Basis
    n_runs_a: int
    n_runs_b: int
    n_steps_a: int
    n_steps_b: int
    detectable_change: float | None
    reason: str
    verdict: Answer = "inconclusive"
    decide: str = ""


# --- distributions ------------------------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``, given ``x`` and ``y = 1 - x`` (each computed
    directly by the caller, so neither loses digits near 0 or 1)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, y) / b


def student_t_sf(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom (``scipy.stats.t.sf``)."""
    if math.isnan(t) or df <= 0:
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    t2 = t * t
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))
    return tail if t >= 0 else 1.0 - tail


def student_t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (``scipy.stats.t.ppf``), by bisection on :func:`student_t_sf`."""
    if not 0.0 < q < 1.0 or df <= 0:
        return math.nan
    if q < 0.5:
        return -student_t_ppf(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while student_t_sf(hi, df) > 1.0 - q:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if student_t_sf(mid, df) > 1.0 - q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


# --- tests --------------------------------------------------------------------------------------------------


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """``(U of a, two-sided p)`` of the Mann-Whitney U test: normal approximation, average ranks for ties, the
    tie-corrected variance and a continuity correction of 0.5, exactly SciPy's
    ``mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")``. ``p`` is 1.0 when either side is
    empty or every value is equal.

    Example::

        u, p = mann_whitney_u([1, 2, 3, 4, 5, 6, 7, 8], [5, 6, 7, 8, 9, 10, 11, 12])
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 0.0, 1.0
    values = np.concatenate([np.asarray(a, dtype=float), np.asarray(b, dtype=float)])
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    ranks = np.empty(len(values), dtype=float)
    boundaries = np.flatnonzero(np.diff(sorted_vals)) + 1  # average ranks over runs of equal values
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(values)]])
    counts = ends - starts
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, counts)  # 1-based: the mean of starts+1 .. ends
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    u2 = n1 * n2 - u1
    n = n1 + n2
    tie_term = float((counts.astype(float) ** 3 - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return u1, 1.0
    z = (max(u1, u2) - n1 * n2 / 2.0 - 0.5) / math.sqrt(var)
    return u1, min(1.0, math.erfc(z / math.sqrt(2.0)))  # 2 * the normal survival function at z


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """``(t, df, two-sided p)`` of Welch's unequal-variances t-test of ``mean(b) - mean(a)``
    (``scipy.stats.ttest_ind(b, a, equal_var=False)``). Needs two values per side; NaN otherwise, and
    ``p`` 1.0 when both sides are constant and equal."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 2 or len(y) < 2:
        return math.nan, math.nan, math.nan
    va, vb = float(x.var(ddof=1)) / len(x), float(y.var(ddof=1)) / len(y)
    diff = float(y.mean() - x.mean())
    se2 = va + vb
    if se2 <= 0:
        return (0.0, math.inf, 1.0) if diff == 0 else (math.copysign(math.inf, diff), math.inf, 0.0)
    df = se2 * se2 / (va * va / (len(x) - 1) + vb * vb / (len(y) - 1))
    t = diff / math.sqrt(se2)
    return t, df, min(1.0, 2.0 * student_t_sf(abs(t), df))


# --- warm-up ------------------------------------------------------------------------------------------------


def warmup_steps(step_durations: Sequence[float], *, factor: float = 1.5, spread: float = 6.0) -> int:
    """How many leading steps of one run are warm-up: the first step includes compiling (or loading) the
    kernels, and sometimes a few more are slow while caches fill.

    A leading step is warm-up while it exceeds both ``factor`` times the median of the run's second half
    (surely warm) and that median plus ``spread`` robust standard deviations (1.4826 x MAD) of it; at most
    half the steps are ever dropped, and none of a run of fewer than 3.

    Example::

        warmup_steps([850.0, 2.1, 2.0, 2.2, 2.1])  # 1
    """
    d = [float(v) for v in step_durations]  # as np.asarray(..., dtype=float) converts them
    n = len(d)
    if n < 3:
        return 0
    warm = [v for v in d[n // 2 :] if math.isfinite(v)]
    if not warm:
        return 0
    ref = _median(warm)
    mad = 1.4826 * _median([abs(v - ref) for v in warm])
    threshold = max(factor * ref, ref + spread * mad)
    k = 0
    while k < n // 2 and (not math.isfinite(d[k]) or d[k] > threshold):
        k += 1
    return k


def _median(values: list[float]) -> float:
    """``float(np.median(values))`` of finite floats, to the bit, without NumPy (``summary`` needs no other of
    it): the middle value, or the mean of the two middle ones as NumPy takes it, ``(a + b) / 2``."""
    ranked = sorted(values)
    middle = len(ranked) // 2
    return ranked[middle] if len(ranked) % 2 else (ranked[middle - 1] + ranked[middle]) / 2


# --- the verdict --------------------------------------------------------------------------------------------


def _clean(runs: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """Each run's finite values; runs left empty are dropped."""
    out = []
    for run in runs:
        v = np.asarray(list(run), dtype=float)
        v = v[np.isfinite(v)]
        if len(v):
            out.append(v)
    return out


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x * 100:+.1f}%"


def _p(p: float) -> str:
    """``=0.0012``, or ``<1e-15`` past what a double's tail means."""
    return "<1e-15" if p < 1e-15 else f"={p:.2g}"


def _share(x: float) -> str:
    """``0.05`` -> ``5%``, ``0.005`` -> ``0.5%``."""
    return f"{x * 100:.3g}%"


def _level(alpha: float) -> str:
    return f"{(1 - alpha) * 100:.4g}%"


def _call(effect: float, significant: bool) -> Direction:
    if not significant:
        return "none"
    return "slower" if effect > 0 else "faster"


def _quantile(values: np.ndarray, q: float, axis: int | None = None) -> np.ndarray | float:
    """NumPy's default (linear) quantile."""
    return np.quantile(values, q, axis=axis)


def _resample_count(n: int) -> int:
    """Bootstrap resamples for ``n`` values: :data:`_BOOTSTRAP`, fewer for very long series so the work stays
    bounded (at least 200: the p-value then still resolves 0.005)."""
    return max(200, min(_BOOTSTRAP, _WORK_VALUES // max(1, n)))


def _resampled_quantiles(values: np.ndarray, q: float, rng: np.random.Generator, count: int) -> np.ndarray:
    """The ``q`` quantile of ``count`` resamples of ``values``, drawn in batches of at most
    :data:`_BATCH_VALUES` values, so a long series (a fleet's hosts) stays within a few tens of MB."""
    n = len(values)
    per_batch = max(1, _BATCH_VALUES // n)
    counted = _CountedQuantile(values, q) if np.isfinite(values).all() else None
    out = []
    for start in range(0, count, per_batch):
        rows = min(per_batch, count - start)
        drawn = rng.integers(0, n, (rows, n))
        out.append(_quantile(values[drawn], q, axis=1) if counted is None else counted.of_rows(drawn))
    return np.concatenate(out)


class _CountedQuantile:
    """``np.quantile(values[drawn], q, axis=1)`` (the linear method) without sorting or partitioning the values:
    the two order statistics it interpolates between are the ranks (in the sorted ``values``) at those places
    among each row's draws, then interpolated with NumPy's own arithmetic, step for step, so the result is the
    same to the bit (``tests/test_analysis_verdicts.py`` compares them). Partitioning every resample was half of
    ``diff``'s time on a 100 MB file. The ranks are found by sorting each row's ranks as 16-bit integers (NumPy's
    radix sort, linear: a series of at most :data:`_RADIX_RANKS` values), else by counting each row's draws of
    each rank (one ``bincount`` and one ``cumsum`` for a whole batch). Finite values only (NumPy gives NaN for a
    row holding one; the caller partitions those)."""

    def __init__(self, values: np.ndarray, q: float) -> None:
        n = len(values)
        order = np.argsort(values, kind="stable")
        self.n = n
        self.ordered = values[order]
        self.rank = np.empty(n, dtype=np.intp)
        self.rank[order] = np.arange(n)
        self.rank16 = self.rank.astype(np.uint16) if n <= _RADIX_RANKS else None
        # numpy.lib._function_base_impl._quantile for one q: virtual index, neighbours (the last value when at or
        # past the end), and gamma from the neighbour as an index
        self.virtual = (n - 1) * np.float64(q)
        lo = int(np.floor(self.virtual))
        if self.virtual >= n - 1:
            lo = hi = -1
        elif self.virtual < 0:
            lo = hi = 0
        else:
            hi = lo + 1
        self.gamma = np.float64(self.virtual - lo)
        self.lo, self.hi = lo % n, hi % n

    def of_rows(self, drawn: np.ndarray) -> np.ndarray:
        """The quantile of each row of ``values[drawn]``; ``drawn`` (an intp array) may be overwritten: no more
        arrays of its size are held at once than partitioning held (two)."""
        if self.rank16 is not None:
            # each row's ranks as 16-bit ints (a quarter of drawn's size), sorted: the k-th is the k-th smallest,
            # the one counting finds (8 ms a batch of 2,000,000 draws against 15 for counting, here)
            ranks16 = np.take(self.rank16, drawn, mode="clip")
            ranks16.sort(axis=1, kind="stable")  # radix sort for 16-bit ints
            a = self.ordered[ranks16[:, self.lo]]
            b = a if self.hi == self.lo else self.ordered[ranks16[:, self.hi]]
            return self._between(a, b)
        rows, n = drawn.shape
        ranks = np.take(self.rank, drawn, out=drawn, mode="clip")  # in place: "clip" is unbuffered (all in range)
        ranks += (np.arange(rows) * n)[:, None]  # each row's ranks in a range of its own
        counts = np.bincount(ranks.ravel(), minlength=rows * n)
        # draws at or below each rank, summed through the whole batch: row r's own sums plus the r * n draws of
        # the rows before it, so the batch's sums never fall and a row's ranks whose own sum is at most k come
        # first among those at most r * n + k (the next row's start at (r + 1) * n, above it: k < n). The k-th
        # smallest of row r is past that many of its ranks: one search a row, not a comparison a rank
        np.cumsum(counts, out=counts)
        before = np.arange(0, rows * n, n)
        a = self.ordered[np.searchsorted(counts, before + self.lo, side="right") - before]
        b = a if self.hi == self.lo else self.ordered[np.searchsorted(counts, before + self.hi, side="right") - before]
        return self._between(a, b)

    def _between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """NumPy's interpolation between the two order statistics of each row."""
        diff_b_a = b - a  # numpy's _lerp
        result = a + diff_b_a * self.gamma
        if self.gamma >= 0.5:
            result = b - diff_b_a * (1 - self.gamma)
        return result


def _half_width(var_a: float, var_b: float, n: int, alpha: float) -> float:
    """Half the width (log scale) of Welch's interval at level ``1 - alpha`` with ``n`` runs per side whose log
    quantile steps vary by ``var_a`` and ``var_b`` (Welch's degrees of freedom for those variances)."""
    se2 = (var_a + var_b) / n
    if se2 <= 0:
        return 0.0
    df = se2 * se2 / ((var_a / n) ** 2 / (n - 1) + (var_b / n) ** 2 / (n - 1))
    return student_t_ppf(1.0 - alpha / 2.0, df) * math.sqrt(se2)


def runs_to_tell(var_a: float, var_b: float, target: float, alpha: float) -> int | None:
    """The fewest runs per side (at most 100) whose run-level interval reaches no further than ``target`` on
    either side (log scale), given the variances of the two sides' log quantile steps; None when even 100 would
    not do."""
    if not target > 0 or not (math.isfinite(var_a) and math.isfinite(var_b)):
        return None
    if _half_width(var_a, var_b, _MAX_RUNS_ADVICE, alpha) > target:
        return None
    lo, hi = 2, _MAX_RUNS_ADVICE  # the half width falls with n: the first n that is narrow enough
    while lo < hi:
        mid = (lo + hi) // 2
        if _half_width(var_a, var_b, mid, alpha) <= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _advice(var_a: float, var_b: float, diff: float, min_change: float, alpha: float, runs: int, measured: bool) -> str:
    """What would decide an inconclusive row: what ``runs`` runs per side would tell, and how many would bring
    this interval within reach of an answer (``same`` when the change is under ``min_change``, else ``slower`` /
    ``faster``)."""
    edge = math.log1p(min_change)
    target = max(edge - abs(diff) if abs(diff) < edge else abs(diff), edge / 2.0)
    n = runs_to_tell(var_a, var_b, target, alpha)
    sd = math.sqrt((var_a + var_b) / 2.0)
    spread = f"runs spread {sd:.1%} here" if measured else f"if runs spread {sd:.0%}, as in the zoo"
    told = math.expm1(_half_width(var_a, var_b, runs, alpha))
    head = f"{runs} runs per side would tell a {told:.0%} change"
    if n is None:
        return f"{head}; more than {_MAX_RUNS_ADVICE} would be needed to decide this one ({spread})"
    return f"{head}; about {max(n, runs)} would decide this one ({spread})"


def _by_runs(a: list[np.ndarray], b: list[np.ndarray], q: float, alpha: float, min_change: float) -> tuple:
    la = [math.log(float(_quantile(r, q))) for r in a]
    lb = [math.log(float(_quantile(r, q))) for r in b]
    _t, df, p = welch_t_test(la, lb)
    diff = float(np.mean(lb) - np.mean(la))
    effect = math.expm1(diff)
    se = math.sqrt(float(np.var(la, ddof=1)) / len(la) + float(np.var(lb, ddof=1)) / len(lb))
    if se == 0.0:
        lo = hi = effect
    else:
        t_crit = student_t_ppf(1.0 - alpha / 2.0, df)
        lo, hi = math.expm1(diff - t_crit * se), math.expm1(diff + t_crit * se)
    significant = p < alpha and abs(effect) >= min_change
    what = f"{len(a)} vs {len(b)} runs: {_pct(effect)} ({_level(alpha)} CI {_pct(lo)} .. {_pct(hi)})"
    test = f"Welch t-test on the runs' log {_qname(q)} steps p={p:.2g}"
    decide = ""
    if significant:
        answer, reason = _call(effect, True), f"{what}, {test}"
    elif -min_change <= lo and hi <= min_change:
        answer, reason = "same", f"{what}, {test}: the interval lies within +-{_share(min_change)}"
    else:
        answer = "inconclusive"
        va, vb = float(np.var(la, ddof=1)), float(np.var(lb, ddof=1))
        decide = _advice(va, vb, diff, min_change, alpha, max(len(a), len(b)) + 1, measured=True)
        if p < alpha:
            edge = _share(min_change)
            why = f"real but under the {edge} worth reporting, and the interval reaches past +-{edge}"
        else:
            why = f"not significant, and the interval reaches past +-{_share(min_change)}"
        reason = f"{what}, {test}: {why}; {decide}"
    return effect, lo, hi, p, significant, None, reason, answer, decide


def _qname(q: float) -> str:
    return "median" if q == 0.5 else f"p{q * 100:g}"


def _bootstrap_p(ratios: np.ndarray) -> float:
    """The percentile bootstrap's two-sided p-value: how often a resample crosses "no change". When none does,
    the count cannot resolve below ``1 / (resamples + 1)`` (about 0.0005), a floor that a multiple-comparison
    correction over 20 or more tests could never get under: the tail is then taken from the normal distribution
    fitted to the resampled log ratios (their mean over their spread), never above that floor."""
    crossing = min(int(np.count_nonzero(ratios <= 0.0)), int(np.count_nonzero(ratios >= 0.0)))
    floor = 1.0 / (len(ratios) + 1)
    if crossing:
        return min(1.0, (2 * crossing + 1) / (len(ratios) + 1))
    sd = float(np.std(ratios))
    if sd == 0.0:
        return 0.0
    return max(_TINY_P, min(floor, math.erfc(abs(float(np.mean(ratios))) / sd / math.sqrt(2.0))))


def _by_steps(
    a: np.ndarray, b: np.ndarray, q: float, alpha: float, min_change: float, min_abs: float, who: str, min_runs: int
) -> tuple:
    qa, qb = float(_quantile(a, q)), float(_quantile(b, q))
    effect = qb / qa - 1.0
    rng = np.random.default_rng(_SEED)
    count = _resample_count(max(len(a), len(b)))
    boot_a = _resampled_quantiles(a, q, rng, count)
    boot_b = _resampled_quantiles(b, q, rng, count)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.log(boot_b / boot_a)
    ratios = ratios[np.isfinite(ratios)]
    if len(ratios):
        qlo, qhi = np.quantile(ratios, [alpha / 2.0, 1.0 - alpha / 2.0])
        lo, hi = math.expm1(float(qlo)), math.expm1(float(qhi))
        p = _bootstrap_p(ratios)
    else:
        lo = hi = p = math.nan
    low_a, low_b = float(np.min(a)), float(np.min(b))
    spread = max(qa / low_a - 1.0, qb / low_b - 1.0) if min(low_a, low_b) > 0 else math.inf
    drift = max(ONE_RUN_DRIFT_FLOOR, ONE_RUN_SPREAD_FACTOR * spread, min_abs / qa)  # what one run cannot see
    detectable = max(drift, min_change)
    tested = p < alpha
    significant = tested and abs(effect) >= detectable
    tail = " (no resample crossed: normal tail)" if len(ratios) and p < 1.0 / (len(ratios) + 1) else ""
    what = (
        f"{_qname(q)} step {_pct(effect)} ({_level(alpha)} CI {_pct(lo)} .. {_pct(hi)}), bootstrap over steps "
        f"p{_p(p)}{tail}"
    )
    # the steps' interval says nothing of the drift between two runs: widened by what one run cannot tell
    wide_lo, wide_hi = (1.0 + lo) / (1.0 + drift) - 1.0, (1.0 + hi) * (1.0 + drift) - 1.0
    decide = ""
    if significant:
        answer, reason = _call(effect, True), f"{who}: {what}, beyond the {detectable:.0%} one run can tell from drift"
    elif -min_change <= wide_lo and wide_hi <= min_change:
        answer = "same"
        reason = f"{who}: {what}; with the {drift:.0%} drift between runs still within +-{_share(min_change)}"
    else:
        answer = "inconclusive"
        var = RUN_DRIFT_SD**2
        decide = _advice(var, var, math.log1p(effect), min_change, alpha, min_runs, measured=False)
        if abs(effect) >= detectable:
            why = f"the steps do not show it at alpha {alpha:g}"
            reason = f"{who}: {what}: {why}; {decide}"
        else:
            reason = (
                f"{who}: a change under {detectable:.0%} cannot be told from this run's step-to-step noise "
                f"({what}); {decide}"
            )
    return effect, lo, hi, p, significant, detectable, reason, answer, decide


def compare_runs(
    a_runs: Sequence[Sequence[float]],
    b_runs: Sequence[Sequence[float]],
    *,
    alpha: float = DEFAULT_ALPHA,
    min_change: float = DEFAULT_MIN_CHANGE,
    min_runs: int = DEFAULT_MIN_RUNS,
    min_steps: int = DEFAULT_MIN_STEPS,
    quantile: float = DEFAULT_QUANTILE,
    min_abs_change: float = 0.0,
) -> Verdict:
    """Compare B against A, each a sequence of runs, each run its per-step aggregates (warm-up removed).

    With at least ``min_runs`` runs per side the test is at the run level; otherwise the runs' steps are
    pooled and judged as one run each (see the module docstring). Each run (or pooled side) is summarised by
    its ``quantile`` step (:data:`DEFAULT_QUANTILE`: the 10th percentile; ``0.5``: the median).
    ``min_abs_change`` (in the inputs' unit) raises the one-run detectability bound for small values: changes
    smaller than that per step are not called from one run each (run-to-run state effects such as caches
    dominate tiny kernels; ``launchtrace diff`` passes 50 us). Non-finite
    values and empty runs are left out. ``alpha`` is the significance level and sets the interval's level
    (``1 - alpha``); ``min_change`` the smallest relative change worth reporting. Raises ``ValueError`` for
    arguments out of range.

    Example::

        a = [[10.0, 10.2, 9.9, 10.1, 10.0, 10.3, 9.8, 10.0]]
        v = compare_runs(a, [[15.1, 15.0, 15.3, 14.9, 15.2, 15.0, 15.4, 14.8]])
        assert v.significant and v.direction == "slower" and v.basis == "steps-one-run"
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha!r}")
    if not min_change >= 0.0:
        raise ValueError(f"min_change must be >= 0, not {min_change!r}")
    if not min_abs_change >= 0.0:
        raise ValueError(f"min_abs_change must be >= 0, not {min_abs_change!r}")
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must be between 0 and 1, not {quantile!r}")
    if min_runs < 2 or min_steps < 2:
        raise ValueError("min_runs and min_steps must be at least 2")
    a, b = _clean(a_runs), _clean(b_runs)
    na, nb = sum(len(r) for r in a), sum(len(r) for r in b)
    counts = (len(a), len(b), na, nb)
    nan = math.nan
    if na < min_steps or nb < min_steps:
        decide = f"at least {min_steps} steps per side (after warm-up) would give a verdict"
        reason = f"too few steps for a verdict: {na} vs {nb} (needs {min_steps} per side)"
        return Verdict(
            nan, nan, nan, None, False, "none", "insufficient", *counts, None, reason, "inconclusive", decide
        )
    pooled_a, pooled_b = np.concatenate(a), np.concatenate(b)
    if not (float(_quantile(pooled_a, quantile)) > 0 and float(_quantile(pooled_b, quantile)) > 0):
        reason = "no positive durations to compare"
        decide = "positive per-step durations on both sides"
        return Verdict(
            nan, nan, nan, None, False, "none", "insufficient", *counts, None, reason, "inconclusive", decide
        )
    by_runs = len(a) >= min_runs and len(b) >= min_runs
    if by_runs and all(float(_quantile(r, quantile)) > 0 for r in (*a, *b)):
        effect, lo, hi, p, significant, detectable, reason, answer, decide = _by_runs(a, b, quantile, alpha, min_change)
        basis = "runs"
    else:
        who = "one run each" if len(a) == 1 and len(b) == 1 else f"{len(a)} vs {len(b)} runs, steps pooled"
        effect, lo, hi, p, significant, detectable, reason, answer, decide = _by_steps(
            pooled_a, pooled_b, quantile, alpha, min_change, min_abs_change, who, min_runs
        )
        basis = "steps-one-run"
    direction = _call(effect, significant)
    return Verdict(effect, lo, hi, p, significant, direction, basis, *counts, detectable, reason, answer, decide)
