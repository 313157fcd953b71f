"""A cohort (a sweep's points): each look's runs of every member in one interleaved
schedule, released only when every unfinished member asks for it."""

import random
from collections import Counter

import pytest
from django.db import transaction

from tests.support.factories import TreeFactory
from webapp.comparisons import orchestrator
from webapp.comparisons.models import Comparison, Run
from webapp.comparisons.runs import _end_run
from webapp.comparisons.schedule import abba_blocks, interleave
from webapp.comparisons.submission import ComparisonRequest, submit_comparison
from webapp.states import State
from webapp.trees.models import Build

COHORT = "sweep-test"
db = pytest.mark.django_db


def test_interleave_runs_every_members_kth_block_in_round_k_in_a_fresh_order():
    members = [abba_blocks(["x"], 4, random.Random(i)) for i in range(3)]  # 2 blocks each
    order = interleave(members, random.Random(0))
    assert len(order) == 3 * 8
    first_round, second_round = order[:12], order[12:]
    # Round 1 holds every member's first block, whole, and nothing of a second block.
    assert Counter(i for i, _ in first_round) == {0: 4, 1: 4, 2: 4}
    assert Counter(i for i, _ in second_round) == {0: 4, 1: 4, 2: 4}
    for i in range(3):
        assert [s for j, s in first_round if j == i] == members[i][0]
    rounds = {
        tuple(dict.fromkeys(i for i, _ in order[k * 12 : (k + 1) * 12]))
        for k in range(2)
        for order in (interleave(members, random.Random(seed)) for seed in range(20))
    }
    assert len(rounds) > 1  # the members' order is drawn afresh: no point always first


def test_a_member_with_more_blocks_goes_on_alone_after_the_others_end():
    order = interleave(
        [[[("x", "A"), ("x", "B")]], [[("x", "B"), ("x", "A")]] * 3], random.Random(1)
    )
    assert [i for i, _ in order][-4:] == [1, 1, 1, 1]


@pytest.fixture
def few_runs(settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True


def _members(n: int = 3) -> list[Comparison]:
    tree = TreeFactory.create().name
    return [
        submit_comparison(
            ComparisonRequest(
                tree=tree,
                base_ref="v6.12",
                head_ref="rcu/next",
                benchmarks=("sync-rcu-latency",),
                target="qemu-x86_64",
                min_runs=4,
                max_runs=8,
                cohort=COHORT,
                cmdline_a=f"rcutree.jiffies_till_first_fqs={k + 1}",
                cmdline_b=f"rcutree.jiffies_till_first_fqs={k + 1}",
            )
        )
        for k in range(n)
    ]


def _build_all(members: list[Comparison]) -> None:
    for c in members:
        orchestrator.advance(c.pk)
    builds = set(Build.objects.values_list("pk", flat=True))
    Build.objects.update(state=State.DONE, result="ok", artifact_dir="/nonexistent")
    for pk in builds:
        orchestrator.on_build_done(pk)


def _states(members: list[Comparison]) -> list[tuple[object, ...]]:
    return [
        tuple(
            Comparison.objects.values_list("state", "scheduled_per_side", "waiting_runs").get(
                pk=c.pk
            )
        )
        for c in members
    ]


@db
def test_no_member_runs_until_every_member_is_built_then_one_interleaved_schedule(
    few_runs, django_capture_on_commit_callbacks
):
    members = _members()
    for c in members[:2]:
        orchestrator.advance(c.pk)
    assert orchestrator.release_cohort(COHORT) == 0  # one is still queued
    with django_capture_on_commit_callbacks() as released:
        _build_all(members)
    assert _states(members) == [("running", 0, 4)] * 3
    assert not Run.objects.exists()
    assert released  # each member asked for the release after its commit
    assert orchestrator.release_cohort(COHORT) == 3 * 8
    assert _states(members) == [("running", 4, 0)] * 3
    runs = list(Run.objects.order_by("pk"))
    # Two ABBA blocks per member: round 1 is every member's first block, then round 2.
    assert Counter(r.comparison_id for r in runs[:12]) == {c.pk: 4 for c in members}
    assert Counter((r.comparison_id, r.side) for r in runs) == {
        (c.pk, s): 4 for c in members for s in "AB"
    }
    assert orchestrator.release_cohort(COHORT) == 0  # idempotent: nothing waits now


def _finish_runs(c: Comparison) -> None:
    for run in c.runs.filter(state=State.QUEUED):
        Run.objects.filter(pk=run.pk).update(state=State.RUNNING)
        run.refresh_from_db()
        assert _end_run(run, "ok", "", "")
    orchestrator.advance(c.pk)


@db
def test_a_member_still_analysing_holds_the_next_look_and_a_finished_one_does_not(few_runs):
    first, second, third = members = _members()
    _build_all(members)
    orchestrator.release_cohort(COHORT)
    for c in members:
        _finish_runs(c)
    assert [s for s, _, _ in _states(members)] == ["analysing"] * 3
    # The first asks for its next look; the second is still analysing: nothing is sent.
    with transaction.atomic():
        c = Comparison.objects.select_for_update().get(pk=first.pk)
        orchestrator._schedule(c, 4)
    assert orchestrator.release_cohort(COHORT) == 0
    assert _states(members)[0] == ("running", 4, 4)
    # The second is cancelled (it ends), the third asks too: the two go on together.
    orchestrator.cancel(second.pk)
    with transaction.atomic():
        c = Comparison.objects.select_for_update().get(pk=third.pk)
        orchestrator._schedule(c, 4)
    assert orchestrator.release_cohort(COHORT) == 2 * 8
    assert _states(members) == [("running", 8, 0), ("done", 4, 0), ("running", 8, 0)]
    later = Run.objects.filter(state=State.QUEUED).order_by("pk")
    assert {r.comparison_id for r in later} == {first.pk, third.pk}


@db
def test_the_kick_releases_a_cohort_whose_release_was_lost(
    few_runs, django_capture_on_commit_callbacks
):
    members = _members(2)
    _build_all(members)  # the releases were never run (captured, not executed)
    assert not Run.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        orchestrator.advance(members[0].pk)
    assert Run.objects.count() == 2 * 8
