"""The live pages in a real headless Chromium against the live server: progress that changes
without a reload, a restricted comparison a second user cannot see, and a cancel from the
page."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import log_in
from tests.support.factories import (
    PASSWORD,
    BuildFactory,
    ComparisonFactory,
    MembershipFactory,
    RevisionFactory,
    RunFactory,
    TreeFactory,
    UserFactory,
)
from webapp.comparisons.models import Comparison
from webapp.reports import listing

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "set-before-any-update"


@pytest.fixture
def fast_polls(monkeypatch):
    """Poll every second (the live server runs in this process)."""
    monkeypatch.setattr(listing, "POLL_SECONDS", 1)


@pytest.fixture
def running():
    """A running comparison at its first look: 2 of 48 runs are data, 2 running."""
    c = ComparisonFactory.create(state="running", scheduled_per_side=24)
    c.build_a = BuildFactory.create(revision=c.revision_a, state="done", result="ok")
    c.build_b = BuildFactory.create(revision=c.revision_b, state="done", result="ok")
    c.save()
    now = timezone.now()
    for i, side in enumerate("ABBA"):
        done = i < 2
        RunFactory.create(
            comparison=c, side=side, index=i // 2, order=i, state="done" if done else "running",
            result="ok" if done else "", started_at=now - timedelta(seconds=60),
            finished_at=now if done else None,
        )  # fmt: skip
    return c


def _finish_running_runs(c: Comparison) -> None:
    """What workers do: the running runs end ok, two more start."""
    now = timezone.now()
    c.runs.filter(state="running").update(state="done", result="ok", finished_at=now)
    for i, side in enumerate("AB"):
        RunFactory.create(comparison=c, side=side, index=2, order=4 + i, state="running",
                          started_at=now)  # fmt: skip


def _mark_the_window(driver) -> None:
    driver.execute_script(f"window.__rcubenchMarker = {MARKER!r};")


def _not_reloaded(driver) -> None:
    assert driver.execute_script("return window.__rcubenchMarker") == MARKER
    navigations = driver.execute_script(
        "return performance.getEntriesByType('navigation').map(e => e.type)"
    )
    assert navigations == ["navigate"]  # one navigation, the first load; no reload


def _wait_for_htmx(driver) -> None:
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return typeof window.htmx") == "object"
    )


@pytest.mark.usefixtures("fast_polls")
def test_the_list_row_shows_progress_change_without_a_reload(browser, live_server, running):
    browser.get(live_server.url + reverse("reports:comparison-list"))
    _wait_for_htmx(browser)
    _mark_the_window(browser)
    row = f"#comparison-{running.pk} td.progress"
    cell = browser.find_element(By.CSS_SELECTOR, row)
    assert cell.get_attribute("data-done") == "2"
    assert "2 / 48" in cell.text
    assert "running look 1" in cell.text
    _finish_running_runs(running)
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.CSS_SELECTOR, row).get_attribute("data-done") == "4",
        "the row's progress did not change",
    )
    text = browser.find_element(By.CSS_SELECTOR, row).text
    assert "4 / 48" in text
    assert "ETA ~" in text  # 44 runs x 60 s / 2 running
    _not_reloaded(browser)
    # once it is done the row says so and polls no more
    Comparison.objects.filter(pk=running.pk).update(state="done", result="ok",
                                                     verdict="improvement")  # fmt: skip
    tr = f"#comparison-{running.pk}"
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.CSS_SELECTOR, tr).get_attribute("data-state") == "done"
    )
    assert browser.find_element(By.CSS_SELECTOR, tr).get_attribute("hx-trigger") is None
    _not_reloaded(browser)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors


@pytest.mark.usefixtures("fast_polls")
def test_the_comparison_page_shows_progress_change_without_a_reload(browser, live_server, running):
    browser.get(live_server.url + reverse("reports:comparison", args=[running.pk]))
    _wait_for_htmx(browser)
    _mark_the_window(browser)
    done = browser.find_element(By.ID, "runs-done")
    assert done.get_attribute("data-done") == "2"
    assert "A 1 ok" in browser.find_element(By.ID, "progress").text
    _finish_running_runs(running)
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.ID, "runs-done").get_attribute("data-done") == "4",
        "the live part did not change",
    )
    live = browser.find_element(By.ID, "progress").text
    assert "A 2 ok, 0 failed, 0 incomplete, 1 queued or running" in live
    assert "running look 1" in live
    _not_reloaded(browser)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors
    # Once it is done, the page reloads once to show the whole report, and polls no more.
    Comparison.objects.filter(pk=running.pk).update(state="done", result="ok",
                                                     verdict="improvement")  # fmt: skip
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return window.__rcubenchMarker") is None,
        "the page did not reload when the comparison ended",
    )
    WebDriverWait(browser, 30).until(lambda d: not d.find_elements(By.ID, "progress"))
    assert "verdict improvement" in browser.find_element(By.ID, "status").text


# Read in one script: each poll replaces both elements, so an element found in one call
# may be gone by the next (a stale reference under load).
_BUILD_CELLS = """return [...document.querySelectorAll('#kernels tr')]
    .filter(tr => tr.querySelector('th')?.textContent.trim() === 'build')
    .flatMap(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()));"""
_LIVE_BUILDS = """return [...document.querySelectorAll('#progress .build')]
    .map(b => b.innerText.trim());"""


def _build_cells(driver) -> list[str]:
    """The kernels table's build row: A's and B's cells."""
    return driver.execute_script(_BUILD_CELLS)


