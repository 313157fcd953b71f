"""Lab runs: check that the pool takes the comparison's kernels (webapp/lab/pools.py), claim
a host of the pool (one run per host, a comparison's runs on one hardware class), run on it
through the lab runner (engine/lab), record the run as a VM run is recorded, then bring the
host back (reprovisioned and power-cycled, on a pool that takes untrusted kernels), or
disable it with the reason when it does not come back on its known-good kernel in a new
boot.

Every host state change is one log line ("labhost state") with its name, the run and the
reason.
"""

import contextlib
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from engine.lab import runner
from engine.lab.ssh import Endpoint, answers
from engine.run.console import RunOutcome
from engine.run.outcomes import INFRA
from webapp import logs
from webapp.comparisons.models import Run, Target
from webapp.lab import pools
from webapp.lab.models import LabAssignment, LabHost
from webapp.states import heartbeat

log = logs.get(__name__)
_CLAIM_POLL = 2.0


class NoHost(Exception):
    """No enabled host can take the run (its class or the whole pool is disabled)."""


def engine_host(host: LabHost) -> runner.LabHost:
    """The runner's view of a host: how to reach, watch, power-cycle and reprovision it,
    and the known-good kernel it must come back on (the probe's; unchecked if never
    probed)."""
    pool = pools.policy(host.target)
    return runner.LabHost(
        name=host.name,
        endpoint=Endpoint(host.address, host.port, host.user, Path(host.key_file), host.host_key),
        console_command=host.console_command,
        power_command=host.power_command,
        boot_timeout=float(host.boot_timeout_seconds),
        trusted_only=pool.trusted_only,
        reprovision_command=pool.reprovision_command,
        known_good_release=host.kernel_release,
    )


def set_state(
    host: LabHost,
    state: str,
    reason: str = "",
    *,
    only_from: tuple[str, ...] = (),
    after_run: int | None = None,
    **fields: object,
) -> bool:
    """Move `host` to `state` (only from the states `only_from`, if given: an operator's
    disable while a run was on it stands); whether it moved. One log line per change, with
    the run it serves, or `after_run`, the run it served."""
    now = timezone.now()
    rows = LabHost.objects.filter(pk=host.pk)
    if only_from:
        rows = rows.filter(state__in=only_from)
    if not rows.update(state=state, state_reason=reason, state_changed_at=now,
                       heartbeat_at=now, **fields):  # fmt: skip
        return False
    host.state, host.state_reason, host.state_changed_at = state, reason, now
    for name, value in fields.items():
        setattr(host, name, value)
    ids = {k: getattr(v, "pk", v) for k, v in fields.items()}
    if after_run is not None:
        ids["run"] = after_run
    log.info("labhost state", labhost=host.name, pool=host.target_id, state=state,
             reason=reason[:300], **ids)  # fmt: skip
    return True


def enabled_hosts(target: Target) -> "list[LabHost]":
    return list(LabHost.objects.filter(target=target).exclude(state=LabHost.State.DISABLED))


def probe(host: LabHost) -> LabHost:
    """Read the host's arch, kernel and CPU topology over ssh and store them. Raises
    SSHError, or ValueError when the host does not fit its pool (arch, no kexec)."""
    found = runner.probe(engine_host(host))
    LabHost.objects.filter(pk=host.pk).update(
        probed_at=timezone.now(), **{k: found[k] for k in ("arch", "kernel_release", "cpus",
                                     "sockets", "cores", "threads", "smt_control")},
    )  # fmt: skip
    host.refresh_from_db()
    if found["arch"] != host.target.arch:
        raise ValueError(f"{host.name} is {found['arch']}, its pool {host.target} is "
                         f"{host.target.arch}")  # fmt: skip
    if not found["kexec"]:
        raise ValueError(f"{host.name} has no kexec (install kexec-tools)")
    return host


