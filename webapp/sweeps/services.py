"""Submit, conclude and cancel sweeps.

A sweep is one A/B pair (a ComparisonRequest, as any front end builds it) at every point of
one axis: each point is submitted through the one way in (submit_comparison) with its
target, command line or benchmark (a variant: benchmarks/presets.py) changed and the
sweep's cohort, in one transaction, so a refused point leaves nothing of the sweep behind.
When the last point ends, `conclude` stores the scaling and interaction verdicts
(summary.judge) and mails the sweep if B scales worse.
"""

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from benchmarks import presets, registry
from engine.vm.topology import Topology, TopologyError, parse_topology
from stats.sweeps import SCALES_WORSE
from webapp import access, dispatch, logs
from webapp.access import AnyUser
from webapp.comparisons import orchestrator
from webapp.comparisons.models import Comparison, ComparisonState, Target
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.comparisons.targets import TopologyRefused, derived_target
from webapp.sweeps.models import Sweep, SweepPoint

if TYPE_CHECKING:
    from django.db.models import QuerySet

log = logs.get(__name__)
PARAMETER = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*")  # a kernel parameter's name
VALUE = re.compile(r"[A-Za-z0-9_.,:+-]{1,64}")  # one value of it: no spaces, no quotes


@dataclass(frozen=True)
class SweepRequest:
    """What a user asks for: the pair (`pair`: its target is the sweep's base target) and
    the axis. `values` are topologies ("SxCxT" or a vCPU count, engine/vm/topology.py) for
    the topology axis, or `parameter`'s values for the cmdline axis."""

    pair: ComparisonRequest
    axis: str
    values: tuple[str, ...]
    parameter: str = ""
    # None: log-log for a topology or a variant parameter that is a count (nwriters),
    # linear otherwise.
    log_axis: bool | None = None


def submit_sweep(req: SweepRequest) -> Sweep:
    """Validate `req`, store the sweep and its points' comparisons, and start them."""
    _validate(req)
    with transaction.atomic():
        base = _base_target(req.pair.target)
        sweep = Sweep.objects.create(
            axis=req.axis, parameter=req.parameter, values=list(req.values),
            log_axis=_counts(req) if req.log_axis is None else req.log_axis,
            base_target=base, benchmark=req.pair.benchmarks[0] if req.pair.benchmarks else "",
            trigger=req.pair.trigger, requested_by=req.pair.requested_by,
            submitted_by_id=req.pair.submitted_by,
        )  # fmt: skip
        for position, value in enumerate(req.values):
            point, x = _point_request(req, base, value, sweep.cohort)
            SweepPoint.objects.create(
                sweep=sweep, position=position, value=value, x=x,
                comparison=submit_comparison(point),
            )  # fmt: skip
        log.info("sweep state", sweep=sweep.pk, state="queued", axis=req.axis,
                 parameter=req.parameter, values=list(req.values), target=base.name)  # fmt: skip
    return sweep


def _validate(req: SweepRequest) -> None:
    if req.axis not in Sweep.Axis.values:
        choices = ", ".join(Sweep.Axis.values)
        raise SubmissionError("axis", f"axis must be one of {choices}, got {req.axis!r}")
    most = settings.RCUBENCH_SWEEP_MAX_POINTS
    if not 2 <= len(req.values) <= most:
        raise SubmissionError("values", f"a sweep has 2 to {most} points, got {len(req.values)}")
    if len(set(req.values)) != len(req.values):
        raise SubmissionError("values", "a value is given twice")
    for value in req.values:
        if not VALUE.fullmatch(value):
            raise SubmissionError(
                "values", f"bad value {value!r}: letters, digits and _.,:+- only, at most 64"
            )
    if req.axis == Sweep.Axis.TOPOLOGY:
        if req.parameter:
            raise SubmissionError("parameter", "a topology sweep takes no boot parameter")
        return
    if req.axis == Sweep.Axis.VARIANT:
        _validate_variant(req)
        return
    if not PARAMETER.fullmatch(req.parameter):
        raise SubmissionError(
            "parameter", f"bad boot parameter name {req.parameter!r} (e.g. rcutree.use_softirq)"
        )
    for side, extra in (("A", req.pair.cmdline_a), ("B", req.pair.cmdline_b)):
        if any(word.split("=", 1)[0] == req.parameter for word in extra.split()):
            raise SubmissionError(
                f"cmdline_{side.lower()}",
                f"side {side} command line sets {req.parameter} already: the sweep sets it",
            )


