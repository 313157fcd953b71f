"""Watched trees: a push is received (webhook or polling), waits out its coalescing window,
then its head is compared against its baseline on each of the policy's targets through the
one submission service.

Baseline rule, per branch: the previous tested head of the branch; after a force-push (the
previous head is not an ancestor of the new one), their merge base; the first push of a
branch (or no merge base): the policy's start ref. Coalescing: a push that a newer push of
the same branch follows within the window is superseded (never tested), and a comparison of
an older push that is still queued when a newer head is submitted is cancelled with that
reason. At most `max_active` of a tree's push comparisons are queued or running; a push
over the limit waits (the beat's watch tick takes it up again). Every `anchor_every` tested
heads, the head is also compared against the policy's anchor ref (a release tag), so that
a drift of sub-threshold steps becomes one measured A/B.
"""

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatchcase

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Concat
from django.utils import timezone

from stats.verdicts import REGRESSION
from webapp import dispatch, logs
from webapp.analysis.models import MetricVerdict
from webapp.bisections import services as bisections
from webapp.bisections.models import Bisection
from webapp.comparisons import orchestrator
from webapp.comparisons.models import Comparison, ComparisonState, Target
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.states import Result
from webapp.sweeps import services as sweeps
from webapp.sweeps.models import Sweep
from webapp.trees.models import Tree
from webapp.watch import baselines
from webapp.watch.events import ZERO_SHA, PushEvent
from webapp.watch.models import Push, WatchPolicy

log = logs.get(__name__)
ACTIVE_STATES = orchestrator.ACTIVE


@dataclass(frozen=True)
class Received:
    """What became of a push event: `push` is the stored push that will be tested (None:
    nothing will be, and `reason` says why: an unwatched branch, a deletion, a tag)."""

    push: Push | None
    reason: str


def policy_of(tree: Tree) -> WatchPolicy | None:
    # A missing reverse one-to-one raises RelatedObjectDoesNotExist, an AttributeError.
    policy: WatchPolicy | None = getattr(tree, "watch", None)
    return policy


def watched(policy: WatchPolicy, event: PushEvent) -> str:
    """Why `event` is not tested under `policy`, or "" when it is."""
    if event.deleted:
        return f"{event.ref} was deleted: nothing to test"
    if event.is_tag:
        if not any(fnmatchcase(event.name, p) for p in policy.tag_patterns):
            patterns = ", ".join(policy.tag_patterns) or "none"
            return f"tag {event.name} ignored: tags are not watched (tag patterns: {patterns})"
        return ""
    if not any(fnmatchcase(event.name, p) for p in policy.branches):
        return f"branch {event.name} is not watched (watched: {', '.join(policy.branches)})"
    return ""


def receive_push(tree: Tree, event: PushEvent) -> Received:
    """Store a push of a watched ref and schedule its test after the coalescing window;
    anything else is refused with its reason and stores nothing."""
    policy = policy_of(tree)
    if policy is None or not policy.enabled:
        return Received(None, f"tree {tree.name} is not watched")
    why_not = watched(policy, event)
    if why_not:
        log.info("push ignored", tree=tree.name, ref=event.ref, after=event.after, reason=why_not)
        return Received(None, why_not)
    with transaction.atomic():
        push = Push.objects.create(
            tree=tree, branch=event.name, is_tag=event.is_tag, before=event.before,
            after=event.after, forced=event.forced, source=event.source,
            pusher_email=_valid_address(event.pusher_email),
        )  # fmt: skip
        log.info(
            "push state", push=push.pk, tree=tree.name, branch=push.branch, after=push.after,
            source=push.source, state=push.state,
        )  # fmt: skip
        dispatch.send_process_push(push.pk, delay=policy.coalesce_seconds)
    return Received(
        push,
        f"push {push.pk}: {push.branch} at {push.after[:12]} is tested after the "
        f"{policy.coalesce_seconds} s coalescing window",
    )