def claim(run: Run, target: Target, on_poll: Callable[[], None]) -> tuple[LabHost, bool]:
    """A free host of `target`'s pool for `run`, of the hardware class its comparison's
    runs keep to (set by its first run): marked busy with the run. Also true when the host
    was taken over from a worker that went silent mid-run (it must be power-cycled first).
    Waits up to RCUBENCH_LAB_HOST_WAIT_SECONDS; NoHost when none is enabled or none freed."""
    deadline = time.monotonic() + settings.RCUBENCH_LAB_HOST_WAIT_SECONDS
    stale = timedelta(seconds=settings.RCUBENCH_RUN_STALE_SECONDS)
    while True:
        assigned = (LabAssignment.objects.filter(comparison_id=run.comparison_id)
                    .values_list("machine_class", flat=True).first())  # fmt: skip
        pool = [h for h in enabled_hosts(target) if assigned in (None, h.machine_class)]
        if not pool:
            what = f"of class {assigned} " if assigned else ""
            raise NoHost(f"no enabled host {what}in lab pool {target.name}")
        got = _take(run, [h.pk for h in pool], stale)
        if got is not None:
            host, abandoned = got
            # IntegrityError: another run of the comparison assigned it meanwhile.
            with contextlib.suppress(IntegrityError), transaction.atomic():
                LabAssignment.objects.get_or_create(
                    comparison_id=run.comparison_id,
                    defaults={"machine_class": host.machine_class},
                )
            mine = LabAssignment.objects.get(comparison_id=run.comparison_id).machine_class
            if mine == host.machine_class:
                return host, abandoned
            release(host)  # a race with a sibling run on another class: try again
            continue
        if time.monotonic() > deadline:
            raise NoHost(f"no host of lab pool {target.name} was free within "
                         f"{settings.RCUBENCH_LAB_HOST_WAIT_SECONDS} s")  # fmt: skip
        on_poll()
        time.sleep(_CLAIM_POLL)


def _take(run: Run, pks: list[int], stale: timedelta) -> tuple[LabHost, bool] | None:
    """Mark one of `pks` busy with `run`: an available host (the one idle longest), else
    one whose worker went silent while it was busy or recovering."""
    silent = Q(state__in=[LabHost.State.BUSY, LabHost.State.RECOVERING],
               heartbeat_at__lt=timezone.now() - stale)  # fmt: skip
    with transaction.atomic():
        host = (LabHost.objects.select_for_update(skip_locked=True)
                .filter(Q(state=LabHost.State.AVAILABLE) | silent, pk__in=pks)
                .order_by("state_changed_at", "pk").first())  # fmt: skip
        if host is None:
            return None
        abandoned = host.state != LabHost.State.AVAILABLE
        why = f"taken over from a silent worker (was {host.state})" if abandoned else ""
        set_state(host, LabHost.State.BUSY, why, run=run)
    return host, abandoned


_HELD = (LabHost.State.BUSY, LabHost.State.RECOVERING)


def release(host: LabHost) -> None:
    """The run is over and the host is back: available, unless disabled meanwhile."""
    set_state(host, LabHost.State.AVAILABLE, run=None, only_from=_HELD)


def disable(host: LabHost, reason: str) -> None:
    set_state(host, LabHost.State.DISABLED, reason, run=None)


def enable(host: LabHost) -> None:
    """An operator's "back in service" after a repair."""
    set_state(host, LabHost.State.AVAILABLE, run=None, only_from=(LabHost.State.DISABLED,))


def lab_cmdline(host: LabHost, cmdline: str) -> str:
    """The kernel command line on `host`: its console, a restart on panic, and the guest
    init told to restart at the end (a reset brings back the known-good kernel) instead of
    powering off, which would need the power command; then the benchmark's."""
    return f"console={host.console_device} panic=-1 rcubench.end=reboot {cmdline}".strip()


