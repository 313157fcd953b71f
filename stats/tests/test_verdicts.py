"""Verdicts, multiplicity and the sequential policy of the engine."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as st

from stats import methods
from stats import verdicts as E


def _value_runs(rng, n, median, cv, first_order):
    return [E.RunSamples(first_order + 2 * i, (float(rng.lognormal(math.log(median), cv)),))
            for i in range(n)]  # fmt: skip


def _metric(rng, n=24, shift=0.0, cv=0.05, name="kernel_to_init_ms", primary=True, **kw):
    return E.MetricInput(
        benchmark=kw.pop("benchmark", "boot-time"), name=name, unit="ms",
        per_run_samples=False, lower_is_better=kw.pop("lower_is_better", True),
        primary=primary, runs_a=_value_runs(rng, n, 1000.0, cv, 0),
        runs_b=_value_runs(rng, n, 1000.0 * (1 + shift), cv, 1), **kw,
    )  # fmt: skip


def _design(**kw):
    """The default design with fewer permutations, to keep the tests quick."""
    return E.Design(n_perm=1999, n_boot=500, n_perm_shape=199, **kw)


def _num(r: E.StatResult, key: str) -> float:
    """A number from a result's details (typed object there)."""
    v = r.details[key]
    assert isinstance(v, int | float)
    return float(v)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_refuses_fewer_than_24_runs(rng):
    with pytest.raises(E.TooFewRuns, match="23 runs per side; at least 24"):
        E.analyse([_metric(rng, n=23)], _design())
    with pytest.raises(E.TooFewRuns, match="below the floor of 24"):
        E.Design(min_runs=4, max_runs=8, step=4)


def test_looks_and_boundaries():
    design = E.Design()
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
    res = E.analyse([_metric(rng, shift=0.10)], _design())
    (primary,) = [r for r in res.results if r.is_primary]
    assert primary.verdict == E.REGRESSION
    assert primary.adjustment == "holm"
    assert primary.shift == pytest.approx(10, abs=3)
    low, shift, high = primary.ci_low, primary.shift, primary.ci_high
    assert low is not None
    assert shift is not None
    assert high is not None
    assert low < shift < high
    assert (res.need_more_runs, res.look, res.verdict) == (0, 1, E.REGRESSION)


def test_improvement_when_higher_is_better(rng):
    res = E.analyse([_metric(rng, shift=0.10, lower_is_better=False)], _design())
    assert res.results[0].verdict == E.IMPROVEMENT


def test_small_shift_at_first_look_asks_for_the_next_look(rng):
    res = E.analyse([_metric(rng, shift=0.01)], _design())
    assert (res.results[0].verdict, res.results[0].pending) == (E.INCONCLUSIVE, True)
    assert res.need_more_runs == 24


def test_inconclusive_at_the_last_look_states_the_detectable_shift(rng):
    res = E.analyse([_metric(rng, n=96, shift=0.01, cv=0.10)], _design())
    r = res.results[0]
    assert (r.verdict, r.pending, res.need_more_runs) == (E.INCONCLUSIVE, False, 0)
    assert any("smallest detectable shift" in w for w in r.warnings)
    assert r.details["smallest_detectable_shift"] == pytest.approx(4.2, abs=0.8)


def test_tight_data_and_no_change(rng):
    res = E.analyse([_metric(rng, shift=0.0, cv=0.003)], _design())
    assert res.results[0].verdict == E.NO_CHANGE
    assert res.need_more_runs == 0


def test_significant_but_small(rng):
    res = E.analyse([_metric(rng, shift=0.01, cv=0.001)], _design())
    assert res.results[0].verdict == E.SMALL


def test_absolute_threshold_for_memory(rng):
    m = _metric(rng, shift=0.02, cv=0.002, name="slab_kb_peak_d0", benchmark="bpf-slab",
                threshold=64.0, threshold_is_absolute=True)  # fmt: skip
    r = E.analyse([m], _design()).results[0]
    assert not r.relative
    assert r.shift == pytest.approx(20, abs=2)  # kB: 2% of 1000
    assert r.verdict == E.SMALL  # real, but under 64 kB


