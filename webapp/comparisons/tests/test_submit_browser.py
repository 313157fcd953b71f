"""The submission form in a real headless Chromium against the live server: log in, submit
a series (an mbox upload) and land on its comparison page; a bad ref and a patch that does
not apply come back as errors beside their fields. The submission's first task goes to the
test broker (RCUBENCH_TEST_BROKER_URL / CELERY_BROKER_URL); no worker takes it here."""

import pytest
from django.urls import reverse
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from engine.build.tests.conftest import BASE_TAG, DEFAULT_TREE, FIXTURES
from tests.support.browser import log_in
from tests.support.factories import PASSWORD, MembershipFactory, TreeFactory, UserFactory
from webapp.comparisons.models import Comparison

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def member(x86_target):
    assert (DEFAULT_TREE / "HEAD").exists(), f"{DEFAULT_TREE} missing: run scripts/setup.sh"
    tree = TreeFactory.create(name="linux-6.12", url=str(DEFAULT_TREE))
    user = UserFactory.create(username="ada")
    MembershipFactory.create(tree=tree, user=user)
    return user


def _fill(driver, base_url: str, base_ref: str, mbox: str = "") -> None:
    driver.get(f"{base_url}{reverse('comparisons:submit')}")
    driver.find_element(By.ID, "id_base_ref").send_keys(base_ref)
    if mbox:
        driver.find_element(By.ID, "id_mbox").send_keys(mbox)  # a file input takes a path
    Select(driver.find_element(By.ID, "id_target")).select_by_value("qemu-x86_64")
    driver.find_element(By.ID, "submit").click()


def _error(driver, field: str) -> str:
    found = WebDriverWait(driver, 60).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, f"#field-{field} #errors-{field}"),
        f"no error beside {field}",
    )
    return found[0].text


def test_submit_a_series_and_land_on_its_comparison_page(browser, live_server, member):
    log_in(browser, live_server.url, "ada", PASSWORD)
    _fill(browser, live_server.url, BASE_TAG, str(FIXTURES / "two-patches.mbox"))
    WebDriverWait(browser, 60).until(
        lambda d: "/comparisons/" in d.current_url, "the form did not redirect"
    )
    c = Comparison.objects.get()
    assert browser.current_url == live_server.url + reverse("reports:comparison", args=[c.pk])
    assert (c.trigger, c.submitted_by_id) == ("web", member.pk)
    assert c.revision_b.series is not None
    assert c.revision_b.series.patches.count() == 2
    assert str(c.pk) in browser.find_element(By.TAG_NAME, "h1").text


def test_a_bad_ref_and_a_patch_that_does_not_apply_are_shown_beside_their_fields(
    browser, live_server, member, tmp_path
):
    log_in(browser, live_server.url, "ada", PASSWORD)
    _fill(browser, live_server.url, "no-such-branch")
    assert _error(browser, "base_ref") == "unknown ref 'no-such-branch' in tree linux-6.12"
    _fill(browser, live_server.url, "bad..ref")
    assert _error(browser, "base_ref").startswith("bad base ref: ref 'bad..ref' is not a branch")
    _fill(browser, live_server.url, BASE_TAG, str(FIXTURES / "conflict.mbox"))
    assert _error(browser, "mbox").startswith(
        "patch 1 ('rcuscale: Reword writer_holdoff description') does not apply: "
        "kernel/rcu/rcuscale.c, hunk #1 (@@ -95,7 +95,7 @@)"
    )
    browser.save_screenshot(str(tmp_path / "submit-errors.png"))  # kept by pytest for a look
    assert not Comparison.objects.exists()
