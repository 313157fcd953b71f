"""The run service: carry out one run on this worker (boot, benchmark, parse, store), and
end runs whose worker went silent. Called by the bench and control tasks and the admin."""

import socket
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from benchmarks import rcutrace
from benchmarks.cmdline import compose
from benchmarks.rcutrace.parser import digest
from benchmarks.rcutrace.parser import events as trace_events
from benchmarks.rcutrace.parser import parse as parse_trace
from benchmarks.rcutrace.parser import split as split_trace
from benchmarks.registry import get
from benchmarks.spec import ParseError, RunContext
from engine.build.artifacts import ArtifactError
from engine.run import outcomes, signatures
from engine.run.console import RunOutcome, clip, console_bytes
from engine.vm import runner
from engine.vm.domain import VMSpec
from engine.vm.images import ImageError, build_initramfs, busybox_for
from webapp.comparisons.consoles import console_dir
from webapp.comparisons.models import Measurement, Run
from webapp.lab.services import run_on_host
from webapp.states import Result, State, end_silent_steps, finish_step, heartbeat, log_state
from webapp.text import storable
from webapp.trees.services import kernel_image

if TYPE_CHECKING:
    from benchmarks.registry import Benchmark
    from engine.run.hostload import HostLoad

# An error message is one line of a page, not a second console.
_MESSAGE_MAX = 2000


def domain_label(target: str, run_id: int) -> str:
    """The VM's name label: the instance (RCUBENCH_INSTANCE) keeps the domains of a test
    session and of a service sharing one libvirtd apart, run ids overlapping or not."""
    return f"{settings.RCUBENCH_INSTANCE}{target}-run{run_id}"


def leftover_prefix(target: str) -> str:
    """The names of this instance's VMs of `target`, for a restarted worker to destroy."""
    return f"rcubench-{settings.RCUBENCH_INSTANCE}{target}-"


def reap_stale_runs(now: datetime | None = None) -> int:
    """Mark running runs whose worker went silent as incomplete ("lost"), never as data."""
    reaped = end_silent_steps(
        Run,
        now=now or timezone.now(),
        stale_seconds=settings.RCUBENCH_RUN_STALE_SECONDS,
        result=Result.INCOMPLETE,
        error_code=Run.Error.LOST,
    )
    return len(reaped)


def execute_run(run_id: int) -> Run | None:
    """Carry out one queued run: boot the side's kernel once in a fresh VM on this worker,
    or by kexec on a host of its lab pool (webapp/lab), run the benchmark, parse the
    console into Measurements. Returns None when the run is not queued any more (a
    duplicate delivery does nothing). Infrastructure failures are recorded with their code
    and the console, never as data."""

    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, state=State.QUEUED).update(
        state=State.RUNNING, started_at=now, heartbeat_at=now, host=socket.gethostname()
    )
    if not claimed:
        return None
    run = Run.objects.select_related("comparison__target").get(pk=run_id)
    log_state(run, State.RUNNING, comparison=run.comparison_id, host=run.host)
    comparison, target = run.comparison, run.comparison.target
    build = comparison.build_a if run.side == Run.Side.A else comparison.build_b
    extra = comparison.cmdline_a if run.side == Run.Side.A else comparison.cmdline_b
    if build is None or build.result != Result.OK or not build.artifact_dir:
        return _end_run(run, Result.INCOMPLETE, Run.Error.INFRA, f"side {run.side} has no kernel")
    bench = get(run.benchmark)
    data = Path(str(settings.RCUBENCH_DATA_DIR))
    try:
        initrd = build_initramfs(target.arch, data / "images", busybox_for(target.arch, data))
    except ImageError as exc:
        return _end_run(run, Result.INCOMPLETE, Run.Error.INFRA, str(exc))
    try:
        kernel = kernel_image(build)  # fetched from the build host when it is elsewhere
    except ArtifactError as exc:
        return _end_run(run, Result.INCOMPLETE, Run.Error.INFRA, str(exc))
    # The benchmark's own parameters win over the side's extras (which submission refuses
    # to overlap with them), whatever their origin.
    cmdline = compose(bench.spec.cmdline, extra)
    if run.traced:  # a diagnostic run: the RCU tracepoints on, dumped by rcuscale when done
        cmdline = f"{cmdline} {rcutrace.CMDLINE}"
    console_log = console_dir(run.pk) / "console.log"
    if target.is_lab:
        return _execute_on_lab(run, bench, kernel, initrd, cmdline, console_log)
    spec = VMSpec(
        name=runner.new_domain_name(domain_label(target.name, run.pk)),
        arch=target.arch,
        machine=target.machine,
        kernel=kernel,
        initrd=initrd,
        cmdline=cmdline,
        sockets=target.sockets,
        cores=target.cores,
        threads=target.threads,
        memory_mb=target.memory_mb,
        console_log=console_log,
        kvm=settings.RCUBENCH_VM_KVM,
    )
    try:
        out = runner.run_vm(
            settings.LIBVIRT_URI,
            spec,
            boot_timeout=settings.RCUBENCH_BOOT_TIMEOUT_SECONDS,
            run_timeout=settings.RCUBENCH_BENCH_TIMEOUT_SECONDS,
            on_poll=_while_running(run.pk),
            console_max_bytes=settings.RCUBENCH_CONSOLE_MAX_BYTES,
            pin=settings.RCUBENCH_VM_PIN,
        )
    except RunEnded:
        return None  # cancelled or reaped meanwhile: the VM is destroyed, nothing stored
    return record_outcome(run, bench, out)


