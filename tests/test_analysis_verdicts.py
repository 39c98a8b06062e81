"""The pure timing-verdict module: its distributions and tests against SciPy's, its verdicts on simulated runs
whose truth is known (drift between runs, noise between steps), and warm-up recognition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace.analysis.verdicts import (
    ONE_RUN_DRIFT_FLOOR,
    Verdict,
    compare_runs,
    mann_whitney_u,
    student_t_ppf,
    student_t_sf,
    warmup_steps,
    welch_t_test,
)

scipy_stats = pytest.importorskip("scipy.stats", reason="scipy (test extra) checks the hand-written statistics")


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-50, max_value=50), st.floats(min_value=0.5, max_value=500))
def test_student_t_sf_matches_scipy(t: float, df: float) -> None:
    assert student_t_sf(t, df) == pytest.approx(float(scipy_stats.t.sf(t, df)), rel=1e-9, abs=1e-14)


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.0005, max_value=0.9995), st.floats(min_value=0.5, max_value=500))
def test_student_t_ppf_matches_scipy(q: float, df: float) -> None:
    assert student_t_ppf(q, df) == pytest.approx(float(scipy_stats.t.ppf(q, df)), rel=1e-8, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(min_value=0.1, max_value=1e4), min_size=2, max_size=12),
    st.lists(st.floats(min_value=0.1, max_value=1e4), min_size=2, max_size=12),
)
def test_welch_matches_scipy(a: list[float], b: list[float]) -> None:
    t, df, p = welch_t_test(a, b)
    if np.var(a) == 0 and np.var(b) == 0:  # SciPy gives NaN; we give "equal" or "certainly different"
        assert p in (0.0, 1.0)
        return
    ref = scipy_stats.ttest_ind(b, a, equal_var=False)
    assert t == pytest.approx(float(ref.statistic), rel=1e-9)
    assert df == pytest.approx(float(ref.df), rel=1e-9)
    assert p == pytest.approx(float(ref.pvalue), rel=1e-7, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=60),
    st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=60),
)
def test_mann_whitney_matches_scipy(a: list[int], b: list[int]) -> None:
    u, p = mann_whitney_u(a, b)
    if len(set(a) | set(b)) == 1:
        assert p == 1.0
        return
    ref = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
    assert (u, p) == pytest.approx((float(ref.statistic), float(ref.pvalue)), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("q", [0.1, 0.5])
def test_one_run_interval_agrees_with_scipy_bootstrap(q: float) -> None:
    """The hand-written bootstrap interval of the quantile ratio against scipy.stats.bootstrap (percentile
    method, other random draws: equal within the resampling error)."""
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0.0, 0.1, 60), rng.lognormal(0.3, 0.1, 60)
    v = compare_runs([a], [b], alpha=0.05, quantile=q)
    ref = scipy_stats.bootstrap(
        (a, b),
        lambda x, y, axis: np.quantile(y, q, axis=axis) / np.quantile(x, q, axis=axis) - 1,
        method="percentile",
        confidence_level=0.95,
        n_resamples=4000,
        random_state=np.random.default_rng(9),
    ).confidence_interval
    assert v.ci_low == pytest.approx(ref.low, abs=0.02)
    assert v.ci_high == pytest.approx(ref.high, abs=0.02)
    assert v.effect == pytest.approx(np.quantile(b, q) / np.quantile(a, q) - 1)
    assert v.p_value < 0.001  # no resample crosses "no change"


@pytest.mark.parametrize("q", [0.1, 0.5])
def test_run_level_interval_is_welchs(q: float) -> None:
    a = [[10.0, 10.1], [10.4, 10.5], [9.8, 9.9], [10.2, 10.1]]
    b = [[12.0, 12.2], [12.6, 12.5], [11.9, 11.8]]
    v = compare_runs(a, b, alpha=0.05, quantile=q)
    la = np.log([np.quantile(r, q) for r in a])
    lb = np.log([np.quantile(r, q) for r in b])
    ref = scipy_stats.ttest_ind(lb, la, equal_var=False)
    lo, hi = ref.confidence_interval(0.95)
    assert v.basis == "runs" and v.n_runs_a == 4 and v.n_runs_b == 3 and v.n_steps_a == 8
    assert v.p_value == pytest.approx(float(ref.pvalue), rel=1e-7)
    assert (v.ci_low, v.ci_high) == pytest.approx((math.expm1(lo), math.expm1(hi)), rel=1e-6)
    assert v.significant and v.direction == "slower" and v.detectable_change is None


def _simulated_runs(rng: np.random.Generator, n_runs: int, scale: float, drift: float) -> list[np.ndarray]:
    """Runs of 30 steps: each run has its own machine state (a multiplicative drift), steps add noise and the
    odd spike. ``scale`` is the program's true cost."""
    out = []
    for _ in range(n_runs):
        level = scale * rng.lognormal(0.0, drift)
        steps = level * rng.lognormal(0.0, 0.03, 30)
        steps[rng.random(30) < 0.05] *= 3.0
        out.append(steps)
    return out


