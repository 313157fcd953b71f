"""Opening regressions when they are reported, and moving them (docs/regressions.md).

open_for_comparison / open_for_change_point run where the report's mail is decided (the
notify tasks), idempotently: one Regression per comparison or change point, however often
they run. transition() is the one way a state changes, for every caller (page, API, mail,
rules): it takes the row lock, checks the move (models' module docstring) and who may make
it, writes the row and a Transition, logs one `regression state` line and, on commit, sends
the mail of the move to the report's recipients (webapp.alerts.services.notify_transition).
"""

import statistics
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from stats.verdicts import REGRESSION, RELIABILITY
from webapp import access, dispatch, logs
from webapp.access import AnyUser
from webapp.analysis.models import MetricVerdict
from webapp.comparisons.models import PART_TRIGGERS, Comparison, ComparisonState
from webapp.regressions.models import CLOSED, OPEN, Regression, RegressionState, Transition, Via
from webapp.states import Result, log_state
from webapp.trees.models import Tree
from webapp.watch.models import ChangePoint

log = logs.get(__name__)
S = RegressionState
REPORTED = (REGRESSION, RELIABILITY)
# Where a person may move an open or closed regression (untriaged is where reports start;
# inactive is the rules' word for "its branch went on without it").
BY_PERSON: dict[str, tuple[str, ...]] = {
    S.UNTRIAGED: (S.ACKNOWLEDGED, S.INVESTIGATING, S.INVALID, S.FIXED, S.DUPLICATE),
    S.ACKNOWLEDGED: (S.INVESTIGATING, S.INVALID, S.FIXED, S.DUPLICATE),
    S.INVESTIGATING: (S.ACKNOWLEDGED, S.INVALID, S.FIXED, S.DUPLICATE),
    **{closed: (S.ACKNOWLEDGED, S.INVESTIGATING) for closed in CLOSED},
}
BY_RULE: dict[str, tuple[str, ...]] = {state: (S.FIXED, S.INACTIVE) for state in OPEN}


class TransitionRefused(ValueError):
    """Why the move was not made; nothing was stored."""


# --- opening ----------------------------------------------------------------------------


def _reported_row(c: Comparison) -> MetricVerdict | None:
    """The verdict row the regression is about: the first regressed primary, else the first
    regressed statistic (a reliability regression has none: the comparison's verdict)."""
    rows = c.verdicts.filter(verdict__in=REPORTED).order_by("-is_primary", "benchmark", "pk")
    return rows.first()


def open_for_comparison(comparison_id: int) -> Regression | None:
    """The comparison's Regression, opened now if it ended ok with a regression verdict (a
    bisection's step is its bisection's business, not a report); None otherwise."""
    c = Comparison.objects.select_related("revision_a__tree", "revision_b", "target").get(
        pk=comparison_id
    )
    if (
        c.state != ComparisonState.DONE or c.result != Result.OK
        or c.verdict not in REPORTED or c.trigger in PART_TRIGGERS
    ):  # fmt: skip
        return None
    row = _reported_row(c)
    push = c.pushes.order_by("pk").first()
    return _open(
        Regression(
            tree=c.revision_a.tree, comparison=c, branch=push.branch if push else "",
            target=c.target,
            benchmark=row.benchmark if row else c.benchmarks[0],
            metric=row.metric if row else "runs", statistic=row.statistic if row else "failures",
            shift_pct=row.shift_pct if row else None, ci_low_pct=row.ci_low_pct if row else None,
            ci_high_pct=row.ci_high_pct if row else None, threshold_pct=c.threshold_pct,
            baseline=c.revision_a.sha, culprit=c.revision_b.sha,
        ),
        lookup={"comparison": c},
    )  # fmt: skip


