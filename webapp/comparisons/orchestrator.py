"""The life of a comparison, with the database as its state machine.

queued -> building (both Builds requested; one when both sides are the same revision)
       -> running (runs scheduled in ABBA blocks on the target's queue)
       -> analysing (every side has its runs: the engine's look)
       -> running again (the engine asked for more runs, up to max_runs) ... -> done.

Every event (a build or a run ended, an analysis finished, the periodic kick) calls
`advance(id)`, which takes the comparison's row lock, reads what is stored and does the next
step. It is idempotent, so a duplicate message or a lost one does no harm: the kick re-sends
tasks the broker lost (a Redis restart), and the claim of each step is a conditional UPDATE.
A run that did not end ok is not a measurement, but its outcome is data: the failure
rates are tested (Boschloo) at every look and when a side's failure budget is spent. It is
replaced by a new Run row in a fresh AB/BA pair with a run of the other side while its side
still needs runs for the look. A side that failed more than 60% of >= 12 finished attempts
of a benchmark has spent its budget (stats.failures.budget_spent); then the comparison ends
ok as reliability-regression if B's kernel fails significantly more often than A's, else
failed as runs-failed.

Diagnostic runs (docs/tracing.md; scheduled by diagnostic_runs.py) come after the verdict,
which they never enter: traced runs of the traceable benchmarks (RCUBENCH_DIAGNOSE's
policy, or asked for), on the same kernels, ABBA-interleaved like the others. The
comparison is done meanwhile; the kick re-sends their lost messages and a cancel ends them.
One the host failed (infra, lost) is run again, up to as many replacements per side as the
diagnosis has runs per side; one the kernel failed is not: under tracing, that is the
kernel's answer, and the report names it with how many of each side are usable.

A look's analysis runs once: the task stamps analysis_started_at and counts its try; the
periodic kick sends it again only if it never started (the broker lost it) or started longer
ago than the analysis task's hard time limit (its worker died). An engine error other than
too few runs is tried RCUBENCH_ANALYSIS_TRIES times, then the comparison ends failed as
analysis-failed with the exception's text.
"""

import random
from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from benchmarks.registry import BENCHMARKS, kconfig_for
from stats.failures import BUDGET_MIN_ATTEMPTS, BUDGET_SHARE, budget_spent
from stats.verdicts import RELIABILITY, TooFewRuns
from webapp import access, dispatch, logs
from webapp.access import AnyUser
from webapp.analysis.services import analyse_comparison, analyse_failures, design_for
from webapp.comparisons.diagnostic_runs import (
    HOST_FAILED,
    diagnosed_by_policy,
    replace_host_failed_traced,
    schedule_diagnosis,
)
from webapp.comparisons.models import Comparison, ComparisonState, Run
from webapp.comparisons.schedule import abba_blocks, abba_slots, interleave, replacement_pairs
from webapp.comparisons.steps import add_run
from webapp.states import Result, State, finish_step, log_state
from webapp.trees.models import Build
from webapp.trees.services import request_build

if TYPE_CHECKING:
    from django.db.models import QuerySet

log = logs.get(__name__)
ACTIVE = (
    ComparisonState.QUEUED,
    ComparisonState.BUILDING,
    ComparisonState.RUNNING,
    ComparisonState.ANALYSING,
)


def advance(comparison_id: int) -> None:
    """Do the comparison's next step from what the database holds (idempotent)."""
    with transaction.atomic():
        c = (
            Comparison.objects.select_for_update(of=("self",))
            .select_related("target")
            .get(pk=comparison_id)
        )
        if c.state in (ComparisonState.QUEUED, ComparisonState.BUILDING):
            _advance_builds(c)
        elif c.state == ComparisonState.RUNNING and c.waiting_runs:
            _release_on_commit(c.cohort)  # its look waits for the cohort (a lost release)
        elif c.state == ComparisonState.RUNNING:
            _advance_runs(c)
        elif c.state == ComparisonState.ANALYSING and (why := _analysis_lost(c)):
            log.info("message re-sent", comparison=c.pk, task="analysis", why=why)
            _send_analysis(c)
        elif c.state == ComparisonState.DONE:
            traced = list(c.runs.filter(traced=True))
            traced += replace_host_failed_traced(c, traced)
            _resend_lost_runs(c, traced)