def test_step_test_alone_would_false_alarm_on_drift_but_the_verdict_does_not() -> None:
    """Step-to-step noise (3 %) is smaller than run-to-run drift (5 %): a test over steps finds nearly
    every A/A pair "significant", the one-run verdict (detectability bound) finds almost none."""
    rng = np.random.default_rng(11)
    pairs = [(_simulated_runs(rng, 1, 1.0, 0.05), _simulated_runs(rng, 1, 1.0, 0.05)) for _ in range(200)]
    naive = sum(mann_whitney_u(a[0], b[0])[1] < 0.01 for a, b in pairs)
    verdicts = [compare_runs(a, b) for a, b in pairs]
    assert naive > 100
    assert sum(v.significant for v in verdicts) <= 4
    assert all(v.basis == "steps-one-run" and v.detectable_change >= ONE_RUN_DRIFT_FLOOR for v in verdicts)
    assert "cannot be told from this run's step-to-step noise" in verdicts[0].reason


def test_one_run_finds_a_change_beyond_the_bound() -> None:
    rng = np.random.default_rng(12)
    found = [compare_runs(_simulated_runs(rng, 1, 1.0, 0.05), _simulated_runs(rng, 1, 1.5, 0.05)) for _ in range(100)]
    assert sum(v.significant and v.direction == "slower" for v in found) >= 95
    faster = compare_runs(_simulated_runs(rng, 1, 1.5, 0.0), _simulated_runs(rng, 1, 1.0, 0.0))
    assert faster.direction == "faster" and faster.effect == pytest.approx(-1 / 3, abs=0.05)


def test_run_level_false_alarms_and_power() -> None:
    rng = np.random.default_rng(13)
    aa = [compare_runs(_simulated_runs(rng, 5, 1.0, 0.08), _simulated_runs(rng, 5, 1.0, 0.08)) for _ in range(300)]
    assert all(v.basis == "runs" for v in aa)
    assert sum(v.significant for v in aa) <= 6  # alpha 1 %: about 3 expected
    ab = [compare_runs(_simulated_runs(rng, 5, 1.0, 0.08), _simulated_runs(rng, 5, 1.5, 0.08)) for _ in range(100)]
    assert sum(v.significant and v.direction == "slower" for v in ab) >= 95


