"""The secondary family (STATS.md v3): linear spending, a permutation count raised wherever
a first-look BH step needs it, its own level in the smallest detectable shift; and the
tails' verdicts with and without a CI."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as st

from stats import methods, sequential
from stats.battery import analyse
from stats.design import Design, Resolve
from stats.inputs import MetricInput
from stats.tests.conftest import _design, _metric, _num
from stats.verdicts import (
    INCONCLUSIVE,
    REGRESSION,
    SIGNIFICANT,
    SMALL,
    StatResult,
    decide,
)


def test_the_secondaries_spend_linearly():
    design = Design()
    nominal = [design.secondary_boundary(k) for k in (1, 2, 3, 4)]
    # alpha t at the first look: .005 x 24/96; the steep spending gave .005/64 there.
    assert nominal[0] == pytest.approx(0.005 / 4)
    assert nominal == sorted(nominal)
    assert nominal[3] < 0.005
    # Primaries keep alpha t^3.
    assert design.alpha_at(1) == pytest.approx(0.045 / 64)


def test_49_secondaries_are_all_resolved_at_the_first_look():
    # Six benchmarks' worth of secondary statistics: 49 besides the primary. Two of them
    # have a real 4% shift (CV 2%). With the steep spending the first BH step (7.8e-5/49)
    # was below 1/10,000 and nothing was raised: no secondary could cross at look 1.
    rng = np.random.default_rng(5)
    metrics = [_metric(rng, cv=0.02)] + [
        _metric(rng, cv=0.02, shift=0.04 if k < 2 else 0.0, primary=False, name=f"v{k}")
        for k in range(49)
    ]
    design = _design()
    resolve = Resolve.of(metrics, design, 1)
    assert resolve.secondary == pytest.approx(0.005 / 4 / 49)
    res = analyse(metrics, design)
    secondaries = [r for r in res.results if not r.is_primary]
    assert len(secondaries) == 49
    boundary = design.secondary_boundary(1)
    for r in secondaries:
        if r.details["p_method"] == methods.EXACT:  # complete separation: exact, resolved
            continue
        b = r.details["p_permutations"]
        assert isinstance(b, int)
        # Every p that could meet a BH step (p <= the family's boundary) rests on enough
        # relabellings for >= 10 expected beyond the first step; the others' first count
        # is above 10, which resolves every step above their p.
        if r.p_value <= boundary:
            assert b * resolve.secondary >= methods.EXCEEDANCES_AT_BOUNDARY
        else:
            assert r.p_value * (b + 1) - 1 > methods.EXCEEDANCES_AT_BOUNDARY
    shifted = [r for r in secondaries if r.metric in ("v0", "v1")]
    assert [r.details["p_method"] for r in shifted] == [methods.PERMUTATION] * 2
    assert [r.details["p_permutations"] for r in shifted] == [
        methods.permutations_to_resolve(resolve.secondary)] * 2  # fmt: skip
    assert [(r.crossed, r.verdict) for r in shifted] == [(True, REGRESSION)] * 2


def test_a_p_with_few_relabellings_beyond_is_raised_even_above_10x_the_boundary():
    # A statistic whose p is ~3e-4: 9,999 relabellings put ~3 beyond it. The first BH
    # step of 49 secondaries (2.55e-5) is 10x below that, so the old rule left it at
    # 9,999, though a BH step near 3e-4 (the 12th of 49) needs more.
    cut = st.norm.isf(1.5e-4)  # P(|Z| >= cut) = 3e-4
    draws = np.random.default_rng(1)

    def statistic(labels: np.ndarray) -> np.ndarray:
        # Row 0 (the observed labels) at the cut; the relabellings, standard normal draws.
        z = np.abs(draws.standard_normal(labels.shape[0]))
        z[0] = cut
        return z

    first_step = 0.005 / 4 / 49
    p = methods.adaptive_perm_p(statistic, 24, 24, n_perm=9999, resolve=first_step,
                                rng=np.random.default_rng(2))  # fmt: skip
    assert p.n_perm == methods.permutations_to_resolve(first_step) == 392_000
    assert p.p_value == pytest.approx(3e-4, rel=0.25)


def test_a_secondarys_smallest_detectable_shift_is_at_its_own_familys_level(rng):
    primary = _metric(rng, cv=0.03)
    secondary = MetricInput(**{**primary.__dict__, "name": "again", "primary": False})
    design = _design(max_runs=24)
    by = {r.metric: r for r in analyse([primary, secondary], design).results}
    sd = _num(by["kernel_to_init_ms"], "sd_within")
    assert _num(by["kernel_to_init_ms"], "smallest_detectable_shift") == pytest.approx(
        sequential.smallest_detectable_shift(sd, 24, 24, alpha=design.alpha_at(1))
    )
    assert _num(by["again"], "smallest_detectable_shift") == pytest.approx(
        sequential.smallest_detectable_shift(sd, 24, 24, alpha=design.secondary_boundary(1))
    )
    assert _num(by["again"], "smallest_detectable_shift") > _num(
        by["kernel_to_init_ms"], "smallest_detectable_shift")  # fmt: skip


# --- tails -----------------------------------------------------------------------------------


def _tail(shift: float, ci: tuple[float, float] | None, *, crossed: bool = True) -> StatResult:
    return StatResult(
        benchmark="sync-rcu-latency", metric="writer_duration", unit="ms", statistic="p99",
        is_primary=False, look=1, n_a=24, n_b=24, median_a=6.0,
        median_b=6.0 * (1 + shift / 100), shift=shift, ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None, relative=True, p_value=1e-4, p_mannwhitney=None,
        p_median=None, prob_b_gt_a=None, cliffs_delta=None, threshold=2.0,
        lower_is_better=True, crossed=crossed, details={"boundary": 1.25e-3},
    )  # fmt: skip


@pytest.mark.parametrize("shift", [0.5, 1.5, 30.0, -30.0])
def test_a_tail_without_a_ci_is_significant_with_its_size_not_estimated(shift):
    # Never significant-but-small (nor sized at all) from a point estimate.
    r = _tail(shift, None)
    decide(r, True)
    assert r.verdict == SIGNIFICANT == "significant-size-not-estimated"
    r = _tail(shift, None, crossed=False)
    decide(r, True)
    assert r.verdict == INCONCLUSIVE


@pytest.mark.parametrize(
    ("ci", "verdict"),
    [((2.5, 4.0), REGRESSION), ((0.5, 1.5), SMALL), ((0.5, 3.0), REGRESSION)],
)
def test_a_tail_with_a_ci_is_sized_by_it(ci, verdict):
    r = _tail(1.0 if ci[1] < 2 else 3.0, ci)
    decide(r, True)
    assert r.verdict == verdict


def test_the_max_of_a_clear_tail_regression_is_significant_not_sized(rng):
    def runs(first: int, factor: float) -> list:
        return [dataclasses.replace(r, samples=tuple(rng.lognormal(math.log(6 * factor), 0.1, 30)))
                for r in _metric(rng, n=24).runs_a]  # fmt: skip

    m = MetricInput("sync-rcu-latency", "writer_duration", "ms", True, True, True,
                    runs(0, 1.0), runs(1, 1.3))  # fmt: skip
    by = {r.statistic: r for r in analyse([m], _design(max_runs=24)).results}
    assert by["max"].crossed
    assert by["max"].verdict == SIGNIFICANT
    assert by["p99"].verdict == REGRESSION  # it has a CI at the look the comparison ends