def _valid_address(address: str) -> str:
    """The pusher's address if it is one (a payload's word; a noreply or malformed one is
    dropped rather than refusing the push)."""
    try:
        validate_email(address)
    except ValidationError:
        return ""
    return address


def due(push: Push, policy: WatchPolicy) -> bool:
    return timezone.now() >= push.received_at + timedelta(seconds=policy.coalesce_seconds)


# --- testing a push ---------------------------------------------------------------------


def process_push(push_id: int) -> Push:
    """Decide a pending push once its window is over: superseded by a newer push of its
    branch, waiting for the tree's active limit, skipped (its head was tested already), or
    tested: its comparisons submitted, older queued ones cancelled, an anchor comparison
    added every `anchor_every` tested heads. Idempotent: a push already decided is left
    as it is, and one not yet due is left pending for the watch tick."""
    with transaction.atomic():
        push = Push.objects.select_for_update(of=("self",)).select_related("tree").get(pk=push_id)
        if push.state != Push.State.PENDING:
            return push
        policy = policy_of(push.tree)
        if policy is None or not policy.enabled:
            return _decide(push, Push.State.FAILED, "the tree is no longer watched")
        if not push.anchor and not due(push, policy):
            return push
        if not push.anchor and (newer := _newer(push)) is not None:
            return _decide(
                push, Push.State.SUPERSEDED,
                f"superseded by push {newer.pk} ({newer.after[:12]}), received within the "
                f"{policy.coalesce_seconds} s coalescing window",
            )  # fmt: skip
        active = active_comparisons(push.tree).count()
        if active >= policy.max_active:
            reason = (f"waiting: {active} of the tree's push comparisons are queued or "
                      f"running (limit {policy.max_active})")  # fmt: skip
            if push.reason != reason:
                push.reason = reason
                push.save(update_fields=["reason"])
                log.info("push waiting", push=push.pk, active=active, limit=policy.max_active)
            return push
        try:
            baseline, rule = (
                (push.baseline, push.baseline_rule) if push.anchor else baseline_for(push, policy)
            )
        except baselines.BaselineError as exc:
            return _decide(push, Push.State.FAILED, str(exc))
        if baseline == push.after:
            return _decide(push, Push.State.SKIPPED, f"nothing new: {rule}")
        push.baseline, push.baseline_rule = baseline, rule
        try:
            comparisons = [_submit(push, policy, t) for t in policy.targets.order_by("name")]
        except SubmissionError as exc:
            return _decide(push, Push.State.FAILED, f"{exc.field}: {exc.message}")
        if not comparisons:
            return _decide(push, Push.State.FAILED, "the watch policy names no target")
        push.comparisons.add(*comparisons)
        ids = ", ".join(f"#{c.pk}" for c in comparisons)
        swept = "" if push.anchor else _maybe_sweep(push, policy, comparisons[0].target)
        _decide(push, Push.State.TESTED, f"compared against {rule}: comparison {ids}{swept}")
        if not push.anchor:
            _cancel_superseded(push)
            _maybe_anchor(push, policy)
    return push


def _decide(push: Push, state: str, reason: str) -> Push:
    push.state, push.reason, push.decided_at = state, reason, timezone.now()
    push.save(update_fields=["state", "reason", "decided_at", "baseline", "baseline_rule"])
    log.info("push state", push=push.pk, tree=push.tree.name, branch=push.branch,
             after=push.after, state=state, reason=reason)  # fmt: skip
    return push


def _newer(push: Push) -> Push | None:
    """The newest later push of the same branch that is not given up on."""
    return (
        Push.objects.filter(
            tree=push.tree, branch=push.branch, is_tag=push.is_tag, anchor=False, pk__gt=push.pk
        )
        .exclude(state=Push.State.FAILED)
        .order_by("-pk")
        .first()
    )


