"""The bisection state machine (webapp/bisections/services.py) on the database: which
comparisons may be bisected, the steps it submits for a series (the real planted series
of fixtures/), and how each step's recorded verdict moves it, to a confirmed culprit, a
range, or an attribution. Step comparisons are not run here: each is ended with the
verdict row a real step recorded (RECORDED), as the analysis would store it."""

from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from engine.build.patches import parse_mbox
from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    MembershipFactory,
    MetricVerdictFactory,
    PatchSeriesFactory,
    RevisionFactory,
    UserFactory,
)
from webapp.analysis.models import MetricVerdict
from webapp.bisections import services
from webapp.bisections.models import Bisection, BisectionState, Step
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.states import Result

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).with_name("fixtures")
PLANTED = (FIXTURES / "planted-6.mbox").read_bytes()

# (shift %, CI) of sync-rcu-latency writer_duration p50 as real steps recorded them:
# like B (the planted jiffy: 6 -> 7 jiffies, +16.7%), like A (comments only), unknown.
LIKE_B = (16.6, 16.1, 17.2)
LIKE_A = (0.05, -0.3, 0.4)
HALFWAY = (8.0, 2.0, 14.0)


def _row(c: Comparison, shift: float, low: float, high: float, verdict: str) -> MetricVerdict:
    return MetricVerdictFactory.create(
        comparison=c, shift_pct=shift, ci_low_pct=low, ci_high_pct=high, verdict=verdict,
        median_a=6.05, median_b=6.05 * (1 + shift / 100),
        details={"unit": "ms", "relative": True, "shift": shift, "ci": [low, high],
                 "smallest_detectable_shift": 1.1},
    )  # fmt: skip


def _done(c: Comparison, **fields: object) -> None:
    fields = {"state": ComparisonState.DONE, "result": Result.OK, **fields}
    Comparison.objects.filter(pk=c.pk).update(**fields)


@pytest.fixture
def original(settings):
    """A finished comparison of the base against the base plus the planted series: a
    regression of the p50 by 16.6%."""
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    series = PatchSeriesFactory.create(mbox=PLANTED, subject="[PATCH 0/6] rcu: planted series")
    rev_a = RevisionFactory.create(ref="v6.12")
    rev_b = RevisionFactory.create(tree=rev_a.tree, ref="v6.12", base_sha=rev_a.sha, series=series)
    builds = {"build_a": BuildFactory.create(revision=rev_a),
              "build_b": BuildFactory.create(revision=rev_b)}  # fmt: skip
    c = ComparisonFactory.create(revision_a=rev_a, revision_b=rev_b, min_runs=5, max_runs=10,
                                 verdict="regression", **builds)  # fmt: skip
    _done(c)
    _row(c, *LIKE_B, "regression")
    return c


def _of(step: Step) -> Comparison:
    """The step's comparison (every step here has one)."""
    if step.comparison is None:
        raise AssertionError(f"step {step} has no comparison")
    return step.comparison


def _series_len(c: Comparison, side: str) -> int:
    rev = c.revision_a if side == "A" else c.revision_b
    return 0 if rev.series is None else len(parse_mbox(bytes(rev.series.mbox)).patches)


def _advance(b: Bisection) -> Bisection:
    services.advance(b.pk)
    return Bisection.objects.get(pk=b.pk)


def _finish_step(b: Bisection, position: int, kind: str, recorded: tuple[float, float, float],
                 verdict: str = "regression", **fields: object) -> Step:  # fmt: skip
    step = b.steps.get(position=position, kind=kind)
    _done(_of(step), **fields)
    if fields.get("result", Result.OK) == Result.OK:
        _row(_of(step), *recorded, verdict)
    return step


