"""The life of a comparison, with the database as its state machine.

queued -> building (both Builds requested; one when both sides are the same revision)
       -> running (runs scheduled in ABBA blocks on the target's queue)
       -> analysing (every side has its runs: the engine's look)
       -> running again (the engine asked for more runs, up to max_runs) ... -> done.

Every event (a build or a run ended, an analysis finished, the periodic kick) calls
`advance(id)`, which takes the comparison's row lock, reads what is stored and does the next
step. It is idempotent, so a duplicate message or a lost one does no harm: the kick re-sends
tasks the broker lost (a Redis restart), and the claim of each step is a conditional UPDATE.
A run that did not end ok is never data: it is replaced by a new Run row, up to
RCUBENCH_RUN_ATTEMPTS per slot, after which the comparison ends as failed with the reason.
"""

import math
import random
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from benchmarks.cmdline import CmdlineError, check_extra
from benchmarks.registry import BENCHMARKS, kconfig_for
from benchmarks.registry import get as get_benchmark
from webapp.comparisons.models import Comparison, ComparisonState, Run, Target
from webapp.comparisons.schedule import abba_slots
from webapp.states import Result, State
from webapp.trees.models import Build, PatchSeries, Revision, Tree
from webapp.trees.services import SubmissionError, request_build
from workers.build.git import BadRefError, validate_rev

ACTIVE = (
    ComparisonState.QUEUED,
    ComparisonState.BUILDING,
    ComparisonState.RUNNING,
    ComparisonState.ANALYSING,
)
MIN_RUNS = 24  # STATS.md: fewer runs per side are refused
_CMDLINE_MAX = 1024


@dataclass(frozen=True)
class Request:
    """What a user asks for, from any front end (CLI, form, API, webhook)."""

    tree: Tree
    base_ref: str
    benchmarks: tuple[str, ...]
    target: Target
    head_ref: str = ""  # empty with a series: the series goes on base_ref
    series: PatchSeries | None = None
    cmdline_a: str = ""
    cmdline_b: str = ""
    min_runs: int = MIN_RUNS
    max_runs: int = 96
    alpha: float = 0.05
    threshold_pct: float = 2.0
    trigger: str = Comparison.Trigger.CLI
    requested_by: str = ""
    # If the series does not apply with plain `git am`: `git am -3`, then `patch -F3`. It
    # may then apply, with offsets or fuzz, to a base it was not written against.
    patch_fallback: bool = False


def submit(req: Request) -> Comparison:
    """Validate `req`, store the comparison and start it. Bad input raises SubmissionError
    naming the problem, and nothing is stored."""
    _validate(req)
    with transaction.atomic():
        rev_a = Revision.objects.create(tree=req.tree, ref=req.base_ref)
        head = req.head_ref or req.base_ref
        if head == req.base_ref and req.series is None:
            rev_b = rev_a  # A/A or a boot-parameter A/B: one build serves both sides
        else:
            rev_b = Revision.objects.create(
                tree=req.tree, ref=head, series=req.series, patch_fallback=req.patch_fallback
            )
        comparison = Comparison.objects.create(
            revision_a=rev_a, revision_b=rev_b, cmdline_a=req.cmdline_a.strip(),
            cmdline_b=req.cmdline_b.strip(), benchmarks=list(req.benchmarks),
            target=req.target, min_runs=req.min_runs, max_runs=req.max_runs, alpha=req.alpha,
            threshold_pct=req.threshold_pct, trigger=req.trigger,
            requested_by=req.requested_by,
        )  # fmt: skip
        transaction.on_commit(lambda: _send_advance(comparison.pk))
    return comparison


