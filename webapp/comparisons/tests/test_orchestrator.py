"""The comparison state machine, step by step against the real database. Builds and runs
end here by writing their rows as the workers do; the real workers, builds and boots drive
it in test_end_to_end.py."""

import math
import random
import re
from collections import Counter
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from tests.support.factories import TreeFactory
from webapp.comparisons import orchestrator
from webapp.comparisons.models import Comparison, Measurement, Run
from webapp.comparisons.runs import _end_run
from webapp.comparisons.schedule import abba_slots, replacement_pairs
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.states import Result, State
from webapp.trees.models import Build, Revision

pytestmark = pytest.mark.django_db


# --- the ABBA schedule (pure) ------------------------------------------------------------


def test_abba_blocks_balance_sides_and_interleave_benchmarks():
    slots = abba_slots(["sync-rcu-latency", "boot-time"], 24, random.Random(1))
    assert Counter(slots) == {(b, s): 24 for b in ("sync-rcu-latency", "boot-time") for s in "AB"}
    blocks = [slots[i : i + 4] for i in range(0, len(slots), 4)]
    for k, block in enumerate(blocks):
        assert [side for _, side in block] in (list("ABBA"), list("BAAB"))
        assert {b for b, _ in block} == {("sync-rcu-latency", "boot-time")[k % 2]}
    kinds = {tuple(s for _, s in block) for block in blocks}
    assert kinds == {tuple("ABBA"), tuple("BAAB")}  # both orders occur: no side always first


def test_abba_odd_count_ends_with_a_pair_and_is_reproducible():
    slots = abba_slots(["x"], 3, random.Random(7))
    assert Counter(s for _, s in slots) == {"A": 3, "B": 3}
    assert slots == abba_slots(["x"], 3, random.Random(7))
    with pytest.raises(ValueError, match="per_side"):
        abba_slots(["x"], 0, random.Random(0))


def test_replacement_pairs_put_each_replacement_beside_the_other_side():
    failed = [("x", "B"), ("x", "B"), ("y", "A"), ("x", "A")]
    pairs = replacement_pairs(failed, random.Random(3))
    assert pairs == replacement_pairs(failed, random.Random(3))  # reproducible
    for pair in pairs:
        assert sorted(side for _, side, _ in pair) == ["A", "B"]
        assert len({bench for bench, _, _ in pair}) == 1
    # Every failed run replaced once; x's A and B replacements share a pair, the others
    # get an extra run of the other side (None).
    assert sorted(i for pair in pairs for _, _, i in pair if i is not None) == [0, 1, 2, 3]
    assert sum(i is None for pair in pairs for _, _, i in pair) == 2
    orders = {
        tuple(side for _, side, _ in pair)
        for pair in replacement_pairs(failed * 8, random.Random(1))
    }
    assert orders == {("A", "B"), ("B", "A")}  # no side always first


# --- submission ---------------------------------------------------------------------------


@pytest.fixture
def few_runs(settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    settings.RCUBENCH_REDISPATCH_SECONDS = 60


def _request(**kw: object) -> ComparisonRequest:
    fields: dict[str, object] = {
        "tree": TreeFactory.create().name,
        "base_ref": "v6.12",
        "head_ref": "rcu/next",
        "benchmarks": ("sync-rcu-latency",),
        "target": "qemu-x86_64",
        "min_runs": 4,
        "max_runs": 8,
    }
    return ComparisonRequest(**{**fields, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"base_ref": "--upload-pack=touch /tmp/x"}, "bad base ref"),
        ({"head_ref": "a..b"}, "bad head ref"),
        ({"benchmarks": ("no-such-bench",)}, "unknown benchmark 'no-such-bench'"),
        ({"benchmarks": ()}, "no benchmark requested"),
        ({"min_runs": 23}, "at least 24 runs per side are needed, got 23"),
        ({"min_runs": 24, "max_runs": 12}, r"max runs \(12\) is below min runs \(24\)"),
        ({"alpha": 0.7}, "alpha must be in"),
        ({"cmdline_b": "a\nb"}, "side B command line must be printable"),
    ],
)
def test_bad_requests_are_refused_with_the_reason_and_nothing_is_stored(change, message):
    kw = {"min_runs": 24, "max_runs": 96, **change}
    with pytest.raises(SubmissionError, match=message):
        submit_comparison(_request(**kw))
    assert not Comparison.objects.exists()
    assert not Revision.objects.exists()


