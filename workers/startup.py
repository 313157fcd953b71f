"""What a worker does when it starts, before it takes a task."""

from typing import Any

from celery.signals import worker_ready
from django.conf import settings
from django.db import connection

from engine.vm.runner import destroy_leftovers
from webapp.comparisons.models import Target
from webapp.comparisons.runs import leftover_prefix


@worker_ready.connect
def destroy_leftover_domains(sender: Any = None, **_: Any) -> None:
    """A worker killed mid-run leaves its VM running: destroy those of the targets this
    worker serves when it starts again (the reaper has ended their runs as lost). A lab
    pool has no VMs: its hosts are taken over and power-cycled by the next run's claim."""
    queues = [q.name for q in sender.app.amqp.queues.consume_from.values()] if sender else []
    names = [q.removeprefix("bench.") for q in queues if q.startswith("bench.")]
    labs = set(Target.objects.filter(name__in=names, kind=Target.Kind.LAB)
               .values_list("name", flat=True))  # fmt: skip
    connection.close()  # not inherited by pool processes forked later
    for name in names:
        if name not in labs:
            destroy_leftovers(settings.LIBVIRT_URI, leftover_prefix(name))