def test_latency_battery_and_families(rng):
    def runs(first, factor):
        return [E.RunSamples(first + 2 * i, tuple(rng.lognormal(math.log(6 * factor), 0.1, 30)))
                for i in range(24)]  # fmt: skip

    lat = E.MetricInput("sync-rcu-latency", "writer_duration", "ms", True, True, True,
                        runs(0, 1.0), runs(1, 1.08))  # fmt: skip
    other = _metric(rng, name="gps", primary=False, benchmark="sync-rcu-latency")
    res = E.analyse([lat, other], _design())
    by = {(r.metric, r.statistic): r for r in res.results}
    assert set(by) == {("writer_duration", s) for s in ("p50", "mean", "p90", "p99", "max")} | {
        ("gps", "value")
    }
    assert by["writer_duration", "p50"].is_primary
    assert by["writer_duration", "p50"].adjustment == "holm"
    assert by["writer_duration", "p99"].adjustment == "bh"
    assert by["writer_duration", "p99"].warnings[0].startswith("too few samples for p99")
    assert by["writer_duration", "p50"].verdict == E.REGRESSION
    assert res.results[0].verdict == E.REGRESSION  # sorted by severity


def test_holm_across_benchmarks(rng):
    a = _metric(rng, shift=0.10)
    b = _metric(rng, shift=0.0, benchmark="smt-toggle", name="off_ms")
    res = E.analyse([a, b], _design())
    primaries = [r for r in res.results if r.is_primary]
    assert len(primaries) == 2
    assert all(r.adjustment == "holm" for r in primaries)
    assert all(r.p_adjusted >= r.p_value for r in primaries)


def _drifting(runs, per_run):
    return [E.RunSamples(r.order, (r.samples[0] * (1 + per_run * i),))
            for i, r in enumerate(runs)]  # fmt: skip


def test_drift_is_warned_when_the_sides_drift_apart_not_together(rng):
    m = _metric(rng, cv=0.01)
    apart = E.MetricInput(**{**m.__dict__, "runs_a": _drifting(m.runs_a, 0.01)})
    r = E.analyse([apart], _design()).results[0]
    assert any(w.startswith("drift: the sides trend differently") for w in r.warnings)
    assert _num(r, "drift_rho_a") > 0.9 > abs(_num(r, "drift_rho_b"))
    # The same drift on both sides (the host warming up) is what ABBA balances: no warning.
    together = E.MetricInput(**{**m.__dict__, "runs_a": _drifting(m.runs_a, 0.01),
                                "runs_b": _drifting(m.runs_b, 0.01)})  # fmt: skip
    r = E.analyse([together], _design()).results[0]
    assert not any(w.startswith("drift") for w in r.warnings)
    assert _num(r, "p_drift") > 0.01


def test_nan_sample_names_the_run(rng):
    m = _metric(rng)
    bad = [*m.runs_b[:3], E.RunSamples(77, (math.nan,)), *m.runs_b[4:]]
    with pytest.raises(ValueError, match=r"boot-time/kernel_to_init_ms side B run 77: 1 NaN"):
        E.analyse([E.MetricInput(**{**m.__dict__, "runs_b": bad})], _design())


def test_complete_separation_is_decided(rng):
    m = _metric(rng)
    high = [E.RunSamples(r.order, (r.samples[0] * 10,)) for r in m.runs_b]
    r = E.analyse([E.MetricInput(**{**m.__dict__, "runs_b": high})], _design()).results[0]
    assert r.p_value < 1e-10
    assert r.verdict == E.REGRESSION


def test_few_runs_only_with_the_test_override(rng):
    design = _design(min_runs=4, max_runs=8, step=4, allow_few_runs=True)
    assert design.looks == (4, 8)
    res = E.analyse([_metric(rng, n=4, shift=0.5)], design)
    assert res.look == 1


