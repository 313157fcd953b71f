"""The verdict in one sentence (webapp.comparisons.sentence) and what each verdict row says
its values and its shift are (summary.VerdictRow), from rows in the database."""

import pytest

from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    MetricVerdictFactory,
    TargetFactory,
)
from webapp.comparisons.sentence import verdict_sentence
from webapp.comparisons.summary import header, verdict_rows

pytestmark = pytest.mark.django_db


def _comparison(verdict: str, **kw):
    c = ComparisonFactory.create(
        target=TargetFactory.create(name="qemu-x86_64", arch="x86_64", cpus=4),
        benchmarks=["sync-rcu-latency"], verdict=verdict,
        **({"state": "done", "result": "ok"} | kw),
    )  # fmt: skip
    c.build_a = BuildFactory.create(revision=c.revision_a, state="done", result="ok")
    c.build_b = BuildFactory.create(revision=c.revision_b, state="done", result="ok")
    c.save()
    return c


def _primary(c, verdict: str, shift: float, ci: tuple[float, float], **details):
    return MetricVerdictFactory.create(
        comparison=c, metric="writer_duration", statistic="p50", is_primary=True,
        verdict=verdict, median_a=6.05, median_b=6.05 * (1 + shift / 100), shift_pct=shift,
        ci_low_pct=ci[0], ci_high_pct=ci[1], p_value=0.0012, p_adjusted=0.0036,
        details={"unit": "ms", "relative": True, "adjustment": "holm", "threshold": 2.0,
                 **details},
    )  # fmt: skip


def _sentence(c, kind: str = "") -> str:
    return verdict_sentence(header(c), verdict_rows(c), kind)


def test_a_regression_says_what_changed_by_how_much_and_of_what():
    c = _comparison("regression")
    _primary(c, "regression", 9.9, (8.1, 11.7))
    MetricVerdictFactory.create(comparison=c, metric="gps", statistic="value", is_primary=False,
                                verdict="regression", details={"unit": "count"})  # fmt: skip
    text = _sentence(c)
    assert text.startswith("rcubench found a regression on qemu-x86_64 (x86_64, 4 CPUs): ")
    assert ("sync-rcu-latency writer_duration changed by +9.90% [+8.10, +11.70] (HL shift of "
            "per-run p50s, 95% CI) from kernel A (") in text  # fmt: skip
    assert "p=0.0036 adjusted, 24 vs 24 runs, beyond the 2% threshold" in text
    assert text.endswith("(1 more regression rows below).")
    # The mail's kind, where it is the comparison's verdict, is the same sentence.
    assert _sentence(c, "regression") == text


def test_a_regression_whose_estimate_is_below_the_threshold_says_its_size_is_uncertain():
    c = _comparison("regression")
    _primary(c, "regression", 1.2, (0.4, 2.3))
    assert "its interval reaching the 2% threshold (the size is uncertain)" in _sentence(c)


def test_no_meaningful_change_is_said_as_such():
    c = _comparison("no-meaningful-change")
    _primary(c, "no-meaningful-change", 0.3, (-0.9, 1.5))
    text = _sentence(c)
    assert text.startswith("rcubench found no meaningful change on qemu-x86_64")
    assert "changed by +0.30% [-0.90, +1.50] (HL shift of per-run p50s, 95% CI)" in text
    assert text.endswith("24 vs 24 runs, its repeated CI inside ±2%.")
    assert "beyond" not in text
    assert "p=" not in text  # no p for an equivalence


def test_inconclusive_gives_the_smallest_detectable_shift():
    c = _comparison("inconclusive")
    _primary(c, "inconclusive", 1.1, (-0.5, 2.7), smallest_detectable_shift=1.84)
    text = _sentence(c)
    assert text.startswith("rcubench could not decide on qemu-x86_64")
    assert "neither beyond nor inside the ±2% threshold" in text
    assert text.endswith("the smallest shift these runs detect (80% power) is 1.8%.")


def test_significant_but_small_is_within_the_threshold():
    c = _comparison("significant-but-small")
    _primary(c, "significant-but-small", 0.8, (0.3, 1.4))
    text = _sentence(c)
    assert text.startswith("rcubench found a significant but small change on qemu-x86_64")
    assert text.endswith("real, but within the 2% threshold.")


def test_running_and_failed_comparisons_have_a_sentence_too():
    running = _comparison("", state="running", result="")
    assert _sentence(running).endswith("it is running, and its verdict comes when it is done.")
    failed = _comparison("", result="failed", error_code="build-failed")
    assert _sentence(failed).endswith("the comparison ended failed (build-failed) without a "
                                      "verdict.")  # fmt: skip


def test_each_row_says_what_its_values_and_its_shift_are():
    c = _comparison("regression")
    for stat in ("p50", "p90", "p99", "max"):
        MetricVerdictFactory.create(comparison=c, statistic=stat, is_primary=stat == "p50")
    MetricVerdictFactory.create(comparison=c, benchmark="bpf-slab", metric="slab_kb_peak_d0",
                                statistic="value", is_primary=False,
                                details={"relative": False, "shift": 50.0})  # fmt: skip
    labels = {(r.verdict.metric, r.verdict.statistic): (r.levels_label, r.shift_label)
              for r in verdict_rows(c)}  # fmt: skip
    assert labels == {
        ("writer_duration", "p50"): ("median of per-run p50s", "HL shift of per-run p50s"),
        # The issue's row: A and B are medians of the runs' p90s; the shift is the
        # Hodges-Lehmann shift of the runs' p90s, not the difference of those medians.
        ("writer_duration", "p90"): ("median of per-run p90s", "HL shift of per-run p90s"),
        ("writer_duration", "p99"): ("p99 of all samples pooled", "pooled p99 ratio B/A - 1"),
        ("writer_duration", "max"): ("max of all samples pooled", "pooled max ratio B/A - 1"),
        ("slab_kb_peak_d0", "value"): ("median of per-run values",
                                       "HL shift of per-run values, B - A"),
    }  # fmt: skip


def test_a_reliability_regression_is_said_as_one_also_when_mailed_as_a_regression():
    # The mail passes its alert kind ("regression"); the sentence follows the verdict.
    c = _comparison("reliability-regression")
    _primary(c, "no-meaningful-change", 0.4, (-0.9, 1.6))
    for kind in ("", "regression"):
        assert _sentence(c, kind).startswith("rcubench found a reliability regression: kernel B")
