"""The bisection pages: one bisection (its original, the positions with their steps, the
culprit, an attribution's waterfall; live while it runs; its cancel button), the list, and
the comparison report's Bisect buttons and the form they post."""

import re

import plotly
import pytest
from django.urls import reverse
from django.utils import timezone

from tests.support.factories import (
    BisectionFactory,
    ComparisonFactory,
    MembershipFactory,
    StepFactory,
    TreeFactory,
    UserFactory,
    bisectable_comparison,
)
from webapp.bisections.models import Bisection, Step
from webapp.bisections.summary import Position
from webapp.comparisons.models import Comparison
from webapp.reports.bisection import Row, fold
from webapp.reports.tests.conftest import assert_only_members_see
from webapp.trees.models import TreeMembership

pytestmark = pytest.mark.django_db

CONFIRMED = ('patch 2/3 ("rcu: step 2"): confirmed: the re-run against its parent and the '
             "revert from head.")  # fmt: skip


def _step(b, kind, position, answer, shift, **kw):
    """A step with its comparison (on the original's tree, as the service submits it)."""
    o = b.comparison
    c = ComparisonFactory.create(
        revision_a=o.revision_a, revision_b=o.revision_b, visibility=o.visibility,
        trigger=Comparison.Trigger.BISECTION, state="done", result="ok",
    )  # fmt: skip
    return StepFactory.create(
        bisection=b, kind=kind, position=position, comparison=c, answer=answer, shift=shift,
        ci_low=shift - 1.5, ci_high=shift + 1.5, answered_at=timezone.now(),
        reason=kw.pop("reason", f"comparison #{c.pk}: CI of the step"), **kw,
    )  # fmt: skip


def culprit_found(c: Comparison, **kw) -> Bisection:
    """A finished bisection of `c`'s three patches: patch 2 confirmed."""
    b = BisectionFactory.create(
        comparison=c, state="done", result="ok", outcome=Bisection.Outcome.CULPRIT, first=2,
        last=2, summary=CONFIRMED, started_at=timezone.now(), finished_at=timezone.now(), **kw,
    )  # fmt: skip
    _step(b, Step.Kind.BISECT, 2, Step.Answer.LIKE_B, 9.5)
    _step(b, Step.Kind.BISECT, 1, Step.Answer.LIKE_A, 0.5)
    _step(b, Step.Kind.FRESH, 2, Step.Answer.LIKE_B, 9.0, reason="re-run: like B")
    _step(b, Step.Kind.REVERT, 2, Step.Answer.LIKE_B, -9.0, reason="reverted: back to A")
    return b


def _get(client, name, *args, **kw):
    response = client.get(reverse(f"reports:{name}", args=args), **kw)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# --- the bisection page -----------------------------------------------------------------


def test_the_page_shows_the_original_every_step_and_the_confirmed_culprit(client):
    c = bisectable_comparison()
    b = culprit_found(c)
    html = _get(client, "bisection", b.pk)
    assert f'<a href="{reverse("reports:comparison", args=[c.pk])}" id="original-link">' in html
    assert "sync-rcu-latency writer_duration (p50)" in html
    assert '<span class="mono" id="original-effect">+10.00% [+8.00, +12.00]</span>' in html
    assert 'data-outcome="culprit"' in html
    assert "Culprit confirmed" in html
    assert '<span id="culprit" data-position="2">patch 2/3 (“rcu: step 2”)' in html
    assert "confirmed: the re-run against its parent and the revert from head." in html
    # Every step beside its position, with its comparison, answer, shift and CI, reason.
    for step in b.steps.all():
        assert reverse("reports:comparison", args=[step.comparison_id]) in html
    rows = re.findall(r'<tr class="position( culprit)?( in-range)?" data-position="(\d)"'
                      r'(?: data-kind="([a-z]+)" data-answer="([a-z-]*)")?', html)  # fmt: skip
    assert [(r[0] != "", r[2], r[3], r[4]) for r in rows] == [
        (False, "1", "bisect", "like-a"),
        (True, "2", "bisect", "like-b"),
        (True, "2", "fresh", "like-b"),
        (True, "2", "revert", "like-b"),
        (False, "3", "", ""),  # not tested: one line, no step
    ]
    assert "+9.50% [+8.00, +11.00]" in html
    assert "reverted: back to A" in html
    assert 'id="confirmation"' in html
    assert "hx-get" not in html  # done: nothing polls
    assert 'id="cancel-form"' not in html