def open_for_change_point(change_point_id: int) -> Regression | None:
    """The change point's Regression if it is one (in the metric's worse direction)."""
    cp = ChangePoint.objects.select_related("tree", "push", "target").get(pk=change_point_id)
    if not cp.regression:
        return None
    before = (
        cp.tree.pushes.filter(branch=cp.branch, state=cp.push.State.TESTED, pk__lt=cp.push_id)
        .order_by("-pk").values_list("after", flat=True).first()
    )  # fmt: skip
    threshold = (
        MetricVerdict.objects.filter(
            comparison__pushes=cp.push, benchmark=cp.benchmark, metric=cp.metric
        ).values_list("comparison__threshold_pct", flat=True).first()
    )  # fmt: skip
    return _open(
        Regression(
            tree=cp.tree, change_point=cp, branch=cp.branch, target=cp.target,
            benchmark=cp.benchmark, metric=cp.metric, statistic="p50",
            shift_pct=cp.change_pct, threshold_pct=threshold if threshold is not None else 2.0,
            baseline=before or "", culprit=cp.push.after,
        ),
        lookup={"change_point": cp},
    )  # fmt: skip


def _open(reg: Regression, lookup: dict[str, object]) -> Regression:
    try:
        with transaction.atomic():
            reg.save()
            Transition.objects.create(regression=reg, to_state=S.UNTRIAGED, via=Via.REPORT)
    except IntegrityError:  # opened by an earlier run of the same task
        return Regression.objects.get(**lookup)
    log_state(reg, reg.state, tree=reg.tree.name, benchmark=reg.benchmark, metric=reg.metric,
              comparison=reg.comparison_id, change_point=reg.change_point_id)  # fmt: skip
    return reg


# --- moving -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Actor:
    """Who asks for a move: an account (page, API), a mail's sender, or a rule."""

    via: str
    user: AnyUser | None = None
    address: str = ""
    message_id: str = ""


def may_triage(user: AnyUser, reg: Regression) -> bool:
    """Staff, and the tree's admins and submitters, who see what it was reported on."""
    if not user.is_authenticated or not visible_regressions(user).filter(pk=reg.pk).exists():
        return False
    return access.can_submit(user, reg.tree)  # staff, or either role on the tree


def transition(
    regression_id: int, to_state: str, actor: Actor, *, note: str = "",
    duplicate_of: int | None = None, fixed_by: str = "",
) -> Regression:  # fmt: skip
    """Move the regression to `to_state`. `note`: why (required for invalid: its reason);
    `duplicate_of`: the regression it duplicates (same tree, not itself, no cycle);
    `fixed_by`: the fixing commit or subject (required for fixed). Raises TransitionRefused
    with the reason, or PermissionDenied."""
    note = note.strip()
    with transaction.atomic():
        reg = Regression.objects.select_for_update().select_related("tree").get(pk=regression_id)
        allowed = (BY_RULE if actor.via == Via.RULE else BY_PERSON).get(reg.state, ())
        # Mail commands are checked against their sender's address where they are read.
        if actor.via not in (Via.RULE, Via.MAIL, Via.CLI) and (
            actor.user is None or not may_triage(actor.user, reg)
        ):
            raise PermissionDenied(
                f"triaging needs a role on tree {reg.tree.name} (admin or submitter)"
            )
        if to_state not in S.values:
            raise TransitionRefused(f"no state {to_state!r}: one of {', '.join(S.values)}")
        if to_state not in allowed:
            moves = ", ".join(allowed) or "nothing"
            raise TransitionRefused(f"regression {reg.pk} is {reg.state}: it may move to {moves}")
        fields = _fields(reg, to_state, note, duplicate_of, fixed_by.strip())
        now = timezone.now()
        from_state = reg.state
        reg.state = to_state
        for name, value in fields.items():
            setattr(reg, name, value)
        reg.closed_at = now if to_state in CLOSED else None
        if actor.via != Via.RULE and reg.triaged_at is None:
            reg.triaged_at = now
        reg.save()
        moved = Transition.objects.create(
            regression=reg, from_state=from_state, to_state=to_state, via=actor.via,
            by=actor.user if isinstance(actor.user, User) else None,
            by_address=actor.address, message_id=actor.message_id, note=note[:2000],
        )  # fmt: skip
        # Into the report's thread, once this move is committed (docs/alerts.md).
        dispatch.send_notify_transition(moved.pk)
    log_state(reg, to_state, was=from_state, via=actor.via, by=_who(actor), **fields)
    return reg


