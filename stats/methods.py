"""Two-sample tests and estimates for A/B kernel comparisons (../shared/STATS.md).

Pure NumPy/SciPy: arrays in, numbers out, no Django. The unit is the run (one boot): the
run-level functions take one value per run; the tail functions take each run's raw samples
and only ever permute or resample whole runs. Permutation p-values are (1 + #{T* >= T}) /
(1 + B), so they are valid for any B and never 0 or NaN.

Nothing here returns NaN or inf: a statistic that does not exist for the data (a ratio to a
pooled quantile of 0, Mood's test when nothing lies above the grand median) is None, with a
sentence saying why, for the report to show.

This module holds what every method shares and the run-level tests: the input checks
(as_values, StatsInputError); the permutation machinery (label rows, the permutation p,
its count raised until the boundary a result may be held to is resolved: adaptive_perm_p);
the rank tests on one value per run (Brunner-Munzel with a studentized permutation p, the
primary test; Mann-Whitney, Mood's median test and the sign test alongside) with
P(B > A) and Cliff's delta; the Hodges-Lehmann shift with its CI from inverting the
Brunner-Munzel permutation test; and failure rates (the kernel's failures counted apart
from the host's, Boschloo's exact test of an excess in B, its level at each look). The
other methods follow the same rules: tails.py (the pooled p99 and maximum of latencies,
whole runs permuted and resampled), diagnostics.py (shape, drift and ties, behind the
warnings) and sequential.py (multiplicity and the group-sequential boundaries).
"""

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from scipy import stats as st

Array = NDArray[np.float64]


class StatsInputError(ValueError):
    """Input the statistics cannot be computed on: empty, NaN, inf or non-positive logs."""


def as_values(x: ArrayLike, what: str, *, min_n: int = 1) -> Array:
    """`x` as a 1-d float array, or a clear error naming `what` and the problem."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise StatsInputError(f"{what}: expected a flat list of values, got shape {a.shape}")
    if a.size < min_n:
        raise StatsInputError(f"{what}: {a.size} values, at least {min_n} needed")
    bad = ~np.isfinite(a)
    if bad.any():
        kinds = sorted({"NaN" if math.isnan(v) else "inf" for v in a[bad]})
        raise StatsInputError(f"{what}: {int(bad.sum())} {'/'.join(kinds)} value(s)")
    return a


# -- rank machinery --------------------------------------------------------------------


def _heaviside_matrix(z: Array) -> Array:
    """H[i, j] = 1 if z_i > z_j, 0.5 if equal (including i == j), else 0."""
    d = z[:, None] - z[None, :]
    return (d > 0) + 0.5 * (d == 0)


def _observed(n_a: int, n_b: int) -> Array:
    """The actual labels as one row: 1.0 marks side A (the first n_a values)."""
    return np.r_[np.ones(n_a), np.zeros(n_b)][None, :]


def _label_matrix(n_a: int, n_b: int, n_perm: int, rng: np.random.Generator) -> Array:
    """n_perm random relabellings (rows) of n_a + n_b runs: 1.0 marks side A."""
    return rng.permuted(np.tile(_observed(n_a, n_b), (n_perm, 1)), axis=1)


def _with_relabellings(n_a: int, n_b: int, n_perm: int, rng: np.random.Generator) -> Array:
    """The observed labels (row 0) followed by n_perm random relabellings."""
    return np.r_[_observed(n_a, n_b), _label_matrix(n_a, n_b, n_perm, rng)]


def _beyond(stat: Array) -> int:
    """#{T* >= T}: relabellings (stat[1:]) at least as extreme as the observed stat[0]."""
    return int((stat[1:] >= stat[0] - 1e-12).sum())


def _perm_p(stat: Array) -> float:
    """Permutation p of stat[0] (the observed labels) against stat[1:] (relabellings),
    larger being more extreme: (1 + #{T* >= T}) / (1 + B)."""
    return (1 + _beyond(stat)) / stat.size


# A p is resolved at a boundary when >= this many relabellings are expected beyond it
# there (STATS.md v2 "resolvable p-values"); the count is raised up to MAX_PERMUTATIONS.
EXCEEDANCES_AT_BOUNDARY = 10
# Enough for 49 secondary statistics (six benchmarks) at the first look with the secondaries'
# linear spending (10 / (.005 * .25 / 49) = 392,000); more than ~75 secondaries are capped.
MAX_PERMUTATIONS = 600_000
_CHUNK = 20_000  # relabellings per matrix product when the count is raised


