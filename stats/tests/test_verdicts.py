"""Verdicts, multiplicity and the sequential policy of the engine: the looks and their
boundaries, the verdict rules, failure rates, host contention and Holm's steps."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as st

from stats import methods, sequential
from stats.battery import analyse
from stats.design import Design, adjust
from stats.inputs import BenchmarkFailures, RunSamples, contention
from stats.tests.conftest import _design, _metric, _num, _values
from stats.verdicts import (
    IMPROVEMENT,
    INCONCLUSIVE,
    NO_CHANGE,
    REGRESSION,
    RELIABILITY,
    SEVERITY,
    SMALL,
    StatResult,
    TooFewRuns,
    decide,
)


def test_refuses_fewer_than_24_runs(rng):
    with pytest.raises(TooFewRuns, match="23 runs per side; at least 24"):
        analyse([_metric(rng, n=23)], _design())
    with pytest.raises(TooFewRuns, match="below the floor of 24"):
        Design(min_runs=4, max_runs=8, step=4)


def test_looks_and_boundaries():
    design = Design()
    assert design.looks == (24, 48, 72, 96)
    # Alpha .05 split: .045 for the primary statistics (Holm), .005 for the others (BH).
    assert (design.primary_alpha, design.secondary_alpha) == pytest.approx((0.045, 0.005))
    # Power spending alpha t^3: a lone primary's first look spends .045/64, nominal p
    # 7.03e-4 (resolvable by 14,223 permutations, where O'Brien-Fleming's 8.9e-5 at .05 was
    # not); then .00519, .0164, .0381 (by the grid integration).
    nominal = [design.alpha_at(k) for k in (1, 2, 3, 4)]
    assert nominal == pytest.approx([0.045 / 64, 0.005189, 0.01644, 0.03808], rel=0.01)
    secondary = [design.alpha_at(k, design.secondary_alpha) for k in (1, 2, 3, 4)]
    assert secondary == pytest.approx([0.005 / 64, 5.662e-4, 0.001732, 0.00387], rel=0.01)
    # Holm's local level .04 / 2 has its own spending, not the nominal halved.
    assert design.alpha_at(1, 0.02) == pytest.approx(0.02 / 64)
    assert design.alpha_at(4, 0.025) == pytest.approx(0.0205, rel=0.01)
    assert [design.look_at(n) for n in (24, 47, 48, 96)] == [1, 1, 2, 4]


def test_clear_regression_stops_at_the_first_look(rng):
    res = analyse([_metric(rng, shift=0.10)], _design())
    (primary,) = [r for r in res.results if r.is_primary]
    assert primary.verdict == REGRESSION
    assert primary.adjustment == "holm"
    assert primary.shift == pytest.approx(10, abs=3)
    low, shift, high = primary.ci_low, primary.shift, primary.ci_high
    assert low is not None
    assert shift is not None
    assert high is not None
    assert low < shift < high
    assert (res.need_more_runs, res.look, res.verdict) == (0, 1, REGRESSION)


def test_improvement_when_higher_is_better(rng):
    res = analyse([_metric(rng, shift=0.10, lower_is_better=False)], _design())
    assert res.results[0].verdict == IMPROVEMENT


def test_small_shift_at_first_look_asks_for_the_next_look(rng):
    res = analyse([_metric(rng, shift=0.01)], _design())
    assert (res.results[0].verdict, res.results[0].pending) == (INCONCLUSIVE, True)
    assert res.need_more_runs == 24


def test_inconclusive_at_the_last_look_states_the_detectable_shift(rng):
    res = analyse([_metric(rng, n=96, shift=0.01, cv=0.10)], _design())
    r = res.results[0]
    assert (r.verdict, r.pending, res.need_more_runs) == (INCONCLUSIVE, False, 0)
    assert any("smallest detectable shift" in w for w in r.warnings)
    assert r.details["smallest_detectable_shift"] == pytest.approx(4.2, abs=0.8)


def test_tight_data_and_no_change(rng):
    res = analyse([_metric(rng, shift=0.0, cv=0.003)], _design())
    assert res.results[0].verdict == NO_CHANGE
    assert res.need_more_runs == 0


def test_significant_but_small(rng):
    res = analyse([_metric(rng, shift=0.01, cv=0.001)], _design())
    assert res.results[0].verdict == SMALL


def test_holm_across_benchmarks(rng):
    a = _metric(rng, shift=0.10)
    b = _metric(rng, shift=0.0, benchmark="smt-toggle", name="off_ms")
    res = analyse([a, b], _design())
    primaries = [r for r in res.results if r.is_primary]
    assert len(primaries) == 2
    assert all(r.adjustment == "holm" for r in primaries)
    assert all(r.p_adjusted >= r.p_value for r in primaries)


def test_few_runs_only_with_the_test_override(rng):
    design = _design(min_runs=4, max_runs=8, step=4, allow_few_runs=True)
    assert design.looks == (4, 8)
    res = analyse([_metric(rng, n=4, shift=0.5)], design)
    assert res.look == 1


def test_interim_no_change_needs_the_repeated_ci(rng):
    # CV 2% at 24 runs: the 95% CI (about +-1.1%) sits inside +-2%, the look-1 repeated CI
    # (level 1 - 8.5e-5, about +-2.3%) does not: keep going. A design of one look has
    # alpha 0.05 at it, so its repeated CI is the 95% CI, and that is inside.
    metric = _metric(rng, shift=0.0, cv=0.02)
    interim = analyse([metric], _design()).results[0]
    assert interim.ci_low is not None
    assert interim.ci_high is not None
    assert -2 < interim.ci_low < interim.ci_high < 2
    assert (interim.verdict, interim.pending) == (INCONCLUSIVE, True)
    final = analyse([metric], _design(max_runs=24)).results[0]
    assert final.verdict == NO_CHANGE


# --- failure rates ----------------------------------------------------------------------


def _failures(bench="boot-time", fa=0, fb=0, n=24, code="panic"):
    def side(f):
        return methods.FailureCounts(n - f, ((code, f),) if f else ())

    return BenchmarkFailures(bench, side(fa), side(fb))


def test_a_failure_excess_in_b_is_the_comparisons_verdict_whatever_the_metrics_say(rng):
    # The metric asks for the next look (1% shift); 0/24 vs 7/24 panics answers first.
    res = analyse([_metric(rng, shift=0.01)], _design(), [_failures(fb=7)])
    assert (res.verdict, res.need_more_runs) == (RELIABILITY, 0)
    first = res.results[0]  # reliability leads the report order
    assert (first.metric, first.statistic, first.verdict) == (
        "failure_rate",
        "boschloo",
        RELIABILITY,
    )
    assert first.details["p_fisher"] == pytest.approx(math.comb(24, 7) / math.comb(48, 7))
    assert first.p_value < _num(first, "p_fisher")  # Boschloo: never above Fisher's
    assert first.details["b"] == {"attempts": 24, "ok": 17, "kernel_failures": 7,
                                  "host_failures": 0, "by_outcome": {"panic": 7}}  # fmt: skip
    assert first.details["p_method"] == "exact"
    assert any("B's kernel failed 7 of 24 boots" in w for w in first.warnings)
    assert SEVERITY[0] == RELIABILITY


def test_6_of_24_failures_are_flagged_at_the_first_look(rng):
    # STATS.md v2: 0/24 vs 6/24 is flagged. Boschloo p 0.0066 <= the first look's 0.0075.
    res = analyse([_metric(rng, shift=0.10)], _design(), [_failures(fb=6)])
    row = next(r for r in res.results if r.statistic == "boschloo")
    assert row.p_value == pytest.approx(0.0066457, abs=1e-6)
    assert row.details["p_fisher"] == pytest.approx(0.010968, abs=1e-6)  # would miss .01
    assert (row.details["alpha"], row.verdict) == (0.0075, RELIABILITY)
    assert res.verdict == RELIABILITY


def test_the_failure_levels_sum_to_001_over_the_looks(rng):
    # Three quarters at the first look, the rest spread: 6/48 vs 0/48 at look 2 is not
    # flagged at .01/12, and the metric's regression stays the verdict.
    assert [methods.reliability_level(k, 4) for k in (1, 2, 3, 4)] == pytest.approx(
        [0.0075, 0.01 / 12, 0.01 / 12, 0.01 / 12]
    )
    assert sum(methods.reliability_level(k, 4) for k in (1, 2, 3, 4)) == pytest.approx(0.01)
    res = analyse([_metric(rng, n=48, shift=0.10)], _design(), [_failures(fb=6, n=48)])
    row = next(r for r in res.results if r.statistic == "boschloo")
    assert (row.look, row.details["alpha"]) == (2, pytest.approx(0.01 / 12))
    assert row.verdict == NO_CHANGE
    assert res.verdict == REGRESSION  # the metric's, not the failure row's


def test_host_failures_never_count_against_the_kernel(rng):
    res = analyse([_metric(rng, shift=0.0, cv=0.003)], _design(),
                  [_failures(fb=12, code="infra-error")])  # fmt: skip
    row = next(r for r in res.results if r.statistic == "boschloo")
    assert (row.verdict, row.p_value, row.n_b) == (NO_CHANGE, 1.0, 12)
    assert row.details["b"] == {"attempts": 12, "ok": 12, "kernel_failures": 0,
                                "host_failures": 12, "by_outcome": {"infra-error": 12}}  # fmt: skip
    assert res.verdict == NO_CHANGE


# --- v2 verdict rules: the threshold on the look's repeated CI ------------------------------


def _stat(shift, repeated, *, p=0.001, plain=None, lower_is_better=True, contended=None):
    """A run-level result with its look's repeated CI `repeated`, and a plain 95% CI
    `plain` (default: the repeated one narrowed by half) that the rules must not use."""
    low, high = repeated
    if plain is None:
        plain = (shift - (shift - low) / 2, shift + (high - shift) / 2)
    details = {"repeated_ci": list(repeated), "smallest_detectable_shift": 1.5}
    if contended is not None:
        details["contended"] = contended
    return StatResult(
        benchmark="boot-time", metric="kernel_to_init_ms", unit="ms", statistic="value",
        is_primary=True, look=1, n_a=24, n_b=24, median_a=1000.0,
        median_b=1000.0 * (1 + shift / 100), shift=shift, ci_low=plain[0], ci_high=plain[1],
        relative=True, p_value=p, p_mannwhitney=p, p_median=None, prob_b_gt_a=None,
        cliffs_delta=None, threshold=2.0, lower_is_better=lower_is_better, details=details,
        p_adjusted=p, adjustment="holm",
    )  # fmt: skip


def _decided(r, *, alpha=0.01, final=False, imbalance=0.1):
    r.details["boundary"] = alpha  # as adjust() leaves a result with one primary metric
    r.crossed = r.p_adjusted <= alpha
    decide(r, final, imbalance)
    return r


UNCERTAIN = "size uncertain: the estimate is below the threshold; the interval reaches it"


@pytest.mark.parametrize(
    ("shift", "repeated", "lower_is_better", "verdict", "uncertain"),
    [
        # repeated CI entirely below the threshold, in the direction of the change
        (1.0, (0.5, 1.5), True, SMALL, False),
        (-1.0, (-1.5, -0.5), True, SMALL, False),
        (1.0, (0.5, 1.5), False, SMALL, False),
        # crossing it: the change may reach the threshold (estimate below it: uncertain)
        (1.5, (0.5, 2.5), True, REGRESSION, True),
        (-1.5, (-2.5, -0.5), True, IMPROVEMENT, True),
        (1.5, (0.5, 2.5), False, IMPROVEMENT, True),
        (-1.5, (-2.5, -0.5), False, REGRESSION, True),
        (2.5, (1.5, 3.5), True, REGRESSION, False),
        (1.9, (0.5, 2.0), True, REGRESSION, True),  # the end on the threshold reaches it
        # entirely beyond it
        (3.0, (2.5, 3.5), True, REGRESSION, False),
        (-3.0, (-3.5, -2.5), True, IMPROVEMENT, False),
        (3.0, (2.5, 3.5), False, IMPROVEMENT, False),
        (-3.0, (-3.5, -2.5), False, REGRESSION, False),
    ],
)
def test_a_significant_change_is_sized_by_its_repeated_ci(
    shift, repeated, lower_is_better, verdict, uncertain
):
    r = _decided(_stat(shift, repeated, lower_is_better=lower_is_better))
    assert (r.verdict, r.pending) == (verdict, False)
    assert (UNCERTAIN in r.warnings) == uncertain


def test_the_plain_ci_inside_the_threshold_does_not_make_a_change_small():
    # 95% CI (0.9, 1.9) would say "small"; the look's repeated CI reaches 2%.
    r = _decided(_stat(1.4, (0.5, 2.5), plain=(0.9, 1.9)))
    assert r.verdict == REGRESSION
    assert UNCERTAIN in r.warnings


def test_a_significant_change_whose_repeated_ci_straddles_0_beyond_the_threshold_waits():
    r = _decided(_stat(1.0, (-2.5, 1.5)))
    assert (r.verdict, r.pending) == (INCONCLUSIVE, True)


@pytest.mark.parametrize("final", [False, True])
def test_no_meaningful_change_needs_the_repeated_ci_inside_the_threshold_at_every_look(final):
    inside = _decided(_stat(0.2, (-1.5, 1.9), p=0.5), final=final)
    assert (inside.verdict, inside.pending) == (NO_CHANGE, False)
    # The plain 95% CI (-0.5, 1.5) is inside +-2%; the repeated one is not: at an interim
    # look, more runs; at the last look (which used the plain CI before v2), inconclusive.
    r = _decided(_stat(0.2, (-2.1, 1.9), p=0.5, plain=(-0.5, 1.5)), final=final)
    assert (r.verdict, r.pending) == (INCONCLUSIVE, not final)
    assert "inconclusive at 24+24 runs: smallest detectable shift 1.50% (80% power)" in r.warnings


def test_the_last_look_of_a_sequential_design_uses_its_repeated_ci():
    # 96 runs per side at the normal quantiles of a lognormal CV 4%, B = A x e^0.0080: the
    # HL shift is exactly 0.80%, Brunner-Munzel p ~0.18 (no boundary crossed). The plain
    # 95% CI (-0.38%, 1.99%) is inside +-2% (the pre-v2 rule: no meaningful change); the
    # last look's repeated CI (level 1 - 0.0381: -0.44%, 2.05%) is not: inconclusive, done.
    # (Both CIs invert the permutation test, relabellings seeded from the values' bytes,
    # whose last bits depend on the CPU's exp and ppf: the ends moved by up to 0.04 points
    # between the machine the figures were taken on and an AMD EPYC one, the decisions
    # not. So the ends are asserted to that, and the decisions exactly.)
    z = st.norm.ppf((np.arange(96) + 0.5) / 96)[(np.arange(96) * 37) % 96]  # no drift
    a = 1000 * np.exp(0.04 * z)
    res = analyse([_values(a, a * math.exp(0.0080))], _design())
    r = res.results[0]
    assert (r.look, res.need_more_runs) == (4, 0)
    assert r.details["alpha_look"] == pytest.approx(0.03808, abs=1e-5)
    assert r.shift == pytest.approx(100 * math.expm1(0.0080))
    assert r.ci_low == pytest.approx(-0.379, abs=0.05)
    assert r.ci_high == pytest.approx(1.994, abs=0.05)
    assert r.ci_low is not None
    assert r.ci_high is not None
    assert -2 < r.ci_low < r.ci_high < 2  # the plain CI: inside the threshold
    repeated = r.details["repeated_ci"]
    assert isinstance(repeated, list)
    assert repeated == [pytest.approx(-0.437, abs=0.05), pytest.approx(2.046, abs=0.05)]
    assert repeated[1] > 2  # the repeated CI: not inside
    assert r.p_adjusted > 0.1
    assert (r.verdict, r.pending) == (INCONCLUSIVE, False)


# --- host contention holds back a regression or improvement -------------------------------


def test_contention_that_differs_between_sides_holds_back_a_regression():
    counts = {"a": [0, 24], "b": [12, 24]}
    r = _decided(_stat(5.0, (3.0, 7.0), contended=counts))
    assert (r.verdict, r.pending) == (INCONCLUSIVE, True)
    assert r.details["held_back"] == REGRESSION
    assert any("0% of A's runs (0 of 24) and 50% of B's (12 of 24)" in w for w in r.warnings)
    last = _decided(_stat(-5.0, (-7.0, -3.0), contended=counts), final=True)
    assert (last.verdict, last.pending, last.details["held_back"]) == (
        INCONCLUSIVE,
        False,
        IMPROVEMENT,
    )


def test_contention_within_the_imbalance_or_unmeasured_leaves_the_verdict():
    # 2 of 24 is 8.3% apart from 0 of 24: within the 10% allowed.
    close = _decided(_stat(5.0, (3.0, 7.0), contended={"a": [0, 24], "b": [2, 24]}))
    assert close.verdict == REGRESSION
    assert _decided(_stat(5.0, (3.0, 7.0))).verdict == REGRESSION  # not measured
    # Only regressions and improvements are held: a small change stays small.
    small = _decided(_stat(1.0, (0.5, 1.5), contended={"a": [0, 24], "b": [24, 24]}))
    assert small.verdict == SMALL


def test_contention_counts_measured_runs_only():
    def runs(flags):
        return [RunSamples(i, (1.0,), f) for i, f in enumerate(flags)]

    assert contention(runs([True, False, None]), runs([True, True])) == {
        "contended": {"a": [1, 2], "b": [2, 2]}
    }
    assert contention(runs([None, None]), runs([True])) == {}


def test_a_clear_regression_on_a_contended_side_asks_for_quieter_runs(rng):
    m = _metric(rng, shift=0.10)
    busy = [dataclasses.replace(r, contended=i % 2 == 0) for i, r in enumerate(m.runs_b)]
    quiet = [dataclasses.replace(r, contended=False) for r in m.runs_a]
    held = dataclasses.replace(m, runs_a=quiet, runs_b=busy)
    res = analyse([held], _design())
    r = res.results[0]
    assert r.details["contended"] == {"a": [0, 24], "b": [12, 24]}
    assert (r.verdict, r.pending, res.need_more_runs, res.verdict) == (
        INCONCLUSIVE,
        True,
        24,
        INCONCLUSIVE,
    )
    # The same data with quiet runs on both sides, or a design that allows the imbalance.
    calm = dataclasses.replace(held, runs_b=[dataclasses.replace(r, contended=False)
                                             for r in busy])  # fmt: skip
    assert analyse([calm], _design()).verdict == REGRESSION
    assert analyse([held], _design(contention_imbalance=0.5)).verdict == REGRESSION
    # At the last look there is nothing to wait for: inconclusive, and done.
    last = analyse([held], _design(max_runs=24))
    assert (last.verdict, last.need_more_runs) == (INCONCLUSIVE, 0)


# --- Holm with sequential boundaries, no primary ------------------------------------------


def _primary(benchmark: str, p: float) -> StatResult:
    return StatResult(
        benchmark=benchmark, metric="m", unit="ms", statistic="value", is_primary=True,
        look=1, n_a=24, n_b=24, median_a=1.0, median_b=1.1, shift=10.0, ci_low=5.0,
        ci_high=15.0, relative=True, p_value=p, p_mannwhitney=None, p_median=None,
        prob_b_gt_a=None, cliffs_delta=None, threshold=2.0, lower_is_better=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("p", "crossed"),
    [
        # Step 1 at level .0225 (first look: .0225/64 = 3.5e-4), step 2 at .045 (7.03e-4).
        ((0.0003, 0.0007), (True, True)),
        # Both below the single-metric boundary 7.03e-4, but step 1 fails: Holm stops there.
        ((0.0004, 0.0005), (False, False)),
        ((0.0003, 0.0008), (True, False)),
    ],
)
def test_holm_steps_down_through_each_levels_own_boundary(p, crossed):
    results = [_primary("boot-time", p[0]), _primary("smt-toggle", p[1])]
    adjust(results, _design(), 1)
    assert tuple(r.crossed for r in results) == crossed
    assert [r.details["boundary"] for r in results] == [
        pytest.approx(0.0225 / 64), pytest.approx(0.045 / 64)]  # fmt: skip
    assert [r.p_adjusted for r in results] == pytest.approx(sequential.holm(p))  # shown, not gating


def test_a_comparison_with_no_primary_metric_is_not_no_change(rng):
    res = analyse([_metric(rng, cv=0.003, primary=False)], _design(max_runs=24))
    assert res.results[0].verdict == NO_CHANGE  # the secondary metric itself
    assert res.verdict == INCONCLUSIVE  # but no primary metric decided anything
