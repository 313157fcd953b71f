"""Bisections and attributions: started from a finished comparison, advanced by events.

start() checks what may be bisected (a primary regression or improvement with a CI, the
stability gate, a range or series with commits, the requester's role on the tree) and
stores the bisection; a second request for the same comparison, statistic and mode while
one runs joins it. advance() is the state machine, like the orchestrator's: it takes the
row lock, reads the steps' comparisons and does the next thing; every event (a step's
comparison ended, the periodic kick) calls it, and it is idempotent.

  queued -> bisecting: a step comparison of the next midpoint against A at a time
            (stats.bisection.next_position); a step whose CI holds the midpoint is
            extended to its maximum runs first -> confirming (a culprit) or done (a range)
  confirming: the culprit against its parent, run afresh, and head with the culprit
            reverted against head, at once -> done (culprit confirmed, or not)
  queued -> attributing: every patch of a series against its parent, at once -> done

Steps are ordinary comparisons submitted through the one way in (submission.py) with
trigger "bisection": same target, benchmarks, command lines, runs, alpha and threshold as
the original; the build cache serves every kernel built before. A step whose kernel does
not build or boot is skipped (its reason kept). Only a confirmed culprit is mailed.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from engine.build.history import HistoryError, first_parent, revert_mbox
from engine.build.patches import SeriesError, parse_mbox
from stats import bisection as rules
from stats.verdicts import IMPROVEMENT, REGRESSION
from webapp import access, dispatch, logs
from webapp.access import AnyUser
from webapp.analysis.models import MetricVerdict
from webapp.bisections import summary
from webapp.bisections.models import ACTIVE, Bisection, BisectionState, Step
from webapp.comparisons import orchestrator, preflight
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.states import Result, finish_step, log_state

log = logs.get(__name__)
BISECTABLE = (REGRESSION, IMPROVEMENT)


class BisectionRefused(ValueError):
    """Why this comparison or statistic is not bisected; nothing was stored."""


# --- start ------------------------------------------------------------------------------


def start(
    comparison_id: int, *, mode: str = Bisection.Mode.BISECT,
    statistic: tuple[str, str, str] | None = None, user: AnyUser | None = None,
    trigger: str = Bisection.Trigger.CLI,
) -> tuple[Bisection, bool]:  # fmt: skip
    """Bisect (or attribute) `statistic` ((benchmark, metric, statistic); None: the first
    primary that regressed or improved) of comparison `comparison_id`. `user`: the account
    asking (it must see the comparison and may submit to its tree); None: the operator's
    command line. Returns the bisection and whether this call created it (False: it joined
    the one running). Raises BisectionRefused with the reason, PermissionDenied, or
    Http404 (through access) for a comparison the user may not see."""
    if mode not in Bisection.Mode.values:
        raise BisectionRefused(f"mode must be one of {', '.join(Bisection.Mode.values)}")
    with transaction.atomic():
        qs = Comparison.objects.select_related("revision_a__tree", "revision_b__series",
                                               "build_a", "build_b", "target")  # fmt: skip
        if user is not None:
            c = access.get_visible(access.visible_comparisons(user, qs), pk=comparison_id)
            if not access.can_submit(user, c.revision_a.tree):
                raise PermissionDenied(f"bisecting needs a role on tree {c.revision_a.tree.name}")
        else:
            found = qs.filter(pk=comparison_id).first()
            if found is None:
                raise BisectionRefused(f"no comparison #{comparison_id}")
            c = found
        row, effect = _row(c, statistic)
        if joined := _active(c, row, mode):
            log.info("bisection joined", bisection=joined.pk, comparison=c.pk)
            return joined, False
        kind, commits = _commits(c)
        if mode == Bisection.Mode.ATTRIBUTE:
            if kind != Bisection.Kind.SERIES:
                raise BisectionRefused("per-patch attribution is for a series; bisect a push range")
            cap = settings.RCUBENCH_ATTRIBUTION_MAX_PATCHES
            if len(commits) > cap:
                raise BisectionRefused(
                    f"the series has {len(commits)} patches; attribution "
                    f"takes at most {cap} (RCUBENCH_ATTRIBUTION_MAX_PATCHES)"
                )
        try:
            with transaction.atomic():
                b = Bisection.objects.create(
                    comparison=c, mode=mode, kind=kind, benchmark=row.benchmark,
                    metric=row.metric, statistic=row.statistic, unit=row_unit(row),
                    effect=effect.shift, effect_low=effect.ci_low or 0.0,
                    effect_high=effect.ci_high or 0.0, original_verdict=row.verdict,
                    commits=commits, trigger=trigger,
                    requested_by_id=user.pk if user is not None and user.is_authenticated else None,
                )  # fmt: skip
        except IntegrityError:  # the same request, committed meanwhile: join it
            joined = _active(c, row, mode)
            if joined is None:
                raise
            return joined, False
        log_state(b, b.state, comparison=c.pk, mode=mode, kind=kind, positions=len(commits),
                  benchmark=row.benchmark, metric=row.metric, statistic=row.statistic,
                  effect=effect.shift)  # fmt: skip
        dispatch.send_advance_bisection(b.pk)
    return b, True


def _row(
    c: Comparison, statistic: tuple[str, str, str] | None
) -> tuple[MetricVerdict, rules.Effect]:
    if c.state != ComparisonState.DONE or c.result != Result.OK:
        raise BisectionRefused(f"comparison #{c.pk} has not ended ok: nothing to bisect yet")
    if c.trigger == Comparison.Trigger.BISECTION:
        raise BisectionRefused(f"comparison #{c.pk} is a bisection's step: bisect the original")
    rows = MetricVerdict.objects.filter(comparison=c)
    if statistic is not None:
        bench, metric, stat = statistic
        row = rows.filter(benchmark=bench, metric=metric, statistic=stat).first()
        if row is None:
            raise BisectionRefused(f"comparison #{c.pk} has no verdict on {bench} {metric} "
                                   f"({stat})")  # fmt: skip
    else:
        row = (
            rows.filter(is_primary=True, verdict__in=BISECTABLE)
            .order_by("benchmark", "metric")
            .first()
        )
        if row is None:
            raise BisectionRefused(
                f"comparison #{c.pk} has no primary regression or "
                f"improvement (its verdict: {c.verdict or 'none'})"
            )
    e = row_effect(row)
    if (why := refusal(c, row)) or e is None:  # refusal() names a missing effect
        raise BisectionRefused(f"{row.benchmark} {row.metric} ({row.statistic}): {why}")
    return row, e


def refusal(c: Comparison, row: MetricVerdict) -> str:
    """Why `row` of `c` is not bisected ("" if it may be): its verdict, an effect without
    a CI, or noise a step could not resolve at the comparison's maximum runs (the gate).
    The one rule: start() refuses by it, and the report's Bisect button says it instead
    of offering a bisection that would be refused."""
    if row.verdict not in BISECTABLE:
        return f"it is {row.verdict}: only a regression or improvement is bisected"
    e = row_effect(row)
    if e is None or e.ci_low is None or e.ci_high is None:
        return "it has no CI: its size is not estimated, a step cannot be placed"
    mde = (row.details or {}).get("smallest_detectable_shift")
    return rules.gate(e, mde if isinstance(mde, float | int) else None, row.n_a, row.n_b,
                      c.max_runs)  # fmt: skip


def bisectable_rows(c: Comparison) -> list[MetricVerdict]:
    """The statistics a bisection of `c` may be asked for (what a page offers): its primary
    regressions and improvements, once it ended ok, unless it is itself a step. refusal()
    says which of them the gate turns away; start() still decides (the commits)."""
    if c.state != ComparisonState.DONE or c.result != Result.OK:
        return []
    if c.trigger == Comparison.Trigger.BISECTION:
        return []
    rows = MetricVerdict.objects.filter(comparison=c, is_primary=True, verdict__in=BISECTABLE)
    return list(rows.order_by("benchmark", "metric", "statistic"))


def row_effect(row: MetricVerdict) -> rules.Effect | None:
    """The row's shift and CI in its own unit (% when relative, else the metric's): the
    unit its smallest detectable shift is in. None: no shift."""
    d = row.details or {}
    shift, ci = d.get("shift"), d.get("ci") or [None, None]
    if not isinstance(shift, float | int):
        return None
    low, high = (float(x) if isinstance(x, float | int) else None for x in ci)
    return rules.Effect(float(shift), low, high)


def row_unit(row: MetricVerdict) -> str:
    """The unit of the row's effect (row_effect): % when relative, else the metric's."""
    d = row.details or {}
    return "%" if d.get("relative", True) else str(d.get("unit", ""))


def _active(c: Comparison, row: MetricVerdict, mode: str) -> Bisection | None:
    return Bisection.objects.filter(comparison=c, benchmark=row.benchmark, metric=row.metric,
                                    statistic=row.statistic, mode=mode,
                                    state__in=ACTIVE).first()  # fmt: skip


def _commits(c: Comparison) -> tuple[str, list[dict[str, str]]]:
    """The positions 1..n of the original: its series' patches (A the base, B the base
    with the series), or the first-parent commits of A..B."""
    a, b = c.revision_a, c.revision_b
    if a.series_id:
        raise BisectionRefused("side A carries a series: bisect a comparison against a base")
    if b.series_id:
        if b.base_sha and a.sha and b.base_sha != (a.sha or a.base_sha):
            raise BisectionRefused("the series was applied on another commit than side A")
        try:
            series = parse_mbox(bytes(b.series.mbox))  # type: ignore[union-attr]
        except SeriesError as exc:
            raise BisectionRefused(f"the series cannot be read: {exc}") from None
        return Bisection.Kind.SERIES, [
            {"sha": "", "subject": p.subject, "author": p.author, "link": p.message_id}
            for p in series.patches
        ]
    if a.pk == b.pk:
        raise BisectionRefused(
            "both sides boot one kernel (an A/A or a command-line "
            "comparison): there are no commits to bisect"
        )
    sha_a, sha_b = _sha(c, "A"), _sha(c, "B")
    git_dir = preflight.repository(a.tree)
    if git_dir is None:
        raise BisectionRefused(f"tree {a.tree.name}'s history cannot be read on this host")
    try:
        commits = first_parent(git_dir, sha_a, sha_b, limit=settings.RCUBENCH_BISECT_MAX_COMMITS)
    except HistoryError as exc:
        raise BisectionRefused(str(exc)) from None
    return Bisection.Kind.RANGE, [
        {"sha": x.sha, "subject": x.subject, "author": x.author, "link": ""} for x in commits
    ]


def _sha(c: Comparison, side: str) -> str:
    build = c.build_a if side == "A" else c.build_b
    rev = c.revision_a if side == "A" else c.revision_b
    sha = (build.sha if build else "") or rev.sha or rev.base_sha
    if not sha:
        raise BisectionRefused(f"side {side}'s commit is not known (its build never resolved it)")
    return sha


# --- the state machine ------------------------------------------------------------------


def advance(bisection_id: int) -> None:
    """Do the bisection's next step from what the database holds (idempotent)."""
    with transaction.atomic():
        b = (
            Bisection.objects.select_for_update(of=("self",))
            .select_related(
                "comparison__revision_a__tree",
                "comparison__revision_b__series",
                "comparison__build_a",
                "comparison__build_b",
                "comparison__target",
            )
            .get(pk=bisection_id)
        )
        if b.state == BisectionState.DONE:
            return
        if b.state == BisectionState.QUEUED:
            _begin(b)
            return
        steps = list(b.steps.select_related("comparison"))
        for step in steps:
            if not step.answer:
                _answer(b, step)
        if any(not s.answer for s in steps):
            return  # a step still runs (or was extended)
        if b.state == BisectionState.BISECTING:
            _bisect(b, steps)
        elif b.state == BisectionState.CONFIRMING:
            _confirm(b, steps)
        elif b.state == BisectionState.ATTRIBUTING:
            _finish(b, Result.OK, outcome=Bisection.Outcome.ATTRIBUTED,
                    summary=_attribution_summary(b, steps))  # fmt: skip


