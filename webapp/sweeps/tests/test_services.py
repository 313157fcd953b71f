"""Sweeps against the real database: submission through the one way in (each point a
comparison of the sweep's cohort), refusals that leave nothing, the verdicts stored when
the last point ends (from stored runs whose slope is known), and cancel."""

import logging

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied

from tests.support.factories import (
    MembershipFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
    ended_point,
)
from webapp.analysis.models import MetricVerdict
from webapp.comparisons.models import Comparison, Measurement
from webapp.comparisons.submission import ComparisonRequest, SubmissionError
from webapp.sweeps import services
from webapp.sweeps.models import Sweep, SweepPoint
from webapp.sweeps.summary import summary

pytestmark = pytest.mark.django_db
PARAM = "rcutree.jiffies_till_first_fqs"


@pytest.fixture
def few_runs(settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True


def _pair(**kw: object) -> ComparisonRequest:
    fields: dict[str, object] = {
        "tree": TreeFactory.create().name, "base_ref": "v6.12", "head_ref": "rcu/next",
        "benchmarks": ("sync-rcu-latency",), "target": "qemu-x86_64", "min_runs": 4,
        "max_runs": 8,
    }  # fmt: skip
    return ComparisonRequest(**{**fields, **kw})  # type: ignore[arg-type]


def _sweep(values: tuple[str, ...] = ("1", "2", "4")) -> Sweep:
    return services.submit_sweep(services.SweepRequest(
        pair=_pair(), axis="cmdline", parameter=PARAM, values=values, log_axis=True,
    ))  # fmt: skip


def test_each_point_is_a_comparison_of_the_cohort_with_the_parameter_on_both_sides(few_runs):
    sweep = _sweep()
    points = list(sweep.points.select_related("comparison"))
    assert [(p.position, p.value, p.x) for p in points] == [(0, "1", 1.0), (1, "2", 2.0),
                                                           (2, "4", 4.0)]  # fmt: skip
    for p in points:
        c = p.comparison
        assert (c.cohort, c.trigger) == (f"sweep-{sweep.pk}", "sweep")
        assert c.cmdline_a == c.cmdline_b == f"{PARAM}={p.value}"
        assert (c.min_runs, c.max_runs, c.target.name) == (4, 8, "qemu-x86_64")
    assert sweep.benchmark == "sync-rcu-latency"
    assert sweep.log_axis


@pytest.mark.parametrize(
    ("kw", "field", "message"),
    [
        ({"values": ("1",)}, "values", "a sweep has 2 to 6 points, got 1"),
        ({"values": ("1", "1")}, "values", "a value is given twice"),
        ({"values": ("1", "2 quiet")}, "values", "bad value '2 quiet'"),
        ({"parameter": "rcu tree"}, "parameter", "bad boot parameter name"),
        ({"parameter": "init"}, "cmdline_a", "init"),  # refused by the allow-list, point 0
    ],
)
def test_a_refused_sweep_names_the_field_and_stores_nothing(few_runs, kw, field, message):
    fields = {"pair": _pair(), "axis": "cmdline", "parameter": PARAM, "values": ("1", "2"),
              **kw}  # fmt: skip
    with pytest.raises(SubmissionError, match=message) as exc:
        services.submit_sweep(services.SweepRequest(**fields))
    assert exc.value.field == field
    assert not Sweep.objects.exists()
    assert not Comparison.objects.exists()


def test_a_parameter_the_pair_sets_already_is_refused(few_runs):
    with pytest.raises(SubmissionError, match=f"side B command line sets {PARAM} already"):
        services.submit_sweep(services.SweepRequest(
            pair=_pair(cmdline_b=f"{PARAM}=3"), axis="cmdline", parameter=PARAM,
            values=("1", "2"),
        ))  # fmt: skip


def test_a_topology_sweep_runs_each_point_on_a_target_derived_from_the_base(few_runs):
    TargetFactory.create(name="qemu-x86_64", sockets=1, cores=2, threads=2)
    sweep = services.submit_sweep(services.SweepRequest(
        pair=_pair(benchmarks=("smt-toggle",)), axis="topology", values=("2", "4", "8"),
    ))  # fmt: skip
    targets = [p.comparison.target for p in sweep.points.select_related("comparison__target")]
    assert [(t.sockets, t.cores, t.threads) for t in targets] == [(1, 1, 2), (1, 2, 2), (1, 4, 2)]
    assert [p.x for p in sweep.points.all()] == [2.0, 4.0, 8.0]
    assert all(t.queue == targets[1].queue for t in targets)  # the base's workers serve all
    assert sweep.log_axis
    assert sweep.benchmark == "smt-toggle"


def test_a_topology_the_host_cannot_run_is_refused_with_the_reason(few_runs, settings):
    settings.RCUBENCH_MAX_VCPUS = 8
    with pytest.raises(SubmissionError, match="16 vCPUs, more than this host allows") as exc:
        services.submit_sweep(services.SweepRequest(
            pair=_pair(), axis="topology", values=("4", "16"),
        ))  # fmt: skip
    assert exc.value.field == "values"
    assert not Sweep.objects.exists()
    assert not Comparison.objects.exists()


def test_a_variant_sweep_runs_the_benchmarks_variant_at_each_point_on_both_sides(few_runs):
    sweep = services.submit_sweep(services.SweepRequest(
        pair=_pair(), axis="variant", parameter="rcuscale.nwriters", values=("1", "4", "16"),
    ))  # fmt: skip
    points = list(sweep.points.select_related("comparison"))
    # 1 is the base's own value, 16 the named preset's: each configuration has one name.
    assert [(p.x, p.comparison.benchmarks) for p in points] == [
        (1.0, ["sync-rcu-latency"]), (4.0, ["sync-rcu-latency--nwriters-4"]),
        (16.0, ["sync-rcu-latency--many-writers"]),
    ]  # fmt: skip
    assert all(p.comparison.cmdline_a == p.comparison.cmdline_b == "" for p in points)
    assert (sweep.benchmark, sweep.parameter, sweep.log_axis) == (
        "sync-rcu-latency", "rcuscale.nwriters", True)  # a count: log-log  # fmt: skip
    # Each point is judged on its own benchmark's rows.
    rng = np.random.default_rng(5)
    for p in points:
        ended_point(p.comparison, p.x**0.1, p.x**0.4, rng)  # type: ignore[operator]
    assert services.conclude(sweep.pk)
    sweep.refresh_from_db()
    assert sweep.verdict == "scales-worse"
    s = summary(sweep)
    assert [r.benchmark for r in s.points] == [
        "sync-rcu-latency",
        "sync-rcu-latency--nwriters-4",
        "sync-rcu-latency--many-writers",
    ]
    assert [r.p_value for r in s.points] == [0.5, 0.5, 0.5]


@pytest.mark.parametrize(
    ("kw", "field", "message"),
    [
        (
            {"parameter": "rcuscale.gp_async"},
            "parameter",
            "sync-rcu-latency does not sweep 'rcuscale.gp_async'; sweepable: sync-rcu-latency: "
            "rcuscale.nwriters, rcuscale.writer_holdoff, rcuscale.writer_holdoff_jiffies; "
            "sync-rcu-latency-exp: rcuscale.nwriters",
        ),
        (
            {"values": ("1", "64")},
            "values",
            r"rcuscale.nwriters=64: not a whole number in \[1, 32\]",
        ),
        ({"values": ("0", "2")}, "values", r"rcuscale.nwriters=0: not a whole number in \[1, 32\]"),
        ({"values": ("2", "2.5")}, "values", "bad value|not a whole number"),
        ({"benchmarks": ("boot-time",)}, "parameter", "boot-time does not sweep"),
        (
            {"benchmarks": ("sync-rcu-latency", "boot-time")},
            "benchmarks",
            "a variant sweep runs one benchmark",
        ),
        ({"benchmarks": ("no-such-bench",)}, "benchmarks", "unknown benchmark"),
    ],
)
def test_a_refused_variant_sweep_names_the_field_and_stores_nothing(few_runs, kw, field, message):
    benchmarks = kw.pop("benchmarks", ("sync-rcu-latency",))
    fields = {"pair": _pair(benchmarks=benchmarks), "axis": "variant",
              "parameter": "rcuscale.nwriters", "values": ("1", "2"), **kw}  # fmt: skip
    with pytest.raises(SubmissionError, match=message) as exc:
        services.submit_sweep(services.SweepRequest(**fields))
    assert exc.value.field == field
    assert not Sweep.objects.exists()
    assert not Comparison.objects.exists()


# --- the verdicts, from stored runs ------------------------------------------------------


def test_b_growing_faster_than_a_along_the_axis_scales_worse_once_the_last_point_ends(few_runs):
    sweep = _sweep()
    rng = np.random.default_rng(3)
    points = list(sweep.points.select_related("comparison"))
    # A grows like x^0.2, B like x^0.5: B's exponent is 2.5 times A's.
    for p in points[:2]:
        ended_point(p.comparison, p.x**0.2, p.x**0.5, rng)  # type: ignore[operator]
    assert services.conclude(sweep.pk) is False  # a point still runs
    ended_point(points[2].comparison, 4**0.2, 4**0.5, rng)
    assert services.on_comparison_done(points[2].comparison_id) == sweep.pk
    sweep.refresh_from_db()
    assert sweep.done
    assert sweep.verdict == "scales-worse"
    scaling = sweep.result["scaling"]
    assert scaling["a"]["ci_low"] < 0.2 < scaling["a"]["ci_high"]
    assert scaling["b"]["ci_low"] < 0.5 < scaling["b"]["ci_high"]
    assert 2.0 < scaling["ratio"] < 3.0
    assert services.conclude(sweep.pk) is False  # concluded once
    s = summary(sweep)
    assert s.sentence.startswith("scales-worse: A's exponent 0.2")
    assert [len(p.runs_a) for p in s.points] == [12, 12, 12]
    # The run-level primary judged is stored with the verdict, for the API and the page.
    assert (sweep.metric, sweep.statistic) == ("writer_duration", "p50")
    assert (s.metric, s.statistic) == ("writer_duration", "p50")


def test_a_concluded_sweep_is_summarised_from_what_was_judged_without_reading_runs(
    few_runs, django_assert_num_queries
):
    sweep = _sweep()
    rng = np.random.default_rng(10)
    for p in sweep.points.select_related("comparison"):
        ended_point(p.comparison, p.x**0.2, p.x**0.5, rng)  # type: ignore[operator]
    assert services.conclude(sweep.pk)
    sweep = Sweep.objects.select_related("base_target").get(pk=sweep.pk)
    with django_assert_num_queries(0):  # no point, comparison, run or verdict read
        judged = summary(sweep)
    assert [len(p.runs_a) for p in judged.points] == [12, 12, 12]
    assert "points" not in judged.result  # the rows are the summary's points, not its result
    # The runs are gone (or would be read differently): the summary is what was judged.
    Measurement.objects.all().delete()
    MetricVerdict.objects.all().delete()
    assert summary(sweep) == judged
    assert summary(sweep).points[0].p_value == 0.5


def test_the_stored_rows_are_the_rows_read_live(few_runs):
    sweep = _sweep()
    rng = np.random.default_rng(11)
    ps = [0.02, 0.5, 0.001]
    for p, pv in zip(sweep.points.select_related("comparison"), ps, strict=True):
        verdict = "regression" if pv < 0.05 else "no-meaningful-change"
        ended_point(p.comparison, p.x**0.3, p.x**0.4, rng, verdict=verdict, p=pv)  # type: ignore[operator]
    Comparison.objects.update(alpha=0.03)
    services.conclude(sweep.pk)
    sweep.refresh_from_db()
    stored = summary(sweep)
    assert stored.points[0].verdict == "inconclusive"  # Holm's note is stored with the row
    # A sweep concluded before the rows were stored is summarised from its runs, alike.
    Sweep.objects.filter(pk=sweep.pk).update(
        result={k: v for k, v in sweep.result.items() if k != "points"}, metric="", statistic=""
    )
    sweep.refresh_from_db()
    assert summary(sweep) == stored


def test_the_same_kernels_at_every_point_scale_the_same(few_runs):
    sweep = _sweep()
    rng = np.random.default_rng(4)
    for p in sweep.points.select_related("comparison"):
        ended_point(p.comparison, p.x**0.3, p.x**0.3, rng)  # type: ignore[operator]
    services.conclude_unfinished()
    sweep.refresh_from_db()
    assert sweep.verdict in ("same", "inconclusive")
    assert sweep.verdict == "same"  # 12 runs of 2% noise resolve a 10% band here


def test_two_points_give_the_interaction_of_the_change_and_the_parameter(few_runs):
    sweep = _sweep(values=("1", "2"))
    rng = np.random.default_rng(5)
    first, second = sweep.points.select_related("comparison")
    ended_point(first.comparison, 1.0, 1.0, rng)  # no effect of B at the first value
    ended_point(
        second.comparison, 1.0, 1.10, rng, verdict="regression", p=0.001
    )  # +10% at the second
    services.conclude(sweep.pk)
    sweep.refresh_from_db()
    assert sweep.interaction_verdict == "interaction"
    i = sweep.result["interaction"]
    assert 7 < i["estimate"] < 13
    assert i["ci_low"] > 2


def test_holm_across_points_keeps_a_point_change_only_if_it_survives(few_runs):
    sweep = _sweep()
    rng = np.random.default_rng(6)
    ps = [0.02, 0.5, 0.001]  # Holm: 0.04, 0.5, 0.003
    for p, pv in zip(sweep.points.select_related("comparison"), ps, strict=True):
        ended_point(p.comparison, 1.0, 1.0, rng, verdict="regression" if pv < 0.05 else
             "no-meaningful-change", p=pv)  # fmt: skip
    Comparison.objects.update(alpha=0.03)
    rows = summary(sweep).points
    assert [r.verdict for r in rows] == ["inconclusive", "no-meaningful-change", "regression"]
    assert rows[0].p_holm == pytest.approx(0.04)
    assert "not after Holm across 3 points" in rows[0].note


def test_cancel_ends_every_unfinished_point_for_who_may_cancel(few_runs, caplog):
    sweep = _sweep(values=("1", "2"))
    tree = sweep.points.first().comparison.revision_a.tree  # type: ignore[union-attr]
    stranger = UserFactory.create()
    assert tree.public
    with pytest.raises(PermissionDenied, match="you may not cancel this sweep"):
        services.cancel_for(stranger, sweep.pk)
    admin = UserFactory.create()
    MembershipFactory.create(user=admin, tree=tree, role="admin")
    caplog.set_level(logging.INFO)
    services.cancel_for(admin, sweep.pk)
    assert set(Comparison.objects.values_list("state", "error_code")) == {("done", "cancelled")}
    assert SweepPoint.objects.count() == 2
    assert cancelling(caplog) == [{"sweep": sweep.pk, "by": admin.username, "points": 2}]
    reasons = set(Comparison.objects.values_list("error_message", flat=True))
    assert reasons == {f"sweep #{sweep.pk} cancelled by {admin.username}"}


def cancelling(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    """The "sweep state" lines logged with state cancelling, without the state."""
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict)]
    return [
        {k: v for k, v in x.items() if k in ("sweep", "by", "points")}
        for x in lines
        if x.get("event") == "sweep state" and x.get("state") == "cancelling"
    ]