def permutations_to_resolve(boundary: float) -> int:
    """Relabellings needed for EXCEEDANCES_AT_BOUNDARY expected beyond `boundary`."""
    return math.ceil(EXCEEDANCES_AT_BOUNDARY / boundary)


@dataclass(frozen=True)
class PermP:
    p_value: float
    n_perm: int  # relabellings used: the p's resolution is 1/(n_perm + 1)


def adaptive_perm_p(
    statistic: Callable[[Array], Array], n_a: int, n_b: int, *, n_perm: int,
    resolve: float | None, rng: np.random.Generator,
) -> PermP:  # fmt: skip
    """Permutation p of `statistic` (a row-wise function of label rows, row 0 observed),
    with n_perm relabellings, raised where the decision needs it.

    A decision compares p with a boundary (`resolve`, the smallest nominal p the result
    may be held to). Where n_perm cannot resolve that boundary (fewer than
    EXCEEDANCES_AT_BOUNDARY relabellings expected beyond it), the count is raised to
    permutations_to_resolve(resolve), in chunks, unless the first p is clearly above it:
    more than EXCEEDANCES_AT_BOUNDARY relabellings beyond, and more than 10x `resolve`.
    An early look's decision then rests on permutations, never on a far-tail
    approximation. The first count decides, not only the 10x window (STATS.md v3): with
    many secondaries that window lies below 1/(n_perm + 1) and nothing was ever raised. A
    first count above EXCEEDANCES_AT_BOUNDARY already resolves any boundary at or above
    that p (a BH step further up); were the true p at `resolve`, reading more than 10x its
    expected count beyond is rare (at n_perm 9,999 and a boundary of 4e-5,
    P(Poisson(0.4) >= 4) ~ 1e-3).
    """
    beyond = _beyond(statistic(_with_relabellings(n_a, n_b, n_perm, rng)))
    p = (1 + beyond) / (1 + n_perm)
    if resolve is None or n_perm * resolve >= EXCEEDANCES_AT_BOUNDARY:
        return PermP(p, n_perm)
    if beyond > EXCEEDANCES_AT_BOUNDARY and p > 10 * resolve:
        return PermP(p, n_perm)
    wanted = min(max(permutations_to_resolve(resolve), n_perm), MAX_PERMUTATIONS)
    done = n_perm
    while done < wanted:
        k = min(_CHUNK, wanted - done)
        beyond += _beyond(statistic(_with_relabellings(n_a, n_b, k, rng)))
        done += k
    return PermP((1 + beyond) / (1 + done), done)


def _bm_terms(labels: Array, h: Array) -> tuple[Array, Array, Array, Array, float, float]:
    """Per row of `labels` (1 = side A): the numerator and denominator of Brunner-Munzel's
    W, each side's placement variance times its size (for the t approximation's degrees
    of freedom), and the two sizes.

    Ranks are midranks from the comparison matrix: pooled R_i = 0.5 + sum_j H[i, j];
    within-group ranks use only the same group's columns.
    """
    lab = np.atleast_2d(labels)
    n = lab.shape[1]
    n_a = float(lab[0].sum())
    n_b = n - n_a
    pooled = 0.5 + h.sum(axis=1)  # (n,)
    within_a = 0.5 + lab @ h.T  # rank of i among A's values (meaningful where i is in A)
    within_b = pooled[None, :] - within_a + 0.5  # rank of i among B's values
    rb = 1.0 - lab
    mean_a = (lab * pooled).sum(axis=1) / n_a
    mean_b = (rb * pooled).sum(axis=1) / n_b
    dev_a = pooled - within_a - (mean_a - (n_a + 1) / 2)[:, None]
    dev_b = pooled - within_b - (mean_b - (n_b + 1) / 2)[:, None]
    va = n_a * (lab * dev_a**2).sum(axis=1) / (n_a - 1)
    vb = n_b * (rb * dev_b**2).sum(axis=1) / (n_b - 1)
    num = n_a * n_b * (mean_b - mean_a)
    den = n * np.sqrt(va + vb)
    return num, den, va, vb, n_a, n_b


def _bm_statistic(labels: Array, h: Array) -> Array:
    """Brunner-Munzel W for each row of `labels`; W > 0 means B tends to be larger. Zero
    variance (complete separation, or constant groups) gives +-inf when the mean ranks
    differ and 0 when they do not."""
    num, den, *_ = _bm_terms(labels, h)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(den > 0, num / den, np.where(num == 0, 0.0, np.copysign(np.inf, num)))
    return np.asarray(w, dtype=np.float64)