def active_comparisons(tree: Tree) -> QuerySet[Comparison]:
    """The tree's push comparisons that are queued or running, its push sweeps' points
    among them."""
    pushed = Q(pushes__tree=tree) | Q(sweep_point__sweep__pushes__tree=tree)
    return Comparison.objects.filter(pushed, state__in=ACTIVE_STATES).distinct()


def tested_heads(tree: Tree, branch: str) -> QuerySet[Push]:
    """The branch's tested pushes (not anchors) whose comparisons did not end badly, newest
    first: a head whose build failed or that was cancelled is no baseline."""
    bad = Comparison.objects.filter(pushes=OuterRef("pk")).exclude(result__in=("", Result.OK))
    return (
        Push.objects.filter(tree=tree, branch=branch, anchor=False, state=Push.State.TESTED)
        .exclude(Exists(bad))
        .order_by("-received_at", "-pk")
    )


def baseline_for(push: Push, policy: WatchPolicy) -> tuple[str, str]:
    """The commit `push`'s head is compared against, and the rule that chose it."""
    previous = tested_heads(push.tree, push.branch).exclude(pk=push.pk).first()
    repo = baselines.repository(push.tree)
    if previous is None:
        sha = baselines.resolve(repo, policy.start_ref)
        return sha, f"the start ref {policy.start_ref} ({sha[:12]}): first tested push"
    if previous.after == push.after:
        return push.after, f"{push.after[:12]} was tested already (push {previous.pk})"
    fast_forward = baselines.is_ancestor(repo, previous.after, push.after)
    if fast_forward is None:  # no repository to ask: the sender's word
        fast_forward = not push.forced
    if fast_forward:
        rule = f"the previous tested head {previous.after[:12]} (push {previous.pk})"
        return previous.after, rule
    base = baselines.merge_base(repo, previous.after, push.after)
    if base is None:
        sha = baselines.resolve(repo, policy.start_ref)
        why = "a force-push with no history in common with the previous tested head"
        return sha, f"the start ref {policy.start_ref} ({sha[:12]}): {why} (push {previous.pk})"
    return base, (
        f"the merge base {base[:12]} of a force-push with the previous tested head "
        f"{previous.after[:12]} (push {previous.pk})"
    )


def _submit(push: Push, policy: WatchPolicy, target: Target) -> Comparison:
    return submit_comparison(_request(push, policy, target))


def _request(push: Push, policy: WatchPolicy, target: Target) -> ComparisonRequest:
    kind = "anchor comparison" if push.anchor else f"push {push.pk}"
    return ComparisonRequest(
        tree=push.tree.name, base_ref=push.baseline, head_ref=push.after,
        benchmarks=tuple(policy.benchmarks), target=target.name, min_runs=policy.min_runs,
        max_runs=policy.max_runs, threshold_pct=policy.threshold_pct,
        trigger=Comparison.Trigger.WEBHOOK,
        requested_by=f"{kind} of {push.tree.name}:{push.branch} ({push.get_source_display()})",
    )  # fmt: skip


def _maybe_sweep(push: Push, policy: WatchPolicy, target: Target) -> str:
    """The policy's sweep of the head against its baseline, on `target`, every
    `sweep_every`-th tested head of the branch (this one counted): what the push's reason
    adds, "; sweep #N", or why it was refused (the comparisons stand: a sweep is extra)."""
    if not policy.sweep_axis:
        return ""
    if (_tested(push).count() + 1) % policy.sweep_every:  # this one is decided after
        return ""
    # A variant axis varies one benchmark's parameter: the policy's first benchmark.
    variant = policy.sweep_axis == Sweep.Axis.VARIANT
    pair = dataclasses.replace(
        _request(push, policy, target), benchmarks=tuple(policy.benchmarks[:1] if variant
                                                         else policy.benchmarks),
    )  # fmt: skip
    try:
        sweep = sweeps.submit_sweep(sweeps.SweepRequest(
            pair=pair, axis=policy.sweep_axis, values=tuple(policy.sweep_values),
            parameter=policy.sweep_parameter,
        ))  # fmt: skip
    except SubmissionError as exc:
        log.info("push sweep refused", push=push.pk, field=exc.field, reason=exc.message[:200])
        return f"; sweep refused: {exc.field}: {exc.message}"
    push.sweeps.add(sweep)
    return f"; sweep #{sweep.pk}"