def test_a_point_that_failed_is_named_and_the_others_still_give_the_slope(few_runs):
    sweep = _sweep()
    rng = np.random.default_rng(8)
    first, second, third = sweep.points.select_related("comparison")
    for p in (first, second):
        ended_point(p.comparison, p.x**0.3, p.x**0.3, rng)  # type: ignore[operator]
    Comparison.objects.filter(pk=third.comparison_id).update(
        state="done", result="failed", error_code="runs-failed",
        error_message="sync-rcu-latency side A: 12 of 12 runs failed",
    )  # fmt: skip
    services.conclude(sweep.pk)
    sweep.refresh_from_db()
    assert sweep.result["points_used"] == [0, 1]
    assert sweep.verdict in ("same", "inconclusive")
    assert sweep.error_message == (f"point 4 (#{third.comparison_id}) has no runs to judge: "
                                   "sync-rcu-latency side A: 12 of 12 runs failed")  # fmt: skip


def test_two_labels_are_a_2x2_with_no_slope_expected(few_runs):
    sweep = services.submit_sweep(services.SweepRequest(
        pair=_pair(), axis="cmdline", parameter="nohz", values=("on", "off"),
    ))  # fmt: skip
    rng = np.random.default_rng(9)
    first, second = sweep.points.select_related("comparison")
    ended_point(first.comparison, 1.0, 1.16, rng, verdict="regression", p=0.001)
    ended_point(second.comparison, 0.7, 0.7, rng)
    services.conclude(sweep.pk)
    sweep.refresh_from_db()
    assert (sweep.verdict, sweep.interaction_verdict, sweep.error_message) == (
        "", "interaction", "",
    )  # fmt: skip
    assert sweep.result["interaction"]["direction"] == "better"  # B's harm gone at "off"