EXACT = "exact"
PERMUTATION = "permutation"
# Stored results from before the v2 rules; nothing computes a p this way any more.
T_APPROXIMATION = "t-approximation"


@dataclass(frozen=True)
class PermTest:
    statistic: float  # +-inf on complete separation (no within-side rank variance)
    p_value: float  # two-sided
    # EXACT (W = 0: p = 1; or complete separation of distinct values: p = 2 / C(n, n_a))
    # or PERMUTATION, never below its resolution 1/(n_perm + 1).
    method: str
    n_perm: int | None = None  # relabellings behind a PERMUTATION p


def brunner_munzel(
    a: ArrayLike, b: ArrayLike, *, n_perm: int = 9999, resolve: float | None = None,
    rng: np.random.Generator,
) -> PermTest:  # fmt: skip
    """Two-sided Brunner-Munzel test with a studentized permutation p-value.

    `resolve`: the smallest boundary this p may be held to; the permutation count is
    raised where n_perm cannot resolve it (adaptive_perm_p). Complete separation of
    distinct values is exact: only the two separating labellings are as extreme, so
    p = 2 / C(n_a + n_b, n_a). Constant data gives W = 0 and p = 1. Never NaN.
    """
    xa = as_values(a, "side A", min_n=2)
    xb = as_values(b, "side B", min_n=2)
    z = np.r_[xa, xb]
    h = _heaviside_matrix(z)
    w = float(_bm_statistic(_observed(xa.size, xb.size), h)[0])
    if w == 0.0:  # every relabelling has |W*| >= 0: p is 1 whatever the permutations
        return PermTest(0.0, 1.0, EXACT)
    if math.isinf(w) and np.unique(z).size == z.size:
        return PermTest(w, float(2 / special.comb(z.size, xa.size, exact=True)), EXACT)
    perm = adaptive_perm_p(lambda labels: np.abs(_bm_statistic(labels, h)), xa.size, xb.size,
                           n_perm=n_perm, resolve=resolve, rng=rng)  # fmt: skip
    return PermTest(w, perm.p_value, PERMUTATION, perm.n_perm)


def prob_b_greater(a: ArrayLike, b: ArrayLike) -> float:
    """P(B > A) + P(B = A) / 2 over all pairs (the Brunner-Munzel effect)."""
    xa, xb = as_values(a, "side A"), as_values(b, "side B")
    d = xb[None, :] - xa[:, None]
    return float(((d > 0).sum() + 0.5 * (d == 0).sum()) / d.size)


def cliffs_delta(a: ArrayLike, b: ArrayLike) -> float:
    """P(B > A) - P(B < A), in [-1, 1]."""
    return 2 * prob_b_greater(a, b) - 1


def mann_whitney_p(a: ArrayLike, b: ArrayLike) -> float:
    xa, xb = as_values(a, "side A"), as_values(b, "side B")
    if np.ptp(np.r_[xa, xb]) == 0:  # U is n_a n_b / 2 under every relabelling: exactly 1
        return 1.0
    return float(st.mannwhitneyu(xb, xa, alternative="two-sided").pvalue)


@dataclass(frozen=True)
class MedianTest:
    p_value: float | None  # None: the test does not exist for these data
    reason: str = ""  # why p_value is None


def mood_median(a: ArrayLike, b: ArrayLike) -> MedianTest:
    """Mood's median test: counts above the grand median per side, chi-square (Yates).

    When no value lies above the grand median (constant data, or more than half the values
    tied at the top) the 2 x 2 table has an empty row and the test does not exist; SciPy
    refuses, and so does this, with the reason.
    """
    xa, xb = as_values(a, "side A"), as_values(b, "side B")
    try:
        return MedianTest(float(st.median_test(xa, xb).pvalue))
    except ValueError:
        grand = float(np.median(np.r_[xa, xb]))
        return MedianTest(None, f"Mood's median test undefined: no run lies above the grand "
                                f"median ({grand:.6g})")  # fmt: skip


