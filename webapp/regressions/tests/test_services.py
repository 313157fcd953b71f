"""Regressions opened by their reports and moved by people: every move of the lifecycle,
who may make it, what each move needs, and that a refused move stores nothing."""

import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from tests.support.factories import (
    MembershipFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
    bisectable_comparison,
    watched_head,
)
from webapp.comparisons.models import Comparison
from webapp.regressions import services
from webapp.regressions.models import Regression, Transition
from webapp.regressions.services import Actor, TransitionRefused, transition
from webapp.trees.models import TreeMembership
from webapp.watch.models import ChangePoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def reported():
    c = bisectable_comparison(shift=16.7)
    return services.open_for_comparison(c.pk)


def _submitter(reg: Regression, role: str = TreeMembership.Role.SUBMITTER):
    user = UserFactory.create()
    MembershipFactory.create(tree=reg.tree, user=user, role=role)
    return user


def _web(user) -> Actor:
    return Actor(via="web", user=user)


def test_a_regression_verdict_opens_one_untriaged_regression(reported, caplog):
    c = reported.comparison
    assert (reported.state, reported.benchmark, reported.metric, reported.statistic) == (
        "untriaged", "sync-rcu-latency", "writer_duration", "p50",
    )  # fmt: skip
    assert (reported.shift_pct, reported.ci_low_pct, reported.ci_high_pct) == (16.7, 14.7, 18.7)
    assert (reported.baseline, reported.culprit) == (c.revision_a.sha, c.revision_b.sha)
    assert (reported.branch, reported.threshold_pct, reported.closed_at) == ("", 2.0, None)
    [opened] = reported.transitions.all()
    assert (opened.from_state, opened.to_state, opened.via, opened.by) == (
        "", "untriaged", "report", None,
    )  # fmt: skip
    # The task runs again (a redelivered message): still one, nothing logged twice.
    caplog.set_level(logging.INFO)
    again = services.open_for_comparison(c.pk)
    assert again is not None
    assert again.pk == reported.pk
    assert (Regression.objects.count(), Transition.objects.count()) == (1, 1)
    assert not [r for r in caplog.records if "regression state" in str(r.msg)]


@pytest.mark.parametrize(
    "fields",
    [
        {"verdict": "no-meaningful-change"},
        {"verdict": "improvement"},
        {"trigger": Comparison.Trigger.BISECTION},
        {"result": "incomplete", "error_code": "cancelled"},
        {"state": "running", "result": ""},
    ],
)
def test_nothing_else_opens_one(fields):
    c = bisectable_comparison()
    Comparison.objects.filter(pk=c.pk).update(**fields)
    assert services.open_for_comparison(c.pk) is None
    assert not Regression.objects.exists()


def test_a_reliability_regression_is_about_the_runs():
    c = bisectable_comparison(verdict="no-meaningful-change")
    Comparison.objects.filter(pk=c.pk).update(verdict="reliability-regression")
    reg = services.open_for_comparison(c.pk)
    assert reg is not None
    assert (reg.metric, reg.statistic, reg.shift_pct) == ("runs", "failures", None)


def test_a_push_regression_knows_its_branch():
    target = TargetFactory.create()
    tree = TreeFactory.create()
    _, c = watched_head(tree, target, 8, 6.6, verdict="regression")
    reg = services.open_for_comparison(c.pk)
    assert reg is not None
    assert reg.branch == "rcu/dev"


def test_a_regressing_change_point_opens_one_and_an_improving_one_does_not():
    target = TargetFactory.create()
    tree = TreeFactory.create()
    before, _ = watched_head(tree, target, 1, 6.0)
    after, _ = watched_head(tree, target, 2, 6.6)
    kw = dict(tree=tree, branch="rcu/dev", benchmark="sync-rcu-latency",
              metric="writer_duration", target=target, push=after, before_median=6.0,
              after_median=6.6, audience="members")  # fmt: skip
    worse = ChangePoint.objects.create(change_pct=10.0, regression=True, **kw)
    better = ChangePoint.objects.create(**{**kw, "audience": "public"}, change_pct=-10.0,
                                        regression=False)  # fmt: skip
    reg = services.open_for_change_point(worse.pk)
    assert reg is not None
    assert (reg.branch, reg.shift_pct, reg.baseline, reg.culprit) == (
        "rcu/dev", 10.0, before.after, after.after,
    )  # fmt: skip
    assert services.open_for_change_point(better.pk) is None


def test_a_submitter_acknowledges_and_the_first_triage_is_timed(reported, caplog):
    caplog.set_level(logging.INFO)
    user = _submitter(reported)
    reg = transition(reported.pk, "acknowledged", _web(user), note="seen it")
    assert (reg.state, reg.closed_at) == ("acknowledged", None)
    assert reg.triaged_at is not None
    last = reg.transitions.last()
    assert last is not None
    assert (last.from_state, last.to_state, last.via, last.by, last.note) == (
        "untriaged", "acknowledged", "web", user, "seen it",
    )  # fmt: skip
    [line] = [r.msg for r in caplog.records if isinstance(r.msg, dict)
              and r.msg.get("event") == "regression state"]  # fmt: skip
    assert (line["regression"], line["state"], line["was"], line["by"]) == (
        reg.pk, "acknowledged", "untriaged", user.username,
    )  # fmt: skip


