"""Calibration of the multimodality warning (stats/modality.py) by simulation.

Default: for each data model of perf/stats_simulation.py (and two harsher unimodal ones),
the share of simulated sides on which `modality.multimodality` fires, at n = 24, 48 and 96
(the bimodal model also at 36), with a PASS/FAIL line against STATS.md v3: <= 3% on every
unimodal model at each n (the skewed-in-logs gamma model included), >= 60% / 80% / 90% on
the bimodal model (30% of runs 8% slower) at 24 / 36 / 48 runs. Then the wall time of one
call. perf/stats_simulation.py runs the same targets at STATS.md's counts.

--table: recompute the module's null table (quantiles of the likelihood-ratio statistic on
standard-normal samples, per n), seeded, and print it as Python to paste into the module.

v2's bimodal target (80% at 24 runs) was out of reach of any test that keeps the unimodal
rates at or below 5% (the most powerful invariant test, told the exact mixture shape,
detects ~81% at exactly 5%); v3 replaced it. The gamma model's <= 3% is not reached (16-31%),
so the default run ends on FAIL for that line.

Run: .venv/bin/python perf/modality_calibration.py [--sims 2000] [--table [--reps 40000]]
One process, one core (the module is vectorised NumPy): about 1 minute of CPU at 2000.
"""

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf.stats_simulation import bimodal, lognormal, outliers, quantized
from stats import modality

SEED = 20261124
BIMODAL_GOALS = {24: 0.60, 36: 0.80, 48: 0.90}  # STATS.md v3
Gen = Callable[[np.random.Generator, int], np.ndarray]


def cv2(rng: np.random.Generator, n: int) -> np.ndarray:
    return lognormal(rng, n, cv=0.02)


def skewed(rng: np.random.Generator, n: int) -> np.ndarray:
    """Right-skewed like per-run p90 latencies: lognormal sigma 0.3 (normal in logs)."""
    return rng.lognormal(math.log(1000), 0.3, n)


def skewed_in_logs(rng: np.random.Generator, n: int) -> np.ndarray:
    """Harsher than asked: skewed even in logs (1000 + Gamma(2) x 50, skewness 1.4)."""
    return 1000 + rng.gamma(2.0, 50.0, n)


def heavy_tails(rng: np.random.Generator, n: int) -> np.ndarray:
    """Symmetric heavy tails in logs: Student t with 3 degrees of freedom, scale 3%."""
    return 1000 * np.exp(0.03 * rng.standard_t(3, n))


# name, generator, sizes, target kind ("le" <= 3% or "ge": BIMODAL_GOALS), a v3 target?
MODELS: tuple[tuple[str, Gen, tuple[int, ...], str, bool], ...] = (
    ("unimodal lognormal CV 5%", lognormal, (24, 48, 96), "le", True),
    ("unimodal lognormal CV 2%", cv2, (24, 48, 96), "le", True),
    ("5% Pareto(1.5) outliers", outliers, (24, 48, 96), "le", True),
    ("4 kB-quantised, ties", quantized, (24, 48, 96), "le", True),
    ("skewed lognormal sigma 0.3", skewed, (24, 48, 96), "le", True),
    ("skewed in logs (gamma)", skewed_in_logs, (24, 48, 96), "le", True),
    ("heavy tails (t3 in logs)", heavy_tails, (24, 48, 96), "le", False),
    ("bimodal 30% 8% slower", bimodal, (24, 36, 48, 96), "ge", True),
)


def rate(gen: Gen, n: int, sims: int, key: int) -> float:
    fired = 0
    for i in range(sims):
        rng = np.random.default_rng([SEED, key, n, i])
        fired += modality.multimodality(gen(rng, n)).multimodal
    return fired / sims


def rates(sims: int) -> bool:
    ok = True
    print(f"multimodality warning: {modality.METHOD}, alpha {modality.ALPHA}, min weight "
          f"{modality.MIN_WEIGHT}, min separation {modality.MIN_SEPARATION}; "
          f"{sims} seeded sides per cell")  # fmt: skip
    print(f"{'model':34} {'n=24':>7} {'n=48':>7} {'n=96':>7}  target")
    for key, (name, gen, sizes, kind, target) in enumerate(MODELS):
        t0 = time.perf_counter()
        got = {n: rate(gen, n, sims, key) for n in sizes}
        cells = " ".join(f"{got[n]:7.1%}" for n in (24, 48, 96))
        cells += f" (n=36: {got[36]:.1%})" if 36 in got else ""
        if kind == "le":
            passed = all(v <= 0.03 for v in got.values())
            goal = "<= 3% at every n"
        else:
            passed = all(got[n] >= g for n, g in BIMODAL_GOALS.items())
            goal = ">= 60/80/90% at n=24/36/48"
        verdict = ("PASS" if passed else "FAIL") if target else ("ok" if passed else "over")
        extra = "" if target else " (extra model, not a STATS.md target)"
        print(f"{name:34} {cells}  {goal}: {verdict}{extra}  "
              f"[{time.perf_counter() - t0:.0f} s]")  # fmt: skip
        ok &= passed or not target
    rng = np.random.default_rng(SEED)
    for n in (24, 96):
        xs = [bimodal(rng, n) for _ in range(200)]
        t0 = time.perf_counter()
        for x in xs:
            modality.multimodality(x)
        print(f"wall time per call at n={n}: {(time.perf_counter() - t0) / len(xs) * 1e3:.2f} ms")
    return ok


def table(reps: int) -> None:
    """The null distribution of the statistic: standard-normal rows, as the module fits."""
    t0 = time.perf_counter()
    rows = []
    for n in modality.NULL_SIZES:
        rng = np.random.default_rng([SEED, n])
        stats = []
        for start in range(0, reps, 2000):
            z = modality._standardise(rng.standard_normal((min(2000, reps - start), n)))
            stats.append(modality._fit(z, modality.VAR_FLOOR).lrt)
        t = np.concatenate(stats)
        q = [float(np.quantile(t, 1 - p)) for p in modality.NULL_LEVELS]
        rows.append("    (" + ", ".join(f"{v:.3f}" for v in q) + f"),  # n={n}")
    print(f"# {reps} standard-normal samples per n, seed {SEED}, "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    print("NULL_QUANTILES = (\n" + "\n".join(rows) + "\n)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--table", action="store_true", help="recompute the module's null table")
    ap.add_argument("--reps", type=int, default=40000, help="null samples per n for --table")
    args = ap.parse_args()
    if args.table:
        table(args.reps)
        return 0
    t0 = time.perf_counter()
    ok = rates(args.sims)
    print(f"{'PASS' if ok else 'FAIL'}: all STATS.md multimodality targets "
          f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
