"""Sweeps (stats/sweeps.py): slopes recovered with honest CIs, the scaling verdict's rules
and direction, a flat A, the 2 x 2 interaction, and refused input."""

import math

import numpy as np
import pytest
from scipy import stats as st

from stats import methods, sweeps
from stats.sweeps import (
    INCONCLUSIVE,
    INTERACTION,
    NO_INTERACTION,
    SAME,
    SCALES_BETTER,
    SCALES_WORSE,
)

XS = (2.0, 4.0, 8.0)
R = 1000  # bootstrap replicates: enough for the tests, half the default


def side(rng, exponent, cv=0.02, xs=XS, n=24, scale=100.0):
    """A count axis: the primary grows like x**exponent, lognormal noise of `cv` per run."""
    return [(x, scale * x**exponent * np.exp(rng.normal(0, cv, n))) for x in xs]


def scale(a, b, **kw):
    kw = {"log_x": True, "lower_is_better": True, "threshold": 0.10, "n_resamples": R, **kw}
    return sweeps.scaling(a, b, **kw)


# -- slopes ----------------------------------------------------------------------------------


def test_square_root_growth_gives_exponent_half_with_a_ci_around_it():
    rng = np.random.default_rng(1)
    s = sweeps.slope(side(rng, 0.5, xs=(1, 2, 4, 8, 16)), log_x=True, log_y=True,
                     n_resamples=R, rng=rng)  # fmt: skip
    assert s.estimate == pytest.approx(0.5, abs=0.01)
    assert s.ci_low < 0.5 < s.ci_high
    assert s.ci_high - s.ci_low < 0.03  # CV 2%, 120 runs: the exponent to about +-0.01
    assert s.excludes_zero
    assert (s.n_points, s.n_runs) == (5, 120)


def test_the_estimate_is_scipys_theil_sen_on_every_run():
    rng = np.random.default_rng(2)
    points = side(rng, 0.3, cv=0.05, n=11)
    x = np.repeat(np.log(XS), 11)
    y = np.log(np.concatenate([v for _, v in points]))
    s = sweeps.slope(points, log_x=True, log_y=True, n_resamples=10)
    assert s.estimate == pytest.approx(st.theilslopes(y, x).slope, rel=1e-12)


def test_linear_scales_give_the_slope_in_units_per_axis_unit():
    rng = np.random.default_rng(3)
    points = [(x, 5.0 + 2.0 * x + rng.normal(0, 0.5, 24)) for x in (1.0, 3.0, 5.0, 7.0)]
    s = sweeps.slope(points, log_x=False, log_y=False, n_resamples=R, rng=rng)
    assert s.estimate == pytest.approx(2.0, abs=0.05)
    assert s.ci_low < 2.0 < s.ci_high


def test_a_flat_primary_has_a_ci_holding_zero():
    rng = np.random.default_rng(4)
    s = sweeps.slope(side(rng, 0.0), log_x=True, n_resamples=R, rng=rng)
    assert s.ci_low < 0 < s.ci_high
    assert not s.excludes_zero


def test_unequal_runs_per_point_are_resampled_within_each_point():
    rng = np.random.default_rng(5)
    points = [(2.0, 100 * np.exp(rng.normal(0, 0.02, 3))),
              (4.0, 100 * 2**0.4 * np.exp(rng.normal(0, 0.02, 40))),
              (8.0, 100 * 4**0.4 * np.exp(rng.normal(0, 0.02, 12)))]  # fmt: skip
    s = sweeps.slope(points, log_x=True, n_resamples=R, rng=rng)
    assert s.n_runs == 55
    assert s.ci_low < 0.4 < s.ci_high


def test_the_same_seed_gives_the_same_answer():
    rng = np.random.default_rng(6)
    a, b = side(rng, 0.3), side(rng, 0.3)
    assert scale(a, b, seed=11) == scale(a, b, seed=11)
    assert scale(a, b, seed=11).ratio_ci_low != scale(a, b, seed=12).ratio_ci_low


# -- the scaling verdict ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_a_over_a_is_never_worse_or_better(seed):
    rng = np.random.default_rng(100 + seed)
    s = scale(side(rng, 0.3), side(rng, 0.3), seed=seed)
    assert s.verdict == SAME  # CV 2%: B/A to about +-4%, inside +-10%
    assert s.ratio_ci_low is not None
    assert s.ratio_ci_high is not None
    assert 0.9 < s.ratio_ci_low < 1 < s.ratio_ci_high < 1.1


def test_a_b_exponent_20_percent_steeper_scales_worse_for_a_time():
    rng = np.random.default_rng(7)
    s = scale(side(rng, 0.3), side(rng, 0.36))
    assert s.verdict == SCALES_WORSE
    assert s.basis == sweeps.RATIO
    assert s.ratio == pytest.approx(1.2, abs=0.05)
    assert s.ratio_ci_low is not None
    assert s.ratio_ci_low > 1.1
    assert s.difference == pytest.approx(0.06, abs=0.015)
    assert "grows faster" in s.reason