def test_a_planted_series_is_bisected_to_patch_3_in_three_steps_and_confirmed(
    original, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as sent:
        b, created = services.start(original.pk)
    assert (created, b.n, b.kind, len(sent)) == (True, 6, "series", 1)
    assert b.commits[2]["subject"] == parse_mbox(PLANTED).patches[2].subject
    b = _advance(b)
    assert b.state == BisectionState.BISECTING
    step = b.steps.get()
    assert (step.kind, step.position) == ("bisect", 3)
    # The step compares the base with the first three patches, with the original's design.
    sc = _of(step)
    assert sc.trigger == Comparison.Trigger.BISECTION
    assert original.build_a is not None
    assert (_series_len(sc, "A"), sc.revision_a.ref) == (0, original.build_a.sha)
    assert _series_len(sc, "B") == 3
    assert (sc.min_runs, sc.max_runs, sc.benchmarks) == (5, 10, ["sync-rcu-latency"])

    _finish_step(b, 3, "bisect", LIKE_B)
    b = _advance(b)
    assert [s.position for s in b.steps.all()] == [3, 1]
    _finish_step(b, 1, "bisect", LIKE_A, verdict="no-meaningful-change")
    b = _advance(b)
    _finish_step(b, 2, "bisect", LIKE_A, verdict="no-meaningful-change")
    b = _advance(b)
    assert (b.state, b.first) == (BisectionState.CONFIRMING, 3)
    fresh, revert = b.steps.get(kind="fresh"), b.steps.get(kind="revert")
    # Fresh: patches 1-2 against 1-3. Revert: all six against all but the third.
    assert (_series_len(_of(fresh), "A"), _series_len(_of(fresh), "B")) == (2, 3)
    rev_a, rev_b = _of(revert).revision_a, _of(revert).revision_b
    assert rev_a.series is not None
    assert rev_b.series is not None
    ra = parse_mbox(bytes(rev_a.series.mbox)).patches
    rb = parse_mbox(bytes(rev_b.series.mbox)).patches
    assert len(ra) == 6
    assert [p.subject for p in rb] == [p.subject for p in ra if p is not ra[2]]

    _finish_step(b, 3, "fresh", LIKE_B)
    _finish_step(b, 3, "revert", (-14.3, -14.8, -13.7), verdict="improvement")
    with django_capture_on_commit_callbacks() as sent:
        b = _advance(b)
    assert (b.state, b.result, b.outcome, b.first) == ("done", "ok", "culprit", 3)
    assert b.summary.startswith('patch 3/6 ("')
    assert "confirmed" in b.summary
    assert len(sent) == 1  # the culprit's mail
    assert b.steps.filter(kind="bisect").count() <= 4  # ceil(log2 6) + 1


def test_a_step_that_does_not_build_is_skipped_and_the_answer_is_a_range(original):
    b, _ = services.start(original.pk)
    b = _advance(b)
    _finish_step(b, 3, "bisect", LIKE_B)
    b = _advance(b)
    _finish_step(b, 1, "bisect", LIKE_A, verdict="no-meaningful-change")
    b = _advance(b)
    _finish_step(b, 2, "bisect", LIKE_A, result=Result.FAILED, error_code="build-failed",
                 error_message="build failed: side B (x + series): make-failed: tree.c:42",
                 )  # fmt: skip
    b = _advance(b)
    assert (b.state, b.outcome, b.first, b.last) == ("done", "range", 2, 3)
    assert "position 2 was skipped" in b.summary
    assert "make-failed" in b.summary


def test_a_step_whose_ci_holds_the_midpoint_is_extended_once_then_unknown_stops(original):
    b, _ = services.start(original.pk)
    b = _advance(b)
    step = _finish_step(b, 3, "bisect", HALFWAY, scheduled_per_side=5)
    b = _advance(b)
    step.refresh_from_db()
    sc = _of(step)
    assert (step.extended, step.answer) == (True, "")
    assert (sc.state, sc.scheduled_per_side) == ("running", 10)
    MetricVerdict.objects.filter(comparison=sc).delete()
    _finish_step(b, 3, "bisect", HALFWAY)
    b = _advance(b)
    assert (b.outcome, b.first, b.last) == ("range", 1, 6)
    assert "could not tell A from B" in b.summary


def test_an_unconfirmed_culprit_is_not_mailed(original, django_capture_on_commit_callbacks):
    b, _ = services.start(original.pk)
    b = _advance(b)
    for pos, rec in ((3, LIKE_B), (1, LIKE_A), (2, LIKE_A)):
        _finish_step(b, pos, "bisect", rec)
        b = _advance(b)
    _finish_step(b, 3, "fresh", LIKE_A, verdict="no-meaningful-change")
    _finish_step(b, 3, "revert", LIKE_A, verdict="no-meaningful-change")
    with django_capture_on_commit_callbacks() as sent:
        b = _advance(b)
    assert (b.outcome, sent) == ("unconfirmed", [])
    assert "not confirmed" in b.summary


def test_attribution_measures_every_patch_at_once(original):
    b, _ = services.start(original.pk, mode="attribute")
    b = _advance(b)
    assert b.state == BisectionState.ATTRIBUTING
    assert sorted(b.steps.values_list("position", flat=True)) == [1, 2, 3, 4, 5, 6]
    for pos in range(1, 7):
        _finish_step(b, pos, "patch", LIKE_B if pos == 3 else LIKE_A)
    b = _advance(b)
    assert (b.state, b.outcome) == ("done", "attributed")
    assert b.summary.startswith("Beyond the threshold: patch 3/6")


def test_a_second_request_joins_the_running_bisection(original):
    first, created = services.start(original.pk)
    again, created_again = services.start(original.pk)
    assert (created, created_again, again.pk) == (True, False, first.pk)
    other, created_other = services.start(original.pk, mode="attribute")
    assert created_other
    assert other.pk != first.pk


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"verdict": "no-meaningful-change"}, "only a regression or improvement is bisected"),
        ({"ci": None}, "has no CI"),
        ({"mde": 40.0}, "too noisy to bisect"),
        ({"state": "running"}, "has not ended ok"),
        ({"trigger": "bisection"}, "is a bisection's step"),
    ],
)
def test_what_is_not_bisected_is_refused_with_the_reason(original, change, message):
    row = original.verdicts.get()
    if "verdict" in change:
        row.verdict = change["verdict"]
    if "ci" in change:
        row.details = {**row.details, "ci": [None, None]}
    if "mde" in change:
        row.details = {**row.details, "smallest_detectable_shift": change["mde"]}
    row.save()
    if "state" in change:
        Comparison.objects.filter(pk=original.pk).update(state=change["state"], result="")
    if "trigger" in change:
        Comparison.objects.filter(pk=original.pk).update(trigger=change["trigger"])
    with pytest.raises(services.BisectionRefused, match=message):
        services.start(original.pk, statistic=("sync-rcu-latency", "writer_duration", "p50"))
    assert not Bisection.objects.exists()