def _advance_builds(c: Comparison) -> None:
    if c.state == ComparisonState.QUEUED:
        # Every benchmark's Kconfig, not just this comparison's: one kernel per sha then
        # serves any comparison, so the build cache hits across them.
        fragments = kconfig_for(BENCHMARKS)
        c.build_a = request_build(c.revision_a, c.target.arch, fragments)
        same = c.revision_b_id == c.revision_a_id
        c.build_b = c.build_a if same else request_build(c.revision_b, c.target.arch, fragments)
        c.started_at = timezone.now()
        _move(c, ComparisonState.BUILDING, ["build_a", "build_b", "started_at"],
              build_a=c.build_a.pk, build_b=c.build_b.pk)  # fmt: skip
    # Both were requested when it left "queued"; read afresh, the build task wrote them.
    rows = Build.objects.select_related("revision").in_bulk([c.build_a_id, c.build_b_id])
    builds = {"A": rows[c.build_a_id], "B": rows[c.build_b_id]}
    failed = [(side, b) for side, b in builds.items() if b.state == State.DONE and
              b.result != Result.OK]  # fmt: skip
    if failed:
        reasons = "; ".join(
            f"side {side} ({b.revision.ref}{' + series' if b.revision.series_id else ''}): "
            f"{b.error_code}: {b.error_message}".strip()
            for side, b in failed
        )
        _finish(c, Result.FAILED, Comparison.Error.BUILD_FAILED, f"build failed: {reasons}")
    elif all(b.result == Result.OK for b in builds.values()):
        _schedule(c, c.min_runs)
    else:
        _resend_lost_builds(list(builds.values()))


def _advance_runs(c: Comparison) -> None:
    runs = list(c.runs.filter(traced=False))
    by_pk = {r.pk: r for r in runs}
    replaced = {r.retry_of_id for r in runs if r.retry_of_id}
    failed = [r for r in runs if r.state == State.DONE and r.result != Result.OK and
              r.pk not in replaced]  # fmt: skip
    if spent := _spent_side(runs):
        _end_on_failures(c, *spent)
        return
    runs += _replace_failed(c, runs, failed, by_pk)
    if any(r.state != State.DONE for r in runs):
        _resend_lost_runs(c, runs)
        return
    ok = Counter((r.benchmark, r.side) for r in runs if r.result == Result.OK)
    if all(ok[b, s] >= c.scheduled_per_side for b in c.benchmarks for s in "AB"):
        c.analysis_tries = 0  # the look's own tries
        _move(c, ComparisonState.ANALYSING, ["analysis_tries"],
              runs_per_side=c.scheduled_per_side)  # fmt: skip
        _send_analysis(c)


def _spent_side(runs: list[Run]) -> tuple[str, str, int, int, Run] | None:
    """The first (benchmark, side) whose failure budget is spent, with its finished
    attempts, failed ones and last failed run; None while every side is within budget.
    Every finished run counts, replaced or not, failed by the kernel or by the host."""
    attempts: Counter[tuple[str, str]] = Counter()
    failures: Counter[tuple[str, str]] = Counter()
    last: dict[tuple[str, str], Run] = {}
    for r in sorted(runs, key=lambda r: r.order):
        if r.state == State.DONE:
            attempts[r.benchmark, r.side] += 1
            if r.result != Result.OK:
                failures[r.benchmark, r.side] += 1
                last[r.benchmark, r.side] = r
    for key in sorted(failures):
        if budget_spent(attempts[key], failures[key]):
            return (*key, attempts[key], failures[key], last[key])
    return None


def _replace_failed(
    c: Comparison, runs: list[Run], failed: list[Run], by_pk: dict[int, Run]
) -> list[Run]:
    """Replace the failed runs a side still needs (its ok and unfinished runs fall short
    of the look's size), each in a fresh AB or BA pair with a run of the other side, never
    appended to one side alone: the failure's side and the other then share the stretch
    of time, as in an ABBA block. A failed extra run of such a pair leaves its side above
    the look's size and is not replaced; its outcome still counts in the failure rates."""
    live = Counter((r.benchmark, r.side) for r in runs
                   if r.state != State.DONE or r.result == Result.OK)  # fmt: skip
    todo: list[Run] = []
    for bench, side in sorted({(r.benchmark, r.side) for r in failed}):
        # The longest chain first: it is a slot of the schedule, not a failed extra run.
        mine = sorted((r for r in failed if (r.benchmark, r.side) == (bench, side)),
                      key=lambda r: (-_depth(r, by_pk), r.order))  # fmt: skip
        todo += mine[: max(c.scheduled_per_side - live[bench, side], 0)]
    if not todo:
        return []
    todo.sort(key=lambda r: r.order)
    rng = random.Random(f"{c.seed}:retry:{todo[0].pk}")  # noqa: S311  (reproducible order)
    added = []
    for pair in replacement_pairs([(r.benchmark, r.side) for r in todo], rng):
        partner = next((todo[i] for _, _, i in pair if i is not None), None)
        for bench, side, i in pair:
            retry_of = None if i is None else todo[i]
            run = add_run(c, bench, side, retry_of=retry_of,
                           pairs_with=None if retry_of else partner)  # fmt: skip
            if retry_of is not None:
                log.info("run replaced", comparison=c.pk, run=retry_of.pk, by=run.pk,
                         attempt=2 + _depth(retry_of, by_pk),
                         error=retry_of.error_code)  # fmt: skip
            added.append(run)
    return added


