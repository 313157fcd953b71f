"""The statistics functions on data whose answers can be checked by hand."""

import math

import numpy as np
import pytest
from scipy import stats as st

from stats import diagnostics, methods, sequential, tails


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)


# The 10-vs-10 boot-time exchange of STATS.md, in the shape of McKenney's argument (the
# exact figures are not in STATS.md): 8 of B's 10 boots lie beyond A's median, and 8 of
# B's and 2 of A's lie above the pooled median. Seconds.
BOOT_A = [5.03, 5.04, 5.05, 5.06, 5.07, 5.08, 5.09, 5.10, 5.15, 5.16]
BOOT_B = [5.01, 5.02, 5.11, 5.12, 5.13, 5.14, 5.17, 5.18, 5.19, 5.20]


def test_mood_median_test_on_the_10_vs_10_boot_times():
    # Grand median 5.105: above it A has 2, B has 8: table [[2, 8], [8, 2]]. Yates:
    # chi2 = (|2*2 - 8*8| - 20/2)^2 * 20 / (10 * 10 * 10 * 10) = 50^2 * 20 / 10^4 = 5.0.
    assert methods.mood_median(BOOT_A, BOOT_B).p_value == pytest.approx(st.chi2.sf(5.0, 1))
    assert methods.mood_median(BOOT_A, BOOT_B).p_value == pytest.approx(0.02535, abs=1e-5)


def test_mckenney_binomial_is_one_sided_and_optimistic():
    # His arithmetic: P(at most 2 of 10 below A's median) = (1 + 10 + 45) / 1024.
    a_median = float(np.median(BOOT_A))
    below = sum(b < a_median for b in BOOT_B)
    assert below == 2
    assert sum(math.comb(10, i) for i in range(below + 1)) / 2**10 == pytest.approx(0.0547, 1e-3)
    # Two-sided, Mood's test is what rcubench shows; it agrees this is not strong evidence
    # at the sequential boundary of a first look (p <= 8.5e-5).
    p_mood = methods.mood_median(BOOT_A, BOOT_B).p_value
    assert p_mood is not None
    assert p_mood > sequential.z_to_p(3.92)


def test_brunner_munzel_matches_scipy_statistic_with_ties(rng):
    a = np.round(rng.lognormal(0, 0.05, 24) * 40)  # quantized: plenty of ties
    b = np.round(rng.lognormal(0.03, 0.05, 30) * 40)
    ref = st.brunnermunzel(a, b)  # scipy's sign: positive when its second sample is larger
    ours = methods.brunner_munzel(a, b, n_perm=4999, rng=rng)
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.method == "permutation"
    assert ours.p_value == pytest.approx(ref.pvalue, abs=0.02)  # studentized: close to t


def test_brunner_munzel_complete_separation_is_tiny_not_nan(rng):
    a, b = np.arange(24.0), np.arange(24.0) + 100
    res = methods.brunner_munzel(a, b, rng=rng)
    assert res.statistic == math.inf
    assert res.method == "exact"
    # Only the split itself and its mirror are as extreme: 2 / C(48, 24).
    assert res.p_value == pytest.approx(2 / math.comb(48, 24))
    # Unequal sizes too: the split and its mirror (A's 24 above B's 12), 2 / C(36, 12).
    uneq = methods.brunner_munzel(a, np.arange(12.0) + 100, rng=rng)
    assert (uneq.method, uneq.p_value) == ("exact", pytest.approx(2 / math.comb(36, 12)))
    assert math.isnan(st.brunnermunzel(a, b).pvalue)  # what the permutation p fixes


def test_brunner_munzel_constant_data(rng):
    assert methods.brunner_munzel([3.0] * 24, [3.0] * 24, rng=rng).p_value == 1.0
    sep = methods.brunner_munzel([3.0] * 24, [4.0] * 24, rng=rng)  # constant within, apart
    assert sep.p_value < 0.01  # not NaN: NaN < 0.01 is False


@pytest.mark.parametrize(
    ("a", "b", "problem"),
    [
        ([1.0, math.nan, 2.0], [1.0, 2.0], "NaN"),
        ([1.0, 2.0], [1.0, math.inf], "inf"),
        ([], [1.0, 2.0], "0 values"),
        ([1.0], [1.0, 2.0], "1 values"),
    ],
)
def test_bad_input_is_named(rng, a, b, problem):
    with pytest.raises(methods.StatsInputError, match=problem):
        methods.brunner_munzel(a, b, rng=rng)


