"""Seeded simulations of the statistics engine against every target of STATS.md's Spec (v2),
and the v3 targets registered from their own modules (perf/_sim_rules.py: the verdict rules;
perf/jiffy_simulation.py: grace periods in jiffies; perf/_failure_sims.py: the failure budget;
perf/sweep_simulation.py: the sweeps' scaling and interaction verdicts, issue 36).

Through the engine's own functions: stats.battery.analyse for the whole sequential
procedure (looks at 24/48/72/96, more runs while it asks for them) and the 20-metric family,
engine.failure_result for failure rates (and perf/_failure_sims.py replaying the
orchestrator's replacements and failure budget), engine.non_finite for NaN/inf; the stats functions
it calls for fixed-N rates; the v3 targets of the repeated CI and the multimodality
warning from perf/stats_targets_v3.py (counts there). One line per check: the value
+- its standard error (binomial for a rate, of the mean for runs/side), the target,
PASS/FAIL (REF: a reference line, no target), the number of simulations and the wall time.
Then the deterministic checks, the wall time of the full battery on one comparison of
2 x 96 runs x 10,000 samples with 9,999 permutations, and "v2 targets: K of M PASS"; the
exit status is 1 on any FAIL.

Simulations per target (STATS.md: 2,000 each for rates near 5%, >= 10,000 for power and for
targets within 2 points of their limit); Target.sims holds each default:
  2,000   false-alarm rates at a nominal 5%: aa-lognormal, aa-bimodal, aa-outliers,
          aa-quantized (5% +- 1%: 2 SE at 2,000), aa-sequential, nested-{0,2,5}pct,
          spread-only, twenty-metrics, twenty-metrics-3bench; and the mean runs/side of
          asn-5pct and asn-10pct (SE ~0.3 runs);
  10,000  power: power-5pct-n24, power-2pct-by96, tail-only; within 2 points of a limit:
          at-threshold (<= 2.5%), hl-coverage (94-96.5%), hl-coverage-unequal (>= 93%),
          failure-equal (<= 1%; ~0.3%), failure-budget-10pct and -25pct (Spec v3: two
          kernels both failing 10% or 25% of boots through the orchestrator's scheduling
          rule, perf/_failure_sims.py: ended runs-failed <= 1% and <= 5%; flagged at 10%
          <= 1%).
--sims N sets every count to N (smoke runs); --scale F multiplies the defaults.

Permutations inside the simulations: 999 per test at fixed N (B = 999 keeps p-values
exact-valid; only their resolution is coarser), 1,999 as the base count of the sequential
ones (the engine raises a test's count where a look's boundary needs more to be resolved),
9,999 in the deterministic checks and the timed battery as in production.
Every simulation is seeded by (SEED, target name, index): results do not
depend on --jobs.
Run: .venv/bin/python perf/stats_simulation.py [--sims N | --scale F] [--jobs 2]
     [--only NAME ...]   (smoke: --sims 100 --jobs 1)
"""

import argparse
import importlib
import math
import multiprocessing
import multiprocessing.pool
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy import stats as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf import stats_targets_v3
from perf._failure_sims import LOOKS, failure_budget, failure_equal
from perf._sim_rules import RULES_TARGETS
from perf._sim_targets import PRECISE_SIMS, RATE_SIMS, Check, Sim, Target
from perf._sim_targets import ref as _ref
from perf.jiffy_simulation import jiffy_targets
from perf.sweep_simulation import SWEEP_TARGETS
from stats import defaults, methods, tails
from stats import verdicts as E
from stats.battery import analyse
from stats.design import Design
from stats.inputs import BenchmarkFailures, MetricInput, RunSamples

SEED = 20261121
PERM = 999  # permutations per test at fixed N
SEQ_PERM = 2 * PERM + 1  # in the sequential procedure
N_BOOT, PERM_SHAPE = 10, 99  # cluster bootstrap and Anderson-Darling: not what is measured
CV = 0.05

Runs = np.ndarray | Sequence[np.ndarray]  # one value per run, or each run's samples