def test_a_boot_parameter_ab_shares_one_revision_and_one_build(few_runs):
    c = submit_comparison(_request(head_ref="", cmdline_b="rcutree.jiffies_till_first_fqs=1"))
    assert c.revision_a_id == c.revision_b_id
    orchestrator.advance(c.pk)
    c.refresh_from_db()
    assert c.state == "building"
    assert c.build_a_id == c.build_b_id
    assert Build.objects.count() == 1
    assert c.cmdline_b == "rcutree.jiffies_till_first_fqs=1"


# --- building -----------------------------------------------------------------------------


def _started(**kw: object) -> Comparison:
    c = submit_comparison(_request(**kw))
    orchestrator.advance(c.pk)
    c.refresh_from_db()
    return c


def _end_build(build_id: int | None, result: str = "ok", code: str = "", message: str = "") -> None:
    assert build_id is not None
    Build.objects.filter(pk=build_id).update(
        state=State.DONE, result=result, error_code=code, error_message=message,
        artifact_dir="/nonexistent" if result == "ok" else "",
    )  # fmt: skip
    orchestrator.on_build_done(build_id)


def test_a_failed_build_ends_the_comparison_naming_side_and_error(few_runs):
    c = _started()
    assert c.build_a_id != c.build_b_id
    _end_build(c.build_a_id)
    _end_build(c.build_b_id, "failed", "patch-failed", "patch 1 ('rcu: x') does not apply")
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code) == ("done", "failed", "build-failed")
    assert "side B (rcu/next): patch-failed: patch 1 ('rcu: x') does not apply" in c.error_message
    assert not c.runs.exists()


def _running(**kw: object) -> Comparison:
    c = _started(**kw)
    _end_build(c.build_a_id)
    _end_build(c.build_b_id)
    c.refresh_from_db()
    return c


def test_built_kernels_get_abba_runs_for_the_first_look(few_runs):
    c = _running()
    assert (c.state, c.scheduled_per_side) == ("running", 4)
    runs = list(c.runs.order_by("order"))
    assert [r.order for r in runs] == list(range(8))
    assert Counter(r.side for r in runs) == {"A": 4, "B": 4}
    assert {r.index for r in runs if r.side == "A"} == {0, 1, 2, 3}
    assert all(r.state == "queued" and r.dispatched_at for r in runs)


# --- runs ---------------------------------------------------------------------------------


def _finish_run(run: Run, result: str = "ok", code: str = "", samples: list[float] | None = None):
    Run.objects.filter(pk=run.pk).update(state=State.RUNNING)
    run.refresh_from_db()
    assert _end_run(run, result, code, "" if result == "ok" else f"{code} happened")
    if samples is not None:
        Measurement.objects.create(
            run=run, benchmark=run.benchmark, metric="writer_duration", unit="ms",
            samples=samples,
        )  # fmt: skip
    orchestrator.advance(run.comparison_id)


def _new_runs(c: Comparison, after: int) -> list[Run]:
    return list(c.runs.filter(order__gt=after).order_by("order"))


def test_a_failed_run_is_replaced_in_a_fresh_pair_with_a_run_of_the_other_side(few_runs):
    c = _running()
    first = c.runs.get(order=0)
    other = "B" if first.side == "A" else "A"
    _finish_run(first, "failed", "panic")
    pair = _new_runs(c, after=7)
    # A fresh AB or BA pair at the end of the schedule, never the failed side alone.
    assert [r.order for r in pair] == [8, 9]
    assert sorted(r.side for r in pair) == ["A", "B"]
    replacement = Run.objects.get(retry_of=first)
    (extra,) = [r for r in pair if r.pk != replacement.pk]
    assert (replacement.side, replacement.benchmark, replacement.state) == (
        first.side, first.benchmark, "queued",
    )  # fmt: skip
    assert (extra.side, extra.benchmark, extra.retry_of_id) == (other, first.benchmark, None)
    assert replacement.index == 4  # a new slot of its side: the failed one stays as it ended
    first.refresh_from_db()
    assert (first.result, first.error_code) == ("failed", "panic")
    orchestrator.advance(c.pk)  # a duplicate event adds nothing
    assert [r.pk for r in _new_runs(c, after=7)] == [r.pk for r in pair]