def _end_on_failures(
    c: Comparison, benchmark: str, side: str, attempts: int, failures: int, last: Run
) -> None:
    """A side spent its failure budget. If B's kernel fails significantly more often than
    A's (Boschloo, the failure rates of every finished run), that is the comparison's
    answer: it ends ok with the verdict reliability-regression, having done its job.
    Otherwise (host failures, which never count in the test, or an excess the test does
    not find) it ends failed as runs-failed."""

    slot = (f"{benchmark} side {side}: {failures} of {attempts} runs failed (the budget: "
            f"more than {BUDGET_SHARE:.0%} of >= {BUDGET_MIN_ATTEMPTS}); "
            f"last: {last.error_code}: {last.error_message}")  # fmt: skip
    results = analyse_failures(c)
    counts = "; ".join(_failure_summary(r.benchmark, r.details, r.p_value) for r in results)
    if any(r.verdict == RELIABILITY for r in results):
        c.verdict = RELIABILITY
        c.save(update_fields=["verdict"])
        _finish(c, Result.OK, "", f"{RELIABILITY}: {counts}. Stopped: {slot}")
    else:
        _finish(c, Result.FAILED, Comparison.Error.RUNS_FAILED,
                f"{slot}. Failure rates (not a significant excess in B): {counts}")  # fmt: skip


def _failure_summary(benchmark: str, details: dict[str, object], p: float) -> str:
    def side(name: str) -> str:
        d = details[name.lower()]
        if not isinstance(d, dict):
            raise TypeError(f"failure counts of side {name}: {d!r}")
        return f"{name} {d['kernel_failures']}/{d['attempts']}"

    return f"{benchmark} kernel failures {side('B')} vs {side('A')}, Boschloo p {p:.2g}"


def conclude_look(comparison_id: int) -> None:
    """The analysis step: run the engine on the counted runs, then extend or finish. Each
    call is one try of the look (counted, stamped as started); an engine error other than
    too few runs leaves the look to the kick's re-send until RCUBENCH_ANALYSIS_TRIES tries
    failed, then ends the comparison analysis-failed with the exception's text."""

    started = _start_analysis(comparison_id)
    if started is None:
        return  # a duplicate message
    tries, look_size = started
    limit = settings.RCUBENCH_ANALYSIS_TRIES
    if tries > limit:  # every try started and none ended: their workers died
        _end_analysis(comparison_id, f"the analysis did not finish in {limit} tries: each "
                      "try's worker stopped before it ended (killed, out of memory, or past "
                      "the task's time limit)")  # fmt: skip
        return
    try:
        analysis = analyse_comparison(comparison_id,
                                      allow_few_runs=settings.RCUBENCH_ALLOW_FEW_RUNS)  # fmt: skip
    except TooFewRuns as exc:
        _end_analysis(comparison_id, str(exc))
        return
    except Exception as exc:  # noqa: BLE001 -- an engine error: tried again, then the comparison ends with it
        why = f"{type(exc).__name__}: {exc}"
        log.warning("analysis failed", comparison=comparison_id, attempt=tries, tries=limit,
                    error=why[:200], exc_info=True)  # fmt: skip
        if tries >= limit:
            _end_analysis(comparison_id, f"the analysis failed {tries} times; last: {why}")
        else:  # not running any more: the kick sends it again
            Comparison.objects.filter(pk=comparison_id).update(analysis_started_at=None)
        return
    with transaction.atomic():
        c = (
            Comparison.objects.select_for_update(of=("self",))
            .select_related("target")
            .get(pk=comparison_id)
        )
        if c.state != ComparisonState.ANALYSING or c.scheduled_per_side != look_size:
            return
        more = min(analysis.need_more_runs, c.max_runs - c.scheduled_per_side)
        log.info("look concluded", comparison=c.pk, runs_per_side=look_size,
                 verdict=analysis.verdict, more_runs=more)  # fmt: skip
        if more > 0:
            _schedule(c, more)
        else:
            _finish(c, Result.OK, "", "")
            if benchmarks := diagnosed_by_policy(c):
                schedule_diagnosis(c, benchmarks, settings.RCUBENCH_DIAGNOSIS_RUNS, "policy")