def _validate(req: Request) -> None:
    for label, ref in (("base", req.base_ref), ("head", req.head_ref)):
        if label == "head" and not ref:
            continue
        try:
            validate_rev(ref)
        except BadRefError as exc:
            raise SubmissionError(f"bad {label} ref: {exc}") from None
    if req.head_ref and req.series is not None:
        raise SubmissionError("give a head ref or a patch series, not both")
    if req.patch_fallback and req.series is None:
        raise SubmissionError("fuzz was allowed, but there is no patch series to apply")
    if not req.benchmarks:
        raise SubmissionError("no benchmark requested")
    specs = []
    for name in req.benchmarks:
        try:
            spec = get_benchmark(name).spec
        except KeyError as exc:
            raise SubmissionError(str(exc.args[0])) from None
        specs.append(spec)
        if req.target.arch not in spec.archs:
            raise SubmissionError(f"benchmark {name} does not run on {req.target.arch}")
    if len(set(req.benchmarks)) != len(req.benchmarks):
        raise SubmissionError("a benchmark is requested twice")
    if not req.target.enabled:
        raise SubmissionError(f"target {req.target.name} is disabled")
    floor = 2 if settings.RCUBENCH_ALLOW_FEW_RUNS else MIN_RUNS
    if req.min_runs < floor:
        raise SubmissionError(f"at least {floor} runs per side are needed, got {req.min_runs}")
    cap = settings.RCUBENCH_MAX_RUNS_PER_SIDE
    for label, runs in (("min runs", req.min_runs), ("max runs", req.max_runs)):
        if runs > cap:
            raise SubmissionError(f"{label} ({runs}) is above the limit of {cap} runs per side")
    if req.max_runs < req.min_runs:
        raise SubmissionError(f"max runs ({req.max_runs}) is below min runs ({req.min_runs})")
    # Every comparison with NaN is false, so range checks let it through: a NaN threshold
    # made each regression "significant but small".
    for label, number in (("alpha", req.alpha), ("the threshold", req.threshold_pct)):
        if not math.isfinite(number):
            raise SubmissionError(f"{label} must be a finite number, got {number}")
    if not 0 < req.alpha < 0.5:
        raise SubmissionError(f"alpha must be in (0, 0.5), got {req.alpha}")
    if req.threshold_pct < 0:
        raise SubmissionError(f"the threshold must be >= 0, got {req.threshold_pct}")
    for side, extra in (("A", req.cmdline_a), ("B", req.cmdline_b)):
        if len(extra) > _CMDLINE_MAX or not extra.isprintable():
            raise SubmissionError(
                f"side {side} command line must be printable, one line, at most {_CMDLINE_MAX} "
                "characters"
            )
        try:  # an allow-list, and nothing the benchmarks set themselves
            check_extra(extra, specs)
        except CmdlineError as exc:
            raise SubmissionError(f"side {side} command line: {exc}") from None


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
        elif c.state == ComparisonState.RUNNING:
            _advance_runs(c)
        elif c.state == ComparisonState.ANALYSING and _stale(c.dispatched_at):
            _send_analysis(c)  # the broker lost the analysis message


def _advance_builds(c: Comparison) -> None:
    if c.state == ComparisonState.QUEUED:
        # Every benchmark's Kconfig, not just this comparison's: one kernel per sha then
        # serves any comparison, so the build cache hits across them.
        fragments = kconfig_for(BENCHMARKS)
        c.build_a = request_build(c.revision_a, c.target.arch, fragments)
        same = c.revision_b_id == c.revision_a_id
        c.build_b = c.build_a if same else request_build(c.revision_b, c.target.arch, fragments)
        c.state, c.started_at = ComparisonState.BUILDING, timezone.now()
        c.save(update_fields=["build_a", "build_b", "state", "started_at"])
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
        _finish(c, Result.FAILED, "build-failed", f"build failed: {reasons}")
    elif all(b.result == Result.OK for b in builds.values()):
        _schedule(c, c.min_runs)
    else:
        _resend_lost_builds(list(builds.values()))


def _advance_runs(c: Comparison) -> None:
    runs = list(c.runs.all())
    by_pk = {r.pk: r for r in runs}
    replaced = {r.retry_of_id for r in runs if r.retry_of_id}
    for run in runs:
        if run.state != State.DONE or run.result == Result.OK or run.pk in replaced:
            continue
        attempts = 1 + _depth(run, by_pk)
        if attempts >= settings.RCUBENCH_RUN_ATTEMPTS:
            _finish(
                c,
                Result.FAILED,
                "runs-failed",
                f"{run.benchmark} side {run.side}: one run slot failed {attempts} times; "
                f"last: {run.error_code}: {run.error_message}",
            )
            return
        runs.append(_add_run(c, run.benchmark, run.side, retry_of=run))
    if any(r.state != State.DONE for r in runs):
        _resend_lost_runs(c, runs)
        return
    ok = Counter((r.benchmark, r.side) for r in runs if r.result == Result.OK)
    if all(ok[b, s] >= c.runs_target for b in c.benchmarks for s in "AB"):
        c.state = ComparisonState.ANALYSING
        c.save(update_fields=["state"])
        _send_analysis(c)


def conclude_look(comparison_id: int) -> None:
    """The analysis step: run the engine on the counted runs, then extend or finish."""
    from webapp.analysis.engine import TooFewRuns
    from webapp.analysis.services import analyse_comparison

    c = Comparison.objects.get(pk=comparison_id)
    if c.state != ComparisonState.ANALYSING:
        return  # a duplicate message
    target = c.runs_target
    try:
        analysis = analyse_comparison(c.pk, allow_few_runs=settings.RCUBENCH_ALLOW_FEW_RUNS)
    except TooFewRuns as exc:
        with transaction.atomic():
            c = Comparison.objects.select_for_update().get(pk=comparison_id)
            if c.state == ComparisonState.ANALYSING:
                _finish(c, Result.FAILED, "analysis-failed", str(exc))
        return
    with transaction.atomic():
        c = (
            Comparison.objects.select_for_update(of=("self",))
            .select_related("target")
            .get(pk=comparison_id)
        )
        if c.state != ComparisonState.ANALYSING or c.runs_target != target:
            return
        more = min(analysis.need_more_runs, c.max_runs - c.runs_target)
        if more > 0:
            _schedule(c, more)
        else:
            _finish(c, Result.OK, "", "")


