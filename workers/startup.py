"""What a worker does when it starts, before it takes a task."""

from typing import Any

from celery.signals import worker_ready


@worker_ready.connect
def destroy_leftover_domains(sender: Any = None, **_: Any) -> None:
    """A worker killed mid-run leaves its VM running: destroy those of the targets this
    worker serves when it starts again (the reaper has ended their runs as lost)."""
    from django.conf import settings

    from webapp.comparisons.services import leftover_prefix
    from workers.vm.runner import destroy_leftovers

    queues = [q.name for q in sender.app.amqp.queues.consume_from.values()] if sender else []
    for queue in queues:
        if queue.startswith("bench."):
            destroy_leftovers(settings.LIBVIRT_URI, leftover_prefix(queue.removeprefix("bench.")))