@dataclass(frozen=True)
class SignTest:
    """How many of B's runs lie above A's median, against Binomial(n, 1/2).

    The binomial argument quoted on the kernel lists. It treats A's median as exact, so it
    is optimistic (STATS.md: the honest null probability of "8 of 10 beyond" is about 0.12,
    not 0.055); Mood's test is its rigorous form. A cross-check, never the gate.
    """

    median_a: float
    above: int  # B's runs above A's median
    below: int
    ties: int  # B's runs equal to A's median: left out, as a sign test does
    p_value: float | None  # exact two-sided binomial p; None when every B run is a tie
    reason: str = ""

    @property
    def n(self) -> int:
        return self.above + self.below


def sign_test(a: ArrayLike, b: ArrayLike) -> SignTest:
    """Exact two-sided sign test of B's runs against A's median (ties left out)."""
    xa, xb = as_values(a, "side A"), as_values(b, "side B")
    m = float(np.median(xa))
    above, below = int((xb > m).sum()), int((xb < m).sum())
    ties = xb.size - above - below
    if above + below == 0:
        return SignTest(m, 0, 0, ties, None,
                        f"sign test undefined: all {ties} runs of B equal A's median")  # fmt: skip
    return SignTest(m, above, below, ties, float(st.binomtest(above, above + below).pvalue))


# -- effect sizes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Shift:
    estimate: float  # % (relative) or the metric's unit (absolute)
    low: float
    high: float
    relative: bool  # True: % shift of B against A from logs; False: B - A in the unit


def hodges_lehmann(
    a: ArrayLike, b: ArrayLike, *, confidence: float = 0.95, relative: bool = True,
    rng: np.random.Generator | None = None,
) -> Shift:  # fmt: skip
    """Hodges-Lehmann shift of B against A, with the CI from inverting Brunner-Munzel.

    relative: on log values, reported as a % change (exp(d) - 1); needs positive values.
    Otherwise the plain difference B - A in the metric's unit (memory in kB, counts).

    The CI is the set of shifts d for which the studentized Brunner-Munzel permutation
    test (as brunner_munzel) does not reject A against B - d at 1 - confidence: at a look's
    level (99.93% at the first) the t approximation's tails are far too thin (STATS.md v3),
    so each end is found by bisection over the pairwise differences, every step a
    permutation test with enough relabellings to resolve 1 - confidence (_ShiftTest).
    Unlike the Mann-Whitney order-statistic CI, it stays valid when the sides' spreads and
    sizes differ (that CI covered 87.6% at 24 vs 12 runs with 4x spread; STATS.md v2).
    Its ends are pairwise differences. `rng`: the relabellings' source; by default seeded
    from the values, so the same data always give the same CI (the repeated CI is
    recomputed from stored values at each look).
    """
    xa, xb = as_values(a, "side A", min_n=2), as_values(b, "side B", min_n=2)
    if relative:
        if (xa <= 0).any() or (xb <= 0).any():
            raise StatsInputError("a relative (log) shift needs positive values")
        xa, xb = np.log(xa), np.log(xb)
    d = np.unique(xb[None, :] - xa[:, None])  # sorted candidate shifts
    est = float(np.median(xb[None, :] - xa[:, None]))
    test = _ShiftTest(xa, xb, 1 - confidence, rng or _data_rng(xa, xb))
    lo, hi = _bm_interval(d, est, test.accepts)
    if relative:
        est, lo, hi = (100 * math.expm1(v) for v in (est, lo, hi))
        return Shift(est, lo, hi, relative=True)
    return Shift(est, lo, hi, relative=False)


def _data_rng(xa: Array, xb: Array) -> np.random.Generator:
    """A generator seeded from the values themselves: a CI is a function of its data."""
    return np.random.default_rng([zlib.crc32(xa.tobytes()), zlib.crc32(xb.tobytes())])


# Relabellings behind each end of a CI: enough for EXCEEDANCES_AT_BOUNDARY beyond its
# level, at least CI_MIN (a 95% CI's ends would otherwise rest on 200) and at most CI_MAX
# (resolves 1 - 5e-4: a primary's first look and every later one; ~20 tests per CI cost
# a second or two at 24 runs per side). Past it (a secondary's first looks under power
# spending, Holm over 2+ primaries at the first look) the test stays valid, as a
# permutation p is for any count, and the CI errs wide.
CI_MIN_PERMUTATIONS = 999
CI_MAX_PERMUTATIONS = 20_000
_CI_CHUNK = 2_000  # relabellings per step of a test that may stop early
_CI_CACHE = 4_000_000  # label-matrix cells kept between the bisection's steps (32 MB)