def test_insufficient_and_bad_arguments() -> None:
    v = compare_runs([[1.0, 2.0]], [[1.0, 2.0, 3.0, 4.0, 5.0]])
    assert isinstance(v, Verdict) and v.basis == "insufficient" and not v.significant and v.p_value is None
    assert v.direction == "none" and math.isnan(v.effect) and "too few steps" in v.reason
    assert compare_runs([], [[1.0] * 9]).basis == "insufficient"
    assert compare_runs([[math.nan] * 9], [[1.0] * 9]).n_steps_a == 0
    with pytest.raises(ValueError):
        compare_runs([[1.0] * 9], [[1.0] * 9], alpha=2)
    with pytest.raises(ValueError):
        compare_runs([[1.0] * 9], [[1.0] * 9], min_change=-1)
    with pytest.raises(ValueError):
        compare_runs([[1.0] * 9], [[1.0] * 9], quantile=1.0)


def test_pooled_steps_when_runs_are_few() -> None:
    v = compare_runs([[1.0, 1.1, 1.0], [1.05, 1.0, 1.1]], [[2.0, 2.1, 2.0], [2.05, 2.0, 2.1]])
    assert v.basis == "steps-one-run" and v.n_runs_a == 2 and "2 vs 2 runs, steps pooled" in v.reason
    assert v.significant and v.direction == "slower"


def test_warmup_steps() -> None:
    assert warmup_steps([850.0, 2.1, 2.0, 2.2, 2.1, 2.0]) == 1
    assert warmup_steps([850.0, 40.0, 2.1, 2.0, 2.2, 2.1, 2.0, 2.3]) == 2
    assert warmup_steps([2.0, 2.1, 2.0, 2.2, 2.1, 2.0]) == 0
    assert warmup_steps([2.6, 2.1, 2.0, 2.2, 2.1, 2.0]) == 0  # a little slow is not warm-up
    assert warmup_steps([9.0, 9.0, 9.0, 9.0, 1.0, 1.0, 1.0, 1.0]) == 4  # never more than half
    assert warmup_steps([100.0, 1.0]) == 0  # too short to tell
    assert warmup_steps([]) == 0


def test_a_run_slowed_by_interference_is_not_called() -> None:
    """Interference only adds time: a run whose steps were nearly all hit (a busy machine) has its low quantile
    far above its fastest step, so one run cannot vouch for the change; the same program's quiet run can."""
    rng = np.random.default_rng(14)
    quiet = rng.lognormal(0.0, 0.02, 60)
    busy = rng.lognormal(0.0, 0.02, 60)
    busy[rng.random(60) < 0.93] += 2.0  # a scheduler slice lost in most steps
    v = compare_runs([quiet], [busy])
    assert v.effect > 1.0 and not v.significant and v.detectable_change > v.effect
    assert "cannot be told from this run's step-to-step noise" in v.reason
    assert compare_runs([quiet], [busy * 1.0 + 0.0], quantile=0.5).significant is False


def test_median_mode_is_available() -> None:
    rng = np.random.default_rng(15)
    a, b = rng.lognormal(0.0, 0.02, 40), rng.lognormal(0.4, 0.02, 40)
    v = compare_runs([a], [b], quantile=0.5)
    assert v.significant and "median step" in v.reason
    assert v.effect == pytest.approx(np.median(b) / np.median(a) - 1)


def test_an_absolute_floor_guards_tiny_values_in_one_run_mode_only() -> None:
    rng = np.random.default_rng(16)
    a = [rng.lognormal(np.log(10.0), 0.01, 40)]  # 10 units per step, tight
    b = [rng.lognormal(np.log(15.0), 0.01, 40)]  # +50 %: +5 units
    assert compare_runs(a, b).significant
    v = compare_runs(a, b, min_abs_change=50.0)
    assert not v.significant and v.detectable_change == pytest.approx(50.0 / np.quantile(a[0], 0.1))
    runs_a = [rng.lognormal(np.log(10.0), 0.01, 40) for _ in range(4)]
    runs_b = [rng.lognormal(np.log(15.0), 0.01, 40) for _ in range(4)]
    assert compare_runs(runs_a, runs_b, min_abs_change=50.0).significant  # the run level sees drift itself