def test_hodges_lehmann_by_hand():
    # B - A over all 9 pairs: 1 0 -1 2 1 0 3 2 1 -> median 1.
    shift = methods.hodges_lehmann([1, 2, 3], [2, 3, 4], relative=False)
    assert (shift.estimate, shift.relative) == (1, False)
    # B / A over pairs: 2 1 .5 4 2 1 8 4 2 -> median 2 -> +100%.
    assert methods.hodges_lehmann([1, 2, 4], [2, 4, 8]).estimate == pytest.approx(100.0)


def test_hodges_lehmann_ci_brackets_a_known_shift(rng):
    a = rng.lognormal(0, 0.05, 96)
    b = rng.lognormal(np.log(1.05), 0.05, 96)
    shift = methods.hodges_lehmann(a, b)
    assert shift.low < 5.0 < shift.high
    assert shift.high - shift.low < 4.0


def test_the_ci_inverts_the_permutation_test_not_the_t_approximation():
    # 5 vs 5 runs, completely separated: the t approximation's p is 0, so a CI from it
    # stops short of the separating shifts. No labelling of 10 runs is rarer than 2 in
    # C(10, 5) = 252, so the permutation test cannot reject at 0.1%: its 99.9% CI spans
    # every pairwise difference.
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0], [11.0, 12.0, 13.0, 14.0, 15.0]
    shift = methods.hodges_lehmann(a, b, confidence=0.999, relative=False)
    assert (shift.low, shift.estimate, shift.high) == (6.0, 10.0, 14.0)
    # At 95% it can (2/252 < 0.05): the CI stops inside, at shifts the test accepts.
    narrow = methods.hodges_lehmann(a, b, confidence=0.95, relative=False)
    assert 6.0 < narrow.low < 10.0 < narrow.high < 14.0
    for end in (narrow.low, narrow.high):
        test = methods.brunner_munzel(a, np.array(b) - end, n_perm=20_000,
                                      rng=np.random.default_rng(1))  # fmt: skip
        assert test.p_value > 0.05


def test_the_ci_ends_are_where_the_permutation_test_turns(rng):
    # 24 vs 12 runs, 4x spread, at the first look's level: the end is accepted and the
    # next pairwise difference beyond it rejected, by the same relabellings.
    xa, xb = np.log(rng.lognormal(0, 0.05, 24)), np.log(rng.lognormal(0.05, 0.2, 12))
    alpha = 7.03e-4
    shift = methods.hodges_lehmann(xa, xb, confidence=1 - alpha, relative=False,
                                   rng=np.random.default_rng(3))  # fmt: skip
    test = methods._ShiftTest(xa, xb, alpha, np.random.default_rng(3))
    assert test.count == methods.permutations_to_resolve(alpha)  # 10 beyond the level
    d = np.unique(xb[None, :] - xa[:, None])
    lo, hi = np.searchsorted(d, [shift.low, shift.high])
    assert test.accepts(d[lo])
    assert test.accepts(d[hi])
    assert not test.accepts(d[lo - 1])
    assert not test.accepts(d[hi + 1])
    # The same data give the same CI (relabellings seeded from the values by default).
    again = methods.hodges_lehmann(xa, xb, confidence=1 - alpha, relative=False)
    assert again == methods.hodges_lehmann(xa, xb, confidence=1 - alpha, relative=False)


def test_the_cis_fast_statistic_is_brunner_munzels_w(rng):
    for z, n_a in ((np.round(rng.normal(0, 1, 40), 1), 24),  # ties
                   (np.r_[np.arange(24.0), np.arange(12.0) + 50], 24),  # separation
                   (np.full(20, 3.0), 10)):  # constant  # fmt: skip
        h = methods._heaviside_matrix(z)
        labels = methods._with_relabellings(n_a, z.size - n_a, 300, rng)
        want = np.abs(methods._bm_statistic(labels, h))
        np.testing.assert_allclose(methods._bm_abs_w(labels, h), want, rtol=1e-12)


def test_hodges_lehmann_relative_refuses_non_positive():
    with pytest.raises(methods.StatsInputError, match="positive"):
        methods.hodges_lehmann([0.0, 1.0], [1.0, 2.0])


