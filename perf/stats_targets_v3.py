"""STATS.md Spec (v3) targets of the repeated CI and the multimodality warning, registered
in perf/stats_simulation.py's TARGETS (which prints and runs them like the v2 ones).

Kept apart because stats_simulation.py is at the house's 600-line limit. Nothing here
imports it: the data generators and the Target and Check classes come in as arguments, so
`perf/stats_simulation.py --only ci-coverage-first-look ...` runs these as any other.

- ci-coverage-first-look, ci-coverage-first-look-unequal: the repeated CI at the first
  look's level (1 - 7.03e-4 for a lone primary) covers the true 5% shift in at least
  1 - 2 x 7.03e-4 of comparisons, at 24 vs 24 runs (CV 5%) and at 24 vs 12 runs with 4x
  spread (CV 5% vs 20%). Each simulation is one CI: ~20 permutation tests of up to 20,000
  relabellings, ~0.3-1 s; 10,000 (the figure is within 2 points of its limit) take hours
  on two cores.
- modality-*: the share of one side's runs flagged multimodal at the sizes STATS.md v3
  names: <= 3% at 24, 48 and 96 runs on every unimodal model; on the bimodal model (30% of
  runs 8% slower, CV 2%: 3.85 SD apart) >= 60% at 24, >= 80% at 36, >= 90% at 48; with
  modes 4.8 SD apart (10% slower) >= 85% at 24. Counts: 10,000 where the figure measured
  lies within 2 points of its limit, else 2,000 (STATS.md).
"""

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from stats import methods, modality
from stats.design import Design

SEED = 20261126
Gen = Callable[[np.random.Generator, int], np.ndarray]
Sim = Callable[[str, int], list[float]]
FIRST_LOOK_ALPHA = Design().alpha_at(1)  # a lone primary's first-look boundary


def _rng(name: str, i: int) -> np.random.Generator:
    return np.random.default_rng([SEED, sum(map(ord, name)), i])


def ci_coverage(n_b: int, cv_b: float) -> Sim:
    """Does the first look's repeated CI (level 1 - FIRST_LOOK_ALPHA) of the HL shift
    cover the true 5%, with 24 runs of A at CV 5% and n_b runs of B at cv_b?"""

    def one(name: str, i: int) -> list[float]:
        rng = _rng(name, i)
        a = rng.lognormal(math.log(1000), 0.05, 24)
        b = rng.lognormal(math.log(1050), cv_b, n_b)
        ci = methods.hodges_lehmann(a, b, confidence=1 - FIRST_LOOK_ALPHA, rng=rng)
        return [float(ci.low <= 5.0 <= ci.high)]

    return one


def modality_rates(gen: Gen, sizes: tuple[int, ...]) -> Sim:
    """Is one side flagged multimodal, at each of `sizes` runs (fresh data at each)?"""

    def one(name: str, i: int) -> list[float]:
        rng = _rng(name, i)
        return [float(modality.multimodality(gen(rng, n)).multimodal) for n in sizes]

    return one


def lognormal_cv(cv: float) -> Gen:
    return lambda rng, n: rng.lognormal(math.log(1000), cv, n)


def skewed_in_logs(rng: np.random.Generator, n: int) -> np.ndarray:
    """Right-skewed even in logs: 1000 + Gamma(2) x 50 (skewness ~1.4)."""
    return 1000 + rng.gamma(2.0, 50.0, n)


def bimodal_at(slower: float) -> Gen:
    """30% of runs `slower` (0.08: 3.85 SD apart at CV 2%, STATS.md v2; 0.10: 4.8 SD)."""

    def gen(rng: np.random.Generator, n: int) -> np.ndarray:
        slow = rng.random(n) < 0.30
        return rng.lognormal(math.log(1000), 0.02, n) * np.where(slow, 1 + slower, 1.0)

    return gen


UNIMODAL_SIZES = (24, 48, 96)
BIMODAL_SIZES = (24, 36, 48)
BIMODAL_GOALS = (60.0, 80.0, 90.0)


def targets(target: Any, check: Any, v2: Mapping[str, Gen], rate: int, precise: int) -> tuple:
    """The v3 targets as `target(name, sim, checks, sims)` objects. `v2`: the v2 models'
    generators ("outliers", "quantized") from stats_simulation.py; `rate` and `precise`:
    its two simulation counts."""
    ci_pct = 100 * (1 - 2 * FIRST_LOOK_ALPHA)
    out = [
        target(name, ci_coverage(n_b, cv_b), (check(
            f"repeated CI at the first look's level ({1 - FIRST_LOOK_ALPHA:.4%}) covers a 5% "
            f"shift, 24 vs {n_b} runs, {what} (>= 1 - 2 x {FIRST_LOOK_ALPHA:.2e})", 0,
            lo=ci_pct),), precise)
        for name, n_b, cv_b, what in (
            ("ci-coverage-first-look", 24, 0.05, "CV 5%"),
            ("ci-coverage-first-look-unequal", 12, 0.20, "4x spread (CV 5% vs 20%)"),
        )
    ]  # fmt: skip
    unimodal = (
        ("lognormal-cv2", "lognormal CV 2%", lognormal_cv(0.02), precise),
        ("lognormal-cv5", "lognormal CV 5%", lognormal_cv(0.05), precise),
        ("outliers", "5% Pareto(1.5) outliers", v2["outliers"], precise),
        ("quantized", "4 kB-quantised, ties", v2["quantized"], precise),
        ("sigma03", "lognormal sigma 0.3", lognormal_cv(0.3), precise),
        ("gamma", "1000 + Gamma(2) x 50, skewed in logs", skewed_in_logs, rate),
    )
    for key, what, gen, sims in unimodal:
        out.append(target(f"modality-{key}", modality_rates(gen, UNIMODAL_SIZES), tuple(
            check(f"multimodality warning, unimodal {what}, {n} runs", k, hi=3.0)
            for k, n in enumerate(UNIMODAL_SIZES)), sims))  # fmt: skip
    out.append(target("modality-bimodal-v3", modality_rates(bimodal_at(0.08), BIMODAL_SIZES),
                      tuple(check(f"multimodality warning, bimodal (30% of runs 8% slower, "
                                  f"3.85 SD), {n} runs", k, lo=goal)
                            for k, (n, goal) in enumerate(zip(BIMODAL_SIZES, BIMODAL_GOALS,
                                                              strict=True))),
                      precise))  # fmt: skip
    out.append(target("modality-bimodal-4.8sd", modality_rates(bimodal_at(0.10), (24,)),
                      (check("multimodality warning, bimodal 4.8 SD apart (30% of runs 10% "
                             "slower), 24 runs", 0, lo=85.0),), rate))  # fmt: skip
    return tuple(out)