def test_interim_no_change_needs_the_repeated_ci(rng):
    # CV 2% at 24 runs: the 95% CI (about +-1.1%) sits inside +-2%, the look-1 repeated CI
    # (level 1 - 8.5e-5, about +-2.3%) does not: keep going. A design of one look has
    # alpha 0.05 at it, so its repeated CI is the 95% CI, and that is inside.
    metric = _metric(rng, shift=0.0, cv=0.02)
    interim = E.analyse([metric], _design()).results[0]
    assert interim.ci_low is not None
    assert interim.ci_high is not None
    assert -2 < interim.ci_low < interim.ci_high < 2
    assert (interim.verdict, interim.pending) == (E.INCONCLUSIVE, True)
    final = E.analyse([metric], _design(max_runs=24)).results[0]
    assert final.verdict == E.NO_CHANGE


# --- no NaN or inf, the cross-checks, and how each p was obtained --------------------------


def _latency(runs_a, runs_b, **kw):
    """sync-rcu-latency writer_duration (lower is better) from per-run sample lists."""

    def runs(first, samples):
        return [E.RunSamples(first + 2 * i, tuple(float(v) for v in s))
                for i, s in enumerate(samples)]  # fmt: skip

    return E.MetricInput("sync-rcu-latency", "writer_duration", "ms", True, True, True,
                         runs(0, runs_a), runs(1, runs_b), **kw)  # fmt: skip


def _values(a, b, *, lower_is_better=True):
    """boot-time kernel_to_init_ms (primary) from one value per run."""
    return E.MetricInput(
        "boot-time", "kernel_to_init_ms", "ms", False, lower_is_better, True,
        [E.RunSamples(2 * i, (float(v),)) for i, v in enumerate(a)],
        [E.RunSamples(2 * i + 1, (float(v),)) for i, v in enumerate(b)],
    )  # fmt: skip


def _sign(r):
    """The stored sign test of a result (details are typed as objects)."""
    return r.details["sign_test"]


def test_a_zero_p99_side_gives_an_undefined_ratio_with_the_reason_never_inf(rng):
    # Side A's runs measure nothing but zeros; B's are ordinary latencies. Single look: the
    # secondaries' share of alpha (.005) over 4 of them is .00125, which 1,999 relabellings
    # do not resolve: raised to 8,000, and p = 1/8001 is significant.
    zeros = [np.zeros(100)] * 24
    slow = [rng.lognormal(math.log(6.0), 0.1, 100) for _ in range(24)]
    res = E.analyse([_latency(zeros, slow)], _design(max_runs=24))
    assert E.non_finite(res.results) == []
    by = {r.statistic: r for r in res.results}
    for name in ("p99", "max"):
        r = by[name]
        assert (r.shift, r.ci_low, r.ci_high, r.details["ratio"]) == (None, None, None, None)
        assert f"{name} ratio undefined: side A's pooled {name} is 0" in r.warnings
        assert (r.details["p_permutations"], r.p_value) == (8000, pytest.approx(1 / 8001))
        # Unbounded in %, B above A, lower is better: beyond any threshold, worse.
        assert r.verdict == E.REGRESSION
    assert by["p50"].relative is False  # per-run medians of 0: the absolute shift


def test_two_runs_of_one_sample_per_side_the_smallest_design_gives_only_numbers(rng):
    design = _design(min_runs=2, max_runs=4, step=2, allow_few_runs=True)
    res = E.analyse([_latency([[5.0], [5.5]], [[6.0], [7.0]])], design)
    assert E.non_finite(res.results) == []
    assert {r.statistic for r in res.results} == {"p50", "mean", "p90", "p99", "max"}


def test_one_run_per_side_is_refused_by_name_even_with_the_test_override(rng):
    with pytest.raises(E.TooFewRuns, match="1 runs per side; at least 2 are needed"):
        E.analyse([_values([5.0], [6.0])], _design(min_runs=2, max_runs=4, step=2,
                                                   allow_few_runs=True))  # fmt: skip
    with pytest.raises(ValueError, match=r"bad design: runs 1\.\.4"):
        _design(min_runs=1, max_runs=4, step=1, allow_few_runs=True)