def _begin(b: Bisection) -> None:
    b.started_at = timezone.now()
    if b.mode == Bisection.Mode.ATTRIBUTE:
        _move(b, BisectionState.ATTRIBUTING, ["started_at"])
        for position in range(1, b.n + 1):
            _add_step(b, Step.Kind.PATCH, position)
    else:
        _move(b, BisectionState.BISECTING, ["started_at"])
        _bisect(b, [])


def _bisect(b: Bisection, steps: Sequence[Step]) -> None:
    answers = {s.position: s.answer for s in steps if s.kind == Step.Kind.BISECT}
    reasons = {s.position: s.reason for s in steps if s.answer == Step.Answer.SKIPPED}
    nxt = rules.next_position(b.n, answers)
    if nxt is not None:
        _add_step(b, Step.Kind.BISECT, nxt)
        return
    found = rules.outcome(b.n, answers, reasons)
    b.first, b.last = found.first, found.last
    if found.kind == rules.CULPRIT:
        _move(b, BisectionState.CONFIRMING, ["first", "last"], culprit=found.first)
        _add_step(b, Step.Kind.FRESH, found.first)
        _add_step(b, Step.Kind.REVERT, found.first)
    else:
        _finish(
            b,
            Result.OK,
            outcome=Bisection.Outcome.RANGE,
            summary=f"The change lies in {_span(b, found.first, found.last)}: {found.reason}.",
        )