def test_failures_on_both_sides_share_one_pair_and_a_failed_extra_run_is_not_replaced(few_runs):
    c = _running()
    a = c.runs.get(order=0)
    b = c.runs.exclude(side=a.side).order_by("order").first()
    assert b is not None
    for run in (a, b):  # both end before the orchestrator looks
        Run.objects.filter(pk=run.pk).update(state=State.RUNNING)
        run.refresh_from_db()
        assert _end_run(run, "failed", "timeout", "timeout happened")
    orchestrator.advance(c.pk)
    pair = _new_runs(c, after=7)
    assert sorted((r.side, r.retry_of_id) for r in pair) == sorted(
        [(a.side, a.pk), (b.side, b.pk)]
    )  # no extra run: each replacement is the other's partner
    # A lone failure brings an extra run of the other side; if that one fails, its side
    # still has its look's runs: nothing replaces it (its failure is counted, though).
    _finish_run(pair[0], "failed", "panic")
    replacement, extra = sorted(_new_runs(c, after=9), key=lambda r: r.retry_of_id is None)
    assert replacement.retry_of_id == pair[0].pk
    _finish_run(extra, "failed", "boot-failed")
    assert not _new_runs(c, after=11)
    assert not Run.objects.filter(retry_of=extra).exists()


@pytest.mark.parametrize(("result", "code", "failing"), [
    ("failed", "timeout", "AB"),  # the kernels fail alike: no excess in B
    ("incomplete", "infra-error", "B"), ("incomplete", "lost", "B"),  # the host's: never tested
])  # fmt: skip
def test_a_side_that_spends_its_failure_budget_without_a_significant_excess_ends_runs_failed(
    few_runs, result, code, failing
):
    c = _running()
    while c.state == "running" and (run := c.runs.filter(state="queued").order_by("order").first()):
        if run.side in failing:
            _finish_run(run, result, code)
        else:
            _finish_run(run)
        c.refresh_from_db()
    assert (c.state, c.result, c.error_code) == ("done", "failed", "runs-failed")
    # Stopped at the 12th finished run of a failing side (budget: more than 60% of >= 12).
    found = re.search(r"sync-rcu-latency side (A|B): 12 of 12 runs failed \(the budget: "
                      rf"more than 60% of >= 12\); last: {code}: {code} happened",
                      c.error_message)  # fmt: skip
    assert found, c.error_message
    assert found[1] in failing
    ended = c.runs.filter(side=found[1], state="done").exclude(error_code="cancelled")
    assert ended.count() == 12
    assert "not a significant excess in B" in c.error_message
    assert not c.runs.filter(state__in=["queued", "running"]).exists()  # the rest cancelled
    assert c.verdicts.get(metric="failure_rate").verdict == "no-meaningful-change"


def _b_fails(
    c: Comparison, rng: np.random.Generator, fail, result="failed", sides: str = "B"
) -> None:
    """Finish every queued run in schedule order until none is left or the comparison
    ends: the runs of `sides` as `fail(run)` says (an error code, or "" for ok), the
    others ok."""
    while c.state == "running" and (run := c.runs.filter(state="queued").order_by("order").first()):
        code = fail(run) if run.side in sides else ""
        if code:
            _finish_run(run, result, code)
        else:
            _finish_run(run, samples=_samples(rng, 1.0))
        c.refresh_from_db()


@pytest.fixture
def look_of_24(few_runs):
    """24 runs per side (the design's floor), one look."""
    return _running(min_runs=24, max_runs=24)