def test_equal_constant_sides_are_unchanged_with_undefined_cross_checks(rng):
    r = E.analyse([_values([5.0] * 24, [5.0] * 24)], _design()).results[0]
    assert E.non_finite(r) == []
    assert (r.p_value, r.details["p_method"], r.p_mannwhitney) == (1.0, "exact", 1.0)
    assert (r.shift, r.ci_low, r.ci_high) == (0.0, 0.0, 0.0)
    assert r.p_median is None
    assert _sign(r)["p"] is None
    assert ("constant data (every run 5): Mood's median test and the sign test are "
            "undefined") in r.warnings  # fmt: skip
    assert r.verdict == E.NO_CHANGE


def test_constant_sides_that_differ_are_a_resolved_tiny_p_never_nan(rng):
    r = E.analyse([_values([5.0] * 24, [6.0] * 24)], _design()).results[0]
    assert E.non_finite(r) == []
    # No relabelling is as extreme (but the mirror): the permutations were raised until
    # the first look's boundary (.045/64) has 10 expected beyond it, and p is their floor.
    b = int(_num(r, "p_permutations"))
    assert r.details["p_method"] == "permutation"
    boundary = E.Resolve.of([_values([5.0] * 24, [6.0] * 24)], _design(), 1).primary
    assert boundary == pytest.approx(0.045 / 64)
    assert b == methods.permutations_to_resolve(boundary) == 14_223
    assert r.p_value == pytest.approx(1 / (b + 1))
    assert r.details["statistic_w"] is None  # W = +inf is not stored as a float
    assert str(r.details["statistic_w_undefined"]).startswith("W is +inf")
    assert r.shift == pytest.approx(20.0)
    assert (_sign(r)["k"], _sign(r)["n"]) == (24, 24)
    assert _sign(r)["p"] == pytest.approx(2 / 2**24)
    assert r.verdict == E.REGRESSION


def test_complete_separation_gives_p_below_001_never_nan(rng):
    r = E.analyse([_values(range(1000, 1024), range(1100, 1124))], _design()).results[0]
    assert E.non_finite(r) == []
    assert r.p_value == pytest.approx(2 / math.comb(48, 24))  # exact: the split and its mirror
    assert r.details["p_method"] == "exact"
    assert r.p_median is not None
    assert r.p_median < 0.01


def test_the_sign_test_and_moods_p_are_stored_for_each_run_level_statistic(rng):
    a = [1000.0 + v for v in range(24)]  # median 1011.5
    b = [1000.0 + v for v in (0, 1, 2, 3)] + [1012.0 + v for v in range(20)]
    r = E.analyse([_values(a, b)], _design()).results[0]
    assert r.details["sign_test"] == {
        "k": 20, "n": 24, "below": 4, "ties": 0, "median_a": 1011.5,
        "p": pytest.approx(st.binomtest(20, 24).pvalue), "above_is": "worse",
    }  # fmt: skip
    assert r.p_median == methods.mood_median(a, b).p_value
    higher = E.analyse([_values(a, b, lower_is_better=False)], _design()).results[0]
    assert _sign(higher)["above_is"] == "better"


def test_every_p_says_how_it_was_obtained(rng):
    def runs(factor):
        return [rng.lognormal(math.log(6 * factor), 0.1, 30) for _ in range(24)]

    res = E.analyse([_latency(runs(1.0), runs(1.02))], _design())
    by = {r.statistic: r for r in res.results}
    for name in ("p50", "mean", "p90"):
        assert "sign_test" in by[name].details
    for name in ("p99", "max"):
        assert "sign_test" not in by[name].details
    # Never below the resolution of the permutations behind it (1999, or more where the
    # look's boundary needed them: at least 10 expected beyond it).
    for r in res.results:
        b = int(_num(r, "p_permutations"))
        assert r.details["p_method"] == "permutation"
        resolve = E.Resolve.of([_latency(runs(1.0), runs(1.0))], _design(), 1)
        assert b in (
            1999,
            *map(methods.permutations_to_resolve, (resolve.primary, resolve.secondary)),
        )
        assert r.p_value >= 1 / (b + 1)