def _fields(
    reg: Regression, to_state: str, note: str, duplicate_of: int | None, fixed_by: str
) -> dict[str, object]:
    """The fields the move sets beside the state (each cleared when it no longer holds)."""
    out: dict[str, object] = {"duplicate_of": None}
    if to_state == S.INVALID:
        if not note:
            raise TransitionRefused("invalid needs a reason: why is it not a regression?")
        out["reason"] = note[:2000]
    if to_state == S.FIXED:
        if not fixed_by:
            raise TransitionRefused("fixed needs the fixing commit (a sha or its subject)")
        out["fixed_by"] = fixed_by[:200]
    if to_state == S.DUPLICATE:
        out["duplicate_of"] = _original(reg, duplicate_of)
    return out


def _original(reg: Regression, duplicate_of: int | None) -> Regression:
    if duplicate_of is None:
        raise TransitionRefused("duplicate needs the regression it duplicates")
    other = Regression.objects.filter(pk=duplicate_of, tree_id=reg.tree_id).first()
    if other is None:
        raise TransitionRefused(f"no regression {duplicate_of} of tree {reg.tree.name}")
    seen = {reg.pk}
    walk: Regression | None = other
    while walk is not None:  # a chain of duplicates must end at an original
        if walk.pk in seen:
            raise TransitionRefused(f"regression {duplicate_of} is (a duplicate of) this one")
        seen.add(walk.pk)
        walk = walk.duplicate_of
    return other


def _who(actor: Actor) -> str:
    if actor.user is not None and actor.user.is_authenticated:
        return str(actor.user.get_username())
    return actor.address or actor.via


# --- reading ------------------------------------------------------------------------------


def visible_regressions(
    user: AnyUser, qs: QuerySet[Regression] | None = None
) -> QuerySet[Regression]:
    """The regressions `user` may see: those of comparisons they see, and of the change
    points they see (webapp.watch.history.visible_change_points' rule: of their audience,
    at a push with a comparison they see)."""
    qs = Regression.objects.all() if qs is None else qs
    full = access.submittable_trees(user)  # those it sees all of (access.sees_all_of)
    seen = access.visible_comparisons(user, Comparison.objects.filter(pk=OuterRef("comparison")))
    at_push = access.visible_comparisons(
        user, Comparison.objects.filter(pushes=OuterRef("change_point__push"))
    )
    audience = Q(change_point__audience=ChangePoint.Audience.MEMBERS, tree__in=full) | Q(
        change_point__audience=ChangePoint.Audience.PUBLIC,
        tree__in=access.visible_trees(user).exclude(pk__in=full),
    )
    return qs.filter(
        Q(comparison__isnull=False) & Exists(seen)
        | Q(change_point__isnull=False) & audience & Exists(at_push)
    )


@dataclass(frozen=True)
class TriageRow:
    regression: Regression
    age_days: float
    first_triage_hours: float | None  # from opening to the first person's move


@dataclass(frozen=True)
class Triage:
    tree: Tree
    open: list[TriageRow]  # oldest first
    closed: list[TriageRow]  # newest first, the last 50
    median_first_triage_hours: float | None
    untriaged: int


def triage(tree: Tree, user: AnyUser, now: datetime | None = None) -> Triage:
    """The tree's regressions as `user` may see them: the open ones by age, the recently
    closed, and how long the first triage took (median over those triaged)."""
    now = now or timezone.now()
    qs = visible_regressions(user, Regression.objects.filter(tree=tree)).select_related(
        "target", "comparison", "change_point", "duplicate_of"
    )

    def row(r: Regression) -> TriageRow:
        first = r.triaged_at - r.opened_at if r.triaged_at else None
        return TriageRow(r, (now - r.opened_at).total_seconds() / 86400,
                         first.total_seconds() / 3600 if first else None)  # fmt: skip

    open_rows = [row(r) for r in qs.filter(state__in=OPEN).order_by("opened_at", "pk")]
    closed_rows = [row(r) for r in qs.filter(state__in=CLOSED).order_by("-closed_at")[:50]]
    hours = [r.first_triage_hours for r in [*open_rows, *closed_rows]
             if r.first_triage_hours is not None]  # fmt: skip
    median = statistics.median(hours) if hours else None
    untriaged = sum(r.regression.state == S.UNTRIAGED for r in open_rows)
    return Triage(tree, open_rows, closed_rows, median, untriaged)