def _confirm(b: Bisection, steps: Sequence[Step]) -> None:
    by_kind = {s.kind: s for s in steps if s.position == b.first}
    fresh, revert = by_kind[Step.Kind.FRESH], by_kind[Step.Kind.REVERT]
    revert_answer = None if revert.answer == Step.Answer.SKIPPED else _as_answer(revert)
    verdict = rules.confirmation(_as_answer(fresh), revert_answer, revert.reason)
    culprit = _span(b, b.first or 0, b.first or 0)
    outcome = Bisection.Outcome.CULPRIT if verdict.confirmed else Bisection.Outcome.UNCONFIRMED
    _finish(b, Result.OK, outcome=outcome, summary=f"{culprit}: {verdict.text}.")
    if verdict.confirmed:
        dispatch.send_notify_bisection(b.pk)  # only a confirmed culprit is mailed


def _as_answer(step: Step) -> rules.Answer:
    return rules.Answer(step.answer, step.reason)


def _span(b: Bisection, first: int, last: int) -> str:
    def name(p: int) -> str:
        return f'{summary.label(b, p)} ("{b.commits[p - 1]["subject"]}")'

    return name(first) if first == last else f"{name(first)} .. {name(last)}"


def _attribution_summary(b: Bisection, steps: Sequence[Step]) -> str:
    # The bars the page and the API draw (summary.waterfall_bars): one rule for "moved".
    moved = [bar.position for bar in summary.waterfall_bars(b, steps) if bar.beyond_threshold]
    if not moved:
        return "No patch's CI lies beyond the threshold."
    return "Beyond the threshold: " + "; ".join(_span(b, p, p) for p in moved) + "."


