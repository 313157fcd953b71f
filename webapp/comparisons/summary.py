"""What a comparison found: its header facts, verdict rows, build status and report URL
(its reliability rows: reliability.py, beside it). The one read model under every reader:
the report pages, the mail, the REST API, the command line and the exports all read a
comparison through it, so they say the same thing (squad's core/comparison.py shape: the
readers sit above it, it imports none of them)."""

import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from django.conf import settings
from django.db.models import Count
from django.urls import reverse

from benchmarks import registry
from benchmarks.spec import BenchmarkSpec
from stats.inputs import TAILS
from stats.verdicts import FAILURE_STATISTIC, INCONCLUSIVE, NO_CHANGE, SEVERITY, contention_differs
from webapp.analysis.models import MetricVerdict
from webapp.comparisons.models import Comparison, ComparisonState, Target
from webapp.comparisons.names import KernelName, kernel_names
from webapp.comparisons.reproducer import public_url
from webapp.lab.models import LabHost
from webapp.states import Result, State
from webapp.trees.models import Build, Revision

STATISTIC_ORDER = ("value", "p50", "mean", "p90", "p99", "max")
UNDECIDED = (INCONCLUSIVE, NO_CHANGE)  # the verdicts of a row that decided nothing
BUILD_LOG_TAIL_LINES = 60


# --- header -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SeriesFacts:
    id: int
    subject: str
    message_id: str
    author: str
    patches: int


@dataclass(frozen=True)
class BuildFacts:
    id: int
    state: str
    result: str
    error_code: str
    error_message: str
    sha: str
    arch: str
    seconds: float | None
    cached: bool
    toolchain: str
    log_tail: str  # the end of the build log, for failed builds only

    @property
    def status(self) -> str:
        return build_status(self)


@dataclass(frozen=True)
class KernelFacts:
    side: str
    tree: str
    ref: str
    base_sha: str
    sha: str
    series: SeriesFacts | None
    patch_fallback: bool  # the submitter allowed git am -3, then patch -F3 (fuzz)
    applied_with: str  # git am, git am -3 or patch -F3, once built
    apply_notes: str
    cmdline: str
    build: BuildFacts | None
    subject: str  # of base_sha's commit ("" until resolved, and in older rows)
    name: KernelName  # as people name it: what titles, rows, mail and the CLI show

    @property
    def build_status(self) -> str:
        return build_status(self.build)


@dataclass(frozen=True)
class SideRuns:
    side: str
    total: int = 0
    ok: int = 0
    failed: int = 0
    incomplete: int = 0
    unfinished: int = 0  # queued or running
    errors: dict[str, int] = field(default_factory=dict)  # error code -> runs
    # The host during the data runs (ok): how many have a record of other processes' CPU
    # share, how many of those were contended, their median share; and how many were pinned.
    measured: int = 0
    contended: int = 0
    median_busy_share: float | None = None
    pinned: int = 0

    @property
    def contended_fraction(self) -> float | None:
        return self.contended / self.measured if self.measured else None

    @property
    def median_busy(self) -> str:
        return "\u2013" if self.median_busy_share is None else f"{self.median_busy_share:.1%}"


@dataclass(frozen=True)
class TargetFacts:
    name: str
    kind: str
    arch: str
    cpus: int
    topology: str
    memory_mb: int
    machine: str


@dataclass(frozen=True)
class Header:
    id: int
    state: str
    result: str
    error_code: str
    error_message: str
    verdict: str
    benchmarks: list[str]
    min_runs: int
    max_runs: int
    alpha: float
    threshold_pct: float
    seed: int
    trigger: str
    requested_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    kernels: tuple[KernelFacts, KernelFacts]
    target: TargetFacts
    runs: tuple[SideRuns, SideRuns]
    contention_warning: str = ""  # contention differs between the sides' data runs
    contention_share: float = 0.0  # RCUBENCH_CONTENTION_SHARE, for the legend
    lab_hosts: tuple[str, ...] = ()  # a lab pool's hosts the runs used, with their topology

    @property
    def done(self) -> bool:
        return self.state == ComparisonState.DONE

    @property
    def ended_badly(self) -> bool:
        return self.done and self.result != Result.OK


