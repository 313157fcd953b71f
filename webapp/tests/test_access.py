"""Who sees and does what (webapp.access), through the real pages, downloads and login."""

import pytest
from django.urls import reverse

from tests.support.factories import (
    PASSWORD,
    ComparisonFactory,
    MembershipFactory,
    PatchSeriesFactory,
    RevisionFactory,
    RunFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
)
from webapp import access
from webapp.comparisons.models import Comparison
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.trees.models import TreeMembership

pytestmark = pytest.mark.django_db


@pytest.fixture
def embargoed():
    """A restricted comparison of a series on a non-public tree, with a run."""
    tree = TreeFactory.create(name="security", public=False)
    series = PatchSeriesFactory.create()
    c = ComparisonFactory.create(
        revision_a=RevisionFactory.create(tree=tree),
        revision_b=RevisionFactory.create(tree=tree, series=series),
        visibility=Comparison.Visibility.RESTRICTED,
    )
    run = RunFactory.create(comparison=c, console_log="[    0.000000] Linux version 6.12\n")
    return c, run, series


def _urls(c, run, series) -> list[str]:
    return [
        reverse("reports:comparison", args=[c.pk]),
        reverse("reports:comparison-csv", args=[c.pk]),
        reverse("reports:comparison-json", args=[c.pk]),
        reverse("reports:run-console", args=[run.pk]),
        reverse("reports:series-mbox", args=[series.pk]),
    ]


def _status(client, url: str) -> int:
    response = client.get(url)
    if hasattr(response, "streaming_content"):
        b"".join(response.streaming_content)  # a stream's errors surface while it is read
    return response.status_code


def test_a_restricted_comparison_is_404_to_anyone_but_members_and_staff(client, embargoed):
    urls = _urls(*embargoed)
    tree = embargoed[0].revision_a.tree
    assert [_status(client, u) for u in urls] == [404] * 5  # anonymous: as if absent
    client.force_login(UserFactory.create(username="outsider"))
    assert [_status(client, u) for u in urls] == [404] * 5
    client.force_login(MembershipFactory.create(tree=tree).user)
    assert [_status(client, u) for u in urls] == [200] * 5
    client.force_login(UserFactory.create(username="operator", is_staff=True))
    assert [_status(client, u) for u in urls] == [200] * 5


def test_the_list_shows_restricted_comparisons_to_members_only(client, embargoed):
    c = embargoed[0]
    public = ComparisonFactory.create()
    shown = lambda: set(client.get(reverse("reports:comparison-list")).context["page"].object_list)  # noqa: E731
    assert shown() == {public}
    client.force_login(UserFactory.create(username="outsider"))
    assert shown() == {public}
    client.force_login(MembershipFactory.create(tree=c.revision_a.tree).user)
    assert shown() == {public, c}


def test_a_series_is_visible_where_a_visible_comparison_tests_it(client, embargoed):
    _, _, series = embargoed
    # The same series in a public comparison.
    ComparisonFactory.create(revision_b=RevisionFactory.create(series=series))
    assert _status(client, reverse("reports:series-mbox", args=[series.pk])) == 200


def _request(**kw) -> ComparisonRequest:
    fields = dict(tree="rcu", base_ref="v6.12", head_ref="v6.12-rc7", benchmarks=("boot-time",),
                  target="qemu-x86_64")  # fmt: skip
    return ComparisonRequest(**{**fields, **kw})


def test_only_members_submit_and_a_tree_sets_the_default_visibility():
    TargetFactory.create()
    tree = TreeFactory.create(name="rcu")
    outsider = UserFactory.create(username="outsider")
    with pytest.raises(SubmissionError) as err:
        submit_comparison(_request(submitted_by=outsider.pk))
    assert err.value.as_dict() == {
        "tree": ["you may not submit to tree rcu: ask its admins for the submitter role"]
    }
    assert not Comparison.objects.exists()
    member = MembershipFactory.create(tree=tree).user
    c = submit_comparison(_request(submitted_by=member.pk))
    assert (c.submitted_by, c.visibility) == (member, Comparison.Visibility.PUBLIC)
    tree.public = False
    tree.save()
    c = submit_comparison(_request(submitted_by=member.pk))
    assert c.visibility == Comparison.Visibility.RESTRICTED
    with pytest.raises(SubmissionError, match="tree rcu is not public") as err:
        submit_comparison(_request(submitted_by=member.pk, visibility="public"))
    assert err.value.field == "visibility"
    with pytest.raises(SubmissionError, match="visibility must be one of public, restricted"):
        submit_comparison(_request(submitted_by=member.pk, visibility="secret"))
    assert Comparison.objects.count() == 2


