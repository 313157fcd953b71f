"""What a comparison's diagnostic runs found (docs/tracing.md): the read model under the
report's "Why?" section, the REST API and the mail's link, beside summary.py's verdicts.

Per traceable benchmark: the traced runs and whether each trace is usable (at most 1% of
its events or grace periods lost, benchmarks.rcutrace.parser), the phase table of A vs B
(stats.phases.compare over the usable runs' values), the share of the change in median
grace-period duration the wait before the first FQS scan accounts for (only when that
change is flagged), the FQS scan counts of every traced grace period, each phase's
run-level median per side (the stacked bars), and the perturbation line: the primary
metric's p50 in traced runs against the verdict's untraced runs, per side. None of it
enters a verdict.
"""

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from benchmarks import registry
from benchmarks.rcutrace.parser import text
from stats.phases import PhaseRow, Share, compare, share
from webapp.comparisons.models import Comparison, Measurement, Run
from webapp.states import Result, State

# The run-level values of a trace (benchmarks.rcutrace.parser.summary): label and unit.
PHASES: dict[str, tuple[str, str]] = {
    "gp_duration": ("grace period", "ms"),
    "gp_init": ("init", "ms"),
    "gp_first_fqs_wait": ("wait before the first FQS scan", "ms"),
    "gp_after_first_fqs": ("first FQS scan to end", "ms"),
    "fqs_scans": ("FQS scans per grace period (mean)", "scans"),
    "holdout_kthread_cpu_share": ("last report from the GP kthread's CPU", "share"),
    "callbacks_per_batch": ("callbacks per batch", "callbacks"),
    "exp_gp_duration": ("expedited grace period", "ms"),
}
# The three phases that add up to a grace period, in the order of the stacked bars.
STACKED = ("gp_init", "gp_first_fqs_wait", "gp_after_first_fqs")
WHOLE, PART = "gp_duration", "gp_first_fqs_wait"


@dataclass(frozen=True)
class TracedRun:
    id: int
    side: str
    index: int
    state: str
    result: str
    error_code: str
    traced: bool  # the run's console held a dump with events
    usable: bool
    paired_share: float | None
    loss: float | None
    events: int | None
    lost_events: int | None
    grace_periods: int | None  # in the benchmark's window
    why_not: str  # why the run gives no phase values ("" when it does)


@dataclass(frozen=True)
class Perturbation:
    metric: str
    unit: str
    side: str
    traced_p50: float | None  # median over traced ok runs of the run's p50
    untraced_p50: float | None  # the same over the verdict's counted runs
    traced_runs: int
    untraced_runs: int

    @property
    def change(self) -> float | None:
        """traced / untraced - 1: how much tracing moved the primary."""
        if self.traced_p50 is None or not self.untraced_p50:
            return None
        return self.traced_p50 / self.untraced_p50 - 1


@dataclass(frozen=True)
class BenchmarkDiagnosis:
    benchmark: str
    runs: tuple[TracedRun, ...]
    usable: dict[str, int]  # side -> usable traced runs
    rows: tuple[PhaseRow, ...]
    share: Share | None  # PART's share of WHOLE's change; None unless WHOLE is flagged
    fqs_scans: dict[str, dict[int, int]]  # side -> scans per grace period -> grace periods
    medians: dict[str, dict[str, float]]  # side -> phase -> median over usable runs
    perturbation: tuple[Perturbation, ...]

    def label(self, phase: str) -> str:
        return PHASES.get(phase, (phase, ""))[0]

    def unit(self, phase: str) -> str:
        return PHASES.get(phase, ("", ""))[1]


@dataclass(frozen=True)
class Diagnosis:
    per_side: int
    unfinished: int  # traced runs queued or running
    benchmarks: tuple[BenchmarkDiagnosis, ...]

    @property
    def running(self) -> bool:
        return self.unfinished > 0


def diagnosis(c: Comparison) -> Diagnosis | None:
    """The comparison's diagnosis; None when none was asked for."""
    if not c.diagnosis_per_side:
        return None
    runs = list(
        c.runs.filter(traced=True)
        .only("pk", "benchmark", "side", "index", "state", "result", "error_code",
              "trace_summary", "retry_of_id")
        .order_by("order")
    )  # fmt: skip
    unfinished = sum(r.state != State.DONE for r in runs)
    names = list(dict.fromkeys(r.benchmark for r in runs))
    return Diagnosis(
        per_side=c.diagnosis_per_side, unfinished=unfinished,
        benchmarks=tuple(_benchmark(c, name, [r for r in runs if r.benchmark == name])
                         for name in names),
    )  # fmt: skip