def kernels(c: Comparison) -> tuple[KernelFacts, KernelFacts]:
    """Both kernels as the report's kernels table and the running page's live part show
    them (one source: the live part re-renders the table from it on every poll)."""
    name_a, name_b = kernel_names(c)
    return (_kernel("A", c.revision_a, c.build_a, c.cmdline_a, name_a),
            _kernel("B", c.revision_b, c.build_b, c.cmdline_b, name_b))  # fmt: skip


def header(c: Comparison) -> Header:
    runs = run_counts(c)
    return Header(
        id=c.pk, state=c.state, result=c.result, error_code=c.error_code,
        error_message=c.error_message, verdict=c.verdict, benchmarks=list(c.benchmarks),
        min_runs=c.min_runs, max_runs=c.max_runs, alpha=c.alpha,
        threshold_pct=c.threshold_pct, seed=c.seed, trigger=c.trigger,
        requested_by=requested_by(c), created_at=c.created_at, started_at=c.started_at,
        finished_at=c.finished_at,
        kernels=kernels(c), target=_target(c.target), runs=runs,
        contention_warning=contention_warning(*runs, settings.RCUBENCH_CONTENTION_IMBALANCE),
        contention_share=settings.RCUBENCH_CONTENTION_SHARE,
        lab_hosts=_lab_hosts(c) if c.target.is_lab else (),
    )  # fmt: skip


def requested_by(c: Comparison) -> str:
    """Who asked, as reports, mail and exports show it: the submitting account's user name
    where there is one (older web submissions stored its e-mail address in requested_by,
    which must not be published), else what the submitter stored (cli, a push)."""
    if c.submitted_by_id is not None:
        return c.submitted_by.get_username() if c.submitted_by else ""
    return c.requested_by


def _lab_hosts(c: Comparison) -> tuple[str, ...]:
    """The lab hosts the comparison's runs ran on: which machines A and B were measured on."""
    names = c.runs.exclude(host="").values("host")
    return tuple(f"{h.name}: {h.topology}" for h in LabHost.objects.filter(name__in=names))


def _kernel(
    side: str, rev: Revision, build: Build | None, cmdline: str, name: KernelName
) -> KernelFacts:
    series = None
    if rev.series is not None:
        s = rev.series
        series = SeriesFacts(s.pk, s.subject, s.message_id, s.author, s.patches.count())
    return KernelFacts(
        side=side, tree=rev.tree.name, ref=rev.ref, base_sha=rev.base_sha, sha=rev.sha,
        series=series, patch_fallback=rev.patch_fallback, applied_with=rev.applied_with,
        apply_notes=rev.apply_notes, cmdline=cmdline,
        build=_build(build) if build is not None else None, subject=rev.subject, name=name,
    )  # fmt: skip


def _build(b: Build) -> BuildFacts:
    failed = b.state == State.DONE and b.result != Result.OK
    tail = "\n".join(b.log.splitlines()[-BUILD_LOG_TAIL_LINES:]) if failed else ""
    return BuildFacts(
        id=b.pk, state=b.state, result=b.result, error_code=b.error_code,
        error_message=b.error_message, sha=b.sha, arch=b.arch, seconds=b.seconds,
        cached=b.cached, toolchain=b.toolchain, log_tail=tail,
    )  # fmt: skip


def _target(t: Target) -> TargetFacts:
    return TargetFacts(
        name=t.name, kind=t.kind, arch=t.arch, cpus=t.cpus,
        topology=f"{t.sockets} sockets x {t.cores} cores x {t.threads} threads",
        memory_mb=t.memory_mb, machine=t.machine,
    )  # fmt: skip