def _cancel_superseded(push: Push) -> None:
    """Cancel the still-queued comparisons of the branch's older pushes, and their sweeps
    none of whose points has started: their heads are superseded by this one."""
    why = f"superseded by push {push.pk} ({push.after[:12]})"
    older = Q(pushes__tree=push.tree, pushes__branch=push.branch, pushes__anchor=False,
              pushes__pk__lt=push.pk)  # fmt: skip
    for c in Comparison.objects.filter(older, state=ComparisonState.QUEUED).distinct():
        if orchestrator.cancel(c.pk, why):
            log.info("comparison superseded", comparison=c.pk, push=push.pk)
    for sweep in Sweep.objects.filter(older, finished_at__isnull=True).distinct():
        if not sweep.points.exclude(comparison__state=ComparisonState.QUEUED).exists():
            sweeps.cancel(sweep, by="watch", how=f"as {why}")


def _tested(push: Push) -> QuerySet[Push]:
    """The tested heads of `push`'s branch (not anchors): what `sweep_every` and
    `anchor_every` count."""
    return Push.objects.filter(
        tree=push.tree, branch=push.branch, anchor=False, state=Push.State.TESTED
    )


def _maybe_anchor(push: Push, policy: WatchPolicy) -> Push | None:
    """Every `anchor_every`-th tested head of the branch is also compared with the anchor."""
    if not policy.anchor_ref or not policy.anchor_every:
        return None
    if _tested(push).count() % policy.anchor_every:
        return None
    return request_anchor(push, policy)


def request_anchor(push: Push, policy: WatchPolicy | None = None) -> Push:
    """An anchor comparison of `push`'s head against the policy's anchor ref (also on
    demand: the admin's action). It is a push of its own (anchor=True), tested at once."""
    policy = policy or policy_of(push.tree)
    if policy is None or not policy.anchor_ref:
        raise baselines.BaselineError(f"tree {push.tree.name} has no anchor ref")
    sha = baselines.resolve(baselines.repository(push.tree), policy.anchor_ref)
    anchor = Push.objects.create(
        tree=push.tree, branch=push.branch, is_tag=push.is_tag, before=push.before,
        after=push.after, source=Push.Source.ANCHOR, anchor=True, baseline=sha,
        baseline_rule=f"the anchor {policy.anchor_ref} ({sha[:12]})",
    )  # fmt: skip
    log.info("push state", push=anchor.pk, tree=push.tree.name, branch=push.branch,
             after=push.after, state=anchor.state, anchor=policy.anchor_ref)  # fmt: skip
    dispatch.send_process_push(anchor.pk)
    return anchor


# --- the beat's watch tick --------------------------------------------------------------


def watch_tick() -> dict[str, int]:
    """Periodic: poll the trees that asked for it, take up the pending pushes that are due
    (a lost message, or one waiting for the active limit), and look for change points on
    branches whose tested heads have finished since the last tick."""
    polled = sum(poll_tree(p) for p in _polls_due())
    pending = list(Push.objects.filter(state=Push.State.PENDING).order_by("pk")
                   .values_list("pk", flat=True))  # fmt: skip
    for pk in pending:
        process_push(pk)
    checked = check_finished_heads()
    return {"polled": polled, "pending": len(pending), "checked": checked}


def _polls_due() -> list[WatchPolicy]:
    now = timezone.now()
    polled = WatchPolicy.objects.filter(enabled=True, poll_seconds__gt=0).select_related("tree")
    return [
        p for p in polled
        if p.polled_at is None or now >= p.polled_at + timedelta(seconds=p.poll_seconds)
    ]  # fmt: skip


