"""Verdicts, multiplicity and the sequential policy of the engine."""

import math

import numpy as np
import pytest

from webapp.analysis import engine as E


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
    assert design.bounds == pytest.approx((3.92, 2.77, 2.30, 2.04), abs=0.012)
    assert [design.look_at(n) for n in (24, 47, 48, 96)] == [1, 1, 2, 4]


def test_clear_regression_stops_at_the_first_look(rng):
    res = E.analyse([_metric(rng, shift=0.10)], _design())
    (primary,) = [r for r in res.results if r.is_primary]
    assert primary.verdict == E.REGRESSION
    assert primary.adjustment == "holm"
    assert primary.shift == pytest.approx(10, abs=3)
    assert primary.ci_low < primary.shift < primary.ci_high
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


def test_drift_is_warned(rng):
    m = _metric(rng, cv=0.01)
    drifting = [E.RunSamples(r.order, (r.samples[0] * (1 + 0.01 * i),))
                for i, r in enumerate(m.runs_a)]  # fmt: skip
    m = E.MetricInput(**{**m.__dict__, "runs_a": drifting})
    r = E.analyse([m], _design()).results[0]
    assert any(w.startswith("drift: side A") for w in r.warnings)


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
    # (level 1 - 8.5e-5, about +-2.3%) does not: keep going. At a last look it is enough.
    metric = _metric(rng, shift=0.0, cv=0.02)
    interim = E.analyse([metric], _design()).results[0]
    assert -2 < interim.ci_low < interim.ci_high < 2
    assert (interim.verdict, interim.pending) == (E.INCONCLUSIVE, True)
    final = E.analyse([metric], _design(max_runs=24)).results[0]
    assert final.verdict == E.NO_CHANGE
