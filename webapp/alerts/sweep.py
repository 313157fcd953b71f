"""The mail of a sweep whose B scales worse than A: sent like a regression's.

notify_sweep is what the notify_sweep task runs once webapp.sweeps.services concluded a
sweep as scales-worse. Its recipients are those a regression of its first point's
comparison would have (services.comparison_recipients: the tree's subscribers to
regressions of its benchmarks, the series' authors; a restricted sweep only to accounts
that may see it); an opted-out address gets a `skipped` row. One Alert row per recipient,
unique on (sweep, kind, recipient): a second call queues nothing new. Each point's own
comparison is never mailed (trigger "sweep"), so this is the one mail of a sweep.
"""

from webapp.alerts import messages
from webapp.alerts.models import Alert
from webapp.alerts.services import comparison_recipients, message_id, queue_alerts, skipped_fields
from webapp.comparisons.detectable import two_digits
from webapp.comparisons.models import Comparison
from webapp.comparisons.names import kernel_names
from webapp.sweeps.models import Sweep
from webapp.sweeps.summary import summary
from webapp.text import storable

SCALES_WORSE = "scales-worse"


def first_point(sweep: Sweep) -> Comparison:
    """The comparison of the sweep's first point: its tree, kernels and visibility are
    every point's."""
    return Comparison.objects.select_related(
        "revision_a__tree", "revision_b__tree", "revision_b__series", "target"
    ).get(sweep_point__sweep=sweep, sweep_point__position=0)


def facts(sweep: Sweep) -> messages.SweepFacts:
    s = summary(sweep)
    c = first_point(sweep)
    a, b = kernel_names(c)
    points = []
    for p in s.points:
        shift = ""
        if p.shift_pct is not None:
            shift = f"{p.shift_pct:+.2f}%"
            if p.ci_low_pct is not None and p.ci_high_pct is not None:
                shift += f" [{two_digits(p.ci_low_pct)}, {two_digits(p.ci_high_pct)}]"
        points.append((p.value, p.verdict or p.state, shift))
    kernels = f"{b.text} against {a.text}"
    if c.cmdline_b != c.cmdline_a:
        kernels += f" (B's command line: {c.cmdline_b})"
    return messages.SweepFacts(
        sweep_id=sweep.pk, tree=c.revision_a.tree.name, kernels=kernels,
        benchmark=s.benchmark, statistic=f"{s.metric} {s.statistic}".strip(),
        axis=s.axis_label, sentence=s.sentence, points=tuple(points),
    )  # fmt: skip


def notify_sweep(sweep_id: int) -> list[int]:
    """Queue the sweep's mail, once per recipient; [] unless B scales worse."""
    sweep = Sweep.objects.get(pk=sweep_id)
    if not sweep.done or sweep.verdict != SCALES_WORSE:
        return []
    kind = Alert.Kind.REGRESSION
    subject = messages.sweep_subject(facts(sweep))
    rows = [
        Alert(sweep=sweep, kind=kind, recipient=r.address, reason=r.reason[:200],
              subject=storable(subject), message_id=message_id(f"s{sweep.pk}", kind, r.address),
              **skipped_fields(r))
        for r in comparison_recipients(first_point(sweep), kind)
    ]  # fmt: skip
    return queue_alerts(rows, Alert.objects.filter(sweep=sweep, kind=kind), sweep=sweep.pk)
