"""The Celery app of perf/control_plane.py's workers: the project's real app and tasks with
one part replaced, the boot. `engine.vm.runner.run_vm` becomes a stand-in that sleeps for
the simulated boot (CP_RUN_SECONDS, jitter CP_JITTER) and returns an ok RunOutcome whose
console is a real captured sync-rcu-latency console (CP_FIXTURE), its writer-duration
values scaled by one random factor per run (CP_NOISE_PCT, the boot-to-boot spread), so the
parse and the stored measurements are real work and the statistics see real variation.

Also: libvirt is never touched (the start-up clean-up of leftover domains is a no-op), and
each process appends timings to CP_TIMINGS/<pid>.jsonl: every task (prerun to postrun),
every simulated boot, record_outcome, advance and conclude_look calls. Timers wrap the
real functions through their module attributes; they change nothing else.

Start: celery -A perf._cp_standin worker ...  (the environment is set by the driver).
"""

import json
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import django
from celery.signals import task_postrun, task_prerun, worker_ready

from workers.celery_app import app

django.setup()

from engine.run import outcomes
from engine.run.console import RunOutcome
from engine.vm import runner
from engine.vm.domain import VMSpec
from webapp.comparisons import orchestrator, runs

__all__ = ["app"]

RUN_SECONDS = float(os.environ.get("CP_RUN_SECONDS", "3.5"))
JITTER = float(os.environ.get("CP_JITTER", "0.05"))
NOISE = float(os.environ.get("CP_NOISE_PCT", "1.0")) / 100
TIMINGS = Path(os.environ.get("CP_TIMINGS", "/tmp/cp-timings"))
READY = Path(os.environ.get("CP_READY", "/tmp/cp-ready"))
FIXTURE = Path(os.environ.get("CP_FIXTURE", "")).read_text() if os.environ.get("CP_FIXTURE") else ""
_DURATION = re.compile(r"(writer-duration:\s+\d+ )(\d+)")
_RUN_ID = re.compile(r"-run(\d+)-")
_POLL = 0.05  # the real runner's poll interval (engine/run/console.POLL)

_lock = threading.Lock()
_files: dict[int, Any] = {}
_started: dict[str, float] = {}


def record(kind: str, **fields: object) -> None:
    """One timing line in this process's file (threads share it under a lock)."""
    line = json.dumps({"kind": kind, "pid": os.getpid(), "thread": threading.get_ident(),
                       **fields})  # fmt: skip
    with _lock:
        pid = os.getpid()
        f = _files.get(pid)
        if f is None:
            TIMINGS.mkdir(parents=True, exist_ok=True)
            f = _files[pid] = (TIMINGS / f"{pid}.jsonl").open("a", buffering=1)
        f.write(line + "\n")


def console_for_run(rng: random.Random) -> str:
    """The captured console with its writer-duration samples scaled by one factor."""
    factor = math.exp(rng.gauss(0.0, NOISE))
    return _DURATION.sub(lambda m: f"{m.group(1)}{round(int(m.group(2)) * factor)}", FIXTURE)


def standin_run_vm(
    uri: str,
    spec: VMSpec,
    *,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None = None,
    console_max_bytes: int = 0,
    pin: bool = True,
    **_: object,  # any keyword a later run_vm adds
) -> RunOutcome:
    """As run_vm: the console file written, on_poll called every poll, an ok outcome."""
    started = time.monotonic()
    t0 = time.time()
    rng = random.Random()  # noqa: S311  (simulated boot noise)
    console = console_for_run(rng)
    wall = RUN_SECONDS * math.exp(rng.gauss(0.0, JITTER))
    while (left := wall - (time.monotonic() - started)) > 0:
        time.sleep(min(_POLL, left))
        if on_poll is not None:
            on_poll()  # heartbeat, and the cancel check every RCUBENCH_CANCEL_POLL_SECONDS
    spec.console_log.parent.mkdir(parents=True, exist_ok=True)
    spec.console_log.write_text(console)
    elapsed = time.monotonic() - started
    m = _RUN_ID.search(spec.name)
    record("boot", run=int(m.group(1)) if m else None, start=t0, end=time.time(), wall=elapsed)
    return RunOutcome(outcomes.OK, "powered off", console, elapsed, elapsed * 0.35, None)


def _timed(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            record(kind, start=t0, end=time.time())

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


runner.run_vm = standin_run_vm
runner.destroy_leftovers = lambda uri, prefix: []
runs.record_outcome = _timed("record", runs.record_outcome)
orchestrator.advance = _timed("advance", orchestrator.advance)
orchestrator.conclude_look = _timed("look", orchestrator.conclude_look)


@task_prerun.connect
def _prerun(task_id: str = "", **_: Any) -> None:
    _started[task_id] = time.time()


@task_postrun.connect
def _postrun(task_id: str = "", task: Any = None, args: Any = None, **_: Any) -> None:
    start = _started.pop(task_id, None)
    if start is not None:
        obj = args[0] if args else None
        record("task", name=getattr(task, "name", "?"), obj=obj, start=start, end=time.time())


@worker_ready.connect
def _ready(sender: Any = None, **_: Any) -> None:
    READY.mkdir(parents=True, exist_ok=True)
    (READY / str(getattr(sender, "hostname", os.getpid()))).touch()