def _execute_on_lab(
    run: Run, bench: "Benchmark", kernel: Path, initrd: Path, cmdline: str, console_log: Path
) -> Run | None:
    """The run on a host of its lab pool (webapp/lab/services.py), recorded as a VM run is."""

    ended: list[Run | None] = [None]

    def record(out: RunOutcome) -> None:
        ended[0] = record_outcome(run, bench, out)

    try:
        run_on_host(run, run.comparison.target, kernel, initrd, cmdline, console_log,
                    on_poll=_while_running(run.pk), record=record)  # fmt: skip
    except RunEnded:
        return None  # cancelled or reaped meanwhile: the host was brought back, nothing stored
    return ended[0]


def record_outcome(run: Run, bench: "Benchmark", out: RunOutcome) -> Run | None:
    """End a running run with what its boot gave: the console (storable, at most
    RCUBENCH_CONSOLE_KEEP_BYTES of it), timings, and the measurements of an ok boot whose
    console parses, else the failure with its reason. Nothing in the console (any byte, any
    length) can make this fail: a run is never lost to what its kernel printed."""

    # A traced run's dump is taken off first: the parser reads, and the page shows, the
    # console as an untraced run prints it; the trace is kept beside it for its own parser.
    cap = settings.RCUBENCH_CONSOLE_MAX_BYTES
    # The whole console, dump included, is what the cap bounds: the kernel printed all of it.
    overflowed = len(console_bytes(out.console)) > cap
    console, dump = split_trace(out.console)
    if dump is not None and trace_events(dump)[0]:
        run.trace_log = storable(clip(dump, settings.RCUBENCH_CONSOLE_KEEP_BYTES))
        run.trace_summary = _trace_digest(dump, console)
    out = replace(out, console=console)
    run.console_signatures = signatures.scan(console).as_json()
    run.console_log = storable(clip(out.console, settings.RCUBENCH_CONSOLE_KEEP_BYTES))
    run.wall_seconds, run.ready_seconds = out.wall_seconds, out.ready_seconds
    _set_host_load(run, out.host)
    outcome, reason = out.outcome, out.reason
    if outcome == outcomes.OK and overflowed:
        # The VM runner stops at the cap; any runner that did not is held to it here.
        outcome, reason = outcomes.CONSOLE_OVERFLOW, f"the console passed its cap of {cap} bytes"
    if outcome != outcomes.OK:
        result = Result.INCOMPLETE if outcome == outcomes.INFRA else Result.FAILED
        return _end_run(run, result, outcome, reason)
    try:
        parsed = bench.measure(out.console, RunContext(out.wall_seconds, out.ready_seconds))
    except ParseError as exc:
        return _end_run(run, Result.FAILED, Run.Error.PARSE_FAILED, str(exc))
    except Exception as exc:  # noqa: BLE001 -- a parser bug on hostile output fails this run only
        why = f"{bench.spec.name} parser raised {type(exc).__name__}: {exc}"
        return _end_run(run, Result.FAILED, Run.Error.PARSE_FAILED, why)
    with transaction.atomic():
        if not _end_run(run, Result.OK, "", ""):
            return None
        Measurement.objects.bulk_create(
            Measurement(
                run=run,
                benchmark=bench.spec.name,
                metric=metric.name,
                unit=metric.unit,
                samples=list(parsed[metric.name]),
            )
            for metric in bench.spec.metrics
        )
    return run


