"""Latencies in whole jiffies (STATS.md v3): the tail share and capped mean per run, the
co-primary tail share of sync-rcu-latency, the dispersion index D, and the pooled-sample
test as the negative control it is. Real captured boots where the data are real
(benchmarks/sync_rcu_latency/fixtures), the review's seeded model for the statistics."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import special
from scipy import stats as st

from stats import jiffies
from stats.battery import analyse
from stats.design import Design, Resolve
from stats.inputs import (
    MetricInput,
    RunSamples,
    primary_statistics,
    run_level_statistics,
    side_values,
)

FIXTURES = Path(__file__).resolve().parents[2] / "benchmarks/sync_rcu_latency/fixtures"


def _writer(name: str) -> np.ndarray:
    data = json.loads((FIXTURES / f"{name}.expected.json").read_text())
    return np.array(data["metrics"]["writer_duration"])


def boots(rng, k, n=100, mu=0.09, tau=0.0, delta=0.0):
    """The review's model (reviews/statistics-2026-11-26-sims/jiffy_model.py): each GP 6
    jiffies, or 7 with a boot's probability f_i = expit(logit mu + tau z_i), plus a small
    offset; `delta`: the patch ends that share (points of all GPs) of them a jiffy sooner."""
    f = special.expit(special.logit(mu) + tau * rng.standard_normal((k, 1)))
    seven = rng.random((k, n)) < f
    if delta:
        seven &= rng.random((k, n)) >= delta / mu
    return 6.0 + seven + np.abs(rng.normal(0, 0.02, (k, n)))


def _metric(a, b, *, jiffy_ms=1.0, co_primary=True) -> MetricInput:
    return MetricInput(
        "sync-rcu-latency", "writer_duration", "ms", per_run_samples=True,
        lower_is_better=True, primary=True,
        runs_a=[RunSamples(i, tuple(s)) for i, s in enumerate(a)],
        runs_b=[RunSamples(100 + i, tuple(s)) for i, s in enumerate(b)],
        threshold=2.0, jiffy_ms=jiffy_ms, tail_share_primary=co_primary,
    )  # fmt: skip


def test_a_real_boot_quantised_mode_tail_share_and_capped_mean():
    # x86_64 under TCG, a boot of a host whose boots spread (STATS.md v3): 101 GPs, 70 at 6
    # jiffies, one each at 4, 5 and 7, and 28 at 8 to 56.
    j = jiffies.quantise(_writer("x86_64-pc-tcg"), jiffies.jiffy_ms(1000))
    assert jiffies.pooled_mode([j]) == 6
    assert jiffies.tail_share(j, 6) == pytest.approx(100 * 29 / 101)
    # min(j, 8): the 28 above 7 count as 8.
    assert jiffies.capped_mean(j, 6) == pytest.approx((4 + 5 + 70 * 6 + 7 + 28 * 8) / 101)
    shares = jiffies.shares([j])
    assert shares[6] == pytest.approx(70 / 101)
    assert sum(shares.values()) == pytest.approx(1)


def test_the_mode_is_pooled_over_both_sides_so_any_relabelling_gets_the_same_values():
    rng = np.random.default_rng(1)
    a, b = boots(rng, 6, mu=0.3), boots(rng, 6, mu=0.7)  # B's own mode would be 7
    m = _metric(a, b)
    va, vb = side_values(m, "tail_share", "x")
    # Mode 7 pooled... or 6: whichever, it is one count for both sides, so a run's value
    # does not depend on the side it is on.
    swapped = _metric(np.r_[a[:3], b[:3]], np.r_[a[3:], b[3:]])
    sa, sb = side_values(swapped, "tail_share", "x")
    assert sorted(np.r_[va, vb]) == pytest.approx(sorted(np.r_[sa, sb]))


def test_jiffy_statistics_only_for_a_metric_in_jiffies_and_the_tail_share_co_primary():
    rng = np.random.default_rng(2)
    a, b = boots(rng, 4), boots(rng, 4)
    assert run_level_statistics(_metric(a, b)) == (
        "p50", "mean", "p90", "tail_share", "capped_mean")  # fmt: skip
    assert run_level_statistics(_metric(a, b, jiffy_ms=None)) == ("p50", "mean", "p90")
    assert primary_statistics(_metric(a, b)) == ("p50", "tail_share")
    assert primary_statistics(_metric(a, b, co_primary=False)) == ("p50",)
    assert primary_statistics(_metric(a, b, jiffy_ms=None)) == ("p50",)


def test_resolve_counts_the_co_primary():
    rng = np.random.default_rng(3)
    a, b = boots(rng, 24), boots(rng, 24)
    d = Design(n_perm=99)
    two, one = (
        Resolve.of([_metric(a, b)], d, 1),
        Resolve.of([_metric(a, b, co_primary=False)], d, 1),
    )
    assert two.primary == pytest.approx(d.alpha_at(1, d.primary_alpha / 2))
    assert one.primary == pytest.approx(d.alpha_at(1, d.primary_alpha))


def test_a_patch_moving_grace_periods_a_jiffy_is_a_co_primary_regression_in_points():
    # Real boots (the four captured ones) resampled: B has 12 of every 100 GPs a jiffy
    # longer. The p50 cannot see it; the tail share, gated with Holm beside it, does.
    rng = np.random.default_rng(4)
    real = np.concatenate([_writer(n) for n in ("x86_64-pc-tcg", "ppc64le-pseries-tcg")])
    a = [rng.choice(real, 101) for _ in range(24)]
    b = [rng.choice(real, 101) + (rng.random(101) < 0.12) for _ in range(24)]
    result = analyse([_metric(a, b)], Design(n_perm=999))
    rows = {r.statistic: r for r in result.results}
    share = rows["tail_share"]
    assert share.is_primary
    assert share.gated_family == "holm"
    assert rows["p50"].is_primary
    assert (share.unit, share.relative, share.threshold) == ("pp", False, 1.0)
    assert share.shift is not None
    assert 6 < share.shift < 18  # points of all GPs, not %
    assert share.verdict == "regression"
    assert result.verdict == "regression"
    assert rows["capped_mean"].unit == "jiffies"
    assert not rows["capped_mean"].is_primary
    levels = sorted(float(str(r.details["holm_level"])) for r in (share, rows["p50"]))
    d = Design()
    assert levels == pytest.approx([d.primary_alpha / 2, d.primary_alpha])


def test_dispersion_index_is_about_1_for_binomial_boots_and_large_with_a_boot_effect():
    rng = np.random.default_rng(5)
    binomial = jiffies.dispersion([jiffies.quantise(x, 1.0) for x in boots(rng, 48)])
    assert binomial.mode == 6
    assert 0.06 < binomial.share_above < 0.12
    assert binomial.index is not None
    assert binomial.p_value is not None
    assert 0.5 < binomial.index < 1.5
    assert binomial.p_value > 0.01
    boot_level = jiffies.dispersion([jiffies.quantise(x, 1.0)
                                     for x in boots(rng, 48, mu=0.06, tau=1.0)])  # fmt: skip
    assert boot_level.index is not None
    assert boot_level.p_value is not None
    assert boot_level.index > 3
    assert boot_level.p_value < 1e-6
    assert boot_level.boot_level


def test_dispersion_is_var_over_binomial_variance_with_equal_boots():
    j = [np.array([6] * (100 - x) + [7] * x) for x in (5, 9, 13, 9)]
    d = jiffies.dispersion(j)
    x = np.array([5, 9, 13, 9])
    p = x.sum() / 400
    assert d.index == pytest.approx(np.var(x, ddof=1) / (100 * p * (1 - p)))
    assert jiffies.dispersion([np.full(10, 6), np.full(10, 6)]).index is None


def test_the_pooled_sample_test_is_the_negative_control_it_cries_wolf_once_boots_differ():
    # A/A, 96 boots per side with a boot effect (tau 1.0, D ~ 9): the test on all GPs
    # pooled rejects far above its level; the run-level test on the tail share does not.
    rng = np.random.default_rng(6)
    pooled = run_level = 0
    sims = 200
    for _ in range(sims):
        a = [jiffies.quantise(x, 1.0) for x in boots(rng, 96, mu=0.06, tau=1.0)]
        b = [jiffies.quantise(x, 1.0) for x in boots(rng, 96, mu=0.06, tau=1.0)]
        pooled += jiffies.pooled_proportion_p(a, b) <= 0.0381
        mode = jiffies.pooled_mode(a + b)
        sa = [jiffies.tail_share(j, mode) for j in a]
        sb = [jiffies.tail_share(j, mode) for j in b]
        run_level += st.mannwhitneyu(sa, sb).pvalue <= 0.0381
    assert pooled / sims > 0.30  # ~50% (the review: 51% at D 9)
    assert run_level / sims < 0.08  # 3.8% expected; SE 1.4 points
