"""Failure-rate simulations for perf/stats_simulation.py: the failure test at fixed attempts,
and whole comparisons run through the orchestrator's scheduling rule.

The scheduled one replays webapp/comparisons/orchestrator.py one run at a time (one worker,
runs in the order they were sent): each look adds its runs per side in ABBA or BAAB blocks;
a failed run its side still needs is replaced at once in a fresh pair with an extra run of
the other side, in random order (an extra run that fails leaves its side at the look's size
and is not replaced, but counts); after every finished run the side's failure budget
(stats.failures.budget_spent, the orchestrator's own function) is checked; at the end of
each look, or when a budget is spent, the failure-rate row (stats.verdicts.failure_result,
Boschloo at the look's level) decides. Every look of the default design is run: the metrics
never end the comparison early here, the worst case for both failure rules.
"""

import functools

import numpy as np

from stats import methods
from stats import verdicts as E
from stats.design import Design
from stats.failures import budget_spent
from stats.inputs import BenchmarkFailures

LOOKS = Design().looks  # the default design's looks: 24, 48, 72, 96 runs per side
RUNS_FAILED, RELIABILITY, DONE = 0, 1, 2  # how a simulated comparison ends


def _counts(attempts: int, failed: int) -> methods.FailureCounts:
    return methods.FailureCounts(attempts - failed, (("panic", failed),) if failed else ())


@functools.cache
def flagged(look: int, attempts_a: int, failed_a: int, attempts_b: int, failed_b: int) -> bool:
    """failure_result's verdict at `look` of the default design (pure: cached per process,
    as tables repeat)."""
    f = BenchmarkFailures("sim", _counts(attempts_a, failed_a), _counts(attempts_b, failed_b))
    return E.failure_result(f, look, len(LOOKS)).verdict == E.RELIABILITY


def failure_equal(rng: np.random.Generator) -> list[float]:
    """Kernel failures at 10% on both sides, binomial per block of attempts up to each look.
    Columns: flagged at the first look (24 attempts/side); flagged at any look up to 48,
    and up to 96 attempts/side (a comparison that runs on)."""
    steps = np.diff((0, *LOOKS))
    failed = rng.binomial(steps[:, None], 0.10, (len(LOOKS), 2)).cumsum(axis=0)
    hits = [flagged(k + 1, n, int(a), n, int(b))
            for k, (n, (a, b)) in enumerate(zip(LOOKS, failed, strict=True))]  # fmt: skip
    return [float(hits[0]), float(any(hits[:2])), float(any(hits))]


def scheduled(rng: np.random.Generator, p_a: float, p_b: float) -> tuple[int, int]:
    """One comparison of one benchmark whose kernels fail p_a and p_b of their boots, under
    the orchestrator's rules (module docstring): (how it ended, at which look)."""
    p = {"A": p_a, "B": p_b}
    ok, failed = {"A": 0, "B": 0}, {"A": 0, "B": 0}
    scheduled_per_side = 0
    for look, size in enumerate(LOOKS, 1):
        queue: list[str] = []  # the look's new runs (each step of the design is even)
        for _ in range(0, size - scheduled_per_side, 2):
            queue += ("A", "B", "B", "A") if rng.random() < 0.5 else ("B", "A", "A", "B")
        live = {s: size - scheduled_per_side for s in "AB"}  # unfinished runs per side
        scheduled_per_side = size
        k = 0
        while k < len(queue):
            side, k = queue[k], k + 1
            live[side] -= 1
            fails = rng.random() < p[side]
            failed[side] += fails
            ok[side] += not fails
            # Checked after every run, ok or not: an ok 12th run can spend it too (8 of 12).
            if budget_spent(ok[side] + failed[side], failed[side]):
                hit = flagged(look, ok["A"] + failed["A"], failed["A"],
                              ok["B"] + failed["B"], failed["B"])  # fmt: skip
                return (RELIABILITY if hit else RUNS_FAILED), look
            if fails and ok[side] + live[side] < size:  # a run its side still needs: replace it
                other = "B" if side == "A" else "A"
                pair = [side, other] if rng.random() < 0.5 else [other, side]
                queue += pair
                live[side] += 1
                live[other] += 1
        if flagged(look, ok["A"] + failed["A"], failed["A"], ok["B"] + failed["B"], failed["B"]):
            return RELIABILITY, look
    return DONE, len(LOOKS)


def failure_budget(rng: np.random.Generator, p_a: float, p_b: float) -> list[float]:
    """Columns: ended runs-failed (at any look); ended reliability-regression (flagged, at
    any look); ended runs-failed at the first look."""
    end, look = scheduled(rng, p_a, p_b)
    return [float(end == RUNS_FAILED), float(end == RELIABILITY),
            float(end == RUNS_FAILED and look == 1)]  # fmt: skip