def test_a_nan_or_inf_anywhere_in_a_result_is_refused_by_name(rng):
    (r,) = E.analyse([_values([5.0] * 24, [5.0] * 24)], _design()).results
    E.check_reportable(r)
    nan_ci = dataclasses.replace(r, ci_low=math.nan)
    with pytest.raises(E.UnreportableResult, match=r"kernel_to_init_ms\[value\].*ci_low = nan"):
        E.check_reportable(nan_ci)
    inf_detail = dataclasses.replace(r, details={**r.details, "repeated_ci": [0.0, math.inf]})
    with pytest.raises(E.UnreportableResult, match=r"details\['repeated_ci'\]\[1\] = inf"):
        E.check_reportable(inf_detail)
    with pytest.raises(E.UnreportableResult, match="ci_low = nan"):  # every look checks
        E.conclude([nan_ci], _design(), 24)


def test_a_permutation_p_below_its_resolution_must_be_marked(rng):
    (r,) = E.analyse([_values([5.0] * 24, [5.0] * 24)], _design()).results
    details = {**r.details, "p_method": "permutation", "p_permutations": 1999}
    unmarked = dataclasses.replace(r, p_value=1e-6, details=details)
    with pytest.raises(E.UnreportableResult, match=r"permutation p 1e-06 is below 1/\(1999"):
        E.check_reportable(unmarked)
    marked = dataclasses.replace(unmarked, details={**details, "p_method": "t-approximation"})
    E.check_reportable(marked)
    with pytest.raises(E.UnreportableResult, match="does not say how p was obtained"):
        E.check_reportable(dataclasses.replace(r, details={}))


# --- failure rates ----------------------------------------------------------------------


def _failures(bench="boot-time", fa=0, fb=0, n=24, code="panic"):
    def side(f):
        return methods.FailureCounts(n - f, ((code, f),) if f else ())

    return E.BenchmarkFailures(bench, side(fa), side(fb))


def test_a_failure_excess_in_b_is_the_comparisons_verdict_whatever_the_metrics_say(rng):
    # The metric asks for the next look (1% shift); 0/24 vs 7/24 panics answers first.
    res = E.analyse([_metric(rng, shift=0.01)], _design(), [_failures(fb=7)])
    assert (res.verdict, res.need_more_runs) == (E.RELIABILITY, 0)
    first = res.results[0]  # reliability leads the report order
    assert (first.metric, first.statistic, first.verdict) == (
        "failure_rate",
        "boschloo",
        E.RELIABILITY,
    )
    assert first.details["p_fisher"] == pytest.approx(math.comb(24, 7) / math.comb(48, 7))
    assert first.p_value < _num(first, "p_fisher")  # Boschloo: never above Fisher's
    assert first.details["b"] == {"attempts": 24, "ok": 17, "kernel_failures": 7,
                                  "host_failures": 0, "by_outcome": {"panic": 7}}  # fmt: skip
    assert first.details["p_method"] == "exact"
    assert any("B's kernel failed 7 of 24 boots" in w for w in first.warnings)
    assert E.SEVERITY[0] == E.RELIABILITY


def test_6_of_24_failures_are_flagged_at_the_first_look(rng):
    # STATS.md v2: 0/24 vs 6/24 is flagged. Boschloo p 0.0066 <= the first look's 0.0075.
    res = E.analyse([_metric(rng, shift=0.10)], _design(), [_failures(fb=6)])
    row = next(r for r in res.results if r.statistic == "boschloo")
    assert row.p_value == pytest.approx(0.0066457, abs=1e-6)
    assert row.details["p_fisher"] == pytest.approx(0.010968, abs=1e-6)  # would miss .01
    assert (row.details["alpha"], row.verdict) == (0.0075, E.RELIABILITY)
    assert res.verdict == E.RELIABILITY


