"""The two moves no person makes: fixed when the branch comes back, inactive when it goes on.

Both read the branch's history (webapp.watch.history: one point per tested head, the median
of its B runs' primary statistic, over every comparison: the rules see what the tree's
members see) after the regression's first bad head (its culprit):
- fixed: the newest FIXED_HEADS heads all lie within the threshold of the baseline
  (_baseline: the baseline head's median, the change point's median before it, the last
  head before the culprit, or the regressed comparison's A median). Several heads, not
  one: a single head's median is a few runs.
- inactive: INACTIVE_PUSHES later heads were tested and none of them reported it again
  (their comparisons' verdicts on the metric are not regressions), and it is not fixed.
Only regressions found on a watched branch have a history; a series' regression moves by
hand only. The watch tick runs them, for branches with heads checked since the last time.
"""

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from webapp import logs
from webapp.comparisons.models import Comparison
from webapp.regressions.models import OPEN, Regression, RegressionState, Via
from webapp.regressions.services import REPORTED, Actor, TransitionRefused, transition
from webapp.watch.history import HistoryPoint, Series, build_series, history_pushes
from webapp.watch.models import Push

log = logs.get(__name__)
RULE = Actor(via=Via.RULE)


def apply_rules() -> int:
    """Fixed and inactive for the open regressions of branches with newly checked heads;
    returns how many moved."""
    moved = 0
    open_regs = Regression.objects.filter(state__in=OPEN).exclude(branch="")
    for tree_id, branch in set(open_regs.values_list("tree_id", "branch")):
        regs = list(open_regs.filter(tree_id=tree_id, branch=branch).select_related("tree"))
        since = min((r.ruled_at for r in regs if r.ruled_at), default=None)
        newest = Push.objects.filter(tree_id=tree_id, branch=branch).aggregate(
            at=Max("checked_at")
        )["at"]  # fmt: skip
        if newest is None or (since is not None and newest <= since):
            continue
        series = {s.key: s for s in build_series(history_pushes(regs[0].tree, branch),
                                                 Comparison.objects.all())}  # fmt: skip
        for reg in regs:
            s = series.get((branch, reg.target_id, reg.benchmark, reg.metric))
            moved += s is not None and _rule(reg, s)
        Regression.objects.filter(pk__in=[r.pk for r in regs]).update(ruled_at=timezone.now())
    return moved


def _after(points: list[HistoryPoint], sha: str) -> list[HistoryPoint] | None:
    """The points after the culprit's (None: the culprit is not in the history)."""
    shas = [p.sha for p in points]
    return points[shas.index(sha) + 1 :] if sha in shas else None


def _baseline(reg: Regression, s: Series) -> float | None:
    """The median before the regression: the baseline head's point, else the change
    point's median before it, else the last head before the culprit, else A's median."""
    shas = [p.sha for p in s.points]
    if reg.baseline in shas:
        return s.points[shas.index(reg.baseline)].median
    if reg.change_point is not None:
        return reg.change_point.before_median
    if reg.culprit in shas and shas.index(reg.culprit) > 0:
        return s.points[shas.index(reg.culprit) - 1].median
    if reg.comparison is not None:
        row = reg.comparison.verdicts.filter(
            benchmark=reg.benchmark, metric=reg.metric, statistic=reg.statistic
        ).first()  # fmt: skip
        return row.median_a if row else None
    return None


def _within(value: float, base: float, s: Series, reg: Regression) -> bool:
    threshold = s.threshold if s.threshold is not None else reg.threshold_pct
    if s.threshold is not None and not s.threshold_relative:
        return abs(value - base) <= threshold
    return base != 0 and abs(value / base - 1) * 100 <= threshold


def _rule(reg: Regression, s: Series) -> bool:
    later = _after(s.points, reg.culprit)
    base = _baseline(reg, s)
    if later is None or base is None:
        return False
    clean = sum(p.verdict not in REPORTED for p in later)
    if clean != reg.clean_pushes:
        Regression.objects.filter(pk=reg.pk).update(clean_pushes=clean)
    heads = later[-settings.RCUBENCH_REGRESSION_FIXED_HEADS :]
    try:
        if len(heads) == settings.RCUBENCH_REGRESSION_FIXED_HEADS and all(
            _within(p.median, base, s, reg) for p in heads
        ):
            newest = heads[-1]
            transition(
                reg.pk, RegressionState.FIXED, RULE,
                fixed_by=f"{newest.sha[:12]} (comparison {newest.comparison_id})",
                note=f"the newest {len(heads)} tested heads are within "
                f"{reg.threshold_pct:g}% of the baseline's {base:.6g}",
            )  # fmt: skip
            return True
        if clean >= settings.RCUBENCH_REGRESSION_INACTIVE_PUSHES:
            transition(
                reg.pk, RegressionState.INACTIVE, RULE,
                note=f"{clean} heads tested since without reporting it again",
            )  # fmt: skip
            return True
    except TransitionRefused as exc:  # moved by a person meanwhile
        log.info("regression rule skipped", regression=reg.pk, reason=str(exc))
    return False
