"""Where regressions are opened and ruled: the notify tasks and the watch tick (called as
functions, in this process: their Celery wiring is workers/tests')."""

import pytest
from django.utils import timezone

from tests.support.factories import TargetFactory, TreeFactory, bisectable_comparison, watched_head
from webapp.regressions.models import Regression
from webapp.watch.models import ChangePoint, Push
from workers.tasks.alerts import notify_change_point_task, notify_comparison_task
from workers.tasks.control import watch_tick_task

pytestmark = pytest.mark.django_db


def test_the_comparisons_notify_task_opens_it():
    c = bisectable_comparison()
    notify_comparison_task(c.pk)
    notify_comparison_task(c.pk)  # a redelivered message
    assert Regression.objects.get().comparison == c


def test_the_change_points_notify_task_opens_it():
    tree, target = TreeFactory.create(), TargetFactory.create()
    push, _ = watched_head(tree, target, 1, 6.6)
    cp = ChangePoint.objects.create(
        tree=tree, branch="rcu/dev", benchmark="sync-rcu-latency", metric="writer_duration",
        target=target, push=push, before_median=6.0, after_median=6.6, change_pct=10.0,
        regression=True, audience="public",
    )  # fmt: skip
    notify_change_point_task(cp.pk)
    assert Regression.objects.get().change_point == cp


def test_the_watch_tick_applies_the_rules(settings):
    settings.RCUBENCH_REGRESSION_INACTIVE_PUSHES = 2
    tree, target = TreeFactory.create(), TargetFactory.create()
    heads = [watched_head(tree, target, n, 6.6 if n else 6.0, verdict="regression" if n == 1
                          else "no-meaningful-change") for n in range(4)]  # fmt: skip
    notify_comparison_task(heads[1][1].pk)
    Push.objects.update(checked_at=timezone.now())
    assert watch_tick_task()["regressions moved"] == 1
    assert Regression.objects.get().state == "inactive"