def test_probability_of_superiority_and_cliffs_delta_by_hand():
    # Pairs (b - a): 1, 0, 2, 1 -> P(B > A) + P(B = A) / 2 = (3 + 0.5) / 4.
    assert methods.prob_b_greater([1, 2], [2, 3]) == 0.875
    assert methods.cliffs_delta([1, 2], [2, 3]) == 0.75


def test_rank_tests_on_constant_data_give_one_and_moods_test_does_not_exist():
    assert methods.mann_whitney_p([2.0] * 5, [2.0] * 5) == 1.0  # exact: U is the same always
    mood = methods.mood_median([2.0] * 5, [2.0] * 5)  # SciPy refuses: nothing above 2.0
    assert (mood.p_value, mood.reason) == (
        None, "Mood's median test undefined: no run lies above the grand median (2)"
    )  # fmt: skip


def test_holm_and_bh_by_hand():
    # Holm: sorted .01*3, .03*2, .04*1 -> running max .03 .06 .06.
    assert sequential.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # BH: .01*3/1, .03*3/2, .04*3/3 -> running min from the top .03 .04 .04.
    assert sequential.benjamini_hochberg([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.04, 0.04])


def test_sequential_bounds():
    # The first look spends exactly alpha t1^3: c1 = z_{alpha t1^3 / 2}.
    first = sequential.sequential_bounds((0.25, 0.5, 0.75, 1.0))[0]
    assert first == pytest.approx(st.norm.isf(0.05 / 64 / 2))
    assert sequential.sequential_bounds((1.0,)) == pytest.approx((1.96,), abs=1e-3)
    # The last of 4 looks: nominal .0424, short of .05 by what the earlier looks spent.
    assert sequential.z_to_p(
        sequential.sequential_bounds((0.25, 0.5, 0.75, 1.0))[-1]
    ) == pytest.approx(0.0424, abs=5e-4)
    with pytest.raises(methods.StatsInputError, match="rise"):
        sequential.sequential_bounds((0.5, 0.25))


def _runs(rng, n, k, tail_factor=1.0):
    runs = []
    for _ in range(n):
        x = rng.lognormal(np.log(6.0) + rng.normal(0, 0.02), 0.25, k)
        cut = np.quantile(x, 0.97)
        runs.append(np.where(x > cut, x * tail_factor, x))
    return runs


def test_tail_test_sees_a_slower_slowest_3_percent(rng):
    res = tails.tail_test(_runs(rng, 24, 200), _runs(rng, 24, 200, 1.3), n_perm=999, rng=rng)
    assert res.quantile == 0.99
    assert res.ratio is not None
    assert res.ratio > 1.2
    assert res.p_value < 0.01
    assert res.ci_low is not None
    assert res.ci_low > 1.1


def test_tail_test_quiet_when_nothing_changed(rng):
    res = tails.tail_test(_runs(rng, 24, 200), _runs(rng, 24, 200), n_perm=999, rng=rng)
    assert res.p_value > 0.01
    assert res.ci_low is not None
    assert res.ci_high is not None
    assert res.ci_low < 1 < res.ci_high


def test_max_test_permutes_run_maxima(rng):
    a = [np.array([1.0, 2.0])] * 4
    b = [np.array([1.0, 4.0])] * 4
    res = tails.tail_test(a, b, q=1.0, n_perm=999, rng=rng)
    assert (res.value_a, res.value_b, res.ratio) == (2.0, 4.0, 2.0)
    # Only the observed split (and its mirror) of 8 runs gives |log ratio| = log 2: 2/C(8,4).
    assert res.p_value == pytest.approx(2 / 70, abs=0.015)


def test_tail_test_needs_runs(rng):
    with pytest.raises(methods.StatsInputError, match="2 runs per side"):
        tails.tail_test([np.ones(5)], [np.ones(5), np.ones(5)], rng=rng)


def test_shape_and_design_warnings_helpers(rng):
    order_a, order_b = range(0, 48, 2), range(1, 48, 2)
    rising = np.arange(24.0) + rng.normal(0, 0.1, 24)
    apart = diagnostics.drift_difference(order_a, rising, order_b, rng.normal(0, 1, 24))
    assert apart.p_value < 1e-6
    assert apart.rho_a > 0.99
    together = diagnostics.drift_difference(order_a, rising, order_b, rising + 0.05)
    assert (together.rho_a, together.p_value) == (together.rho_b, 1.0)
    constant = diagnostics.drift_difference(order_a, [1.0] * 24, order_b, [1.0] * 24)
    assert (constant.rho_a, constant.p_value) == (0.0, 1.0)
    assert diagnostics.tied_fraction([1, 1, 2, 3]) == 0.5
    assert (
        diagnostics.anderson_darling_p(rng.normal(0, 1, 48), rng.normal(0, 4, 48), rng=rng) < 0.01
    )
    assert diagnostics.anderson_darling_p([1.0] * 5, [1.0] * 5, rng=rng) == 1.0