def test_the_same_steeper_growth_of_a_throughput_scales_better():
    rng = np.random.default_rng(7)
    s = scale(side(rng, 0.3), side(rng, 0.36), lower_is_better=False)
    assert s.verdict == SCALES_BETTER


def test_a_shallower_b_scales_better_for_a_time():
    rng = np.random.default_rng(8)
    s = scale(side(rng, 0.3), side(rng, 0.2))
    assert s.verdict == SCALES_BETTER
    assert s.ratio == pytest.approx(2 / 3, abs=0.05)


def test_a_falling_throughput_that_falls_faster_in_b_scales_worse():
    """A's throughput falls along the axis (slope < 0); B/A > 1 means B falls faster: for a
    higher-is-better metric that is worse, though the ratio is above 1 as for a time."""
    rng = np.random.default_rng(9)
    s = scale(side(rng, -0.3), side(rng, -0.39), lower_is_better=False)
    assert s.ratio is not None
    assert s.ratio > 1.2
    assert s.difference < 0
    assert s.verdict == SCALES_WORSE
    assert "grows slower" in s.reason


def test_a_significant_but_small_difference_of_slopes_is_same_not_an_alert():
    rng = np.random.default_rng(10)
    s = scale(side(rng, 0.3, cv=0.005, n=48), side(rng, 0.309, cv=0.005, n=48))
    assert s.ratio_ci_low is not None
    assert s.ratio_ci_low > 1  # B is steeper...
    assert s.verdict == SAME  # ...by ~3%, inside the 10% band


def test_noise_wider_than_the_band_is_inconclusive():
    rng = np.random.default_rng(11)
    s = scale(side(rng, 0.3, cv=0.10), side(rng, 0.3, cv=0.10))
    assert s.verdict == INCONCLUSIVE
    assert "neither beyond nor inside +-10%" in s.reason


# -- a flat A: the ratio is undefined ----------------------------------------------------------


def test_a_flat_a_leaves_the_ratio_undefined_and_says_so():
    rng = np.random.default_rng(12)
    s = scale(side(rng, 0.0), side(rng, 0.15))
    assert s.a.ci_low < 0 < s.a.ci_high
    assert (s.ratio, s.ratio_ci_low, s.ratio_ci_high) == (None, None, None)
    assert s.basis == sweeps.DIFFERENCE
    assert s.verdict == INCONCLUSIVE
    assert "A's slope CI includes 0" in s.reason
    assert "ratio is undefined" in s.reason
    assert s.difference == pytest.approx(0.15, abs=0.02)  # reported anyway
    assert s.difference_ci_low > 0.1


def test_a_flat_a_is_decided_on_the_difference_when_a_slope_threshold_is_declared():
    rng = np.random.default_rng(12)
    a, b = side(rng, 0.0), side(rng, 0.15)
    assert scale(a, b, slope_threshold=0.05).verdict == SCALES_WORSE
    assert scale(a, b, slope_threshold=0.05, lower_is_better=False).verdict == SCALES_BETTER
    flat = scale(a, side(rng, 0.0), slope_threshold=0.05)
    assert (flat.basis, flat.verdict) == (sweeps.DIFFERENCE, SAME)
    # The difference exceeds 0 but the declared threshold is larger than it could be.
    assert scale(a, b, slope_threshold=0.5).verdict == SAME


def test_a_slope_threshold_does_not_replace_the_ratio_when_a_has_a_slope():
    rng = np.random.default_rng(13)
    s = scale(side(rng, 0.3), side(rng, 0.3), slope_threshold=1e-6)
    assert (s.basis, s.verdict) == (sweeps.RATIO, SAME)


# -- interaction -------------------------------------------------------------------------------


def cells(rng, planted=0.0, cv=0.02, n=24, main=0.03):
    runs = lambda m: m * np.exp(rng.normal(0, cv, n))  # noqa: E731
    return runs(100), runs(150), runs(100 * (1 + main)), runs(150 * (1 + main) * (1 + planted))


def test_a_planted_interaction_is_found_with_its_size_and_direction():
    rng = np.random.default_rng(20)
    r = sweeps.interaction(*cells(rng, 0.06), lower_is_better=True, threshold_pct=2.0,
                           n_resamples=R)  # fmt: skip
    assert r.verdict == INTERACTION
    assert r.estimate == pytest.approx(6.0, abs=1.5)
    assert r.ci_low > 2.0
    assert r.effect_0 == pytest.approx(3.0, abs=1.5)
    assert r.effect_1 == pytest.approx(9.2, abs=1.5)
    assert r.direction == "worse"
    assert "B is worse at level 1 than at level 0" in r.reason


def test_the_same_interaction_of_a_throughput_is_better():
    rng = np.random.default_rng(20)
    r = sweeps.interaction(*cells(rng, 0.06), lower_is_better=False, threshold_pct=2.0,
                           n_resamples=R)  # fmt: skip
    assert (r.verdict, r.direction) == (INTERACTION, "better")