def test_an_aa_comparison_has_no_commits_to_bisect(original):
    Comparison.objects.filter(pk=original.pk).update(revision_b=original.revision_a)
    with pytest.raises(services.BisectionRefused, match="no commits to bisect"):
        services.start(original.pk)


def test_only_a_submitter_of_the_tree_may_start_one(original):
    outsider = UserFactory.create()
    with pytest.raises(PermissionDenied):
        services.start(original.pk, user=outsider, trigger="web")
    Comparison.objects.filter(pk=original.pk).update(visibility="restricted")
    with pytest.raises(Http404):
        services.start(original.pk, user=outsider, trigger="web")
    member = MembershipFactory.create(tree=original.revision_a.tree).user
    b, created = services.start(original.pk, user=member, trigger="web")
    assert (created, b.requested_by) == (True, member)


def test_cancel_ends_the_bisection_and_its_running_step(original):
    b, _ = services.start(original.pk)
    b = _advance(b)
    step = b.steps.get()
    assert services.cancel(b.pk, "cancelled by test")
    b.refresh_from_db()
    step.refresh_from_db()
    assert (b.state, b.result, b.error_code) == ("done", "incomplete", "cancelled")
    assert _of(step).error_code == "cancelled"
    assert not services.cancel(b.pk)
    services.advance(b.pk)  # a late event does nothing
    assert Bisection.objects.get(pk=b.pk).state == "done"
