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
from webapp.sweeps.models import Sweep
from webapp.sweeps.summary import first_point, mail_facts
from webapp.text import storable

SCALES_WORSE = "scales-worse"


def notify_sweep(sweep_id: int) -> list[int]:
    """Queue the sweep's mail, once per recipient; [] unless B scales worse."""
    sweep = Sweep.objects.get(pk=sweep_id)
    if not sweep.done or sweep.verdict != SCALES_WORSE:
        return []
    kind = Alert.Kind.REGRESSION
    subject = messages.sweep_subject(mail_facts(sweep))
    rows = [
        Alert(sweep=sweep, kind=kind, recipient=r.address, reason=r.reason[:200],
              subject=storable(subject), message_id=message_id(f"s{sweep.pk}", kind, r.address),
              **skipped_fields(r))
        for r in comparison_recipients(first_point(sweep), kind)
    ]  # fmt: skip
    return queue_alerts(rows, Alert.objects.filter(sweep=sweep, kind=kind), sweep=sweep.pk)