def poll_tree(policy: WatchPolicy) -> int:
    """`git ls-remote` the tree and feed every watched ref whose head moved since the last
    push rcubench knows of through receive_push, as a webhook would. Returns how many."""
    WatchPolicy.objects.filter(pk=policy.pk).update(polled_at=timezone.now())
    try:
        heads = baselines.ls_remote(policy.tree.url)
    except baselines.BaselineError as exc:
        log.warning("poll failed", tree=policy.tree.name, error=str(exc))
        return 0
    fed = 0
    for ref, sha in heads.items():
        name = ref.split("/", 2)[2]
        last = (Push.objects.filter(tree=policy.tree, branch=name, anchor=False,
                                    is_tag=ref.startswith("refs/tags/"))
                .order_by("-pk").values_list("after", flat=True).first())  # fmt: skip
        if last == sha:
            continue
        event = PushEvent(ref=ref, before=last or ZERO_SHA, after=sha, source=Push.Source.POLL)
        if receive_push(policy.tree, event).push is not None:
            fed += 1
    return fed


def on_comparison_done(comparison_id: int) -> Bisection | None:
    """Bisect a tested head's regression where its tree's policy asks (bisect_regressions):
    when the head's comparison (not an anchor's) ended with a primary regression, its first
    such statistic, once. What was started, or why nothing was (the gate, a range without
    commits), is added to the push's reason and logged. Returns the bisection started (or
    joined), None otherwise. Idempotent: a second call adds nothing."""
    push = (
        Push.objects.filter(comparisons=comparison_id, anchor=False, state=Push.State.TESTED)
        .select_related("tree")
        .first()
    )
    policy = policy_of(push.tree) if push is not None else None
    if push is None or policy is None or not policy.enabled or not policy.bisect_regressions:
        return None
    row = (
        MetricVerdict.objects.filter(comparison_id=comparison_id, is_primary=True,
                                     verdict=REGRESSION)
        .order_by("benchmark", "metric", "statistic")
        .first()
    )  # fmt: skip
    if row is None:
        return None
    earlier = Bisection.objects.filter(comparison_id=comparison_id,
                                       trigger=Bisection.Trigger.WATCH).first()  # fmt: skip
    if earlier is not None:  # started by an earlier call: never a second one once it ended
        return earlier
    started: Bisection | None = None
    try:
        started, _ = bisections.start(
            comparison_id, statistic=(row.benchmark, row.metric, row.statistic),
            trigger=Bisection.Trigger.WATCH,
        )  # fmt: skip
        note = f"bisection #{started.pk} of comparison #{comparison_id}"
    except bisections.BisectionRefused as exc:
        note = f"comparison #{comparison_id} not bisected: {exc}"
    # The push's row, not this call, says whether it was done: the task may run twice.
    if Push.objects.filter(pk=push.pk, reason__contains=note).exists():
        return started
    Push.objects.filter(pk=push.pk).update(reason=Concat(F("reason"), Value(f"; {note}")))
    log.info("push bisection", push=push.pk, tree=push.tree.name, comparison=comparison_id,
             bisection=started.pk if started else None, reason=note)  # fmt: skip
    return started


def check_finished_heads() -> int:
    """Change points of the branches whose tested heads' comparisons have all ended since
    they were last looked at (webapp.watch.history). Returns how many pushes."""
    from webapp.watch import history  # the history reads the analysis; keep imports light

    ready = (
        Push.objects.filter(state=Push.State.TESTED, anchor=False, checked_at__isnull=True)
        .exclude(comparisons__state__in=ACTIVE_STATES)
        .select_related("tree")
        .order_by("pk")
    )
    branches: set[tuple[int, str]] = set()
    pushes = list(ready)
    for push in pushes:
        if (push.tree_id, push.branch) not in branches:
            branches.add((push.tree_id, push.branch))
            history.record_change_points(push.tree, push.branch)
    Push.objects.filter(pk__in=[p.pk for p in pushes]).update(checked_at=timezone.now())
    return len(pushes)
