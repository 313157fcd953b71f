"""The comparison page's "Why?" part (docs/tracing.md): what its traced diagnostic runs
found, as the page shows it, from the read model webapp.comparisons.diagnosis: per
benchmark the phase table of A against B, the share line, the stacked phase bars, the FQS
scan histogram, the holdout and perturbation lines and the traced runs with their traces;
and, before any was asked for, the button that asks for them.

It stays outside the cached report body: traced runs come after the verdict, when the body
is cached already, and the button depends on who is looking. Once every traced run has
ended, the section is computed once and kept in the "reports" cache beside the figures,
keyed by the comparison's figures key and its traced runs (how many, the last to finish).
"""

import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Q
from django.http import Http404
from django.utils.safestring import SafeString

from stats.phases import PhaseRow
from webapp import access
from webapp.access import AnyUser
from webapp.comparisons import diagnostic_runs
from webapp.comparisons.diagnosis import (
    STACKED,
    WHOLE,
    BenchmarkDiagnosis,
    TracedRun,
    trace_text,
)
from webapp.comparisons.diagnosis import diagnosis as read_diagnosis
from webapp.comparisons.models import Comparison, ComparisonState, Run
from webapp.comparisons.summary import num_text, p_text
from webapp.plotly import figure_html
from webapp.reports import figures
from webapp.reports.listing import POLL_SECONDS
from webapp.reports.sections import figures_cache_key, through_cache
from webapp.states import Result, State

# Bump whenever what the section shows or how it is drawn changes (cached entries).
DIAGNOSIS_VERSION = 1
ANCHOR = "diagnosis"


@dataclass(frozen=True)
class PhaseLine:
    """A row of the phase table as shown: a phase's per-run medians of A and B, the shift
    B - A with its 95% CI, its Benjamini-Hochberg q and whether it is flagged."""

    phase: str
    label: str
    unit: str  # "%" for a share (its values and shift in percent, percentage points)
    runs: str  # usable runs, A/B
    median_a: str
    median_b: str
    shift: str
    ci: str
    q: str
    flagged: bool


@dataclass(frozen=True)
class RunLine:
    """A traced run in the section's list, its shares as percentages."""

    run: TracedRun
    paired: str
    loss: str


@dataclass(frozen=True)
class BenchmarkSection:
    benchmark: str
    finished: int  # traced runs ended (any result)
    total: int
    usable_a: int
    usable_b: int
    phases: list[PhaseLine]
    no_phases: str  # why the table is empty ("" when it is not)
    share: str  # the share line ("" when there is none)
    no_share: str  # why there is no share line, when a reader would look for one
    holdout: str
    perturbation: list[str]  # one line per side
    runs: list[RunLine]
    figures: list[SafeString]

    @property
    def running(self) -> bool:
        return self.finished < self.total


@dataclass(frozen=True)
class DiagnosisSection:
    per_side: int
    finished: int
    total: int
    benchmarks: list[BenchmarkSection]

    @property
    def running(self) -> bool:
        return self.finished < self.total


@dataclass(frozen=True)
class DiagnosisProgress:
    """The section's status line, polled while traced runs go (the page reloads once
    when they are done, to draw the whole section)."""

    comparison_id: int
    per_side: int
    finished: int
    total: int
    poll_seconds: int = POLL_SECONDS

    @property
    def running(self) -> bool:
        return self.finished < self.total


@dataclass(frozen=True)
class DiagnosisPart:
    """What the comparison page shows under "Why?": the section once traced runs were asked
    for; before, the button (`offer` runs per side) for who may ask; `can_stop`: the
    button that ends unfinished traced runs (the comparison's cancel)."""

    comparison_id: int
    section: DiagnosisSection | None
    offer: int = 0
    can_stop: bool = False

    @property
    def progress(self) -> DiagnosisProgress | None:
        s = self.section
        if s is None:
            return None
        return DiagnosisProgress(self.comparison_id, s.per_side, s.finished, s.total)


# --- who may ask, and asking -------------------------------------------------------------


def traceable(c: Comparison) -> bool:
    """Whether a diagnosis can be asked of `c`: done ok, with a traceable benchmark."""
    if c.state != ComparisonState.DONE or c.result != Result.OK:
        return False
    return bool(diagnostic_runs.traceable_benchmarks(c))