# --- steps ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sides:
    base_ref: str
    head_ref: str = ""
    series_a: bytes | None = None
    series_b: bytes | None = None
    cmdline_a: str = ""
    cmdline_b: str = ""


def _sides(b: Bisection, kind: str, position: int) -> _Sides:
    """What a step compares, as a submission names it. A series' positions are prefixes of
    its patches on the base; a range's are commits."""
    c = b.comparison
    cmd_a, cmd_b = c.cmdline_a, c.cmdline_b
    if b.kind == Bisection.Kind.SERIES:
        patches = parse_mbox(bytes(c.revision_b.series.mbox)).patches  # type: ignore[union-attr]
        base = _sha(c, "A")

        def prefix(k: int) -> bytes | None:
            return b"".join(p.raw for p in patches[:k]) or None

        if kind == Step.Kind.BISECT:
            return _Sides(base, series_b=prefix(position), cmdline_a=cmd_a, cmdline_b=cmd_b)
        if kind in (Step.Kind.FRESH, Step.Kind.PATCH):
            return _Sides(base, series_a=prefix(position - 1), series_b=prefix(position),
                          cmdline_a=cmd_b, cmdline_b=cmd_b)  # fmt: skip
        without = b"".join(p.raw for p in patches if p.index != position) or None
        return _Sides(base, series_a=prefix(len(patches)), series_b=without,
                      cmdline_a=cmd_b, cmdline_b=cmd_b)  # fmt: skip
    shas = [_sha(c, "A")] + [x["sha"] for x in b.commits]
    if kind == Step.Kind.BISECT:
        return _Sides(shas[0], head_ref=shas[position], cmdline_a=cmd_a, cmdline_b=cmd_b)
    if kind in (Step.Kind.FRESH, Step.Kind.PATCH):
        return _Sides(shas[position - 1], head_ref=shas[position], cmdline_a=cmd_b,
                      cmdline_b=cmd_b)  # fmt: skip
    git_dir = preflight.repository(c.revision_a.tree)
    if git_dir is None:
        raise _NoStep("the tree's history cannot be read on this host")
    try:
        mbox = revert_mbox(git_dir, shas[position], b.commits[position - 1]["subject"])
    except HistoryError as exc:
        raise _NoStep(str(exc)) from None
    return _Sides(shas[-1], series_b=mbox, cmdline_a=cmd_b, cmdline_b=cmd_b)


