"""The report in a real headless Chromium (Debian's chromium + chromium-driver, installed by
scripts/setup.sh): Plotly's JS, served by the app, draws the charts."""

import pytest
from django.urls import reverse
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from webapp.reports.tests.conftest import VERDICTS_IN_REPORT_ORDER

pytestmark = pytest.mark.django_db(transaction=True)


def test_report_renders_charts_and_verdicts(browser, live_server, done_comparison, tmp_path):
    browser.get(live_server.url + reverse("reports:comparison", args=[done_comparison.pk]))
    wait = WebDriverWait(browser, 60)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")) >= 5)
    browser.save_screenshot(str(tmp_path / "report.png"))  # kept by pytest for a look
    assert browser.execute_script("return typeof window.Plotly") == "object"
    plots = browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
    assert len(plots) == 5
    # Each chart drew its traces: ECDF step lines, run markers, histogram outlines.
    for plot in plots:
        assert plot.find_elements(By.CSS_SELECTOR, ".scatterlayer .trace"), plot.text
        assert plot.size["width"] > 300
        assert plot.size["height"] > 300
    table = wait.until(ec.visibility_of_element_located((By.ID, "verdicts")))
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr.verdict-row")
    assert [r.get_attribute("data-verdict") for r in rows] == [
        v for *_, v in VERDICTS_IN_REPORT_ORDER
    ]
    assert all(r.is_displayed() for r in rows)
    assert "regression" in rows[0].text
    assert "writer_duration" in rows[0].text
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors
