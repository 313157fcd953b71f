"""Boot one kernel once in a fresh transient libvirt domain and watch its console.

The outcome is one of ok, boot-failed, panic, timeout, console-overflow, infra-error; the
console is kept in every case, and the domain is destroyed on every path (a transient domain
then vanishes). Whether the benchmark's output is complete is the benchmark parser's call,
not ours. What else the host did meanwhile is sampled from /proc (hostload.py) and comes
with the outcome; where the host has spare cores the guest is pinned (domain.pinning).
How the console is read and scanned is engine/run/console.py, shared with the lab runner.
"""

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

import libvirt

from engine.run.console import CONSOLE_MAX_BYTES, POLL, BootWatch, ConsoleFile, RunOutcome
from engine.run.hostload import HostMonitor
from engine.run.outcomes import BOOT_FAILED, INFRA, OK, PANIC
from engine.vm.connection import LibvirtUnavailable, open_connection
from engine.vm.domain import VMSpec, domain_xml, is_rcubench_domain, pinning


def run_vm(
    uri: str,
    spec: VMSpec,
    *,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None = None,
    console_max_bytes: int = CONSOLE_MAX_BYTES,
    pin: bool = True,
) -> RunOutcome:
    """Boot `spec`, wait until it powers off, panics, times out or floods its console past
    `console_max_bytes`; always destroy it. The host's load meanwhile is sampled from
    /proc; with `pin` and spare host cores, the guest's vCPUs and emulator are pinned."""
    spec.console_log.parent.mkdir(parents=True, exist_ok=True)
    spec.console_log.unlink(missing_ok=True)
    # Ours and readable before virtlogd opens it (the domain appends to it): a file virtlogd
    # creates itself is root's with mode 0600, unreadable to a worker that is not root (one
    # in a container: docs/compose.md).
    spec.console_log.touch(mode=0o644, exist_ok=False)
    try:
        conn = open_connection(uri)
    except LibvirtUnavailable as exc:
        return RunOutcome(INFRA, str(exc), "", 0.0, None)
    console = ConsoleFile(spec.console_log, console_max_bytes)
    # The CPUs this worker may use (its cpuset), which are the ones QEMU inherits.
    cpus = pinning(spec.cpus, os.sched_getaffinity(0)) if pin else None
    monitor = HostMonitor(spec.name)
    dom = None
    started = time.monotonic()
    try:
        try:
            dom = conn.createXML(domain_xml(spec, cpus), 0)
        except libvirt.libvirtError as exc:
            return RunOutcome(INFRA, f"libvirt refused the domain: {exc}", "", 0.0, None)
        started = time.monotonic()
        monitor.start()
        out = _watch(dom, console, started, boot_timeout, run_timeout, on_poll, monitor.poll)
        return replace(out, host=monitor.result(pinned=cpus is not None))
    except libvirt.libvirtError as exc:
        return RunOutcome(INFRA, f"libvirt: {exc}", console.finish(),
                         time.monotonic() - started, None,
                         monitor.result(pinned=cpus is not None))  # fmt: skip
    finally:
        console.close()
        if dom is not None:
            _destroy(dom)
        conn.close()


def _watch(
    dom: libvirt.virDomain,
    console: ConsoleFile,
    started: float,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None,
    sample_host: Callable[[], None],
) -> RunOutcome:
    watch = BootWatch(console, started)
    scan = console.scan
    while True:
        time.sleep(POLL)
        sample_host()  # before the checks below, which may destroy the domain
        now = time.monotonic()
        watch.see(now)
        active = _active(dom) and not scan.powered_off
        if on_poll is not None:
            on_poll()
        if ended := watch.flood():
            return watch.outcome(*ended, _settle(dom, console), now)
        if watch.fatal_at is not None and (not active or watch.panic_settled(now)):
            return watch.outcome(PANIC, scan.fatal, _settle(dom, console), now)
        if not active:
            text = console.finish()
            if scan.fatal:  # printed just before the VM stopped (panic=-1 reboots at once)
                return watch.outcome(PANIC, scan.fatal, text, now)
            if not scan.init_reached:
                why = "the VM stopped before the kernel ran init"
                return watch.outcome(BOOT_FAILED, why, text, now)
            return watch.outcome(OK, "powered off", text, now)
        if ended := watch.over_limit(now, boot_timeout, run_timeout):
            return watch.outcome(*ended, _settle(dom, console), now)


def _active(dom: libvirt.virDomain) -> bool:
    try:
        return bool(dom.isActive())
    except libvirt.libvirtError:
        return False  # a transient domain that stopped is gone


def _settle(dom: libvirt.virDomain, console: ConsoleFile) -> str:
    _destroy(dom)
    return console.finish()


def _destroy(dom: libvirt.virDomain) -> None:
    with contextlib.suppress(libvirt.libvirtError):  # already gone
        if dom.isActive():
            dom.destroy()


def new_domain_name(label: str) -> str:
    return f"rcubench-{label}-{uuid.uuid4().hex[:8]}"


def destroy_leftovers(uri: str, prefix: str) -> list[str]:
    """Destroy domains named `prefix`... that a killed worker left running; return their
    names. The prefix names one target, so a worker never touches another's domains."""
    if not is_rcubench_domain(prefix):
        raise ValueError(f"{prefix!r} is not an rcubench domain prefix")
    conn = open_connection(uri)
    gone = []
    try:
        for dom in conn.listAllDomains():
            if dom.name().startswith(prefix):
                _destroy(dom)
                with_name = dom.name()
                with contextlib.suppress(libvirt.libvirtError):  # transient: none to undefine
                    dom.undefine()
                gone.append(with_name)
    finally:
        conn.close()
    return gone