def extend(comparison_id: int) -> int:
    """Reopen a comparison that ended ok before its maximum runs, for one more look (the
    design's next size): a bisection's step whose CI still holds the midpoint asks for it
    ("extend runs to the maximum"). The engine looks again at a size its design has; a
    verdict decided earlier stays (STATS.md v3), its CI narrows. Returns the runs per side
    added (0: it had ended otherwise, or was at its maximum)."""
    with transaction.atomic():
        c = (
            Comparison.objects.select_for_update(of=("self",))
            .select_related("target")
            .get(pk=comparison_id)
        )
        if c.state != ComparisonState.DONE or c.result != Result.OK or c.verdict == RELIABILITY:
            return 0
        design = design_for(c, allow_few_runs=settings.RCUBENCH_ALLOW_FEW_RUNS)
        later = [n for n in design.looks if n > c.scheduled_per_side]
        if not later:
            return 0
        # State and result in one UPDATE: the database allows a result only when done.
        c.state, c.result, c.finished_at = ComparisonState.RUNNING, Result.NONE, None
        c.save(update_fields=["state", "result", "finished_at"])
        log.info("comparison reopened", comparison=c.pk, runs_per_side=c.scheduled_per_side,
                 to=later[0])  # fmt: skip
        more = later[0] - c.scheduled_per_side
        _schedule(c, more)
        return more


def cancel(comparison_id: int, reason: str = "cancelled") -> bool:
    """End the comparison and its unfinished runs now; False if it had already ended.
    A done comparison's unfinished diagnostic runs are ended instead (True if there were
    any). A worker in the middle of a run sees its run ended at its next poll and destroys
    the VM (workers poll every RCUBENCH_CANCEL_POLL_SECONDS)."""
    with transaction.atomic():
        c = Comparison.objects.select_for_update().get(pk=comparison_id)
        if c.state == ComparisonState.DONE:
            return _cancel_runs(c, c.runs.filter(traced=True), reason[:2000], traced=True) > 0
        _finish(c, Result.INCOMPLETE, Comparison.Error.CANCELLED, reason)
    return True


def _cancel_runs(c: Comparison, runs: "QuerySet[Run]", message: str, **context: object) -> int:
    """End the unfinished ones of `runs` as cancelled, with `message`; how many."""
    unfinished = list(runs.filter(state__in=[State.QUEUED, State.RUNNING]))
    for run in unfinished:
        finish_step(
            run, unfinished=(State.QUEUED, State.RUNNING), result=Result.INCOMPLETE,
            error_code=Run.Error.CANCELLED, error_message=message,
            context={"comparison": c.pk, **context},
        )  # fmt: skip
    return len(unfinished)


def cancel_for(user: AnyUser, pk: int, via: str = "on the web page") -> tuple[Comparison, bool]:
    """Cancel the comparison for `user` (from a page, or the API: `via` says which, in the
    recorded reason): 404 where they may not see it, PermissionDenied where they see it but
    may not cancel it (webapp.access). Returns the comparison and whether this ended it
    (False: it had ended already)."""
    c = access.get_visible(
        access.visible_comparisons(user, Comparison.objects.select_related("revision_a")),
        pk=pk,
    )
    if not access.can_cancel(user, c):
        raise PermissionDenied(
            "only the submitter, the tree's admins and staff may cancel this comparison"
        )
    ended = cancel(c.pk, f"cancelled by {user.get_username()} {via}")
    return c, ended


def artifacts_in_use() -> frozenset[str]:
    """Artifact keys of the builds that unfinished comparisons still boot: the build cache
    never prunes them (the build task passes them to trees.services.execute_build)."""
    # A done comparison with diagnostic runs to go boots its kernels still.
    active = Comparison.objects.filter(
        ~Q(state=ComparisonState.DONE)
        | Q(runs__traced=True, runs__state__in=[State.QUEUED, State.RUNNING])
    )
    used = Build.objects.filter(
        Q(pk__in=active.values("build_a")) | Q(pk__in=active.values("build_b"))
    ).exclude(artifact_key="")
    return frozenset(used.values_list("artifact_key", flat=True))


def on_build_done(build_id: int) -> None:
    """A build ended: advance the comparisons waiting for it."""
    waiting = Comparison.objects.filter(
        Q(build_a_id=build_id) | Q(build_b_id=build_id), state=ComparisonState.BUILDING
    ).values_list("pk", flat=True)
    for pk in waiting:
        advance(pk)


def advance_unfinished() -> int:
    """Advance every unfinished comparison (periodic): recovers lost messages and
    replaces runs the reaper ended. Returns how many were looked at."""
    # A done comparison is looked at while a traced run waits, or one the host failed
    # within the hour has no replacement yet (the run task's own advance replaces it; this
    # is for the reaper's and a lost advance). Older ones were given their chance.
    recent = timezone.now() - timedelta(hours=1)
    diagnosing = Q(runs__traced=True, runs__state=State.QUEUED) | Q(
        runs__traced=True, runs__result=Result.INCOMPLETE, runs__error_code__in=HOST_FAILED,
        runs__finished_at__gte=recent, runs__retried_by__isnull=True,
    )  # fmt: skip
    pks = list(Comparison.objects.filter(Q(state__in=ACTIVE) | diagnosing)
               .values_list("pk", flat=True).distinct())  # fmt: skip
    for pk in pks:
        advance(pk)
    return len(pks)


# --- steps ----------------------------------------------------------------------------


def _schedule(c: Comparison, per_side: int) -> None:
    """Add `per_side` runs of each side for every benchmark, ABBA-interleaved, and send them.
    A cohort's member holds them (`waiting_runs`) until its cohort is ready."""
    if c.cohort:
        c.waiting_runs = per_side
        _move(c, ComparisonState.RUNNING, ["waiting_runs"], cohort=c.cohort,
              waiting_runs=per_side)  # fmt: skip
        _release_on_commit(c.cohort)
        return
    for bench, side in abba_slots(c.benchmarks, per_side, _look_rng(c)):
        add_run(c, bench, side)
    c.scheduled_per_side += per_side
    _move(c, ComparisonState.RUNNING, ["scheduled_per_side"], runs_per_side=c.scheduled_per_side)


def _look_rng(c: Comparison) -> random.Random:
    # Reproducible from the stored seed; a schedule, not a secret.
    return random.Random(f"{c.seed}:{c.scheduled_per_side}")  # noqa: S311


def _release_on_commit(cohort: str) -> None:
    # After this transaction: the release locks every member in pk order, which a
    # transaction that holds one member's lock must not wait for (two members concluding
    # at once would deadlock).
    transaction.on_commit(lambda: release_cohort(cohort))


def release_cohort(cohort: str) -> int:
    """Schedule the next look of every unfinished member of `cohort` as one interleaved
    schedule (schedule.interleave), once each of them waits for it: built, its runs of the
    last look analysed, and asking for more. A member still building, running or analysing
    holds the others; a finished one (decided, failed, cancelled) is left out. Idempotent;
    returns how many runs it added (0: not ready, or nothing waits)."""
    with transaction.atomic():
        members = list(
            Comparison.objects.select_for_update(of=("self",)).select_related("target")
            .filter(cohort=cohort).order_by("pk")
        )  # fmt: skip
        unfinished = [m for m in members if m.state != ComparisonState.DONE]
        if not unfinished or any(m.waiting_runs == 0 for m in unfinished):
            return 0
        blocks = [abba_blocks(m.benchmarks, m.waiting_runs, _look_rng(m)) for m in unfinished]
        rng = random.Random(f"{cohort}:{sum(m.scheduled_per_side for m in members)}")  # noqa: S311
        order = interleave(blocks, rng)
        for i, (bench, side) in order:
            add_run(unfinished[i], bench, side)
        for m in unfinished:
            m.scheduled_per_side += m.waiting_runs
            m.waiting_runs = 0
            _move(m, ComparisonState.RUNNING, ["scheduled_per_side", "waiting_runs"],
                  runs_per_side=m.scheduled_per_side, cohort=cohort)  # fmt: skip
        log.info("cohort released", cohort=cohort, comparisons=[m.pk for m in unfinished],
                 runs=len(order))  # fmt: skip
        return len(order)


def _move(c: Comparison, state: str, also: list[str] | None = None, **fields: object) -> None:
    """The comparison's next state, saved with the fields changed along with it (`also`),
    and its one log line."""
    c.state = state
    c.save(update_fields=["state", *(also or [])])
    log_state(c, state, **fields)


def _depth(run: Run, by_pk: dict[int, Run]) -> int:
    depth = 0
    while run.retry_of_id is not None and run.retry_of_id in by_pk:
        run, depth = by_pk[run.retry_of_id], depth + 1
    return depth


def _finish(c: Comparison, result: str, error_code: str, message: str) -> None:
    # Runs not finished are not data any more (an ok end with some: a reliability stop).
    _cancel_runs(c, c.runs.all(), f"comparison ended: {error_code or c.verdict}")
    finish_step(c, unfinished=ACTIVE, result=result, error_code=error_code, error_message=message)
    dispatch.send_notify(c.pk)  # alert mails, if its verdict asks for any (sent on commit)
    if c.cohort:  # the others no longer wait for it
        _release_on_commit(c.cohort)


def _stale(sent_at: object) -> bool:
    cutoff = timezone.now() - timedelta(seconds=settings.RCUBENCH_REDISPATCH_SECONDS)
    return sent_at is None or sent_at < cutoff  # type: ignore[operator]


def _resend_lost_runs(c: Comparison, runs: list[Run]) -> None:
    """Queued runs whose message is long gone while nothing of the comparison runs: the
    broker lost them. Sending one twice is harmless (the second claim finds it running)."""
    if any(r.state == State.RUNNING for r in runs):
        return
    for run in runs:
        if run.state == State.QUEUED and _stale(run.dispatched_at):
            Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
            log.info("message re-sent", comparison=c.pk, run=run.pk, task="run")
            dispatch.send_run(run.pk, c.target.queue, lab=c.target.is_lab)


def _resend_lost_builds(builds: list[Build]) -> None:
    if Build.objects.filter(state=State.RUNNING).exists():
        return  # the build queue is busy: a queued build may just be waiting its turn
    for build in builds:
        if build.state == State.QUEUED and _stale(build.dispatched_at or build.created_at):
            Build.objects.filter(pk=build.pk).update(dispatched_at=timezone.now())
            log.info("message re-sent", build=build.pk, task="build")
            dispatch.send_build(build.pk)


def _send_analysis(c: Comparison) -> None:
    Comparison.objects.filter(pk=c.pk).update(analysis_sent_at=timezone.now(),
                                              analysis_started_at=None)  # fmt: skip
    dispatch.send_analysis(c.pk)


def _analysis_lost(c: Comparison) -> str:
    """Why the look's analysis task is gone and must be sent again; "" while it may still
    arrive or is running. Not started since it was sent: the broker lost the message
    (after RCUBENCH_REDISPATCH_SECONDS). Started: running until the task's hard time limit;
    past it, its worker died (killed, out of memory) without ending the try."""
    if c.analysis_started_at is None:
        return "not started" if _stale(c.analysis_sent_at) else ""
    limit = timedelta(seconds=settings.RCUBENCH_ANALYSIS_TIME_LIMIT_SECONDS)
    return "worker lost" if c.analysis_started_at < timezone.now() - limit else ""


def _start_analysis(comparison_id: int) -> tuple[int, int] | None:
    """Claim one try of the look's analysis: stamp it started and count it. The try's
    number and the look's runs per side, or None when the comparison is not analysing (a
    duplicate message)."""
    claimed = Comparison.objects.filter(pk=comparison_id, state=ComparisonState.ANALYSING).update(
        analysis_started_at=timezone.now(), analysis_tries=F("analysis_tries") + 1
    )
    if not claimed:
        return None
    tries, look_size = Comparison.objects.values_list("analysis_tries", "scheduled_per_side").get(
        pk=comparison_id
    )
    log.info("analysis started", comparison=comparison_id, attempt=tries, runs_per_side=look_size)
    return tries, look_size


def _end_analysis(comparison_id: int, message: str) -> None:
    """End the comparison failed as analysis-failed, if it is still analysing."""
    with transaction.atomic():
        c = Comparison.objects.select_for_update().get(pk=comparison_id)
        if c.state == ComparisonState.ANALYSING:
            _finish(c, Result.FAILED, Comparison.Error.ANALYSIS_FAILED, message)