def test_a_running_bisection_polls_its_live_part_then_reloads_once_done(client):
    c = bisectable_comparison()
    b = BisectionFactory.create(comparison=c, state="bisecting", started_at=timezone.now())
    step = StepFactory.create(bisection=b, position=2, comparison=ComparisonFactory.create(
        revision_a=c.revision_a, trigger="bisection", state="running"))  # fmt: skip
    live = reverse("reports:bisection-live", args=[b.pk])
    html = _get(client, "bisection", b.pk)
    assert f'hx-get="{live}" hx-trigger="every 5s"' in html
    part = _get(client, "bisection-live", b.pk, headers={"HX-Request": "true"})
    assert part.lstrip().startswith('<section id="bisection-live" data-state="bisecting"')
    assert "0 of 1 step answered" in part
    assert f'#{step.comparison_id}</a> <span class="small muted">running</span>' in part
    Bisection.objects.filter(pk=b.pk).update(
        state="done", result="ok", outcome="range", first=1, last=3, summary="The change lies in …"
    )
    response = client.get(live, headers={"HX-Request": "true"})
    assert response["HX-Refresh"] == "true"
    html = _get(client, "bisection", b.pk)
    assert "hx-get" not in html
    assert html.count('class="position in-range"') == 3


def test_a_restricted_comparisons_bisection_is_only_for_its_trees_members(client):
    tree = TreeFactory.create(name="embargo", public=False)
    c = bisectable_comparison(tree, visibility=Comparison.Visibility.RESTRICTED)
    b = culprit_found(c)
    for name in ("bisection", "bisection-live"):
        client.logout()
        assert_only_members_see(client, c, reverse(f"reports:{name}", args=[b.pk]))
    client.force_login(UserFactory.create(username="outsider"))
    assert f'id="bisection-{b.pk}"' not in _get(client, "bisection-list")
    assert client.post(reverse("reports:bisection-cancel", args=[b.pk])).status_code == 404


def test_an_attribution_draws_its_waterfall(client):
    c = bisectable_comparison()
    b = BisectionFactory.create(
        comparison=c, mode=Bisection.Mode.ATTRIBUTE, state="done", result="ok",
        outcome=Bisection.Outcome.ATTRIBUTED, summary='Beyond the threshold: patch 2/3.',
    )  # fmt: skip
    for position, shift in ((1, 0.2), (2, 9.0), (3, 0.4)):
        _step(b, Step.Kind.PATCH, position, Step.Answer.MEASURED, shift)
    html = _get(client, "bisection", b.pk)
    assert html.count('class="plotly-graph-div"') == 1
    assert reverse("reports:plotly-js", args=[plotly.__version__]) in html
    assert "each patch against its parent" in html
    assert "Every patch measured" in html


def _plotly_version() -> str:
    import plotly

    return str(plotly.__version__)


def test_who_asked_may_cancel_from_the_page_others_see_no_button(client):
    tree = TreeFactory.create(name="rcu", public=True)
    alice, dave = UserFactory.create(username="alice"), UserFactory.create(username="dave")
    for u in (alice, dave):
        MembershipFactory.create(tree=tree, user=u, role=TreeMembership.Role.SUBMITTER)
    b = BisectionFactory.create(comparison=bisectable_comparison(tree), state="bisecting",
                                requested_by=alice)  # fmt: skip
    url = reverse("reports:bisection-cancel", args=[b.pk])
    client.force_login(dave)
    assert 'id="cancel-form"' not in _get(client, "bisection", b.pk)
    assert client.post(url).status_code == 403
    client.force_login(alice)
    assert f'action="{url}"' in _get(client, "bisection", b.pk)
    response = client.post(url)
    assert response.status_code == 302
    assert response["Location"] == reverse("reports:bisection", args=[b.pk])
    b.refresh_from_db()
    assert (b.state, b.result, b.error_code) == ("done", "incomplete", "cancelled")
    assert "cancelled by alice" in _get(client, "bisection", b.pk)


def test_a_long_range_folds_the_untested_commits():
    positions = [Position(p, f"{p:012x}", f"{p:040x}", f"commit {p}", "", "",
                          steps=(Step(position=p),) if p in (50, 75) else (),
                          in_range=p == 75, culprit=p == 75) for p in range(1, 101)]  # fmt: skip
    rows = fold(positions)
    shown = [r.position.position if r.position else -r.folded for r in rows]
    assert shown == [1, -47, 49, 50, 51, -22, 74, 75, 76, -23, 100]
    assert [len(r.lines) for r in rows if r.position] == [1, 1, 1, 1, 1, 1, 1, 1]
    assert fold(positions[:40]) == [Row(p) for p in positions[:40]]
    assert [line.step for line in fold(positions[:1])[0].lines] == [None]


# --- the list -----------------------------------------------------------------------------


def test_the_list_shows_the_newest_first_with_state_outcome_and_comparison(client):
    c = bisectable_comparison()
    old = culprit_found(c)
    new = BisectionFactory.create(comparison=c, mode=Bisection.Mode.ATTRIBUTE, state="queued")
    html = _get(client, "bisection-list")
    assert html.index(f'id="bisection-{new.pk}"') < html.index(f'id="bisection-{old.pk}"')
    assert "Culprit confirmed" in html
    assert "Per-patch attribution" in html
    assert reverse("reports:comparison", args=[c.pk]) in html
    assert "(2 bisections)" in html
    assert f'<a href="{reverse("reports:bisection-list")}">bisections</a>' in html  # nav