def test_a_kernel_failing_7_of_31_boots_ends_reliability_regression_with_the_counts(look_of_24):
    c, rng = look_of_24, np.random.default_rng(15)
    bad = set(c.runs.filter(side="B").order_by("order").values_list("pk", flat=True)[:7])
    _b_fails(c, rng, lambda run: "panic" if run.pk in bad else "")
    assert c.state == "analysing"
    orchestrator.conclude_look(c.pk)
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code, c.verdict) == (
        "done", "ok", "", "reliability-regression",
    )  # fmt: skip
    row = c.verdicts.get(metric="failure_rate", statistic="boschloo")
    assert (row.verdict, row.is_primary, row.n_a, row.n_b) == (
        "reliability-regression",
        True,
        31,
        31,
    )
    assert row.details["b"]["by_outcome"] == {"panic": 7}
    assert row.details["a"]["kernel_failures"] == 0
    # Each failure's replacement came with an A run: 31 ok on A, 24 ok + 7 panics on B.
    fisher = math.comb(31, 7) / math.comb(62, 7)  # 0.0053
    assert row.details["p_fisher"] == pytest.approx(fisher, rel=1e-9)
    assert row.p_value < fisher


def test_host_failures_never_count_and_the_metrics_decide(look_of_24):
    c, rng = look_of_24, np.random.default_rng(16)
    # Every third of B's scheduled runs (8 of 24): spread out, within B's failure budget
    # (8 in a row would spend it: more than 60% of B's first 12 boots failed).
    bad = set(c.runs.filter(side="B").order_by("order").values_list("pk", flat=True)[::3])
    _b_fails(c, rng, lambda run: ("infra-error", "lost")[run.index % 2] if run.pk in bad else "",
             result="incomplete")  # fmt: skip
    orchestrator.conclude_look(c.pk)
    c.refresh_from_db()
    assert (c.state, c.result) == ("done", "ok")
    assert c.verdict != "reliability-regression"
    row = c.verdicts.get(metric="failure_rate")
    assert (row.verdict, row.p_value, row.n_b) == ("no-meaningful-change", 1.0, 24)
    assert row.details["b"]["host_failures"] == 8
    assert row.details["b"]["kernel_failures"] == 0


def test_a_kernel_that_keeps_failing_spends_its_budget_and_ends_reliability_regression(
    look_of_24,
):
    c, rng = look_of_24, np.random.default_rng(17)
    _b_fails(c, rng, lambda run: "panic")
    assert (c.state, c.result, c.error_code, c.verdict) == (
        "done", "ok", "", "reliability-regression",
    )  # fmt: skip
    # B's 12th boot, all panicked, spends its budget; the test then finds the excess.
    assert c.error_message.startswith(
        "reliability-regression: sync-rcu-latency kernel failures B 12/12 vs A 0/"
    )
    assert ("Stopped: sync-rcu-latency side B: 12 of 12 runs failed (the budget: more than "
            "60% of >= 12); last: panic: panic happened") in c.error_message  # fmt: skip
    assert c.verdicts.get(metric="failure_rate").verdict == "reliability-regression"
    assert not c.runs.filter(state__in=["queued", "running"]).exists()  # the rest cancelled


def test_two_kernels_that_both_fail_10_percent_run_to_a_verdict(look_of_24):
    """A and B both fail about 10% of boots; one of B's slots fails three times in a row,
    which the per-slot budget (3 attempts) ended as runs-failed. The side's budget is not
    spent, the failure test finds no excess, and the metrics decide."""
    c, rng = look_of_24, np.random.default_rng(18)
    chain = [c.runs.filter(side="B").order_by("order")[0].pk]  # its first 3 attempts fail

    def fail(run: Run) -> str:
        if run.retry_of_id == chain[-1] and len(chain) < 3:
            chain.append(run.pk)
        # A: the extra runs that pair with B's replacements fail (not replaced: A has its 24).
        extra_a = run.side == "A" and run.order >= 48
        return "panic" if run.pk in chain or extra_a else ""

    _b_fails(c, rng, fail, sides="AB")
    assert len(chain) == 3
    assert c.state == "analysing", c.error_message
    orchestrator.conclude_look(c.pk)
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code) == ("done", "ok", "")
    assert c.verdict not in ("", "reliability-regression")
    row = c.verdicts.get(metric="failure_rate")
    assert row.verdict == "no-meaningful-change"
    assert (row.details["a"]["kernel_failures"], row.details["b"]["kernel_failures"]) == (3, 3)
    assert (row.n_a, row.n_b) == (27, 27)  # 24 ok and 3 failed each