def _benchmark(c: Comparison, name: str, runs: list[Run]) -> BenchmarkDiagnosis:
    again = {r.retry_of_id: r.pk for r in runs if r.retry_of_id}
    traced = [_traced_run(r, again.get(r.pk)) for r in runs]
    values: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    scans: dict[str, Counter[int]] = {"A": Counter(), "B": Counter()}
    for run, facts in zip(runs, traced, strict=True):
        if facts.usable:
            digest: dict[str, Any] = run.trace_summary or {}
            values[run.side].append(digest.get("summary") or {})
            for k, n in (digest.get("fqs_scans") or {}).items():
                scans[run.side][int(k)] += int(n)
    rows = compare(values["A"], values["B"], phases=[p for p in PHASES if _has(values, p)])
    whole = next((r for r in rows if r.phase == WHOLE), None)
    part = share(values["A"], values["B"], PART, WHOLE) if whole and whole.flagged else None
    medians = {
        side: {p: statistics.median(v[p] for v in vs if p in v) for p in PHASES
               if any(p in v for v in vs)}
        for side, vs in values.items()
    }  # fmt: skip
    return BenchmarkDiagnosis(
        benchmark=name, runs=tuple(traced), usable={s: len(v) for s, v in values.items()},
        rows=tuple(rows), share=part, fqs_scans={s: dict(sorted(n.items())) for s, n in
                                                 scans.items()},
        medians=medians, perturbation=_perturbation(c, name),
    )  # fmt: skip


def _has(values: dict[str, list[dict[str, float]]], phase: str) -> bool:
    return any(phase in v for vs in values.values() for v in vs)


def _traced_run(r: Run, replaced_by: int | None = None) -> TracedRun:
    d: dict[str, Any] = r.trace_summary or {}
    ok = r.state == State.DONE and r.result == Result.OK
    if not ok:
        why = "not finished" if r.state != State.DONE else f"the run {r.result}: {r.error_code}"
        if replaced_by is not None:
            why += f", run again as run {replaced_by}"
    elif not d:
        why = "its console held no trace dump with RCU events"
    elif "error" in d:
        why = f"its trace did not parse: {d['error']}"
    elif not d.get("usable"):
        why = (f"its trace lost {d.get('loss', 1.0):.1%} of its events or grace periods "
               "(more than 1%)")  # fmt: skip
    else:
        why = ""
    return TracedRun(
        id=r.pk, side=r.side, index=r.index, state=r.state, result=r.result,
        error_code=r.error_code, traced=bool(d), usable=not why,
        paired_share=d.get("paired_share"), loss=d.get("loss"), events=d.get("events"),
        lost_events=d.get("lost_events"), grace_periods=d.get("window"), why_not=why,
    )  # fmt: skip


def trace_text(dump: str) -> str:
    """A traced run's dump (Run.trace_log) in ftrace's text form, for download: trace
    viewers such as Perfetto open it (benchmarks.rcutrace.parser.text)."""
    return text(dump)


def _perturbation(c: Comparison, benchmark: str) -> tuple[Perturbation, ...]:
    """The primary's p50, traced against untraced, per side."""
    primary = registry.get(benchmark).spec.primary
    rows = Measurement.objects.filter(
        run__comparison=c, run__state=State.DONE, run__result=Result.OK, benchmark=benchmark,
        metric=primary.name,
    ).values_list("run__side", "run__traced", "samples")  # fmt: skip
    p50s: dict[tuple[str, bool], list[float]] = {}
    for side, traced, samples in rows:
        p50s.setdefault((side, traced), []).append(statistics.median(samples))

    def med(key: tuple[str, bool]) -> float | None:
        return statistics.median(p50s[key]) if p50s.get(key) else None

    return tuple(
        Perturbation(
            metric=primary.name,
            unit=primary.unit,
            side=side,
            traced_p50=med((side, True)),
            untraced_p50=med((side, False)),
            traced_runs=len(p50s.get((side, True), [])),
            untraced_runs=len(p50s.get((side, False), [])),
        )
        for side in "AB"
    )