# --- on the comparison report -------------------------------------------------------------


@pytest.fixture
def people():
    tree = TreeFactory.create(name="rcu", public=True)
    submitter, outsider = UserFactory.create(username="sub"), UserFactory.create(username="out")
    MembershipFactory.create(tree=tree, user=submitter)
    return tree, submitter, outsider


def _report(client, c) -> str:
    return _get(client, "comparison", c.pk)


def test_the_bisect_buttons_are_for_submitters_on_a_done_comparison_with_a_regression(
    client, people
):
    tree, submitter, outsider = people
    c = bisectable_comparison(tree)
    assert 'class="bisect-form"' not in _report(client, c)  # anonymous
    client.force_login(outsider)
    assert 'class="bisect-form"' not in _report(client, c)
    client.force_login(submitter)
    html = _report(client, c)
    form = html[html.index('<form method="post" action="/comparisons/') :]
    form = form[: form.index("</form>")]
    assert f'action="{reverse("reports:comparison-bisect", args=[c.pk])}"' in form
    for name, value in (("benchmark", "sync-rcu-latency"), ("metric", "writer_duration"),
                        ("statistic", "p50")):  # fmt: skip
        assert f'<input type="hidden" name="{name}" value="{value}">' in form
    assert '<button type="submit" name="mode" value="bisect" class="bisect">Bisect</button>' in form
    assert 'value="attribute" class="attribute">Attribute per patch</button>' in form  # a series
    assert "+10.00% [+8.00, +12.00]" in html


@pytest.mark.parametrize("shape", ["no regression", "running", "a push range", "a step"])
def test_no_bisect_button_where_there_is_nothing_to_bisect(client, people, shape):
    tree, submitter, _ = people
    c = bisectable_comparison(tree, verdict="no-meaningful-change" if shape == "no regression"
                              else "regression")  # fmt: skip
    if shape == "running":
        Comparison.objects.filter(pk=c.pk).update(state="running", result="")
    if shape == "a step":
        Comparison.objects.filter(pk=c.pk).update(trigger=Comparison.Trigger.BISECTION)
    if shape == "a push range":  # no series: bisect only
        c.revision_b.series = None
        c.revision_b.save()
    client.force_login(submitter)
    html = _report(client, c)
    if shape == "a push range":
        assert 'value="bisect" class="bisect"' in html
        assert "Attribute per patch" not in html
    else:
        assert 'class="bisect-form"' not in html


def test_a_statistic_too_noisy_to_bisect_says_so_instead_of_a_button(client, people):
    tree, submitter, _ = people
    c = bisectable_comparison(tree)
    row = c.verdicts.get()
    row.details = {**row.details, "smallest_detectable_shift": 40.0}  # noise beyond +10%
    row.save()
    client.force_login(submitter)
    html = _report(client, c)
    assert 'class="bisect-form"' not in html  # start() would refuse it: the same rule
    assert "not bisected: too noisy to bisect: at " in html
    assert "more than the effect (10)" in html


def test_posting_the_button_starts_a_bisection_and_shows_it(client, people):
    tree, submitter, _ = people
    c = bisectable_comparison(tree)
    client.force_login(submitter)
    url = reverse("reports:comparison-bisect", args=[c.pk])
    form = {"benchmark": "sync-rcu-latency", "metric": "writer_duration", "statistic": "p50",
            "mode": "attribute"}  # fmt: skip
    response = client.post(url, form)
    b = Bisection.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("reports:bisection", args=[b.pk])
    assert (b.mode, b.kind, b.trigger, b.requested_by, b.n) == (
        "attribute", "series", "web", submitter, 3
    )  # fmt: skip
    again = client.post(url, form, follow=True)
    assert Bisection.objects.count() == 1
    assert "your request joined it" in again.content.decode()
    html = _report(client, c)
    assert (
        f'href="{reverse("reports:bisection", args=[b.pk])}">Per-patch attribution #{b.pk}' in html
    )


def test_a_refused_bisection_shows_why_on_the_report(client, people):
    tree, submitter, outsider = people
    c = bisectable_comparison(tree)
    client.force_login(submitter)
    url = reverse("reports:comparison-bisect", args=[c.pk])
    response = client.post(url, {"benchmark": "sync-rcu-latency", "metric": "gps",
                                 "statistic": "value"}, follow=True)  # fmt: skip
    assert response.redirect_chain == [
        (reverse("reports:comparison", args=[c.pk]) + "#bisect", 302)
    ]
    html = response.content.decode()
    assert (
        f"Not bisected: comparison #{c.pk} has no verdict on sync-rcu-latency gps (value)" in html
    )
    response = client.post(url, {"benchmark": "sync-rcu-latency"}, follow=True)
    assert "name the benchmark, the metric and the statistic, or none" in response.content.decode()
    assert not Bisection.objects.exists()
    client.force_login(outsider)
    assert client.post(url).status_code == 403  # sees it, may not submit to its tree