def _live_builds(driver) -> list[str]:
    return driver.execute_script(_LIVE_BUILDS)


@pytest.mark.usefixtures("fast_polls")
def test_the_live_box_and_the_kernels_table_agree_as_builds_end(browser, live_server):
    """Issue 31 item 7: the live box said both builds were ok (cached) while the kernels
    table below still said "build not started", until a reload."""
    c = ComparisonFactory.create(state="building")
    browser.get(live_server.url + reverse("reports:comparison", args=[c.pk]))
    _wait_for_htmx(browser)
    _mark_the_window(browser)
    assert _live_builds(browser) == ["A not started", "B not started"]
    assert _build_cells(browser) == ["not started", "not started"]
    # What the build workers do: both kernels come from the build cache.
    c.build_a = BuildFactory.create(revision=c.revision_a, state="done", result="ok",
                                    cached=True)  # fmt: skip
    c.build_b = BuildFactory.create(revision=c.revision_b, state="done", result="ok",
                                    cached=True, seconds=812.0)  # fmt: skip
    c.save(update_fields=["build_a", "build_b"])
    WebDriverWait(browser, 30).until(
        lambda d: _live_builds(d) == ["A ok (cached)", "B ok (cached)"],
        "the live box did not change",
    )
    assert _build_cells(browser) == ["ok (cached)", "ok (cached) · 812 s"]
    _not_reloaded(browser)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors


def test_a_second_user_cannot_see_a_restricted_comparison(browser, live_server):
    tree = TreeFactory.create(name="security", public=False)
    owner = MembershipFactory.create(tree=tree, user=UserFactory.create(username="owner")).user
    c = ComparisonFactory.create(
        revision_a=RevisionFactory.create(tree=tree, ref="v6.12-embargo"),
        revision_b=RevisionFactory.create(tree=tree, ref="fix-cve"), submitted_by=owner,
        visibility=Comparison.Visibility.RESTRICTED,
    )  # fmt: skip
    run = RunFactory.create(comparison=c, console_log="secret console\n")
    UserFactory.create(username="second")
    page = live_server.url + reverse("reports:comparison", args=[c.pk])

    log_in(browser, live_server.url, "owner", PASSWORD)
    browser.get(page)
    assert "fix-cve" in browser.find_element(By.TAG_NAME, "h1").text

    browser.delete_all_cookies()
    log_in(browser, live_server.url, "second", PASSWORD)
    for url in (page, live_server.url + reverse("reports:run", args=[run.pk])):
        browser.get(url)
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "Not Found" in body
        assert "fix-cve" not in browser.page_source
        assert "secret console" not in browser.page_source
    browser.get(live_server.url + reverse("reports:comparison-list"))
    assert not browser.find_elements(By.ID, f"comparison-{c.pk}")
    assert "fix-cve" not in browser.page_source


def test_the_submitter_cancels_a_running_comparison_from_the_page(browser, live_server, running):
    owner = UserFactory.create(username="owner")
    MembershipFactory.create(tree=running.revision_a.tree, user=owner)
    Comparison.objects.filter(pk=running.pk).update(submitted_by=owner)
    log_in(browser, live_server.url, "owner", PASSWORD)
    browser.get(live_server.url + reverse("reports:comparison", args=[running.pk]))
    browser.find_element(By.ID, "cancel").click()
    WebDriverWait(browser, 10).until(ec.alert_is_present()).accept()  # "Cancel comparison #N?"
    error = WebDriverWait(browser, 30).until(ec.visibility_of_element_located((By.ID, "error")))
    assert "cancelled" in error.text
    assert "cancelled by owner on the web page" in error.text
    assert "state done" in browser.find_element(By.ID, "status").text
    assert not browser.find_elements(By.ID, "cancel")
    running.refresh_from_db()
    assert (running.state, running.result, running.error_code) == ("done", "incomplete",
                                                                   "cancelled")  # fmt: skip
    assert not running.runs.exclude(state="done").exists()