def run_counts(c: Comparison) -> tuple[SideRuns, SideRuns]:
    """Runs per side by outcome, with the error codes of those that are not data."""
    counts: dict[str, Counter[str]] = {"A": Counter(), "B": Counter()}
    errors: dict[str, Counter[str]] = {"A": Counter(), "B": Counter()}
    rows = (c.runs.filter(traced=False).values("side", "state", "result", "error_code")
            .annotate(n=Count("pk")))  # fmt: skip
    for row in rows.order_by():
        side, n = row["side"], row["n"]
        counts[side]["total"] += n
        if row["state"] != State.DONE:
            counts[side]["unfinished"] += n
        else:
            counts[side][row["result"]] += n
        if row["error_code"]:
            errors[side][row["error_code"]] += n

    shares: dict[str, list[float]] = {"A": [], "B": []}
    contended: Counter[str] = Counter()
    pinned: Counter[str] = Counter()
    data = c.runs.filter(state=State.DONE, result=Result.OK, traced=False)
    for side, share, flagged, pin in data.values_list(
        "side", "host_busy_share", "contended", "pinned"
    ).order_by():
        if share is not None:
            shares[side].append(share)
            contended[side] += bool(flagged)
        pinned[side] += bool(pin)

    def side_runs(side: str) -> SideRuns:
        n = counts[side]
        return SideRuns(
            side, total=n["total"], ok=n[Result.OK], failed=n[Result.FAILED],
            incomplete=n[Result.INCOMPLETE], unfinished=n["unfinished"],
            errors=dict(sorted(errors[side].items())), measured=len(shares[side]),
            contended=contended[side], pinned=pinned[side],
            median_busy_share=statistics.median(shares[side]) if shares[side] else None,
        )  # fmt: skip

    return side_runs("A"), side_runs("B")


def contention_warning(a: SideRuns, b: SideRuns, imbalance: float) -> str:
    """A warning when the share of contended data runs differs between the sides by more
    than `imbalance`: the host, not the kernel, may then explain a shift (v2 spec: such a
    difference holds regression/improvement verdicts until more quiet runs are in; that
    rule is the analysis engine's, this is what the report says)."""
    if not contention_differs((a.contended, a.measured), (b.contended, b.measured), imbalance):
        return ""
    return (
        f"Host contention differs between the sides: {a.contended} of A's {a.measured} "
        f"and {b.contended} of B's {b.measured} measured data runs were contended (other "
        f"processes used more than {settings.RCUBENCH_CONTENTION_SHARE:.0%} of the host's "
        f"CPU time), more than {imbalance:.0%} apart. A shift between A and B may come from "
        f"the host rather than the kernel; a regression or improvement needs more quiet runs."
    )


# --- verdicts -------------------------------------------------------------------------