def _samples(rng: np.random.Generator, scale: float) -> list[float]:
    return list(rng.lognormal(np.log(6.0 * scale), 0.02, 100))


def test_looks_extend_while_the_engine_needs_runs_then_the_verdict_is_stored(few_runs):
    rng = np.random.default_rng(5)
    c = _running()
    for run in c.runs.order_by("order"):
        _finish_run(run, samples=_samples(rng, 1.0 if run.side == "A" else 1.10))
    c.refresh_from_db()
    assert c.state == "analysing"
    # 4 vs 4 cannot cross the first look's boundary: the engine asks for more.
    orchestrator.conclude_look(c.pk)
    c.refresh_from_db()
    assert (c.state, c.scheduled_per_side) == ("running", 8)
    assert c.runs.filter(state="queued").count() == 8
    for run in c.runs.filter(state="queued").order_by("order"):
        _finish_run(run, samples=_samples(rng, 1.0 if run.side == "A" else 1.10))
    orchestrator.conclude_look(c.pk)
    c.refresh_from_db()
    assert (c.state, c.result, c.verdict) == ("done", "ok", "regression")
    primary = c.verdicts.get(metric="writer_duration", statistic="p50")
    assert (primary.n_a, primary.n_b, primary.look) == (8, 8, 2)
    orchestrator.conclude_look(c.pk)  # a duplicate message changes nothing
    c.refresh_from_db()
    assert c.state == "done"


# --- cancel, late results, lost messages -------------------------------------------------


def test_cancel_ends_unfinished_runs_and_a_late_result_is_dropped(few_runs):
    c = _running()
    running = c.runs.get(order=0)
    Run.objects.filter(pk=running.pk).update(state=State.RUNNING)
    running.refresh_from_db()
    assert orchestrator.cancel(c.pk, "not needed")
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code, c.error_message) == (
        "done", "incomplete", "cancelled", "not needed",
    )  # fmt: skip
    assert set(c.runs.values_list("error_code", flat=True)) == {"cancelled"}
    assert _end_run(running, Result.OK, "", "") is None  # the worker's late result
    running.refresh_from_db()
    assert (running.result, running.error_code) == ("incomplete", "cancelled")
    assert not orchestrator.cancel(c.pk)


def test_queued_runs_whose_message_was_lost_are_sent_again(
    few_runs, django_capture_on_commit_callbacks
):
    c = _running()
    with django_capture_on_commit_callbacks() as sent:
        orchestrator.advance(c.pk)
    assert not sent  # just sent: nothing to do
    old = timezone.now() - timedelta(seconds=61)
    c.runs.update(dispatched_at=old)
    with django_capture_on_commit_callbacks() as sent:
        orchestrator.advance_unfinished()
    assert len(sent) == 8
    assert not c.runs.filter(dispatched_at=old).exists()


# --- a stuck analysis ---------------------------------------------------------------------


def _analysing(rng: np.random.Generator, nan_in: int | None = None) -> Comparison:
    """A comparison whose 4 + 4 runs ended ok, its look sent to the analysis queue; the
    samples of run order `nan_in` hold a NaN (a parser's bug), which the engine refuses."""
    c = _running()
    for run in c.runs.order_by("order"):
        samples = _samples(rng, 1.0)
        if run.order == nan_in:
            samples[7] = math.nan
        _finish_run(run, samples=samples)
    c.refresh_from_db()
    assert c.state == "analysing"
    return c