def run_on_host(
    run: Run,
    target: Target,
    kernel: Path,
    initrd: Path,
    cmdline: str,
    console_log: Path,
    *,
    on_poll: Callable[[], None],
    record: Callable[[RunOutcome], None],
) -> None:
    """Claim a host, boot `kernel` on it with the benchmark's `cmdline`, `record` the
    outcome, bring the host back. A cancel or reap while the kernel runs (on_poll raises)
    still brings the host back. A comparison the pool no longer takes (made trusted-only
    since it was queued) takes no host."""
    if why := pools.comparison_refusal(run.comparison):
        record(RunOutcome(INFRA, why, "", 0.0, None))
        return
    try:
        host, abandoned = claim(run, target, on_poll)
    except NoHost as exc:
        record(RunOutcome(INFRA, str(exc), "", 0.0, None))
        return
    Run.objects.filter(pk=run.pk).update(host=host.name)
    run.host = host.name
    engine = engine_host(host)
    beat = heartbeat(LabHost, host.pk)  # while the host is held, so a silent worker's is found
    job = runner.LabJob(kernel, initrd, lab_cmdline(host, cmdline), console_log)
    if abandoned and not _restore(host, "hung", beat, run.pk):
        record(RunOutcome(INFRA, f"lab host {host.name} did not come back: "
                          f"{host.state_reason}", "", 0.0, None))  # fmt: skip
        return

    def poll() -> None:
        beat()
        on_poll()

    def booted_as(boot_id: str) -> None:  # kept on the row: a takeover checks it too
        LabHost.objects.filter(pk=host.pk).update(boot_id=boot_id)

    lab: runner.LabRun | None = None
    try:
        lab = runner.run_lab(
            engine, job, boot_timeout=settings.RCUBENCH_BOOT_TIMEOUT_SECONDS,
            run_timeout=settings.RCUBENCH_BENCH_TIMEOUT_SECONDS, on_poll=poll,
            on_boot_id=booted_as, console_max_bytes=settings.RCUBENCH_CONSOLE_MAX_BYTES,
        )  # fmt: skip
        record(lab.outcome)
    finally:
        # No ending when on_poll raised mid-run (cancelled, reaped): the kernel under test
        # may still run, so the host is power-cycled like a hung one.
        ending = lab.ending if lab is not None else "hung"
        started = time.monotonic()
        returned = _restore(host, ending, beat, run.pk)
        phases = {k: round(v, 2) for k, v in vars(lab.phases).items()} if lab else {}
        log.info("lab run phases", run=run.pk, labhost=host.name, ending=ending,
                 returned=returned, restore=round(time.monotonic() - started, 2),
                 **phases)  # fmt: skip


def _restore(host: LabHost, ending: str, beat: Callable[[], None], run_pk: int) -> bool:
    """Bring the host back after run `run_pk`; release it, or disable it with the reason.
    On a trusted-only pool, a run that never reached kexec -e left the host as it was,
    unless it could not reach it; a pool that takes untrusted kernels reprovisions and
    power-cycles the host after every run. The host must come back in a new boot (its
    boot id read before kexec, kept on the row, changed) on its known-good kernel. The
    host's settings are read again first: an operator's fix of its power command or boot
    timeout during the run applies to this recovery."""
    host.refresh_from_db()
    engine = engine_host(host)
    if engine.trusted_only and ending == "not-started" and answers(engine.endpoint):
        release(host)
        return True

    def recovering(attempt: int, why: str) -> None:
        set_state(host, LabHost.State.RECOVERING, f"power cycle {attempt}: {why}",
                  only_from=_HELD, after_run=run_pk)  # fmt: skip

    restored = runner.restore(
        engine, "hung" if ending == "not-started" else ending, boot_id=host.boot_id,
        tries=settings.RCUBENCH_LAB_RECOVERY_TRIES, on_recovering=recovering, on_poll=beat,
    )  # fmt: skip
    if not restored.returned:
        set_state(host, LabHost.State.DISABLED, restored.reason, run=None, only_from=_HELD,
                  after_run=run_pk)  # fmt: skip
        return False
    release(host)
    return True