def test_cancel_rights_submitter_tree_admin_and_staff(embargoed):
    c = embargoed[0]
    tree = c.revision_a.tree
    submitter = MembershipFactory.create(tree=tree).user
    c.submitted_by = submitter
    c.save()
    other_submitter = MembershipFactory.create(tree=tree).user
    admin = MembershipFactory.create(tree=tree, role=TreeMembership.Role.ADMIN).user
    staff = UserFactory.create(username="operator", is_staff=True)
    assert [access.can_cancel(u, c) for u in (submitter, other_submitter, admin, staff)] == [
        True, False, True, True]  # fmt: skip


def test_login_locks_a_user_name_out_after_five_failures_from_one_address(client):
    user = UserFactory.create(username="paul")
    url = reverse("login")
    for _ in range(4):
        r = client.post(url, {"username": "paul", "password": "wrong"})
        assert r.status_code == 200
        assert "Please enter a correct username and password" in r.content.decode()
    r = client.post(url, {"username": "paul", "password": "wrong"})
    assert r.status_code == 429
    assert "Too many failed logins" in r.content.decode()
    # Locked: even the right password is refused from this address...
    r = client.post(url, {"username": "paul", "password": PASSWORD})
    assert r.status_code == 429
    assert "_auth_user_id" not in client.session
    # ...but not from another, and there it logs in.
    r = client.post(url, {"username": "paul", "password": PASSWORD}, REMOTE_ADDR="192.0.2.7")
    assert r.status_code == 302
    assert client.session["_auth_user_id"] == str(user.pk)


def test_a_submission_tells_an_outsider_nothing_of_a_tree_it_may_not_see(client):
    """An embargoed tree is answered as a name that does not exist, and the error lists
    only the trees the account may submit to."""
    TargetFactory.create()
    TreeFactory.create(name="security", public=False)
    mine = TreeFactory.create(name="rcu")
    outsider = UserFactory.create(username="outsider")
    MembershipFactory.create(tree=mine, user=outsider)

    def refusal(name: str) -> dict[str, list[str]]:
        with pytest.raises(SubmissionError) as err:
            submit_comparison(_request(tree=name, submitted_by=outsider.pk))
        return err.value.as_dict()

    assert refusal("security") == {"tree": ["no tree named 'security'; trees you may submit "
                                            "to: rcu"]}  # fmt: skip
    assert refusal("nonesuch") == {"tree": ["no tree named 'nonesuch'; trees you may submit "
                                            "to: rcu"]}  # fmt: skip
    # The API answers the same: only the echoed name differs.
    client.force_login(outsider)
    fields = {"base_ref": "v6.12", "head_ref": "v6.12-rc7", "benchmarks": ["boot-time"],
              "target": "qemu-x86_64"}  # fmt: skip
    answers = [
        client.post("/api/v1/comparisons/", {**fields, "tree": name},
                    content_type="application/json")
        for name in ("security", "nonesuch")
    ]  # fmt: skip
    assert [a.status_code for a in answers] == [400, 400]
    embargoed, unknown = (a.content.decode() for a in answers)
    assert embargoed.replace("security", "nonesuch") == unknown
    assert not Comparison.objects.exists()


def test_a_public_report_names_the_submitter_by_user_name_not_address(client):
    """Web submissions stored the account's address in requested_by: the report, its data
    and its mail show the user name instead."""
    ada = UserFactory.create(username="ada", email="ada.lovelace@example.org")
    c = ComparisonFactory.create(trigger=Comparison.Trigger.WEB, submitted_by=ada,
                                 requested_by="ada.lovelace@example.org")  # fmt: skip
    html = client.get(reverse("reports:comparison", args=[c.pk])).content.decode()
    assert "by web (ada)" in html
    data = b"".join(client.get(reverse("reports:comparison-json", args=[c.pk])).streaming_content)
    for shown in (html, data.decode()):
        assert "lovelace" not in shown


def test_a_tree_url_with_credentials_is_shown_without_them(client):
    url = "https://paul:ghp_T0kenT0ken@git.example.org/rcu.git"
    tree = TreeFactory.create(name="private-rcu", url=url)
    html = client.get(reverse("reports:tree", args=[tree.name])).content.decode()
    assert "ghp_T0kenT0ken" not in html
    assert "paul:" not in html
    assert "https://***@git.example.org/rcu.git" in html