class _NoStep(Exception):
    """The step's comparison cannot be submitted (a revert that does not apply)."""


def _add_step(b: Bisection, kind: str, position: int) -> Step:
    step = Step.objects.create(bisection=b, kind=kind, position=position)
    c = b.comparison
    try:
        sides = _sides(b, kind, position)
        if sides.series_a is not None and sides.series_b is None:
            raise _NoStep("side B would carry no patch at all")
        step.comparison = submit_comparison(ComparisonRequest(
            tree=c.revision_a.tree.name, base_ref=sides.base_ref, head_ref=sides.head_ref,
            series_mbox=sides.series_b, base_series_mbox=sides.series_a,
            patch_fallback=c.revision_b.patch_fallback, benchmarks=tuple(c.benchmarks),
            target=c.target.name, cmdline_a=sides.cmdline_a, cmdline_b=sides.cmdline_b,
            min_runs=c.min_runs, max_runs=c.max_runs, alpha=c.alpha,
            threshold_pct=c.threshold_pct, trigger=Comparison.Trigger.BISECTION,
            requested_by=f"bisection #{b.pk}", visibility=c.visibility,
        ))  # fmt: skip
        step.save(update_fields=["comparison"])
    except (SubmissionError, _NoStep) as exc:
        # A revert that does not apply, a target gone: the step has no comparison.
        message = exc.message if isinstance(exc, SubmissionError) else str(exc)
        _record(step, Step.Answer.SKIPPED, f"not run: {message}")
        dispatch.send_advance_bisection(b.pk)
        return step
    log.info("bisection step", bisection=b.pk, step=step.pk, kind=kind, position=position,
             comparison=step.comparison_id)  # fmt: skip
    return step


def _answer(b: Bisection, step: Step) -> None:
    """Answer a step whose comparison ended; extend one whose CI holds the midpoint."""
    c = step.comparison
    if c is None:
        _record(step, Step.Answer.SKIPPED, "its comparison was deleted")
        return
    if c.state != ComparisonState.DONE:
        return
    if c.result != Result.OK or c.verdict == "reliability-regression":
        why = c.error_message or c.verdict
        _record(step, Step.Answer.SKIPPED, f"comparison #{c.pk} {c.error_code or c.verdict}: "
                f"{why[:300]}")  # fmt: skip
        return
    row = MetricVerdict.objects.filter(comparison=c, benchmark=b.benchmark, metric=b.metric,
                                       statistic=b.statistic).first()  # fmt: skip
    effect = row_effect(row) if row is not None else None
    if row is None or effect is None:
        _record(step, Step.Answer.UNKNOWN, f"comparison #{c.pk} has no estimate of the statistic")
        return
    step.shift, step.ci_low, step.ci_high = effect.shift, effect.ci_low, effect.ci_high
    if step.kind == Step.Kind.PATCH:
        _record(step, Step.Answer.MEASURED, f"comparison #{c.pk}: {row.verdict}")
        return
    # The revert moves head back: its "B" is the opposite of the original effect.
    original = -b.effect if step.kind == Step.Kind.REVERT else b.effect
    answer = rules.step_answer(effect, original)
    if answer.answer == rules.UNKNOWN and not step.extended:
        added = orchestrator.extend(c.pk)
        if added:
            step.extended = True
            step.save(update_fields=["extended", "shift", "ci_low", "ci_high"])
            log.info("bisection step extended", bisection=b.pk, step=step.pk,
                     comparison=c.pk, more_runs=added)  # fmt: skip
            return
    _record(step, answer.answer, f"comparison #{c.pk}: {answer.reason}")