def test_long_series_are_bootstrapped_with_bounded_work() -> None:
    from launchtrace.analysis import verdicts

    assert verdicts._resample_count(60) == verdicts._BOOTSTRAP
    assert verdicts._resample_count(10**7) == 200  # still resolves p = 0.005
    rng = np.random.default_rng(17)
    values = rng.lognormal(0.0, 0.1, 50_000)
    got = verdicts._resampled_quantiles(values, 0.1, np.random.default_rng(1), 300)
    assert got.shape == (300,) and abs(float(np.median(got)) - float(np.quantile(values, 0.1))) < 0.01


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from([1.0, 2.0, 2.5, 1e9]), st.floats(1e-3, 1e12, allow_nan=False)),
        min_size=1,
        max_size=80,
    ),
    st.sampled_from([0.0, 0.05, 0.25, 1 / 3, 0.5, 0.9, 0.95, 0.99, 1.0]),
    st.integers(1, 40),
)
def test_counted_quantiles_are_numpys_to_the_bit(values: list[float], q: float, rows: int) -> None:
    """The bootstrap's quantile of each resample by counting ranks (no row sorted) is ``np.quantile``'s own,
    ties, one value, the ends and the two halves of the interpolation included."""
    from launchtrace.analysis.verdicts import _CountedQuantile

    v = np.asarray(values, dtype=float)
    drawn = np.random.default_rng(len(values)).integers(0, len(v), (rows, len(v)))
    expected = np.quantile(v[drawn], q, axis=1)
    assert np.array_equal(_CountedQuantile(v, q).of_rows(drawn), expected)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from([1.0, 2.0, 2.5, 1e9]), st.floats(1e-3, 1e12, allow_nan=False)),
        min_size=1,
        max_size=80,
    ),
    st.sampled_from([0.0, 0.05, 0.25, 1 / 3, 0.5, 0.9, 0.95, 0.99, 1.0]),
    st.integers(1, 40),
)
def test_counted_quantiles_by_counting_are_numpys_to_the_bit(values: list[float], q: float, rows: int) -> None:
    """The same by counting each row's draws of each rank (the way of a series too long for 16-bit ranks)."""
    from launchtrace.analysis import verdicts

    v = np.asarray(values, dtype=float)
    drawn = np.random.default_rng(len(values)).integers(0, len(v), (rows, len(v)))
    expected = np.quantile(v[drawn], q, axis=1)
    limit, verdicts._RADIX_RANKS = verdicts._RADIX_RANKS, 0
    try:
        counted = verdicts._CountedQuantile(v, q)
    finally:
        verdicts._RADIX_RANKS = limit
    assert counted.rank16 is None
    assert np.array_equal(counted.of_rows(drawn), expected)


@pytest.mark.parametrize("n", [65_536, 65_537])
def test_counted_quantiles_either_side_of_the_16_bit_ranks(n: int) -> None:
    """The longest series whose ranks fit 16 bits sorts them; one more value counts: both NumPy's answer."""
    from launchtrace.analysis.verdicts import _CountedQuantile

    rng = np.random.default_rng(n)
    v = np.round(rng.lognormal(0.0, 1.0, n), 2)  # ties
    drawn = rng.integers(0, n, (3, n))
    for q in (0.1, 0.5, 1.0):
        counted = _CountedQuantile(v, q)
        assert (counted.rank16 is not None) == (n <= 65_536)
        assert np.array_equal(counted.of_rows(drawn.copy()), np.quantile(v[drawn], q, axis=1))


def test_resampled_quantiles_with_a_nan_take_numpys_way() -> None:
    from launchtrace.analysis.verdicts import _resampled_quantiles

    v = np.array([1.0, math.nan, 3.0, 2.0])
    got = _resampled_quantiles(v, 0.5, np.random.default_rng(1), 50)
    expected = np.quantile(v[np.random.default_rng(1).integers(0, 4, (50, 4))], 0.5, axis=1)
    assert np.array_equal(got, expected, equal_nan=True)