def test_an_engine_error_ends_the_comparison_analysis_failed_with_its_text_after_3_tries(
    few_runs, settings, django_capture_on_commit_callbacks
):
    settings.RCUBENCH_ANALYSIS_TRIES = 3
    c = _analysing(np.random.default_rng(21), nan_in=2)
    for attempt in (1, 2):
        orchestrator.conclude_look(c.pk)  # the task, as the worker runs it
        c.refresh_from_db()
        assert (c.state, c.analysis_tries, c.analysis_started_at) == ("analysing", attempt, None)
        # The try ended (failed): the kick sends the look again once its message is stale.
        Comparison.objects.filter(pk=c.pk).update(
            analysis_sent_at=timezone.now() - timedelta(seconds=61)
        )
        with django_capture_on_commit_callbacks(execute=False) as sent:
            orchestrator.advance(c.pk)
        assert len(sent) == 1
    orchestrator.conclude_look(c.pk)
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code) == ("done", "failed", "analysis-failed")
    assert c.error_message.startswith("the analysis failed 3 times; last: StatsInputError: ")
    assert "run 2: 1 NaN value(s)" in c.error_message
    assert not c.verdicts.exists()  # nothing half-stored
    with django_capture_on_commit_callbacks(execute=False) as sent:
        orchestrator.advance(c.pk)
    assert not sent  # ended: never sent again


def test_a_running_analysis_is_not_sent_again_until_its_worker_is_past_the_time_limit(
    few_runs, settings, django_capture_on_commit_callbacks
):
    settings.RCUBENCH_ANALYSIS_TIME_LIMIT_SECONDS = 1800
    c = _analysing(np.random.default_rng(22))
    long_ago = timezone.now() - timedelta(seconds=600)
    # The task started 600 s ago, was sent before that, and is still running (a slow look).
    Comparison.objects.filter(pk=c.pk).update(
        analysis_sent_at=long_ago - timedelta(seconds=5),
        analysis_started_at=long_ago,
        analysis_tries=1,
    )
    with django_capture_on_commit_callbacks(execute=False) as sent:
        orchestrator.advance_unfinished()
    assert not sent
    # Started longer ago than the task's hard time limit: its worker died; sent again.
    dead = timezone.now() - timedelta(seconds=1801)
    Comparison.objects.filter(pk=c.pk).update(analysis_started_at=dead)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        orchestrator.advance_unfinished()
    assert len(sent) == 1
    c.refresh_from_db()
    assert (c.analysis_started_at, c.analysis_tries) == (None, 1)
    # Sent, not started yet: not sent again before RCUBENCH_REDISPATCH_SECONDS.
    with django_capture_on_commit_callbacks(execute=False) as sent:
        orchestrator.advance(c.pk)
    assert not sent


def test_a_look_whose_every_try_lost_its_worker_ends_analysis_failed(few_runs, settings):
    settings.RCUBENCH_ANALYSIS_TRIES = 3
    c = _analysing(np.random.default_rng(23))
    Comparison.objects.filter(pk=c.pk).update(analysis_tries=3)  # three tries started, none ended
    orchestrator.conclude_look(c.pk)
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code) == ("done", "failed", "analysis-failed")
    assert c.error_message.startswith("the analysis did not finish in 3 tries")
    assert not c.verdicts.exists()


def test_extend_reopens_a_comparison_that_ended_ok_for_its_next_look(
    few_runs, django_capture_on_commit_callbacks
):
    # A bisection's step whose CI still holds the midpoint asks for the design's next look.
    c = _running()  # 4 runs a side of at most 8
    Comparison.objects.filter(pk=c.pk).update(state="done", result="ok", verdict="regression")
    with django_capture_on_commit_callbacks() as sent:
        assert orchestrator.extend(c.pk) == 4
    c.refresh_from_db()
    assert (c.state, c.result, c.finished_at, c.scheduled_per_side) == ("running", "", None, 8)
    assert c.verdict == "regression"  # kept until the look decides again
    assert Counter(c.runs.filter(state="queued").values_list("side", flat=True)) == {"A": 8, "B": 8}
    assert len(sent) == 8  # the new runs
    Comparison.objects.filter(pk=c.pk).update(state="done", result="ok")
    assert orchestrator.extend(c.pk) == 0  # at its maximum
    Comparison.objects.filter(pk=c.pk).update(scheduled_per_side=4, result="failed",
                                              error_code="runs-failed")  # fmt: skip
    assert orchestrator.extend(c.pk) == 0  # ended otherwise: not reopened
