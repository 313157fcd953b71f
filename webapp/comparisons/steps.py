"""The orchestrator's smallest step, shared by the verdict's runs (orchestrator.py) and the
diagnosis's (diagnostic_runs.py): one run row added, logged and sent."""

from django.db.models import Max, Q
from django.utils import timezone

from webapp import dispatch
from webapp.comparisons.models import Comparison, Run
from webapp.states import log_state


def add_run(
    c: Comparison, benchmark: str, side: str, retry_of: Run | None = None,
    pairs_with: Run | None = None, traced: bool = False,
) -> Run:  # fmt: skip
    """A run row of the comparison, next in its order and its side's index, logged and sent
    to the target's queue (`retry_of`: the run it replaces; `pairs_with`: the other side's
    replacement it runs beside; `traced`: a diagnostic run)."""
    last = Run.objects.filter(comparison=c).aggregate(
        order=Max("order"), index=Max("index", filter=Q(benchmark=benchmark, side=side))
    )
    run = Run.objects.create(
        comparison=c, benchmark=benchmark, side=side, retry_of=retry_of,
        index=0 if last["index"] is None else last["index"] + 1,
        order=0 if last["order"] is None else last["order"] + 1,
        dispatched_at=timezone.now(), traced=traced,
    )  # fmt: skip
    why: dict[str, object] = {"retry_of": retry_of.pk} if retry_of else {}
    if traced:
        why["traced"] = True
    if pairs_with:  # an extra run beside another side's replacement
        why["pairs_with_replacement_of"] = pairs_with.pk
    log_state(run, run.state, comparison=c.pk, benchmark=benchmark, side=side, index=run.index,
              order=run.order, **why)  # fmt: skip
    dispatch.send_run(run.pk, c.target.queue, lab=c.target.is_lab)
    return run