def test_smallest_detectable_shift_matches_stats_md():
    # N ~ 16 (CV / shift)^2 per side for 80% power: at 24 runs, CV 2% -> ~1.7-1.8%.
    assert sequential.smallest_detectable_shift(2.0, 24, 24) == pytest.approx(1.7, abs=0.1)
    assert sequential.smallest_detectable_shift(5.0, 24, 24) == pytest.approx(4.3, abs=0.2)


# --- the sign test (McKenney's count) -----------------------------------------------------

RUNS_A = [float(v) for v in range(1, 25)]  # median 12.5
RUNS_B = [1.0, 2.0, 3.0, 4.0] + [float(v) for v in range(13, 33)]  # 20 above 12.5, 4 below


def test_sign_test_counts_b_runs_above_a_median_against_a_fair_coin():
    s = methods.sign_test(RUNS_A, RUNS_B)
    assert (s.median_a, s.above, s.below, s.ties, s.n) == (12.5, 20, 4, 0, 24)
    # Two-sided exact binomial: 2 P(X <= 4), X ~ Binomial(24, 1/2).
    by_hand = 2 * sum(math.comb(24, i) for i in range(5)) / 2**24
    assert s.p_value == pytest.approx(by_hand)
    assert s.p_value == pytest.approx(st.binomtest(20, 24).pvalue)


def test_sign_test_on_the_10_vs_10_boot_times_is_mckenneys_count_made_two_sided():
    s = methods.sign_test(BOOT_A, BOOT_B)
    assert (s.above, s.n) == (8, 10)
    assert s.p_value == pytest.approx(2 * 56 / 1024)  # twice his one-sided 0.055


def test_sign_test_leaves_b_runs_equal_to_a_median_out():
    s = methods.sign_test([1.0, 2.0, 3.0], [2.0, 2.0, 3.0, 4.0, 1.0])
    assert (s.above, s.below, s.ties, s.n) == (2, 1, 2, 3)
    assert s.p_value == pytest.approx(1.0)


def test_sign_test_is_undefined_with_the_reason_when_every_b_run_ties():
    s = methods.sign_test([5.0] * 4, [5.0] * 4)
    assert (s.p_value, s.n, s.ties) == (None, 0, 4)
    assert s.reason == "sign test undefined: all 4 runs of B equal A's median"


def test_moods_test_is_undefined_when_most_values_tie_at_the_top():
    # Grand median 2.0 and nothing above it: SciPy refuses; it used to read as p = 1.
    mood = methods.mood_median([1.0, 1.0, 1.0, 2.0], [2.0, 2.0, 2.0, 2.0])
    assert mood.p_value is None
    assert "no run lies above the grand median (2)" in mood.reason


# --- how a p was obtained -------------------------------------------------------------------


def test_brunner_munzel_says_how_its_p_was_obtained(rng):
    assert methods.brunner_munzel([3.0] * 4, [3.0] * 4, rng=rng).method == methods.EXACT
    a, b = np.arange(24.0), np.arange(24.0) + 100
    far = methods.brunner_munzel(a, b, n_perm=999, rng=rng)
    assert far.method == methods.EXACT  # complete separation: 2 / C(48, 24)
    overlapping = a + 20  # 4 values overlap: no separation, p beyond 999 relabellings
    floor = methods.brunner_munzel(a, overlapping, n_perm=999, rng=rng)
    assert (floor.method, floor.n_perm, floor.p_value) == ("permutation", 999, 1 / 1000)
    near = methods.brunner_munzel(a, a + 3, n_perm=999, rng=rng)  # overlapping: resolved
    assert near.method == methods.PERMUTATION
    assert near.p_value >= 1 / 1000


# --- no NaN or inf: a zero quantile, one run ------------------------------------------------


ZEROS = [np.zeros(50)] * 4
SLOW = [np.arange(1.0, 51.0)] * 4  # pooled p99 and max 50