class _ShiftTest:
    """Does the studentized Brunner-Munzel permutation test accept A against B - shift at
    `alpha`? One set of relabellings (count: permutations_to_resolve(alpha), at least
    CI_MIN_PERMUTATIONS, at most CI_MAX_PERMUTATIONS) serves every shift, so the bisection
    compares like with like. A test stops as soon as enough relabellings lie beyond the
    observed |W| for p = (1 + beyond) / (1 + count) to exceed alpha whatever the rest
    show: shifts well inside the CI cost a few thousand relabellings; only rejections and
    the ends themselves cost the full count."""

    def __init__(self, xa: Array, xb: Array, alpha: float, rng: np.random.Generator) -> None:
        self.xa, self.xb = xa, xb
        self.count = min(max(permutations_to_resolve(alpha), CI_MIN_PERMUTATIONS),
                         CI_MAX_PERMUTATIONS)  # fmt: skip
        self.enough = math.floor(alpha * (1 + self.count) - 1) + 1  # beyond: p > alpha
        self.seed = int(rng.integers(2**63))
        self.keep = self.count * (xa.size + xb.size) <= _CI_CACHE
        self.cached: list[Array] = []

    def _chunk(self, k: int) -> Array:
        """The k-th block of relabellings: the same at every shift (cached or redrawn)."""
        if k < len(self.cached):
            return self.cached[k]
        rows = min(_CI_CHUNK, self.count - k * _CI_CHUNK)
        labels = _label_matrix(self.xa.size, self.xb.size, rows,
                               np.random.default_rng([self.seed, k]))  # fmt: skip
        if self.keep:
            self.cached.append(labels)
        return labels

    def accepts(self, shift: float) -> bool:
        h = _heaviside_matrix(np.r_[self.xa, self.xb - shift])
        w = float(_bm_abs_w(_observed(self.xa.size, self.xb.size), h)[0])
        if w == 0.0:  # p is 1 (as brunner_munzel says)
            return True
        beyond = 0
        for k in range(math.ceil(self.count / _CI_CHUNK)):
            beyond += int((_bm_abs_w(self._chunk(k), h) >= w - 1e-12).sum())
            if beyond >= self.enough:
                return True
        return False


def _bm_abs_w(labels: Array, h: Array) -> Array:
    """|W| of _bm_statistic per row of `labels`, with half its array passes: the CI runs
    it on every relabelling at ~10 shifts per end. With G = labels @ H^T, an A run's
    placement is R - 1/2 - G and a B run's is G, and each side's sum of squared deviations
    is the sum of squares less n times the squared mean deviation."""
    n_a = float(labels[0].sum())
    n_b = labels.shape[1] - n_a
    pooled = 0.5 + h.sum(axis=1)
    g = labels @ h.T
    sum_a = labels @ pooled
    mean_a, mean_b = sum_a / n_a, (pooled.sum() - sum_a) / n_b
    c_a, c_b = mean_a - (n_a + 1) / 2, mean_b - (n_b + 1) / 2
    q = pooled - 0.5 - g
    g2 = g * g
    ss_a = np.einsum("ij,ij->i", labels, q * q) - n_a * c_a**2
    ss_b = g2.sum(axis=1) - np.einsum("ij,ij->i", labels, g2) - n_b * c_b**2
    v = n_a * ss_a / (n_a - 1) + n_b * ss_b / (n_b - 1)
    # Rank sums are multiples of 1/2: a variance below 1e-6 is 0 left by rounding.
    v = np.where(v < 1e-6, 0.0, v)
    num = np.abs(n_a * n_b * (mean_b - mean_a))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(v > 0, num / ((n_a + n_b) * np.sqrt(v)), np.where(num == 0, 0.0, np.inf))
    return np.asarray(w, dtype=np.float64)


def _bm_interval(d: Array, est: float, accepted: Callable[[float], bool]) -> tuple[float, float]:
    """The lowest and highest candidate shifts in d that the test accepts, by bisection
    on each side of the estimate (p falls away from it on both sides)."""
    mid = int(np.searchsorted(d, est))
    lo_bad, lo_ok = -1, min(mid, d.size - 1)  # d[lo_bad] rejected (or none), d[lo_ok] not
    while lo_ok - lo_bad > 1:
        m = (lo_bad + lo_ok) // 2
        lo_ok, lo_bad = (m, lo_bad) if accepted(float(d[m])) else (lo_ok, m)
    hi_ok, hi_bad = max(mid - 1, 0), d.size
    while hi_bad - hi_ok > 1:
        m = (hi_ok + hi_bad) // 2
        hi_ok, hi_bad = (m, hi_bad) if accepted(float(d[m])) else (hi_ok, m)
    return float(min(d[lo_ok], est)), float(max(d[hi_ok], est))


