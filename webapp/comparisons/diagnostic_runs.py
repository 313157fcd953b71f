"""Diagnostic runs (docs/tracing.md): traced runs of a comparison's traceable benchmarks,
after its verdict, which they never enter. Scheduled by RCUBENCH_DIAGNOSE's policy when a
look concludes (orchestrator.conclude_look) or asked for (`diagnose`: the report's button,
the API); one the host failed is run again within the diagnosis's budget (the orchestrator's
advance calls replace_host_failed_traced)."""

import random
from collections import Counter

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from benchmarks.registry import find
from stats.verdicts import IMPROVEMENT, REGRESSION
from webapp import access, logs
from webapp.access import AnyUser
from webapp.comparisons.models import PART_TRIGGERS, Comparison, ComparisonState, Run
from webapp.comparisons.schedule import abba_slots
from webapp.comparisons.steps import add_run
from webapp.states import Result

log = logs.get(__name__)


class DiagnosisRefused(ValueError):
    """Diagnostic runs cannot be asked for: the message says why."""


def diagnose(comparison_id: int, per_side: int | None = None, *, by: str = "") -> int:
    """Schedule `per_side` (RCUBENCH_DIAGNOSIS_RUNS) traced diagnostic runs per side of
    each traceable benchmark of a comparison that ended ok; asked for from the report or
    the API (`by`: who, for the log line). Returns the runs added. DiagnosisRefused names
    what stands in the way: not done, failed, no traceable benchmark, one already asked."""
    per_side = settings.RCUBENCH_DIAGNOSIS_RUNS if per_side is None else per_side
    most = settings.RCUBENCH_MAX_RUNS_PER_SIDE
    if not 1 <= per_side <= most:
        raise DiagnosisRefused(f"diagnostic runs per side must be 1 to {most}, not {per_side}")
    with transaction.atomic():
        c = (
            Comparison.objects.select_for_update(of=("self",))
            .select_related("target")
            .get(pk=comparison_id)
        )
        if c.state != ComparisonState.DONE or c.result != Result.OK:
            raise DiagnosisRefused(f"comparison {c.pk} has not ended ok ({c.state}"
                                   f"{', ' + c.result if c.result else ''}): diagnostic runs "
                                   "trace the kernels of a verdict")  # fmt: skip
        if c.diagnosis_per_side:
            raise DiagnosisRefused(f"comparison {c.pk} has its diagnostic runs already "
                                   f"({c.diagnosis_per_side} per side)")  # fmt: skip
        traceable = traceable_benchmarks(c)
        if not traceable:
            raise DiagnosisRefused(f"none of comparison {c.pk}'s benchmarks "
                                   f"({', '.join(c.benchmarks)}) can be traced: only "
                                   "rcuscale's dump its RCU trace")  # fmt: skip
        return schedule_diagnosis(c, traceable, per_side, by or "request")


def diagnose_for(
    user: AnyUser, pk: int, per_side: int | None = None, via: str = "on the web page"
) -> int:
    """Ask for the comparison's diagnostic runs for `user`, who may where they may cancel
    it (access.can_cancel; the report's button and the API): 404 where they may not see
    it, PermissionDenied where they see it but may not ask, DiagnosisRefused where it
    cannot be traced. Returns the runs added."""
    c = access.get_visible(
        access.visible_comparisons(user, Comparison.objects.select_related("revision_a")),
        pk=pk,
    )
    if not access.can_cancel(user, c):
        raise PermissionDenied("only the submitter, the tree's admins and staff may ask for "
                               "diagnostic runs of this comparison")  # fmt: skip
    return diagnose(c.pk, per_side, by=f"{user.get_username()} {via}")


def traceable_benchmarks(c: Comparison) -> list[str]:
    """The comparison's benchmarks that a diagnosis traces (rcuscale's: spec.traceable);
    one no longer registered is not among them."""
    return [b for b in c.benchmarks
            if (found := find(b)) is not None and found.spec.traceable]  # fmt: skip


def diagnosed_by_policy(c: Comparison) -> list[str]:
    """The traceable benchmarks RCUBENCH_DIAGNOSE traces after this verdict (none for a
    bisection's step: it is a step, and its bisection's attribution is the diagnosis)."""
    policy = settings.RCUBENCH_DIAGNOSE
    if policy == "never" or c.trigger in PART_TRIGGERS:
        return []
    traceable = traceable_benchmarks(c)
    if policy == "all":
        return traceable
    changed = set(c.verdicts.filter(verdict__in=(REGRESSION, IMPROVEMENT))
                  .values_list("benchmark", flat=True))  # fmt: skip
    return [b for b in traceable if b in changed]


def schedule_diagnosis(c: Comparison, benchmarks: list[str], per_side: int, by: str) -> int:
    rng = random.Random(f"{c.seed}:diagnosis")  # noqa: S311  (reproducible order)
    slots = abba_slots(benchmarks, per_side, rng)
    c.diagnosis_per_side = per_side
    c.save(update_fields=["diagnosis_per_side"])
    log.info("diagnosis scheduled", comparison=c.pk, benchmarks=benchmarks,
             runs_per_side=per_side, by=by)  # fmt: skip
    for bench, side in slots:
        add_run(c, bench, side, traced=True)
    return len(slots)


# The host's failures of a traced run, which a replacement can mend; a cancel is not one.
HOST_FAILED = (Run.Error.INFRA, Run.Error.LOST)


def replace_host_failed_traced(c: Comparison, traced: list[Run]) -> list[Run]:
    """Run again, on the same side, each traced run the host failed, while the side's
    replacements stay within the diagnosis's runs per side (a host that fails every time
    must not loop). Returns the runs added."""
    replaced = {r.retry_of_id for r in traced if r.retry_of_id}
    spent = Counter((r.benchmark, r.side) for r in traced if r.retry_of_id)
    added = []
    for run in sorted(traced, key=lambda r: r.order):
        if (run.result != Result.INCOMPLETE or run.error_code not in HOST_FAILED
                or run.pk in replaced):  # fmt: skip
            continue
        if spent[run.benchmark, run.side] >= c.diagnosis_per_side:
            continue
        spent[run.benchmark, run.side] += 1
        again = add_run(c, run.benchmark, run.side, retry_of=run, traced=True)
        log.info("run replaced", comparison=c.pk, run=run.pk, by=again.pk, traced=True,
                 error=run.error_code)  # fmt: skip
        added.append(again)
    return added
