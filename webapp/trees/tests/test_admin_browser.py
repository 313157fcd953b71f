"""An operator grants a role on the default tree `linux-6.12` through the admin pages, in a
real headless Chromium against the live server: the user's page with its "roles on trees"
inline (the tree picked with the admin's autocomplete), then the tree's own page, saved
with its dotted name."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.support.browser import log_in, pick_autocomplete
from tests.support.factories import PASSWORD, UserFactory
from webapp.trees.models import TreeMembership
from webapp.trees.services import DEFAULT_TREE, default_tree

pytestmark = pytest.mark.django_db(transaction=True)


def _saved(driver) -> str:
    found = WebDriverWait(driver, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "ul.messagelist li.success"),
        "the admin did not say it saved",
    )
    return found[0].text


def test_the_operator_grants_a_role_on_the_default_tree(browser, live_server, tmp_path):
    tree = default_tree()
    UserFactory.create(username="root", is_staff=True, is_superuser=True)
    ada = UserFactory.create(username="ada")
    log_in(browser, live_server.url, "root", PASSWORD)

    browser.get(f"{live_server.url}/admin/auth/user/{ada.pk}/change/")
    row = browser.find_element(By.ID, "memberships-0")
    pick_autocomplete(browser, row, "linux-6", DEFAULT_TREE)
    Select(row.find_element(By.CSS_SELECTOR, "select[name$='-role']")).select_by_value("admin")
    browser.find_element(By.CSS_SELECTOR, "input[name=_continue]").click()
    assert "was changed successfully" in _saved(browser)
    assert TreeMembership.objects.get(user=ada).role == "admin"

    # The tree's page shows the role and saves as it is, with the dot in its name.
    browser.get(f"{live_server.url}/admin/trees/tree/{tree.pk}/change/")
    # Only fields that do something (issue 31, item 2): webhook secrets are set with
    # `manage.py webhook_secret`, the baseline by the watch policy.
    fields = {
        e.get_attribute("name") for e in browser.find_elements(By.CSS_SELECTOR, "#tree_form [name]")
    }
    assert {"name", "url", "description", "public"} <= fields
    assert not fields & {"webhook_secret", "baseline_policy", "baseline_ref"}
    role = Select(browser.find_element(By.ID, "id_memberships-0-role"))
    assert role.first_selected_option.get_attribute("value") == "admin"
    browser.find_element(By.CSS_SELECTOR, "input[name=_continue]").click()
    assert f"{DEFAULT_TREE}” was changed successfully" in _saved(browser)
    browser.save_screenshot(str(tmp_path / "tree-admin.png"))  # kept by pytest for a look
    assert TreeMembership.objects.get(user=ada, tree__name=DEFAULT_TREE).role == "admin"
