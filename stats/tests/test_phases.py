"""Phase comparison of traced runs: A/A flags nothing beyond its rate, a planted jiffy in
the first wait is found and accounts for the grace period's change."""

import numpy as np
import pytest

from stats.phases import compare, share

PHASES = ("gp_duration", "gp_init", "gp_first_fqs_wait", "gp_after_first_fqs", "fqs_scans")


def _runs(rng: np.random.Generator, n: int, extra_wait: float = 0.0) -> list[dict[str, float]]:
    """Per-run medians shaped like the x86_64 fixtures' (ms): a 3.99 ms first wait, a few
    microseconds of init, ~15 us after the scan; run-to-run noise ~2%."""
    runs = []
    for _ in range(n):
        init = 0.007 + rng.normal(0, 0.001)
        wait = 3.99 + extra_wait + rng.normal(0, 0.08)
        after = 0.015 + rng.normal(0, 0.003)
        runs.append({
            "gp_duration": init + wait + after, "gp_init": init, "gp_first_fqs_wait": wait,
            "gp_after_first_fqs": after, "fqs_scans": 1 + rng.integers(0, 3) / 100,
        })  # fmt: skip
    return runs


def test_a_planted_jiffy_in_the_first_wait_is_flagged_and_accounts_for_the_change():
    rng = np.random.default_rng(7)
    a, b = _runs(rng, 8), _runs(rng, 8, extra_wait=1.0)
    rows = {r.phase: r for r in compare(a, b, phases=PHASES)}
    assert rows["gp_first_fqs_wait"].flagged
    assert rows["gp_duration"].flagged
    assert rows["gp_first_fqs_wait"].low > 0.8
    assert not rows["gp_init"].flagged
    s = share(a, b, "gp_first_fqs_wait", "gp_duration")
    assert s is not None
    assert s.low <= 1.0 <= s.high
    assert s.low >= 0.8


def test_a_a_flags_no_more_than_its_rate():
    rng = np.random.default_rng(11)
    trials = 60
    flagged = sum(
        any(r.flagged for r in compare(_runs(rng, 8), _runs(rng, 8), phases=PHASES))
        for _ in range(trials)
    )
    # BH at 0.05 across five phases, all null: the family-wise rate is at most ~5%; 60
    # trials put a binomial 99% bound at 8 flagged.
    assert flagged <= 8, f"{flagged}/{trials} A/A trials flagged a phase"


def test_rows_are_reported_only_for_phases_both_sides_have_in_enough_runs():
    rng = np.random.default_rng(3)
    a, b = _runs(rng, 8), _runs(rng, 2)
    assert compare(a, b) == []
    assert share(a, b, "gp_first_fqs_wait", "gp_duration") is None


def test_no_share_of_a_change_that_is_not_there():
    runs = [{"gp_duration": 4.0, "gp_first_fqs_wait": 3.99} for _ in range(5)]
    assert share(runs, runs, "gp_first_fqs_wait", "gp_duration") is None


def test_the_same_runs_give_the_same_ci():
    rng = np.random.default_rng(5)
    a, b = _runs(rng, 6), _runs(rng, 6, extra_wait=1.0)
    assert compare(a, b) == compare(a, b)
    assert share(a, b, "gp_first_fqs_wait", "gp_duration") == pytest.approx(
        share(a, b, "gp_first_fqs_wait", "gp_duration")
    )