@pytest.mark.parametrize("q", [0.99, 1.0])
def test_tail_ratio_to_a_zero_quantile_is_undefined_with_the_reason(rng, q):
    res = tails.tail_test(ZEROS, SLOW, q=q, n_perm=999, n_boot=200, rng=rng)
    name = "max" if q == 1.0 else "p99"
    assert (res.value_a, res.value_b) == (0.0, 50.0)
    assert (res.ratio, res.ci_low, res.ci_high) == (None, None, None)
    assert res.undefined == (f"{name} ratio undefined: side A's pooled {name} is 0",)
    # The p permutes |B - A| instead of |log ratio|: only the split and its mirror give 50.
    assert res.p_value == pytest.approx(2 / math.comb(8, 4), abs=0.015)


def test_tail_of_zeros_on_both_sides_has_no_ratio_and_p_one(rng):
    res = tails.tail_test(ZEROS, ZEROS, n_perm=999, n_boot=200, rng=rng)
    assert (res.ratio, res.ci_low, res.p_value) == (None, None, 1.0)
    assert res.undefined == ("p99 ratio undefined: sides A's and B's pooled p99 are both 0",)


def test_tail_falling_to_zero_on_b_is_a_ratio_of_zero(rng):
    res = tails.tail_test(SLOW, ZEROS, n_perm=999, n_boot=200, rng=rng)
    assert (res.ratio, res.ci_low, res.ci_high, res.undefined) == (0.0, 0.0, 0.0, ())


def test_tail_ci_is_undefined_when_bootstrap_draws_of_a_hit_zero(rng):
    # One of A's four runs holds every non-zero sample: A's pooled p99 is the 198th of 200
    # values, 48 (B's: 50), but a resample without that run ((3/4)^4 = 32% of draws) has a
    # pooled p99 of 0.
    runs_a = [*ZEROS[:3], SLOW[0]]
    res = tails.tail_test(runs_a, SLOW, n_perm=999, n_boot=400, rng=rng)
    assert res.ratio == pytest.approx(50 / 48)
    assert (res.ci_low, res.ci_high) == (None, None)
    (why,) = res.undefined
    assert why.startswith("p99 CI undefined: side A's pooled p99 is <= 0 in ")
    drawn = int(why.split(" in ")[1].split(" of ")[0])
    assert 0.2 < drawn / 400 < 0.45


def test_one_run_per_side_gives_numbers_undefined_or_a_refusal(rng):
    a, b = [5.0], [6.0]
    with pytest.raises(methods.StatsInputError, match="side A: 1 values, at least 2 needed"):
        methods.hodges_lehmann(a, b)  # its CI inverts Brunner-Munzel, which needs 2
    assert (methods.prob_b_greater(a, b), methods.mann_whitney_p(a, b)) == (1.0, 1.0)
    assert methods.mood_median(a, b).p_value == pytest.approx(1.0)
    assert methods.sign_test(a, b).p_value == pytest.approx(1.0)
    with pytest.raises(methods.StatsInputError, match="side A: 1 values, at least 2 needed"):
        methods.brunner_munzel(a, b, rng=rng)
    with pytest.raises(methods.StatsInputError, match="at least 2 runs per side"):
        tails.tail_test([np.ones(5)], [np.ones(5)], rng=rng)


# -- failure rates -------------------------------------------------------------------


def test_failure_counts_split_the_kernels_failures_from_the_hosts():
    c = methods.failure_counts(["ok"] * 20 + ["panic", "panic", "timeout", "infra-error", "lost"])
    assert (c.ok, c.kernel_failures, c.host_failures, c.attempts) == (20, 3, 2, 23)
    assert dict(c.failures) == {"panic": 2, "timeout": 1, "infra-error": 1, "lost": 1}


def _boschloo_by_hand(fail_a: int, fail_b: int, n: int) -> float:
    """Boschloo's one-sided p from its definition: the largest chance, over the common
    failure rate pi, of a table whose Fisher p is at most the observed table's."""

    def fisher(fa: int, fb: int) -> float:
        return float(st.fisher_exact([[fb, n - fb], [fa, n - fa]], alternative="greater").pvalue)

    observed = fisher(fail_a, fail_b)
    k = np.arange(n + 1)
    extreme = np.array([[fisher(int(fa), int(fb)) <= observed * (1 + 1e-7) for fb in k]
                        for fa in k])  # fmt: skip
    pis = np.linspace(1e-4, 1 - 1e-4, 2000)
    pmf = st.binom.pmf(k[None, :], n, pis[:, None])  # (pi, failures)
    return float(np.einsum("pa,ab,pb->p", pmf, extreme, pmf).max())