def test_invalid_needs_its_reason_and_a_refusal_stores_nothing(reported):
    user = _submitter(reported)
    with pytest.raises(TransitionRefused, match="invalid needs a reason"):
        transition(reported.pk, "invalid", _web(user), note="  ")
    reported.refresh_from_db()
    assert (reported.state, reported.triaged_at, reported.transitions.count()) == (
        "untriaged", None, 1,
    )  # fmt: skip
    reg = transition(reported.pk, "invalid", _web(user), note="the baseline had lockdep on")
    assert (reg.state, reg.reason) == ("invalid", "the baseline had lockdep on")
    assert reg.closed_at is not None


def test_fixed_needs_the_fix_and_reopening_clears_the_close(reported):
    user = _submitter(reported)
    with pytest.raises(TransitionRefused, match="fixed needs the fixing commit"):
        transition(reported.pk, "fixed", _web(user))
    reg = transition(reported.pk, "fixed", _web(user), fixed_by="0123456789ab")
    assert (reg.state, reg.fixed_by) == ("fixed", "0123456789ab")
    with pytest.raises(TransitionRefused, match="is fixed: it may move to acknowledged, "
                                                 "investigating"):  # fmt: skip
        transition(reported.pk, "invalid", _web(user), note="x")
    reg = transition(reported.pk, "investigating", _web(user), note="it came back")
    assert (reg.state, reg.closed_at) == ("investigating", None)


def test_duplicate_of_a_regression_of_the_same_tree_without_a_cycle(reported):
    user = _submitter(reported)
    other = services.open_for_comparison(bisectable_comparison(reported.tree).pk)
    elsewhere = services.open_for_comparison(bisectable_comparison().pk)
    assert other is not None
    assert elsewhere is not None
    with pytest.raises(TransitionRefused, match="duplicate needs the regression"):
        transition(reported.pk, "duplicate", _web(user))
    with pytest.raises(TransitionRefused, match=f"no regression {elsewhere.pk} of tree"):
        transition(reported.pk, "duplicate", _web(user), duplicate_of=elsewhere.pk)
    with pytest.raises(TransitionRefused, match="is \\(a duplicate of\\) this one"):
        transition(reported.pk, "duplicate", _web(user), duplicate_of=reported.pk)
    reg = transition(reported.pk, "duplicate", _web(user), duplicate_of=other.pk)
    assert (reg.state, reg.duplicate_of) == ("duplicate", other)
    with pytest.raises(TransitionRefused, match="is \\(a duplicate of\\) this one"):
        transition(other.pk, "duplicate", _web(user), duplicate_of=reported.pk)
    reg = transition(reported.pk, "acknowledged", _web(user))
    assert (reg.state, reg.duplicate_of) == ("acknowledged", None)


def test_who_may_triage(reported):
    for user in (UserFactory.create(), AnonymousUser()):  # no role on the tree; no account
        with pytest.raises(PermissionDenied, match="needs a role on tree"):
            transition(reported.pk, "acknowledged", _web(user))
    admin = _submitter(reported, TreeMembership.Role.ADMIN)
    assert transition(reported.pk, "acknowledged", _web(admin)).state == "acknowledged"
    staff = UserFactory.create(is_staff=True)
    assert transition(reported.pk, "investigating", _web(staff)).state == "investigating"
    # A restricted comparison's regression: its members only (all of them see it).
    Comparison.objects.filter(pk=reported.comparison_id).update(visibility="restricted")
    assert not services.visible_regressions(UserFactory.create()).exists()
    assert services.visible_regressions(admin).get() == reported


def test_people_never_set_untriaged_or_inactive_and_rules_only_those_two(reported):
    user = _submitter(reported)
    for state in ("untriaged", "inactive"):
        with pytest.raises(TransitionRefused, match="may move to acknowledged, investigating, "
                                                     "invalid, fixed, duplicate"):  # fmt: skip
            transition(reported.pk, state, _web(user))
    with pytest.raises(TransitionRefused, match="no state 'closed'"):
        transition(reported.pk, "closed", _web(user))
    rule = Actor(via="rule")
    with pytest.raises(TransitionRefused, match="may move to fixed, inactive"):
        transition(reported.pk, "acknowledged", rule)
    reg = transition(reported.pk, "inactive", rule, note="10 heads")
    assert (reg.state, reg.triaged_at) == ("inactive", None)  # a rule is no triage


def test_the_triage_page_numbers(reported):
    user = _submitter(reported)
    tree = reported.tree
    older = services.open_for_comparison(bisectable_comparison(tree).pk)
    assert older is not None
    now = timezone.now()
    Regression.objects.filter(pk=older.pk).update(opened_at=now - timedelta(days=3))
    Regression.objects.filter(pk=reported.pk).update(opened_at=now - timedelta(days=1))
    transition(reported.pk, "acknowledged", _web(user))
    Regression.objects.filter(pk=reported.pk).update(triaged_at=now - timedelta(hours=18))
    t = services.triage(tree, user, now=now)
    assert [r.regression.pk for r in t.open] == [older.pk, reported.pk]  # oldest first
    assert [round(r.age_days) for r in t.open] == [3, 1]
    assert (t.median_first_triage_hours, t.untriaged, t.closed) == (pytest.approx(6.0), 1, [])