@dataclass(frozen=True)
class VerdictRow:
    verdict: MetricVerdict
    unit: str
    relative: bool  # False: memory metrics, tested on the absolute shift B - A in the unit

    @property
    def median_a(self) -> str:
        return num_text(self.verdict.median_a)

    @property
    def median_b(self) -> str:
        return num_text(self.verdict.median_b)

    @property
    def shift(self) -> str:
        v = self.verdict
        return "n/a" if v.shift_pct is None else f"{v.shift_pct:+.2f}%"

    @property
    def pooled(self) -> bool:
        """A tail statistic: A and B are quantiles of all samples pooled, not per-run."""
        return self.verdict.statistic in TAILS

    @property
    def levels_label(self) -> str:
        """What the A and B columns hold: the median over runs of each run's value, or
        for tails the quantile of all samples pooled."""
        if self.pooled:
            return f"{self.verdict.statistic} of all samples pooled"
        return f"median of {self._per_run}"

    @property
    def shift_label(self) -> str:
        """What the shift is a shift of (STATS.md: the Hodges-Lehmann shift of the
        run-level values, % from logs or B - A for memory; tails: the pooled ratio)."""
        if self.pooled:
            return f"pooled {self.verdict.statistic} ratio B/A - 1"
        return f"HL shift of {self._per_run}" + ("" if self.relative else ", B - A")

    @property
    def _per_run(self) -> str:
        """The run-level values the row compares: "per-run values", "per-run p90s"."""
        return f"per-run {self.verdict.statistic}s"  # "value" too: per-run values

    @property
    def decided(self) -> bool:
        """Whether the row decided anything (not inconclusive, not "no meaningful change")."""
        return self.verdict.verdict not in UNDECIDED

    @property
    def ci(self) -> str:
        v = self.verdict
        if v.ci_low_pct is None or v.ci_high_pct is None:
            return ""
        return f"[{v.ci_low_pct:+.2f}, {v.ci_high_pct:+.2f}]"

    @property
    def absolute_shift(self) -> str:
        """B - A in the unit with its CI, for metrics whose threshold is absolute."""
        d = self.verdict.details
        shift, ci = d.get("shift"), d.get("ci")
        if self.relative or not isinstance(shift, int | float):
            return ""
        text = f"{shift:+.6g} {self.unit}"
        if isinstance(ci, list) and len(ci) == 2:
            text += f" [{ci[0]:+.6g}, {ci[1]:+.6g}]"
        return text

    @property
    def p_value(self) -> str:
        return p_text(self.verdict.p_value)

    @property
    def p_adjusted(self) -> str:
        return p_text(self.verdict.p_adjusted)

    @property
    def adjustment(self) -> str:
        """The family, and the look's boundary the row was held to (Holm: the raw p
        against its step's boundary; BH: the adjusted p against the look's)."""
        d = self.verdict.details
        family, boundary = str(d.get("adjustment", "")), d.get("boundary")
        if family and isinstance(boundary, float | int):
            return f"{family}, boundary {boundary:.2g}"
        return family

    @property
    def p_method(self) -> str:
        """How the primary p was obtained: exact, permutation or t-approximation ("" for
        verdicts stored before the engine recorded it)."""
        return str(self.verdict.details.get("p_method") or "")

    @property
    def p_permutations(self) -> int | None:
        b = self.verdict.details.get("p_permutations")
        return b if isinstance(b, int) else None

    @property
    def p_marker(self) -> str:
        """The short mark beside p that P_MARKERS explains."""
        return P_MARKERS.get(self.p_method, ("", ""))[0]

    @property
    def p_method_text(self) -> str:
        """The marker's meaning for this row (a tooltip), with the permutation count."""
        mark, text = P_MARKERS.get(self.p_method, ("", ""))
        return text.format(b=f"{self.p_permutations or 0:,}") if mark else ""

    @property
    def sign_test(self) -> str:
        """McKenney's count: "k/n B runs above A's median, p=..." (run-level rows only)."""
        s = self.verdict.details.get("sign_test")
        if not isinstance(s, dict):
            return ""
        if s.get("p") is None:
            return "sign test undefined"
        ties = int(s.get("ties") or 0)
        left_out = f" ({ties} tie{'s' if ties != 1 else ''} left out)" if ties else ""
        return f"{s['k']}/{s['n']} B runs above A's median{left_out}, p={p_text(s['p'])}"

    @property
    def sign_direction(self) -> str:
        """Which way "above A's median" points for this metric."""
        s = self.verdict.details.get("sign_test")
        return f"above is {s['above_is']}" if isinstance(s, dict) and "above_is" in s else ""

    @property
    def mood(self) -> str:
        """Mood's median test p, or why it has none (run-level rows only)."""
        if not isinstance(self.verdict.details.get("sign_test"), dict):
            return ""
        p = self.verdict.p_median
        return "Mood undefined" if p is None else f"Mood p={p_text(p)}"

    @property
    def cross_checks(self) -> str:
        """The sign test and Mood's test on one line (the CLI's column)."""
        if not self.sign_test:
            return ""
        return f"{self.sign_test} ({self.sign_direction}); {self.mood}"