def test_0_of_24_against_6_of_24_is_flagged_by_boschloo_where_fisher_misses():
    # Fisher: all 6 failures on B's 24 of the 48 attempts, C(24,6)/C(48,6) = 0.01097 (over
    # .01). Boschloo, its unconditional form, from its definition: 0.0066.
    a = methods.FailureCounts(24)
    b = methods.FailureCounts(18, (("panic", 6),))
    t = methods.failure_excess(a, b)
    assert t.p_fisher == pytest.approx(math.comb(24, 6) / math.comb(48, 6), rel=1e-12)
    assert t.p_value == pytest.approx(_boschloo_by_hand(0, 6, 24), rel=1e-3)
    assert t.p_value <= methods.reliability_level(1, 4) < methods.RELIABILITY_ALPHA < t.p_fisher
    assert (t.rate_a, t.rate_b) == (0.0, 0.25)


def test_0_of_24_against_5_of_24_is_not_flagged():
    t = methods.failure_excess(
        methods.FailureCounts(24), methods.FailureCounts(19, (("panic", 5),))
    )
    assert t.p_value == pytest.approx(_boschloo_by_hand(0, 5, 24), rel=1e-3)
    assert t.p_value > methods.reliability_level(1, 4)


def test_failure_test_is_one_sided_and_ignores_host_failures():
    only_host = methods.FailureCounts(24, (("infra-error", 9), ("lost", 3), ("cancelled", 2)))
    assert methods.failure_excess(methods.FailureCounts(24), only_host).p_value == 1.0
    a_worse = methods.failure_excess(
        methods.FailureCounts(14, (("panic", 10),)), methods.FailureCounts(24)
    )
    assert a_worse.p_value == 1.0
    nothing = methods.failure_excess(
        methods.FailureCounts(), methods.FailureCounts(0, (("panic", 3),))
    )
    assert (nothing.p_value, nothing.rate_a, nothing.rate_b) == (1.0, None, 1.0)


def test_equal_failure_rates_are_flagged_rarely():
    # 10% both, 24 attempts a side, at the first look's level (.0075 of the comparison's
    # .01): exactly, over every pair of failure counts with probability > 1e-9. An exact
    # test's size never exceeds its level (Fisher's, conservative: ~0.07% at .01).
    pmf = st.binom.pmf(np.arange(25), 24, 0.1)
    likely = [k for k in range(25) if pmf[k] > 1e-9]
    flagged = sum(
        pmf[fa] * pmf[fb]
        for fa in likely
        for fb in likely
        if methods.failure_excess(methods.FailureCounts(24 - fa, (("panic", int(fa)),)),
                                methods.FailureCounts(24 - fb, (("panic", int(fb)),))).p_value
        <= methods.reliability_level(1, 4)
    )  # fmt: skip
    assert 0.001 < flagged <= 0.0075


def _shifted(rng, shift):
    return rng.lognormal(0, 0.05, 24), rng.lognormal(shift, 0.05, 24)


def test_permutations_are_raised_to_resolve_a_boundary_near_the_first_p(rng):
    a, b = _shifted(rng, 0.10)  # first p at 1/10,000: within 10x of the boundary
    r = methods.brunner_munzel(a, b, resolve=1e-4, rng=rng)
    assert (r.method, r.n_perm) == (methods.PERMUTATION, methods.permutations_to_resolve(1e-4))
    assert r.n_perm == 100_000
    assert r.p_value >= 1 / (r.n_perm + 1)


def test_a_first_p_far_above_the_boundary_keeps_the_base_count(rng):
    a, b = _shifted(rng, 0.0)
    r = methods.brunner_munzel(a, b, resolve=1e-4, rng=rng)
    assert r.p_value > 1e-3
    assert r.n_perm == 9999


def test_raised_counts_stop_at_the_cap(rng, monkeypatch):
    monkeypatch.setattr(methods, "MAX_PERMUTATIONS", 30_000)
    a, b = _shifted(rng, 0.10)
    r = methods.brunner_munzel(a, b, resolve=1e-5, rng=rng)  # would need 1,000,000
    assert r.n_perm == 30_000
    assert r.p_value == pytest.approx(1 / 30_001)  # no relabelling as extreme
