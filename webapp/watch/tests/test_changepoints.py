"""stats.changepoints on hand-made histories (pure: no database)."""

import math

import numpy as np
import pytest

from stats import changepoints as C


def noisy(levels: list[float], seed: int = 0, sd: float = 0.005) -> list[float]:
    rng = np.random.default_rng(seed)
    return [lv * (1 + rng.normal(0, sd)) for lv in levels]


def test_step_found_at_the_first_head_after_it():
    values = noisy([100.0] * 30 + [105.0] * 30)
    found = C.detect(values)
    assert [c.index for c in found] == [30]
    cp = found[0]
    assert cp.before_median == pytest.approx(100.0, rel=0.01)
    assert cp.after_median == pytest.approx(105.0, rel=0.01)
    assert cp.change_pct == pytest.approx(5.0, abs=0.5)


def test_two_steps_both_found():
    found = C.detect(noisy([100.0] * 20 + [105.0] * 20 + [100.0] * 20, seed=1))
    assert [c.index for c in found] == [20, 40]
    assert found[0].change_pct > 0 > found[1].change_pct


@pytest.mark.parametrize("seed", range(5))
def test_flat_noisy_series_has_none(seed):
    assert C.detect(noisy([100.0] * 60, seed=seed, sd=0.013)) == []


def test_constant_series_has_none():
    assert C.detect([7.0] * 40) == []


def test_noise_free_step_is_found():
    assert [c.index for c in C.detect([1.0] * 10 + [2.0] * 10)] == [10]


def test_too_few_heads_have_none():
    assert C.detect([100.0, 100.0, 100.0, 150.0, 150.0]) == []
    assert C.detect([]) == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_refused(bad):
    with pytest.raises(ValueError, match="NaN or inf"):
        C.detect([1.0] * 10 + [bad] + [1.0] * 10)


def test_values_not_all_positive_stay_on_their_scale():
    found = C.detect(noisy([0.0] * 1 + [10.0] * 19, seed=2) + noisy([20.0] * 20, seed=3))
    assert [c.index for c in found] == [20]
    assert found[0].change_pct == pytest.approx(100.0, abs=5)


@pytest.mark.parametrize(
    ("change_pct", "lower_is_better", "worse"),
    [(3.0, True, True), (-3.0, True, False), (3.0, False, False), (-3.0, False, True)],
)
def test_direction(change_pct, lower_is_better, worse):
    assert C.is_regression(change_pct, lower_is_better) is worse


def test_noise_scale_is_robust_to_a_step():
    x = np.array(noisy([100.0] * 30 + [110.0] * 30, sd=0.01))
    flat = np.array(noisy([100.0] * 60, sd=0.01))
    assert C.noise_scale(x) == pytest.approx(C.noise_scale(flat), rel=0.5)


def test_confirmed_once_the_shorter_histories_agree():
    values = noisy([100.0] * 30 + [105.0] * 30)
    assert [c.index for c in C.confirmed(values)] == [30]
    # 4 heads after the step: this search finds it, the shorter ones not yet all
    early = values[:34]
    assert [c.index for c in C.detect(early)] == [30]
    assert C.confirmed(early) == []
    # 4 pushes later, the last 5 searches agree
    assert [c.index for c in C.confirmed(values[:38])] == [30]


def test_agree_within_two_heads():
    def found(*idx: int) -> list[C.ChangePointFound]:
        return [C.ChangePointFound(i, 1.0, 2.0, 100.0) for i in idx]

    assert [c.index for c in C.agree(found(30), [found(31), found(28)])] == [30]
    assert C.agree(found(30), [found(31), found(27)]) == []
    assert C.agree(found(30), [found(30), []]) == []


def test_confirmed_refuses_nan_even_when_short():
    with pytest.raises(ValueError, match="NaN or inf"):
        C.confirmed([1.0, math.nan])
