"""A comparison's reliability rows: per benchmark and side, the attempts, the kernel's
failures by outcome and the host's, with the stored failure-rate test (STATS.md v2: failure
rates are data). Part of the read model (summary.py): every reader reads them from here."""

from dataclasses import dataclass

from stats.methods import RELIABILITY_ALPHA, FailureCounts
from stats.verdicts import FAILURE_STATISTIC
from webapp.analysis.models import MetricVerdict
from webapp.analysis.services import failure_counts
from webapp.comparisons.models import Comparison
from webapp.comparisons.summary import p_text


@dataclass(frozen=True)
class SideFailures:
    side: str
    attempts: int  # ok + the kernel's failures: what the test counts
    ok: int
    kernel_failures: int
    host_failures: int  # infra-error, lost, cancelled: not the kernel's, not tested
    by_outcome: dict[str, int]  # every failure code, the kernel's and the host's

    @property
    def rate(self) -> str:
        return f"{100 * self.kernel_failures / self.attempts:.3g}%" if self.attempts else "n/a"


@dataclass(frozen=True)
class ReliabilityRow:
    """One benchmark's failure counts now, and the last test of them (at a look, or
    when a side spent its failure budget); None and "" before the first."""

    benchmark: str
    sides: tuple[SideFailures, SideFailures]
    p_value: float | None  # Boschloo's exact test, one-sided: B fails more often
    p_fisher: float | None  # the conditional exact test, shown, not deciding
    alpha: float
    verdict: str
    tested_on: str  # the attempts the stored test counted, when they differ from now's

    @property
    def p(self) -> str:
        return p_text(self.p_value)

    @property
    def fisher(self) -> str:
        return p_text(self.p_fisher)


def _side_failures(side: str, f: FailureCounts) -> SideFailures:
    return SideFailures(side, f.attempts, f.ok, f.kernel_failures, f.host_failures,
                        dict(f.failures))  # fmt: skip


def reliability_rows(c: Comparison) -> list[ReliabilityRow]:
    """Per benchmark and side: attempts, ok, the kernel's failures by outcome, the host's,
    with the stored failure-rate test (STATS.md v2: failure rates are data)."""
    tested = {v.benchmark: v for v in
              MetricVerdict.objects.filter(comparison=c, statistic=FAILURE_STATISTIC)}  # fmt: skip
    rows = []
    for f in failure_counts(c):
        v = tested.get(f.benchmark)
        sides = (_side_failures("A", f.a), _side_failures("B", f.b))
        tested_on = ""
        if v is not None and (v.n_a, v.n_b) != (f.a.attempts, f.b.attempts):
            tested_on = f"tested on {v.n_a} (A) and {v.n_b} (B) attempts, at look {v.look}"
        d = v.details if v is not None else {}
        p_fisher, alpha = d.get("p_fisher"), d.get("alpha", RELIABILITY_ALPHA)
        rows.append(ReliabilityRow(
            f.benchmark, sides, v.p_value if v is not None else None,
            float(p_fisher) if isinstance(p_fisher, float | int) else None,
            float(alpha) if isinstance(alpha, float | int) else RELIABILITY_ALPHA,
            v.verdict if v is not None else "", tested_on,
        ))  # fmt: skip
    return rows
