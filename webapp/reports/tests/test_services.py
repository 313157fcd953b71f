"""The report's data: header, verdict order and the figure sections."""

import pytest

from tests.support.factories import ComparisonFactory, MeasurementFactory, MetricVerdictFactory
from webapp.comparisons import summary
from webapp.reports import sections
from webapp.reports.tests.conftest import VERDICTS_IN_REPORT_ORDER

pytestmark = pytest.mark.django_db


def test_verdict_rows_primary_first_then_most_severe(done_comparison):
    rows = summary.verdict_rows(done_comparison)
    got = [(r.verdict.metric, r.verdict.statistic, r.verdict.is_primary, r.verdict.verdict)
           for r in rows]  # fmt: skip
    assert got == VERDICTS_IN_REPORT_ORDER


def test_verdict_row_text():
    c = ComparisonFactory.create(benchmarks=["bpf-slab"])

    v = MetricVerdictFactory.create(
        comparison=c, benchmark="bpf-slab", metric="slab_kb_peak_d0", statistic="value",
        median_a=123456.7, median_b=0.000123456, shift_pct=-3.14159, ci_low_pct=-5.0,
        ci_high_pct=-1.25, p_value=0.000123, p_adjusted=None,
        details={"relative": False, "shift": -480.5, "ci": [-700.0, -250.25],
                 "adjustment": "holm"},
    )  # fmt: skip
    (row,) = summary.verdict_rows(c)
    assert row.verdict == v
    assert row.unit == "kB"  # from the benchmark spec when details lack it
    assert (row.median_a, row.median_b) == ("123457", "0.00012346")
    assert (row.shift, row.ci) == ("-3.14%", "[-5.00, -1.25]")
    assert row.absolute_shift == "-480.5 kB [-700, -250.25]"
    assert (row.p_value, row.p_adjusted, row.adjustment) == ("0.000123", "n/a", "holm")
    row.verdict.details["boundary"] = 0.00078125  # the first look's, for one primary metric
    assert row.adjustment == "holm, boundary 0.00078"


def test_figures_are_built_from_ok_runs_only(done_comparison):
    # The panicked run's measurement must not show up in the figures.
    panicked = done_comparison.runs.get(result="failed")
    MeasurementFactory.create(run=panicked, samples=[12345.678])
    (section,) = sections.figure_sections(done_comparison)
    assert section.benchmark == "sync-rcu-latency"
    assert [m.metric for m in section.metrics] == ["writer_duration", "gps"]  # primary first
    wd = section.metrics[0]
    assert wd.is_primary
    # ECDF, per-run p50, mean and p90, histogram, jiffy histogram (HZ 1000)
    assert len(wd.figures) == 6
    assert len(section.metrics[1].figures) == 2  # a single value: no histogram
    assert "12345.678" not in "".join(wd.figures[:5])
    assert "12346" not in wd.figures[5]  # nor its jiffies
    assert "6.845" in wd.figures[1]  # B's last run: median of writer_samples("B", 2)
    assert section.overview == []
    # The latency ECDF on a log x axis, viewed to p99.5; gps (one value per run) linear.
    assert '"type":"log"' in wd.figures[0].replace(" ", "")
    assert "shown to p99.5" in wd.figures[0]
    assert '"type":"log"' not in section.metrics[1].figures[0].replace(" ", "")


def test_slab_comparison_gets_the_delay_sweep(slab_comparison):
    (section,) = sections.figure_sections(slab_comparison)
    assert len(section.overview) == 1
    assert "delay between map-in-map updates" in section.overview[0]
    assert section.metrics[0].metric == "slab_kb_peak_d0"  # the primary metric


SIGN_20_OF_24 = {"k": 20, "n": 24, "below": 4, "ties": 0, "median_a": 6.0, "p": 0.0015438795,
                 "above_is": "worse"}  # fmt: skip


def test_verdict_row_shows_the_sign_test_moods_p_and_the_p_mark():
    v = MetricVerdictFactory.create(
        p_value=0.0004, p_median=0.0253,
        details={"unit": "ms", "relative": True, "adjustment": "holm", "sign_test": SIGN_20_OF_24,
                 "p_method": "permutation", "p_permutations": 9999},
    )  # fmt: skip
    (row,) = summary.verdict_rows(v.comparison)
    assert row.sign_test == "20/24 B runs above A's median, p=0.00154"
    assert (row.sign_direction, row.mood) == ("above is worse", "Mood p=0.0253")
    assert row.cross_checks == ("20/24 B runs above A's median, p=0.00154 (above is worse); "
                                "Mood p=0.0253")  # fmt: skip
    assert (row.p_value, row.p_marker) == ("0.0004", "P")
    assert row.p_method_text.startswith("permutation p from 9,999 random relabellings")


def test_verdict_row_says_when_the_cross_checks_are_undefined_or_ties_left_out():
    tied = {**SIGN_20_OF_24, "n": 22, "ties": 2, "p": 0.0004}
    v = MetricVerdictFactory.create(p_median=None, details={"sign_test": tied})
    (row,) = summary.verdict_rows(v.comparison)
    assert row.sign_test == "20/22 B runs above A's median (2 ties left out), p=0.0004"
    assert row.mood == "Mood undefined"
    v.details = {"sign_test": {**SIGN_20_OF_24, "k": 0, "n": 0, "ties": 24, "p": None}}
    v.save()
    (row,) = summary.verdict_rows(v.comparison)
    assert row.sign_test == "sign test undefined"


def test_tail_and_old_rows_have_no_cross_checks_or_mark():
    v = MetricVerdictFactory.create(statistic="p99", is_primary=False)
    (row,) = summary.verdict_rows(v.comparison)
    assert (row.sign_test, row.mood, row.cross_checks, row.p_marker) == ("", "", "", "")
    assert summary.p_method_legend([row]) == ""


def test_p_legend_explains_only_the_marks_used_with_the_permutation_count():
    c = ComparisonFactory.create()
    for stat, method in (("p50", "permutation"), ("mean", "t-approximation")):
        details = {"p_method": method, "p_permutations": 9999}
        MetricVerdictFactory.create(comparison=c, statistic=stat, details=details)
    rows = summary.verdict_rows(c)
    assert [r.p_marker for r in rows] == ["P", "≈"]
    legend = summary.p_method_legend(rows)
    assert legend.startswith("P permutation p from 9,999 random relabellings of whole runs "
                             "(raised where the look's boundary needed it), never below "
                             "1/(B + 1); ≈ far-tail approximation")  # fmt: skip
    assert "E exact" not in legend
