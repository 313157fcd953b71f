"""Every metric's battery: its statistics and their families, the warnings, thresholds,
the tails' CIs, the cross-checks, how each p was obtained, and never a NaN or inf."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as st

from stats import methods
from stats.battery import ThresholdUnset, analyse
from stats.design import Resolve, conclude
from stats.inputs import MetricInput, RunSamples
from stats.tests.conftest import _design, _metric, _num, _values
from stats.verdicts import (
    INCONCLUSIVE,
    NO_CHANGE,
    REGRESSION,
    SMALL,
    TooFewRuns,
    UnreportableResult,
    check_reportable,
    non_finite,
)


def test_absolute_threshold_for_memory(rng):
    m = _metric(rng, shift=0.02, cv=0.002, name="slab_kb_peak_d0", benchmark="bpf-slab",
                threshold=64.0, threshold_is_absolute=True)  # fmt: skip
    r = analyse([m], _design()).results[0]
    assert not r.relative
    assert r.shift == pytest.approx(20, abs=2)  # kB: 2% of 1000
    assert r.verdict == SMALL  # real, but under 64 kB


def test_latency_battery_and_families(rng):
    def runs(first, factor):
        return [RunSamples(first + 2 * i, tuple(rng.lognormal(math.log(6 * factor), 0.1, 30)))
                for i in range(24)]  # fmt: skip

    lat = MetricInput("sync-rcu-latency", "writer_duration", "ms", True, True, True,
                      runs(0, 1.0), runs(1, 1.08))  # fmt: skip
    other = _metric(rng, name="gps", primary=False, benchmark="sync-rcu-latency")
    res = analyse([lat, other], _design())
    by = {(r.metric, r.statistic): r for r in res.results}
    assert set(by) == {("writer_duration", s) for s in ("p50", "mean", "p90", "p99", "max")} | {
        ("gps", "value")
    }
    assert by["writer_duration", "p50"].is_primary
    assert by["writer_duration", "p50"].adjustment == "holm"
    assert by["writer_duration", "p99"].adjustment == "bh"
    assert by["writer_duration", "p99"].warnings[0].startswith("too few samples for p99")
    assert by["writer_duration", "p50"].verdict == REGRESSION
    assert res.results[0].verdict == REGRESSION  # sorted by severity


def _drifting(runs, per_run):
    return [RunSamples(r.order, (r.samples[0] * (1 + per_run * i),))
            for i, r in enumerate(runs)]  # fmt: skip


def test_drift_is_warned_when_the_sides_drift_apart_not_together(rng):
    m = _metric(rng, cv=0.01)
    apart = MetricInput(**{**m.__dict__, "runs_a": _drifting(m.runs_a, 0.01)})
    r = analyse([apart], _design()).results[0]
    assert any(w.startswith("drift: the sides trend differently") for w in r.warnings)
    assert _num(r, "drift_rho_a") > 0.9 > abs(_num(r, "drift_rho_b"))
    # The same drift on both sides (the host warming up) is what ABBA balances: no warning.
    together = MetricInput(**{**m.__dict__, "runs_a": _drifting(m.runs_a, 0.01),
                              "runs_b": _drifting(m.runs_b, 0.01)})  # fmt: skip
    r = analyse([together], _design()).results[0]
    assert not any(w.startswith("drift") for w in r.warnings)
    assert _num(r, "p_drift") > 0.01


def test_nan_sample_names_the_run(rng):
    m = _metric(rng)
    bad = [*m.runs_b[:3], RunSamples(77, (math.nan,)), *m.runs_b[4:]]
    with pytest.raises(ValueError, match=r"boot-time/kernel_to_init_ms side B run 77: 1 NaN"):
        analyse([MetricInput(**{**m.__dict__, "runs_b": bad})], _design())


def test_complete_separation_is_decided(rng):
    m = _metric(rng)
    high = [RunSamples(r.order, (r.samples[0] * 10,)) for r in m.runs_b]
    r = analyse([MetricInput(**{**m.__dict__, "runs_b": high})], _design()).results[0]
    assert r.p_value < 1e-10
    assert r.verdict == REGRESSION


# --- no NaN or inf, the cross-checks, and how each p was obtained --------------------------


def _latency(runs_a, runs_b, **kw):
    """sync-rcu-latency writer_duration (lower is better) from per-run sample lists."""

    def runs(first, samples):
        return [RunSamples(first + 2 * i, tuple(float(v) for v in s))
                for i, s in enumerate(samples)]  # fmt: skip

    return MetricInput("sync-rcu-latency", "writer_duration", "ms", True, True, True,
                       runs(0, runs_a), runs(1, runs_b), **kw)  # fmt: skip


def _sign(r):
    """The stored sign test of a result (details are typed as objects)."""
    return r.details["sign_test"]


def test_a_zero_p99_side_gives_an_undefined_ratio_with_the_reason_never_inf(rng):
    # Side A's runs measure nothing but zeros; B's are ordinary latencies. Single look: the
    # secondaries' share of alpha (.005) over 4 of them is .00125, which 1,999 relabellings
    # do not resolve: raised to 8,000, and p = 1/8001 is significant.
    zeros = [np.zeros(100)] * 24
    slow = [rng.lognormal(math.log(6.0), 0.1, 100) for _ in range(24)]
    res = analyse([_latency(zeros, slow)], _design(max_runs=24))
    assert non_finite(res.results) == []
    by = {r.statistic: r for r in res.results}
    for name in ("p99", "max"):
        r = by[name]
        assert (r.shift, r.ci_low, r.ci_high, r.details["ratio"]) == (None, None, None, None)
        assert f"{name} ratio undefined: side A's pooled {name} is 0" in r.warnings
        assert (r.details["p_permutations"], r.p_value) == (8000, pytest.approx(1 / 8001))
        # Unbounded in %, B above A, lower is better: beyond any threshold, worse.
        assert r.verdict == REGRESSION
    assert by["p50"].relative is False  # per-run medians of 0: the absolute shift


def test_two_runs_of_one_sample_per_side_the_smallest_design_gives_only_numbers(rng):
    design = _design(min_runs=2, max_runs=4, step=2, allow_few_runs=True)
    res = analyse([_latency([[5.0], [5.5]], [[6.0], [7.0]])], design)
    assert non_finite(res.results) == []
    assert {r.statistic for r in res.results} == {"p50", "mean", "p90", "p99", "max"}


def test_one_run_per_side_is_refused_by_name_even_with_the_test_override(rng):
    with pytest.raises(TooFewRuns, match="1 runs per side; at least 2 are needed"):
        analyse([_values([5.0], [6.0])], _design(min_runs=2, max_runs=4, step=2,
                                                 allow_few_runs=True))  # fmt: skip
    with pytest.raises(ValueError, match=r"bad design: runs 1\.\.4"):
        _design(min_runs=1, max_runs=4, step=1, allow_few_runs=True)


def test_equal_constant_sides_are_unchanged_with_undefined_cross_checks(rng):
    r = analyse([_values([5.0] * 24, [5.0] * 24)], _design()).results[0]
    assert non_finite(r) == []
    assert (r.p_value, r.details["p_method"], r.p_mannwhitney) == (1.0, "exact", 1.0)
    assert (r.shift, r.ci_low, r.ci_high) == (0.0, 0.0, 0.0)
    assert r.p_median is None
    assert _sign(r)["p"] is None
    assert ("constant data (every run 5): Mood's median test and the sign test are "
            "undefined") in r.warnings  # fmt: skip
    assert r.verdict == NO_CHANGE


def test_constant_sides_that_differ_are_a_resolved_tiny_p_never_nan(rng):
    r = analyse([_values([5.0] * 24, [6.0] * 24)], _design()).results[0]
    assert non_finite(r) == []
    # No relabelling is as extreme (but the mirror): the permutations were raised until
    # the first look's boundary (.045/64) has 10 expected beyond it, and p is their floor.
    b = int(_num(r, "p_permutations"))
    assert r.details["p_method"] == "permutation"
    boundary = Resolve.of([_values([5.0] * 24, [6.0] * 24)], _design(), 1).primary
    assert boundary == pytest.approx(0.045 / 64)
    assert b == methods.permutations_to_resolve(boundary) == 14_223
    assert r.p_value == pytest.approx(1 / (b + 1))
    assert r.details["statistic_w"] is None  # W = +inf is not stored as a float
    assert str(r.details["statistic_w_undefined"]).startswith("W is +inf")
    assert r.shift == pytest.approx(20.0)
    assert (_sign(r)["k"], _sign(r)["n"]) == (24, 24)
    assert _sign(r)["p"] == pytest.approx(2 / 2**24)
    assert r.verdict == REGRESSION


def test_complete_separation_gives_p_below_001_never_nan(rng):
    r = analyse([_values(range(1000, 1024), range(1100, 1124))], _design()).results[0]
    assert non_finite(r) == []
    assert r.p_value == pytest.approx(2 / math.comb(48, 24))  # exact: the split and its mirror
    assert r.details["p_method"] == "exact"
    assert r.p_median is not None
    assert r.p_median < 0.01


def test_the_sign_test_and_moods_p_are_stored_for_each_run_level_statistic(rng):
    a = [1000.0 + v for v in range(24)]  # median 1011.5
    b = [1000.0 + v for v in (0, 1, 2, 3)] + [1012.0 + v for v in range(20)]
    r = analyse([_values(a, b)], _design()).results[0]
    assert r.details["sign_test"] == {
        "k": 20, "n": 24, "below": 4, "ties": 0, "median_a": 1011.5,
        "p": pytest.approx(st.binomtest(20, 24).pvalue), "above_is": "worse",
    }  # fmt: skip
    assert r.p_median == methods.mood_median(a, b).p_value
    higher = analyse([_values(a, b, lower_is_better=False)], _design()).results[0]
    assert _sign(higher)["above_is"] == "better"


def test_every_p_says_how_it_was_obtained(rng):
    def runs(factor):
        return [rng.lognormal(math.log(6 * factor), 0.1, 30) for _ in range(24)]

    res = analyse([_latency(runs(1.0), runs(1.02))], _design())
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
        resolve = Resolve.of([_latency(runs(1.0), runs(1.0))], _design(), 1)
        assert b in (
            1999,
            *map(methods.permutations_to_resolve, (resolve.primary, resolve.secondary)),
        )
        assert r.p_value >= 1 / (b + 1)


def test_a_nan_or_inf_anywhere_in_a_result_is_refused_by_name(rng):
    (r,) = analyse([_values([5.0] * 24, [5.0] * 24)], _design()).results
    check_reportable(r)
    nan_ci = dataclasses.replace(r, ci_low=math.nan)
    with pytest.raises(UnreportableResult, match=r"kernel_to_init_ms\[value\].*ci_low = nan"):
        check_reportable(nan_ci)
    inf_detail = dataclasses.replace(r, details={**r.details, "repeated_ci": [0.0, math.inf]})
    with pytest.raises(UnreportableResult, match=r"details\['repeated_ci'\]\[1\] = inf"):
        check_reportable(inf_detail)
    with pytest.raises(UnreportableResult, match="ci_low = nan"):  # every look checks
        conclude([nan_ci], _design(), 24)


def test_a_permutation_p_below_its_resolution_must_be_marked(rng):
    (r,) = analyse([_values([5.0] * 24, [5.0] * 24)], _design()).results
    details = {**r.details, "p_method": "permutation", "p_permutations": 1999}
    unmarked = dataclasses.replace(r, p_value=1e-6, details=details)
    with pytest.raises(UnreportableResult, match=r"permutation p 1e-06 is below 1/\(1999"):
        check_reportable(unmarked)
    marked = dataclasses.replace(unmarked, details={**details, "p_method": "t-approximation"})
    check_reportable(marked)
    with pytest.raises(UnreportableResult, match="does not say how p was obtained"):
        check_reportable(dataclasses.replace(r, details={}))


# --- thresholds and tails' CIs -----------------------------------------------------------


def test_an_absolute_threshold_left_unset_is_refused_not_zero(rng):
    m = dataclasses.replace(_metric(rng), threshold=None, threshold_is_absolute=True)
    with pytest.raises(ThresholdUnset, match="boot-time/kernel_to_init_ms: an absolute threshold"):
        analyse([m], _design())


def test_values_at_or_below_zero_get_the_threshold_in_the_unit(rng):
    # A median of -100 (e.g. a signed offset): the 2% threshold is 2 units, B - A is absolute.
    a, b = np.linspace(-101, -99, 24), np.linspace(-101, -99, 24) + 0.2
    r = analyse([_values(list(a), list(b))], _design()).results[0]
    assert (r.relative, r.threshold) == (False, pytest.approx(2.0))
    assert "threshold is 2 ms (2% of A's median)" in r.warnings[0]
    assert r.verdict == NO_CHANGE  # 0.2 units, the repeated CI well inside +-2
    # Around 0 there is no % of A's median: no threshold, so "no meaningful change" only
    # where no pair of runs differs at all.
    zero = analyse([_values(list(a + 100), list(b + 100))], _design()).results[0]
    assert zero.details["threshold_undefined"] is True
    assert "threshold is undefined (A's median is 0)" in zero.warnings[0]
    assert zero.verdict == INCONCLUSIVE
    same = analyse([_values([0.0] * 24, [0.0] * 24)], _design()).results[0]
    assert (same.details["threshold_undefined"], same.verdict) == (True, NO_CHANGE)


def test_tail_cis_where_the_comparison_ends_at_its_level_and_never_for_the_max(rng):
    def runs(n, factor=1.0):
        return [rng.lognormal(math.log(6 * factor), 0.1, 30) for _ in range(n)]

    # A/A at the first of four looks: the primary is undecided, the comparison goes on.
    going = analyse([_latency(runs(24), runs(24))], _design())
    assert going.need_more_runs > 0
    interim = {r.statistic: r for r in going.results}
    assert (interim["p99"].ci_low, interim["p99"].ci_high) == (None, None)
    assert str(interim["p99"].details["ci_level"]).startswith("none at a look where the "
                                                               "comparison goes on")  # fmt: skip
    # A clear regression ends the comparison at the first look: the p99 gets its CI there,
    # at that look's level (the secondaries' linear spending: 1 - .005 x 24/96), not only
    # at the last look (STATS.md v3).
    ended = analyse([_latency(runs(24), runs(24, 1.3))], _design())
    assert (ended.look, ended.need_more_runs, ended.verdict) == (1, 0, REGRESSION)
    early = {r.statistic: r for r in ended.results}
    low, high = early["p99"].ci_low, early["p99"].ci_high
    assert low is not None
    assert high is not None
    assert 0 < low < high
    assert str(early["p99"].details["ci_level"]).startswith("99.88% (the level of the look")
    assert early["p99"].verdict == REGRESSION  # on its CI: it reaches the 2% threshold
    last = {r.statistic: r for r in
            analyse([_latency(runs(24), runs(24))], _design(max_runs=24)).results}  # fmt: skip
    low, high = last["p99"].ci_low, last["p99"].ci_high
    assert low is not None
    assert high is not None
    assert low < high
    # A single look: the secondaries' boundary is their share of alpha, .005: a 99.5% CI.
    assert str(last["p99"].details["ci_level"]).startswith("99.50% (the level of the look")
    for res in (interim, early, last):
        assert (res["max"].ci_low, res["max"].ci_high) == (None, None)
        assert "no percentile-bootstrap CI of a maximum" in str(res["max"].details["ci_level"])
        assert not any("CI" in w for w in res["max"].warnings)  # by design, not a warning


def test_every_run_level_statistic_is_tested_for_modes(rng):
    # 7 of 24 boots of B put their slowest 15% of grace periods 25% higher: the per-run
    # p90 splits into two modes, the per-run p50 does not. The warning is on the p90 row.
    def runs(slow):
        out = []
        for k in range(24):
            x = np.sort(rng.lognormal(math.log(6.0), 0.05, 100))
            if k < slow:
                x[85:] *= 1.25
            out.append(x)
        return out

    res = analyse([_latency(runs(0), runs(7))], _design())
    by = {r.statistic: r for r in res.results}
    assert any(w.startswith("multimodal? side B") for w in by["p90"].warnings)
    assert by["p90"].details["modality_b"]["multimodal"]  # type: ignore[index]
    assert not any(w.startswith("multimodal?") for w in by["p50"].warnings)
    assert "modality_a" in by["mean"].details