def diagnosis_part(user: AnyUser, c: Comparison) -> DiagnosisPart | None:
    """The page's "Why?" part for `user`; None when there is nothing to show them (no
    diagnosis, and they may not ask for one or there is nothing to trace). `c` needs its
    state, result, benchmarks, diagnosis_per_side, submitter, tree and times."""
    if c.diagnosis_per_side:
        section = cached_section(c)
        stop = section.running and access.can_cancel(user, c)
        return DiagnosisPart(c.pk, section, can_stop=stop)
    if traceable(c) and access.can_cancel(user, c):
        return DiagnosisPart(c.pk, None, offer=settings.RCUBENCH_DIAGNOSIS_RUNS)
    return None


def diagnosis_progress(user: AnyUser, pk: int) -> DiagnosisProgress:
    """How many of a visible comparison's traced runs have ended (404 where it is not
    visible); counts only, so a poll every few seconds costs one query."""
    c = access.get_visible(
        access.visible_comparisons(user, Comparison.objects.only("pk", "diagnosis_per_side")),
        pk=pk,
    )
    agg = _traced_counts(c)
    return DiagnosisProgress(c.pk, c.diagnosis_per_side, agg["n"] - agg["unfinished"], agg["n"])


def request_diagnosis(user: AnyUser, pk: int) -> int:
    """Ask for the comparison's diagnostic runs for `user` (as cancelling it: its
    submitter, the tree's admins and staff): 404 where they may not see it,
    PermissionDenied where they may not ask, diagnostic_runs.DiagnosisRefused when it cannot
    be traced. Returns the runs added."""
    return diagnostic_runs.diagnose_for(user, pk)


def run_trace(user: AnyUser, pk: int) -> str:
    """A visible run's trace in ftrace's text form (trace viewers open it); 404 where the
    run is not visible or has no trace."""
    run = access.get_visible(access.visible_runs(user, Run.objects.only("pk", "trace_log")), pk=pk)
    if not run.trace_log:
        raise Http404(f"run {run.pk} has no trace: only traced diagnostic runs have one")
    return trace_text(run.trace_log)


# --- the section ------------------------------------------------------------------------


def cached_section(c: Comparison) -> DiagnosisSection:
    """diagnosis_section, from the cache once every traced run has ended (while some run,
    it is computed at each request). A cache that fails costs the computing only."""
    agg = _traced_counts(c)
    figures_key = figures_cache_key(c)
    if agg["unfinished"] or figures_key is None:
        return diagnosis_section(c)
    last = agg["last"].isoformat() if agg["last"] else "-"
    key = f"diagnosis:{DIAGNOSIS_VERSION}:{figures_key}:{c.diagnosis_per_side}:{agg['n']}:{last}"
    return through_cache(key, DiagnosisSection, lambda: diagnosis_section(c))


def _traced_counts(c: Comparison) -> dict[str, Any]:
    """The comparison's traced runs in one query: how many (n), how many not ended
    (unfinished) and when the last one ended (last)."""
    return c.runs.filter(traced=True).aggregate(
        n=Count("pk"), unfinished=Count("pk", filter=~Q(state=State.DONE)),
        last=Max("finished_at"),
    )  # fmt: skip


def diagnosis_section(c: Comparison) -> DiagnosisSection:
    """The section as shown, from the read model (an empty one when none was asked for)."""
    d = read_diagnosis(c)
    if d is None:
        return DiagnosisSection(per_side=0, finished=0, total=0, benchmarks=[])
    benches = [_benchmark(b) for b in d.benchmarks]
    return DiagnosisSection(
        per_side=d.per_side, finished=sum(b.finished for b in benches),
        total=sum(b.total for b in benches), benchmarks=benches,
    )  # fmt: skip


def _benchmark(b: BenchmarkDiagnosis) -> BenchmarkSection:
    finished = sum(r.state == State.DONE for r in b.runs)
    rows = [_phase_line(b, r) for r in b.rows]
    whole = next((r for r in b.rows if r.phase == WHOLE), None)
    no_share = ""
    if b.share is None and whole is not None and not whole.flagged:
        no_share = (f"The median {b.label(WHOLE)} did not move beyond chance (not flagged): "
                    "no share of its change is put on a phase.")  # fmt: skip
    return BenchmarkSection(
        benchmark=b.benchmark, finished=finished, total=len(b.runs),
        usable_a=b.usable.get("A", 0), usable_b=b.usable.get("B", 0), phases=rows,
        no_phases="" if rows else _no_phases(b, finished), share=share_line(b),
        no_share=no_share, holdout=holdout_line(b),
        perturbation=perturbation_lines(b), runs=[_run_line(r) for r in b.runs],
        figures=_figures(b),
    )  # fmt: skip


