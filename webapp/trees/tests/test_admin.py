"""Operators name trees and grant roles in /admin/ (README: "accounts are made by operators
in /admin/"), through the real admin views: each test reads the admin's own form from the
page and posts it back with what an operator would change."""

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.test import Client
from django.urls import Resolver404, resolve

from tests.support.factories import MembershipFactory, TreeFactory, UserFactory
from tests.support.forms import form_data
from webapp.trees.models import Tree, TreeMembership
from webapp.trees.services import DEFAULT_TREE, default_tree

pytestmark = pytest.mark.django_db

BAD_NAMES = ["-rf", ".", "..", ".hidden", "linux 6.12", "linux/6.12", "rcu:dev", "linux-ü",
             "x" * 65]  # fmt: skip
GOOD_NAMES = ["linux-6.12", "linux-rcu", "v6.13-rc1", "linux_next", "6.12.y", "a"]


def _post(client: Client, page_url: str, form_id: str, **changes: str):
    page = client.get(page_url)
    assert page.status_code == 200, page_url
    return client.post(page_url, {**form_data(page.content.decode(), form_id), **changes})


def test_the_default_tree_saves_with_a_role_added(admin_client):
    tree, user = default_tree(), UserFactory.create()
    url = f"/admin/trees/tree/{tree.pk}/change/"
    response = _post(admin_client, url, "tree_form", **{
        "memberships-0-user": str(user.pk), "memberships-0-role": "admin"})  # fmt: skip
    assert response.status_code == 302, response.context["errors"]
    assert TreeMembership.objects.get(tree=tree, user=user).role == "admin"
    assert Tree.objects.get(pk=tree.pk).name == DEFAULT_TREE


def test_whose_mail_commands_a_tree_takes_is_set_on_its_page(admin_client):
    tree = default_tree()
    assert tree.mail_commands_from == "members"  # the default: today's rule
    url = f"/admin/trees/tree/{tree.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert "also every address the answered mail was sent to" in page
    response = _post(admin_client, url, "tree_form", mail_commands_from="recipients")
    assert response.status_code == 302, response.context["errors"]
    assert Tree.objects.get(pk=tree.pk).mail_commands_from == "recipients"
    response = _post(admin_client, url, "tree_form", mail_commands_from="anyone")
    assert response.status_code == 200  # refused beside the field
    assert Tree.objects.get(pk=tree.pk).mail_commands_from == "recipients"


def test_a_tree_named_after_its_version_is_added(admin_client):
    response = _post(admin_client, "/admin/trees/tree/add/", "tree_form",
                     name="linux-6.13", url="/srv/git/linux-6.13.git")  # fmt: skip
    assert response.status_code == 302, response.context["errors"]
    assert Tree.objects.filter(name="linux-6.13").exists()


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_name_outside_the_rule_is_refused_beside_its_field(admin_client, name):
    response = _post(admin_client, "/admin/trees/tree/add/", "tree_form",
                     name=name, url="/srv/git/linux.git")  # fmt: skip
    assert response.status_code == 200
    assert "name" in response.context["adminform"].form.errors
    assert not Tree.objects.exists()


@pytest.mark.parametrize("name", BAD_NAMES[:-1] + GOOD_NAMES)
def test_model_url_and_database_follow_one_rule(name):
    """A name the model accepts has pages; one it refuses has none, and the database
    refuses it too (for code that creates trees without the admin's checks)."""
    try:
        Tree(name=name, url="/srv/git/linux.git").full_clean()
        valid = True
    except ValidationError as exc:
        valid = "name" not in exc.message_dict
    try:
        resolve(f"/trees/{name}/")
        routed = True
    except Resolver404:
        routed = False
    assert routed == valid
    if valid:
        TreeFactory.create(name=name)
    else:
        with pytest.raises(IntegrityError, match="tree_name_rule"):
            TreeFactory.create(name=name)


def test_a_role_is_granted_from_the_users_page(admin_client):
    tree, user = default_tree(), UserFactory.create()
    response = _post(admin_client, f"/admin/auth/user/{user.pk}/change/", "user_form", **{
        "memberships-0-tree": str(tree.pk), "memberships-0-role": "submitter"})  # fmt: skip
    assert response.status_code == 302, response.context["errors"]
    assert TreeMembership.objects.get(tree=tree, user=user).role == "submitter"


def test_the_users_page_lists_and_removes_their_roles(admin_client):
    m = MembershipFactory.create(tree=default_tree(), role="admin")
    url = f"/admin/auth/user/{m.user.pk}/change/"
    data = form_data(admin_client.get(url).content.decode(), "user_form")
    assert data["memberships-0-id"] == str(m.pk)
    response = admin_client.post(url, {**data, "memberships-0-DELETE": "on"})
    assert response.status_code == 302, response.context["errors"]
    assert not TreeMembership.objects.exists()


def test_memberships_have_an_admin_of_their_own(admin_client):
    tree, user = default_tree(), UserFactory.create(username="paul")
    response = _post(admin_client, "/admin/trees/treemembership/add/", "treemembership_form",
                     tree=str(tree.pk), user=str(user.pk), role="admin")  # fmt: skip
    assert response.status_code == 302, response.context["errors"]
    page = admin_client.get("/admin/trees/treemembership/", {"tree__id__exact": tree.pk})
    assert "paul" in page.content.decode()
    assert DEFAULT_TREE in page.content.decode()
    # The autocomplete of either side finds the other by name.
    found = admin_client.get("/admin/autocomplete/", {"term": "linux-6", "app_label": "trees",
        "model_name": "treemembership", "field_name": "tree"}).json()  # fmt: skip
    assert [r["text"] for r in found["results"]] == [DEFAULT_TREE]


def test_a_second_role_on_the_same_tree_is_refused_beside_the_form(admin_client):
    m = MembershipFactory.create(tree=default_tree())
    response = _post(admin_client, "/admin/trees/treemembership/add/", "treemembership_form",
                     tree=str(m.tree.pk), user=str(m.user.pk), role="admin")  # fmt: skip
    assert response.status_code == 200
    assert TreeMembership.objects.get().role == "submitter"
    assert User.objects.count() == 2  # the admin and the member


def test_the_tree_form_offers_only_fields_that_do_something(admin_client):
    """No "Webhook secret" (a push is checked against the secrets `./manage.py
    webhook_secret` makes, and no other) and no "Baseline policy"/"Baseline ref" (a push is
    compared with its branch's previous tested head, the watch policy's rule); the page
    says where each is set instead."""
    page = admin_client.get("/admin/trees/tree/add/").content.decode()
    fields = {k for k in form_data(page, "tree_form") if not k.startswith("memberships-")}
    assert fields == {"csrfmiddlewaretoken", "name", "url", "description", "public",
                      "mail_commands_from"}  # fmt: skip
    assert "./manage.py webhook_secret" in page
    assert "watch polic" in page
