"""The failure budget: when one side's runs have failed so often that running on is waste.

Pure (no Django): the orchestrator asks it after every finished run, and
perf/stats_simulation.py simulates the same rule, so the figures there are this code's.

A failed run is replaced until its side has the look's runs, so a kernel that keeps failing
would be booted for ever; the budget ends that. It is per side (of one benchmark), not per
run slot (STATS.md Spec v3, "Failures"): with a per-slot budget of 3 attempts, one slot
failing three times in a row ended 4.5% of comparisons of two kernels that both fail 10% of
boots, and 52% at 25%, before the failure-rate test (methods.failure_excess, Boschloo) had
a say. The failure rates are data; the budget only bounds the boots spent on them.

The share is 0.6, not the spec's example of one half: checked after every run, "more than
half of >= 12" stops one of two sides that both fail 25% of boots in about 6.4% of
comparisons (an exact first-passage computation; the target is <= 5%). More than 60% ends
0.98% of them runs-failed (perf/stats_simulation.py, failure-budget-25pct, 10,000
comparisons through four looks), and a side that always fails still stops after 12 boots.
"""

# A side's budget is spent once it has this many finished attempts...
BUDGET_MIN_ATTEMPTS = 12
# ...and more than this share of them failed (the kernel's failures and the host's alike:
# a side whose runs all end infra-error produces no data either).
BUDGET_SHARE = 0.6


def budget_spent(
    attempts: int,
    failures: int,
    *,
    min_attempts: int = BUDGET_MIN_ATTEMPTS,
    share: float = BUDGET_SHARE,
) -> bool:
    """Has a side with `failures` failed runs among `attempts` finished ones (of one
    benchmark) used up its budget? Then the comparison stops: the failure-rate test
    decides between reliability-regression and runs-failed."""
    if not 0 <= failures <= attempts:
        raise ValueError(f"failures ({failures}) must be within 0..attempts ({attempts})")
    return attempts >= min_attempts and failures > share * attempts