def _trace_digest(dump: str, console: str) -> dict[str, object]:
    """The trace's parse as the report reads it; a parser bug on hostile output costs the
    trace (said so), never the run."""
    try:
        return digest(parse_trace(dump, console))
    except Exception as exc:  # noqa: BLE001 -- hostile output: the run stands without it
        return {"usable": False, "error": f"{type(exc).__name__}: {exc}"[:_MESSAGE_MAX]}


def _set_host_load(run: Run, host: "HostLoad | None") -> None:
    """What else the host did during the run, and whether that makes it contended (any
    outcome: a timeout under a busy host says something too)."""
    if host is None:
        return
    run.host_busy_share, run.host_steal_share = host.busy_share, host.steal_share
    run.host_load_avg, run.pinned = host.load_avg, host.pinned
    if host.busy_share is not None:
        run.contended = host.busy_share > settings.RCUBENCH_CONTENTION_SHARE


class RunEnded(Exception):
    """The run was ended by someone else (cancelled, or reaped as lost) while it ran."""


def _while_running(run_id: int) -> "Callable[[], None]":
    """The runner's poll callback: heartbeat, and stop (RunEnded) once the run was ended
    elsewhere, so a cancelled comparison's VM is torn down within a poll interval."""
    beat = heartbeat(Run, run_id)
    every = settings.RCUBENCH_CANCEL_POLL_SECONDS
    last = time.monotonic()

    def poll() -> None:
        nonlocal last
        beat()
        if time.monotonic() - last >= every:
            last = time.monotonic()
            if not Run.objects.filter(pk=run_id, state=State.RUNNING).exists():
                raise RunEnded(run_id)

    return poll


_HOST_FIELDS = ("host_busy_share", "host_steal_share", "host_load_avg", "contended", "pinned")


def _host_context(run: Run) -> dict[str, object]:
    """The host's load for the run's log line, rounded to what it means."""
    if run.host_busy_share is None and run.host_steal_share is None:
        return {}
    busy, steal = run.host_busy_share, run.host_steal_share
    return {
        "host_busy_share": None if busy is None else round(busy, 3),
        "host_steal_share": None if steal is None else round(steal, 3),
        "host_load_avg": run.host_load_avg, "contended": run.contended, "pinned": run.pinned,
    }  # fmt: skip


def _end_run(run: Run, result: str, error_code: str, message: str) -> Run | None:
    """Record the run's end, only if it is still running: a run cancelled or reaped
    meanwhile keeps that ending (ingestion is idempotent; a late result is dropped)."""
    ended = finish_step(
        run, unfinished=(State.RUNNING,), result=result, error_code=error_code,
        error_message=storable(message)[:_MESSAGE_MAX],  # reasons quote the console
        context={"comparison": run.comparison_id, **_host_context(run)},
        console_log=run.console_log, trace_log=run.trace_log, trace_summary=run.trace_summary,
        console_signatures=run.console_signatures, wall_seconds=run.wall_seconds,
        ready_seconds=run.ready_seconds, **{f: getattr(run, f) for f in _HOST_FIELDS},
    )  # fmt: skip
    return run if ended else None
