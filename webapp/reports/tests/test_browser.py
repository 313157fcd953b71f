"""The report in a real headless Chromium (Debian's chromium + chromium-driver, installed by
scripts/setup.sh): Plotly's JS, served by the app, draws the charts."""

import itertools

import pytest
from django.urls import reverse
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.factories import ComparisonFactory, MeasurementFactory, RunFactory
from webapp.reports.tests.conftest import VERDICTS_ON_THE_PAGE

pytestmark = pytest.mark.django_db(transaction=True)


def test_report_renders_charts_and_verdicts(browser, live_server, done_comparison, tmp_path):
    browser.get(live_server.url + reverse("reports:comparison", args=[done_comparison.pk]))
    wait = WebDriverWait(browser, 60)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")) >= 8)
    browser.save_screenshot(str(tmp_path / "report.png"))  # kept by pytest for a look
    assert browser.execute_script("return typeof window.Plotly") == "object"
    plots = browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
    # writer_duration: ECDF, per-run p50, mean and p90 (each in run order beside its ECDF),
    # histogram, jiffy histogram; gps: ECDF, per-run value.
    assert len(plots) == 8
    # Each chart drew its traces: ECDF step lines, run markers, histogram outlines, the
    # jiffy histogram's bars.
    for plot in plots:
        assert plot.find_elements(By.CSS_SELECTOR, ".scatterlayer .trace, .barlayer .trace"), (
            plot.text
        )
        assert plot.size["width"] > 300
        assert plot.size["height"] > 300
    wait.until(ec.visibility_of_element_located((By.ID, "verdicts")))
    rows = browser.find_elements(By.CSS_SELECTOR, "table.verdicts tbody tr.verdict-row")
    assert [r.get_attribute("data-verdict") for r in rows] == [v for *_, v in VERDICTS_ON_THE_PAGE]
    assert "regression" in rows[0].text
    assert "writer_duration" in rows[0].text
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors


def _top(element) -> float:
    return element.rect["y"]


def test_report_opens_with_the_sentence_then_primary_rows_apart_and_folds_the_undecided(
    browser, live_server, done_comparison, tmp_path
):
    browser.set_window_size(1280, 1000)
    browser.get(live_server.url + reverse("reports:comparison", args=[done_comparison.pk]))
    sentence = WebDriverWait(browser, 30).until(
        ec.visibility_of_element_located((By.ID, "verdict-sentence"))
    )
    # The sentence, the same one the mail opens with, in the first screen, above every table.
    assert sentence.text.startswith("rcubench found a regression on qemu-x86_64 (x86_64, ")
    assert ("sync-rcu-latency writer_duration changed by +9.90% [+8.10, +11.70] (HL shift of "
            "per-run p50s, 95% CI)") in sentence.text  # fmt: skip
    assert sentence.rect["y"] + sentence.rect["height"] < browser.execute_script(
        "return window.innerHeight"
    )
    assert _top(sentence) < min(_top(t) for t in browser.find_elements(By.TAG_NAME, "table"))
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(tmp_path / "report-sentence.png"))  # kept by pytest for a look

    # Primary rows first and apart: their own table, above the secondaries'.
    primary = browser.find_element(By.ID, "verdicts")
    secondary = browser.find_element(By.ID, "secondary-verdicts")
    assert _top(primary) < _top(secondary)
    (p_row,) = primary.find_elements(By.CSS_SELECTOR, "tr.verdict-row")
    assert p_row.get_attribute("data-metric") == "sync-rcu-latency/writer_duration/p50"
    assert "★" in p_row.text
    decided = secondary.find_elements(By.CSS_SELECTOR, "tr.verdict-row")
    assert [r.get_attribute("data-verdict") for r in decided] == [
        "regression", "regression", "significant-but-small", "improvement",
    ]  # fmt: skip
    # Every shift says what it is a shift of, and A and B what they are.
    (p90,) = [r for r in decided if r.get_attribute("data-metric").endswith("/p90")]
    assert "HL shift of per-run p90s" in p90.find_element(By.CLASS_NAME, "shift-label").text
    assert "median of per-run p90s" in p90.find_element(By.CLASS_NAME, "levels-label").text
    (p99,) = [r for r in decided if r.get_attribute("data-metric").endswith("/p99")]
    assert "pooled p99 ratio B/A - 1" in p99.text

    # The secondaries that decided nothing: folded away, counted, there on a click.
    folded = browser.find_element(By.ID, "folded-verdicts")
    summary = folded.find_element(By.TAG_NAME, "summary")
    assert (
        summary.text == "2 secondary statistics decided nothing (inconclusive or no "
        "meaningful change)"
    )
    assert folded.get_attribute("open") is None
    hidden = folded.find_elements(By.CSS_SELECTOR, "tr.verdict-row")
    assert len(hidden) == 2
    assert not any(r.is_displayed() for r in hidden)
    summary.click()
    WebDriverWait(browser, 10).until(lambda d: all(r.is_displayed() for r in hidden))
    assert [r.get_attribute("data-verdict") for r in hidden] == [
        "inconclusive", "no-meaningful-change",
    ]  # fmt: skip


@pytest.fixture
def wide_latencies(db):
    """sync-rcu-latency whose grace periods span 3 to 60 ms (one and a bit decades: where
    Plotly's log axis labels the ticks between the powers of ten with single digits)."""
    c = ComparisonFactory.create(benchmarks=["sync-rcu-latency"], state="done", result="ok")
    for i, side in enumerate("ABBA"):
        run = RunFactory.create(comparison=c, side=side, index=i // 2, order=i, state="done",
                                result="ok")  # fmt: skip
        MeasurementFactory.create(run=run, samples=[3.0 * 1.1**k for k in range(32)])
    return c


def _tick_labels(plot) -> list[str]:
    return [t.text for t in plot.find_elements(By.CSS_SELECTOR, ".xaxislayer-above .xtick text")]


def test_log_axis_ticks_read_as_full_values(browser, live_server, wide_latencies):
    browser.get(live_server.url + reverse("reports:comparison", args=[wide_latencies.pk]))
    wait = WebDriverWait(browser, 60)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .xtick")) > 0)
    section = browser.find_element(By.ID, "figures-sync-rcu-latency")
    log_plots = [p for p in section.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
                 if "log scale" in p.text]  # fmt: skip
    assert len(log_plots) == 2  # the pooled ECDF and the histogram of writer_duration
    for plot in log_plots:
        labels = _tick_labels(plot)
        assert len(labels) >= 4, labels
        values = [float(t) for t in labels]
        # On a log axis the values rise left to right: "9 10 2 3" (2 meaning 20) does not.
        assert all(a < b for a, b in itertools.pairwise(values)), labels
        assert "20" in labels, labels
