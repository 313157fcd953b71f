"""The report's line per primary: what its runs could have detected, in the metric's unit."""

import pytest

from webapp.analysis.models import MetricVerdict
from webapp.comparisons.detectable import detectable_line, detectable_lines, two_digits
from webapp.comparisons.summary import VerdictRow


def _row(statistic: str, unit: str, relative: bool, mde: object, primary: bool = True,
         median_a: float = 6.05) -> VerdictRow:  # fmt: skip
    v = MetricVerdict(benchmark="sync-rcu-latency", metric="writer_duration",
                      statistic=statistic, is_primary=primary, n_a=24, n_b=24,
                      median_a=median_a, details={"smallest_detectable_shift": mde})  # fmt: skip
    return VerdictRow(v, unit, relative)


def test_a_relative_statistic_is_said_in_its_unit_through_as_median_and_in_percent():
    line = detectable_line(_row("p50", "ms", True, 7.06))
    # 7.06% of A's 6.05 ms is 0.427 ms.
    assert line == (
        "sync-rcu-latency writer_duration (p50): at 24 vs 24 runs this comparison could "
        "detect a shift of 0.43 ms (7.1% of A's 6.05 ms) (80% power)."
    )


def test_the_tail_share_is_in_points_and_memory_in_its_unit():
    points = detectable_line(_row("tail_share", "pp", False, 2.34))
    memory = detectable_line(_row("value", "kB", False, 12.3))
    assert points is not None
    assert "a shift of 2.3 points (80% power)" in points
    assert memory is not None
    assert "a shift of 12 kB (80% power)" in memory


@pytest.mark.parametrize("mde", [None, "n/a", float("nan"), True])
def test_no_stored_figure_no_line(mde):
    assert detectable_line(_row("p50", "ms", True, mde)) is None


def test_only_primaries_get_a_line_and_a_zero_median_falls_back_to_percent():
    rows = [_row("p50", "ms", True, 3.0), _row("p90", "ms", True, 5.0, primary=False),
            _row("mean", "ms", True, 4.0, median_a=0.0)]  # fmt: skip
    lines = detectable_lines(rows)
    assert len(lines) == 2
    assert lines[1].endswith("a shift of 4.0% (80% power).")


def test_two_digits_never_uses_an_exponent():
    assert [two_digits(x) for x in (0.4312, 7.06, 1234.5, 0.0071, 0)] == [
        "0.43", "7.1", "1,234", "0.0071", "0"]  # fmt: skip
