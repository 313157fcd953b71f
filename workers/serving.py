"""Bench workers serve targets by name patterns: a Target added (or enabled) in the admin is
served without restarting or reconfiguring any worker.

Which workers: a worker serves targets when it starts consuming at least one bench queue
(bench.<target>), that is, when started without -Q (every declared queue: control, build,
analysis and bench.<each of RCUBENCH_BENCH_TARGETS>) or with a -Q naming a bench queue. A
worker started only on control, build or analysis queues never does.

What it serves: every enabled Target whose name matches one of RCUBENCH_SERVE's fnmatch
patterns (e.g. "qemu-*,lab-power9"); when RCUBENCH_SERVE is unset, the targets of the bench
queues it started with. At start, and then every RCUBENCH_SERVE_POLL_SECONDS, a thread reads
the Target table and records (ServedQueue, webapp/comparisons/serving.py) the queues the
worker consumes; the consumer's event loop then starts consuming the queue of each target
that newly matches and cancels the queue of each target disabled, deleted or no longer
matching. The database work runs in that thread, not in the event loop, so a busy worker
(--pool solo runs its task in the loop) still records that it serves its queues. A worker
that stops deletes its rows; one killed goes stale after three polls.

The web app is imported inside functions only (this is worker start-up code, as
workers/startup.py); the patterns' logic is plain Python.
"""

import threading
from typing import Any

from celery import bootsteps
from django.conf import settings
from django.db import close_old_connections, connection

from webapp import logs

BENCH_QUEUE_PREFIX = "bench."
APPLY_INTERVAL = 1.0  # how often the event loop applies what the thread last read

log = logs.get(__name__)


def bench_queues(queue_names: Any) -> set[str]:
    return {name for name in queue_names if name.startswith(BENCH_QUEUE_PREFIX)}


def serve_patterns(configured: list[str] | None, start_queues: set[str]) -> list[str]:
    """RCUBENCH_SERVE, or when unset the names of the targets the worker started with."""
    if configured is not None:
        return [p.strip() for p in configured if p.strip()]
    return sorted(q.removeprefix(BENCH_QUEUE_PREFIX) for q in start_queues)


class ServeTargets(bootsteps.StartStopStep):
    """Consumer bootstep: keep the worker's bench queues those of the targets it serves."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, c: Any, **kwargs: Any) -> None:
        super().__init__(c, **kwargs)
        start = bench_queues(c.app.amqp.queues.consume_from)
        self.enabled = bool(start)
        self.patterns = serve_patterns(settings.RCUBENCH_SERVE, start)
        self.interval = float(settings.RCUBENCH_SERVE_POLL_SECONDS)
        self.wanted: set[str] | None = None  # the last poll's queues (None: none read yet)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.tref: Any = None
        self.hostname = ""

    def start(self, c: Any) -> None:
        self.hostname = c.hostname
        if self.thread is None:  # the first start (the consumer restarts on a lost broker)
            log.info("serving targets", patterns=self.patterns, worker=self.hostname)
            self.poll()  # before the worker is ready: it starts on the right queues
            self.thread = threading.Thread(target=self.run, name="serve-targets", daemon=True)
            self.thread.start()
        self.apply(c)
        self.tref = c.timer.call_repeatedly(APPLY_INTERVAL, self.apply, (c,), priority=10)

    def stop(self, c: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    def shutdown(self, c: Any) -> None:
        self.stop(c)
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        try:
            # Imported here: this module loads with the worker's app, before django.setup(),
            # and the serving records are models.
            from webapp.comparisons.serving import forget_worker

            forget_worker(self.hostname)
            connection.close()
        except Exception:
            log.exception("served queues not deleted", worker=self.hostname)

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Read the targets served and record them (the database work, off the event loop);
        on a database error keep the queues as they are."""
        # Imported here: this module loads with the worker's app, before django.setup().
        from webapp.comparisons.serving import record_served, target_queues

        try:
            close_old_connections()
            wanted = set(target_queues(self.patterns))
            record_served(self.hostname, wanted)
        except Exception:
            log.exception("targets served not read: queues unchanged", worker=self.hostname)
            return
        finally:
            connection.close()  # no connection held between polls (nor inherited by a fork)
        with self.lock:
            self.wanted = wanted

    def apply(self, c: Any) -> None:
        """In the event loop: consume the wanted bench queues and cancel the others."""
        with self.lock:
            wanted = self.wanted
        if wanted is None or c.task_consumer is None:
            return
        queues = c.app.amqp.queues
        current = bench_queues(queues.consume_from)
        for queue in sorted(wanted - current):
            if queue in queues:  # declared, or consumed once: select it again
                queues.select_add(queues[queue])
            c.add_task_queue(queue)
        for queue in sorted(current - wanted):
            c.cancel_task_queue(queue)
