"""Unsubscribing and subscribing again in a real headless Chromium against the live server,
with real alert mails through the real SMTP server on loopback (aiosmtpd): the link of a
mail stops the mail, the owner sees it on the subscriptions page and on the comparison's
mail table (skipped, and why), and undoes it there."""

import re

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.support.browser import log_in
from tests.support.factories import PASSWORD, MembershipFactory, UserFactory
from webapp.alerts import delivery, services
from webapp.alerts.models import Alert, OptOut, Subscription
from webapp.alerts.tests.conftest import make_comparison

pytestmark = pytest.mark.django_db(transaction=True)


def _mail_all(comparison_id: int) -> list[str]:
    return [delivery.deliver(pk) for pk in services.notify_comparison(comparison_id)]


def _text(driver, css: str) -> str:
    """The text of the first element matching `css`, once there is one: found and read in
    one step, again if a page load replaced the element in between."""
    return WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, css)], f"nothing matches {css}"
    )[0]


def _page_says(driver, text: str) -> None:
    """Wait until the page that a click loads says `text` (the old page's body would not)."""
    WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: text in d.find_element(By.TAG_NAME, "body").text, f"the page never said {text!r}"
    )


def test_unsubscribe_by_the_mails_link_see_it_and_subscribe_again(
    browser, live_server, smtp, settings, tmp_path
):
    settings.RCUBENCH_PUBLIC_URL = live_server.url
    ada = UserFactory.create(username="ada", email="ada@example.org")
    first = make_comparison()
    MembershipFactory.create(tree=first.revision_a.tree, user=ada, role="admin")
    Subscription.objects.create(user=ada)
    assert _mail_all(first.pk) == ["sent", "sent"]  # ada and the series' author
    (mail,) = smtp.to("ada@example.org")
    link = re.fullmatch(r"<(\S+)>", mail.message["List-Unsubscribe"])
    assert link
    assert link.group(1).startswith(f"{live_server.url}/alerts/unsubscribe/")

    # The link as a reader follows it from the mail: a page with a button (a GET changes
    # nothing, for link scanners), then the POST.
    browser.get(link.group(1))
    assert not OptOut.objects.exists()
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    _page_says(browser, "ada@example.org gets no more rcubench alert mail")
    assert services.opted_out("ada@example.org")

    # The next regression: ada is recorded as skipped, and nothing is sent to her.
    second = make_comparison(series=False)
    assert _mail_all(second.pk) == []
    log_in(browser, live_server.url, "ada", PASSWORD)
    browser.get(f"{live_server.url}/comparisons/{second.pk}/")
    row = _text(browser, '#alerts tr[data-state="skipped"]')
    assert row.startswith("ada@example.org")
    assert "opted out of all rcubench mail (the unsubscribe link)" in row

    # Her subscriptions page says so, adding one says so, and she undoes it there.
    browser.get(f"{live_server.url}/accounts/subscriptions/")
    notice = _text(browser, "#opted-out")
    assert "ada@example.org unsubscribed from all rcubench mail on" in notice
    assert not browser.find_elements(By.ID, "mailed")
    Select(browser.find_element(By.ID, "id_benchmark")).select_by_value("sync-rcu-latency")
    browser.find_element(By.CSS_SELECTOR, "form[action$='/subscriptions/'] button").click()
    assert "has unsubscribed from all rcubench mail" in _text(browser, "ul.messages .warning")
    browser.save_screenshot(str(tmp_path / "subscriptions-opted-out.png"))  # kept for a look
    browser.find_element(By.ID, "mail-again").click()
    assert _text(browser, "ul.messages .success") == "ada@example.org gets rcubench mail again"
    assert "rcubench mails ada@example.org" in _text(browser, "#mailed")
    assert not browser.find_elements(By.ID, "opted-out")
    assert not OptOut.objects.exists()

    # And mail goes out again.
    third = make_comparison(series=False)
    assert _mail_all(third.pk) == ["sent"]
    assert len(smtp.to("ada@example.org")) == 2
    assert Alert.objects.get(comparison=third).state == "sent"