def cancel(comparison_id: int, reason: str = "cancelled") -> bool:
    """End the comparison and its unfinished runs now; False if it had already ended.
    A worker in the middle of a run sees its run ended at its next poll and destroys the VM
    (workers poll every RCUBENCH_CANCEL_POLL_SECONDS)."""
    with transaction.atomic():
        c = Comparison.objects.select_for_update().get(pk=comparison_id)
        if c.state == ComparisonState.DONE:
            return False
        _finish(c, Result.INCOMPLETE, "cancelled", reason)
    return True


def on_build_done(build_id: int) -> None:
    """A build ended: advance the comparisons waiting for it."""
    waiting = Comparison.objects.filter(
        Q(build_a_id=build_id) | Q(build_b_id=build_id), state=ComparisonState.BUILDING
    ).values_list("pk", flat=True)
    for pk in waiting:
        advance(pk)


def kick() -> int:
    """Advance every unfinished comparison (periodic): recovers lost messages and
    replaces runs the reaper ended. Returns how many were looked at."""
    pks = list(Comparison.objects.filter(state__in=ACTIVE).values_list("pk", flat=True))
    for pk in pks:
        advance(pk)
    return len(pks)


# --- steps ----------------------------------------------------------------------------


def _schedule(c: Comparison, per_side: int) -> None:
    """Add `per_side` runs of each side for every benchmark, ABBA-interleaved, and send them."""
    # Reproducible from the stored seed; a schedule, not a secret.
    rng = random.Random(f"{c.seed}:{c.runs_target}")  # noqa: S311
    for bench, side in abba_slots(c.benchmarks, per_side, rng):
        _add_run(c, bench, side)
    c.runs_target += per_side
    c.state = ComparisonState.RUNNING
    c.save(update_fields=["runs_target", "state"])


def _add_run(c: Comparison, benchmark: str, side: str, retry_of: Run | None = None) -> Run:
    last = Run.objects.filter(comparison=c).aggregate(
        order=Max("order"), index=Max("index", filter=Q(benchmark=benchmark, side=side))
    )
    run = Run.objects.create(
        comparison=c, benchmark=benchmark, side=side, retry_of=retry_of,
        index=0 if last["index"] is None else last["index"] + 1,
        order=0 if last["order"] is None else last["order"] + 1,
        dispatched_at=timezone.now(),
    )  # fmt: skip
    _send_run(run.pk, c.target.queue)
    return run


def _depth(run: Run, by_pk: dict[int, Run]) -> int:
    depth = 0
    while run.retry_of_id is not None and run.retry_of_id in by_pk:
        run, depth = by_pk[run.retry_of_id], depth + 1
    return depth


def _finish(c: Comparison, result: str, error_code: str, message: str) -> None:
    now = timezone.now()
    if result != Result.OK:  # runs not finished are not data any more
        c.runs.filter(state__in=[State.QUEUED, State.RUNNING]).update(
            state=State.DONE, result=Result.INCOMPLETE, error_code=Run.Error.CANCELLED,
            error_message=f"comparison ended: {error_code}", finished_at=now,
        )  # fmt: skip
    c.state, c.result, c.error_code, c.error_message = (
        ComparisonState.DONE,
        result,
        error_code,
        message,
    )
    c.finished_at = now
    c.save(update_fields=["state", "result", "error_code", "error_message", "finished_at"])


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
            _send_run(run.pk, c.target.queue)


def _resend_lost_builds(builds: list[Build]) -> None:
    if Build.objects.filter(state=State.RUNNING).exists():
        return  # the build queue is busy: a queued build may just be waiting its turn
    for build in builds:
        if build.state == State.QUEUED and _stale(build.dispatched_at or build.created_at):
            from workers.tasks.build import build_kernel

            Build.objects.filter(pk=build.pk).update(dispatched_at=timezone.now())
            transaction.on_commit(partial(build_kernel.delay, build.pk))


def _send_run(run_id: int, queue: str) -> None:
    from workers.tasks.bench import run_benchmark

    transaction.on_commit(lambda: run_benchmark.apply_async((run_id,), queue=queue))


def _send_analysis(c: Comparison) -> None:
    from workers.tasks.analysis import conclude_look as task

    Comparison.objects.filter(pk=c.pk).update(dispatched_at=timezone.now())
    transaction.on_commit(lambda: task.delay(c.pk))


def _send_advance(comparison_id: int) -> None:
    from workers.tasks.control import advance_comparison

    advance_comparison.delay(comparison_id)
