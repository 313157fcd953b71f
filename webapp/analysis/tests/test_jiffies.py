"""Jiffy statistics from stored runs: HZ from the builds, the co-primary row stored, and
the dispersion index D of A/A boots from `calibrate` (stored). Boots are the captured
consoles' grace periods resampled (benchmarks/sync_rcu_latency/fixtures), or the review's
boot-effect model where boots must differ."""

import json
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from stats.tests.test_jiffies import boots
from tests.support.factories import BuildFactory, ComparisonFactory, MeasurementFactory, RunFactory
from webapp.analysis.models import JiffyDispersion, MetricVerdict
from webapp.analysis.services import analyse_comparison, metric_inputs

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[3] / "benchmarks/sync_rcu_latency/fixtures"
REAL = np.concatenate([
    json.loads((FIXTURES / f"{n}.expected.json").read_text())["metrics"]["writer_duration"]
    for n in ("x86_64-pc-tcg", "ppc64le-pseries-tcg")
])  # fmt: skip


def _comparison(build_a, build_b, n, draw):
    """n ok runs per side in ABBA order; draw(side, i) -> the run's writer durations."""
    c = ComparisonFactory.create(benchmarks=["sync-rcu-latency"], build_a=build_a,
                                 build_b=build_b)  # fmt: skip
    order = 0
    for i in range(n):
        for side in "AB" if i % 2 == 0 else "BA":
            run = RunFactory.create(comparison=c, side=side, index=i, order=order,
                                    state="done", result="ok")  # fmt: skip
            order += 1
            MeasurementFactory.create(run=run, samples=[float(v) for v in draw(side, i)])
    return c


def _resampled(rng, shift_b=0.0):
    def draw(side, _i):
        s = rng.choice(REAL, 101)
        return s + (rng.random(101) < shift_b) if side == "B" else s

    return draw


def test_hz_comes_from_the_builds_config_and_must_agree_on_both_sides():
    rng = np.random.default_rng(1)
    c = _comparison(BuildFactory.create(), BuildFactory.create(), 2, _resampled(rng))
    inputs = {m.name: m for m in metric_inputs(c)}
    assert inputs["writer_duration"].jiffy_ms == 1.0  # x86_64.config: CONFIG_HZ_1000=y
    assert inputs["writer_duration"].tail_share_primary
    c.build_b = BuildFactory.create(kconfig="# CONFIG_HZ_1000 is not set\nCONFIG_HZ_250=y\n")
    c.save()
    assert {m.name: m for m in metric_inputs(c)}["writer_duration"].jiffy_ms is None


def test_the_tail_share_is_stored_as_a_co_primary_in_points():
    rng = np.random.default_rng(2)
    build = BuildFactory.create()
    c = _comparison(build, BuildFactory.create(), 24, _resampled(rng, shift_b=0.12))
    analyse_comparison(c.pk)
    stored = MetricVerdict.objects.filter(comparison=c, metric="writer_duration")
    rows = {v.statistic: v for v in stored}
    assert set(rows) == {"p50", "mean", "p90", "tail_share", "capped_mean", "p99", "max"}
    assert sorted(s for s, v in rows.items() if v.is_primary) == ["p50", "tail_share"]
    share = rows["tail_share"]
    assert share.details["unit"] == "pp"
    assert share.details["adjustment"] == "holm"
    assert share.details["relative"] is False
    assert share.verdict == "regression"
    c.refresh_from_db()
    assert c.verdict == "regression"


def test_calibrate_gives_d_of_an_aa_comparison_and_stores_it(capsys):
    rng = np.random.default_rng(3)
    build = BuildFactory.create()
    c = _comparison(build, build, 24, _resampled(rng))
    call_command("calibrate", comparison=c.pk, benchmark="sync-rcu-latency")
    out = capsys.readouterr().out
    assert f"sync-rcu-latency/writer_duration of comparison {c.pk} (A/A" in out
    assert "48 boots, 4848 samples" in out
    assert "above the mode of 6 jiffies (HZ 1000)" in out
    row = JiffyDispersion.objects.get()
    assert (row.build, row.source, row.hz, row.mode, row.boots) == (
        build, f"comparison {c.pk}", 1000, 6, 48)  # fmt: skip
    # Resampled GPs of two real boots: binomial sampling, D ~ 1.
    assert row.index is not None
    assert 0.5 < row.index < 1.5
    assert "D <= 1.5" in out


def test_calibrate_of_a_build_adds_d_and_flags_a_boot_effect(capsys):
    rng = np.random.default_rng(4)
    build = BuildFactory.create()
    effect = boots(rng, 48, mu=0.06, tau=1.0)  # the review's D ~ 9 world
    _comparison(build, build, 24, lambda side, i: effect[2 * i + (side == "B")])
    call_command("calibrate", build=build.pk, benchmark="sync-rcu-latency", splits=20)
    out = capsys.readouterr().out
    assert "noise floor" in out
    assert "D > 1.5: boot-level effect" in out
    index = JiffyDispersion.objects.get().index
    assert index is not None
    assert index > 3


def test_calibrate_refuses_d_of_two_kernels_or_of_a_metric_not_in_jiffies():
    rng = np.random.default_rng(5)
    c = _comparison(BuildFactory.create(), BuildFactory.create(), 2, _resampled(rng))
    with pytest.raises(CommandError, match="is not an A/A comparison"):
        call_command("calibrate", comparison=c.pk, benchmark="sync-rcu-latency")
    build = BuildFactory.create()
    same_kernel = _comparison(build, build, 2, _resampled(rng))
    same_kernel.cmdline_b = "rcutree.jiffies_till_first_fqs=3"
    same_kernel.save()
    with pytest.raises(CommandError, match=r"differ \(commit, arch, config or command line"):
        call_command("calibrate", comparison=same_kernel.pk, benchmark="sync-rcu-latency")
    with pytest.raises(CommandError, match="gps is not measured in jiffies"):
        call_command("calibrate", comparison=c.pk, benchmark="sync-rcu-latency", metric="gps")
    with pytest.raises(CommandError, match="no comparison with id 999999"):
        call_command("calibrate", comparison=999999, benchmark="sync-rcu-latency")
    assert not JiffyDispersion.objects.exists()
