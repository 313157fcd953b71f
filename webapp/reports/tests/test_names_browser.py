"""Kernel names and the list's width in a real headless Chromium against the live server:
at a 1,280-px window the list fits with its verdict in view, with rows as they come (a
push of a long branch, a CLI comparison of two full shas, a long series title, a running
one); a webhook comparison's list row and report title name its branch, 12-digit sha and
subject, with the full sha one click away."""

from pathlib import Path

import pytest
from django.urls import reverse
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    PatchSeriesFactory,
    RevisionFactory,
    TreeFactory,
    head_sha,
)
from webapp.comparisons.models import Comparison
from webapp.trees.models import Patch
from webapp.watch.models import Push
from webapp.webhooks.tests.conftest import HEAD_SUBJECT, pushed_comparison

pytestmark = pytest.mark.django_db(transaction=True)

WIDTH = 1280
LONG_BRANCH = "rcu/dev.2026.11.24a-expedited-boot-cleanups"
LONG_SUBJECT = "rcu: Make synchronize_rcu() fast path use a normal grace period after boot"
SERIES = ("[PATCH v3 0/7] rcu: Make synchronize_rcu() fast path use a normal grace period "
          "when the expedited boot phase ends early")  # fmt: skip


def _window(driver, width: int) -> None:
    """A window whose page is `width` px wide (the browser's own frame added)."""
    driver.set_window_size(width, 1000)
    frame = driver.execute_script("return window.outerWidth - window.innerWidth")
    driver.set_window_size(width + frame, 1000)
    assert driver.execute_script("return window.innerWidth") == width


def _rows(client, tmp_path: Path) -> Comparison:
    """The list's rows as they come: a real webhook comparison of a long branch, a push
    comparison of full shas with the longest verdict, a CLI comparison of two full shas
    that failed, a long series title, and a running one. Returns the webhook one."""
    pushed = pushed_comparison(client, tmp_path, branch=LONG_BRANCH, subject=LONG_SUBJECT)
    Comparison.objects.filter(pk=pushed.pk).update(state="done", result="ok",
                                                   verdict="regression")  # fmt: skip
    tree = TreeFactory.create(name="paulmck-linux-rcu")
    sha = lambda n: RevisionFactory.create(  # noqa: E731
        tree=tree, ref=head_sha(n), base_sha=head_sha(n), sha=head_sha(n), subject=LONG_SUBJECT
    )
    failing = ComparisonFactory.create(revision_a=sha(1), revision_b=sha(2), state="done",
                                       result="failed", error_code="build-failed")  # fmt: skip
    pushed_too = ComparisonFactory.create(
        revision_a=sha(3), revision_b=sha(4), state="done", result="ok",
        verdict="reliability-regression", trigger="webhook",
    )  # fmt: skip
    Push.objects.create(tree=tree, branch="rcu/tasks-trace.2026.11.20b-cleanups-for-6.14",
                        before=head_sha(3), after=head_sha(4), source="github",
                        state="tested").comparisons.add(pushed_too)  # fmt: skip
    series = PatchSeriesFactory.create(subject=SERIES)
    for i in range(1, 8):
        Patch.objects.create(series=series, index=i, subject=f"rcu: step {i}")
    base = RevisionFactory.create(tree__name="linux-6.12", ref="v6.12", subject="Linux 6.12")
    head = RevisionFactory.create(tree=base.tree, ref="v6.12", base_sha=base.base_sha,
                                  series=series, subject="Linux 6.12")  # fmt: skip
    ComparisonFactory.create(revision_a=base, revision_b=head, state="done", result="ok",
                             verdict="significant-but-small")  # fmt: skip
    running = ComparisonFactory.create(revision_a=base, revision_b=sha(5), state="running",
                                       scheduled_per_side=24)  # fmt: skip
    running.build_a = BuildFactory.create(revision=running.revision_a, state="done", result="ok")
    running.build_b = BuildFactory.create(revision=running.revision_b, state="running")
    running.save()
    assert failing.verdict == ""
    return pushed


def test_the_list_fits_1280_px_with_the_verdict_in_view(browser, live_server, client, tmp_path):
    _rows(client, tmp_path)
    _window(browser, WIDTH)
    browser.get(live_server.url + reverse("reports:comparison-list"))
    table = browser.find_element(By.ID, "comparisons")
    browser.save_screenshot(str(tmp_path / "list.png"))  # kept by pytest for a look
    headers = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    assert headers.index("verdict") <= 2  # among the first columns
    width = browser.execute_script("return arguments[0].getBoundingClientRect().right", table)
    assert width <= WIDTH, f"the table ends at {width} px"
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    ), "the page scrolls sideways"
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 5
    for row in rows:
        verdict = row.find_element(By.CSS_SELECTOR, "td.verdict")
        right = browser.execute_script("return arguments[0].getBoundingClientRect().right", verdict)
        assert verdict.is_displayed(), row.text
        assert right <= WIDTH, (row.text, right)
    badges = table.find_elements(By.CSS_SELECTOR, "td.verdict .badge")
    assert sorted(b.text for b in badges) == [
        "regression", "reliability-regression", "significant-but-small"]  # fmt: skip


def test_a_webhook_comparison_is_named_by_branch_sha_and_subject(
    browser, live_server, client, tmp_path
):
    c = pushed_comparison(client, tmp_path)
    head = c.revision_b.ref
    _window(browser, WIDTH)
    browser.get(live_server.url + reverse("reports:comparison-list"))
    cell = browser.find_element(By.CSS_SELECTOR, f"#comparison-{c.pk} td.kernel[data-side=B]")
    assert " ".join(cell.text.split()) == f"linux-watch/rcu/dev {head[:12]} (“{HEAD_SUBJECT}”)"
    assert cell.find_element(By.CSS_SELECTOR, ".sha").get_attribute("title") == head
    browser.get(live_server.url + reverse("reports:comparison", args=[c.pk]))
    title = browser.find_element(By.TAG_NAME, "h1")
    browser.save_screenshot(str(tmp_path / "report-top.png"))  # kept by pytest for a look
    b_name, a_name = title.text.split("\nagainst ")  # side A on a line of its own
    assert b_name == f"Comparison #{c.pk}: linux-watch/rcu/dev {head[:12]} (“{HEAD_SUBJECT}”)"
    assert a_name == f"linux-watch {c.revision_a.ref[:12]} (“v6.12”)"
    sha = title.find_element(By.CSS_SELECTOR, "a.sha")
    assert sha.get_attribute("title") == head
    sha.click()  # the full sha, one click away
    WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("#kernels"))
    kernels = browser.find_element(By.ID, "kernels")
    assert head in kernels.text
    assert HEAD_SUBJECT in kernels.text
