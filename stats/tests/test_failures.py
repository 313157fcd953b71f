"""The per-side failure budget (stats/failures.py): when the orchestrator stops a side."""

import pytest

from stats.failures import budget_spent


@pytest.mark.parametrize(
    ("attempts", "failures", "spent"),
    [
        (11, 11, False),  # every boot failed, but fewer than 12 finished: not yet
        (12, 12, True),
        (12, 8, True),  # 67% > 60%
        (12, 7, False),  # 58%
        (20, 12, False),  # exactly 60% is not more than 60%
        (20, 13, True),
        (0, 0, False),
    ],
)
def test_a_side_stops_once_more_than_60_percent_of_at_least_12_attempts_failed(
    attempts, failures, spent
):
    assert budget_spent(attempts, failures) is spent


def test_counts_that_cannot_be_are_refused():
    with pytest.raises(ValueError, match=r"within 0\.\.attempts"):
        budget_spent(3, 4)
