"""A watch policy that bisects its tested heads' regressions (WatchPolicy.bisect_regressions,
watch.services.on_comparison_done, run by the comparison-ended task): on a real scratch
repository's push range, the first primary regression is bisected once, by the same
start() as the button, and the push says what was started or why nothing was."""

import pytest

from engine.build.tests.test_history import repo as repo  # the fixture
from tests.support.factories import MetricVerdictFactory
from webapp.bisections.models import Bisection
from webapp.bisections.tests.test_range import pushed as pushed  # the fixture
from webapp.comparisons.models import Comparison
from webapp.watch import services
from webapp.watch.models import Push, WatchPolicy

pytestmark = pytest.mark.django_db


@pytest.fixture
def watched(pushed):  # noqa: F811
    """`pushed`'s regression as a watched tree's tested head, its policy bisecting."""
    c, (_, (base, *_, three)) = pushed
    policy = WatchPolicy.objects.create(
        tree=c.revision_a.tree, branches=["main"], benchmarks=["sync-rcu-latency"],
        bisect_regressions=True,
    )  # fmt: skip
    push = Push.objects.create(
        tree=policy.tree, branch="main", before=base, after=three, source=Push.Source.GIT,
        state=Push.State.TESTED, reason=f"compared against the before: comparison #{c.pk}",
        baseline=base,
    )  # fmt: skip
    push.comparisons.add(c)
    return c, push, policy


def test_a_tested_heads_regression_is_bisected_once_and_the_push_says_so(watched):
    c, push, _ = watched
    b = services.on_comparison_done(c.pk)
    assert b is not None
    assert (b.comparison_id, b.trigger, b.mode, b.kind) == (c.pk, "watch", "bisect", "range")
    assert (b.benchmark, b.metric) == ("sync-rcu-latency", "writer_duration")
    push.refresh_from_db()
    assert push.reason.endswith(f"; bisection #{b.pk} of comparison #{c.pk}")
    # The task again (a redelivery), and again after the bisection ended: nothing new.
    Bisection.objects.filter(pk=b.pk).update(state="done", result="ok")
    assert services.on_comparison_done(c.pk) == b
    assert Bisection.objects.count() == 1
    push.refresh_from_db()
    assert push.reason.count("bisection #") == 1


def test_a_regression_the_gate_refuses_is_not_bisected_and_the_push_says_why(watched):
    c, push, _ = watched
    # A's noise could not resolve a step: the smallest detectable shift beyond the effect.
    c.verdicts.update(details={"unit": "ms", "relative": True, "shift": 10.0,
                               "ci": [8.0, 12.0], "smallest_detectable_shift": 25.0})  # fmt: skip
    assert services.on_comparison_done(c.pk) is None
    assert not Bisection.objects.exists()
    push.refresh_from_db()
    assert f"; comparison #{c.pk} not bisected: sync-rcu-latency writer_duration" in push.reason
    assert "too noisy to bisect" in push.reason
    services.on_comparison_done(c.pk)
    push.refresh_from_db()
    assert push.reason.count("not bisected") == 1


@pytest.mark.parametrize(
    "change",
    ["policy off", "tree unwatched", "anchor", "improvement", "secondary only", "not a push"],
)
def test_nothing_is_bisected_unless_the_policy_asks_for_a_heads_primary_regression(watched, change):
    c, push, policy = watched
    if change == "policy off":
        WatchPolicy.objects.filter(pk=policy.pk).update(bisect_regressions=False)
    elif change == "tree unwatched":
        WatchPolicy.objects.filter(pk=policy.pk).update(enabled=False)
    elif change == "anchor":
        Push.objects.filter(pk=push.pk).update(anchor=True)
    elif change == "improvement":
        c.verdicts.update(verdict="improvement", shift_pct=-10.0, ci_low_pct=-12.0,
                          ci_high_pct=-8.0)  # fmt: skip
    elif change == "secondary only":
        c.verdicts.update(is_primary=False)
    else:
        push.comparisons.clear()
    before = Push.objects.get(pk=push.pk).reason
    assert services.on_comparison_done(c.pk) is None
    assert not Bisection.objects.exists()
    assert Push.objects.get(pk=push.pk).reason == before


def test_the_first_primary_regression_is_the_one_bisected(watched):
    c, _, _ = watched
    MetricVerdictFactory.create(
        comparison=c, benchmark="boot-time", metric="kernel_to_init_ms", statistic="value",
        shift_pct=5.0, ci_low_pct=4.0, ci_high_pct=6.0, verdict="regression",
        details={"unit": "ms", "relative": True, "shift": 5.0, "ci": [4.0, 6.0],
                 "smallest_detectable_shift": 1.0},
    )  # fmt: skip
    b = services.on_comparison_done(c.pk)
    assert b is not None
    assert (b.benchmark, b.metric) == ("boot-time", "kernel_to_init_ms")  # sorted by name
    assert Comparison.objects.get(pk=c.pk).bisections.count() == 1