# -- data generators: one run-level value per run unless nested --------------------------


def lognormal(rng: np.random.Generator, n: int, shift: float = 0.0, cv: float = CV) -> np.ndarray:
    return rng.lognormal(math.log(1000 * (1 + shift)), cv, n)


def bimodal(rng: np.random.Generator, n: int) -> np.ndarray:
    slow = rng.random(n) < 0.30  # 30% of runs land 8% slower
    return rng.lognormal(math.log(1000), 0.02, n) * np.where(slow, 1.08, 1.0)


def outliers(rng: np.random.Generator, n: int) -> np.ndarray:
    hit = rng.random(n) < 0.05  # 5% of runs hit by a Pareto(1.5) slowdown
    return lognormal(rng, n) * (1 + np.where(hit, 0.1 * (1 + rng.pareto(1.5, n)), 0.0))


def quantized(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.round(rng.lognormal(math.log(200), CV, n) / 4) * 4  # kB in 4 kB pages: ties


def nested(
    rng: np.random.Generator, runs: int, samples: int, run_sd: float, tail: float = 1.0
) -> list[np.ndarray]:
    """Runs of `samples` latencies: a per-boot offset (run_sd) on a within-run spread wide
    enough (sigma 0.25) that pooled-sample tests feel the clustering as STATS.md says."""
    out = []
    for _ in range(runs):
        x = rng.lognormal(math.log(6.0) + rng.normal(0, run_sd), 0.25, samples)
        if tail != 1.0:  # the slowest 3% of the run's samples get slower, nothing else
            cut = np.quantile(x, 0.97)
            x = np.where(x > cut, x * tail, x)
        out.append(x)
    return out


def sparse(rng: np.random.Generator, runs: int, share: float) -> list[np.ndarray]:
    """Latency runs of 200 samples, all 0 but a `share` of them: a pooled p99 of 0 below 1%."""
    return [np.where(rng.random(200) < share, rng.lognormal(math.log(50), 0.5, 200), 0.0)
            for _ in range(runs)]  # fmt: skip


# -- engine inputs -------------------------------------------------------------------------


def _design(seed: int, n_perm: int = PERM) -> Design:
    return Design(seed=seed, n_perm=n_perm, n_boot=N_BOOT, n_perm_shape=PERM_SHAPE)


def _runs(values: Runs, first: int) -> list[RunSamples]:
    """Every other slot of the run order from `first`: A and B interleaved."""
    return [RunSamples(first + 2 * k, tuple(np.atleast_1d(v).astype(float).tolist()))
            for k, v in enumerate(values)]  # fmt: skip


def _metric(
    a: Runs, b: Runs, name: str = "m", *,
    benchmark: str = "sim", primary: bool = True, samples: bool = False,
) -> MetricInput:  # fmt: skip
    """One value per run (samples=False) or a latency's samples per run."""
    return MetricInput(
        benchmark=benchmark, name=name, unit="ms", per_run_samples=samples,
        lower_is_better=True, primary=primary, runs_a=_runs(a, 0), runs_b=_runs(b, 1),
    )  # fmt: skip


def run_sequential(
    metrics_at: Callable[[int], list[MetricInput]], design: Design
) -> tuple[E.Analysis, E.Analysis]:
    """The whole procedure: analyse at min_runs, add the runs the engine asks for while it
    asks (up to max_runs). Returns the first look's analysis and the final one."""
    n = design.min_runs
    first = last = analyse(metrics_at(n), design)
    while last.need_more_runs:
        n += last.need_more_runs
        last = analyse(metrics_at(n), design)
    return first, last


# -- one simulated comparison per call: (target name, seed index) -> numbers --------------


def _rng(name: str, i: int) -> np.random.Generator:
    return np.random.default_rng([SEED, sum(map(ord, name)), i])


def bm_rejects(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> float:
    return float(methods.brunner_munzel(a, b, n_perm=PERM, rng=rng).p_value <= 0.05)


def fixed_aa(gen: Callable[[np.random.Generator, int], np.ndarray]) -> Sim:
    def one(name: str, i: int) -> list[float]:
        rng = _rng(name, i)
        return [bm_rejects(gen(rng, 24), gen(rng, 24), rng)]

    return one


def power_fixed(name: str, i: int) -> list[float]:
    rng = _rng(name, i)
    return [bm_rejects(lognormal(rng, 24), lognormal(rng, 24, 0.05), rng)]


def sequential(shift: float) -> Sim:
    """One metric, lognormal CV 5%, B shifted by `shift`, through the whole procedure."""

    def one(name: str, i: int) -> list[float]:
        rng = _rng(name, i)
        design = _design(i, SEQ_PERM)
        a, b = lognormal(rng, design.max_runs), lognormal(rng, design.max_runs, shift)
        _, last = run_sequential(lambda n: [_metric(a[:n], b[:n])], design)
        r = last.results[0]
        significant = r.verdict in (E.REGRESSION, E.IMPROVEMENT, E.SMALL)
        up = r.shift is not None and r.shift > 0  # run-level: always defined
        return [float(significant), float(significant and up), float(last.n_per_side),
                *(float(r.verdict == v) for v in (E.NO_CHANGE, E.SMALL, E.REGRESSION,
                                                  E.INCONCLUSIVE))]  # fmt: skip

    return one


def nested_aa(run_sd: float) -> Sim:
    def one(name: str, i: int) -> list[float]:
        rng = _rng(name, i)
        ra, rb = nested(rng, 24, 100, run_sd), nested(rng, 24, 100, run_sd)
        p50 = bm_rejects(np.array([np.median(r) for r in ra]),
                         np.array([np.median(r) for r in rb]), rng)  # fmt: skip
        p99 = tails.tail_test(ra, rb, n_perm=PERM, n_boot=N_BOOT, rng=rng).p_value <= 0.05
        pooled = st.mannwhitneyu(np.concatenate(ra), np.concatenate(rb)).pvalue <= 0.05
        return [p50, float(p99), float(pooled)]

    return one


def tail_only(name: str, i: int) -> list[float]:
    rng = _rng(name, i)
    ra, rb = nested(rng, 24, 100, 0.02), nested(rng, 24, 100, 0.02, tail=1.3)
    p99 = tails.tail_test(ra, rb, n_perm=PERM, n_boot=N_BOOT, rng=rng).p_value <= 0.05
    p50 = bm_rejects(np.array([np.median(r) for r in ra]),
                     np.array([np.median(r) for r in rb]), rng)  # fmt: skip
    return [float(p99), p50]


def hl_coverage(n_b: int, cv_b: float) -> Sim:
    """Does the 95% CI of the HL shift cover the true 5% (of the median) with 24 runs of
    A at CV 5% and n_b runs of B at cv_b?"""

    def one(name: str, i: int) -> list[float]:
        rng = _rng(name, i)
        shift = methods.hodges_lehmann(lognormal(rng, 24), lognormal(rng, n_b, 0.05, cv_b))
        return [float(shift.low <= 5.0 <= shift.high)]

    return one


def twenty_metrics(benchmarks: int) -> Sim:
    """20 unchanged metrics (A/A, lognormal CV 5%) in one comparison: the first metric of
    each of `benchmarks` benchmarks primary (Holm), the others secondary (BH), through the
    whole sequential procedure. Columns: any false regression or improvement verdict at the
    end; any regression/improvement/significant-but-small; runs/side; any raw p <= .05 at
    the first look (unadjusted)."""

    def one(name: str, i: int) -> list[float]:
        rng = _rng(name, i)
        design = _design(i, SEQ_PERM)
        data = [(lognormal(rng, design.max_runs), lognormal(rng, design.max_runs))
                for _ in range(20)]  # fmt: skip

        def metrics(n: int) -> list[MetricInput]:
            return [_metric(a[:n], b[:n], f"m{k}", benchmark=f"b{k % benchmarks}",
                            primary=k < benchmarks) for k, (a, b) in enumerate(data)]  # fmt: skip

        first, last = run_sequential(metrics, design)
        verdicts = {r.verdict for r in last.results}
        return [float(bool(verdicts & {E.REGRESSION, E.IMPROVEMENT})),
                float(bool(verdicts & {E.REGRESSION, E.IMPROVEMENT, E.SMALL})),
                float(last.n_per_side),
                float(any(r.p_value <= 0.05 for r in first.results))]  # fmt: skip

    return one


def spread_only(name: str, i: int) -> list[float]:
    rng = _rng(name, i)
    a, b = lognormal(rng, 24, cv=0.05), lognormal(rng, 12, cv=0.20)  # same median, 4x spread
    mwu = st.mannwhitneyu(a, b).pvalue <= 0.05
    return [bm_rejects(a, b, rng), float(mwu)]


def failures(sim: Callable[..., list[float]], *rates: float) -> Sim:
    """A failure-rate simulation of perf/_failure_sims.py, seeded as every other."""
    return lambda name, i: sim(_rng(name, i), *rates)


# Pooled-sample Mann-Whitney on 24 x 100 clustered samples: STATS.md's figures, +- a few
# points (the design effect 1 + 99 ICC, with this within-run spread, predicts 12.8% and
# 37.9%); with no run effect it must stay near 5%.
NEGATIVE_CONTROL = {0: (3.0, 7.0, "~5%"), 2: (10.0, 16.0, "13%"), 5: (33.0, 41.0, "37%")}


# -- targets -------------------------------------------------------------------------------


_THR = defaults.THRESHOLD_PCT  # the design's default threshold: a true shift on it counts
TARGETS = (
    Target("aa-lognormal", fixed_aa(lognormal),
           (Check("A/A false alarms, N=24, lognormal CV 5%", 0, lo=4.0, hi=6.0),)),
    Target("aa-bimodal", fixed_aa(bimodal),
           (Check("A/A false alarms, N=24, bimodal (30% of runs 8% slower)", 0, lo=4, hi=6),)),
    Target("aa-outliers", fixed_aa(outliers),
           (Check("A/A false alarms, N=24, lognormal + 5% Pareto(1.5) outliers", 0, lo=4,
                  hi=6),)),
    Target("aa-quantized", fixed_aa(quantized),
           (Check("A/A false alarms, N=24, 4 kB-quantized values with ties", 0, lo=4, hi=6),)),
    Target("aa-sequential", sequential(0.0),
           (Check("A/A false alarms, whole sequential procedure 24..96", 0, hi=6.0),)),
    Target("power-5pct-n24", power_fixed,
           (Check("power, 5% shift, N=24, CV 5%", 0, lo=85.0),), PRECISE_SIMS),
    Target("power-2pct-by96", sequential(0.02), (
        Check("power, 2% shift by 96 runs, CV 5% (sequential; design value ~75%)", 1, lo=72.0),
        _ref("mean runs/side, 2% shift", 2, "runs"),
    ), PRECISE_SIMS),
    Target("asn-5pct", sequential(0.05),
           (Check("mean runs/side, 5% shift, CV 5%", 2, "runs", hi=50.0),)),
    Target("asn-10pct", sequential(0.10),
           (Check("mean runs/side, 10% shift, CV 5%", 2, "runs", hi=27.0),)),
    Target("at-threshold", sequential(_THR / 100), (
        Check(f"true shift = threshold ({_THR:g}%), CV 5%: P(no meaningful change)", 3, hi=2.5),
        Check(f"true shift = threshold ({_THR:g}%), CV 5%: P(significant-but-small)", 4, hi=5.0),
        _ref(f"true shift = threshold ({_THR:g}%), CV 5%: P(regression)", 5),
        _ref(f"true shift = threshold ({_THR:g}%), CV 5%: P(inconclusive)", 6),
    ), PRECISE_SIMS),
    *(
        Target(f"nested-{sd}pct", nested_aa(sd / 100), (
            Check(f"nested 24x100, run effect {sd}%: A/A p50 test", 0, hi=6.0),
            Check(f"nested 24x100, run effect {sd}%: A/A p99 test", 1, hi=6.0),
            Check(f"nested 24x100, run effect {sd}%: pooled-sample MWU (negative control, "
                  f"STATS.md: {NEGATIVE_CONTROL[sd][2]})", 2, lo=NEGATIVE_CONTROL[sd][0],
                  hi=NEGATIVE_CONTROL[sd][1]),
        ))
        for sd in (0, 2, 5)
    ),
    Target("tail-only", tail_only, (
        Check("tail-only +30% on slowest 3%: p99 test detects", 0, lo=75.0),
        Check("tail-only +30% on slowest 3%: p50 test flags", 1, hi=6.0),
    ), PRECISE_SIMS),
    Target("hl-coverage", hl_coverage(24, CV),
           (Check("Hodges-Lehmann 95% CI coverage, 5% shift, N=24", 0, lo=94.0, hi=96.5),),
           PRECISE_SIMS),
    Target("hl-coverage-unequal", hl_coverage(12, 0.20),
           (Check("Hodges-Lehmann 95% CI coverage, 5% shift, 24 vs 12 runs, 4x spread "
                  "(CV 5% vs 20%)", 0, lo=93.0),), PRECISE_SIMS),
    *(
        Target(name, twenty_metrics(k), (
            Check(f"20 unchanged metrics ({what}), whole sequential procedure: P(any false "
                  "regression or improvement verdict)", 0, hi=5.0),
            _ref(f"20 unchanged metrics ({what}): P(any regression, improvement or "
                 "significant-but-small verdict)", 1),
            _ref(f"20 unchanged metrics ({what}): mean runs/side", 2, "runs"),
            _ref(f"20 unchanged metrics ({what}): P(any raw p <= .05 at 24 runs), "
                 "unadjusted", 3),
        ))
        for name, k, what in (
            ("twenty-metrics", 1, "1 benchmark: 1 primary + 19 secondary"),
            ("twenty-metrics-3bench", 3, "3 benchmarks: 3 primaries (Holm) + 17 secondary"),
        )
    ),
    Target("spread-only", spread_only, (
        Check("spread-only change (4x), 24 vs 12 runs: Brunner-Munzel false alarms", 0, hi=7.0),
        _ref("spread-only change (4x), 24 vs 12 runs: Mann-Whitney", 1),
    )),
    Target("failure-equal", failures(failure_equal), (
        Check("equal failure rates (10% both), 24 attempts/side: flagged", 0, hi=1.0),
        _ref("equal failure rates (10% both): flagged at any look up to 48 attempts/side", 1),
        _ref("equal failure rates (10% both): flagged at any look up to 96 attempts/side", 2),
    ), PRECISE_SIMS),
    *(Target(f"failure-budget-{pct}pct", failures(failure_budget, pct / 100, pct / 100), (
        Check(f"kernels both failing {pct}% of boots, scheduled through 4 looks: ended "
              "runs-failed", 0, hi=hi),
        Check(f"kernels both failing {pct}%, scheduled: flagged reliability-regression", 1,
              hi=1.0) if pct == 10 else _ref(f"kernels both failing {pct}%, scheduled: "
                                             "flagged reliability-regression", 1),
        _ref(f"kernels both failing {pct}%, scheduled: ended runs-failed at the first look", 2),
    ), PRECISE_SIMS) for pct, hi in ((10, 1.0), (25, 5.0))),
    # STATS.md v3: the repeated CI at the first look, the multimodality warning (v2's pair
    # replaced); perf/stats_targets_v3.py.
    *stats_targets_v3.targets(Target, Check, {"outliers": outliers, "quantized": quantized},
                              RATE_SIMS, PRECISE_SIMS),
    *jiffy_targets(Target, Check, _rng, PRECISE_SIMS),  # v3: grace periods in jiffies
    *RULES_TARGETS,  # STATS.md v3's verdict rules (perf/_sim_rules.py)
    *SWEEP_TARGETS,  # issue 36: sweeps' scaling and interaction (perf/sweep_simulation.py)
)  # fmt: skip


def _call(args: tuple[int, int]) -> list[float]:
    target, i = args
    t = TARGETS[target]
    return t.sim(t.name, i)


def missing(requires: str) -> str:
    """Why a target's lazily imported "module:attribute" is not usable; "" when it is."""
    if not requires:
        return ""
    module, _, attribute = requires.partition(":")
    try:
        found = importlib.import_module(module)
    except (ImportError, SyntaxError) as e:
        return f"{module} not importable ({type(e).__name__}: {e})"
    return "" if hasattr(found, attribute) else f"{module} has no {attribute}"


def estimate(column: np.ndarray, unit: str) -> tuple[float, float]:
    """(value, standard error): a rate in % with its binomial SE, or a mean with its SE."""
    if unit == "%":
        p = float(column.mean())
        return 100 * p, 100 * math.sqrt(p * (1 - p) / column.size)
    return float(column.mean()), float(column.std(ddof=1) / math.sqrt(column.size))


def report(check: Check, column: np.ndarray, took: float) -> str:
    """Print the check's line; its status, "" for a reference line."""
    value, se = estimate(column, check.unit)
    unit = "%" if check.unit == "%" else f" {check.unit}"
    reference = check.lo is None and check.hi is None
    if reference:
        status, target = "", "no target"
    else:
        met = (check.lo is None or value >= check.lo) and (check.hi is None or value <= check.hi)
        status, target = ("PASS" if met else "FAIL"), f"target {check.bound}"
    print(f"{status or 'REF':4}  {check.label}: {value:.2f}{unit} ± {se:.2f}  {target}  "
          f"({column.size} sims, {took:.0f} s)", flush=True)  # fmt: skip
    return status


def run_target(index: int, sims: int, pool: multiprocessing.pool.Pool) -> list[str]:
    """Simulate one target; the statuses of its checks with a target (PASS/FAIL/SKIP)."""
    target = TARGETS[index]
    why = missing(target.requires)
    if why:
        for check in target.checks:
            print(f"SKIP  {check.label}: {why}", flush=True)
        return ["SKIP" for c in target.checks if c.lo is not None or c.hi is not None]
    started = time.monotonic()
    rows = np.array(pool.map(_call, [(index, i) for i in range(sims)], chunksize=10))
    took = time.monotonic() - started
    statuses = [report(c, rows[:, c.column], took) for c in target.checks]
    return [s for s in statuses if s]


# -- deterministic checks ------------------------------------------------------------------


def _separation(a: np.ndarray, b: np.ndarray) -> tuple[bool, str]:
    t = methods.brunner_munzel(a, b, rng=np.random.default_rng(SEED))
    return t.p_value < 0.01 and math.isfinite(t.p_value), f"p {t.p_value:.3g} ({t.method})"


def separation_equal() -> tuple[bool, str]:
    ok_sep, sep = _separation(np.arange(24.0), np.arange(24.0) + 50)
    ok_const, const = _separation(np.full(24, 7.0), np.full(24, 9.0))
    return ok_sep and ok_const, (f"complete separation 24 vs 24: {sep}; constant sides apart: "
                                 f"{const}; target p < 0.01, never NaN")  # fmt: skip


def separation_unequal() -> tuple[bool, str]:
    ok, sep = _separation(np.arange(24.0), np.arange(12.0) + 50)
    return ok, f"complete separation 24 vs 12 runs: {sep}; target p < 0.01, never NaN"


def failures_flagged() -> tuple[bool, str]:
    f = BenchmarkFailures("sim", methods.FailureCounts(ok=24),
                          methods.FailureCounts(ok=18, failures=(("panic", 6),)))  # fmt: skip
    r = E.failure_result(f, 1, len(LOOKS))  # the first look, as conclude() calls it
    return r.verdict == E.RELIABILITY, (f"failure rates 0/24 vs 6/24 (panic) at the first look: "
                                        f"verdict {r.verdict}, p {r.p_value:.3g}; target "
                                        f"{E.RELIABILITY}")  # fmt: skip


def _non_finite(metric: MetricInput) -> str:
    """What NaN/inf the engine's analysis of one metric at 24 runs holds, or why it failed."""
    try:
        found = E.non_finite(analyse([metric], _design(0)).results)
    except (ValueError, ArithmeticError) as e:  # UnreportableResult: a NaN refused
        return f"{type(e).__name__}: {e}"
    return ", ".join(found[:3]) + (f" (+{len(found) - 3})" if len(found) > 3 else "")


def no_nan() -> tuple[bool, str]:
    rng = np.random.default_rng(SEED)
    cases = {
        "latency, A's pooled p99 0 (0.5% of samples > 0), B's 3%":
            _metric(sparse(rng, 24, 0.005), sparse(rng, 24, 0.03), samples=True),
        "latency, both pooled p99 0": _metric(sparse(rng, 24, 0.005), sparse(rng, 24, 0.005),
                                              samples=True),
        "latency, every sample 6.0": _metric([np.full(100, 6.0)] * 24, [np.full(100, 6.0)] * 24,
                                             samples=True),
        "values, constant 7 both": _metric(np.full(24, 7.0), np.full(24, 7.0)),
        "values, constant 7 vs 9": _metric(np.full(24, 7.0), np.full(24, 9.0)),
    }  # fmt: skip
    bad = [f"{case}: {why}" for case, m in cases.items() if (why := _non_finite(m))]
    return not bad, (f"no NaN/inf in the engine's results ({len(cases)} cases: pooled p99 0, "
                     "constant data; one run not tried, the engine refuses < 2 runs)"
                     + "".join(f"\n      {b}" for b in bad))  # fmt: skip


DETERMINISTIC: tuple[tuple[str, Callable[[], tuple[bool, str]]], ...] = (
    ("separation", separation_equal),
    ("separation-unequal", separation_unequal),
    ("failures-flagged", failures_flagged),
    ("no-nan", no_nan),
)


def deterministic(names: Sequence[str]) -> list[str]:
    """Run the chosen deterministic checks; their statuses."""
    out = []
    for name, check in DETERMINISTIC:
        if name in names:
            ok, line = check()
            out.append("PASS" if ok else "FAIL")
            print(f"{out[-1]}  {line}  (deterministic)", flush=True)
    return out


def battery_time() -> float:
    rng = np.random.default_rng(SEED)

    def runs(first: int, factor: float) -> list[RunSamples]:
        return [RunSamples(first + 2 * k, tuple(rng.lognormal(math.log(6 * factor), 0.1,
                                                               10_000)))
                for k in range(96)]  # fmt: skip

    metric = MetricInput("sync-rcu-latency", "writer_duration", "ms", True, True, True,
                         runs(0, 1.0), runs(1, 1.01))  # fmt: skip
    design = Design(n_perm=9999)
    design.bounds  # noqa: B018  (the boundaries are computed once per process; not timed)
    started = time.monotonic()
    analyse([metric], design)
    took = time.monotonic() - started
    print(f"INFO  full battery, 2 x 96 runs x 10,000 samples, 9,999 permutations "
          f"(p50/mean/p90 run-level + p99/max tails): {took:.1f} s wall")  # fmt: skip
    return took


def main() -> int:
    names = [n for n, _ in DETERMINISTIC] + [t.name for t in TARGETS] + ["battery"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, help="every target's count (smoke runs)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the defaults")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", choices=names, metavar="NAME",
                        help="run only these: " + " ".join(names))  # fmt: skip
    args = parser.parse_args()
    chosen = args.only or names
    statuses = deterministic(chosen)
    with multiprocessing.Pool(args.jobs) as pool:
        for i, t in enumerate(TARGETS):
            if t.name in chosen:
                sims = args.sims or max(1, round(t.sims * args.scale))
                statuses += run_target(i, sims, pool)
    if "battery" in chosen:
        battery_time()
    passed, failed, skipped = (statuses.count(s) for s in ("PASS", "FAIL", "SKIP"))
    print(f"v2 targets: {passed} of {len(statuses)} PASS"
          + (f" ({failed} FAIL, {skipped} SKIP)" if failed or skipped else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