def _validate_variant(req: SweepRequest) -> None:
    """A variant sweep: one registered benchmark that declares `parameter` sweepable, and a
    whole number within its reviewed bounds at each point (benchmarks/presets.py)."""
    if len(req.pair.benchmarks) != 1:
        raise SubmissionError("benchmarks", "a variant sweep runs one benchmark, whose "
                              f"parameter it varies; got {len(req.pair.benchmarks)}")  # fmt: skip
    name = req.pair.benchmarks[0]
    try:
        spec = registry.get(name).spec
    except KeyError as exc:  # it names the known ones
        raise SubmissionError("benchmarks", str(exc.args[0])) from None
    if req.parameter not in spec.sweepable:
        sweepable = [b.spec for b in registry.BENCHMARKS.values() if b.spec.sweepable]
        offer = "; ".join(f"{b.name}: {', '.join(b.sweepable)}" for b in sweepable)
        raise SubmissionError("parameter", f"{name} does not sweep {req.parameter[:64]!r}; "
                              f"sweepable: {offer}")  # fmt: skip
    points = []
    for value in req.values:  # presets.variant holds each to REVIEWED's bounds
        try:
            if not value.isdigit():  # int() would take "+4" and " 4", and the bounds say why
                raise ValueError(presets.bounds_error(req.parameter, value))
            points.append(registry.variant_of(name, req.parameter, int(value)).name)
        except ValueError as exc:
            raise SubmissionError("values", str(exc)) from None
    if len(set(points)) != len(points):
        raise SubmissionError("values", "two values are the same variant")


def _counts(req: SweepRequest) -> bool:
    """Whether the axis is a count, whose slope is a growth exponent (log-log scales)."""
    if req.axis == Sweep.Axis.VARIANT:
        return req.parameter in presets.COUNTS
    return req.axis == Sweep.Axis.TOPOLOGY


def _base_target(name: str) -> Target:
    base = Target.objects.filter(name=name, base__isnull=True).first()
    if base is None:  # submit_comparison names the problem (unknown, disabled, unserved)
        return Target(name=name)
    return base


def _point_request(
    req: SweepRequest, base: Target, value: str, cohort: str
) -> tuple[ComparisonRequest, float | None]:
    """The point's comparison: the pair on the point's target or with the parameter set
    on both sides; and the point's place on the axis (vCPUs, or the value as a number)."""
    pair = dataclasses.replace(req.pair, cohort=cohort, trigger=Comparison.Trigger.SWEEP)
    if req.axis == Sweep.Axis.TOPOLOGY:
        if base.pk is None:
            raise SubmissionError("target", f"no target named {base.name!r}")
        shape = Topology(base.sockets, base.cores, base.threads)
        try:
            target = derived_target(base, parse_topology(value, shape))
        except (TopologyError, TopologyRefused) as exc:
            raise SubmissionError("values", f"{value}: {exc}") from None
        return dataclasses.replace(pair, target=target.name), float(target.cpus)
    if req.axis == Sweep.Axis.VARIANT:  # both sides run the variant: one benchmark each
        spec = registry.variant_of(pair.benchmarks[0], req.parameter, int(value))
        return dataclasses.replace(pair, benchmarks=(spec.name,)), float(value)
    setting = f"{req.parameter}={value}"
    point = dataclasses.replace(
        pair, cmdline_a=f"{pair.cmdline_a} {setting}".strip(),
        cmdline_b=f"{pair.cmdline_b} {setting}".strip(),
    )  # fmt: skip
    return point, _number(value)


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def on_comparison_done(comparison_id: int) -> int | None:
    """A comparison ended: conclude its sweep if it was the last point (the sweep's id)."""
    point = SweepPoint.objects.filter(comparison_id=comparison_id).first()
    if point is None:
        return None
    conclude(point.sweep_id)
    return point.sweep_id


