"""The regression page, its triage buttons and the tree's triage page, through Django's
test client (the views are thin: the rules are test_services.py's)."""

import pytest

from tests.support.factories import (
    MembershipFactory,
    UserFactory,
    bisectable_comparison,
    reported_regression,
)
from webapp.comparisons.models import Comparison
from webapp.regressions import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def reg():
    return reported_regression()


def _login(client, reg, role="submitter"):
    user = UserFactory.create()
    MembershipFactory.create(tree=reg.tree, user=user, role=role)
    client.force_login(user)
    return user


def test_anyone_who_sees_the_comparison_reads_the_page_without_buttons(client, reg):
    html = client.get(f"/regressions/{reg.pk}/").content.decode()
    assert f"Regression {reg.pk}: sync-rcu-latency/writer_duration p50" in html
    assert 'id="regression-state">untriaged<' in html
    assert "16.70% [14.70, 18.70]" in html
    assert f'href="/comparisons/{reg.comparison_id}/"' in html
    assert 'id="triage-form"' not in html
    assert "<td>(opened)</td><td>untriaged</td>\n<td>rcubench</td><td>report</td>" in html


def test_a_submitter_moves_it_with_a_button(client, reg):
    user = _login(client, reg)
    html = client.get(f"/regressions/{reg.pk}/").content.decode()
    for state in ("acknowledged", "investigating", "invalid", "fixed", "duplicate"):
        assert f'name="state" value="{state}"' in html
    r = client.post(f"/regressions/{reg.pk}/move/", {"state": "acknowledged", "note": "real"})
    assert (r.status_code, r["Location"]) == (302, f"/regressions/{reg.pk}/")
    html = client.get(r["Location"]).content.decode()
    assert f"Regression {reg.pk} is acknowledged now." in html
    assert (f"<td>untriaged</td><td>acknowledged</td>\n<td>{user.username}</td><td>web</td>"
            "<td>real</td>") in html  # fmt: skip


@pytest.mark.parametrize(
    ("form", "said"),
    [
        ({"state": "invalid"}, "Not moved: invalid needs a reason"),
        (
            {"state": "duplicate", "duplicate_of": "abc"},
            "duplicate of &#x27;abc&#x27;: give a regression number",
        ),
        ({"state": "untriaged"}, "Not moved: regression"),
    ],
)
def test_a_refused_move_says_why_and_stores_nothing(client, reg, form, said):
    _login(client, reg)
    r = client.post(f"/regressions/{reg.pk}/move/", form, follow=True)
    assert said in r.content.decode()
    reg.refresh_from_db()
    assert (reg.state, reg.transitions.count()) == ("untriaged", 1)


def test_who_may_not(client, reg):
    assert client.post(f"/regressions/{reg.pk}/move/", {"state": "acknowledged"}).status_code == 403
    outsider = UserFactory.create()
    client.force_login(outsider)
    assert client.post(f"/regressions/{reg.pk}/move/", {"state": "acknowledged"}).status_code == 403
    Comparison.objects.filter(pk=reg.comparison_id).update(visibility="restricted")
    assert client.get(f"/regressions/{reg.pk}/").status_code == 404
    assert client.post(f"/regressions/{reg.pk}/move/", {"state": "acknowledged"}).status_code == 404
    assert client.get("/regressions/99999/").status_code == 404
    reg.refresh_from_db()
    assert reg.state == "untriaged"


def test_the_tree_triage_page(client, reg):
    _login(client, reg)
    client.post(f"/regressions/{reg.pk}/move/", {"state": "fixed", "fixed_by": "0123456789ab"})
    other = services.open_for_comparison(bisectable_comparison(reg.tree).pk)
    assert other is not None
    html = client.get(f"/trees/{reg.tree.name}/regressions/").content.decode()
    assert "1 open, 1 of them untriaged." in html
    assert f'<a href="/regressions/{other.pk}/">{other.pk}</a></td><td>untriaged' in html
    assert "fixed by 0123456789ab" in html
    assert client.get("/trees/no-such-tree/regressions/").status_code == 404


def test_the_report_and_the_tree_page_link_to_it(client, reg):
    html = client.get(f"/comparisons/{reg.comparison_id}/").content.decode()
    assert (f'Reported as <a href="/regressions/{reg.pk}/">regression {reg.pk}</a>: '
            "untriaged.") in html  # fmt: skip
    html = client.get(f"/trees/{reg.tree.name}/").content.decode()
    assert f'href="/trees/{reg.tree.name}/regressions/" id="regressions-link"' in html
