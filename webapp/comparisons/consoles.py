"""A run's console file on the worker host that ran it, and its removal with the run.

Light on purpose (no VM runner, no libvirt): the app's ready() imports it in every process
to connect the delete handler.
"""

import shutil
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from webapp import logs
from webapp.comparisons.models import Run

log = logs.get(__name__)


def console_dir(run_id: int) -> Path:
    """Where a run's console file is written (on the host of the worker that ran it)."""
    return Path(str(settings.RCUBENCH_DATA_DIR)) / "runs" / str(run_id)


@receiver(post_delete, sender=Run, dispatch_uid="rcubench-run-console-dir")
def _drop_console_dir(sender: type[Run], instance: Run, **_: Any) -> None:
    """A deleted run takes its console file with it (once the delete is committed)."""
    path = console_dir(instance.pk)
    transaction.on_commit(lambda: _remove(path))


def prune_console_dirs() -> int:
    """Remove the console dirs of runs that do not exist any more (deleted in a process
    that does not see this host's files, or while it was down); return how many."""
    root = Path(str(settings.RCUBENCH_DATA_DIR)) / "runs"
    try:
        dirs = {int(p.name): p for p in root.iterdir() if p.name.isascii() and p.name.isdigit()}
    except FileNotFoundError:
        return 0
    alive = set(Run.objects.filter(pk__in=list(dirs)).values_list("pk", flat=True))
    gone = {pk: path for pk, path in dirs.items() if pk not in alive}
    for path in gone.values():
        _remove(path)
    if gone:
        log.info("console dirs pruned", count=len(gone), runs=sorted(gone), root=str(root))
    return len(gone)


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)