# -- failure rates -----------------------------------------------------------------------

# Run outcomes that are the kernel's doing (STATS.md v2, "failure rates are data"). The
# host's and the operator's (infra-error, lost, cancelled) say nothing about the kernel:
# they are counted apart and never enter the test.
KERNEL_FAILURES = ("panic", "boot-failed", "timeout", "console-overflow", "parse-failed")
HOST_FAILURES = ("infra-error", "lost", "cancelled")
# A failure excess is alerted on (the comparison ends reliability-regression) with at most
# this chance when A and B fail alike, over all the looks of a comparison.
RELIABILITY_ALPHA = 0.01


def reliability_level(look: int, looks: int, alpha: float = RELIABILITY_ALPHA) -> float:
    """The failure test's level at a look: three quarters of alpha at the first (where
    most comparisons end; 0/24 vs 6/24 failures, Boschloo p 0.0066, is flagged there), the
    last quarter spread evenly over the rest. The levels sum to alpha, so the whole
    procedure flags equal failure rates at most alpha of the time (Bonferroni over the
    looks; an exact test's size never exceeds its level)."""
    if looks == 1:
        return alpha
    return 3 * alpha / 4 if look == 1 else alpha / (4 * (looks - 1))


@dataclass(frozen=True)
class FailureCounts:
    """One side's finished runs of one benchmark, by outcome."""

    ok: int = 0
    failures: tuple[tuple[str, int], ...] = ()  # (error code, runs), kernel's and host's

    def count(self, codes: Sequence[str]) -> int:
        return sum(n for code, n in self.failures if code in codes)

    @property
    def kernel_failures(self) -> int:
        return self.count(KERNEL_FAILURES)

    @property
    def host_failures(self) -> int:
        # Anything not named as the kernel's is not held against it (an unknown code too).
        return sum(n for code, n in self.failures if code not in KERNEL_FAILURES)

    @property
    def attempts(self) -> int:
        """Boots that tell something about the kernel: ok or failed by the kernel."""
        return self.ok + self.kernel_failures


def failure_counts(outcomes: Sequence[str]) -> FailureCounts:
    """Counts from finished runs' outcomes: "ok" or an error code."""
    ok = sum(1 for o in outcomes if o == "ok")
    codes: dict[str, int] = {}
    for o in outcomes:
        if o != "ok":
            codes[o] = codes.get(o, 0) + 1
    return FailureCounts(ok, tuple(sorted(codes.items())))


@dataclass(frozen=True)
class FailureTest:
    p_value: float  # Boschloo's exact test, one-sided (B fails more often): the gate
    p_fisher: float  # Fisher's exact test, same direction: shown beside it, not deciding
    rate_a: float | None  # kernel failures / attempts; None with no attempts
    rate_b: float | None


def failure_excess(a: FailureCounts, b: FailureCounts) -> FailureTest:
    """Is B's kernel-failure rate above A's? Boschloo's exact test on the 2x2 table of
    (kernel failures, ok) per side, one-sided for an excess in B: a B that fails less is
    not a reliability regression.

    Boschloo's test orders tables by Fisher's p and calibrates that order over the
    unknown common failure rate instead of conditioning on the total: it is exact (its
    size never exceeds alpha) and uniformly more powerful than Fisher's, whose conditioning
    leaves it conservative at these counts (0/24 vs 6/24: Fisher 0.011, Boschloo 0.0066).
    p is 1 when a side has no attempts or B has no failure."""
    # One column per side (SciPy's Boschloo takes each column as one binomial sample;
    # Fisher's test is the same either way): failures on top, B first.
    table = [[b.kernel_failures, a.kernel_failures], [b.ok, a.ok]]
    if b.kernel_failures == 0 or a.attempts == 0:
        p = pf = 1.0  # nothing to test: SciPy's answer too, without its degenerate paths
    else:
        pf = float(st.fisher_exact(table, alternative="greater").pvalue)
        p = float(st.boschloo_exact(table, alternative="greater").pvalue)
        if not math.isfinite(p):  # degenerate tables (nothing ok on either side)
            p = pf

    def rate(c: FailureCounts) -> float | None:
        return c.kernel_failures / c.attempts if c.attempts else None

    return FailureTest(min(p, 1.0), min(pf, 1.0), rate(a), rate(b))