# The mark beside each primary-test p and what it means, in the report's order (STATS.md
# v2: a p below 1/(B+1) is exact or marked approximate).
P_MARKERS = {
    "permutation": ("P", "permutation p from {b} random relabellings of whole runs (raised "
                         "where the look's boundary needed it), never below 1/(B + 1)"),
    # Only in verdicts stored before the v2 rules, which no longer produce it.
    "t-approximation": ("≈", "far-tail approximation: none of {b} relabellings was as extreme, "
                             "so p is Brunner-Munzel's t approximation, below what the "
                             "permutations resolve"),
    "exact": ("E", "exact: every relabelling of the runs is as extreme (W = 0, p = 1), or "
                   "the runs are completely separated (only that split and its mirror: "
                   "p = 2 / C(n_A + n_B, n_A))"),
}  # fmt: skip


def p_method_legend(rows: list[VerdictRow]) -> str:
    """One line explaining the marks the rows carry, with their permutation counts."""
    b = " or ".join(f"{n:,}" for n in sorted({r.p_permutations for r in rows
                                               if r.p_permutations})) or "B"  # fmt: skip
    used = {r.p_method for r in rows}
    return "; ".join(f"{mark} {text.format(b=b)}" for method, (mark, text) in P_MARKERS.items()
                     if method in used)  # fmt: skip


def verdict_rows(c: Comparison) -> list[VerdictRow]:
    """The metrics' verdicts: the primary metrics first, then the others, each group the
    most severe first (the engine's severity order), then by benchmark, metric and
    statistic. The failure-rate rows are in reliability_rows."""
    rows = []
    for v in MetricVerdict.objects.filter(comparison=c).exclude(statistic=FAILURE_STATISTIC):
        rows.append(VerdictRow(v, verdict_unit(v), bool(v.details.get("relative", True))))
    rows.sort(key=lambda r: verdict_order(r.verdict))
    return rows


def verdict_order(v: MetricVerdict) -> tuple[bool, int, str, str, int]:
    """The report's order of verdicts: primary first, the most severe first, then
    benchmark, metric and statistic."""
    severity = SEVERITY.index(v.verdict) if v.verdict in SEVERITY else len(SEVERITY)
    stat = (STATISTIC_ORDER.index(v.statistic) if v.statistic in STATISTIC_ORDER
            else len(STATISTIC_ORDER))  # fmt: skip
    return not v.is_primary, severity, v.benchmark, v.metric, stat


def spec_for(benchmark: str) -> BenchmarkSpec | None:
    # Through the registry module at each call: a benchmark registered later is found too.
    b = registry.find(benchmark)
    return b.spec if b else None


def verdict_unit(v: MetricVerdict) -> str:
    """The verdict's unit: as the engine recorded it, else as the benchmark's spec says."""
    return str((v.details or {}).get("unit") or _spec_unit(v.benchmark, v.metric))


def _spec_unit(benchmark: str, metric: str) -> str:
    spec = spec_for(benchmark)
    try:
        return spec.metric(metric).unit if spec else ""
    except KeyError:
        return ""


def num_text(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:.0f}" if abs(x) >= 1e5 else f"{x:.5g}"


def p_text(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.3g}"


# --- builds -------------------------------------------------------------------------


class _BuildState(Protocol):
    """What a build's status line reads: a Build row or the report's BuildFacts."""

    @property
    def state(self) -> str: ...
    @property
    def result(self) -> str: ...
    @property
    def cached(self) -> bool: ...
    @property
    def error_code(self) -> str: ...


def build_status(b: _BuildState | None) -> str:
    """A build's state, or how it ended (without reading its log)."""
    if b is None:
        return "not started"
    if b.state != State.DONE:
        return b.state
    text = b.result + (" (cached)" if b.cached else "")
    return f"{text}: {b.error_code}" if b.error_code else text


# --- links ----------------------------------------------------------------------------


def report_url(c: Comparison) -> str:
    return public_url() + reverse("reports:comparison", args=[c.pk])