def test_the_failure_levels_sum_to_001_over_the_looks(rng):
    # Three quarters at the first look, the rest spread: 6/48 vs 0/48 at look 2 is not
    # flagged at .01/12, and the metric's regression stays the verdict.
    assert [methods.reliability_level(k, 4) for k in (1, 2, 3, 4)] == pytest.approx(
        [0.0075, 0.01 / 12, 0.01 / 12, 0.01 / 12]
    )
    assert sum(methods.reliability_level(k, 4) for k in (1, 2, 3, 4)) == pytest.approx(0.01)
    res = E.analyse([_metric(rng, n=48, shift=0.10)], _design(), [_failures(fb=6, n=48)])
    row = next(r for r in res.results if r.statistic == "boschloo")
    assert (row.look, row.details["alpha"]) == (2, pytest.approx(0.01 / 12))
    assert row.verdict == E.NO_CHANGE
    assert res.verdict == E.REGRESSION  # the metric's, not the failure row's


def test_host_failures_never_count_against_the_kernel(rng):
    res = E.analyse([_metric(rng, shift=0.0, cv=0.003)], _design(),
                    [_failures(fb=12, code="infra-error")])  # fmt: skip
    row = next(r for r in res.results if r.statistic == "boschloo")
    assert (row.verdict, row.p_value, row.n_b) == (E.NO_CHANGE, 1.0, 12)
    assert row.details["b"] == {"attempts": 12, "ok": 12, "kernel_failures": 0,
                                "host_failures": 12, "by_outcome": {"infra-error": 12}}  # fmt: skip
    assert res.verdict == E.NO_CHANGE


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
    return E.StatResult(
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
    E.decide(r, final, imbalance)
    return r


UNCERTAIN = "size uncertain: the estimate is below the threshold; the interval reaches it"


@pytest.mark.parametrize(
    ("shift", "repeated", "lower_is_better", "verdict", "uncertain"),
    [
        # repeated CI entirely below the threshold, in the direction of the change
        (1.0, (0.5, 1.5), True, E.SMALL, False),
        (-1.0, (-1.5, -0.5), True, E.SMALL, False),
        (1.0, (0.5, 1.5), False, E.SMALL, False),
        # crossing it: the change may reach the threshold (estimate below it: uncertain)
        (1.5, (0.5, 2.5), True, E.REGRESSION, True),
        (-1.5, (-2.5, -0.5), True, E.IMPROVEMENT, True),
        (1.5, (0.5, 2.5), False, E.IMPROVEMENT, True),
        (-1.5, (-2.5, -0.5), False, E.REGRESSION, True),
        (2.5, (1.5, 3.5), True, E.REGRESSION, False),
        (1.9, (0.5, 2.0), True, E.REGRESSION, True),  # the end on the threshold reaches it
        # entirely beyond it
        (3.0, (2.5, 3.5), True, E.REGRESSION, False),
        (-3.0, (-3.5, -2.5), True, E.IMPROVEMENT, False),
        (3.0, (2.5, 3.5), False, E.IMPROVEMENT, False),
        (-3.0, (-3.5, -2.5), False, E.REGRESSION, False),
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
    assert r.verdict == E.REGRESSION
    assert UNCERTAIN in r.warnings


def test_a_significant_change_whose_repeated_ci_straddles_0_beyond_the_threshold_waits():
    r = _decided(_stat(1.0, (-2.5, 1.5)))
    assert (r.verdict, r.pending) == (E.INCONCLUSIVE, True)


@pytest.mark.parametrize("final", [False, True])
def test_no_meaningful_change_needs_the_repeated_ci_inside_the_threshold_at_every_look(final):
    inside = _decided(_stat(0.2, (-1.5, 1.9), p=0.5), final=final)
    assert (inside.verdict, inside.pending) == (E.NO_CHANGE, False)
    # The plain 95% CI (-0.5, 1.5) is inside +-2%; the repeated one is not: at an interim
    # look, more runs; at the last look (which used the plain CI before v2), inconclusive.
    r = _decided(_stat(0.2, (-2.1, 1.9), p=0.5, plain=(-0.5, 1.5)), final=final)
    assert (r.verdict, r.pending) == (E.INCONCLUSIVE, not final)
    assert "inconclusive at 24+24 runs: smallest detectable shift 1.50% (80% power)" in r.warnings


def test_the_last_look_of_a_sequential_design_uses_its_repeated_ci():
    # 96 runs per side at the normal quantiles of a lognormal CV 4%, B = A x e^0.0078: the
    # HL shift is exactly 0.78%, Brunner-Munzel p ~0.19 (no boundary crossed). The plain
    # 95% CI (-0.38%, 1.96%) is inside +-2% (the pre-v2 rule: no meaningful change); the
    # last look's repeated CI (level 1 - 0.0381: -0.45%, 2.03%) is not: inconclusive, done.
    z = st.norm.ppf((np.arange(96) + 0.5) / 96)[(np.arange(96) * 37) % 96]  # no drift
    a = 1000 * np.exp(0.04 * z)
    res = E.analyse([_values(a, a * math.exp(0.0078))], _design())
    r = res.results[0]
    assert (r.look, res.need_more_runs) == (4, 0)
    assert r.details["alpha_look"] == pytest.approx(0.03808, abs=1e-5)
    assert r.shift == pytest.approx(100 * math.expm1(0.0078))
    assert r.ci_low == pytest.approx(-0.379, abs=1e-3)
    assert r.ci_high == pytest.approx(1.961, abs=1e-3)
    assert r.details["repeated_ci"] == [pytest.approx(-0.449, abs=1e-3),
                                        pytest.approx(2.030, abs=1e-3)]  # fmt: skip
    assert r.p_adjusted > 0.1
    assert (r.verdict, r.pending) == (E.INCONCLUSIVE, False)


# --- host contention holds back a regression or improvement -------------------------------


def test_contention_that_differs_between_sides_holds_back_a_regression():
    counts = {"a": [0, 24], "b": [12, 24]}
    r = _decided(_stat(5.0, (3.0, 7.0), contended=counts))
    assert (r.verdict, r.pending) == (E.INCONCLUSIVE, True)
    assert r.details["held_back"] == E.REGRESSION
    assert any("0% of A's runs (0 of 24) and 50% of B's (12 of 24)" in w for w in r.warnings)
    last = _decided(_stat(-5.0, (-7.0, -3.0), contended=counts), final=True)
    assert (last.verdict, last.pending, last.details["held_back"]) == (
        E.INCONCLUSIVE,
        False,
        E.IMPROVEMENT,
    )


def test_contention_within_the_imbalance_or_unmeasured_leaves_the_verdict():
    # 2 of 24 is 8.3% apart from 0 of 24: within the 10% allowed.
    close = _decided(_stat(5.0, (3.0, 7.0), contended={"a": [0, 24], "b": [2, 24]}))
    assert close.verdict == E.REGRESSION
    assert _decided(_stat(5.0, (3.0, 7.0))).verdict == E.REGRESSION  # not measured
    # Only regressions and improvements are held: a small change stays small.
    small = _decided(_stat(1.0, (0.5, 1.5), contended={"a": [0, 24], "b": [24, 24]}))
    assert small.verdict == E.SMALL


def test_contention_counts_measured_runs_only():
    def runs(flags):
        return [E.RunSamples(i, (1.0,), f) for i, f in enumerate(flags)]

    assert E.contention(runs([True, False, None]), runs([True, True])) == {
        "contended": {"a": [1, 2], "b": [2, 2]}
    }
    assert E.contention(runs([None, None]), runs([True])) == {}


def test_a_clear_regression_on_a_contended_side_asks_for_quieter_runs(rng):
    m = _metric(rng, shift=0.10)
    busy = [dataclasses.replace(r, contended=i % 2 == 0) for i, r in enumerate(m.runs_b)]
    quiet = [dataclasses.replace(r, contended=False) for r in m.runs_a]
    held = dataclasses.replace(m, runs_a=quiet, runs_b=busy)
    res = E.analyse([held], _design())
    r = res.results[0]
    assert r.details["contended"] == {"a": [0, 24], "b": [12, 24]}
    assert (r.verdict, r.pending, res.need_more_runs, res.verdict) == (
        E.INCONCLUSIVE,
        True,
        24,
        E.INCONCLUSIVE,
    )
    # The same data with quiet runs on both sides, or a design that allows the imbalance.
    calm = dataclasses.replace(held, runs_b=[dataclasses.replace(r, contended=False)
                                             for r in busy])  # fmt: skip
    assert E.analyse([calm], _design()).verdict == E.REGRESSION
    assert E.analyse([held], _design(contention_imbalance=0.5)).verdict == E.REGRESSION
    # At the last look there is nothing to wait for: inconclusive, and done.
    last = E.analyse([held], _design(max_runs=24))
    assert (last.verdict, last.need_more_runs) == (E.INCONCLUSIVE, 0)


# --- Holm with sequential boundaries, thresholds, tails' CIs, no primary -------------------


def _primary(benchmark: str, p: float) -> E.StatResult:
    return E.StatResult(
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
    E.adjust(results, _design(), 1)
    assert tuple(r.crossed for r in results) == crossed
    assert [r.details["boundary"] for r in results] == [
        pytest.approx(0.0225 / 64), pytest.approx(0.045 / 64)]  # fmt: skip
    assert [r.p_adjusted for r in results] == pytest.approx(methods.holm(p))  # shown, not gating


def test_an_absolute_threshold_left_unset_is_refused_not_zero(rng):
    m = dataclasses.replace(_metric(rng), threshold=None, threshold_is_absolute=True)
    with pytest.raises(
        E.ThresholdUnset, match="boot-time/kernel_to_init_ms: an absolute threshold"
    ):
        E.analyse([m], _design())


def test_values_at_or_below_zero_get_the_threshold_in_the_unit(rng):
    # A median of -100 (e.g. a signed offset): the 2% threshold is 2 units, B - A is absolute.
    a, b = np.linspace(-101, -99, 24), np.linspace(-101, -99, 24) + 0.2
    r = E.analyse([_values(list(a), list(b))], _design()).results[0]
    assert (r.relative, r.threshold) == (False, pytest.approx(2.0))
    assert "threshold is 2 ms (2% of A's median)" in r.warnings[0]
    assert r.verdict == E.NO_CHANGE  # 0.2 units, the repeated CI well inside +-2
    # Around 0 there is no % of A's median: no threshold, so "no meaningful change" only
    # where no pair of runs differs at all.
    zero = E.analyse([_values(list(a + 100), list(b + 100))], _design()).results[0]
    assert zero.details["threshold_undefined"] is True
    assert "threshold is undefined (A's median is 0)" in zero.warnings[0]
    assert zero.verdict == E.INCONCLUSIVE
    same = E.analyse([_values([0.0] * 24, [0.0] * 24)], _design()).results[0]
    assert (same.details["threshold_undefined"], same.verdict) == (True, E.NO_CHANGE)


def test_a_comparison_with_no_primary_metric_is_not_no_change(rng):
    res = E.analyse([_metric(rng, cv=0.003, primary=False)], _design(max_runs=24))
    assert res.results[0].verdict == E.NO_CHANGE  # the secondary metric itself
    assert res.verdict == E.INCONCLUSIVE  # but no primary metric decided anything


def test_tail_cis_at_the_last_look_only_and_never_for_the_max(rng):
    def runs(n):
        return [rng.lognormal(math.log(6), 0.1, 30) for _ in range(n)]

    interim = {r.statistic: r for r in E.analyse([_latency(runs(24), runs(24))], _design()).results}
    assert (interim["p99"].ci_low, interim["p99"].ci_high) == (None, None)
    assert str(interim["p99"].details["ci_level"]).startswith("none at an interim look")
    last = {r.statistic: r for r in
            E.analyse([_latency(runs(24), runs(24))], _design(max_runs=24)).results}  # fmt: skip
    low, high = last["p99"].ci_low, last["p99"].ci_high
    assert low is not None
    assert high is not None
    assert low < high
    # A single look: the secondaries' boundary is their share of alpha, .005: a 99.5% CI.
    assert str(last["p99"].details["ci_level"]).startswith("99.5% (the last look's level)")
    for res in (interim, last):
        assert (res["max"].ci_low, res["max"].ci_high) == (None, None)
        assert "no percentile-bootstrap CI of a maximum" in str(res["max"].details["ci_level"])
        assert not any("CI" in w for w in res["max"].warnings)  # by design, not a warning