def conclude(sweep_id: int) -> bool:
    """Store the sweep's verdicts once every point has ended (idempotent: True the once it
    concludes). A point that did not end ok leaves the slope to the others if two remain."""
    # The judging reads every point's runs: outside the row lock, then stored under it.
    from webapp.sweeps.summary import judge

    sweep = Sweep.objects.get(pk=sweep_id)
    points = SweepPoint.objects.filter(sweep=sweep).select_related("comparison")
    if sweep.done or any(p.comparison.state != ComparisonState.DONE for p in points):
        return False
    judged = judge(sweep)
    with transaction.atomic():
        locked = Sweep.objects.select_for_update().get(pk=sweep_id)
        if locked.done:
            return False
        locked.verdict, locked.interaction_verdict = judged.verdict, judged.interaction_verdict
        locked.result, locked.error_message = judged.result, judged.error
        locked.metric, locked.statistic = judged.metric, judged.statistic
        locked.finished_at = timezone.now()
        locked.save(update_fields=["verdict", "interaction_verdict", "result", "metric",
                                   "statistic", "error_message", "finished_at"])  # fmt: skip
        if locked.verdict == SCALES_WORSE:  # mailed like a regression (alerts/sweep.py)
            dispatch.send_notify_sweep(sweep_id)
        log.info("sweep state", sweep=sweep_id, state="done", verdict=locked.verdict,
                 interaction=locked.interaction_verdict, error=judged.error[:200])  # fmt: skip
    return True


def conclude_unfinished() -> int:
    """Conclude every sweep whose points all ended (the periodic kick: a lost message)."""
    pending = Sweep.objects.filter(finished_at__isnull=True)
    return sum(conclude(pk) for pk in pending.values_list("pk", flat=True))


def visible_sweeps(user: AnyUser) -> "QuerySet[Sweep]":
    """The sweeps `user` may see: those whose points' comparisons they see (a sweep's points
    share one tree and one visibility)."""
    seen = access.visible_comparisons(user).values("pk")
    return Sweep.objects.filter(points__position=0, points__comparison__in=seen).select_related(
        "base_target"
    )


def cancel_for(user: AnyUser, sweep_id: int) -> Sweep:
    """Cancel every unfinished point, where `user` may cancel its comparisons (else
    PermissionDenied; Sweep.DoesNotExist where they may not see it)."""
    sweep = visible_sweeps(user).get(pk=sweep_id)
    first = sweep.points.select_related("comparison__revision_a__tree").get(position=0)
    if not access.can_cancel(user, first.comparison):
        raise PermissionDenied("you may not cancel this sweep")
    cancel(sweep, by=user.get_username(), how=f"by {user.get_username()}")
    return sweep


def cancel(sweep: Sweep, *, by: str, how: str) -> int:
    """Cancel every unfinished point of `sweep` and log it once ("sweep state", cancelling,
    `by` whom: a username, or "cli" for the operator). No permission check: users come
    through cancel_for, the operator's command line may cancel any sweep (as compare
    --cancel may any comparison). `how` ends each point's reason ("by ada", "from the
    command line"). Returns how many points this ended."""
    reason = f"sweep #{sweep.pk} cancelled {how}".strip()
    ended = 0
    for point in sweep.points.filter(comparison__state__in=orchestrator.ACTIVE):
        ended += orchestrator.cancel(point.comparison_id, reason)
    log.info("sweep state", sweep=sweep.pk, state="cancelling", by=by, points=ended)
    return ended
