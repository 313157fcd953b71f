"""The comparison-ended task bisects a watched head's regression where the tree's policy
asks (webapp/watch/tests/test_bisect_policy.py has the rules), whatever its mail did."""

import pytest

from engine.build.tests.test_history import repo as repo  # the fixtures
from webapp.alerts import services as alerts
from webapp.bisections.models import Bisection
from webapp.bisections.tests.test_range import pushed as pushed
from webapp.watch.tests.test_bisect_policy import watched as watched
from workers.tasks.alerts import notify_comparison_task

pytestmark = pytest.mark.django_db


def test_the_comparison_ended_task_starts_it_even_when_the_mail_fails(watched, monkeypatch):  # noqa: F811
    c, _, _ = watched

    def broken(comparison_id: int) -> list[int]:
        raise RuntimeError("the mail service is down")

    monkeypatch.setattr(alerts, "notify_comparison", broken)
    with pytest.raises(RuntimeError, match="mail service"):
        notify_comparison_task(c.pk)
    assert Bisection.objects.get().trigger == "watch"
