"""Fixed and inactive, by the rules, over a branch's real history of tested heads (the
history's own factories: B runs per head, a verdict per comparison)."""

import pytest
from django.utils import timezone

from tests.support.factories import TargetFactory, TreeFactory, UserFactory, watched_head
from webapp.regressions import rules, services
from webapp.regressions.models import Regression
from webapp.regressions.services import Actor, transition
from webapp.watch.models import Push

pytestmark = pytest.mark.django_db


@pytest.fixture
def branch():
    """Heads 0-7 at 6.0 ms, head 8 regressed to 6.6 ms (+10%, its comparison's verdict a
    regression), heads 9-11 stay at 6.6 (each against the head before: no change)."""
    tree, target = TreeFactory.create(name="rcu"), TargetFactory.create()
    heads = [watched_head(tree, target, n, 6.0 if n < 8 else 6.6,
                          verdict="regression" if n == 8 else "no-meaningful-change")
             for n in range(12)]  # fmt: skip
    reg = services.open_for_comparison(heads[8][1].pk)
    assert reg is not None
    return tree, target, reg


def _checked() -> None:
    Push.objects.update(checked_at=timezone.now())  # what the watch tick does once they end


def test_nothing_moves_while_the_branch_stays_regressed(branch):
    _, _, reg = branch
    _checked()
    assert rules.apply_rules() == 0
    reg.refresh_from_db()
    assert (reg.state, reg.clean_pushes) == ("untriaged", 3)
    assert reg.ruled_at is not None


def test_fixed_when_the_newest_two_heads_are_back(branch):
    tree, target, reg = branch
    watched_head(tree, target, 12, 6.0, verdict="improvement")
    _checked()
    assert rules.apply_rules() == 0  # one head back is one head: a few runs
    last, c = watched_head(tree, target, 13, 6.05)
    _checked()
    assert rules.apply_rules() == 1
    reg.refresh_from_db()
    assert (reg.state, reg.fixed_by) == ("fixed", f"{last.after[:12]} (comparison {c.pk})")
    moved = reg.transitions.last()
    assert moved is not None
    assert (moved.via, moved.by, moved.from_state) == ("rule", None, "untriaged")
    assert "within 2% of the baseline's 6.035" in moved.note


def test_a_head_outside_the_threshold_is_not_back(branch):
    tree, target, _ = branch
    watched_head(tree, target, 12, 6.0)
    watched_head(tree, target, 13, 6.2)  # +2.7% of 6.035: outside 2%
    _checked()
    assert rules.apply_rules() == 0
    assert Regression.objects.get().state == "untriaged"


def test_inactive_after_clean_pushes(branch, settings):
    settings.RCUBENCH_REGRESSION_INACTIVE_PUSHES = 4
    tree, target, reg = branch
    _checked()
    assert rules.apply_rules() == 0  # 3 clean heads
    watched_head(tree, target, 12, 6.6)
    assert rules.apply_rules() == 0  # no head checked since: the branch is not read again
    _checked()
    assert rules.apply_rules() == 1
    reg.refresh_from_db()
    assert (reg.state, reg.clean_pushes) == ("inactive", 4)
    last = reg.transitions.last()
    assert last is not None
    assert last.note == "4 heads tested since without reporting it again"


def test_rules_leave_closed_regressions_and_series_alone(branch):
    tree, target, reg = branch
    staff = UserFactory.create(is_staff=True)
    transition(reg.pk, "invalid", Actor(via="web", user=staff), note="a wrong baseline")
    watched_head(tree, target, 12, 6.0)
    watched_head(tree, target, 13, 6.0)
    _checked()
    assert rules.apply_rules() == 0
    assert Regression.objects.get().state == "invalid"