def test_no_interaction_when_b_moves_alike_at_both_levels():
    rng = np.random.default_rng(21)
    r = sweeps.interaction(*cells(rng, cv=0.01), lower_is_better=True, threshold_pct=2.0,
                           n_resamples=R)  # fmt: skip
    assert r.verdict == NO_INTERACTION
    assert -2.0 < r.ci_low < 0 < r.ci_high < 2.0
    assert r.effect_0 == pytest.approx(3.0, abs=1)  # a main effect is not an interaction


def test_an_interaction_smaller_than_the_noise_is_inconclusive():
    rng = np.random.default_rng(22)
    r = sweeps.interaction(*cells(rng, cv=0.10), lower_is_better=True, threshold_pct=2.0,
                           n_resamples=R)  # fmt: skip
    assert r.verdict == INCONCLUSIVE


@pytest.mark.parametrize("seed", range(6))
def test_interaction_a_over_a_never_alarms_at_a_threshold_above_the_noise(seed):
    rng = np.random.default_rng(200 + seed)
    r = sweeps.interaction(*cells(rng), lower_is_better=True, threshold_pct=5.0,
                           n_resamples=R, seed=seed)  # fmt: skip
    assert r.verdict == NO_INTERACTION


# -- refused input -----------------------------------------------------------------------------


def test_fewer_than_two_distinct_axis_values_are_refused():
    v = np.full(24, 100.0)
    with pytest.raises(ValueError, match="1 distinct axis value"):
        sweeps.slope([(2.0, v)], log_x=True)
    with pytest.raises(ValueError, match="appears twice"):
        sweeps.slope([(2.0, v), (2.0, v)], log_x=True)


def test_a_point_with_one_run_is_refused():
    with pytest.raises(ValueError, match=r"x=4\.0: 1 values, at least 2 needed"):
        sweeps.slope([(2.0, [1.0, 2.0]), (4.0, [3.0])], log_x=True)


def test_values_not_above_zero_are_refused_on_a_log_scale_only():
    points = [(2.0, [1.0, 0.0]), (4.0, [3.0, 4.0])]
    with pytest.raises(methods.StatsInputError, match=r"x=2\.0: 1 value\(s\) <= 0 on a log"):
        sweeps.slope(points, log_x=True, log_y=True)
    assert math.isfinite(sweeps.slope(points, log_x=True, log_y=False, n_resamples=10).estimate)
    with pytest.raises(ValueError, match="axis value <= 0 on a log scale"):
        sweeps.slope([(0.0, [1.0, 2.0]), (4.0, [3.0, 4.0])], log_x=True)


def test_nan_is_refused():
    with pytest.raises(ValueError, match="1 NaN value"):
        sweeps.slope([(2.0, [1.0, math.nan]), (4.0, [3.0, 4.0])], log_x=True)
    with pytest.raises(ValueError, match="axis value is not finite"):
        sweeps.slope([(math.nan, [1.0, 2.0]), (4.0, [3.0, 4.0])], log_x=False)
    ok = np.ones(5)
    with pytest.raises(ValueError, match="cell B1: 1 NaN"):
        sweeps.interaction(ok, ok, ok, [1.0, math.nan], lower_is_better=True,
                           threshold_pct=2.0)  # fmt: skip
    with pytest.raises(ValueError, match=r"cell A0: 1 value\(s\) <= 0"):
        sweeps.interaction([0.0, 1.0], ok, ok, ok, lower_is_better=True, threshold_pct=2.0)


def test_thresholds_and_design_out_of_range_are_refused():
    rng = np.random.default_rng(30)
    a = side(rng, 0.3, n=3)
    with pytest.raises(ValueError, match="threshold 0"):
        scale(a, a, threshold=0)
    with pytest.raises(ValueError, match="slope_threshold -1"):
        scale(a, a, slope_threshold=-1)
    with pytest.raises(ValueError, match=r"alpha 1\.5"):
        scale(a, a, alpha=1.5)
    with pytest.raises(ValueError, match="n_resamples 0"):
        sweeps.interaction([1, 2], [1, 2], [1, 2], [1, 2], lower_is_better=True,
                           threshold_pct=2.0, n_resamples=0)  # fmt: skip


def test_median_ci_is_the_binomial_order_statistics_and_the_range_when_too_few():
    x = np.arange(1.0, 25.0)  # 24 runs: P(Bin(24, 1/2) <= 6) = 0.0113, <= 7 is 0.032
    assert sweeps.median_ci(x[::-1]) == (7.0, 18.0)
    assert sweeps.median_ci(np.arange(1.0, 6.0)) == (1.0, 5.0)  # n 5: no k reaches 95%
    assert sweeps.median_ci(np.arange(1.0, 7.0)) == (1.0, 6.0)  # n 6: k = 1, P = 0.0156
    with pytest.raises(ValueError, match=r"NaN|finite"):
        sweeps.median_ci([1.0, float("nan"), 2.0])