def _run_line(r: TracedRun) -> RunLine:
    def pct(x: float | None, digits: int) -> str:
        return "\u2013" if x is None else f"{100 * x:.{digits}f}%"

    return RunLine(r, pct(r.paired_share, 1), pct(r.loss, 2))


def _no_phases(b: BenchmarkDiagnosis, finished: int) -> str:
    if finished < len(b.runs):
        return "No phase table yet: the traced runs are still running."
    return ("No phase table: too few usable traced runs on a side (each needs a few runs "
            "whose trace lost at most 1%).")  # fmt: skip


def _value(x: float, unit: str) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{100 * x:.1f}" if unit == "share" else num_text(x)


def _signed(x: float, unit: str) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{100 * x:+.1f}" if unit == "share" else f"{x:+.4g}"


def _phase_line(b: BenchmarkDiagnosis, r: PhaseRow) -> PhaseLine:
    unit = b.unit(r.phase)
    return PhaseLine(
        phase=r.phase, label=b.label(r.phase), unit="%" if unit == "share" else unit,
        runs=f"{r.n_a}/{r.n_b}", median_a=_value(r.median_a, unit),
        median_b=_value(r.median_b, unit), shift=_signed(r.shift, unit),
        ci=f"[{_signed(r.low, unit)}, {_signed(r.high, unit)}]", q=p_text(r.q_value),
        flagged=r.flagged,
    )  # fmt: skip


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if math.isfinite(x) else "n/a"


def share_line(b: BenchmarkDiagnosis) -> str:
    """How much of the change in the median grace period the wait before the first FQS
    scan accounts for, with its 95% CI; "" when there is no share (the grace period did
    not move, or too few runs)."""
    s = b.share
    if s is None:
        return ""
    return (f"The {b.label(s.part)} accounts for {_pct(s.estimate)} [{_pct(s.low)}, "
            f"{_pct(s.high)}] of the change in median {b.label(s.whole)} duration (95% CI "
            f"from {s.resamples} resamplings of whole runs).")  # fmt: skip


HOLDOUT = "holdout_kthread_cpu_share"


def holdout_line(b: BenchmarkDiagnosis) -> str:
    """The share of grace periods whose last quiescent-state report came from the CPU the
    grace-period kthread ran on, per side (median over its usable runs); "" without."""
    sides = [f"{side} {_pct(b.medians[side][HOLDOUT])}" for side in ("A", "B")
             if HOLDOUT in b.medians.get(side, {})]  # fmt: skip
    if not sides:
        return ""
    return (f"Grace periods whose last quiescent-state report came from the grace-period "
            f"kthread's own CPU: {', '.join(sides)} (median over each side's usable traced "
            "runs).")  # fmt: skip


def perturbation_lines(b: BenchmarkDiagnosis) -> list[str]:
    """Per side, the primary metric's p50 in traced runs against the verdict's untraced
    runs: what tracing cost the thing it traces."""
    out = []
    for p in b.perturbation:
        if p.traced_p50 is None:
            out.append(f"{p.side}: no traced run has measured {p.metric} yet.")
            continue
        traced = f"{num_text(p.traced_p50)} {p.unit}"
        untraced = "none" if p.untraced_p50 is None else f"{num_text(p.untraced_p50)} {p.unit}"
        change = "" if p.change is None else f", {100 * p.change:+.1f}%"
        out.append(f"{p.side}: {p.metric} p50 traced {traced} against untraced {untraced}"
                   f"{change} (medians of {p.traced_runs} traced and {p.untraced_runs} "
                   "untraced runs' p50).")  # fmt: skip
    return out


def _figures(b: BenchmarkDiagnosis) -> list[SafeString]:
    out = []
    if any(p in side for side in b.medians.values() for p in STACKED):
        fig = figures.phase_bars_figure(
            f"{b.benchmark}: grace-period phases, per-run medians", "ms", b.medians,
            [(p, b.label(p)) for p in STACKED], whole=WHOLE,
        )  # fmt: skip
        out.append(figure_html(fig))
    if any(b.fqs_scans.get(side) for side in ("A", "B")):
        fig = figures.scan_histogram_figure(
            f"{b.benchmark}: grace periods by FQS scans", b.fqs_scans
        )
        out.append(figure_html(fig))
    return out