def _record(step: Step, answer: str, reason: str) -> None:
    step.answer, step.reason, step.answered_at = answer, reason, timezone.now()
    step.save(update_fields=["answer", "reason", "answered_at", "shift", "ci_low", "ci_high"])
    log.info("bisection step answered", bisection=step.bisection_id, step=step.pk,
             kind=step.kind, position=step.position, answer=answer,
             reason=reason[:200])  # fmt: skip


def _move(b: Bisection, state: str, also: list[str] | None = None, **fields: object) -> None:
    b.state = state
    b.save(update_fields=["state", *(also or [])])
    log_state(b, state, comparison=b.comparison_id, **fields)


def _finish(b: Bisection, result: str, *, outcome: str = "", summary: str = "",
            error_code: str = "", message: str = "") -> bool:  # fmt: skip
    return finish_step(b, unfinished=ACTIVE, result=result, error_code=error_code,
                       error_message=message, outcome=outcome, summary=summary,
                       first=b.first, last=b.last)  # fmt: skip


# --- events, cancel ---------------------------------------------------------------------


def on_comparison_done(comparison_id: int) -> list[int]:
    """A comparison ended: advance the bisections it is a step of (and their ids)."""
    pks = list(Step.objects.filter(comparison_id=comparison_id, bisection__state__in=ACTIVE)
               .values_list("bisection_id", flat=True).distinct())  # fmt: skip
    for pk in pks:
        advance(pk)
    return pks


def advance_unfinished() -> int:
    """Advance every unfinished bisection (the periodic kick): recovers lost messages."""
    pks = list(Bisection.objects.filter(state__in=ACTIVE).values_list("pk", flat=True))
    for pk in pks:
        advance(pk)
    return len(pks)


def cancel(bisection_id: int, reason: str = "cancelled") -> bool:
    """End the bisection and cancel its unfinished step comparisons; False if it had
    ended already."""
    with transaction.atomic():
        b = Bisection.objects.select_for_update().get(pk=bisection_id)
        if b.state == BisectionState.DONE:
            return False
        _finish(b, Result.INCOMPLETE, error_code=Bisection.Error.CANCELLED, message=reason)
        running = b.steps.filter(comparison__state__in=orchestrator.ACTIVE)
        pks = list(running.values_list("comparison_id", flat=True))
    for pk in pks:
        orchestrator.cancel(pk, f"its bisection #{bisection_id} was {reason}")
    return True


def cancel_for(user: AnyUser, pk: int) -> tuple[Bisection, bool]:
    """Cancel for `user`: who may cancel the original comparison may cancel its bisection,
    and so may the account that asked for it."""
    b = access.get_visible(visible(user), pk=pk)
    if not may_cancel(user, b):
        raise PermissionDenied("only who asked for it, the tree's admins and staff may cancel it")
    name = user.get_username()
    return b, cancel(b.pk, f"cancelled by {name}")


def may_cancel(user: AnyUser, b: Bisection) -> bool:
    """Whether `user` may cancel `b` (cancel_for's rule, for a page's button)."""
    mine = user.is_authenticated and b.requested_by_id == user.pk
    return bool(mine or access.can_cancel(user, b.comparison))


def visible(user: AnyUser) -> QuerySet[Bisection]:
    """The bisections `user` may see: those of comparisons they may see."""
    seen = access.visible_comparisons(user).values("pk")
    return Bisection.objects.filter(comparison__in=seen)
